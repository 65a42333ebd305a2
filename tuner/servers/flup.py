"""flup: WSGI over FastCGI, reached only through a front (nginx's `fastcgi_pass`).

flup speaks FastCGI, not HTTP, so the tuner measures it behind `--front nginx` only, bound over
TCP or a unix socket. Its two servers are the modes here: `threaded` (`flup.server.fcgi`, a
thread per open connection) and `prefork` (`flup.server.fcgi_fork`, a child per connection).
Defaults are flup's; the `2*cpus+1` rule is prefork with that many children. The deployable
file is the launcher a trial runs, which also stops flup promptly and keeps its children in
the server's process group. How flup behaves on Python 3 (which settings act, why kept
connections starve, Nagle's 40 ms, its signal handling), as measured: docs/pages/servers.md,
"flup: FastCGI behind nginx".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from tuner.apps import AppRef
from tuner.errors import ConfigError
from tuner.servers.base import (
    BASELINE_DEFAULT,
    BASELINE_FORK_RULE,
    DIRECT,
    Baseline,
    Bind,
    LaunchSpec,
    ProcessModel,
    Protocol,
    StartupSigns,
    Transport,
    worker_counts,
)
from tuner.servers.grids import product_grid
from tuner.servers.pylauncher import (
    APP_IMPORT_FAILED,
    DIE_WITH_PARENT,
    PYTHON,
    PythonLauncherAdapter,
    constant,
)
from tuner.servers.setting_builders import BOOL, CHOICE, INT
from tuner.settings import SettingsTable, Value

SIGNS = StartupSigns(
    # Python's "OSError: [Errno 98] Address already in use" from flup's bind.
    port_in_use=("Address already in use",),
    # flup's PreforkServer: "ValueError: minSpare must be at least 1!" and the like.
    rejected_value=("ValueError",),
    app_broken_exit_codes=frozenset({APP_IMPORT_FAILED}),
)

SETTINGS = SettingsTable(
    "flup",
    (
        PYTHON.value(
            "mode",
            CHOICE,
            "threaded",
            "threaded: flup.server.fcgi, one process, a thread per open connection; prefork: "
            "flup.server.fcgi_fork, a child process per open connection",
            choices=("threaded", "prefork"),
        ),
        PYTHON.value(
            "max_spare",
            INT,
            5,
            "threaded: idle threads kept (started up front); prefork: child processes (on "
            "Python 3 flup forks exactly this many)",
            minimum=1,
        ),
        PYTHON.value(
            "min_spare",
            INT,
            1,
            "idle threads (threaded) or children (prefork) flup keeps ready at least",
            minimum=1,
        ),
        PYTHON.value(
            "max_threads",
            INT,
            0,
            "threaded: most threads, one per open connection; a connection past it is closed "
            "at once (nginx answers 502); 0 = no limit, flup's default",
            minimum=0,
        ),
        PYTHON.value(
            "max_children",
            INT,
            50,
            "prefork: most child processes (flup's accounting ignores it on Python 3)",
            minimum=1,
        ),
        PYTHON.value(
            "max_requests",
            INT,
            0,
            "prefork: a child exits after this many connections (not requests) and another "
            "is forked; 0 = never",
            minimum=0,
        ),
        PYTHON.value(
            "nodelay",
            BOOL,
            False,
            "TCP_NODELAY on accepted connections (set on the listening socket, which they "
            "inherit); off, as in flup, a response's last record on a kept connection waits "
            "for a delayed ACK (~40 ms)",
        ),
        PYTHON.value(
            "multiplexed",
            BOOL,
            False,
            "threaded: several requests at once on one connection (a thread each); nginx "
            "never multiplexes, so on it only adds a thread per request",
        ),
    ),
)

# The launcher's program, after its settings block.
_BODY = f"""
import signal
import socket

if {constant("mode")} == "prefork":
    from flup.server.fcgi_fork import WSGIServer
else:
    from flup.server.fcgi import WSGIServer

{DIE_WITH_PARENT}

def stop(signum, frame):
    # flup's own handlers only set a flag that its loop reads after select() returns, and
    # Python 3 resumes select() after a handler (PEP 475): an idle prefork master would never
    # stop, and the threaded server waits for nginx to close the connections it keeps.
    raise SystemExit(0)


class Server(WSGIServer):
    def run(self):
        self.group, self.master = os.getpgrp(), os.getpid()
        return super().run()

    def _setupSocket(self):
        sock = super()._setupSocket()
        if {constant("nodelay")} and sock.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _installSignalHandlers(self):
        super()._installSignalHandlers()  # saves the handlers that children restore
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, stop)

    def _child(self, sock, parent):
        # flup gives each prefork child a process group of its own; back in the server's, a
        # signal to the group reaches it, and the kernel stops it when the master dies.
        os.setpgid(0, self.group)
        if not die_with(self.master, signal.SIGTERM):
            return
        super()._child(sock, parent)


