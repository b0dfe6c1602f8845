"""The one dispatcher: ``%job apply``'s words, or a saved spec's text, to a Spec.

Pure code: no Monarch import.
"""

from __future__ import annotations

import os
import shlex

from ...errors import SpecError
from . import local, ssh
from .base import DOTTED, IDENT, LOCAL_JOBS_MODULE, SERVICE_NAMES, ModuleSpec, Spec, VariableSpec
from .mounts import GATHER, MOUNT, Mount
from .mounts import parse as parse_mount


def parse_apply(line: str, root: str | None = None) -> Spec | None:
    """Parse the arguments of ``%job apply``; None means "the saved spec". Relative paths of
    ``--mount`` / ``--gather`` are taken from ``root`` (default: the current directory)."""
    try:
        words = shlex.split(line)
    except ValueError as error:
        raise SpecError(f"cannot parse {line!r}: {error}") from None
    if not words:
        return None
    words, mounts = _take_mounts(words, root or os.getcwd())
    if mounts:
        kind = mounts[0].kind
        _local_only(words, kind, f"job.{'remote_mount' if kind == MOUNT else 'gather_mount'}(...)")
    services = tuple(word[2:] for word in words if word[2:] in SERVICE_NAMES and word.startswith("--"))
    words = [word for word in words if not (word.startswith("--") and word[2:] in SERVICE_NAMES)]
    if services:
        _local_only(words, services[0], f"job.enable_{services[0]}()")
    first, rest = words[0], words[1:]
    if first == "--ssh" or first.startswith("--ssh="):
        return ssh.parse(words)
    if first == "--local" or first.startswith("--local="):
        return _local(first, rest, services, mounts)
    if first.startswith("-"):
        raise SpecError(
            f"unknown option {first!r}: %job apply takes --local MESH=N, --ssh MESH=HOSTS, module.attr or a variable name"
        )
    if rest:
        raise SpecError(f"unexpected words after the spec: {' '.join(rest)!r}")
    if DOTTED.match(first):
        return ModuleSpec(first)
    if IDENT.match(first):
        return VariableSpec(first)
    raise SpecError(f"{first!r} is not a spec: give --local MESH=N, module.attr or a variable name")


def _local(first: str, rest: list[str], services: tuple[str, ...], mounts: tuple[Mount, ...]) -> Spec:
    value = first.partition("=")[2] if "=" in first else " ".join(rest)
    if first != "--local" and rest:
        raise SpecError(f"unexpected words after the spec: {' '.join(rest)!r}")
    return local.parse_meshes(value, services, mounts)


def _local_only(words: list[str], flag: str, call: str) -> None:
    """SpecError unless the spec is ``--local``: ``--FLAG`` belongs to it, another job says ``call``."""
    if not (words and (words[0] == "--local" or words[0].startswith("--local="))):
        raise SpecError(
            f"--{flag} goes with --local MESH=N; for another job call {call} where the job is built"
        )


def _take_mounts(words: list[str], root: str) -> tuple[list[str], tuple[Mount, ...]]:
    """The words without their ``--mount V`` / ``--mount=V`` / ``--gather V`` pairs, and those mounts."""
    kept: list[str] = []
    found: list[Mount] = []
    items = iter(words)
    for word in items:
        flag, eq, value = word.partition("=")
        kind = flag[2:] if flag in ("--" + MOUNT, "--" + GATHER) else None
        if kind is None:
            kept.append(word)
            continue
        if not eq:
            value = next(items, "")
        found.append(parse_mount(kind, value, root))
    return kept, tuple(found)


def spec_from_saved(text: str) -> Spec:
    """The saved ``spec`` file text as a Spec (local and ssh paths become their own kinds)."""
    prefix = LOCAL_JOBS_MODULE + "."
    if text.startswith(prefix):
        try:
            spec = local.from_attr(text[len(prefix) :], bounded=False)
        except AttributeError:
            pass
        else:
            local.check_total(dict(spec.meshes))
            return spec
    if text.startswith(ssh.SSH_JOBS_MODULE + "."):
        try:
            return ssh.from_attr(text.rpartition(".")[2])
        except AttributeError:
            pass
    if not DOTTED.match(text):
        raise SpecError(f"the saved spec {text!r} is not a module.attr path")
    return ModuleSpec(text)
