"""``--mount`` / ``--gather``: the flags, their saved fields, the local rules, the missing-FUSE
line and Monarch's mount failure in one line (no workers, no FUSE needed)."""

from __future__ import annotations

import os

import pytest

from monarch_jupyter.errors import SpecError
from monarch_jupyter.jobs.services import mounts
from monarch_jupyter.jobs.specs.base import LocalSpec
from monarch_jupyter.jobs.specs.local import from_attr
from monarch_jupyter.jobs.specs.mounts import GATHER, MOUNT, Mount, decode, encode, from_field, local_target
from monarch_jupyter.jobs.specs.parse import parse_apply, spec_from_saved

ROOT = "/work/nb"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("--local hosts=2 --mount .", (Mount(MOUNT, ROOT),)),
        ("--local hosts=2 --mount=sub/dir", (Mount(MOUNT, f"{ROOT}/sub/dir"),)),
        ("--mount /data:/mnt/data/$SUBDIR --local hosts=1", (Mount(MOUNT, "/data", "/mnt/data/$SUBDIR"),)),
        (
            "--local hosts=2 --gather /tmp/out/$SUBDIR:./gathered --telemetry",
            (Mount(GATHER, "/tmp/out/$SUBDIR", f"{ROOT}/gathered"),),
        ),
        (
            "--local hosts=2 --mount ~/code --gather /o:/g",
            (Mount(MOUNT, os.path.expanduser("~/code")), Mount(GATHER, "/o", "/g")),
        ),
    ],
)
def test_flags_round_trip_through_the_saved_spec(line: str, expected: tuple[Mount, ...]) -> None:
    spec = parse_apply(line, ROOT)
    assert isinstance(spec, LocalSpec)
    assert spec.mounts == expected
    attr = spec.path.rpartition(".")[2]
    assert attr.isidentifier() and "." not in attr, attr  # what `monarch apply` imports
    assert spec_from_saved(spec.path) == spec
    assert parse_apply(spec.describe(), "/elsewhere") == spec  # absolute paths: the same from any folder


def test_saved_fields_are_letters_digits_and_never_a_mesh() -> None:
    assert encode("/work/my nb_X") == "X2fworkX2fmyX20nbX5fX58"
    for path in ("/work/my nb_X", "/tmp/$SUBDIR", "/ü/ñ"):
        assert decode(encode(path)) == path
    spec = parse_apply("--local mount=2,gather=1 --mount /a", ROOT)
    assert isinstance(spec, LocalSpec)
    assert spec.path.endswith(".mount_2__gather_1__mount_X2fa")
    assert from_attr("mount_2__gather_1__mount_X2fa") == spec
    assert from_field("mount_2") is None and from_field("gather_X2fa") is None  # a gather needs LOCAL
    with pytest.raises(ValueError):
        decode("X2")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--local hosts=2 --mount", "--mount wants a path"),
        ("--local hosts=2 --mount .:relative", "must be absolute"),
        ("--local hosts=2 --gather /x", "--gather wants REMOTE:LOCAL"),
        ("--local hosts=2 --gather x:/here", "must be absolute"),
        ("--local hosts=2 --mount /a:/b:/c", "may not hold ':'"),
        ("mymod.job --mount .", r"--mount goes with --local MESH=N; .*job.remote_mount\(\.\.\.\)"),
        ("--gather /a:/b", r"job.gather_mount\(\.\.\.\)"),
        ("--local hosts=1 --mount /a:/a/mnt", "must not contain each other"),
        ("--local hosts=1 --mount /a/b:/a", "must not contain each other"),
        ("--local hosts=1 --gather /out/$SUBDIR:/out", "must not contain each other"),
        ("--local hosts=1 --mount /a:/m --mount /b:/m", "mounted twice"),
    ],
)
def test_bad_mount_flags_are_one_line(line: str, message: str) -> None:
    with pytest.raises(SpecError, match=message) as caught:
        parse_apply(line, ROOT)
    assert "\n" not in str(caught.value)


def test_a_local_mount_defaults_to_a_folder_per_host_outside_the_source() -> None:
    target = local_target(Mount(MOUNT, ROOT))
    assert target.endswith("/$SUBDIR") and f"monarch_jupyter-{os.getuid()}/mounts/nb-" in target
    assert not target.startswith(ROOT + "/")
    assert local_target(Mount(MOUNT, ROOT, "/mnt/x")) == "/mnt/x"


