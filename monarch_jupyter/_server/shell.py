"""``POST /monarch-jupyter/shell``: a JupyterLab terminal running a shell on one rank.

The body names a folder (``path``, relative to the server root, as the sidebar lists contexts;
or ``folder``, an absolute path inside the root, as ``%remote shell`` saw it), a context, a flat
rank and optionally a mesh. The server builds the command itself (``rank_shell.command``, with
its own Python) and starts it in a terminal of jupyter_server's terminal manager in that folder;
the answer is the terminal's name, which the front end opens. The request never carries a
command: a saved notebook's payload can name a rank, not a program. Everything the terminal
reads (the cache, its signature) it reads itself, as a kernel would.
"""

from __future__ import annotations

import json
import os
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..errors import MonarchJupyterError
from ..jobs.contexts import DEFAULT_CONTEXT, MONARCH_DIR, check_name
from ..remote.rank_shell import ShellTarget, command
from ..system.files import UnsafeFileError
from .contexts import InvalidPath, active_context, check_folder, resolve_folder, trusted_status
from .handlers import OneLineErrors

MAX_BODY = 4096


def folder_of(root_dir: str, body: dict[str, Any]) -> str:
    """The absolute folder the request names, inside ``root_dir``; InvalidPath otherwise."""
    folder = body.get("folder")
    if isinstance(folder, str) and folder:
        if not os.path.isabs(folder):
            raise InvalidPath(folder)
        root = os.path.realpath(root_dir)
        real = os.path.realpath(folder)
        if real != root and not real.startswith(root + os.sep):
            raise InvalidPath(folder)
        return resolve_folder(root, os.path.relpath(real, root))[0]
    path = body.get("path", "")
    if not isinstance(path, str):
        raise InvalidPath(repr(path))
    return resolve_folder(root_dir, path)[0]


def target_of(body: dict[str, Any]) -> ShellTarget:
    """The rank the request names; ValueError with one line on bad input."""
    rank = body.get("rank", 0)
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
        raise ValueError(f"rank wants a flat rank 0, 1, …, got {rank!r}")
    context, mesh = body.get("context"), body.get("mesh")
    for name, value in (("context", context), ("mesh", mesh)):
        if value is not None and (not isinstance(value, str) or not value or len(value) > 200):
            raise ValueError(f"{name} wants a name, got {value!r}")
    try:
        if context is not None:
            check_name(context)
    except MonarchJupyterError as error:
        raise ValueError(str(error)) from None
    return ShellTarget(context, rank, mesh)


def refusal(status: dict[str, Any] | None, target: ShellTarget, context: str) -> str | None:
    """Why the context's ``status.json`` says no shell can open there (one line), else None. The
    terminal checks again from the cache; this is so the common mistakes show where they were made."""
    if status is None:
        return f"no job in context {context!r}: run %job apply --local hosts=2 in a notebook of this folder"
    state = status.get("state")
    if state != "running":
        return f"the job in context {context!r} is {state or 'unknown'}: %job apply starts it again"
    stopped = status.get("stopped_workers")
    if isinstance(stopped, dict) and stopped:
        key, pid = next(iter(stopped.items()))
        return f"worker {key} (pid {pid}) is stopped (SIGSTOP): `kill -CONT {pid}` or %job kill"
    meshes = [m for m in status.get("meshes") or [] if isinstance(m, dict)]
    if not meshes:
        return None
    mesh = next((m for m in meshes if m.get("name") == target.mesh), None) if target.mesh else meshes[0]
    if mesh is None:
        names = ", ".join(str(m.get("name")) for m in meshes)
        return f"no mesh {target.mesh!r} in the job; it has: {names}"
    hosts = mesh.get("hosts")
    if isinstance(hosts, int) and target.rank >= hosts:
        return (
            f"rank {target.rank} is out of range: mesh {mesh.get('name')} has {hosts} "
            f"rank{'s' if hosts != 1 else ''} (0–{hosts - 1})"
        )
    return None


class Refused(ValueError):
    """The context's status says no shell can open there."""


def check(folder: str, target: ShellTarget) -> ShellTarget:
    """``target`` with its context named (the folder's active one by default), checked against
    its ``status.json``; Refused (one line) when the status says no shell can open, or when the
    folder or the status is not this user's alone (the terminal runs as the server's user)."""
    monarch_dir = os.path.join(folder, MONARCH_DIR)
    context = target.context or active_context(monarch_dir) or DEFAULT_CONTEXT
    try:
        check_folder(folder)
        status = trusted_status(os.path.join(monarch_dir, context))
    except (UnsafeFileError, OSError) as error:
        raise Refused(str(error)) from None
    why = refusal(status, target, context)
    if why is not None:
        raise Refused(why)
    return ShellTarget(context, target.rank, target.mesh)


class ShellHandler(OneLineErrors):
    """POST: start the rank shell in a new terminal; ``{"name": terminal name}``."""

    # it starts a process in a terminal: the permission JupyterLab's own terminals need
    auth_resource = "terminals"

    def initialize(self, root_dir: str) -> None:
        self.root_dir = root_dir

    @web.authenticated
    @authorized
    def post(self) -> None:
        manager = self.settings.get("terminal_manager")
        if not self.settings.get("terminals_available", manager is not None) or manager is None:
            raise web.HTTPError(
                409, "terminals are not enabled on this server: run the command %remote shell prints"
            )
        if len(self.request.body) > MAX_BODY:
            raise web.HTTPError(413, "request too large")
        try:
            body = json.loads(self.request.body or b"{}")  # RecursionError: nested too deep
            if not isinstance(body, dict):
                raise ValueError("wants a JSON object")
            folder = folder_of(self.root_dir, body)
            target = check(folder, target_of(body))
        except Refused as error:
            raise web.HTTPError(409, str(error)) from None
        except InvalidPath as error:
            raise web.HTTPError(400, f"invalid folder: {error}") from None
        except ValueError as error:
            raise web.HTTPError(400, str(error)) from None
        except RecursionError:
            raise web.HTTPError(400, "the JSON body is nested too deep: send {path, context, rank}") from None
        model = manager.create(shell_command=[*command(target), "--hold"], cwd=folder)
        self.log.info(
            "monarch_jupyter: terminal %s: shell on rank %d in %s", model["name"], target.rank, folder
        )
        self.finish({"name": model["name"]})
