"""uvicorn (read and measured at 0.54): its tunable settings as one table, run by the `uvicorn`
command, deployed as a shell launcher that runs that command.

One event loop per process, which runs every connection's protocol and the app's coroutines.
With `workers` > 1 the `uvicorn` process binds the socket and becomes a supervisor
(uvicorn/supervisors/multiprocess.py): it starts that many workers with multiprocessing's
*spawn* (each a fresh interpreter that imports the app again), pings each over a pipe every
half second, and replaces one that exited. With one worker there is no supervisor: the
`uvicorn` process serves alone.

The loop (uvloop or asyncio) and the HTTP parser (httptools or h11) are uvicorn's own
levers; `auto` takes uvloop and httptools where they are installed, so a written file pins
them in its requirements whenever the measured config used them.

uvicorn reads no config file: its documented deployment is the command line (`uvicorn app:app
--workers 4 ...` in a Dockerfile, a systemd unit or a Procfile), so the artifact is a shell
launcher that `exec`s that command with every tuned flag on it, as it was measured.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shlex
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from tuner.apps import AppRef, Interface
from tuner.errors import ConfigError
from tuner.logsigns import CutSign, LoadSign
from tuner.servers.base import (
    Artifact,
    ArtifactRequest,
    Bind,
    EventLoops,
    LaunchSpec,
    ProcessModel,
    ServerAdapter,
    SizedRequest,
    StartupSigns,
    first_version_number,
    worker_counts,
)
from tuner.servers.cmdlauncher import command_launcher, sized_check_argv, sized_command_files
from tuner.servers.grids import product_grid
from tuner.servers.setting_builders import CHOICE, INT, SettingStyle
from tuner.settings import SettingsTable, Value

# uvicorn's exit code for a server that could not start (config.STARTUP_FAILURE): the app
# failed to import or its lifespan startup failed, and also a bind that failed.
STARTUP_FAILURE = 3
# What uvicorn logs for an app it cannot load (importer.ImportFromStringError), for an
# exception raised while the app's module imports (a traceback through import_from_string),
# and for an app whose lifespan startup failed.
APP_BROKEN_TEXTS = (
    "Error loading ASGI app",
    "in import_from_string",
    "Application startup failed",
)

SIGNS = StartupSigns(
    # One worker: asyncio's create_server logs "[Errno 98] error while attempting to bind on
    # address (...): address already in use" (lowercase); several: the supervisor's bind logs
    # "[Errno 98] Address already in use".
    port_in_use=("Address already in use", "address already in use"),
    # click's "Error: Invalid value for '--workers': ..." and "Error: No such option".
    rejected_value=("Invalid value for", "No such option"),
    # With several workers a worker that cannot load the app exits 3 and the supervisor then
    # exits 0 ("Child process [...] failed to start, stopping the parent process").
    app_broken_if_logged=dict.fromkeys((STARTUP_FAILURE, 1, 0), APP_BROKEN_TEXTS),
)

LOAD_SIGNS = (
    LoadSign(
        "Exceeded concurrency limit",
        "uvicorn answered 503 because a worker held limit_concurrency connections or tasks "
        "(each open connection counts, idle or not: keep it above the clients per worker)",
    ),
)


def concurrency_cut_sign(values: Mapping[str, Value]) -> CutSign:
    """uvicorn's line for a request it answers 503 at its cap (protocols/http/*_impl.py in
    uvicorn 0.55: `message = "Exceeded concurrency limit."`, logged as a warning)."""
    return CutSign(
        r"Exceeded concurrency limit\.",
        "uvicorn concurrency limit",
        f"limit_concurrency = {values.get('limit_concurrency', 0)}: a worker holding that many "
        "connections or tasks answers 503, and each open stream holds one",
    )


# The optional packages a value runs on, as `auto` picks them (uvicorn/loops/auto.py,
# protocols/http/auto.py, protocols/websockets/auto.py): the first one installed.
_AUTO = {
    "loop": ("uvloop",),
    "http": ("httptools",),
    "ws": ("websockets", "wsproto"),
}
# The distribution each explicit choice imports (None: uvicorn's own dependencies).
_NEEDS = {
    ("loop", "uvloop"): "uvloop",
    ("http", "httptools"): "httptools",
    ("ws", "websockets"): "websockets",
    ("ws", "websockets-sansio"): "websockets",
    ("ws", "wsproto"): "wsproto",
}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def runs_on(name: str, value: Value) -> str | None:
    """The optional distribution a `loop`, `http` or `ws` value runs on here (None: none).
    `auto` is what uvicorn picks in this environment: the first of its candidates installed."""
    if value == "auto":
        return next((module for module in _AUTO[name] if _installed(module)), None)
    return _NEEDS.get((name, str(value)))


# `--workers 2` on uvicorn's command line, which its launcher script runs.
STYLE = SettingStyle()


SETTINGS = SettingsTable(
    "uvicorn",
    (
        STYLE.value(
            "workers",
            INT,
            1,
            "worker processes (1 = uvicorn serves alone; more = a supervisor spawns them)",
            minimum=1,
        ),
        STYLE.value(
            "loop",
            CHOICE,
            "auto",
            "event loop: uvloop (libuv, in C) or asyncio's own; auto = uvloop if installed",
            choices=("auto", "asyncio", "uvloop"),
        ),
        STYLE.value(
            "http",
            CHOICE,
            "auto",
            "HTTP/1.1 parser: httptools (llhttp, in C) or h11 (pure Python); auto = httptools "
            "if installed",
            choices=("auto", "h11", "httptools"),
        ),
        STYLE.value(
            "backlog", INT, 2048, "listen queue length (capped by net.core.somaxconn)", minimum=1
        ),
        STYLE.value(
            "timeout_keep_alive",
            INT,
            5,
            "seconds an idle kept-alive connection stays open",
            minimum=1,
        ),
        STYLE.value(
            "limit_concurrency",
            INT,
            0,
            "answer 503 while a worker holds this many open connections or running requests "
            "(0 = no limit)",
            minimum=0,
            unset=0,
        ),
        STYLE.value(
            "limit_max_requests",
            INT,
            0,
            "a worker exits after this many requests and the supervisor starts a fresh one "
            "(0 = never; needs workers > 1)",
            minimum=0,
            unset=0,
        ),
        STYLE.value(
            "limit_max_requests_jitter",
            INT,
            0,
            "up to this many more requests, drawn per worker, so recycled workers do not all "
            "restart at once",
            minimum=0,
            unset=0,
        ),
        STYLE.switch("access_log", True, "write an access log line per request (stdout)"),
        STYLE.switch("server_header", True, "send a `server: uvicorn` header"),
        STYLE.switch(
            "date_header", True, "send a `date` header (uvicorn formats it once a second)"
        ),
        STYLE.value(
            "ws",
            CHOICE,
            "auto",
            "websocket implementation; none refuses websocket upgrades and does not import a "
            "websocket library; auto = websockets, else wsproto, if installed",
            choices=("auto", "none", "websockets", "websockets-sansio", "wsproto"),
        ),
    ),
)


class UvicornAdapter(ServerAdapter):
    name = "uvicorn"
    artifact_filename = "uvicorn.sh"
    logging_settings = MappingProxyType({"access_log": False})
    table = SETTINGS
    binary = "uvicorn"
    distribution = "uvicorn"
    install_hint = "pip install 'uvicorn[standard]'"
    interfaces = frozenset({Interface.ASGI})
    process_model = ProcessModel(
        forks_workers=True, processes="workers", threads=None, kind_label="event loop"
    )
    # uvicorn's own convention: --workers defaults to $WEB_CONCURRENCY.
    sizing_env = "WEB_CONCURRENCY"

    def cut_signs(self, values: Mapping[str, Value]) -> tuple[CutSign, ...]:
        return (
            concurrency_cut_sign(values),
            CutSign(
                r"Maximum request limit of \d+ exceeded\. Terminating process\.",
                "uvicorn worker recycled",
                f"limit_max_requests = {values.get('limit_max_requests', 0)}: the worker shuts "
                "down after that many requests, and the streams it carries end with it",
            ),
        )

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        loop = runs_on("loop", values["loop"]) or "asyncio"
        parser = runs_on("http", values["http"]) or "h11"
        return f"{loop} loop, {parser}"

    def event_loops(self, values: Mapping[str, Value]) -> EventLoops:
        """One worker: the uvicorn process runs the loop. More: each worker the supervisor
        spawned does (multiprocessing's spawn_main on its command line), not the supervisor
        nor multiprocessing's resource tracker."""
        if int(self.resolve(values)["workers"]) == 1:
            return EventLoops(root=True)
        return EventLoops(root=False, worker_marker="multiprocessing.spawn")

    def check_combination(self, values: Mapping[str, Value]) -> None:
        for name in ("loop", "http", "ws"):
            needed = runs_on(name, values[name])
            if values[name] != "auto" and needed and not _installed(needed):
                raise ConfigError(
                    f"uvicorn {name}={values[name]}: {needed} is not installed here; "
                    f"pip install {needed}, or use {name}=auto"
                )
        requests = int(values["limit_max_requests"])
        if requests and int(values["workers"]) == 1:
            raise ConfigError(
                f"uvicorn limit_max_requests={requests} with workers=1: one worker runs "
                "without uvicorn's supervisor, so uvicorn exits after that many requests and "
                "nothing restarts it; use workers >= 2 to recycle workers, or 0"
            )
        if int(values["limit_max_requests_jitter"]) and not requests:
            raise ConfigError(
                "uvicorn limit_max_requests_jitter without limit_max_requests: the jitter "
                "only spreads recycling; set limit_max_requests too, or the jitter to 0"
            )

    def extra_distributions(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        """The loop, parser and websocket library the config ran on here (`auto` included):
        a clean environment without them would run `auto` on asyncio and h11, not as
        measured."""
        found = (runs_on(name, values[name]) for name in ("loop", "http", "ws"))
        return tuple(dict.fromkeys(name for name in found if name))

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        """Every worker count by both loops by both parsers, the access log off as anyone
        timing uvicorn by hand turns it off first: 32 configs."""
        return product_grid(
            {
                "workers": worker_counts(cpus),
                "loop": ("asyncio", "uvloop"),
                "http": ("h11", "httptools"),
                "access_log": (False,),
            }
        )

    def version(self) -> str:
        return first_version_number(importlib.metadata.version(self.distribution))

    def _argv(self, app: AppRef, bind: Bind, values: Mapping[str, Value]) -> list[str]:
        return [
            "--host",
            bind.host,
            "--port",
            str(bind.port),
            # The tuner found an ASGI 3 app: uvicorn is told, rather than guessing again.
            "--interface",
            "asgi3",
            *self.table.argv(self.resolve(values)),
            app.spec,
        ]

    def _spec(self, argv: list[str], app: AppRef, env: Mapping[str, str]) -> LaunchSpec:
        return LaunchSpec(
            argv=tuple(argv),
            # WEB_CONCURRENCY would only set workers when --workers is absent; it never is.
            env={"PYTHONUNBUFFERED": "1", "NO_COLOR": "1", **env},
            # uvicorn puts its working folder on sys.path (--app-dir defaults to it).
            cwd=app.pythonpath,
            # SIGTERM: the supervisor stops its workers and each worker closes its idle
            # connections and exits. A worker still waiting for a connection to close takes a
            # second SIGINT as "force quit" (server.py, handle_exit), hence the repeats.
            stop_signal=signal.SIGTERM,
            quick_stop_signal=signal.SIGINT,
            stop_grace_s=5.0,
            signs=SIGNS,
            load_signs=LOAD_SIGNS,
        )

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        return self._spec([self.executable(), *self._argv(app, bind, values)], app, {})

    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        return self._script(request)

    def _script(
        self, request: ArtifactRequest, from_env: Mapping[str, str] | None = None
    ) -> Artifact:
        resolved = self.resolve(request.values)
        requirements = " ".join(shlex.quote(line) for line in self.requirements(resolved))
        return command_launcher(
            self,
            request,
            ["uvicorn", *self._argv(request.app, request.bind, resolved)],
            resolved,
            install=f"pip install {requirements}",
            intro=[
                "uvicorn reads no config file: every tuned setting is on the command line",
                "below, defaults included:",
            ],
            notes=[
                "EDIT the app's folder (uvicorn imports the app from its working folder)",
                "and --host/--port for your deployment: 127.0.0.1 accepts connections",
                "from this machine only (e.g. behind nginx).",
            ],
            from_env=from_env,
        )

    def _render_sized(self, request: SizedRequest) -> tuple[Artifact, ...]:
        """uvicorn.sh with --workers read from WEB_CONCURRENCY, and the launcher beside it
        that sets that from the box's limits (cmdlauncher.sized_command_files)."""
        return sized_command_files(self, request, {"processes": "WEB_CONCURRENCY"}, self._script)

    def sized_least_processes(self, values: Mapping[str, Value]) -> tuple[int, str]:
        """With limit_max_requests, never one worker: it would run without the supervisor, and
        exit after that many requests with nothing to restart it (check_combination)."""
        if int(self.resolve(values)["limit_max_requests"]):
            return 2, "limit_max_requests recycles workers under uvicorn's supervisor only"
        return 1, ""

    def _sized_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        return self._spec([sys.executable, str(path)], app, {"PATH": self.own_bin_first()})

    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        # As a user runs it from an activated virtualenv: the tuner's own uvicorn first.
        return self._spec(["/bin/sh", str(path)], app, {"PATH": self.own_bin_first()})

    def artifact_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        return ["/bin/sh", "-n", str(path)]

    def sized_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        return sized_check_argv(path)
