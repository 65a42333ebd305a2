"""cheroot (CherryPy's WSGI server): its tunable settings as one table, run from a launcher.

One process: a selector thread holds idle keep-alive connections and a fixed pool of `threads`
runs requests. No setting adds processes, so on a multi-core machine one cheroot uses at most
one core for Python code (the GIL), however many threads it has.

The deployable file is a Python launcher, not the `cheroot` command, for two reasons found in
cheroot's source: its CLI imports the app before it puts the working folder on sys.path (so
`cheroot app:app` fails with ModuleNotFoundError unless PYTHONPATH is set), and the keep-alive
limit (`keep_alive_conn_limit`, 10 by default) is only settable from Python.
"""

from __future__ import annotations

from collections.abc import Mapping

from tuner.errors import ConfigError
from tuner.servers.base import ProcessModel
from tuner.servers.grids import THREAD_STEPS, product_grid
from tuner.servers.pylauncher import PYTHON, PythonLauncherAdapter, constant
from tuner.servers.setting_builders import BOOL, FLOAT, INT
from tuner.settings import SettingsTable, Value

SETTINGS = SettingsTable(
    "cheroot",
    (
        PYTHON.value(
            "threads", INT, 10, "worker threads that run requests (one process)", minimum=1
        ),
        PYTHON.value(
            "max_threads",
            INT,
            -1,
            "upper bound of the pool (-1 = none); cheroot never grows the pool by itself, so "
            "only `threads` decides how many run",
            minimum=-1,
        ),
        PYTHON.value(
            "request_queue_size",
            INT,
            5,
            "listen backlog (socket.listen); the default 5 overflows as soon as more clients "
            "connect at once, and their SYNs are retried a second later",
            minimum=1,
        ),
        PYTHON.value(
            "keep_alive_conn_limit",
            INT,
            10,
            "idle keep-alive connections kept open at most; past it each response closes its "
            "connection (0 = no limit)",
            minimum=0,
        ),
        PYTHON.value(
            "accepted_queue_size",
            INT,
            -1,
            "connections with a request waiting for a thread at most (-1 = no limit)",
            minimum=-1,
        ),
        PYTHON.value(
            "timeout",
            INT,
            10,
            "seconds a connection may stay silent before it is closed",
            minimum=1,
        ),
        PYTHON.value(
            "expiration_interval",
            FLOAT,
            0.5,
            "seconds between sweeps for expired idle connections",
            minimum=0.01,
        ),
        PYTHON.value("nodelay", BOOL, True, "TCP_NODELAY on accepted connections"),
    ),
)

# The lines after the prologue (which imports the app and defines HOST, PORT and the tuned
# constants). Settings without a constructor argument are attributes.
_SERVER_CODE = f"""\
from cheroot import wsgi

server = wsgi.Server(
    (HOST, PORT),
    app,
    numthreads={constant("threads")},
    max={constant("max_threads")},
    request_queue_size={constant("request_queue_size")},
    timeout={constant("timeout")},
    accepted_queue_size={constant("accepted_queue_size")},
)
# Only settable from Python: cheroot's command line has no flag for these.
server.keep_alive_conn_limit = {constant("keep_alive_conn_limit")} or None  # 0 = no limit
server.expiration_interval = {constant("expiration_interval")}
server.nodelay = {constant("nodelay")}
print(f"cheroot serving on http://{{HOST}}:{{PORT}}", flush=True)
server.safe_start()
"""


class CherootAdapter(PythonLauncherAdapter):
    name = "cheroot"
    artifact_filename = "cheroot_serve.py"
    table = SETTINGS
    module = "cheroot"
    distribution = "cheroot"
    install_hint = "pip install cheroot"
    process_model = ProcessModel(
        forks_workers=False, processes=None, threads="threads", kind_label="keep-alive limit"
    )
    # One process: the sized launcher scales its threads, and this overrides their count.
    sizing_env = "CHEROOT_THREADS"

    def sized_lines(self) -> list[str]:
        # cheroot refuses a pool bound below the pool (check_combination); the sized pool may
        # outgrow the measured bound.
        return ["if 0 < MAX_THREADS < THREADS:", "    MAX_THREADS = THREADS"]

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        limit = int(values["keep_alive_conn_limit"])
        return "keep-alive unlimited" if limit == 0 else f"keep-alive <= {limit}"

    def check_combination(self, values: Mapping[str, Value]) -> None:
        threads, most = int(values["threads"]), int(values["max_threads"])
        if most == 0 or 0 < most < threads:
            raise ConfigError(
                f"cheroot max_threads={most} with threads={threads}: cheroot refuses a "
                "maximum below the pool size (or 0); use -1 (no maximum) or at least threads"
            )

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        """Threads by the keep-alive limit by the backlog (its two traps): 40 configs."""
        return product_grid(
            {
                "threads": THREAD_STEPS,
                "keep_alive_conn_limit": (10, 0),
                "request_queue_size": (5, 1024),
            }
        )

    def server_code(self, values: Mapping[str, Value]) -> list[str]:
        return _SERVER_CODE.splitlines()
