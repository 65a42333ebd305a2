"""waitress: its tunable settings as one table, run by `waitress-serve`, deployed as a launcher.

One process: a single asyncore I/O thread reads and writes every connection, and a pool of
`threads` runs the app. No setting adds processes, so on a multi-core machine one waitress
uses at most one core for Python code (the GIL), however many threads it has.

The deployable file is a shell launcher that `exec`s the `waitress-serve` command with every
tuned setting on its command line, so a user reads the exact command the tuner measured.
"""

from __future__ import annotations

import importlib.metadata
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

from tuner.apps import AppRef
from tuner.errors import ConfigError
from tuner.logsigns import LoadSign
from tuner.servers.base import (
    HTTP_OVER_TCP,
    Artifact,
    ArtifactRequest,
    Bind,
    LaunchSpec,
    ProcessModel,
    Protocol,
    ServerAdapter,
    SizedRequest,
    StartupSigns,
    Transport,
    first_version_number,
)
from tuner.servers.cmdlauncher import command_launcher, sized_check_argv, sized_command_files
from tuner.servers.grids import THREAD_STEPS, product_grid
from tuner.servers.setting_builders import INT, SettingStyle
from tuner.settings import Setting, SettingsTable, Value

# waitress-serve exits 1 for a bad option and for an app it cannot import. It prints the
# first line for an ImportError/AttributeError (waitress.runner.show_exception); any other
# exception raised while importing the app escapes as a traceback through resolve_name.
APP_IMPORT_TEXTS = ("importing your module", "in resolve_name")
# asyncore's select() cannot watch a file descriptor past FD_SETSIZE (1024 on Linux): past
# about that many connections waitress fails with "filedescriptor out of range in select()".
SELECT_FD_LIMIT = 1024
# The listening socket and waitress's wake-up pipe are channels too: they count against
# connection_limit (waitress.server: `len(self._map) >= self.adj.connection_limit`).
OWN_CHANNELS = 2

SIGNS = StartupSigns(
    port_in_use=("Address already in use",),
    # int("x") in Adjustments, or getopt's "option --x not recognized".
    rejected_value=("invalid literal", "not recognized", "Unknown adjustment"),
    app_broken_if_logged={1: APP_IMPORT_TEXTS},
)

LOAD_SIGNS = (
    LoadSign(
        "Task queue depth is",
        "every waitress thread was busy and requests waited in its task queue (more threads "
        "help only while the app waits on I/O; for CPU work one process is the limit)",
    ),
    LoadSign(
        "reached the connection limit",
        "waitress stopped accepting connections at connection_limit; the others waited in "
        "the listen backlog (raise connection_limit above the number of clients)",
    ),
    LoadSign(
        "filedescriptor out of range in select()",
        "select() cannot watch this many connections; use asyncore_use_poll",
    ),
)


# `--threads=4` (waitress-serve's getopt wants the `=` form), `threads = 4` in the file.
STYLE = SettingStyle(joined=True)


def _send_bytes_argv(value: Value) -> list[str]:
    # Deprecated: waitress warns whenever it is given, so it is written only when tuned.
    return [f"--send-bytes={value}"] if int(value) != 1 else []


SETTINGS = SettingsTable(
    "waitress",
    (
        STYLE.value("threads", INT, 4, "threads that run the app (one process)", minimum=1),
        STYLE.value(
            "connection_limit",
            INT,
            100,
            "open connections at most (the listener and a wake-up pipe count too); past it "
            "waitress stops accepting and new clients wait in the backlog",
            minimum=OWN_CHANNELS + 1,
        ),
        STYLE.value(
            "backlog", INT, 1024, "listen queue length (capped by net.core.somaxconn)", minimum=1
        ),
        STYLE.value(
            "channel_timeout",
            INT,
            120,
            "seconds an idle connection stays open (keep-alive)",
            minimum=1,
        ),
        STYLE.value(
            "cleanup_interval",
            INT,
            30,
            "seconds between sweeps that close idle connections",
            minimum=1,
        ),
        STYLE.switch(
            "asyncore_use_poll",
            False,
            "poll() instead of select() in the I/O loop (select() stops at 1024 descriptors)",
        ),
        STYLE.value("recv_bytes", INT, 8192, "bytes read from a socket per recv() call", minimum=1),
        Setting(
            "send_bytes",
            INT,
            1,
            "bytes of output buffered before the app thread writes them (deprecated; 1 = at once)",
            argv=_send_bytes_argv,
            config=lambda value: [("send_bytes", str(value))],
            minimum=1,
        ),
        STYLE.value(
            "outbuf_overflow",
            INT,
            1048576,
            "bytes of pending output kept in memory before spilling to a temporary file",
            minimum=1,
        ),
        STYLE.value(
            "outbuf_high_watermark",
            INT,
            16777216,
            "bytes of pending output past which the app's response iterator is paused",
            minimum=1,
        ),
        STYLE.value(
            "inbuf_overflow",
            INT,
            524288,
            "bytes of a request body kept in memory before spilling to a temporary file",
            minimum=1,
        ),
        STYLE.value(
            "channel_request_lookahead",
            INT,
            0,
            "requests read ahead on a busy connection (0 = none; more notices clients that "
            "left while their request runs)",
            minimum=0,
        ),
    ),
)


