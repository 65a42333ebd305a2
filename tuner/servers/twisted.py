"""Twisted's WSGI container: its tunable settings as one table, run from a launcher.

One process: the reactor thread does all network I/O and a thread pool runs the app; every
response goes back through the reactor thread. No setting adds processes, so on a multi-core
machine one Twisted server uses at most one core for Python code (the GIL).

The deployable file is a Python launcher because the WSGI thread pool's size is only settable
from Python: `twist web --wsgi` always builds `ThreadPool()` (5 to 20 threads). Its defaults
are the baseline: those 20 threads, a listen backlog of 50 (Twisted's `listenTCP` default,
below our 64 clients) and an access log line per request on stdout.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from tuner.servers.base import ProcessModel
from tuner.servers.grids import THREAD_STEPS, product_grid
from tuner.servers.pylauncher import PYTHON, PythonLauncherAdapter, constant
from tuner.servers.setting_builders import BOOL, CHOICE, INT
from tuner.settings import SettingsTable, Value

SETTINGS = SettingsTable(
    "twisted",
    (
        PYTHON.value(
            "threads",
            INT,
            20,
            "most threads in the WSGI pool that runs the app (one process)",
            minimum=1,
        ),
        PYTHON.value(
            "min_threads",
            INT,
            5,
            "threads the pool keeps when idle (capped at threads)",
            minimum=0,
        ),
        PYTHON.value(
            "reactor",
            CHOICE,
            "default",
            "the reactor's I/O loop (`twist --reactor`); default is epoll on Linux",
            choices=("default", "epoll", "poll", "select", "asyncio"),
        ),
        PYTHON.value(
            "backlog", INT, 50, "listen queue length (capped by net.core.somaxconn)", minimum=1
        ),
        PYTHON.value(
            "accesslog", BOOL, True, "an access log line per request on stdout (twist web)"
        ),
        PYTHON.value(
            "timeout",
            INT,
            60,
            "seconds a connection may stay idle before it is closed (Site.timeOut)",
            minimum=1,
        ),
    ),
)

# The lines after the prologue (which imports the app and defines HOST, PORT and the tuned
# constants): the same objects `twist web --wsgi` builds, with the pool sized.
_SERVER_CODE = f"""\
from twisted.application.reactors import installReactor

if {constant("reactor")} != "default":
    installReactor({constant("reactor")})  # before anything imports twisted.internet.reactor
from twisted.internet import reactor
from twisted.logger import globalLogBeginner, textFileLogObserver
from twisted.python.threadpool import ThreadPool
from twisted.web.server import Site
from twisted.web.wsgi import WSGIResource

globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stdout)])


class QuietSite(Site):
    def log(self, request):
        pass  # no access log line


pool = ThreadPool(
    minthreads=min({constant("min_threads")}, {constant("threads")}),
    maxthreads={constant("threads")},
    name="wsgi",
)
reactor.callWhenRunning(pool.start)
reactor.addSystemEventTrigger("after", "shutdown", pool.stop)
site = (Site if {constant("accesslog")} else QuietSite)(WSGIResource(reactor, pool, app))
site.timeOut = {constant("timeout")}
reactor.listenTCP(PORT, site, backlog={constant("backlog")}, interface=HOST)
print(f"twisted serving on http://{{HOST}}:{{PORT}}", flush=True)
reactor.run()
"""


class TwistedAdapter(PythonLauncherAdapter):
    name = "twisted"
    artifact_filename = "twisted_serve.py"
    logging_settings = MappingProxyType({"accesslog": False})
    table = SETTINGS
    module = "twisted.web.wsgi"
    distribution = "twisted"
    install_hint = "pip install twisted"
    process_model = ProcessModel(
        forks_workers=False, processes=None, threads="threads", kind_label="access log"
    )
    # One process: the sized launcher scales its pool's threads, and this overrides their
    # count (min_threads is capped at it already).
    sizing_env = "TWISTED_THREADS"

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        return "access log" if values["accesslog"] else "no access log"

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        """Pool size by access log by backlog: 40 configs (one process)."""
        return product_grid(
            {"threads": THREAD_STEPS, "accesslog": (True, False), "backlog": (50, 1024)}
        )

    def server_code(self, values: Mapping[str, Value]) -> list[str]:
        return _SERVER_CODE.splitlines()
