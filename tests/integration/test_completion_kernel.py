"""Tab completion in a real kernel: ``complete_request`` over jupyter_client, with a real
local job for the mesh names and the run ids."""

from __future__ import annotations

from harness import Kernel


def complete(kernel: Kernel, code: str) -> tuple[list[str], str]:
    """The kernel's matches for ``code`` (cursor at its end) and the text they replace."""
    msg_id = kernel.kc.complete(code, len(code))
    while True:
        reply = kernel.kc.get_shell_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == msg_id:
            content = reply["content"]
            assert content["status"] == "ok", content
            return content["matches"], code[content["cursor_start"] : content["cursor_end"]]


def test_complete_request(kernel: Kernel) -> None:
    (kernel.cwd / "myjobs.py").write_text("from monarch_jupyter.local_jobs import hosts_2\nsmall = hosts_2\n")
    kernel.ok("%job context create quickstart")
    assert complete(kernel, "%job con") == (["context"], "con")
    assert complete(kernel, "%job context use q") == (["quickstart"], "q")
    assert complete(kernel, "%job apply myjobs.sm") == (["myjobs.small"], "myjobs.sm")
    matches, _ = complete(kernel, "%%remote --")
    assert "--per-host" in matches and "--mesh" in matches
    assert "--per-host" not in complete(kernel, "%%remote bash\necho --")[0]  # flags: the first line only

    kernel.ok("%job apply --local trainers=1", timeout=180)
    run = kernel.ok("%remote --detach sleep 30").stream()
    assert complete(kernel, "%%remote --mesh tr") == (["trainers"], "tr")
    matches, fragment = complete(kernel, "%remote attach ")
    assert fragment == "" and matches and matches[0] in run, (matches, run)
    assert complete(kernel, "%remote sto") == (["stop"], "sto")
    kernel.ok("%remote stop --all")
