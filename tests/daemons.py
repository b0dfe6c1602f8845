"""Real cluster daemons for tests: an sshd and a single-node Slurm on loopback.

Both run as root without systemd, with every file (keys, configs, pidfiles,
state, spool, logs) in a temporary folder and ports chosen free per test.

Reaping: an environment tag does not cross ssh, so the sshd itself sets the
test's tag on every session (``SetEnv`` in sshd_config); remote workers then
carry it like local ones and ``harness.reap(tag)`` finds them. On top of that
``Sshd.stop`` kills every process listening on a port the test used and every
descendant of the daemon, by PID; Slurm jobs are cancelled and the daemons
stopped by pidfile.

A daemon that cannot start raises ``DaemonError`` saying why: the test fails,
it is never skipped.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"
LOOPBACK_HOSTS = ("127.0.0.1", "127.0.0.2", "127.0.0.3")


class DaemonError(RuntimeError):
    """A test daemon could not start; the message says why and what to install."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _wait_port(host: str, port: int, timeout: float, alive=lambda: True) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            return False
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


# ── process bookkeeping by PID (never by name) ──────────────────────────
def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = _ppid(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def listening_pids(port: int) -> list[int]:
    """PIDs holding a TCP socket bound to ``port`` (any loopback address)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    if not inodes:
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{entry}/fd"):
                target = os.readlink(f"/proc/{entry}/fd/{fd}")
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    pids.append(int(entry))
                    break
        except OSError:
            continue
    return pids


def kill_pids(pids: list[int], grace: float = 1.0) -> None:
    pids = [p for p in set(pids) if p != os.getpid() and p > 1]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def env_pids(key: str, value: str) -> list[int]:
    """PIDs whose environment has ``key=value`` (slurmstepd and job steps inherit SLURM_CONF)."""
    needle = f"{key}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if needle in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                found.append(int(entry))
        except OSError:
            continue
    return found


def _pidfile(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


# ── sshd ────────────────────────────────────────────────────────────────
class Sshd:
    """A real OpenSSH server on 127.0.0.1/.2/.3 at a free port, with its own keys.

    ``ssh_config`` is a client config file: ``ssh -F <ssh_config> 127.0.0.2`` logs
    in as root with the test's key, no host-key prompt. ``known_hosts`` is empty
    unless ``strict=True`` is asked of :meth:`client_config`.
    """

    def __init__(self, folder: Path, tag_env: dict[str, str] | None = None) -> None:
        if not os.path.exists(SSHD):
            raise DaemonError(
                f"{SSHD} is missing: run scripts/setup.sh as root (it installs openssh-server) "
                "or apt-get install --no-install-recommends openssh-server"
            )
        if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
            raise DaemonError("the ssh client is missing: apt-get install openssh-client")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        self.port = free_port()
        self.host_key = self.folder / "host_ed25519"
        self.client_key = self.folder / "id_ed25519"
        self.pidfile = self.folder / "sshd.pid"
        self.log = self.folder / "sshd.log"
        self.config = self.folder / "sshd_config"
        self.ssh_config = self.folder / "ssh_config"
        self.known_hosts = self.folder / "known_hosts"
        self.proc: subprocess.Popen | None = None
        self.ports_used: set[int] = set()  # monarch worker ports, reaped on stop
        for key in (self.host_key, self.client_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        shutil.copy(f"{self.client_key}.pub", self.folder / "authorized_keys")
        self.known_hosts.write_text("")
        setenv = {"SHLVL": "1", **(tag_env or {})}  # SHLVL=1: bash skips ~/.bashrc (pyenv rehash trap)
        self.config.write_text(
            "\n".join(
                [f"Port {self.port}"]
                + [f"ListenAddress {h}" for h in LOOPBACK_HOSTS]
                + [
                    f"HostKey {self.host_key}",
                    f"AuthorizedKeysFile {self.folder / 'authorized_keys'}",
                    "PermitRootLogin prohibit-password",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",
                    f"PidFile {self.pidfile}",
                    "SetEnv " + " ".join(f"{k}={v}" for k, v in setenv.items()),
                    "PrintMotd no",
                    "MaxStartups 100",
                    "MaxSessions 100",
                    "",
                ]
            )
        )
        self.client_config()

    def client_config(self, path: Path | None = None, strict: bool = False) -> Path:
        """Write an ssh client config for this server; ``strict`` refuses unknown host keys."""
        path = path or self.ssh_config
        path.write_text(
            "\n".join(
                [
                    "Host *",
                    f"  Port {self.port}",
                    "  User root",
                    f"  IdentityFile {self.client_key}",
                    "  IdentitiesOnly yes",
                    f"  StrictHostKeyChecking {'yes' if strict else 'no'}",
                    f"  UserKnownHostsFile {self.known_hosts if not strict else path.with_suffix('.known_hosts')}",
                    "  BatchMode yes",
                    "  LogLevel ERROR",
                    "  ConnectTimeout 5",
                    "",
                ]
            )
        )
        if strict:
            path.with_suffix(".known_hosts").write_text("")
        return path

    def start(self, timeout: float = 10.0) -> "Sshd":
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege-separation dir
        check = subprocess.run([SSHD, "-t", "-f", str(self.config)], capture_output=True, text=True)
        if check.returncode != 0:
            raise DaemonError(f"sshd rejected its config {self.config}: {check.stderr.strip()}")
        # -D: stay in the foreground as our child, so its PID is ours to kill.
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-f", str(self.config), "-E", str(self.log)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        if not all(_wait_port(h, self.port, timeout, lambda: self.proc.poll() is None) for h in LOOPBACK_HOSTS):
            log = self.log.read_text() if self.log.exists() else ""
            self.stop()
            raise DaemonError(f"sshd did not listen on {LOOPBACK_HOSTS} port {self.port} within {timeout} s: {log[-800:]}")
        probe = self.ssh("127.0.0.2", "echo ok", timeout=20)
        if probe.returncode != 0 or probe.stdout.strip() != "ok":
            log = self.log.read_text() if self.log.exists() else ""
            self.stop()
            raise DaemonError(f"ssh to the test sshd failed (rc {probe.returncode}): {probe.stderr.strip()} {log[-800:]}")
        return self

    def ssh(self, host: str, command: str, timeout: float = 20) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ssh", "-F", str(self.ssh_config), host, "-n", command],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def stop(self) -> None:
        """Kill the sessions' processes, whatever listens on the worker ports, then sshd."""
        pids: list[int] = []
        root = self.proc.pid if self.proc is not None else _pidfile(self.pidfile)
        if root:
            pids += descendants(root)
        for port in self.ports_used:
            pids += listening_pids(port)
        kill_pids(pids)
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(5)
        elif root:
            kill_pids([root])


# ── Slurm ───────────────────────────────────────────────────────────────
class Slurm:
    """A single-node Slurm (slurmctld + slurmd) with every path in ``folder``.

    ``env`` holds ``SLURM_CONF`` for the clients (sbatch, squeue, scancel).
    ``nodename`` is the node's name (this machine's hostname, as slurmd requires).
    """

    def __init__(self, folder: Path, nodename: str | None = None, cpus: int | None = None) -> None:
        for tool in ("/usr/sbin/slurmctld", "/usr/sbin/slurmd"):
            if not os.path.exists(tool):
                raise DaemonError(
                    f"{tool} is missing: run scripts/setup.sh as root (it installs slurmctld slurmd slurm-client)"
                )
        if shutil.which("sbatch") is None:
            raise DaemonError("sbatch is missing: apt-get install --no-install-recommends slurm-client")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.nodename = nodename or socket.gethostname()
        self.cpus = cpus or os.cpu_count() or 1
        self.ctld_port = free_port()
        self.slurmd_port = free_port()
        for sub in ("state", "spool", "log"):
            (self.folder / sub).mkdir(exist_ok=True)
        self.conf = self.folder / "slurm.conf"
        self.ctld_pid = self.folder / "slurmctld.pid"
        self.slurmd_pid = self.folder / "slurmd.pid"
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=mjtest",
                    f"SlurmctldHost={self.nodename}(127.0.0.1)",
                    f"SlurmctldPort={self.ctld_port}",
                    f"SlurmdPort={self.slurmd_port}",
                    "AuthType=auth/none",
                    "CredType=cred/none",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_CPU",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "MpiDefault=none",
                    "ReturnToService=2",
                    "SchedulerType=sched/builtin",
                    "MinJobAge=2",
                    f"StateSaveLocation={self.folder / 'state'}",
                    f"SlurmdSpoolDir={self.folder / 'spool'}",
                    f"SlurmctldPidFile={self.ctld_pid}",
                    f"SlurmdPidFile={self.slurmd_pid}",
                    f"SlurmctldLogFile={self.folder / 'log' / 'slurmctld.log'}",
                    f"SlurmdLogFile={self.folder / 'log' / 'slurmd.log'}",
                    f"NodeName={self.nodename} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN",
                    f"PartitionName=debug Nodes={self.nodename} Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )
        self.env = {"SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen] = []

    def _client(self, *argv: str, timeout: float = 20) -> subprocess.CompletedProcess:
        # cwd: sbatch --wrap writes slurm-N.out there
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **self.env}, cwd=self.folder)

    def start(self, timeout: float = 30.0) -> "Slurm":
        env = {**os.environ, **self.env}
        for argv in (
            ["/usr/sbin/slurmctld", "-D", "-i", "-f", str(self.conf)],
            ["/usr/sbin/slurmd", "-D", "-f", str(self.conf), "-N", self.nodename],
        ):
            self.procs.append(subprocess.Popen(
                argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=open(self.folder / "log" / (Path(argv[0]).name + ".err"), "wb"),
                start_new_session=True,
            ))
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                break
            out = self._client("sinfo", "-h", "-N", "-o", "%t")
            last = (out.stdout + out.stderr).strip()
            if out.returncode == 0 and last.split() and last.split()[0].rstrip("*") in ("idle", "mix", "alloc"):
                return self
            time.sleep(0.3)
        logs = " | ".join(
            p.read_text()[-600:] for p in sorted((self.folder / "log").glob("*")) if p.is_file()
        )
        self.stop()
        raise DaemonError(f"single-node Slurm did not become idle within {timeout} s (sinfo: {last!r}); logs: {logs}")

    def queue(self) -> list[str]:
        """Job ids still in the queue (any state)."""
        out = self._client("squeue", "-h", "-o", "%i %T")
        return [line for line in out.stdout.splitlines() if line.strip()]

    def stop(self) -> None:
        try:
            ids = [line.split()[0] for line in self.queue()]
            if ids:
                self._client("scancel", *ids)
        except Exception:
            pass
        pids: list[int] = []
        for proc in self.procs:
            pids += descendants(proc.pid)
        for pidfile in (self.ctld_pid, self.slurmd_pid):
            pid = _pidfile(pidfile)
            if pid:
                pids += descendants(pid) + [pid]
        # slurmstepd daemonizes (no longer our descendant) and, like the job's processes,
        # carries our SLURM_CONF: reap those too, after the daemons.
        kill_pids(pids + [p.pid for p in self.procs])
        kill_pids(env_pids("SLURM_CONF", str(self.conf)))
        for proc in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
