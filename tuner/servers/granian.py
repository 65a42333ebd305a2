"""granian (2.x), WSGI interface: its tunable settings as one table, its flags and environment
(its ASGI interface: tuner/servers/granian_asgi.py).

Pre-forking: a main process spawns `workers` processes; each runs a Rust (tokio) runtime that
does the network I/O on `runtime_threads` threads and hands requests to a pool of
`blocking_threads` Python threads. granian has no config file: its own deployable form is the
`GRANIAN_*` environment, so the artifact is a launcher script holding exactly those variables
and the one command that reads them.

Pinned to 2.x: 2.0 renamed `--threads` to `--runtime-threads` and replaced `--threading-mode`
with `--runtime-mode` (granian's 2.0.0 release notes), so 1.x refuses these flags.
"""

from __future__ import annotations

import shlex
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from tuner.apps import AppRef, Interface
from tuner.errors import ConfigError, ToolMissingError
from tuner.logsigns import CutSign
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
    comment_block,
    first_version_number,
)
from tuner.servers.cmdlauncher import sized_check_argv, sized_command_files
from tuner.servers.setting_builders import CHOICE, INT, SettingStyle
from tuner.settings import SettingsTable, Value

SUPPORTED_MAJOR = 2
# granian refuses shorter lifetimes ("cannot be less than 60 seconds").
MIN_LIFETIME_S = 60

SIGNS = StartupSigns(
    # The Rust bind error, raised as "RuntimeError: Address already in use (os error 98)".
    port_in_use=("Address already in use",),
    # click's message for a flag value out of range, e.g. "Error: Invalid value for
    # '--backlog': 10 is not in the range x>=128."
    rejected_value=("Invalid value for", "ConfigurationError"),
)


def _env(name: str) -> str:
    return "GRANIAN_" + name.upper()


# `--workers 2` on the command line, `GRANIAN_WORKERS=2` in the environment a launcher sets.
STYLE = SettingStyle(key_of=_env)


SETTINGS = SettingsTable(
    "granian",
    (
        STYLE.value("workers", INT, 1, "worker processes", minimum=1),
        # 0 = granian's own rule: nothing is written, so granian computes it.
        STYLE.value(
            "blocking_threads",
            INT,
            0,
            "Python threads per worker that run the app; 0 = granian's rule, backpressure / 2 "
            "(512 with the default backlog)",
            minimum=0,
            unset=0,
        ),
        STYLE.value(
            "runtime_threads",
            INT,
            1,
            "Rust runtime threads per worker (network I/O, no Python)",
            minimum=1,
        ),
        STYLE.value(
            "runtime_mode",
            CHOICE,
            "auto",
            "st: one single-threaded runtime per runtime thread; mt: one multi-threaded "
            "runtime; auto = mt for WSGI",
            choices=("auto", "st", "mt"),
        ),
        STYLE.value(
            "http",
            CHOICE,
            "auto",
            "HTTP versions served: auto detects HTTP/2 per connection, 1 serves HTTP/1 only "
            "(an HTTP/2 client is refused)",
            choices=("auto", "1"),
            # auto is granian's default: written only when tuned away from it.
            unset="auto",
        ),
        STYLE.value(
            "backlog", INT, 1024, "listen queue length (granian's minimum is 128)", minimum=128
        ),
        STYLE.value(
            "backpressure",
            INT,
            0,
            "requests a worker runs at once, the rest wait in the listen queue; 0 = granian's "
            "rule, backlog / workers",
            minimum=0,
            unset=0,
        ),
        STYLE.switch("http1_keep_alive", True, "keep HTTP/1.1 connections open between requests"),
        STYLE.value(
            "http1_buffer_size",
            INT,
            417792,
            "maximum buffer size of an HTTP/1 connection (bytes)",
            minimum=8192,
        ),
        STYLE.value(
            "workers_lifetime",
            INT,
            0,
            f"restart each worker after N seconds; 0 = never (granian's minimum is "
            f"{MIN_LIFETIME_S})",
            minimum=0,
            unset=0,
        ),
        STYLE.switch(
            "access_log",
            False,
            "write an access log line per request",
            key="GRANIAN_LOG_ACCESS_ENABLED",
        ),
    ),
)


