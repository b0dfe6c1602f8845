"""The one dispatcher: ``%job apply``'s words, or a saved spec's text, to a Spec.

Pure code: no Monarch import.
"""

from __future__ import annotations

import shlex

from ..errors import SpecError
from . import local, ssh
from .base import DOTTED, IDENT, LOCAL_JOBS_MODULE, SERVICE_NAMES, LocalSpec, ModuleSpec, Spec, VariableSpec


def parse_apply(line: str) -> Spec | None:
    """Parse the arguments of ``%job apply``; None means "the saved spec"."""
    try:
        words = shlex.split(line)
    except ValueError as error:
        raise SpecError(f"cannot parse {line!r}: {error}") from None
    if not words:
        return None
    services = tuple(word[2:] for word in words if word[2:] in SERVICE_NAMES and word.startswith("--"))
    words = [word for word in words if not (word.startswith("--") and word[2:] in SERVICE_NAMES)]
    if services and not (words and (words[0] == "--local" or words[0].startswith("--local="))):
        raise SpecError(
            f"--{services[0]} goes with --local MESH=N; for another job call "
            f"job.enable_{services[0]}() where the job is built"
        )
    first, rest = words[0], words[1:]
    if first == "--ssh" or first.startswith("--ssh="):
        return ssh.parse(words)
    if first == "--local" or first.startswith("--local="):
        value = first.partition("=")[2] if "=" in first else " ".join(rest)
        if first == "--local":
            rest = []
        if rest:
            raise SpecError(f"unexpected words after the spec: {' '.join(rest)!r}")
        return local.parse_meshes(value, services)
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


def spec_from_saved(text: str) -> Spec:
    """The saved ``spec`` file text as a Spec (local and ssh paths become their own kinds)."""
    prefix = LOCAL_JOBS_MODULE + "."
    if text.startswith(prefix):
        try:
            attr, services = local.split_services(text[len(prefix) :])
            meshes = local.parse_local_attr(attr, bounded=False)
        except AttributeError:
            pass
        else:
            local.check_total(meshes)
            return LocalSpec(tuple(meshes.items()), services)
    if text.startswith(ssh.SSH_JOBS_MODULE + "."):
        try:
            return ssh.from_attr(text.rpartition(".")[2])
        except AttributeError:
            pass
    if not DOTTED.match(text):
        raise SpecError(f"the saved spec {text!r} is not a module.attr path")
    return ModuleSpec(text)
