"""The engine interface and the process helpers every engine module shares.

An engine module subclasses `Engine`, fills in a few hooks (`command`,
`signature`, `prepare`, `healthy`, optionally `ensure_credential`) and
exposes `ENGINE = <instance>`. The base class implements the verbs
(`start`, `stop`, `status`, `reset`) once on top of those hooks.

Everything an engine owns lives under `engines_dir() / <name>`: data, log,
pid file and generated config. A pid file holds "<pid> <start time>"; a pid
counts as ours only while that process still has the recorded start time and
a command line containing the engine's signature, so a reused pid (or a
system server on another port) is never signalled.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parents[2]


def engines_dir() -> Path:
    """Root of all engine state: `<repo>/.devstack/engines`.

    DEVSTACK_ENGINES_DIR overrides it so tests never touch a developer's
    engine data; it must be traversable by the postgres OS user.
    """
    override = os.environ.get("DEVSTACK_ENGINES_DIR")
    return Path(override) if override else REPO_ROOT / ".devstack" / "engines"


def tls_dir() -> Path:
    """Where `tools.engines.tls` keeps the CA and certificates engines started with `--tls` serve."""
    return engines_dir() / "tls"


@dataclass(frozen=True)
class TlsFiles:
    """Paths of one set of PEM files (made by `tools.engines.tls.ensure_tls_files`); `ca` is what clients trust."""

    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca-key.pem"

    @property
    def cert(self) -> Path:
        return self.dir / "server.pem"

    @property
    def key(self) -> Path:
        return self.dir / "server-key.pem"

    @property
    def client_cert(self) -> Path:
        return self.dir / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.dir / "client-key.pem"


class Credential(Protocol):
    """What an engine needs of `tools.engines.credentials.AdminCredential`."""

    user: str
    password: str


class EngineError(RuntimeError):
    """A verb failed; the message names the engine, its address and its log."""


@dataclass(frozen=True)
class EngineStatus:
    """A point-in-time report; `healthy` is only ever true when `running`."""

    name: str
    running: bool
    healthy: bool
    address: str
    pid: int | None
    data_dir: Path
    tls: bool = False

    def line(self) -> str:
        """One human-readable line: name, state, address (and `tls` when it serves TLS), pid, data dir."""
        state = "running" if self.healthy else "unhealthy" if self.running else "stopped"
        pid = str(self.pid) if self.running else "-"
        address = f"{self.address} tls" if self.tls and self.running else self.address
        return f"{self.name:<10} {state:<9} {address:<15} pid {pid:<7} {self.data_dir}"


class Engine:
    """A local server process that one machine runs once and all projects share."""

    name: str
    port: int
    extra_ports: tuple[int, ...] = ()  # other ports the server binds (console, monitor, controller)
    start_timeout = 30.0  # seconds from launch to healthy; prepare() is not counted
    stop_timeout = 20.0  # seconds from stop_signal to SIGKILL
    stop_signal = signal.SIGTERM

    # --- paths ---------------------------------------------------------
    @property
    def dir(self) -> Path:
        return engines_dir() / self.name

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log_file(self) -> Path:
        return self.dir / f"{self.name}.log"

    @property
    def pid_file(self) -> Path:
        return self.dir / f"{self.name}.pid"

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def tls_marker(self) -> Path:
        """Present while the engine was last started with `--tls`: status and health then speak TLS too."""
        return self.dir / "tls-enabled"

    @property
    def tls(self) -> TlsFiles | None:
        """The TLS files the server serves with, or None when it serves plaintext."""
        return TlsFiles(tls_dir()) if self.tls_marker.exists() else None

    def _choose_tls(self, enabled: bool) -> None:
        if enabled:
            if not TlsFiles(tls_dir()).ca.exists():
                raise self.error("start", f"no TLS files in {tls_dir()}: start it with python -m tools.engines "
                                          "start --tls, which makes them")
            self.tls_marker.write_text("on\n")
        else:
            self.tls_marker.unlink(missing_ok=True)

    # --- hooks ---------------------------------------------------------
    def command(self) -> list[str]:
        """argv of the server; runs in the foreground and never holds a secret."""
        raise NotImplementedError

    def signature(self) -> list[str]:
        """Substrings that /proc/PID/cmdline of our server (and no other) contains."""
        raise NotImplementedError

    def prepare(self, credential: Credential | None) -> None:
        """Create dirs and config before launch; secrets only as hashes or 0600 temp files."""

    def healthy(self) -> bool:
        """True when the server answers; must not need the admin credential."""
        return port_open(self.port)

    def ensure_credential(self, credential: Credential | None) -> bool:
        """Make the running server accept `credential`; True when something changed."""
        return False

    def launch_options(self) -> dict:
        """Extra subprocess.Popen keywords (e.g. user/group for postgres); not env."""
        return {}

    def environment(self) -> dict[str, str]:
        """Extra environment for the server, merged over the minimal base one."""
        return {}

    # --- verbs ---------------------------------------------------------
    def start(self, credential: Credential | None, tls: bool = False) -> str:
        """Start unless already running; return only once healthy. `tls`: serve TLS only, with the
        certificates of `tools.engines.tls` (made on first use).

        Idempotent: a running, healthy server is left alone (its admin
        credential is re-checked); one running in the other mode is an error.
        A launch that does not become healthy within start_timeout is stopped
        again and raises EngineError.
        """
        with self._locked():
            return self._start(credential, tls)

    def stop(self) -> str:
        """Stop the process our pid file names, if it is still ours; never any other."""
        with self._locked():
            return self._stop()

    def status(self) -> EngineStatus:
        pid = self.running_pid()
        healthy = pid is not None and self.healthy()
        return EngineStatus(self.name, pid is not None, healthy, self.address, pid, self.data_dir, self.tls is not None)

    def reset(self) -> str:
        """Delete this engine's data (`reset_paths`, nothing else); refuses while the engine runs."""
        with self._locked():
            if self.running_pid() is not None:
                raise self.error("reset", f"it is running; stop it first: python -m tools.engines stop {self.name}")
            paths = self.reset_paths()
            for path in paths:
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        return f"{self.name}: deleted {', '.join(str(path) for path in paths)}"

    def reset_paths(self) -> list[Path]:
        """What `reset` deletes: the data dir, and anything that means nothing without it."""
        return [self.data_dir]

    # --- helpers -------------------------------------------------------
    def _start(self, credential: Credential | None, tls: bool = False) -> str:
        pid = self.running_pid()
        if pid is not None and (self.tls is not None) != tls:
            mode, again = ("with", "without --tls") if self.tls else ("without", "with --tls")
            raise self.error("start", f"it is running {mode} TLS; stop it first (python -m tools.engines stop "
                                      f"{self.name}), then start it again {again}")
        if pid is not None:
            self._wait_healthy(pid, None)
            note = ", admin credential re-applied" if self.ensure_credential(credential) else ""
            return f"{self.name}: already running on {self.address} (pid {pid}{note})"
        for port in (self.port, *self.extra_ports):
            if not port_free(port):
                raise self.error("start", f"port {port} is in use by a process we did not start "
                                          f"(see it with: ss -tanp 'sport = :{port}')")
        began = time.monotonic()
        self._choose_tls(tls)
        self.prepare(credential)
        proc = self._launch()
        try:
            self._wait_healthy(proc.pid, proc)
            self.ensure_credential(credential)
        except BaseException:
            self._terminate(proc.pid)
            self.pid_file.unlink(missing_ok=True)
            raise
        took = time.monotonic() - began
        over = " with TLS" if tls else ""
        return f"{self.name}: started on {self.address}{over} (pid {proc.pid}) in {took:.1f}s"

    def _stop(self) -> str:
        pid = self.running_pid()
        stale = self.pid_file.exists() and pid is None
        if pid is not None:
            self._terminate(pid)
        self.pid_file.unlink(missing_ok=True)
        if pid is None:
            return f"{self.name}: not running" + (" (removed stale pid file)" if stale else "")
        return f"{self.name}: stopped (pid {pid})"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialize start/stop/reset of this engine across processes, so two
        concurrent starts cannot both launch (the second sees the first's server)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / ".lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def error(self, verb: str, cause: str) -> EngineError:
        """The one error shape: what failed, where, and which log to read."""
        return EngineError(f"cannot {verb} {self.name} on {self.address}: {cause} (log: {self.log_file})")

    def log_tail(self, lines: int = 3) -> str:
        """The last lines of the server log, for errors that would otherwise only point at it."""
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:]) or "(empty)"

    def require(self, credential: Credential | None) -> Credential:
        if credential is None:
            raise self.error("start", "no admin credential for it in the stack config")
        return credential

    def running_pid(self) -> int | None:
        """The pid in our pid file if that process is alive and is our server, else None."""
        try:
            pid_text, _, started_text = self.pid_file.read_text().strip().partition(" ")
            pid, started = int(pid_text), int(started_text)
        except (OSError, ValueError):
            return None
        if process_start_time(pid) != started:
            return None
        cmdline = process_cmdline(pid)
        return pid if all(part in cmdline for part in self.signature()) else None

    def _launch(self) -> subprocess.Popen:
        env = {**base_environment(), **self.environment()}
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.dir, env=env, start_new_session=True, **self.launch_options())
        self.pid_file.write_text(f"{proc.pid} {process_start_time(proc.pid)}\n")
        return proc

    def _wait_healthy(self, pid: int, proc: subprocess.Popen | None) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if process_start_time(pid) is None:
                code = proc.poll() if proc else None
                raise self.error("start", f"the server exited (code {code}) before it was healthy; "
                                          f"its log ends: {self.log_tail()}")
            if self.healthy():
                return
            time.sleep(0.2)
        raise self.error("start", f"not healthy after {self.start_timeout:.0f}s")

    def _terminate(self, pid: int) -> None:
        """stop_signal, bounded wait, then SIGKILL to the session we started."""
        _signal(pid, self.stop_signal)
        if wait_gone(pid, self.stop_timeout):
            return
        # We launched with start_new_session, so our server leads its own
        # process group; killing the group also ends its workers.
        try:
            os.killpg(pid, signal.SIGKILL) if os.getpgid(pid) == pid else os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        if not wait_gone(pid, 5.0):
            raise self.error("stop", f"pid {pid} survived SIGKILL")


