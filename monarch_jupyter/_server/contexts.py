"""Scan a directory tree for Monarch contexts without unpickling anything.

Layout written by the kernel side, per folder::

    .monarch/job_state.pkl      relative symlink to the active context, e.g. default/state.pkl
    .monarch/<name>/state.pkl   never opened here
    .monarch/<name>/spec        the job spec (a context may have only this yet)
    .monarch/<name>/status.json what the sidebar shows
    .monarch/<name>/runs/<id>.json  the runs index (remote/run/index.py, schema/run_entry.schema.json): the running ones are listed

A directory under ``.monarch`` is a context if it holds any of those three
files (so ``.monarch/runs/`` with logs is not).

Contexts are looked for in ``<root>/<path>/.monarch`` and one level of
subfolders ``<root>/<path>/*/.monarch``. Symlinked folders are not followed,
and every path handed out is relative to the server root.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any, NamedTuple

from ..remote.host.layout import STATUS, rank_name
from ..system.files import UnsafeFileError, check_trusted, read_bytes

MONARCH_DIR = ".monarch"
ACTIVE_LINK = "job_state.pkl"
STATE_FILE = "state.pkl"
STATUS_FILE = "status.json"
SPEC_FILE = "spec"
CONTEXT_MARKERS = (STATE_FILE, SPEC_FILE, STATUS_FILE)
STATES = ("running", "not running", "workers dead", "no job", "unknown")
MAX_STATUS_BYTES = 64 << 10  # a real status.json is ~1 KB; larger ones are shown as unknown
MAX_SUBFOLDERS = 500
MAX_SCAN_ENTRIES = 5000  # directory entries looked at per folder: a huge folder costs a bound
MAX_CONTEXTS = 100  # contexts per response; `truncated` says when more were left out
MAX_RESPONSE_BYTES = 1 << 20
STATUS_CHARS = 500  # characters kept of each string of a status summary
STATUS_ITEMS = 32  # meshes and urls kept of a status summary
RUNS_DIR = "runs"
MAX_RUN_FILES = 50  # newest index entries read per context (ids start with their UTC time)
MAX_RUN_BYTES = 64 << 10  # an entry is < 10 KB (its command is cut at 4000 characters)
COMMAND_CHARS = 120
SCAN_DEPTH = 1  # folder levels below the listed one searched for .monarch/


class Limits(NamedTuple):
    """What one listing reads at most (the server's settings, ``config.MonarchJupyter``)."""

    depth: int = SCAN_DEPTH
    subfolders: int = MAX_SUBFOLDERS  # per folder scanned
    run_files: int = MAX_RUN_FILES  # per context


LIMITS = Limits()


class InvalidPath(ValueError):
    """The requested path is absolute, escapes the root, or is not a folder."""


def resolve_folder(root_dir: str, rel_path: str) -> tuple[str, str]:
    """Return ``(absolute folder, normalized relative path)`` for a request path.

    Raises InvalidPath for anything that is not a folder inside ``root_dir``.
    """
    rel = rel_path.replace("\\", "/").strip("/")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if "\0" in rel or os.path.isabs(rel_path) or ".." in parts:
        raise InvalidPath(rel_path)
    root = os.path.realpath(root_dir)
    folder = os.path.realpath(os.path.join(root, *parts))
    if folder != root and not folder.startswith(root + os.sep):
        raise InvalidPath(rel_path)
    if not os.path.isdir(folder):
        raise InvalidPath(rel_path)
    return folder, "/".join(parts)


def _is_real_dir(path: str) -> bool:
    """A directory that is not a symlink."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def read_status(context_dir: str) -> dict[str, Any] | None:
    """The context's status.json as a dict, or None if absent, not a regular file,
    a symlink, too large or invalid.

    Never blocks: a FIFO, socket or device is refused from ``lstat`` before it
    is opened, and the open is non-blocking and does not follow symlinks.
    """
    path = os.path.join(context_dir, STATUS_FILE)
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_STATUS_BYTES:
        return None
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_STATUS_BYTES:
                return None  # swapped between lstat and open
            raw = f.read(MAX_STATUS_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_STATUS_BYTES:
        return None
    try:
        status = json.loads(raw)
    except ValueError:
        return None
    return status if isinstance(status, dict) else None


def trusted_status(context_dir: str) -> dict[str, Any] | None:
    """:func:`read_status`, only from a status.json this user owns in folders (from ``.monarch``
    down) this user owns, none writable by group or others: the shell route and the dashboard
    proxy act on it. None when there is none; UnsafeFileError (one line) when it is not ours."""
    path = os.path.join(context_dir, STATUS_FILE)
    if not os.path.lexists(path):
        return None
    try:
        check_trusted(path, what="status")
    except OSError:
        return None
    return read_status(context_dir)


def check_folder(folder: str) -> None:
    """UnsafeFileError unless ``folder`` (a notebook folder a terminal opens in) is this user's
    and not writable by group or others: whoever can write there can plant what runs there."""
    info = os.stat(folder)
    if info.st_uid != os.getuid():
        raise UnsafeFileError(f"{folder} belongs to uid {info.st_uid}, not you: no shell is opened there")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeFileError(
            f"{folder} is writable by group/others (mode {stat.S_IMODE(info.st_mode):o}): no shell is "
            f"opened there; if you trust it: chmod go-w {folder}"
        )


def _short(value: Any) -> Any:
    """A string cut to STATUS_CHARS, a finite number or bool as is, anything else None."""
    if isinstance(value, str):
        return value if len(value) <= STATUS_CHARS else value[: STATUS_CHARS - 1] + "…"
    if isinstance(value, bool) or (isinstance(value, (int, float)) and abs(value) < 1e15):
        return value
    return None


def summarize_status(status: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the sidebar shows of a status.json: known keys only, strings cut, at most
    STATUS_ITEMS meshes and urls, so a context costs the response a bounded size."""
    if status is None:
        return None
    keys = ("context", "job_class", "apply_id", "spec", "state", "updated", "applied")
    summary: dict[str, Any] = {key: _short(status.get(key)) for key in keys if key in status}
    meshes = status.get("meshes")
    if isinstance(meshes, list):
        summary["meshes"] = [
            {key: _short(mesh.get(key)) for key in ("name", "hosts", "live_workers")}
            for mesh in meshes[:STATUS_ITEMS]
            if isinstance(mesh, dict)
        ]
    urls = status.get("urls")
    if isinstance(urls, dict):
        summary["urls"] = {_short(str(k)): _short(v) for k, v in list(urls.items())[:STATUS_ITEMS]}
    return summary


def _first_line(command: Any) -> str:
    line = (command.strip().splitlines() or [""])[0] if isinstance(command, str) else ""
    return line if len(line) <= COMMAND_CHARS else line[: COMMAND_CHARS - 1] + "…"


def _ended_on_this_host(entry: dict[str, Any]) -> bool:
    """A local run whose every rank wrote its exit status (its kernel died before recording the
    end). Only ``lstat``s, in the host's runs folder; a non-local run cannot be checked here.
    A rank folder is made ahead with an empty ``status`` file (``host.spares``): only a
    non-empty one says the rank ended."""
    host_dir, ranks = entry.get("host_dir"), entry.get("ranks")
    if not entry.get("local") or not isinstance(host_dir, str) or not isinstance(ranks, list) or not ranks:
        return False
    for rank in ranks:
        if not isinstance(rank, dict):
            return False
        status = os.path.join(host_dir, rank_name(rank.get("mesh"), rank.get("rank")), STATUS)
        try:
            info = os.lstat(status)
            if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
                return False
        except OSError:
            return False
    return True


def running_runs(context_dir: str, max_files: int = MAX_RUN_FILES) -> list[dict[str, Any]]:
    """The context's running runs from its runs index (``runs/<id>.json``), newest first:
    id, the command's first line, target, started (epoch seconds), state and the attach line.

    Reads at most ``max_files`` entries, each through :func:`_files.read_bytes` (regular
    files only, no symlinks, non-blocking, bounded); never a pickle.
    """
    folder = os.path.join(context_dir, RUNS_DIR)
    if not _is_real_dir(folder):
        return []
    try:
        with os.scandir(folder) as scan:
            names = [e.name for e in scan if e.name.endswith(".json") and not e.name.startswith(".")]
    except OSError:
        return []
    runs = []
    for name in sorted(names, reverse=True)[:max_files]:
        try:
            entry = json.loads(read_bytes(os.path.join(folder, name), MAX_RUN_BYTES, "run entry"))
        except (OSError, UnsafeFileError, ValueError):
            continue
        if not isinstance(entry, dict) or entry.get("id") != name[:-5] or entry.get("state") != "running":
            continue
        if _ended_on_this_host(entry):
            continue
        started = entry.get("started")
        runs.append(
            {
                "id": entry["id"],
                "command": _first_line(entry.get("command")),
                "target": entry.get("target") if isinstance(entry.get("target"), str) else "",
                "started": started if isinstance(started, (int, float)) else None,
                "state": "running",
                "detached": entry.get("detached") is True,
                "attach": f"%remote attach {entry['id']}",
            }
        )
    runs.sort(key=lambda r: r["started"] or 0, reverse=True)
    return runs


def active_context(monarch_dir: str) -> str | None:
    """Name of the context ``job_state.pkl`` links to; the link is read, never opened."""
    try:
        target = os.readlink(os.path.join(monarch_dir, ACTIVE_LINK))
    except OSError:
        return None
    resolved = os.path.normpath(os.path.join(monarch_dir, target))
    parts = os.path.relpath(resolved, os.path.normpath(monarch_dir)).split(os.sep)
    if len(parts) == 2 and parts[1] == STATE_FILE and parts[0] not in (".", ".."):
        return parts[0]
    return None


def _scan(folder: str) -> tuple[list[os.DirEntry[str]], bool]:
    """The folder's first MAX_SCAN_ENTRIES entries by name (of the first it lists),
    and whether it had more."""
    entries: list[os.DirEntry[str]] = []
    try:
        with os.scandir(folder) as scan:
            for entry in scan:
                if len(entries) == MAX_SCAN_ENTRIES:
                    return sorted(entries, key=lambda e: e.name), True
                entries.append(entry)
    except OSError:
        return [], False
    return sorted(entries, key=lambda e: e.name), False


def _contexts_in(
    monarch_dir: str, rel_monarch: str, limit: int, max_runs: int = MAX_RUN_FILES
) -> list[dict[str, Any]]:
    """Up to ``limit`` contexts of one ``.monarch`` folder."""
    active = active_context(monarch_dir)
    contexts: list[dict[str, Any]] = []
    for entry in _scan(monarch_dir)[0]:
        if len(contexts) >= limit:
            break
        if not entry.is_dir(follow_symlinks=False):
            continue
        if not any(os.path.lexists(os.path.join(entry.path, f)) for f in CONTEXT_MARKERS):
            continue
        try:
            status, refused = trusted_status(entry.path), None
        except UnsafeFileError as error:  # another user's status says nothing about our jobs
            status, refused = None, str(error)
        state = status.get("state") if status else None
        context = {
            "name": entry.name,
            "dir": f"{rel_monarch}/{entry.name}",
            "active": entry.name == active,
            "state": state if state in STATES else "unknown",
            "status": summarize_status(status),
            "runs": running_runs(entry.path, max_runs) if refused is None else [],
        }
        if refused is not None:
            context["refused"] = _short(refused)
        contexts.append(context)
    return contexts


def _subfolders(folder: str, limit: int = MAX_SUBFOLDERS) -> tuple[list[str], bool]:
    """Up to ``limit`` real subfolders (not hidden), and whether any were left out."""
    entries, more = _scan(folder)
    names = [e.name for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]
    return names[:limit], more or len(names) > limit


def _folders(folder: str, limits: Limits) -> tuple[list[str], bool]:
    """``""`` and the subfolders of ``folder`` down to ``limits.depth`` levels, as relative
    paths, each level sorted and bounded; and whether any were left out."""
    found, level, truncated = [""], [""], False
    for _ in range(limits.depth):
        below: list[str] = []
        for parent in level:
            names, more = _subfolders(os.path.join(folder, parent), limits.subfolders)
            truncated |= more
            below.extend(os.path.join(parent, name) for name in names)
        truncated |= len(below) > limits.subfolders
        level = below[: limits.subfolders]
        found.extend(level)
    return found, truncated


def list_contexts(root_dir: str, rel_path: str = "", limits: Limits = LIMITS) -> dict[str, Any]:
    """The ``/monarch-jupyter/contexts`` response for ``rel_path`` under ``root_dir``: at most
    MAX_CONTEXTS contexts; ``truncated`` is true when some folders or contexts were left out."""
    folder, rel = resolve_folder(root_dir, rel_path)
    prefix = f"{rel}/" if rel else ""
    contexts: list[dict[str, Any]] = []
    subfolders, truncated = _folders(folder, limits)
    for sub in subfolders:
        monarch_dir = os.path.join(folder, sub, MONARCH_DIR)
        if _is_real_dir(monarch_dir):
            if len(contexts) > MAX_CONTEXTS:
                break
            rel_monarch = f"{prefix}{sub}/{MONARCH_DIR}" if sub else f"{prefix}{MONARCH_DIR}"
            left = MAX_CONTEXTS + 1 - len(contexts)
            contexts.extend(_contexts_in(monarch_dir, rel_monarch, left, limits.run_files))
    if len(contexts) > MAX_CONTEXTS:
        contexts, truncated = contexts[:MAX_CONTEXTS], True
    return {"root": rel, "contexts": contexts, "truncated": truncated}


def contexts_json(
    root_dir: str, rel_path: str = "", limits: Limits = LIMITS, extra: dict[str, Any] | None = None
) -> str:
    """:func:`list_contexts` serialised, at most MAX_RESPONSE_BYTES: contexts are dropped
    from the end (and ``truncated`` set) until it fits. Runs in the scan thread."""
    body = {**list_contexts(root_dir, rel_path, limits), **(extra or {})}
    text = json.dumps(body)
    while len(text) > MAX_RESPONSE_BYTES and body["contexts"]:
        keep = max(0, len(body["contexts"]) * MAX_RESPONSE_BYTES // len(text) - 1)
        body["contexts"], body["truncated"] = body["contexts"][:keep], True
        text = json.dumps(body)
    return text
