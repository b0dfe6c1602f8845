"""One rank's Python namespace of a ``%%remote python --session``: a long-lived process that runs
cells, evaluates and receives values, between which its variables live on.

Started by the rank's :class:`~.actor.RemoteActor` (:mod:`.session`) in a session of its own
(``start_new_session``), so it outlives the actor and the kernel: a new kernel's actor finds it
by its folder and talks to it on its Unix socket (``sock``, in a 0700 folder; a peer that is not
this user is refused). It ends when asked (``stop``), on SIGTERM, or when the host's worker that
started it is gone (``%job kill``): never left running unseen.

The code runs on the main thread, in ``__main__``'s namespace, so Ctrl-C (SIGINT, sent by the
actor) raises KeyboardInterrupt in it, a blocking ``time.sleep`` included, and the namespace
survives. While a cell runs, its fds 1 and 2 are the rank folder's ``out`` and ``err`` (what the
actor's tail streams, as for any run) and its end is written to ``status``, so a kernel that
attaches later sees the cell's output and end as a run's.

Standard library only, every helper in this module: it is sent to a plain ``python -c`` by
value (cloudpickle) and imports nothing of this package.

Requests and answers are pickled dicts, length-prefixed, one request per connection:

    {"op": "ping"}                                   → {"pid", "busy", "cells", "started"}
    {"op": "exec", "code", "filename", "first_line", "folder", "client"} → {"rc", "value", "error"}
    {"op": "eval", "expr", "max_bytes"}              → {"data": bytes} | {"error"}
    {"op": "push", "items": {name: bytes}}           → {"names"} | {"error"}
    {"op": "stop"}                                   → {"stopping": True}, then it exits
    {"op": "where"}                                  → {"busy", "where", "backend"}
    {"op": "unblock"}                                → {"busy", "closed"}
    {"op": "regroup", "addr", "port", "timeout"}     → {"backend", "world", "rewrapped"} | {"error"}
A request for the namespace while a cell runs is answered ``{"busy": True}`` at once; ``ping``,
``debug``, ``stop``, ``where`` and ``unblock`` are answered on the listener thread, a cell running
or not: they are how a rank blocked in C++ (a torch collective) is named and freed. When the
running cell waits in pdb for a kernel that is gone (``client``: its pid, start ticks and boot
id), any request but ``debug`` first tells that pdb to quit (:meth:`Server.release`).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import linecache
import os
import pickle
import queue
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

HEADER = "!Q"  # a message's length (a format, not a struct.Struct: this module is pickled by value)
HEADER_SIZE = 8
MAX_REQUEST = 1 << 31  # bytes: a push's values are bounded by the kernel, far below this
VALUE_CHARS = 4000  # the shown repr of a cell's last expression, cut to this
OWNER_POLL = 1.0  # seconds between two looks at whether the host's worker is still there
RELEASE_WAIT = 5.0  # seconds a cell told to quit its pdb may take to end
BOOT_ID = "/proc/sys/kernel/random/boot_id"  # a kernel pid means something on this machine only
SUN_PATH_MAX = 107  # a Unix socket address's path, less its NUL (Linux)


# ── the socket's address ───────────────────────────────────────────
@contextlib.contextmanager
def unix_address(path: str) -> Iterator[str]:
    """An address that binds or connects to the socket ``path``, whatever its length: ``path``
    itself when it fits, else ``/proc/self/fd/<fd>/<name>`` through a descriptor of its folder
    (held while the block runs). A runs folder set deep (``MONARCH_JUPYTER_RUNS_DIR``) must not
    make a session impossible, and sun_path holds only 107 bytes."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        yield path
        return
    folder, name = os.path.split(path)
    fd = os.open(folder or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{name}"
    finally:
        os.close(fd)


# ── framing ───────────────────────────────────────────────────────────
def send_message(conn: socket.socket, message: dict[str, Any]) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    conn.sendall(struct.pack(HEADER, len(data)) + data)


def recv_exact(conn: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = conn.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the peer closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv_message(conn: socket.socket) -> dict[str, Any]:
    (size,) = struct.unpack(HEADER, recv_exact(conn, HEADER_SIZE))
    if size > MAX_REQUEST:
        raise ValueError(f"a message of {size} bytes is over the limit")
    message = pickle.loads(recv_exact(conn, size))
    if not isinstance(message, dict):
        raise ValueError("a message is a dict")
    return message


# ── the process ───────────────────────────────────────────────────────
def start_ticks(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat`` (tells a reused pid apart), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
        fields = text[text.rindex(")") + 2 :].split()
        if fields[0] in ("Z", "X"):
            return None
        return int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


class Server:
    """The namespace, its socket and the main thread's queue of requests."""

    def __init__(self, sock_path: str, owner: int, owner_ticks: int | None) -> None:
        self.sock_path = sock_path
        self.owner = owner
        self.owner_ticks = owner_ticks
        self.started = time.time()
        self.cells = 0
        self.busy = False  # a request is on the main thread
        self.filename = ""  # the running cell's file name (its frames are the user's code)
        self.executing = False  # user code runs now: SIGINT raises KeyboardInterrupt in it
        self.todo: queue.SimpleQueue[tuple[dict[str, Any], socket.socket]] = queue.SimpleQueue()
        self.debug_in = DebugInput()  # breakpoint()'s pdb reads the lines the cell's user typed
        self.client: dict[str, Any] | None = None  # the kernel of the request being handled
        self.note: str | None = None  # said at the start of the next cell's output
        self.lock = threading.Lock()
        main = sys.modules["__main__"]
        for name in [n for n in vars(main) if not n.startswith("__")]:
            delattr(main, name)  # the bootstrap's names: the namespace starts empty
        self.ns: dict[str, Any] = vars(main)
        self.ns["__builtins__"] = builtins

    # the listener: a thread, so pings and "busy" are answered while a cell runs
    def listen(self) -> socket.socket:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            with unix_address(self.sock_path) as address:
                listener.bind(address)
        finally:
            os.umask(old)
        listener.listen(64)
        return listener

    def accept_loop(self, listener: socket.socket) -> None:
        while True:
            conn, _ = listener.accept()
            try:
                self.take(conn)
            except Exception:  # a bad peer: drop it, serve the next
                conn.close()

    def take(self, conn: socket.socket) -> None:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", creds)
        if uid != os.getuid():  # the folder is 0700 already; a second lock on the door
            conn.close()
            return
        conn.settimeout(60)
        request = recv_message(conn)
        conn.settimeout(None)
        op = request.get("op")
        if op != "debug" and self.busy and self.debug_in.waiting and client_gone(self.client):
            self.release()  # a ping (attach, ls), a cell: whoever asks next frees it
        if op == "ping":
            send_message(conn, self.info())
            conn.close()
        elif op == "debug":  # a line for the pdb of a breakpoint() in the running cell
            self.debug_in.lines.put(str(request.get("line", "")) + "\n")
            send_message(conn, {"ok": self.busy})
            conn.close()
        elif op == "stop":
            send_message(conn, {"stopping": True})
            conn.close()
            self.quit()
        elif op == "where":
            send_message(conn, {"busy": self.busy, **where_blocked(self.filename)})
            conn.close()
        elif op == "unblock":
            send_message(conn, {"busy": self.busy, "closed": shutdown_tcp() if self.busy else 0})
            conn.close()
        else:
            with self.lock:
                if self.busy:
                    send_message(conn, {"busy": True, **self.info()})
                    conn.close()
                    return
                self.busy = True
            self.todo.put((request, conn))

    def info(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "busy": self.busy, "cells": self.cells, "started": self.started}

    def release(self) -> None:
        """Quit the pdb a cell of a kernel that is gone waits in (nobody can type to it any
        more), wait for that cell to end, and leave one line for the next cell's output."""
        pid = (self.client or {}).get("pid")
        self.debug_in.lines.put("q\n")
        deadline = time.monotonic() + RELEASE_WAIT
        while self.busy and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self.busy:
            self.note = (
                f"monarch_jupyter: a breakpoint() of a cell whose kernel is gone (pid {pid}) held "
                "this namespace; its pdb was told to quit\n"
            )

    def watch_owner(self) -> None:
        while True:
            time.sleep(OWNER_POLL)
            if start_ticks(self.owner) is None or (
                self.owner_ticks is not None and start_ticks(self.owner) != self.owner_ticks
            ):
                self.quit()

    def quit(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.sock_path)
        os._exit(0)

    def on_sigint(self, signum: int, frame: Any) -> None:
        if self.executing:
            raise KeyboardInterrupt

    # the main thread: one request at a time
    def serve(self) -> None:
        while True:
            try:
                request, conn = self.todo.get()
            except KeyboardInterrupt:  # between cells: nothing to interrupt
                continue
            client = request.get("client")
            self.client = client if isinstance(client, dict) else None
            try:
                answer = self.handle(request)
            except KeyboardInterrupt:  # landed after the user's code ended
                answer = {"rc": 130, "value": None, "error": "KeyboardInterrupt"}
            except Exception as error:  # our own failure: said, the namespace lives on
                answer = {"error": f"{type(error).__name__}: {error}"}
            with self.lock:
                self.busy = False
            try:
                send_message(conn, answer)
            except OSError:
                pass  # the asker is gone (its actor stopped): the status file says how it ended
            finally:
                conn.close()

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "exec":
            self.cells += 1
            return run_cell(self, request)
        if op == "eval":
            return evaluate(self, str(request["expr"]), int(request["max_bytes"]))
        if op == "push":
            return receive(self, dict(request["items"]))
        if op == "regroup":
            return regroup(self, str(request["addr"]), int(request["port"]), float(request["timeout"]))
        return {"error": f"unknown request {op!r}"}


# ── breakpoint(): pdb in the cell, its lines typed in the notebook ──────
PROMPT = "(Pdb) "  # the waiting cell sees this at the end of a rank's output and asks for a line


class DebugInput:
    """pdb's stdin: the lines the notebook sends (``debug`` requests), one at a time."""

    def __init__(self) -> None:
        self.lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.waiting = False  # pdb waits for a line now

    def readline(self) -> str:
        self.waiting = True
        try:
            return self.lines.get()
        finally:
            self.waiting = False


def boot_id() -> str | None:
    try:
        with open(BOOT_ID) as f:
            return f.read().strip()
    except OSError:
        return None


def client_gone(client: dict[str, Any] | None) -> bool:
    """Whether the kernel that sent a request is known to be gone: it ran on this machine (the
    same boot) and its pid is dead or reused. A kernel elsewhere cannot be told: not gone."""
    if not client or client.get("boot") is None or client.get("boot") != boot_id():
        return False
    pid, ticks = client.get("pid"), client.get("ticks")
    if not isinstance(pid, int):
        return False
    now = start_ticks(pid)
    return now is None or (isinstance(ticks, int) and now != ticks)


def breakpoint_hook(server: Server) -> Any:
    """``sys.breakpointhook`` of the namespace: pdb on the cell's frame, its output the cell's
    stdout (streamed, labelled by rank), its input the notebook's; outside a cell, nothing."""

    def hook(*args: Any, **kwargs: Any) -> None:
        if not server.executing:
            return
        import pdb

        debugger = pdb.Pdb(stdin=server.debug_in, stdout=sys.stdout)  # type: ignore[arg-type]
        debugger.prompt = PROMPT
        debugger.set_trace(sys._getframe(1))  # noqa: SLF001 - the caller's frame, as breakpoint() does

    return hook


# ── the requests ──────────────────────────────────────────────────────
def _compile(code: str, filename: str, first_line: int) -> tuple[Any, Any]:
    """The cell's statements and, when it ends in an expression, that expression apart (shown)."""
    tree = ast.parse(code, filename, "exec")
    if first_line > 1:
        ast.increment_lineno(tree, first_line - 1)
    last = None
    final = tree.body[-1] if tree.body else None
    if isinstance(final, ast.Expr):
        tree.body.pop()
        last = ast.Expression(final.value)
    body = compile(tree, filename, "exec")
    return body, compile(last, filename, "eval") if last is not None else None


def _cache_source(code: str, filename: str, first_line: int) -> None:
    """The cell's lines, for tracebacks (at the notebook's line numbers)."""
    lines = ["\n"] * (first_line - 1) + [line + "\n" for line in code.splitlines()]
    linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)


def _cell_error(error: BaseException, filename: str) -> str:
    """``ZeroDivisionError: division by zero (cell line 3)``: the error and the cell's last line in it."""
    line = None
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename == filename:
            line = frame.lineno
    if isinstance(error, SyntaxError) and error.filename == filename:
        line = error.lineno
    text = "".join(traceback.format_exception_only(type(error), error)).strip().splitlines()[-1]
    return text + (f" (cell line {line})" if line else "")


def _print_traceback(error: BaseException, filename: str) -> None:
    """The traceback from the cell's first frame on (this module's frames left out)."""
    frames: list[traceback.FrameSummary] = list(traceback.extract_tb(error.__traceback__))
    for start, frame in enumerate(frames):
        if frame.filename == filename:
            frames = frames[start:]
            break
    ours = _print_traceback.__code__.co_filename
    while len(frames) > 1 and frames[-1].filename == ours:  # the SIGINT handler's raise
        frames = frames[:-1]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    lines += traceback.format_exception_only(type(error), error)
    sys.stderr.write("".join(lines))


def _redirect(folder: str) -> tuple[int, int]:
    """fds 1 and 2 onto the rank folder's out and err; the saved ones returned."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    for fd, name in ((1, "out"), (2, "err")):
        target = os.open(
            os.path.join(folder, name), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600
        )
        os.dup2(target, fd)
        os.close(target)
    return saved


def _restore(saved: tuple[int, int]) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    for fd, old in zip((1, 2), saved, strict=True):
        os.dup2(old, fd)
        os.close(old)


def _write_status(folder: str, returncode: int) -> None:
    try:
        fd = os.open(os.path.join(folder, "status"), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, f"{returncode} {time.time()}\n".encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def run_cell(server: Server, request: dict[str, Any]) -> dict[str, Any]:
    filename, folder = str(request["filename"]), str(request["folder"])
    code, first_line = str(request["code"]), int(request.get("first_line", 1))
    saved = _redirect(folder)
    server.filename = filename
    returncode, value, error = 0, None, None
    try:
        if server.note:
            sys.stdout.write(server.note)
            server.note = None
        _cache_source(code, filename, first_line)
        server.executing = True
        try:
            body, last = _compile(code, filename, first_line)
            exec(body, server.ns)
            if last is not None:
                result = eval(last, server.ns)
                if result is not None:
                    server.ns["_"] = result
                    value = _shown(result)
        finally:
            server.executing = False
    except SystemExit as exit_:
        code_ = exit_.code
        returncode = code_ if isinstance(code_, int) else (0 if code_ is None else 1)
        if returncode:
            error = f"SystemExit: {code_}"
    except KeyboardInterrupt as interrupt:
        _print_traceback(interrupt, filename)
        returncode, error = 130, _cell_error(interrupt, filename)
    except BaseException as failure:
        _print_traceback(failure, filename)
        returncode, error = 1, _cell_error(failure, filename)
    finally:
        _restore(saved)
        _write_status(folder, returncode)
    return {"rc": returncode, "value": value, "error": error}


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as error:
        text = f"<repr failed: {type(error).__name__}: {error}>"
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + "…"


def portable(value: Any) -> Any:
    """``value`` with torch tensors (also in plain lists, tuples and dicts) moved to the CPU."""
    kind = type(value)
    if kind.__module__.startswith("torch") and hasattr(value, "detach") and hasattr(value, "cpu"):
        return value.detach().cpu()
    if kind is list or kind is tuple:
        return kind(portable(v) for v in value)
    if kind is dict:
        return {k: portable(v) for k, v in value.items()}
    return value


def _dumps(value: Any) -> bytes:
    try:  # by value what the cells defined (their classes live in this process's __main__)
        import cloudpickle

        return bytes(cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except ImportError:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def evaluate(server: Server, expr: str, max_bytes: int) -> dict[str, Any]:
    try:
        server.executing = True
        try:
            value = eval(compile(expr, "<pull>", "eval"), server.ns)
        finally:
            server.executing = False
        data = _dumps(portable(value))
    except BaseException as error:
        return {"error": "".join(traceback.format_exception_only(type(error), error)).strip()}
    if len(data) > max_bytes:
        return {
            "error": f"the value is {len(data) / 1e6:.1f} MB pickled, over the {max_bytes / 1e6:.1f} MB "
            "limit (--max-bytes raises it)"
        }
    return {"data": data}


def receive(server: Server, items: dict[str, bytes]) -> dict[str, Any]:
    try:
        values = {name: pickle.loads(data) for name, data in items.items()}
    except BaseException as error:
        return {"error": f"could not unpickle: {type(error).__name__}: {error}"}
    server.ns.update(values)
    return {"names": sorted(values)}


# ── a rank blocked in C++: named, freed, its process group made anew ─────
def where_blocked(filename: str) -> dict[str, Any]:
    """Where the main thread is: ``all_reduce (gloo) at cell line 5``. The innermost frame of
    ``torch.distributed`` names the collective; else the innermost frame of torch (autograd's
    backward, where DDP's reducer all-reduces), else the innermost frame at all; with the cell's
    line. Read from the listener thread while the main thread may be blocked in C++."""
    frame = sys._current_frames().get(threading.main_thread().ident or 0)  # noqa: SLF001 - a thread's frame
    if frame is None:
        return {"where": "", "backend": None}
    stack = traceback.extract_stack(frame)
    line = next((f.lineno for f in reversed(stack) if f.filename == filename), None)
    torch_frames = [f for f in stack if f"{os.sep}torch{os.sep}" in f.filename]
    c10d = [f for f in torch_frames if f"{os.sep}distributed{os.sep}" in f.filename and f.name != "wrapper"]
    chosen = (c10d or torch_frames or stack)[-1]
    backend = None
    dist = sys.modules.get("torch.distributed")
    if dist is not None:
        with contextlib.suppress(Exception):
            backend = str(dist.get_backend()) if dist.is_initialized() else None
    if chosen.name == "_engine_run_backward" or chosen.filename.endswith(f"autograd{os.sep}__init__.py"):
        what = "backward (autograd; DDP all-reduces gradients here)"
    else:
        what = chosen.name
    if backend and c10d:
        what += f" ({backend})"
    return {"where": what + (f" at cell line {line}" if line else ""), "backend": backend}


TCP_LISTEN = "0A"  # a listening socket's state in /proc/net/tcp


def _tcp_inodes() -> set[str]:
    """The inodes of this process's connected TCP sockets (IPv4 and IPv6), from
    ``/proc/self/net``. Listening ones are left alone: gloo's listener thread terminates the
    process when its ``accept`` fails (measured: ``accept: Invalid argument``, then abort)."""
    inodes = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            next(f, None)
            for row in f:
                fields = row.split()
                if len(fields) > 9 and fields[3] != TCP_LISTEN:
                    inodes.add(fields[9])
    return inodes


def shutdown_tcp() -> int:
    """Shut down every connected TCP socket of this process: a gloo collective blocked on a peer that
    will never answer raises at once (``Connection closed by peer``), the process and its
    Python state live on (measured: abort/destroy of the group does not unblock it). The
    store's connection goes too, so a new group needs a new store (:func:`regroup`). How many."""
    inodes = _tcp_inodes()
    closed = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if not target.startswith("socket:[") or target[8:-1] not in inodes:
            continue
        try:
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # on the socket, not the descriptor: every fd of it
            closed += 1
        sock.close()
    return closed


def regroup(server: Server, addr: str, port: int, timeout: float) -> dict[str, Any]:
    """The default process group made anew on a fresh store (``addr:port``), same backend,
    rank and world size, and every ``DistributedDataParallel`` of the namespace wrapped again
    on it (its constructor broadcasts rank 0's weights: every rank the same). Every other
    variable is kept. All ranks must ask at once: it is a collective."""
    import datetime

    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return {"error": "torch.distributed is not imported in this namespace: no process group to make anew"}
    backend = None
    with contextlib.suppress(Exception):
        backend = str(dist.get_backend()) if dist.is_initialized() else None
    if dist.is_initialized():
        with contextlib.suppress(Exception):
            dist.destroy_process_group()
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        return {"error": "RANK and WORLD_SIZE are not set: a --torch session sets them"}
    backend = backend or ("nccl" if _cuda() else "gloo")
    server.executing = True
    try:
        dist.init_process_group(
            backend,
            init_method=f"tcp://{addr}:{port}",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=timeout),
        )
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = addr, str(port)
        rewrapped = _rewrap_ddp(server.ns)
    except BaseException as error:
        return {"error": "".join(traceback.format_exception_only(type(error), error)).strip()}
    finally:
        server.executing = False
    return {"backend": backend, "world": world, "rewrapped": rewrapped}


def _cuda() -> bool:
    torch = sys.modules.get("torch")
    with contextlib.suppress(Exception):
        return bool(torch is not None and torch.cuda.is_available())
    return False


def _rewrap_ddp(ns: dict[str, Any]) -> list[str]:
    """Each global ``DistributedDataParallel`` wrapped again on the new default group, as it
    was made (its module, devices and flags): its old reducer is bound to the group just
    destroyed. The optimizer keeps working: the parameters are the same objects."""
    ddp = sys.modules.get("torch.nn.parallel")
    kind = getattr(ddp, "DistributedDataParallel", None)
    if kind is None:
        return []
    names = []
    for name, value in list(ns.items()):
        if isinstance(value, kind):
            ns[name] = kind(
                value.module,
                device_ids=value.device_ids,
                output_device=value.output_device,
                broadcast_buffers=value.broadcast_buffers,
                find_unused_parameters=value.find_unused_parameters,
                gradient_as_bucket_view=value.gradient_as_bucket_view,
                static_graph=value.static_graph,
                dim=value.dim,
                bucket_cap_mb=value.bucket_bytes_cap / (1 << 20),
            )
            names.append(name)
    return names


def main(sock_path: str, owner: int, owner_ticks: int | None) -> None:
    """Serve until stopped: what the ``python -c`` started by :mod:`.session` runs."""
    server = Server(sock_path, owner, owner_ticks)
    signal.signal(signal.SIGINT, server.on_sigint)
    sys.breakpointhook = breakpoint_hook(server)
    listener = server.listen()
    threading.Thread(target=server.accept_loop, args=(listener,), daemon=True, name="session-listen").start()
    threading.Thread(target=server.watch_owner, daemon=True, name="session-owner").start()
    print(f"session server pid {os.getpid()} on {sock_path}", flush=True)
    server.serve()
