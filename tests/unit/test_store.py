from monarch_jupyter.jobs.contexts import Layout
from monarch_jupyter.jobs.store import JobStore


def test_store_saves_loads_and_stamps_a_context(tmp_path):
    from monarch.job import ProcessJob

    store = JobStore(Layout(tmp_path))
    assert store.load() is None and store.stamp() is None
    store.save("default", ProcessJob({"hosts": 2}), "monarch_jupyter.local_jobs.hosts_2")
    stamp = store.stamp()
    assert stamp is not None
    assert store.state_path() == tmp_path / ".monarch/default/state.pkl"
    assert type(store.load()).__name__ == "ProcessJob"
    assert store.saved_spec("default") == "monarch_jupyter.local_jobs.hosts_2"
    store.save("default", ProcessJob({"hosts": 1}), None)
    assert store.stamp() != stamp and store.saved_spec("default") is None
    store.remove("default")
    assert store.load() is None and store.stamp() is None


def test_fingerprint_moves_with_the_context_and_its_cache(tmp_path):
    from fake_jobs import FakeJob
    from monarch_jupyter.jobs.store import fingerprint

    layout = Layout(tmp_path)
    store = JobStore(layout)
    root = str(tmp_path)
    seen = [fingerprint(root)]
    assert fingerprint(root) == seen[0]  # nothing there, nothing moves
    store.save("default", FakeJob("a"), None)
    seen.append(fingerprint(root))
    assert fingerprint(root) == seen[-1]
    for change in (
        lambda: store.save("default", FakeJob("b"), None),  # another apply replaced the cache
        lambda: layout.use("exp"),  # a context switch (no cache there)
        lambda: store.save("exp", FakeJob("c"), None),  # a cache in the new context
        lambda: layout.use("default"),  # back: the link is a new one
        lambda: store.remove("default"),  # monarch kill
    ):
        change()
        now = fingerprint(root)
        assert now not in seen, change
        seen.append(now)
    (tmp_path / ".monarch" / "job_state.pkl").unlink()  # no link: the default context's file counts
    store.save("default", FakeJob("d"), None)
    assert fingerprint(root) not in seen
