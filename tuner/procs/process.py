"""Run one server process tree: pinned to CPUs, ready-checked over HTTP, always fully stopped.

Knows no server: it runs the argv of a `LaunchSpec`, and reads the server's log only through
the `StartupSigns` the spec carries.

Every server runs in its own process group whose leader is a tiny watchdog process. The
watchdog blocks reading a pipe that only the tuner holds open; when the tuner dies, even by
SIGKILL, the kernel closes the pipe and the watchdog SIGKILLs the whole group, workers
included (PR_SET_PDEATHSIG would only reach the master). Because the group exists before the
server starts, there is no moment when a server runs unwatched.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil

from tuner.errors import (
    AppBrokenError,
    OutOfMemory,
    PortInUseError,
    ReadinessTimeout,
    ServerStartError,
    ToolMissingError,
    TrialError,
    TunerError,
)
from tuner.machine.cpus import pinned
from tuner.machine.limits import CLEANER, Cgroup, Limits, Usage
from tuner.procs import bindprobe, listening
from tuner.servers.base import LaunchSpec, StartupSigns

log = logging.getLogger(__name__)

# Ignores every signal the server's group gets on a normal stop (it is the group leader), and
# SIGKILLs its own group once stdin reaches EOF: the tuner either died or dropped the process.
# Its arguments are the server's cgroup folders, if any: their removal goes to a cleaner in a
# session of its own, which the group kill does not reach.
_WATCHDOG = """
import os, signal, sys
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP, signal.SIGUSR1,
            signal.SIGUSR2, signal.SIGWINCH, signal.SIGTTIN, signal.SIGTTOU, signal.SIGPIPE):
    signal.signal(sig, signal.SIG_IGN)
while os.read(0, 4096):
    pass
if len(sys.argv) > 2:
    ready_r, ready_w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        os.close(ready_w)  # the group kill below must wait until this child left the group
        os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", *sys.argv[1:]])
    os.close(ready_w)
    os.read(ready_r, 1)
os.killpg(0, signal.SIGKILL)
"""
# Joins the cgroups named before `--` (writing its pid to each cgroup.procs), then becomes the
# server: the server and all it forks start inside the limits, with no moment outside them.
_JOIN_CGROUP = """
import os, sys
split = sys.argv.index("--")
for procs in sys.argv[1:split]:
    with open(procs, "w") as handle:
        handle.write(str(os.getpid()))
