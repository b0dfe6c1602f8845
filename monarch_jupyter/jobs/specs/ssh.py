"""``%job apply --ssh MESH=H1,H2 [--python PATH] [--port N] [--config FILE]``: parsing and naming.

For hosts already in the user's ssh config. The spec is saved as an importable
path ``monarch_jupyter.ssh_jobs.<attr>`` (like ``--local``), so a bare
``%job apply`` and the ``monarch`` CLI re-create the same ``SSHJob``. The attr
encodes every field readably: letters and digits stay, any other character is
``x`` + two hex digits (``x`` itself is ``x78``), fields are joined by ``__``::

    ssh__py_python3__port_22222__m_hosts_127x2e0x2e0x2e2_127x2e0x2e0x2e3

A mesh name follows the rule of ``--local`` (:func:`.base.is_mesh_name`); one with a
``_`` is saved escaped, under ``me_`` instead of ``m_`` (a name without one keeps the
plain form, so paths saved before stay as they were).

Pure code: no Monarch import.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...errors import SpecError
from .base import ModuleSpec, check_mesh_name, is_count, is_mesh_name

SSH_JOBS_MODULE = "monarch_jupyter.ssh_jobs"
DEFAULT_PYTHON = "python3"
DEFAULT_PORT = 22222
_PLAIN = re.compile(r"[A-Za-z0-9]")


def _escape(text: str) -> str:
    out = []
    for ch in text:
        if ch != "x" and _PLAIN.match(ch):
            out.append(ch)
        elif ord(ch) < 256:
            out.append(f"x{ord(ch):02x}")
        else:
            raise SpecError(f"{text!r}: only ASCII host names and paths can be saved")
    return "".join(out)


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "x":
            out.append(chr(int(text[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


@dataclass(frozen=True)
class SSHSpec(ModuleSpec):
    """An SSHJob on named hosts; ``path`` is its importable ``monarch_jupyter.ssh_jobs`` path."""

    meshes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    python: str = DEFAULT_PYTHON
    port: int = DEFAULT_PORT
    config: str | None = None

    def describe(self) -> str:
        text = "--ssh " + " --ssh ".join(f"{m}={','.join(h)}" for m, h in self.meshes)
        if self.python != DEFAULT_PYTHON:
            text += f" --python {self.python}"
        if self.port != DEFAULT_PORT:
            text += f" --port {self.port}"
        if self.config:
            text += f" --config {self.config}"
        return text

    @property
    def ssh_args(self) -> tuple[str, ...]:
        return ("-tt",) + (("-F", self.config) if self.config else ())


def _mesh_field(name: str, hosts: Sequence[str]) -> str:
    key, shown = ("m", name) if "_" not in name else ("me", _escape(name))
    return f"{key}_" + "_".join([shown] + [_escape(h) for h in hosts])


def make(
    meshes: Iterable[tuple[str, Sequence[str]]],
    python: str = DEFAULT_PYTHON,
    port: int = DEFAULT_PORT,
    config: str | None = None,
) -> SSHSpec:
    frozen = tuple((m, tuple(h)) for m, h in meshes)
    fields = ["ssh", f"py_{_escape(python)}", f"port_{port}"]
    if config:
        fields.append(f"cfg_{_escape(config)}")
    fields += [_mesh_field(name, hosts) for name, hosts in frozen]
    return SSHSpec(f"{SSH_JOBS_MODULE}.{'__'.join(fields)}", frozen, python, port, config)


def parse(words: list[str]) -> SSHSpec:
    """``--ssh hosts=h1,h2 [--ssh MESH=…] [--python PATH] [--port N] [--config FILE]``."""
    meshes: dict[str, tuple[str, ...]] = {}
    python, port, config = DEFAULT_PYTHON, DEFAULT_PORT, None
    i = 0
    while i < len(words):
        flag, value = words[i], words[i + 1] if i + 1 < len(words) else None
        if "=" in flag and flag.startswith("--"):
            flag, value = flag.split("=", 1)
            i -= 1
        if flag not in ("--ssh", "--python", "--port", "--config"):
            raise SpecError(
                f"unexpected {words[i]!r}: --ssh MESH=H1,H2 [--python PATH] [--port N] [--config FILE]"
            )
        if not value:
            raise SpecError(f"{flag} needs a value")
        if flag == "--ssh":
            name, sep, hosts = value.partition("=")
            hosts_t = tuple(h.strip() for h in hosts.split(",") if h.strip())
            if not sep or not hosts_t:
                raise SpecError(
                    f"--ssh wants MESH=HOST[,HOST...], got {value!r} (e.g. --ssh hosts=node1,node2)"
                )
            check_mesh_name(name)
            if name in meshes:
                raise SpecError(f"mesh {name!r} is given twice")
            meshes[name] = hosts_t
        elif flag == "--python":
            python = value
        elif flag == "--port":
            if not is_count(value) or not 1 <= int(value) <= 65535:
                raise SpecError(f"--port wants 1..65535, got {value!r}")
            port = int(value)
        else:
            config = value
        i += 2
    if not meshes:
        raise SpecError("--ssh wants MESH=HOST[,HOST...] (e.g. %job apply --ssh hosts=node1,node2)")
    return make(list(meshes.items()), python, port, config)


def from_attr(attr: str) -> SSHSpec:
    """Inverse of the path's attr; AttributeError for anything else."""
    fields = attr.split("__")
    if not fields or fields[0] != "ssh":
        raise AttributeError(attr)
    meshes: list[tuple[str, tuple[str, ...]]] = []
    python, port, config = DEFAULT_PYTHON, DEFAULT_PORT, None
    try:
        for field in fields[1:]:
            key, _, value = field.partition("_")
            if key == "py":
                python = _unescape(value)
            elif key == "port":
                port = int(value)
            elif key == "cfg":
                config = _unescape(value)
            elif key in ("m", "me"):
                name, *hosts = value.split("_")
                name = _unescape(name) if key == "me" else name
                if not is_mesh_name(name):
                    raise ValueError(field)
                meshes.append((name, tuple(_unescape(h) for h in hosts)))
            else:
                raise ValueError(field)
    except (ValueError, IndexError):
        raise AttributeError(attr) from None
    if not meshes:
        raise AttributeError(attr)
    return make(meshes, python, port, config)
