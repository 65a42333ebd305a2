"""bjoern: its settings, and the launcher script that runs it in several processes.

bjoern is a libev loop in C: one process, one thread, no settings file, and it forks nothing
itself. Its own multi-process example binds the socket, then forks copies that all accept
from it; its `reuse_port` option is for the other way, where each process binds its own
SO_REUSEPORT socket and the kernel spreads connections over them. The launcher written here
does either (`listen_mode`), and is both what a trial runs and the deployable artifact.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import signal
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from tuner.apps import AppRef
from tuner.errors import ConfigError, ToolMissingError
from tuner.servers.base import (
    Artifact,
    ArtifactRequest,
    Bind,
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
from tuner.servers.pylauncher import DIE_WITH_PARENT, PYTHON
from tuner.servers.setting_builders import CHOICE, INT
from tuner.settings import SettingsTable, Value

LAUNCHER = "bjoern_server.py"

SIGNS = StartupSigns(
    # Python's "OSError: [Errno 98] Address already in use" from the bind.
    port_in_use=("Address already in use",),
    rejected_value=("ValueError", "OverflowError"),
)


# The launcher's constants (`PROCESSES = 2`), as any Python launcher writes them.
SETTINGS = SettingsTable(
    "bjoern",
    (
        PYTHON.value(
            "processes",
            INT,
            1,
            "bjoern processes (1 = bjoern alone, no launcher process in front)",
            minimum=1,
        ),
        PYTHON.value(
            "listen_mode",
            CHOICE,
            "shared",
            "shared: one socket bound before forking, every process accepts from it; "
            "reuseport: each process binds its own SO_REUSEPORT socket and the kernel spreads "
            "connections over them",
            choices=("shared", "reuseport"),
            key="LISTEN",
        ),
        PYTHON.value(
            "backlog",
            INT,
            1024,
            "listen queue length (capped by net.core.somaxconn)",
            minimum=1,
            maximum=65535,
        ),
    ),
)


class BjoernAdapter(ServerAdapter):
    name = "bjoern"
    artifact_filename = LAUNCHER
    table = SETTINGS
    binary = "python"  # bjoern is a module: the launcher runs under the tuner's Python
    install_hint = "pip install bjoern (builds against libev: apt-get install libev-dev)"
    distribution = "bjoern"
    process_model = ProcessModel(
        forks_workers=True, processes="processes", threads=None, kind_label="listen mode"
    )
    # bjoern has no convention of its own: the name says what it counts.
    sizing_env = "BJOERN_PROCESSES"

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        return f"event loop, {values['listen_mode']} socket"

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        # No threads to vary: every process count by both ways to share the port and both
        # queue lengths (32 points, the whole space at the usual process counts).
        return [
            {"processes": n, "listen_mode": mode, "backlog": backlog}
            for n in worker_counts(cpus)
            for mode in ("shared", "reuseport")
            for backlog in (128, 1024)
        ]

    def executable(self) -> str:
        return sys.executable

    def check_installed(self) -> None:
        if importlib.util.find_spec("bjoern") is None:
            raise ToolMissingError(
                f"bjoern is not installed for {sys.executable}; {self.install_hint}"
            )

    def version(self) -> str:
        try:
            return importlib.metadata.version("bjoern")
        except importlib.metadata.PackageNotFoundError:
            raise ToolMissingError(f"bjoern is not installed; {self.install_hint}") from None

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        if ":" in bind.host:
            raise ConfigError(f"bjoern listens on IPv4 only; {bind.host} is an IPv6 address")
        # Absolute: the launcher runs in the app's folder, and trials pass a relative workdir.
        launcher = workdir.resolve() / LAUNCHER
        text = self._render_artifact(ArtifactRequest(app, bind, values)).text
        return self._spec(launcher, app, {str(launcher): text})

    def _spec(self, launcher: Path, app: AppRef, files: Mapping[str, str]) -> LaunchSpec:
        return LaunchSpec(
            argv=(self.executable(), str(launcher)),
            env={"PYTHONUNBUFFERED": "1"},
            cwd=app.pythonpath,
            # The launcher stops every bjoern process on SIGTERM; bjoern alone dies on it.
            stop_signal=signal.SIGTERM,
            stop_grace_s=5.0,
            signs=SIGNS,
            files=files,
        )

    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        app, bind, env = request.app, request.bind, request.env
        resolved = self.resolve(request.values)
        lines = ["#!/usr/bin/env python3", *comment_block(request.header, "#")]
        lines += [
            "#",
            "# bjoern has no config file and forks nothing itself: this launcher imports the",
            "# app once and runs PROCESSES bjoern processes; SIGTERM or SIGINT stops them all.",
            "# Needs only bjoern (pip install bjoern; it builds against libev).",
            "",
            "# Where to listen. EDIT for your deployment (IPv4 only): 127.0.0.1 accepts",
            "# connections from this machine only (e.g. behind nginx).",
            f"HOST = {bind.host!r}",
            f"PORT = {bind.port!r}",
            "# EDIT: the app's folder (the one it was tuned in) and the app in it.",
            f"APP_DIR = {app.pythonpath!r}",
            f"APP = {app.spec!r}",
            "# Tuned settings.",
        ]
        if env:  # set before the body imports the app
            lines += ["import os", *python_env_lines(env)]
        for setting in self.table.settings:
            for key, text in setting.config(resolved[setting.name]):
                lines += [f"# {setting.doc}", f"{key} = {text}"]
        return Artifact(
            self.artifact_filename,
            "\n".join(lines) + "\n" + _BODY,
            run_hint=f"python3 {self.artifact_filename}",
            mode=0o755,
        )

    def _render_sized(self, request: SizedRequest) -> tuple[Artifact, ...]:
        """The launcher with PROCESSES computed at boot: the sizing code goes after the tuned
        constants and sets it from the rule, then prints the `sizing:` line, before the
        program (which forks PROCESSES bjoern processes)."""
        artifact = self._render_artifact(request)
        at = artifact.text.rindex(_BODY)
        sized = [
            *sizing_code(request.rule),
            'PROCESSES = SIZED["processes"]',
            "import sys",
            "",
            'print(SIZED["line"], file=sys.stderr, flush=True)',
        ]
        text = artifact.text[:at] + "\n" + "\n".join(sized) + "\n" + artifact.text[at:]
        filename = request.filename
        return (replace(artifact, filename=filename, text=text, run_hint=f"python3 {filename}"),)

    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        return self._spec(path, app, {})

    def artifact_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        return [self.executable(), "-m", "py_compile", str(path)]


# The launcher's program, after its settings block. It runs under the user's Python and needs
# nothing but bjoern.
_BODY = (
    """