os.execvp(sys.argv[split + 1], sys.argv[split + 1:])
"""

# Servers under test listen here only: every load run stays on this machine.
LOOPBACK = "127.0.0.1"
_READY_PROBE_TIMEOUT_S = 1.0
_BACKOFF_FIRST_S = 0.01
_BACKOFF_CAP_S = 0.25
# Waiting for a server to answer or to exit is on every trial's clock: a poll costs a refused
# connect or a scan of the process table (well under a millisecond), so poll often rather
# than notice up to 250 ms late.
_PROMPT_CAP_S = 0.02
_VERIFY_TIMEOUT_S = 2.0
_STOP_REPEAT_S = 0.5
# A Python exception line ("ModuleNotFoundError: No module named 'x'"): the best one-line
# reason in a traceback.
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")


class LeftoverProcessesError(TunerError):
    """stop() could not make every process of the server go away."""


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nobody listens on right now (the kernel picks it; a race is still possible)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _attempts(deadline: float, cap_s: float = _BACKOFF_CAP_S) -> Iterator[None]:
    """Yields at once, then after sleeps of 10 ms, 20 ms, ... capped at `cap_s`, the last one
    at `deadline`. Polling this way is fast when things are fast and cheap when they are not."""
    delay = min(_BACKOFF_FIRST_S, cap_s)
    while True:
        yield
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, cap_s)


def _argv_in(cgroup: Cgroup | None, argv: Sequence[str]) -> list[str]:
    """`argv`, run from inside `cgroup` when there is one (it enters before it execs)."""
    if cgroup is None:
        return list(argv)
    return [sys.executable, "-I", "-S", "-c", _JOIN_CGROUP, *cgroup.procs_files, "--", *argv]


def _start_watchdog(owned: Cgroup | None) -> subprocess.Popen[bytes]:
    """The watchdog that stops the server's group (and removes `owned`) if the tuner dies."""
    cleaner = [CLEANER, *owned.folders] if owned else []
    return _popen_in_group(
        [sys.executable, "-I", "-S", "-c", _WATCHDOG, *cleaner],
        0,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _popen_in_group(argv: Sequence[str], pgid: int, **kwargs: Any) -> subprocess.Popen:
    """Popen into process group `pgid` (0 = a new group led by the child)."""
    if sys.version_info >= (3, 11):
        return subprocess.Popen(argv, process_group=pgid, **kwargs)
    # Python 3.10 has no process_group; setpgid is async-signal-safe enough for preexec_fn.
    return subprocess.Popen(argv, preexec_fn=lambda: os.setpgid(0, pgid), **kwargs)


def _group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes whose process group is `pgid`."""
    members = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) != pgid:
                continue
            process = psutil.Process(pid)
            if process.status() != psutil.STATUS_ZOMBIE:
                members.append(process)
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return members


def _describe(processes: Sequence[psutil.Process]) -> str:
    parts = []
    for process in processes:
        try:
            parts.append(f"{process.pid} ({' '.join(process.cmdline())[:80]})")
        except psutil.Error:
            parts.append(str(process.pid))
    return ", ".join(parts)


def key_line(log_text: str, signs: StartupSigns | None = None) -> str:
    """The one log line that best says why a server failed: the last Python exception line,
    else the last line with one of the server's own signs, else the last line naming an error,
    else the last line."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    own = (*signs.rejected_value, *signs.port_in_use) if signs else ()
    patterns = [_EXCEPTION_LINE, re.compile(r"error|in use|invalid", re.I)]
    if own:
        patterns.insert(1, re.compile("|".join(re.escape(sign) for sign in own), re.I))
    for pattern in patterns:
        for line in reversed(lines):
            if pattern.search(line):
                return line[:300]
    return lines[-1][:300] if lines else "no log output"


def _exit_description(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with code {returncode}"


class ServerProcess:
    """A started server and its whole process tree; a context manager that always stops it."""

    def __init__(
        self,
        spec: LaunchSpec,
        process: subprocess.Popen,
        watchdog: subprocess.Popen,
        log_path: Path,
        host: str,
        port: int,
        cgroup: Cgroup | None = None,
    ) -> None:
        self.spec = spec
        self.cgroup = cgroup
        # What the kernel counted in the cgroup, read once the tree is gone (None: no cgroup).
        self.final_usage: Usage | None = None
        self.host = host
        self.port = port
        self.log_path = log_path
        self.startup_s = float("nan")
        self._process = process
        self._watchdog = watchdog
        self._pgid = watchdog.pid
        self._stopped = False
        self._stop_lock = threading.Lock()

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.poll()

    @classmethod
    def start(
        cls,
        spec: LaunchSpec,
        *,
        cpus: tuple[int, ...],
        log_path: Path,
        host: str,
        port: int,
        ready_path: str = "/",
        ready_timeout_s: float = 30.0,
        limits: Limits | None = None,
        join: Cgroup | None = None,
    ) -> ServerProcess:
        """Start the server pinned to `cpus` (empty = not pinned), inside a cgroup with
        `limits` if any, and wait until it answers 2xx. `join`: start inside that existing
        cgroup instead (another tree's: the server's, for the front in front of it); it stays
        its owner's to remove.

        Raises ServerStartError (it exited), AppBrokenError (it exited with one of the spec's
        app-broken codes), ReadinessTimeout, ConfigError (CPUs, cgroups) or ToolMissingError;
        in every case nothing of the server is left running, and its cgroup is gone.
        """
        log_path = Path(log_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        if limits and join is not None:
            raise ValueError("a tree starts in a cgroup of its own or joins one, not both")
        spec.write_files()
        cgroup = Cgroup.create(limits) if limits else None  # owned: removed with this tree
        argv = _argv_in(cgroup or join, spec.argv)
        watchdog = _start_watchdog(cgroup)
        started_at = time.monotonic()
        try:
            with pinned(cpus), open(log_path, "wb") as log_file:
                process = _popen_in_group(
                    argv,
                    watchdog.pid,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    cwd=spec.cwd,
                    env={**os.environ, **spec.env},
                )
        except FileNotFoundError as exc:
            _kill_watchdog(watchdog, cgroup)
            raise ToolMissingError(f"{spec.argv[0]} not found: {exc.strerror}") from None
        except BaseException:
            _kill_watchdog(watchdog, cgroup)
            raise
        server = cls(spec, process, watchdog, log_path, host, port, cgroup)
        try:
            server._wait_ready(ready_path, started_at + ready_timeout_s, ready_timeout_s)
        except TrialError as exc:
            server._stop_unready(exc)
            raise
        except BaseException:
            with contextlib.suppress(LeftoverProcessesError):  # logged; keep the first error
                server.stop()
            raise
        server.startup_s = time.monotonic() - started_at
        return server

    def _stop_unready(self, exc: TrialError) -> None:
        """Stop a server that never got ready; raises OutOfMemory if its cgroup OOM-killed it
        meanwhile (the caller re-raises `exc` otherwise)."""
        # A server that could not bind its port serves nothing and may not heed its stop
        # signal while it retries (gunicorn retries for 5 s, queueing signals meanwhile):
        # no grace for it.
        grace_s = 0.0 if isinstance(exc, PortInUseError) else None
        with contextlib.suppress(LeftoverProcessesError):  # logged; keep the first error
            self.stop(grace_s)
        usage = self.final_usage
        if usage is not None and usage.oom_kills and self.cgroup is not None:
            raise OutOfMemory(
                f"{self._program} was OOM-killed while starting ({usage.oom_kills} "
                f"process(es) killed under {self.cgroup.limits.describe()}): "
                f"{str(exc).splitlines()[0]}"
            ) from exc

    def _wait_ready(self, ready_path: str, deadline: float, timeout_s: float) -> None:
        last_problem = "no answer yet"
        for _ in _attempts(deadline, _PROMPT_CAP_S):
            returncode = self._process.poll()
            if returncode is not None:
                raise self._start_failure(returncode)
            answered, last_problem = self._probe(ready_path, deadline)
            # Another process on our port may answer for us: only our own listener counts.
            if answered and self._listens():
                return
            if answered:
                last_problem = f"port {self.port} is answered by a process that is not the server"
            if self._port_taken():
                raise self._port_in_use_error()
        # The process may have exited during the last sleep: that is the better message.
        returncode = self._process.poll()
        if returncode is not None:
            raise self._start_failure(returncode)
        tail = self.log_tail()
        where = self.spec.bind.describe() if self.spec.bind else f"http://{self.host}:{self.port}"
        raise ReadinessTimeout(
            f"{self._program} did not answer 2xx on {where}{ready_path} "
            f"within {timeout_s:g} s ({last_problem}; log: {self.log_path})\n"
            f"last log lines:\n{tail}",
            log_tail=tail,
        )

    def _listens(self) -> bool:
        """Whether a process of this server listens on its port (or its spec's bind)."""
        if self.spec.bind is not None:
            return bindprobe.listens_on(self.pids(), self.spec.bind)
        with contextlib.suppress(OSError):  # no sock_diag here: psutil, 80 ms a call, below
            return listening.listens_on_port(self.pids(), self.port)
        for pid in self.pids():
            try:
                connections = psutil.Process(pid).net_connections(kind="inet")
            except psutil.Error:
                continue
            if any(
                c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == self.port
                for c in connections
            ):
                return True
        return False

    def _port_taken(self) -> bool:
        tail = self.log_tail(40)
        return any(mark in tail for mark in self.spec.signs.port_in_use)

    def _port_in_use_error(self) -> PortInUseError:
        tail = self.log_tail()
        return PortInUseError(
            f"{self._program} could not listen on {self.host}:{self.port}: another process "
            f"holds the port ({key_line(tail, self.spec.signs)}; log: {self.log_path})\n"
            f"last log lines:\n{tail}",
            log_tail=tail,
        )

    def _probe(self, ready_path: str, deadline: float) -> tuple[bool, str]:
        """One real HTTP GET; (True, "") on 2xx, else (False, what went wrong)."""
        timeout = max(0.05, min(_READY_PROBE_TIMEOUT_S, deadline - time.monotonic()))
        if self.spec.bind is not None:  # a unix socket or the uwsgi protocol (behind a front)
            return bindprobe.probe(self.spec.bind, ready_path, timeout)
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            connection.request("GET", ready_path)
            response = connection.getresponse()
            response.read()
        except (OSError, http.client.HTTPException) as exc:
            return False, f"last try: {type(exc).__name__}: {exc}"
        finally:
            connection.close()
        if 200 <= response.status < 300:
            return True, ""
        return False, f"last answer: HTTP {response.status}"

    @property
    def _program(self) -> str:
        return Path(self.spec.argv[0]).name

    def _start_failure(self, returncode: int) -> TunerError:
        """The error for a server that exited while starting. Its first line is the whole
        story (what happened, the log's key line, where the log is); the tail follows."""
        tail = self.log_tail()
        long_tail = self.log_tail(400)
        reason = key_line(tail, self.spec.signs)
        if self._port_taken():
            return self._port_in_use_error()
        signs = self.spec.signs
        marks = signs.app_broken_if_logged.get(returncode, ())
        marks = (marks,) if isinstance(marks, str) else marks
        if returncode in signs.app_broken_exit_codes or any(m in long_tail for m in marks):
            return AppBrokenError(
                f"{self._program} could not load the app (exit code {returncode}): {reason}; "
                f"no server setting can fix that (log: {self.log_path})\n"
                f"last log lines:\n{tail}"
            )
        return ServerStartError(
            f"{self._program} {_exit_description(returncode)} while starting: {reason} "
            f"(log: {self.log_path})\nlast log lines:\n{tail}",
            returncode=returncode,
            log_tail=tail,
        )

    def pids(self) -> list[int]:
        """The master's pid and all its descendants' (empty once the master is gone)."""
        try:
            master = psutil.Process(self._process.pid)
            children = master.children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [master.pid, *(child.pid for child in children)]

    def alive(self) -> bool:
        return self._process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_path, "rb") as log_file:
                log_file.seek(0, os.SEEK_END)
                log_file.seek(max(0, log_file.tell() - 64 * 1024))
                text = log_file.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_s: float | None = None) -> None:
        """Stop the whole tree: stop_signal, grace (`grace_s`, else the spec's), SIGKILL, reap,
        then verify nothing is left.

        Idempotent. Raises LeftoverProcessesError if a process survives SIGKILL.
        """
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
            # Remember the tree before signalling: a process that left the group (setsid)
            # is still found and killed through this list.
            tree = self._snapshot_tree()
            self._signal_group(self.spec.stop_signal)
            grace = self.spec.stop_grace_s if grace_s is None else grace_s
            self._wait_for_exit(time.monotonic() + grace)
            self._signal_group(signal.SIGKILL)
            for process in tree:
                with contextlib.suppress(psutil.Error):
                    process.kill()  # psutil checks the pid was not reused
            with contextlib.suppress(subprocess.TimeoutExpired):  # verified just below
                self._process.wait(timeout=_VERIFY_TIMEOUT_S)
            _kill_watchdog(self._watchdog)
            try:
                self._verify_gone(tree)
            finally:
                self._release_cgroup()
                for folder in self.spec.scratch:
                    shutil.rmtree(folder, ignore_errors=True)
                self._remove_socket()

    def _remove_socket(self) -> None:
        """The unix socket the server listened on, once the server is gone: removed before,
        a server that unlinks its own on stop logs a traceback (gunicorn does)."""
        bind = self.spec.bind
        if bind is not None and bind.path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(bind.path)

    def _release_cgroup(self) -> None:
        if self.cgroup is None:
            return
        self.final_usage = self.cgroup.usage()
        try:
            self.cgroup.remove()
        except OSError as exc:
            log.error("%s", exc)

    def _wait_for_exit(self, deadline: float) -> None:
        """Wait until the master and its group are gone, repeating the stop signal meanwhile.

        A worker still booting when the first signal came may not have its handlers yet
        (gunicorn gevent workers do this); a repeat lets it stop instead of waiting for SIGKILL.
        The repeats are the spec's quick stop signal, if it has one.
        """
        next_repeat = time.monotonic() + _STOP_REPEAT_S
        repeat = self.spec.quick_stop_signal or self.spec.stop_signal
        for _ in _attempts(deadline, _PROMPT_CAP_S):
            members = self._server_members()
            if self._process.poll() is not None and not members:
                return
            if time.monotonic() >= next_repeat:
                next_repeat = time.monotonic() + _STOP_REPEAT_S
                for member in members:
                    if member.pid != self._process.pid:
                        with contextlib.suppress(psutil.Error):
                            member.send_signal(repeat)

    def _snapshot_tree(self) -> list[psutil.Process]:
        tree = []
        for pid in self.pids():
            with contextlib.suppress(psutil.NoSuchProcess):
                tree.append(psutil.Process(pid))
        return tree

    def _server_members(self) -> list[psutil.Process]:
        return [p for p in _group_members(self._pgid) if p.pid != self._watchdog.pid]

    def _signal_group(self, sig: signal.Signals) -> None:
        # The unreaped watchdog holds the group's id, so it cannot belong to anyone else yet.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._pgid, sig)

    def _verify_gone(self, tree: Sequence[psutil.Process]) -> None:
        left: list[psutil.Process] = []
        for _ in _attempts(time.monotonic() + _VERIFY_TIMEOUT_S):
            left = [p for p in tree if _is_running(p)] + self._server_members()
            if not left:
                return
        message = (
            f"{self._program} (pid {self.pid}) left processes running after SIGKILL: "
            f"{_describe(left)}"
        )
        log.error(message)
        raise LeftoverProcessesError(message)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self.stop()
        except LeftoverProcessesError:
            if exc is None:
                raise
            # Already logged; do not hide the error that got us here.


def _is_running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill_watchdog(watchdog: subprocess.Popen, cgroup: Cgroup | None = None) -> None:
    """SIGKILL the watchdog's whole group (itself and anything left in it) and reap it, then
    remove the server's cgroup (empty by then)."""
    if watchdog.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(watchdog.pid, signal.SIGKILL)
    watchdog.wait()
    if watchdog.stdin is not None:
        watchdog.stdin.close()
    if cgroup is not None:
        try:
            cgroup.remove()
        except OSError as exc:
            log.error("%s", exc)