class WaitressAdapter(ServerAdapter):
    name = "waitress"
    artifact_filename = "waitress-serve.sh"
    table = SETTINGS
    binary = "waitress-serve"
    distribution = "waitress"
    install_hint = "pip install waitress"
    process_model = ProcessModel(
        forks_workers=False, processes=None, threads="threads", kind_label="I/O loop"
    )
    # One process: a sized file scales its threads, and this overrides their count (waitress
    # reads no variable of its own).
    sizing_env = "WAITRESS_THREADS"
    # `waitress-serve --unix-socket=PATH` (its --help; socket mode 600 by default).
    binds = frozenset({HTTP_OVER_TCP, (Transport.UNIX, Protocol.HTTP)})

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        return "poll" if values["asyncore_use_poll"] else "select"

    def check_combination(self, values: Mapping[str, Value]) -> None:
        limit = int(values["connection_limit"])
        if limit > SELECT_FD_LIMIT - 24 and not values["asyncore_use_poll"]:
            raise ConfigError(
                f"waitress connection_limit={limit} with asyncore_use_poll=false: select() "
                f"cannot watch descriptors past {SELECT_FD_LIMIT}, so waitress fails near that "
                "many connections; set asyncore_use_poll=true"
            )

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        """Threads by the I/O loop by the connection limit: 40 configs (one process)."""
        return product_grid(
            {
                "threads": THREAD_STEPS,
                "asyncore_use_poll": (False, True),
                "connection_limit": (100, 1000),
            }
        )

    def _argv(self, app: AppRef, bind: Bind, values: Mapping[str, Value]) -> list[str]:
        where = f"--unix-socket={bind.path}" if bind.path else f"--listen={bind.address()}"
        return [
            where,
            *self.table.argv(self.resolve(values)),
            app.spec,
        ]

    def _spec(self, argv: list[str], app: AppRef, env: Mapping[str, str], bind: Bind) -> LaunchSpec:
        return LaunchSpec(
            argv=tuple(argv),
            env={"PYTHONUNBUFFERED": "1", **env},
            cwd=app.pythonpath,
            # waitress sets no SIGTERM handler: the process ends at once, which is all a
            # measured server needs (SIGINT would wait for its threads to finish).
            stop_signal=signal.SIGTERM,
            stop_grace_s=5.0,
            signs=SIGNS,
            load_signs=LOAD_SIGNS,
            bind=bind if bind.kind != HTTP_OVER_TCP else None,
        )

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        # waitress-serve puts its working folder on sys.path: cwd is the app's folder.
        argv = [self.executable(), *self._argv(app, bind, values)]
        return self._spec(argv, app, {}, bind)

    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        return self._script(request)

    def _script(
        self, request: ArtifactRequest, from_env: Mapping[str, str] | None = None
    ) -> Artifact:
        resolved = self.resolve(request.values)
        return command_launcher(
            self,
            request,
            ["waitress-serve", *self._argv(request.app, request.bind, resolved)],
            resolved,
            install=self.install_hint,
            intro=["Every tuned setting is on the command line below, defaults included:"],
            notes=[
                "EDIT the app's folder (waitress-serve imports the app from its working",
                "folder) and --listen for your deployment: 127.0.0.1 accepts connections",
                "from this machine only (e.g. behind nginx).",
            ],
            from_env=from_env,
        )

    def _render_sized(self, request: SizedRequest) -> tuple[Artifact, ...]:
        """waitress-serve.sh with --threads read from WAITRESS_THREADS, and the launcher
        beside it that sets that from the box's limits (cmdlauncher.sized_command_files)."""
        return sized_command_files(self, request, {"threads": "WAITRESS_THREADS"}, self._script)

    def _sized_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        return self._spec([sys.executable, str(path)], app, {"PATH": self.own_bin_first()}, bind)

    def sized_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        return sized_check_argv(path)

    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        # As a user runs it from an activated virtualenv: the tuner's own waitress-serve first.
        return self._spec(["/bin/sh", str(path)], app, {"PATH": self.own_bin_first()}, bind)

    def version(self) -> str:
        return first_version_number(importlib.metadata.version(self.distribution))