import importlib
import os
import signal
import sys
import traceback

import bjoern
"""
    + DIE_WITH_PARENT
    + '''

def load_app():
    sys.path.insert(0, APP_DIR)
    os.chdir(APP_DIR)
    module, _, name = APP.partition(":")
    return getattr(importlib.import_module(module), name)


def listen(app):
    bjoern.listen(app, HOST, PORT, reuse_port=LISTEN == "reuseport", listen_backlog=BACKLOG)


def serve(parent):
    """Run bjoern in this process until SIGTERM or SIGINT; with a parent, die with it."""
    # bjoern's C loop does not return to Python to run a Python signal handler: the
    # kernel's default action (terminate) it is. bjoern stops on SIGINT by itself.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if parent is not None and not die_with(parent, signal.SIGKILL):
        os._exit(1)
    try:
        bjoern.run()
    except KeyboardInterrupt:
        pass


def child(app, parent, own_socket):
    code = 1
    try:
        if own_socket:
            listen(app)  # a socket of its own: the kernel spreads connections over them
        serve(parent)
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main():
    app = load_app()
    if PROCESSES == 1:
        listen(app)
        serve(None)
        return 0
    own_socket = LISTEN == "reuseport"
    if not own_socket:
        listen(app)  # before forking: every process accepts from this one socket
    children = set()

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    code = 0
    try:
        for _ in range(PROCESSES):
            pid = os.fork()
            if pid == 0:
                child(app, os.getppid(), own_socket)
            children.add(pid)
        pid, status = os.wait()  # returns only when a bjoern process stopped by itself
        children.discard(pid)
        print(f"bjoern process {pid} stopped (wait status {status}); stopping all", flush=True)
        code = 1
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    return code


if __name__ == "__main__":
    sys.exit(main())
'''
)
