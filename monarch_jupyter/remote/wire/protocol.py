"""The messages between the client (:mod:`..run.drive`) and the workers (:mod:`..host.actor`).

One module imported by both sides, so a field is added or renamed in one place.
Every message is a NamedTuple, read by name, never by position. No Monarch import.

On the wire they are plain tuples (:func:`encode` / :func:`decode`, :func:`spec_to_wire` /
:func:`spec_from_wire`): this module travels to the workers by value (workers need only
torchmonarch, see ``engines.send_by_value``), so cloudpickle would write each class's whole
definition into every message and rebuild it on arrival (``benchmarks/bench_wire.py``
measures what that costs).

Client → actor (the ``run`` endpoint's argument; the ``grep`` endpoint's)::

    RunSpec(mode, command, env, workdir, client_cwd, output_dir, meta, torch, flush_every, session)
    GrepQuery(pattern, ignore_case, context, ranks, streams)

Actor → client (on the run's port; ``key`` is the mesh name the client sent, ``rank``
the actor's flat rank in that mesh, ``pid`` the command's process group, None when
it could not start)::

    Data(run_id, key, rank, pid, chunks)          # output since the last message
    Heartbeat(run_id, key, rank, pid)             # nothing to say, still running
    Exit(run_id, key, rank, pid, chunks, returncode, duration, error, stopped_by, value)   # the last message

A command that ends quickly costs one message per rank (an :class:`Exit` with all its output).
"""

from __future__ import annotations

import math
from typing import NamedTuple

OUT = "out"
ERR = "err"


class Chunk(NamedTuple):
    """Text one stream printed, as read (not cut into lines: partial lines and ``\\r`` flow)."""

    stream: str  # OUT or ERR
    text: str
    newlines: int  # text.count("\n"), counted on the bytes as they were read, so the client need not scan


#: A rank's actor sends at most one message this often unless its RunSpec says otherwise
#: (``flush_every``): the host side batches by it, the kernel spaces big runs out from it.
FLUSH_EVERY = 0.02


class RunSpec(NamedTuple):
    """What to run on every targeted rank."""

    mode: str  # "bash" or "python"
    command: str
    env: dict[str, str]  # on top of the worker's environment and the MONARCH_RANK_*/SIZE_* variables
    workdir: str | None  # must exist on the worker
    client_cwd: str | None  # used as the working directory when it exists on the worker
    output_dir: str | None  # also write stdout.txt / stderr.txt there ($SUBDIR: the rank's point)
    meta: dict[str, object] | None = (
        None  # JSON, written to the rank's run folder on its host (target, context, …)
    )
    torch: bool = False  # also set torch's rank variables (torch_env), MASTER_* being in env
    flush_every: float | None = None  # seconds between a rank's messages (None: the actor's own)
    # a session cell (``--session``): (the job's key, the session's name, the cell's first line
    # number in the notebook); None: a command
    session: tuple[str, str, int] | None = None


class GrepQuery(NamedTuple):
    """What ``%remote grep`` asks each host of a run's rank files (the ``grep`` endpoint's
    argument, sent as a plain tuple)."""

    pattern: str  # a regular expression
    ignore_case: bool
    context: int  # lines either side of a hit
    ranks: list[int] | None  # None: every rank of the run on the host
    streams: list[str]  # OUT and/or ERR


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
    stopped_by: str | None = None  # who stopped the run, as its host recorded it (a stop from elsewhere)
    value: str | None = None  # a session cell's last expression, as repr shows it


Message = Data | Heartbeat | Exit


# ── the wire ──────────────────────────────────────────────────────────
# A message's tag is its class's index in (Data, Heartbeat, Exit); a chunk is its three fields.
WireChunk = tuple[str, str, int]
WireData = tuple[int, str, str, int, "int | None", list[WireChunk]]
WireHeartbeat = tuple[int, str, str, int, "int | None"]
WireExit = tuple[
    int,
    str,
    str,
    int,
    "int | None",
    list[WireChunk],
    "int | None",
    float,
    "str | None",
    "str | None",
    "str | None",
]
Wire = WireData | WireHeartbeat | WireExit
WireSpec = tuple[
    str,
    str,
    dict[str, str],
    "str | None",
    "str | None",
    "str | None",
    "dict[str, object] | None",
    bool,
    "float | None",
    "tuple[str, str, int] | None",
]
DATA, HEARTBEAT, EXIT = 0, 1, 2


def _wire_chunks(chunks: list[Chunk]) -> list[WireChunk]:
    return [(chunk.stream, chunk.text, chunk.newlines) for chunk in chunks]


def _chunks(wire: list[WireChunk]) -> list[Chunk]:
    return [Chunk._make(chunk) for chunk in wire]


def encode(message: Message) -> Wire:
    """``message`` as plain tuples, for ``port.send``."""
    if isinstance(message, Heartbeat):
        return (HEARTBEAT, *message)
    if isinstance(message, Data):
        return (DATA, *message[:4], _wire_chunks(message.chunks))
    return (EXIT, *message[:4], _wire_chunks(message.chunks), *message[5:])


_tuple_new = tuple.__new__


def decode(wire: Wire) -> Message:
    """The message :func:`encode` made (by this module: both sides run the same code)."""
    if len(wire) == 6:  # Data, one per message of output: built without the per-field calls
        data: WireData = wire
        chunks = [_tuple_new(Chunk, chunk) for chunk in data[5]]
        return _tuple_new(Data, (data[1], data[2], data[3], data[4], chunks))
    if len(wire) == 5:
        return Heartbeat._make(wire[1:])
    return Exit(*wire[1:5], _chunks(wire[5]), *wire[6:])  # type: ignore[arg-type]  # by position, as encoded


def spec_to_wire(spec: RunSpec) -> WireSpec:
    return (*spec,)


def spec_from_wire(wire: WireSpec) -> RunSpec:
    return RunSpec(*wire)  # a shorter tuple (a kernel before a field was added): its defaults


def torch_env(point: dict[str, int], sizes: dict[str, int], rank: int) -> dict[str, str]:
    """torchrun's variables for the rank at ``point`` (flat ``rank``) of a mesh of ``sizes``,
    as Monarch's ``SPMDActor`` sets them: the last dim is the local one (the procs of a host);
    MASTER_ADDR / MASTER_PORT are the run's, set by the kernel."""
    local = list(sizes)[-1]
    world = math.prod(sizes.values())
    local_world = sizes[local]
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(point[local]),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(local_world),
        "GROUP_RANK": str(rank // local_world),
        "GROUP_WORLD_SIZE": str(-(-world // local_world)),
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(world),
        "ROLE_NAME": "rank",
    }
