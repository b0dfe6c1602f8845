"""The messages between the client (:mod:`.drive`) and the workers (:mod:`.actor`).

One module imported by both sides, so a field is added or renamed in one place.
Every message is a NamedTuple, read by name, never by position. No Monarch import.

On the wire they are plain tuples (:func:`encode` / :func:`decode`, :func:`spec_to_wire` /
:func:`spec_from_wire`): this module travels to the workers by value (workers need only
torchmonarch, see ``engines.send_by_value``), so cloudpickle would write each class's whole
definition into every message and rebuild it on arrival (``benchmarks/bench_wire.py``
measures what that costs).

Client → actor (the ``run`` endpoint's argument)::

    RunSpec(mode, command, env, workdir, client_cwd, output_dir, meta)

Actor → client (on the run's port; ``key`` is the mesh name the client sent, ``rank``
the actor's flat rank in that mesh, ``pid`` the command's process group, None when
it could not start)::

    Data(run_id, key, rank, pid, chunks)          # output since the last message
    Heartbeat(run_id, key, rank, pid)             # nothing to say, still running
    Exit(run_id, key, rank, pid, chunks, returncode, duration, error)   # the last message

A command that ends quickly costs one message per rank (an :class:`Exit` with all its output).
"""

from __future__ import annotations

from typing import NamedTuple

OUT = "out"
ERR = "err"


class Chunk(NamedTuple):
    """Text one stream printed, as read (not cut into lines: partial lines and ``\\r`` flow)."""

    stream: str  # OUT or ERR
    text: str
    newlines: int  # text.count("\n"), counted on the bytes as they were read, so the client need not scan


class RunSpec(NamedTuple):
    """What to run on every targeted rank."""

    mode: str  # "bash" or "python"
    command: str
    env: dict[str, str]  # on top of the worker's environment and the MONARCH_RANK_*/SIZE_* variables
    workdir: str | None  # must exist on the worker
    client_cwd: str | None  # used as the working directory when it exists on the worker
    output_dir: str | None  # also write stdout.txt / stderr.txt there ($SUBDIR: the rank's point)
    meta: dict | None = None  # written to the rank's run folder on its host (target, context, …)


class Data(NamedTuple):
    run_id: str
    key: str
    rank: int
    pid: int | None
    chunks: list[Chunk]


class Heartbeat(NamedTuple):
    run_id: str
    key: str
    rank: int
    pid: int | None


class Exit(NamedTuple):
    run_id: str
    key: str
    rank: int
    pid: int | None
    chunks: list[Chunk]  # output not sent yet
    returncode: int | None  # None: it never ran (see error)
    duration: float  # seconds, measured on the worker
    error: str | None  # why it could not start or be followed; None when it ran


Message = Data | Heartbeat | Exit


# ── the wire ──────────────────────────────────────────────────────────
_KINDS: tuple[type, ...] = (Data, Heartbeat, Exit)  # a message's tag is its class's index here
_CHUNKS = 5  # position of ``chunks`` in a wire Data / Exit (after the tag)


def encode(message: Message) -> tuple:
    """``message`` as plain tuples, for ``port.send``."""
    kind = type(message)
    if kind is Heartbeat:
        return (1, *message)
    wire = [_KINDS.index(kind), *message]
    wire[_CHUNKS] = [tuple(chunk) for chunk in message.chunks]
    return tuple(wire)


def decode(wire: tuple) -> Message:
    """The message :func:`encode` made."""
    kind = _KINDS[wire[0]]
    if kind is Heartbeat:
        return Heartbeat._make(wire[1:])
    fields = list(wire[1:])
    fields[_CHUNKS - 1] = [Chunk._make(chunk) for chunk in fields[_CHUNKS - 1]]
    return kind._make(fields)


def spec_to_wire(spec: RunSpec) -> tuple:
    return tuple(spec)


def spec_from_wire(wire: tuple) -> RunSpec:
    return RunSpec._make(wire)
