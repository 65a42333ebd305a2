"""hypercorn (0.16+), ASGI apps: its tunable settings as one table, written as its config file.

Read from hypercorn/run.py: the main process binds the socket, then starts `workers`
processes with multiprocessing's spawn method (each imports the app and runs one event loop:
asyncio, uvloop or trio, the `worker_class`) and they all accept from that one socket;
`workers = 0` serves from the main process itself, with no worker and no multiprocessing
resource tracker. The main process stops its workers through a multiprocessing Event on
SIGINT/SIGTERM; a worker spawned by it ignores SIGINT and dies at once on SIGTERM, which
the stop sends to the whole process group.

The deployable file is hypercorn's own config file in its Python form (`hypercorn --config
file:hypercorn_config.py module:app`), read by `Config.from_pyfile`: the same keys as its TOML
form, which hypercorn's docs prefer, but a TOML file cannot set the app's own environment
variables, and a Python one can (before any worker imports the app). A trial runs that very
file, so the deployed file is the measured one. hypercorn takes the app on its command line
only (the file's `application_path` is overridden by the required argument) and imports it
from its working folder, so the file changes to the app's folder first.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import signal
import textwrap
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from tuner.apps import AppRef, Interface
from tuner.errors import ConfigError
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
    comment_block,
    python_env_lines,
    sizing_code,
    worker_counts,
)
from tuner.servers.grids import product_grid
from tuner.servers.setting_builders import BOOL, CHOICE, FLOAT, INT, SettingStyle
from tuner.settings import SettingsTable, Value

CONFIG_FILE = "hypercorn_config.py"
# The worker classes hypercorn 0.18 runs (hypercorn/run.py), and the module each one imports
# beyond hypercorn's own requirements (its `uvloop` and `trio` extras bring them).
WORKER_CLASSES = ("asyncio", "uvloop", "trio")
_EXTRA_MODULE = {"uvloop": "uvloop", "trio": "trio"}

SIGNS = StartupSigns(
    # The main process binds before any worker starts: "OSError: [Errno 98] Address already
    # in use" and exit 1.
    port_in_use=("Address already in use",),
    rejected_value=("No worker of class",),
    # Exit 1 is also a taken port; an app that cannot be imported fails inside
    # hypercorn.utils.load_application (NoAppError, or the app's own exception), in the worker
    # (whose exit code the main process returns) or in the one process of `workers = 0`.
    app_broken_if_logged={1: ("in load_application",)},
)


# Keys of hypercorn's config file, written as Python literals (a setting's `text` turns the
# table's value into the one hypercorn reads, e.g. 0 into None); no command line: the trial
# runs the file.
STYLE = SettingStyle(text=repr, command_line=False)


SETTINGS = SettingsTable(
    "hypercorn",
    (
        STYLE.value(
            "workers",
            INT,
            1,
            "worker processes, each importing the app and running one event loop; 0 = serve "
            "from the main process itself (no worker, hypercorn's run.py)",
            minimum=0,
        ),
        STYLE.value(
            "worker_class",
            CHOICE,
            "asyncio",
            "each worker's event loop: asyncio (the standard library's), uvloop "
            "(hypercorn[uvloop]) or trio (hypercorn[trio])",
            choices=WORKER_CLASSES,
        ),
        STYLE.value(
            "backlog", INT, 100, "listen queue length (capped by net.core.somaxconn)", minimum=1
        ),
        STYLE.value(
            "keep_alive_timeout",
            FLOAT,
            5.0,
            "seconds an idle kept-alive connection stays open",
            minimum=0.001,
        ),
        STYLE.value(
            "keep_alive_max_requests",
            INT,
            1000,
            "requests on one kept-alive connection before hypercorn closes it (the client "
            "reconnects, and may land on another worker)",
            minimum=1,
        ),
        STYLE.value(
            "max_requests",
            INT,
            0,
            "restart each worker after about this many requests; 0 = never",
            text=lambda value: repr(int(value) or None),
            minimum=0,
        ),
        STYLE.value(
            "access_log",
            BOOL,
            False,
            "a line per request on stdout",
            key="accesslog",
            text=lambda value: repr("-" if value else None),
        ),
    ),
)


class HypercornAdapter(ServerAdapter):
    name = "hypercorn"
    artifact_filename = CONFIG_FILE
    logging_settings = MappingProxyType({"access_log": False})
    table = SETTINGS
    binary = "hypercorn"
    distribution = "hypercorn"
    install_hint = "pip install hypercorn"
    interfaces = frozenset({Interface.ASGI})
    process_model = ProcessModel(
        forks_workers=True, processes="workers", threads=None, kind_label="worker class"
    )
    # hypercorn reads no variable for its workers: the name says what it counts.
    sizing_env = "HYPERCORN_WORKERS"

    def version(self) -> str:
        return importlib.metadata.version(self.distribution)

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        return f"{values['worker_class']} loop"

    def event_loops(self, values: Mapping[str, Value]) -> EventLoops:
        """workers = 0: the main process runs the loop. More: each worker it spawned does
        (multiprocessing's spawn_main on its command line), not its resource tracker."""
        if int(self.resolve(values)["workers"]) == 0:
            return EventLoops(root=True)
        return EventLoops(root=False, worker_marker="multiprocessing.spawn")

    def extras(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        worker_class = str(values["worker_class"])
        return (worker_class,) if worker_class in _EXTRA_MODULE else ()

    def check_combination(self, values: Mapping[str, Value]) -> None:
        worker_class = str(values["worker_class"])
        module = _EXTRA_MODULE.get(worker_class)
        if module and importlib.util.find_spec(module) is None:
            raise ConfigError(
                f"hypercorn worker_class={worker_class} needs {module}, which is not installed "
                f"here; pip install 'hypercorn[{worker_class}]', or use worker_class=asyncio"
            )
        if int(values["workers"]) == 0 and int(values["max_requests"]):
            raise ConfigError(
                f"hypercorn max_requests={values['max_requests']} with workers=0: the one "
                "process would exit after that many requests, with no main process to start "
                "another; use workers >= 1 or max_requests=0"
            )

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        """No worker (the main process serves) and every worker count of `worker_counts`, by
        the asyncio loops: 18 configs on 1 or 2 CPUs. Not trio: it runs only apps written for
        trio or anyio, and an asyncio app fails every request on it."""
        return product_grid(
            {"workers": (0, *worker_counts(cpus)), "worker_class": ("asyncio", "uvloop")}
        )

    # --- running ----------------------------------------------------------------------------

    def _spec(self, config: Path, app: AppRef, files: Mapping[str, str]) -> LaunchSpec:
        return LaunchSpec(
            argv=(self.executable(), "--config", f"file:{config}", app.spec),
            env={"PYTHONUNBUFFERED": "1"},
            # The file changes to the app's folder too; starting there is what a user does.
            cwd=app.pythonpath,
            # On SIGTERM the main process tells its workers to stop and each worker, which
            # has no handler for it, ends at once; with workers = 0 the one process closes its
            # connections and stops.
            stop_signal=signal.SIGTERM,
            stop_grace_s=5.0,
            signs=SIGNS,
            files=files,
        )

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        config = (workdir / CONFIG_FILE).resolve()
        text = self._render_artifact(ArtifactRequest(app, bind, values)).text
        return self._spec(config, app, {str(config): text})

    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        app, env = request.app, request.env
        resolved = self.resolve(request.values)
        run = f"hypercorn --config file:{CONFIG_FILE} {app.spec}"
        requirement = self.install_hint
        if extras := self.extras(resolved):
            requirement = f"pip install 'hypercorn[{','.join(extras)}]'"
        lines = comment_block(request.header, "#")
        lines += [
            f"# Run: {run}  (with {requirement}).",
            "# hypercorn's config file, Python form (`--config file:`): every module-level name",
            "# below is a hypercorn setting.",
            "import os",
            "",
            "# EDIT for your deployment: the app's folder (hypercorn imports the app from its",
            "# working folder), and where to listen (127.0.0.1 accepts connections from this",
            "# machine only, e.g. behind nginx).",
            f"os.chdir({app.pythonpath!r})",
            f"bind = [{request.bind.address()!r}]",
        ]
        if env:  # set before the workers are started, so each imports the app with them
            lines += ["", *python_env_lines(env)]
        lines += ["", "# Tuned settings (every one listed, defaults included)."]
        for setting in self.table.settings:
            lines += [f"# {part}" for part in textwrap.wrap(setting.doc, 94)]
            lines += [f"{key} = {text}" for key, text in setting.config(resolved[setting.name])]
        return Artifact(CONFIG_FILE, "\n".join(lines) + "\n", run_hint=run)

    def _render_sized(self, request: SizedRequest) -> tuple[Artifact, ...]:
        """The config file is Python: it reads the box's limits and sets `workers` from the
        rule itself, printing the `sizing:` line first in hypercorn's log (the main process
        reads the file once; its workers get the config from it). hypercorn takes every
        module-level name of the file into its config, which it pickles for the workers it
        spawns: the sizing code's names are removed once `workers` is set, as its functions
        would not pickle."""
        artifact = self._render_artifact(request)
        lines = [
            "",
            "# The names defined until here are hypercorn's settings; the sizing code's go below.",
            "__kept = set(globals()) | {'workers'}",
            *sizing_code(request.rule),
            'workers = SIZED["processes"]',
            "import sys",
            "",
            'print(SIZED["line"], file=sys.stderr, flush=True)',
            "for __name in [name for name in globals() if name not in __kept]:",
            "    del globals()[__name]",
        ]
        filename = request.filename
        run = artifact.run_hint.replace(f"file:{CONFIG_FILE}", f"file:{filename}")
        text = artifact.text.replace(f"# Run: {artifact.run_hint}", f"# Run: {run}", 1)
        return (
            replace(artifact, filename=filename, text=text + "\n".join(lines) + "\n", run_hint=run),
        )

    def check_artifact_name(self, path: Path) -> None:
        if path.suffix != ".py":  # Config.from_pyfile's importlib finds no loader for it
            raise ConfigError(
                f"hypercorn reads a Python config file only from a name ending in .py; "
                f"{path.name!r} does not: name it like {CONFIG_FILE}"
            )

    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        self.check_artifact_name(path)
        return self._spec(path, app, {})