def base_environment() -> dict[str, str]:
    """The whole environment a server gets by default: the caller's may carry
    secrets (e.g. PULUMI_CONFIG_PASSPHRASE) that a server, or its OS user,
    has no business reading."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone is fine
        os.kill(pid, sig)


def process_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name, from the state on; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()  # comm may contain spaces and parens


def process_start_time(pid: int) -> int | None:
    """Start time (clock ticks since boot) of a live process; None if gone or a zombie."""
    fields = process_stat(pid)
    return None if fields is None or fields[0] in ("Z", "X") else int(fields[19])


def process_cmdline(pid: int) -> str:
    """argv joined by spaces ('' when unreadable); servers that retitle themselves show the title."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def wait_gone(pid: int, timeout: float) -> bool:
    """Wait until pid has exited (reaping it if it is our child); True if it did."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(ChildProcessError):  # not our child: its parent reaps it
            os.waitpid(pid, os.WNOHANG)
        if process_start_time(pid) is None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def port_open(port: int, host: str = HOST) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def port_free(port: int, host: str = HOST) -> bool:
    """True when a server could listen on host:port now: nothing listens there and no
    connection holds it (binding, not connecting, is what catches the second case)."""
    if port_open(port, host):
        return False
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is fine
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def closed_port(host: str = HOST) -> int:
    """A port on host that nothing listens on (bound, then released: connections are refused)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


# Loopback health checks must never go through an http_proxy from the environment.
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_status(url: str, timeout: float = 2.0, ca: Path | None = None) -> int | None:
    """HTTP status of a GET (error statuses included); None when nothing answers. `ca`: the CA file an
    https server's certificate must chain to (None: the system's)."""
    opener = _NO_PROXY if ca is None else urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=ca)))
    try:
        with opener.open(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return None


def http_json(url: str, timeout: float = 2.0) -> object | None:
    """The JSON body of a successful GET; None when nothing (or no JSON) answers."""
    try:
        with _NO_PROXY.open(url, timeout=timeout) as response:
            return json.load(response)
    except (OSError, ValueError):
        return None


def write_private(path: Path, text: str) -> None:
    """Atomically replace `path` with a file only its owner can read (0600 from creation)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    tmp.replace(path)
