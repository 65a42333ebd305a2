"""A minimal server adapter that lives in the tests: the standard library's wsgiref, with a pool.

It proves the adapter contract is the only seam: one process, no worker forking, no config
file, a launcher script as its deployable artifact, and settings only a launcher can set. It
plugs in through `TUNER_SERVERS` (see tests/servers/conftest.py) with no change anywhere else.
"""

from __future__ import annotations

import platform
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from tuner.apps import AppRef
from tuner.servers.base import (
    Artifact,
    ArtifactRequest,
    Bind,
    LaunchSpec,
    ProcessModel,
    ServerAdapter,
    StartupSigns,
    comment_block,
    python_env_lines,
)
from tuner.servers.setting_builders import BOOL, INT, unrendered
from tuner.settings import SettingsTable, Value

LAUNCHER = "serve_wsgiref.py"
# The launcher's own exit code when the app cannot be imported: no setting can fix that.
APP_IMPORT_FAILED = 4


# Settings the launcher reads from its own constants: no command line, no config key.
SETTINGS = SettingsTable(
    "wsgiref",
    (
        unrendered("threads", INT, 8, "request threads in the pool", minimum=1),
        # socketserver's own default listen queue is 5.
        unrendered("backlog", INT, 5, "listen queue length", minimum=1, maximum=65535),
        unrendered("accesslog", BOOL, True, "a log line per request (to stderr)"),
    ),
)

_SERVER_CODE = '''
import importlib
import sys
from concurrent.futures import ThreadPoolExecutor
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

sys.path.insert(0, APP_FOLDER)
try:
    app = getattr(importlib.import_module(APP_MODULE), APP_CALLABLE)
except Exception as exc:
    print(f"cannot load the app {APP_MODULE}:{APP_CALLABLE}: {exc!r}", file=sys.stderr)
    sys.exit(APP_IMPORT_FAILED)


class Handler(WSGIRequestHandler):
    def log_message(self, format, *args):
        if ACCESSLOG:
            super().log_message(format, *args)


class PoolServer(WSGIServer):
    """wsgiref's server with a bounded thread pool instead of a thread per connection."""

    request_queue_size = BACKLOG

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pool = ThreadPoolExecutor(THREADS)

    def process_request(self, request, client_address):
        self.pool.submit(self.handle_in_pool, request, client_address)

    def handle_in_pool(self, request, client_address):
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)


server = PoolServer((HOST, PORT), Handler)
server.set_app(app)
print(f"serving on {HOST}:{PORT} with {THREADS} threads", file=sys.stderr, flush=True)
server.serve_forever()
'''


class WsgirefAdapter(ServerAdapter):
    name = "wsgiref"
    table = SETTINGS
    binary = "python3"
    install_hint = "it is the standard library: any CPython"
    artifact_filename = LAUNCHER
    logging_settings = MappingProxyType({"accesslog": False})
    process_model = ProcessModel(
        forks_workers=False, processes=None, threads="threads", kind_label="thread pool"
    )
    space_file = Path(__file__).with_name("wsgiref.toml")

    def executable(self) -> str:
        return sys.executable

    def version(self) -> str:
        return platform.python_version()

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        return f"{values['threads']} threads"

    def _launcher(
        self,
        app: AppRef,
        host: str,
        port: int,
        values: Mapping[str, Value],
        header: str,
        env: Mapping[str, str] | None = None,
    ) -> str:
        resolved = self.resolve(values)
        lines = ["#!/usr/bin/env python3", *comment_block(header, "#")]
        lines.append("# Where the app is and where to listen: EDIT for your deployment.")
        lines += [
            f"APP_FOLDER = {app.pythonpath!r}",
            f"APP_MODULE = {app.module!r}",
            f"APP_CALLABLE = {app.callable!r}",
            f"HOST = {host!r}",
            f"PORT = {port!r}",
            f"APP_IMPORT_FAILED = {APP_IMPORT_FAILED!r}",
            "# Tuned settings.",
        ]
        for setting in self.table.settings:
            lines.append(f"{setting.name.upper()} = {resolved[setting.name]!r}  # {setting.doc}")
        if env:  # before the server code imports the app
            lines += ["import os", *python_env_lines(env)]
        return "\n".join(lines) + "\n" + _SERVER_CODE

    def _spec(self, launcher: Path, app: AppRef, files: Mapping[str, str]) -> LaunchSpec:
        return LaunchSpec(
            argv=(self.executable(), "-u", str(launcher)),
            env={},
            cwd=app.pythonpath,
            stop_signal=signal.SIGTERM,
            stop_grace_s=2.0,
            signs=StartupSigns(
                port_in_use=("Address already in use",),
                app_broken_exit_codes=frozenset({APP_IMPORT_FAILED}),
            ),
            files=files,
        )

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        launcher = workdir / LAUNCHER
        text = self._launcher(app, bind.host, bind.port, values, header="")
        return self._spec(launcher, app, {str(launcher): text})

    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        app, bind = request.app, request.bind
        text = self._launcher(
            app, bind.host, bind.port, request.values, request.header, request.env
        )
        return Artifact(LAUNCHER, text, run_hint=f"python3 {LAUNCHER}", mode=0o755)

    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        return self._spec(path, app, {})
