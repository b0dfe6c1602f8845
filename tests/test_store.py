from monarch_jupyter.contexts import Layout
from monarch_jupyter.store import JobStore


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
