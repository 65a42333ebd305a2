"""daphne (4.x), Django Channels' ASGI server, as a measured baseline: one process, Twisted's
reactor running on an asyncio loop (daphne/server.py installs `asyncioreactor` at import).

daphne has no worker processes, no thread setting and no config file: what it is told comes
from its command line (daphne/cli.py), so the deployable file is a shell launcher holding that
one command. Of its options, two can move req/s, p99 or errors under load, read from its
source:
- the access log: on by default (verbosity 1 writes a line per request to stdout); only
  `--verbosity 0` turns it off (`--access-log FILE` just moves it), which also drops daphne's
  own INFO lines (warnings and errors stay);
- the listen backlog: daphne listens through a Twisted endpoint, whose backlog is 50 unless
  the endpoint string names one (`-e tcp:port=P:interface=H:backlog=N`), so the launcher
  always binds that way.
The rest is left out on purpose: `--http-timeout` (None) only caps a request's time with a
503; `--proxy-headers*` and `--root-path` change what the app is told about the client, not
how fast it is answered; `--server-name` is a header's text; the `--websocket*`, `--ping-*`
options and `--application-close-timeout` concern websockets and disconnected clients; and
the `ASGI_THREADS` variable sizes the loop's default executor, which only code run there
(asgiref's `sync_to_async(thread_sensitive=False)`) uses.
"""

from __future__ import annotations

import importlib.metadata
import signal
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from tuner.apps import AppRef, Interface
from tuner.servers.base import (
    Artifact,
    ArtifactRequest,
    Bind,
    EventLoops,
    LaunchSpec,
    ProcessModel,
    ServerAdapter,
    StartupSigns,
)
from tuner.servers.cmdlauncher import command_launcher
from tuner.servers.grids import product_grid
from tuner.servers.setting_builders import BOOL, INT, SettingStyle, true_false
from tuner.settings import Setting, SettingsTable, Value

# Twisted's TCP server endpoint listens with this backlog unless told otherwise
# (twisted.internet.endpoints.TCP4ServerEndpoint).
TWISTED_BACKLOG = 50

SIGNS = StartupSigns(
    # "Listen failure: Couldn't listen on 127.0.0.1:8000: [Errno 98] Address already in use."
    port_in_use=("Address already in use",),
    # argparse ("error: argument -v/--verbosity: invalid int value"), or Twisted refusing the
    # endpoint string.
    rejected_value=("error: argument", "ValueError"),
    # daphne exits 1 for a taken port too; an app that cannot be imported fails inside
    # CommandLineInterface.load_asgi_app.
    app_broken_if_logged={1: ("in load_asgi_app",)},
)

SETTINGS = SettingsTable(
    "daphne",
    (
        # Written into the endpoint string (`_endpoint`), not as an option of its own.
        SettingStyle(command_line=False).value(
            "backlog",
            INT,
            TWISTED_BACKLOG,
            "listen queue length (Twisted's endpoint default; capped by net.core.somaxconn)",
            minimum=1,
        ),
        Setting(
            "access_log",
            BOOL,
            True,
            "a line per request on stdout (daphne's default); false = --verbosity 0, which "
            "also drops daphne's INFO lines",
            argv=lambda value: [] if value else ["--verbosity", "0"],
            config=lambda value: [("access_log", true_false(value))],
        ),
    ),
)


def _endpoint(bind: Bind, backlog: Value) -> str:
    """The Twisted endpoint string daphne listens at (daphne/endpoints.py escapes an IPv6
    host's colons the same way)."""
    host = bind.host.strip("[]").replace(":", r"\:")
    return f"tcp:port={bind.port}:interface={host}:backlog={backlog}"


class DaphneAdapter(ServerAdapter):
    name = "daphne"
    artifact_filename = "daphne.sh"
    logging_settings = MappingProxyType({"access_log": False})
    table = SETTINGS
    binary = "daphne"
    distribution = "daphne"
    install_hint = "pip install daphne"
    interfaces = frozenset({Interface.ASGI})
    process_model = ProcessModel(
        forks_workers=False, processes=None, threads=None, kind_label="reactor"
    )

    def version(self) -> str:
        return importlib.metadata.version(self.distribution)

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        return "Twisted reactor"

    def event_loops(self, values: Mapping[str, Value]) -> EventLoops:
        """Its one process: Twisted's reactor runs on asyncio's loop on the main thread (daphne
        installs the asyncio reactor), and the app's coroutines run on that loop."""
        return EventLoops(root=True)

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        """One process, no threads: the backlog by the access log, 6 configs."""
        return product_grid({"backlog": (TWISTED_BACKLOG, 128, 1024), "access_log": (True, False)})

    def _argv(self, app: AppRef, bind: Bind, values: Mapping[str, Value]) -> list[str]:
        resolved = self.resolve(values)
        return ["-e", _endpoint(bind, resolved["backlog"]), *self.table.argv(resolved), app.spec]

    def _spec(self, argv: list[str], app: AppRef, env: Mapping[str, str]) -> LaunchSpec:
        return LaunchSpec(
            argv=tuple(argv),
            env={"PYTHONUNBUFFERED": "1", **env},
            # daphne puts its working folder on sys.path ("."): the app's folder.
            cwd=app.pythonpath,
            # Twisted's reactor stops on SIGTERM (its own handler), after daphne's shutdown
            # trigger has cancelled the running app instances.
            stop_signal=signal.SIGTERM,
            stop_grace_s=5.0,
            signs=SIGNS,
        )

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        return self._spec([self.executable(), *self._argv(app, bind, values)], app, {})

    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        resolved = self.resolve(request.values)
        return command_launcher(
            self,
            request,
            ["daphne", *self._argv(request.app, request.bind, resolved)],
            resolved,
            install=self.install_hint,
            intro=["daphne reads no config file: every tuned setting is on the command line:"],
            notes=[
                "EDIT the app's folder (daphne imports the app from its working folder) and",
                "the endpoint's port and interface for your deployment: 127.0.0.1 accepts",
                "connections from this machine only (e.g. behind nginx).",
            ],
            # A short command (the endpoint, the app, at most `--verbosity 0`): one line.
            one_line=True,
        )

    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        # As a user runs it from an activated virtualenv: the tuner's own daphne first.
        return self._spec(["/bin/sh", str(path)], app, {"PATH": self.own_bin_first()})

    def artifact_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        return ["/bin/sh", "-n", str(path)]
