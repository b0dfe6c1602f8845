"""``--mount SRC[:DST]`` and ``--gather REMOTE:LOCAL`` of ``%job apply --local``: parsing, the
default mount point, and the fields of the saved attr that say them again.

A mount is kept as plain data (:class:`Mount`), absolute paths only, so the saved spec means
the same job from any folder (``monarch apply`` in a terminal). In the saved attr each mount is
one ``__`` field, ``mount_<SRC>[X3a<DST>]`` or ``gather_<REMOTE>X3a<LOCAL>``, each path written
with :func:`encode` (letters and digits kept, every other byte as ``X`` and two hex digits), so
a field never holds ``_`` and never looks like a mesh (``mount_2`` is a mesh of 2 hosts).

Pure code: no Monarch import.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass

from ...errors import SpecError

MOUNT = "mount"
GATHER = "gather"
#: Monarch's token in a worker path: each host's mesh coordinates (``hosts_0``).
SUBDIR = "$SUBDIR"
_ESC = "X"
_SEP = _ESC + "3a"  # ':' encoded; paths may not hold ':' (it separates SRC and DST)


@dataclass(frozen=True)
class Mount:
    """One ``--mount`` (this machine's ``source`` on every worker at ``target``; None: Monarch's
    default) or ``--gather`` (every worker's ``source`` read-only at ``target`` here)."""

    kind: str  # MOUNT or GATHER
    source: str
    target: str | None = None

    def describe(self) -> str:
        """The flag as ``%job apply`` takes it."""
        value = self.source if self.target is None else f"{self.source}:{self.target}"
        return f"--{self.kind} {value}"

    def field(self) -> str:
        """This mount as one field of the saved attr."""
        value = encode(self.source) + ("" if self.target is None else _SEP + encode(self.target))
        return f"{self.kind}_{value}"


def encode(path: str) -> str:
    """``/work/nb`` → ``X2fworkX2fnb``: ASCII letters and digits kept (but ``X``), other bytes escaped."""
    out: list[str] = []
    for byte in path.encode():
        char = chr(byte)
        out.append(char if char.isascii() and char.isalnum() and char != _ESC else f"{_ESC}{byte:02x}")
    return "".join(out)


def decode(text: str) -> str:
    """Inverse of :func:`encode`; ValueError for text it did not write."""
    raw = bytearray()
    i = 0
    while i < len(text):
        char = text[i]
        if char == _ESC:
            pair = text[i + 1 : i + 3]
            if len(pair) != 2 or any(c not in "0123456789abcdef" for c in pair):
                raise ValueError(text)
            raw.append(int(pair, 16))
            i += 3
        elif char.isascii() and char.isalnum():
            raw.append(ord(char))
            i += 1
        else:
            raise ValueError(text)
    return raw.decode()


def from_field(field: str) -> Mount | None:
    """The mount a saved attr field says, or None when it is not a mount field."""
    kind, sep, value = field.partition("_")
    if not sep or kind not in (MOUNT, GATHER) or not value.startswith(encode("/")):
        return None
    source, _, target = value.partition(_SEP)
    try:
        mount = Mount(kind, decode(source), decode(target) if target else None)
    except ValueError:
        return None
    return mount if (mount.kind == MOUNT or mount.target is not None) else None


def parse(kind: str, value: str, root: str) -> Mount:
    """``--mount SRC[:DST]`` / ``--gather REMOTE:LOCAL`` as typed; paths on this machine
    (SRC, LOCAL) are made absolute against ``root``, worker paths must be absolute."""
    if not value:
        raise SpecError(f"--{kind} wants a path: {_usage(kind)}")
    first, sep, second = value.partition(":")
    if ":" in second:
        raise SpecError(f"--{kind} {value}: a path may not hold ':' ({_usage(kind)})")
    if kind == MOUNT:
        source = _here(first, root, kind)
        target = _worker(second, kind) if sep else None
        return Mount(MOUNT, source, target)
    if not sep or not first or not second:
        raise SpecError(f"--gather wants REMOTE:LOCAL, got {value!r} ({_usage(kind)})")
    return Mount(GATHER, _worker(first, kind), _here(second, root, kind))


def _usage(kind: str) -> str:
    if kind == MOUNT:
        return "--mount SRC[:DST], e.g. --mount .  (this folder on every worker)"
    return "--gather REMOTE:LOCAL, e.g. --gather /tmp/out/$SUBDIR:./gathered"


def _here(path: str, root: str, kind: str) -> str:
    if not path:
        raise SpecError(f"--{kind}: the path on this machine is empty ({_usage(kind)})")
    return os.path.normpath(os.path.join(root, os.path.expanduser(path)))


def _worker(path: str, kind: str) -> str:
    if not path.startswith("/"):
        raise SpecError(f"--{kind}: the worker path {path!r} must be absolute ({_usage(kind)})")
    return os.path.normpath(path)


def local_target(mount: Mount) -> str:
    """Where a ``--local`` job's workers see ``mount`` (a ``--mount``): its DST, else a folder of
    its own per host under this user's temp folder. Local workers share this machine, so the
    default (the source itself) would hide the source under its own mount."""
    if mount.target is not None:
        return mount.target
    digest = hashlib.sha1(mount.source.encode()).hexdigest()[:8]
    name = os.path.basename(mount.source.rstrip("/")) or "root"
    return os.path.join(mounts_root(), f"{name}-{digest}", SUBDIR)


def mounts_root() -> str:
    """This user's folder of default mount points (``$TMPDIR/monarch_jupyter-<uid>/mounts``)."""
    return os.path.join(tempfile.gettempdir(), f"monarch_jupyter-{os.getuid()}", "mounts")


def check_local(mounts: tuple[Mount, ...]) -> None:
    """SpecError (one line) for mounts a ``--local`` job cannot have: a mount point inside its
    source or over it (the workers share this machine), the same mount point twice."""
    seen: set[str] = set()
    for mount in mounts:
        here, there = (
            (mount.source, local_target(mount)) if mount.kind == MOUNT else (mount.target, mount.source)
        )
        assert here is not None  # a gather always has its LOCAL
        base = there.split(SUBDIR)[0].rstrip("/") or "/"
        if _within(base, here) or _within(here, base):
            raise SpecError(
                f"{mount.describe()}: on a --local job the workers share this machine, so the "
                "path on the workers and the path here must not contain each other"
            )
        target = local_target(mount) if mount.kind == MOUNT else here
        if target in seen:
            raise SpecError(f"{mount.describe()}: {target} is mounted twice")
        seen.add(target)


def _within(path: str, folder: str) -> bool:
    folder = folder.rstrip("/") or "/"
    return path == folder or path.startswith(folder.rstrip("/") + "/")