if {constant("mode")} == "prefork":
    pool = dict(
        minSpare={constant("min_spare")},
        maxSpare={constant("max_spare")},
        maxChildren={constant("max_children")},
        maxRequests={constant("max_requests")},
    )
else:
    pool = dict(
        minSpare={constant("min_spare")},
        maxSpare={constant("max_spare")},
        maxThreads={constant("max_threads")} or sys.maxsize,
    )
server = Server(
    app,
    bindAddress=SOCKET or (HOST, PORT),
    multiplexed={constant("multiplexed")},
    **pool,
)
where = f"unix:{{SOCKET}}" if SOCKET else f"{{HOST}}:{{PORT}}"
print(f"flup {{{constant("mode")}}} FastCGI server on {{where}}", flush=True)
server.run()
"""


class FlupAdapter(PythonLauncherAdapter):
    name = "flup"
    # Not flup.py: `python3 flup.py` would import itself as `flup`.
    artifact_filename = "flup_server.py"
    table = SETTINGS
    module = "flup.server.fcgi"
    distribution = "flup"
    install_hint = "pip install flup"
    process_model = ProcessModel(
        forks_workers=True, processes="max_spare", threads=None, kind_label="mode"
    )
    binds = frozenset((transport, Protocol.FASTCGI) for transport in Transport)
    notice = (
        "flup speaks FastCGI only: run it behind nginx (fastcgi_pass; the nginx-flup.conf",
        "written beside this file). SIGTERM or SIGINT stops it and every child at once.",
    )

    # --- settings and process model ---------------------------------------------------------

    def check_combination(self, values: Mapping[str, Value]) -> None:
        if int(values["min_spare"]) > int(values["max_spare"]):
            raise ConfigError(
                f"min_spare={values['min_spare']} above max_spare={values['max_spare']}: "
                "flup keeps between min_spare and max_spare idle threads or children"
            )

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        return str(values["mode"])

    def processes(self, values: Mapping[str, Value]) -> int:
        return int(values["max_spare"]) if values["mode"] == "prefork" else 1

    def pins_connections(self, values: Mapping[str, Value], *, bind: Bind = DIRECT) -> bool:
        # Both modes give each open connection a thread or a child until nginx closes it, and
        # serve a burst of new ones only past max_spare (see the module's docstring): so the
        # covering config raises max_spare (the process model's count, threads or children).
        return bind.kept_open

    def baselines(self, cpus: float) -> tuple[Baseline, ...]:
        """flup's defaults (threaded), and its prefork server with 2 x cpus + 1 children."""
        children = max(1, round(2 * cpus + 1))
        default = Baseline(BASELINE_DEFAULT, self.resolve({}), "flup's own defaults (threaded)")
        rule = Baseline(
            BASELINE_FORK_RULE,
            self.resolve({"mode": "prefork", "max_spare": children}),
            f"prefork with {children} children = 2 x {cpus:g} CPUs + 1, the folk rule for "
            "pre-forking servers",
        )
        return (default, rule)

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        """Threaded: spare threads by thread limit (18); prefork: every child count by
        recycling on or off (16)."""
        threaded = product_grid(
            {"mode": ("threaded",), "max_spare": (1, 2, 5, 16, 32, 64), "max_threads": (0, 16, 64)}
        )
        prefork = product_grid(
            {"mode": ("prefork",), "max_spare": worker_counts(cpus), "max_requests": (0, 1000)}
        )
        return threaded + prefork

    # --- running: FastCGI only, at the bind a front reaches it by -----------------------------

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        return replace(super()._launch(app, bind, values, workdir), signs=SIGNS)

    def address_lines(self, app: AppRef, bind: Bind) -> list[str]:
        return [
            "# EDIT for your deployment: the app's folder, and where nginx reaches the server: the",
            "# unix socket SOCKET (its folder must exist; flup replaces a file left there, and",
            "# nginx's user must be able to write to it), or HOST and PORT when SOCKET is None.",
            f"APP_DIR = {app.pythonpath!r}",
            f"SOCKET = {bind.path!r}",
            f"HOST = {bind.host!r}",
            f"PORT = {bind.port!r}",
        ]

    def server_code(self, values: Mapping[str, Value]) -> list[str]:
        return _BODY.lstrip("\n").splitlines()

    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        return replace(super()._artifact_launch(path, app, bind, values), signs=SIGNS)

    def artifact_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        return [self.executable(), "-m", "py_compile", str(path)]