def _blocking_threads(values: Mapping[str, Value]) -> int:
    """The Python threads per worker granian runs, its own rule included (server/common.py:
    backpressure defaults to backlog // workers, WSGI blocking threads to backpressure // 2)."""
    workers = max(1, int(values["workers"]))
    backpressure = int(values["backpressure"]) or max(1, int(values["backlog"]) // workers)
    return int(values["blocking_threads"]) or max(1, backpressure // 2)


class GranianAdapter(ServerAdapter):
    name = "granian"
    artifact_filename = "granian.sh"
    logging_settings = MappingProxyType({"access_log": False})
    table = SETTINGS
    binary = "granian"
    install_hint = "pip install 'granian>=2,<3'"
    distribution = "granian"
    process_model = ProcessModel(
        forks_workers=True, processes="workers", threads="blocking_threads", kind_label="runtime"
    )
    # granian's own convention: every option is a GRANIAN_* variable too.
    sizing_env = "GRANIAN_WORKERS"
    # `--uds PATH` / GRANIAN_UDS (granian 2.x's --help; the installed one is checked by the
    # front tests).
    binds = frozenset({HTTP_OVER_TCP, (Transport.UNIX, Protocol.HTTP)})
    # WSGI apps as above; ASGI apps through `--interface asgi` (granian_asgi.py).
    interfaces = frozenset({Interface.WSGI, Interface.ASGI})
    interface_adapters = MappingProxyType(
        {Interface.ASGI: "tuner.servers.granian_asgi:GranianAsgiAdapter"}
    )
    # What `--interface` (GRANIAN_INTERFACE) says: the interface this table is for.
    interface_flag = "wsgi"

    def cut_signs(self, values: Mapping[str, Value]) -> tuple[CutSign, ...]:
        # granian 2.8.9's server/common.py: the lifetime respawn and a worker that exits.
        return (
            CutSign(
                r"worker-\d+ lifetime expired, gracefully respawning",
                "granian worker recycled",
                f"workers_lifetime = {values.get('workers_lifetime', 0)} s: the worker is "
                "respawned, and the streams it carries end with it",
            ),
            CutSign(
                r"Unexpected exit from worker-\d+",
                "granian worker died",
                "a worker process ended unexpectedly, and its connections with it",
            ),
        )

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        mode = "mt" if values["runtime_mode"] == "auto" else str(values["runtime_mode"])
        return f"{mode} runtime"

    def threads(self, values: Mapping[str, Value]) -> int:
        return _blocking_threads(values)

    def check_combination(self, values: Mapping[str, Value]) -> None:
        lifetime = int(values["workers_lifetime"])
        if 0 < lifetime < MIN_LIFETIME_S:
            raise ConfigError(
                f"granian workers_lifetime={lifetime}: granian refuses lifetimes under "
                f"{MIN_LIFETIME_S} s; use 0 (never) or at least {MIN_LIFETIME_S}"
            )

    def check_installed(self) -> None:
        version = self.version()
        if version.split(".")[0] != str(SUPPORTED_MAJOR):
            raise ToolMissingError(
                f"granian {version} is installed, but the tuner speaks granian "
                f"{SUPPORTED_MAJOR}.x's flags (1.x named them differently); {self.install_hint}"
            )

    def version(self) -> str:
        return first_version_number(self._version_output("--version"))

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        resolved = self.resolve(values)
        tcp = ["--host", bind.host, "--port", str(bind.port)]
        where = ["--uds", bind.path] if bind.path else tcp
        argv = [
            self.executable(),
            "--interface",
            self.interface_flag,
            *where,
            *self.table.argv(resolved),
            app.spec,
        ]
        # granian resolves the target against its working folder (and walks up out of any
        # package it is in), so it must start in the app's folder.
        return self._spec(argv, app.pythonpath, {}, bind)

    def _spec(self, argv: list[str], cwd: str, env: Mapping[str, str], bind: Bind) -> LaunchSpec:
        return LaunchSpec(
            argv=tuple(argv),
            # A Rust backtrace (RUST_BACKTRACE=1 in the environment) would bury the error
            # line, "Address already in use" among it, under 50 frames.
            env={"PYTHONUNBUFFERED": "1", "RUST_BACKTRACE": "0", **env},
            cwd=cwd,
            # SIGINT and SIGTERM both make granian stop its workers and exit.
            stop_signal=signal.SIGINT,
            stop_grace_s=5.0,
            signs=SIGNS,
            bind=bind if bind.kind != HTTP_OVER_TCP else None,
        )

    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        return self._script(request)

    def _script(
        self, request: ArtifactRequest, from_env: Mapping[str, str] | None = None
    ) -> Artifact:
        """The launcher; `from_env` maps the settings whose value the file reads from a
        variable (`NAME=${VARIABLE:-measured}`), a sized file's counts."""
        app, bind, env = request.app, request.bind, request.env
        from_env = from_env or {}
        where = (
            [f"GRANIAN_UDS={bind.path}"]
            if bind.path
            else [f"GRANIAN_HOST={bind.host}", f"GRANIAN_PORT={bind.port}"]
        )
        resolved = self.resolve(request.values)
        lines = ["#!/bin/sh", *comment_block(request.header, "#")]
        lines += [
            "#",
            "# granian reads no config file: its settings are the GRANIAN_* variables below.",
            "# The KEY=value lines work unchanged in a systemd EnvironmentFile= or a",
            "# docker --env-file, with the last line as the command.",
            "set -eu",
            "set -a  # export every variable assigned below",
            "# Where to listen. EDIT for your deployment: 127.0.0.1 accepts connections from",
            "# this machine only (e.g. behind nginx).",
            f"GRANIAN_INTERFACE={self.interface_flag}",
            *where,
            "# Tuned settings (a setting left at granian's own rule is not set).",
        ]
        for setting in self.table.settings:
            for key, text in setting.config(resolved[setting.name]):
                if setting.name in from_env:
                    text = f"${{{from_env[setting.name]}:-{text}}}"
                lines += [f"# {setting.doc}", f"{key}={text}"]
        if env:  # KEY=value lines too, so the block stays a valid EnvironmentFile
            lines.append(
                "# The app's own settings, as measured (it reads them from its environment)."
            )
            lines += [f"{name}={shlex.quote(value)}" for name, value in env.items()]
        lines += [
            "set +a",
            "# EDIT: the app's folder (the one it was tuned in). granian finds the app from",
            "# its working folder.",
            f"cd {shlex.quote(app.pythonpath)}",
            f"exec granian {shlex.quote(app.spec)}",
        ]
        return self.shell_launcher(lines)

    def _render_sized(self, request: SizedRequest) -> tuple[Artifact, ...]:
        """granian.sh with GRANIAN_WORKERS (and GRANIAN_BLOCKING_THREADS, where the config
        sets them; left at 0, granian's own rule, backpressure / 2, stays) read from the
        environment, and the launcher beside it that sets them from the box's limits
        (cmdlauncher.sized_command_files)."""
        resolved = self.resolve(request.values)
        variables = {"processes": _env("workers")}
        threads = self.process_model.threads
        if threads and int(resolved[threads]):
            variables["threads"] = _env(threads)
        return sized_command_files(self, request, variables, self._script)

    def _sized_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        env = {"PATH": self.own_bin_first()}
        return self._spec([sys.executable, str(path)], str(path.parent), env, bind)

    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        # The script runs `granian` from PATH: put the tuner's own first, so an un-activated
        # virtualenv boots the granian that was measured.
        env = {"PATH": self.own_bin_first()}
        return self._spec(["/bin/sh", str(path)], str(path.parent), env, bind)

    def artifact_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        return ["/bin/sh", "-n", str(path)]

    def sized_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        return sized_check_argv(path)
