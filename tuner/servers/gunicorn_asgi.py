"""gunicorn for ASGI apps: a master forks `workers` processes, each running uvicorn's server on
an event loop (the `uvicorn-worker` package; uvicorn's own `uvicorn.workers` is deprecated).

What the worker takes from gunicorn's config (uvicorn_worker 0.4, `UvicornWorker.__init__`):
keepalive (uvicorn's timeout_keep_alive), timeout (how often it tells the master it lives),
max_requests + max_requests_jitter (limit_max_requests), backlog, and the listening sockets
(bind, reuse_port); accesslog, preload_app, gc_freeze and workers are the master's. It
ignores threads, worker_connections and http_parser (uvicorn parses HTTP itself) and speaks
only HTTP, so none of those is in this table. uvicorn's own settings reach the worker only
through its class attribute CONFIG_KWARGS: `UvicornWorker` is loop=auto, http=auto and
`UvicornH11Worker` asyncio, h11; any other combination (or limit_concurrency) is a subclass
that the written gunicorn.conf.py defines itself, so that file is all a deployment needs
besides the packages.
"""

from __future__ import annotations

import importlib.util
import signal
from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from pathlib import Path

from tuner.apps import AppRef, Interface
from tuner.errors import ConfigError
from tuner.logsigns import CutSign
from tuner.servers.base import (
    HTTP_OVER_TCP,
    Bind,
    EventLoops,
    LaunchSpec,
    ProcessModel,
    Protocol,
    Transport,
    shipped_space,
    worker_counts,
)
from tuner.servers.gunicorn import SETTINGS as WSGI_SETTINGS
from tuner.servers.gunicorn import (
    STYLE,
    GunicornAdapter,
    _bind_text,
    check_gc_freeze,
    gc_freeze_hooks,
)
from tuner.servers.setting_builders import CHOICE, INT, unrendered
from tuner.servers.uvicorn import concurrency_cut_sign
from tuner.settings import SettingsTable, Value

# The worker classes uvicorn-worker ships, by the (loop, http) they set.
STOCK_WORKERS = {("auto", "auto"): "UvicornWorker", ("asyncio", "h11"): "UvicornH11Worker"}
# The class a written file (or a trial's worker file) defines for any other combination.
TUNED_WORKER = "TunedUvicornWorker"
# The trial's own small config file that sets the worker class (the rest is on the argv).
WORKER_FILE = "gunicorn-uvicorn-worker.py"
# The C pieces of uvicorn[standard] that loop=auto and http=auto pick where installed.
UVLOOP, HTTPTOOLS = "uvloop", "httptools"


@cache
def installed(module: str) -> bool:
    """`module` importable by this Python, so by the gunicorn the tuner runs."""
    return importlib.util.find_spec(module) is not None


def effective_loop(values: Mapping[str, Value]) -> str:
    """The loop a worker runs: auto is uvloop where it is installed (uvicorn.loops.auto)."""
    loop = str(values["loop"])
    return (UVLOOP if installed(UVLOOP) else "asyncio") if loop == "auto" else loop


def effective_http(values: Mapping[str, Value]) -> str:
    """The HTTP parser: auto is httptools where installed (uvicorn.protocols.http.auto)."""
    http = str(values["http"])
    return (HTTPTOOLS if installed(HTTPTOOLS) else "h11") if http == "auto" else http


SETTINGS = SettingsTable(
    "gunicorn",
    (
        WSGI_SETTINGS.get("workers"),
        unrendered(
            "loop",
            CHOICE,
            "auto",
            "the worker's event loop: auto = uvloop where it is installed, else asyncio",
            choices=("auto", "asyncio", UVLOOP),
        ),
        unrendered(
            "http",
            CHOICE,
            "auto",
            "the worker's HTTP parser: auto = httptools where it is installed, else h11",
            choices=("auto", "h11", HTTPTOOLS),
        ),
        unrendered(
            "limit_concurrency",
            INT,
            0,
            "connections and tasks a worker holds at once before it answers 503; 0 = no limit",
            minimum=0,
        ),
        STYLE.value(
            "keepalive",
            INT,
            2,
            "seconds to keep an idle keep-alive connection open (uvicorn's timeout_keep_alive)",
            minimum=0,
            flag="--keep-alive",
        ),
        WSGI_SETTINGS.get("max_requests"),
        WSGI_SETTINGS.get("max_requests_jitter"),
        WSGI_SETTINGS.get("backlog"),
        WSGI_SETTINGS.get("accesslog"),
        STYLE.value(
            "timeout",
            INT,
            30,
            "seconds a worker whose event loop stops reporting lives before it is killed and "
            "restarted; 0 = never",
            minimum=0,
        ),
        WSGI_SETTINGS.get("graceful_timeout"),
        WSGI_SETTINGS.get("reuse_port"),
        WSGI_SETTINGS.get("preload_app"),
        WSGI_SETTINGS.get("gc_freeze"),
    ),
)


def worker_kwargs(values: Mapping[str, Value]) -> dict[str, Value]:
    """uvicorn's Config arguments the worker class sets (its CONFIG_KWARGS)."""
    kwargs: dict[str, Value] = {"loop": values["loop"], "http": values["http"]}
    if int(values["limit_concurrency"]):
        kwargs["limit_concurrency"] = int(values["limit_concurrency"])
    return kwargs


