from monarch_jupyter.jobs.attachment import Attachment


def test_attachment_holds_while_folder_context_and_cache_are_the_same():
    a = Attachment()
    assert not a.connected
    a.remember("job", "state", ("/nb", "default"), (1, 100))
    a.label = "--local hosts=2"
    a.forget_unless(("/nb", "default"), (1, 100))
    assert (a.job, a.state, a.label) == ("job", "state", "--local hosts=2")


def test_attachment_lapses_on_cd_context_switch_or_foreign_cache_change():
    for where, stamp in [
        (("/other", "default"), (1, 100)),  # %cd
        (("/nb", "exp"), (1, 100)),  # %job context use / monarch context use
        (("/nb", "default"), (2, 100)),  # the cache replaced by another apply
        (("/nb", "default"), None),  # the cache removed by `monarch kill`
    ]:
        a = Attachment()
        a.remember("job", "state", ("/nb", "default"), (1, 100))
        a.label = "x"
        a.forget_unless(where, stamp)
        assert (a.connected, a.state, a.label) == (False, None, None), (where, stamp)
