"""A server behind a front: the server's adapter with the front's settings added to its table.

The study, the confirmation rounds and the written file all work on one adapter and one config;
`FrontedAdapter` is that adapter for "gunicorn behind nginx". It keeps the server's name, files
and process model, adds the front's settings (`tuner.front.config`), and turns a trial's front
settings into the `Bind` the server is started on (a loopback port, or a unix socket), leaving
the server's own settings to the server's adapter. Starting nginx itself is the runner's job
(`tuner.front.trial`), since it is a second process tree.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from tuner.apps import AppRef
from tuner.errors import ConfigError
from tuner.front.config import FrontConfig, combined_table, front_table, split
from tuner.servers.base import (
    DIRECT,
    HTTP_OVER_TCP,
    Artifact,
    ArtifactRequest,
    Baseline,
    Bind,
    LaunchSpec,
    ServerAdapter,
    Transport,
)
from tuner.servers.wrapped import WrappedAdapter
from tuner.settings import Value

# The port a written file is rendered for (tuner.workflow.proven_file.DEPLOY_PORT): a unix socket
# written for deployment goes to /run, one booted to check a file or run a trial to /tmp.
DEPLOY_PORT = 8000


class FrontedAdapter(WrappedAdapter):
    """`inner` behind the front `front_name`; every server question goes to `inner` with
    the front's settings taken out (`WrappedAdapter`), and where the server listens, its
    settings as run there, its baselines and its file follow the front's settings."""

    def __init__(self, inner: ServerAdapter, front_name: str) -> None:
        super().__init__(inner, combined_table(inner))
        self.front_name = front_name

    def inner_values(self, values: Mapping[str, Value]) -> dict[str, Value]:
        return split(values)[0]

    # --- the bind a config means --------------------------------------------------------------

    def bind_for(self, values: Mapping[str, Value], host: str, port: int) -> Bind:
        """Where the server listens for a config: `host`:`port`, or a unix socket named after
        the port (so a free port also gives a socket path nobody uses); kept open as nginx
        keeps its connections to the server for this config."""
        config = FrontConfig.from_values(values)
        kept = config.keeps_connections
        if config.transport is Transport.UNIX:
            return Bind.unix(self.socket_path(port), config.protocol, kept_open=kept)
        return Bind.tcp(host, port, config.protocol, kept_open=kept)

    def socket_path(self, port: int) -> str:
        if port == DEPLOY_PORT:
            return f"/run/{self.name}/{self.name}.sock"
        # Short (a unix socket path has at most 107 bytes) and unique per tuner and port.
        return os.path.join(tempfile.gettempdir(), f"tuner-{os.getpid()}-{port}.sock")

    # --- settings -----------------------------------------------------------------------------

    def resolve(self, values: Mapping[str, object], *, bind: Bind = DIRECT) -> dict[str, Value]:
        """The front's settings, and the server's as it runs bound as the front reaches it
        (at `bind`'s host, see `check_bind`): a trial records what ran (gunicorn behind
        uwsgi_pass: protocol uwsgi, keepalive 0), and a record resolves to itself."""
        resolved = self.table.resolve(values)
        server, config = split(resolved)
        if (config.transport, config.protocol) not in self.inner.binds:
            raise ConfigError(
                f"{self.name} cannot be reached by {config.protocol} over {config.transport}"
            )
        front = {name: value for name, value in resolved.items() if name not in server}
        behind = self.bind_for(resolved, bind.host, bind.port)
        return {**self.inner.resolve(server, bind=behind), **front}

    def check_combination(self, values: Mapping[str, Value]) -> None:
        self.resolve(values)

    def baselines(self, cpus: float) -> tuple[Baseline, ...]:
        # The server's own baselines, reached as the front does by default.
        front = {setting.name: setting.default for setting in front_table(self.inner.binds)}
        return tuple(replace(b, values={**b.values, **front}) for b in self.inner.baselines(cpus))

    # --- running: at the bind the front's settings mean ---------------------------------------

    def check_bind(self, bind: Bind) -> None:
        """A caller gives the host and port to place the server at, as for a server it
        reaches directly (HTTP over TCP); the bind the front's settings make of them
        (`bind_for`) is checked by the server's adapter as it launches or renders there."""
        if bind.kind != HTTP_OVER_TCP:
            raise ConfigError(
                f"{self.name} behind {self.front_name} is placed at a TCP host and port, "
                f"not {bind.describe()}; the front's settings decide how it is reached"
            )

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        behind = self.bind_for(values, bind.host, bind.port)
        if behind.path is not None:
            # A socket file left by a killed run of this tuner would block the bind.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(behind.path)
        return self.inner.launch(app, behind, self.inner_values(values), workdir)

    def pins_connections(self, values: Mapping[str, Value], *, bind: Bind = DIRECT) -> bool:
        # Asked as the trial ran: whether nginx keeps its connections to the server open
        # (fastcgi_keep_conn, uwsgi_pass) decides whether they hold the server's workers.
        behind = self.bind_for(values, bind.host, bind.port)
        return self.inner.pins_connections(self.inner_values(values), bind=behind)

    def requirements(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        return self.inner.requirements(self.inner_values(self.resolve(values)))

    # --- the server's file, bound as the front reaches it -------------------------------------

    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        behind = self.bind_for(request.values, request.bind.host, request.bind.port)
        inner = self.inner_values(request.values)
        return self.inner.render_artifact(request.app, behind, inner, request.header, request.env)

    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        behind = self.bind_for(values, bind.host, bind.port)
        return self.inner.artifact_launch(path, app, behind, self.inner_values(values))
