"""Tornado's HTTP server running a WSGI app through `tornado.wsgi.WSGIContainer`, from a launcher.

Tornado (6.3+) serves WSGI one of two ways, read from `tornado/wsgi.py`: without an executor
(its default until 7.0) the app runs on the I/O loop's own thread, so a process serves one
request at a time and a blocking wait stops everything; with a `concurrent.futures` executor
(`WSGIContainer(app, executor=ThreadPoolExecutor(n))`) the app and each chunk of its response
run on the pool while the loop keeps reading and writing. Processes come from
`tornado.process.fork_processes`, in the pattern its `HTTPServer` docstring recommends (bind,
fork, then `add_sockets` with a loop made after the fork), or with `reuse_port` each process
binds its own SO_REUSEPORT socket and the kernel spreads the connections.

Tornado has no command that serves a WSGI app, so the deployable file is a Python launcher:
the one a trial runs. `fork_processes` restarts a child that dies abnormally and leaves its
children running when the parent is killed, so each child asks the kernel to stop it when
the parent dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from tuner.servers.base import ProcessModel
from tuner.servers.grids import product_grid
from tuner.servers.pylauncher import DIE_WITH_PARENT, PYTHON, PythonLauncherAdapter, constant
from tuner.servers.setting_builders import BOOL, CHOICE, FLOAT, INT
from tuner.settings import SettingsTable, Value

SETTINGS = SettingsTable(
    "tornado",
    (
        PYTHON.value(
            "processes",
            INT,
            1,
            "Tornado processes: 1 = one process, no fork (HTTPServer.start(1)); more = "
            "tornado.process.fork_processes(N), each child with its own I/O loop",
            minimum=1,
        ),
        PYTHON.value(
            "listen_mode",
            CHOICE,
            "shared",
            "shared: one socket bound before forking, every process accepts from it (Tornado's "
            "documented pattern); reuseport: each process binds its own SO_REUSEPORT socket "
            "and the kernel spreads connections over them",
            choices=("shared", "reuseport"),
        ),
        PYTHON.value(
            "threads",
            INT,
            0,
            "threads of the WSGIContainer's ThreadPoolExecutor, which runs the app (0 = no "
            "executor, Tornado's default: the app runs on the I/O loop's thread, one request "
            "at a time per process)",
            minimum=0,
        ),
        PYTHON.value(
            "backlog",
            INT,
            128,
            "listen queue length (bind_sockets; capped by net.core.somaxconn)",
            minimum=1,
        ),
        PYTHON.value(
            "no_keep_alive",
            BOOL,
            False,
            "close every connection after its response (HTTPServer no_keep_alive)",
        ),
        PYTHON.value(
            "access_log",
            BOOL,
            False,
            "a line per request on stderr: the `tornado.access` logger at INFO, as an app that "
            "calls tornado.options.parse_command_line() logs (Tornado alone configures no "
            "logging, so Python drops those lines)",
        ),
        PYTHON.value(
            "idle_connection_timeout",
            FLOAT,
            3600.0,
            "seconds a kept-alive connection may wait for its next request's headers",
            minimum=0.001,
        ),
        PYTHON.value(
            "max_buffer_size",
            INT,
            104857600,
            "bytes a connection may buffer while reading a request (larger ones are refused)",
            minimum=1024,
        ),
        PYTHON.value(
            "decompress_request",
            BOOL,
            False,
            "gunzip request bodies sent with Content-Encoding: gzip before the app reads them",
        ),
    ),
)

# The lines after the prologue (which imports the app and defines HOST, PORT and the tuned
# constants). Nothing may touch an event loop before fork_processes (its docs).
_SERVER_CODE = f"""\
import asyncio
import concurrent.futures
import logging
import signal

import tornado.log
import tornado.netutil
import tornado.process
from tornado.httpserver import HTTPServer
from tornado.wsgi import WSGIContainer

{DIE_WITH_PARENT}

def bind(reuse_port):
    return tornado.netutil.bind_sockets(
        PORT, HOST, backlog={constant("backlog")}, reuse_port=reuse_port
    )


async def serve(sockets):
    # Made after the fork: threads do not survive one.
    executor = (
        concurrent.futures.ThreadPoolExecutor({constant("threads")}, thread_name_prefix="wsgi")
        if {constant("threads")}
        else None
    )
    server = HTTPServer(
        WSGIContainer(app, executor=executor),
        no_keep_alive={constant("no_keep_alive")},
        idle_connection_timeout={constant("idle_connection_timeout")},
        max_buffer_size={constant("max_buffer_size")},
        decompress_request={constant("decompress_request")},
    )
    server.add_sockets(sockets)
    print(f"tornado process {{os.getpid()}} serving on http://{{HOST}}:{{PORT}}", flush=True)
    await asyncio.Event().wait()


tornado.log.enable_pretty_logging()  # Tornado's own log format, on stderr
logging.getLogger("tornado.access").setLevel(
    logging.INFO if {constant("access_log")} else logging.WARNING  # errors are logged either way
)
reuse_port = {constant("processes")} > 1 and {constant("listen_mode")} == "reuseport"
sockets = bind(reuse_port)  # a port already taken fails here, in the parent
if {constant("processes")} > 1:
    parent = os.getpid()
    if reuse_port:
        for sock in sockets:  # each child binds its own
            sock.close()
    tornado.process.fork_processes({constant("processes")})  # returns in each child
    # fork_processes leaves its children serving when the parent is killed.
    if not die_with(parent, signal.SIGTERM):
        os._exit(1)
    if reuse_port:
        sockets = bind(True)
try:
    asyncio.run(serve(sockets))
except KeyboardInterrupt:
    pass
"""


class TornadoAdapter(PythonLauncherAdapter):
    name = "tornado"
    artifact_filename = "tornado_serve.py"
    logging_settings = MappingProxyType({"access_log": False})
    table = SETTINGS
    module = "tornado.wsgi"
    distribution = "tornado"
    install_hint = "pip install tornado"
    process_model = ProcessModel(
        forks_workers=True, processes="processes", threads="threads", kind_label="executor"
    )
    # Tornado has no convention of its own; WEB_CONCURRENCY is gunicorn's and uvicorn's.
    sizing_env = "WEB_CONCURRENCY"

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        return "thread pool" if int(values["threads"]) else "I/O loop"

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        """Process counts by executor threads ("no executor", 0, included), several processes
        both ways to share the port: 35 configs on 1 CPU, 45 on 2. With one shared socket the
        connections spread unevenly (each process's accept loop takes every pending one, up to
        128 at once), and a kept connection stays with its process."""
        threads = (0, 1, 4, 16, 64)
        several = sorted({2, cpus + 1, 2 * cpus + 1, 4 * cpus + 1})
        return product_grid({"processes": (1,), "threads": threads}) + product_grid(
            {"processes": several, "threads": threads, "listen_mode": ("shared", "reuseport")}
        )

    def server_code(self, values: Mapping[str, Value]) -> list[str]:
        return _SERVER_CODE.splitlines()