class GunicornAsgiAdapter(GunicornAdapter):
    """gunicorn set up for ASGI apps (GunicornAdapter.serving): the uvicorn worker."""

    table = SETTINGS
    space_file = shipped_space("gunicorn-asgi")
    install_hint = "pip install gunicorn uvicorn-worker"
    interfaces = frozenset({Interface.ASGI})
    process_model = ProcessModel(
        forks_workers=True, processes="workers", threads=None, kind_label="worker_class"
    )
    # uvicorn speaks HTTP only (no uwsgi protocol), on gunicorn's TCP or unix sockets.
    binds = frozenset({HTTP_OVER_TCP, (Transport.UNIX, Protocol.HTTP)})
    http_only_settings = ()

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        return "uvicorn"

    def cut_signs(self, values: Mapping[str, Value]) -> tuple[CutSign, ...]:
        # The uvicorn worker logs through gunicorn's error log: its cap's 503 is said there.
        return (*super().cut_signs(values), concurrency_cut_sign(values))

    def event_loops(self, values: Mapping[str, Value]) -> EventLoops:
        """Every worker: each runs uvicorn's server on a loop on its main thread. The master
        forks only workers, and a forked worker's command line is the master's: no marker."""
        return EventLoops(root=False)

    def extras(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        return ()

    def extra_distributions(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        # uvicorn pinned too: uvicorn-worker asks for any uvicorn >= 0.36, and the one measured
        # is what runs. uvloop and httptools are named when the config runs them (`auto` ran
        # them here, as they are installed), not uvicorn[standard], which adds five more.
        needed = ["uvicorn-worker", "uvicorn"]
        if effective_loop(values) == UVLOOP:
            needed.append(UVLOOP)
        if effective_http(values) == HTTPTOOLS:
            needed.append(HTTPTOOLS)
        return tuple(needed)

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        # The loops and parsers installed here (the C ones are what auto picks).
        loops = ["asyncio", *([UVLOOP] if installed(UVLOOP) else [])]
        parsers = ["h11", *([HTTPTOOLS] if installed(HTTPTOOLS) else [])]
        pairs = [(loop, http) for loop in loops for http in parsers]
        return [
            {"workers": n, "loop": loop, "http": http}
            for n in worker_counts(cpus)
            for loop, http in pairs
        ]

    def check_combination(self, values: Mapping[str, Value]) -> None:
        check_gc_freeze(values)
        for key, module in (("loop", UVLOOP), ("http", HTTPTOOLS)):
            if values[key] == module and not installed(module):
                raise ConfigError(
                    f"gunicorn {key}={module}: {module} is not installed here, so every uvicorn "
                    f"worker would fail to boot; pip install {module}, or use {key}=auto"
                )

    def check_bound(self, bind: Bind, values: Mapping[str, Value]) -> None:
        if bind.path is not None and values.get("reuse_port"):
            # As for WSGI workers: every worker fails to listen and is restarted for ever.
            raise ConfigError(
                "gunicorn reuse_port=true on a unix socket: SO_REUSEPORT is for TCP, so every "
                "worker fails to listen and is restarted for ever; use reuse_port=false, or "
                "front_transport=tcp"
            )

    def stop_signals(
        self, values: Mapping[str, Value]
    ) -> tuple[signal.Signals, signal.Signals | None]:
        # SIGTERM: the master stops accepting and sends its workers SIGTERM, on which uvicorn
        # closes idle connections and finishes the requests in flight; SIGQUIT after it is the
        # master's quick stop (uvicorn-worker handles SIGQUIT on the loop).
        return signal.SIGTERM, signal.SIGQUIT

    def worker_lines(self, values: Mapping[str, Value]) -> list[str]:
        loop, http = str(values["loop"]), str(values["http"])
        kwargs = worker_kwargs(values)
        lines = [
            "",
            "# ASGI: every worker runs uvicorn on an event loop (pip install uvicorn-worker).",
            f"# loop = {loop}: the event loop; auto = uvloop where installed, else asyncio.",
            f"# http = {http}: the HTTP parser; auto = httptools where installed, else h11.",
        ]
        stock = STOCK_WORKERS.get((loop, http)) if len(kwargs) == 2 else None
        if stock is not None:
            return [*lines, f"worker_class = {f'uvicorn_worker.{stock}'!r}"]
        if "limit_concurrency" in kwargs:
            lines.append(
                f"# limit_concurrency = {kwargs['limit_concurrency']}: connections and tasks a "
                "worker holds before it answers 503."
            )
        return [
            *lines,
            "# uvicorn's own settings reach the worker only as its class's CONFIG_KWARGS.",
            "from uvicorn_worker import UvicornWorker",
            "",
            "",
            f"class {TUNED_WORKER}(UvicornWorker):",
            f"    CONFIG_KWARGS = {kwargs!r}",
            "",
            "",
            f"worker_class = {TUNED_WORKER}",
        ]

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        resolved = self.resolve(values, bind=bind)
        # The worker class is set in a small config file, as the written one sets it (a
        # subclass cannot be named on the command line), and so are gc_freeze's server hooks;
        # the rest is on the argv, which wins.
        worker_file = workdir.resolve() / WORKER_FILE
        argv = [
            self.executable(),
            "--bind",
            _bind_text(bind),
            "--no-control-socket",
            "--chdir",
            app.pythonpath,
            "--config",
            str(worker_file),
            *self.table.argv(resolved),
            app.spec,
        ]
        spec = self._spec(argv, app, resolved, bind)
        lines = [*self.worker_lines(resolved), *gc_freeze_hooks(resolved)]
        return replace(spec, files={str(worker_file): "\n".join(lines) + "\n"})
