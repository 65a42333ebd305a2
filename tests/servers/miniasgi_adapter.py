"""A minimal ASGI server and its adapter, living in the tests: the ASGI twin of wsgiref_adapter.

The standard library has no ASGI server, so this is one: asyncio streams, HTTP/1.1 with
keep-alive, requests with a Content-Length body (no chunked request bodies), each response
buffered whole and sent with its length, no lifespan protocol (which ASGI lets a server
leave out), no HTTP/2, websockets or TLS. That is enough to serve the contract suite's apps,
and it proves the adapter contract is the only seam for ASGI too: an adapter that declares
`interfaces = {ASGI}`, one process, a launcher script as its deployable artifact, joining
through `TUNER_SERVERS` (see tests/servers/conftest.py) with no change anywhere else.
"""

from __future__ import annotations

import platform
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from tuner.apps import AppRef, Interface
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
from tuner.servers.grids import product_grid
from tuner.servers.setting_builders import BOOL, INT, unrendered
from tuner.settings import SettingsTable, Value

LAUNCHER = "serve_miniasgi.py"
# The launcher's own exit code when the app cannot be imported: no setting can fix that.
APP_IMPORT_FAILED = 4


# Settings the launcher reads from its own constants: no command line, no config key.
SETTINGS = SettingsTable(
    "miniasgi",
    (
        # asyncio.start_server's own default listen queue is 100.
        unrendered("backlog", INT, 100, "listen queue length", minimum=1, maximum=65535),
        unrendered("keep_alive", BOOL, True, "keep HTTP/1.1 connections open between requests"),
        unrendered("accesslog", BOOL, True, "a log line per request (to stderr)"),
    ),
)

_SERVER_CODE = '''
import asyncio
import http
import importlib
import socket
import sys
import traceback
from urllib.parse import unquote

sys.path.insert(0, APP_FOLDER)
try:
    app = getattr(importlib.import_module(APP_MODULE), APP_CALLABLE)
except Exception as exc:
    print(f"cannot load the app {APP_MODULE}:{APP_CALLABLE}: {exc!r}", file=sys.stderr)
    sys.exit(APP_IMPORT_FAILED)


async def call_app(scope, body):
    """Run the app for one request: (status, headers, body), the response buffered whole."""
    response = {"status": 500, "headers": [], "body": []}
    finished = asyncio.Event()
    request = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        if request:
            return request.pop()
        await finished.wait()  # the app waits for the client to leave: after its response
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            response["status"] = message["status"]
            response["headers"] = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            response["body"].append(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                finished.set()

    try:
        await app(scope, receive, send)
    except Exception:
        traceback.print_exc()
        if not finished.is_set():
            return 500, [], b"internal server error"
    if not finished.is_set():
        return 500, [], b"the app returned before its response ended"
    return response["status"], response["headers"], b"".join(response["body"])


def head_bytes(status, headers, length, keep):
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    lines = [f"HTTP/1.1 {status} {reason}".encode()]
    names = {bytes(name).lower() for name, _ in headers}
    lines += [bytes(name) + b": " + bytes(value) for name, value in headers]
    if b"content-length" not in names:
        lines.append(b"content-length: " + str(length).encode())
    if not keep:
        lines.append(b"connection: close")
    return b"\\r\\n".join(lines) + b"\\r\\n\\r\\n"


async def serve_connection(reader, writer):
    client = writer.get_extra_info("peername")[:2]
    server = writer.get_extra_info("sockname")[:2]
    try:
        while True:
            try:
                head = await reader.readuntil(b"\\r\\n\\r\\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            request_line, *lines = head[:-4].decode("latin-1").split("\\r\\n")
            method, target, version = request_line.split(" ", 2)
            headers = []
            for line in lines:
                name, _, value = (part.strip() for part in line.partition(":"))
                headers.append((name.lower().encode("latin-1"), value.encode("latin-1")))
            fields = dict(headers)
            body = await reader.readexactly(int(fields.get(b"content-length", b"0")))
            connection = fields.get(b"connection", b"").lower()
            keep = KEEP_ALIVE and (
                connection != b"close" if version == "HTTP/1.1" else connection == b"keep-alive"
            )
            path, _, query = target.partition("?")
            scope = {
                "type": "http",
                "asgi": {"version": "3.0", "spec_version": "2.3"},
                "http_version": version.partition("/")[2],
                "method": method,
                "scheme": "http",
                "path": unquote(path),
                "raw_path": path.encode("latin-1"),
                "query_string": query.encode("latin-1"),
                "root_path": "",
                "headers": headers,
                "client": client,
                "server": server,
            }
            status, out_headers, out_body = await call_app(scope, body)
            writer.write(head_bytes(status, out_headers, len(out_body), keep) + out_body)
            await writer.drain()
            if ACCESSLOG:
                print(f'{client[0]} "{request_line}" {status} {len(out_body)}', file=sys.stderr)
            if not keep:
                return
    except ConnectionError:
        return
    finally:
        writer.close()


async def main():
    family = socket.AF_INET6 if ":" in HOST else socket.AF_INET
    # Bound here rather than by start_server, so a taken port is "Address already in use".
    sock = socket.create_server((HOST, PORT), family=family, backlog=BACKLOG)
    server = await asyncio.start_server(serve_connection, sock=sock, backlog=BACKLOG)
    print(f"serving ASGI on {HOST}:{PORT}", file=sys.stderr, flush=True)
    await server.serve_forever()


asyncio.run(main())
'''


class MiniAsgiAdapter(ServerAdapter):
    name = "miniasgi"
    table = SETTINGS
    binary = "python3"
    install_hint = "it is the standard library: any CPython"
    artifact_filename = LAUNCHER
    logging_settings = MappingProxyType({"accesslog": False})
    interfaces = frozenset({Interface.ASGI})
    process_model = ProcessModel(
        forks_workers=False, processes=None, threads=None, kind_label="event loop"
    )
    space_file = Path(__file__).with_name("miniasgi.toml")

    def executable(self) -> str:
        return sys.executable

    def version(self) -> str:
        return platform.python_version()

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        return "asyncio loop"

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        return product_grid({"backlog": (100, 1024), "keep_alive": (True, False)})

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
        launcher = workdir.resolve() / LAUNCHER
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