def test_missing_fuse_says_what_to_install(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(mounts, "FUSE_DEVICE", str(tmp_path / "no-fuse"))
    line = mounts.fuse_missing()
    assert line is not None and "no-fuse is missing" in line and "--device /dev/fuse" in line
    monkeypatch.setattr(mounts, "FUSE_DEVICE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    line = mounts.fuse_missing()
    assert (
        line
        == "mounts need FUSE's fusermount3, not found on PATH: install it (Debian/Ubuntu: apt-get install fuse3)"
    )
    with pytest.raises(SpecError, match="apt-get install fuse3"):
        mounts.configure(object(), (Mount(MOUNT, str(tmp_path)),))


# What Monarch 0.7 raises from job.state() when fusermount3 is missing (trimmed).
MONARCH_NO_FUSERMOUNT = (
    "job sidecar failed to open or refresh job mounts:\nTraceback (most recent call last):\n"
    '  File ".../job_sidecar.py", line 321, in _run_job_sidecar\n'
    "monarch._src.actor.actor_mesh.ActorError: Actor call FUSEActor.mount failed.\n"
    "RuntimeError: fuse mount failed: find fusermount3 binary failed CannotFindBinaryPath\n\n\n"
)


def test_monarchs_mount_failure_is_one_line() -> None:
    line = mounts.explain(RuntimeError(MONARCH_NO_FUSERMOUNT))
    assert line == "the job's mounts failed: fusermount3 was not found where they mount (install fuse3 there)"
    busy = "job sidecar failed to clear job mounts:\nTraceback...\nRuntimeError: failed to close 1 mount(s): remote mount '/m'\n"
    assert (
        mounts.explain(RuntimeError(busy))
        == "the job's mounts failed: RuntimeError: failed to close 1 mount(s): remote mount '/m'"
    )
    assert mounts.explain(RuntimeError("something else")) is None


def test_a_users_job_is_saved_when_its_mounts_can_be_said(tmp_path) -> None:
    from monarch.job import ProcessJob

    from monarch_jupyter.jobs.resolve import saved_path_for

    src = str(tmp_path)
    job = ProcessJob({"hosts": 1})
    job.remote_mount(src, mntpoint="/mnt/x/$SUBDIR", python_exe=None)
    job.gather_mount("/out/$SUBDIR", "/g")
    path = saved_path_for(job)
    assert path is not None
    assert spec_from_saved(path) == LocalSpec(
        (("hosts", 1),), (), (Mount(MOUNT, src, "/mnt/x/$SUBDIR"), Mount(GATHER, "/out/$SUBDIR", "/g"))
    )
    default = ProcessJob({"hosts": 1})
    default.remote_mount(src, python_exe=None)  # Monarch's mount point: the source itself, here
    assert saved_path_for(default) is None
    some = ProcessJob({"hosts": 1, "b": 1})
    some.remote_mount(src, mntpoint="/mnt/y", meshes=["b"], python_exe=None)
    assert saved_path_for(some) is None


def test_the_mount_points_this_machine_holds(monkeypatch) -> None:
    from monarch.job import ProcessJob

    job = ProcessJob({"hosts": 2})
    job.remote_mount("/", mntpoint="/m/nb/$SUBDIR", python_exe=None)
    job.gather_mount("/out/$SUBDIR", "/g")
    points = ["/m/nb/hosts_0", "/m/nb/hosts_1", "/m/nb/a/b", "/m/nbx", "/g", "/g/hosts", "/other"]
    monkeypatch.setattr(mounts, "fuse_points", lambda: points)
    assert mounts.here(job, workers_local=True) == ["/m/nb/hosts_0", "/m/nb/hosts_1", "/g", "/g/hosts"]
    assert mounts.here(job, workers_local=False) == ["/g", "/g/hosts"]
    assert mounts.lines(job) == ["/ → workers' /m/nb/$SUBDIR", "workers' /out/$SUBDIR → /g (read-only)"]


class _BusyJob:
    """Monarch's kill of a job whose mount is busy: the sidecar's error, until it is unmounted."""

    def __init__(self, busy_kills: int) -> None:
        self.busy_kills = busy_kills
        self.kills = 0

    def kill(self) -> None:
        self.kills += 1
        if self.kills <= self.busy_kills:
            raise RuntimeError(
                "job sidecar failed to clear job mounts:\nTraceback (most recent call last):\n  ...\n"
                "RuntimeError: failed to close 1 mount(s): remote mount '/m/$SUBDIR'\n"
            )


def test_a_busy_mount_is_unmounted_lazily_and_the_kill_asked_again(monkeypatch) -> None:
    from monarch_jupyter.jobs import lifecycle

    unmounted: list[list[str]] = []
    monkeypatch.setattr(mounts, "here", lambda job, local: ["/m/hosts_0"])
    monkeypatch.setattr(mounts, "unmount_lazily", lambda points: unmounted.append(points) or points)
    job = _BusyJob(busy_kills=1)
    assert lifecycle.kill_error(job) is None
    assert job.kills == 2 and unmounted == [["/m/hosts_0"]]

    monkeypatch.setattr(mounts, "here", lambda job, local: [])  # nothing here to unmount (remote workers)
    stuck = _BusyJob(busy_kills=5)
    line = lifecycle.kill_error(stuck)
    assert (
        line == "the job's mounts failed: RuntimeError: failed to close 1 mount(s): remote mount '/m/$SUBDIR'"
    )
    assert stuck.kills == 1


def test_the_default_mount_folder_is_private_or_refused(monkeypatch, tmp_path) -> None:
    from monarch_jupyter.jobs.specs import mounts as flags

    monkeypatch.setattr(flags.tempfile, "gettempdir", lambda: str(tmp_path))
    root = mounts.private_root()
    assert root == str(tmp_path / f"monarch_jupyter-{os.getuid()}" / "mounts")
    assert os.stat(os.path.dirname(root)).st_mode & 0o777 == 0o700
    assert mounts.private_root() == root  # again: already there
    other = tmp_path / "elsewhere"
    other.mkdir()
    (tmp_path / f"monarch_jupyter-{os.getuid()}").rename(tmp_path / "old")
    (tmp_path / f"monarch_jupyter-{os.getuid()}").symlink_to(other)
    with pytest.raises(SpecError, match="is not a private folder of yours"):
        mounts.private_root()
