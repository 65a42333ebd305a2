"""Servers started from a small Python launcher script, which is also their deployable file.

Some servers can only be fully configured from Python (Twisted's thread pool, cheroot's
keep-alive limit) or have no command line at all (werkzeug's dev server). For them the adapter
writes one self-contained script: the evidence header, the app's folder and the address (the
two things a user edits), the tuned values as literals, and the few lines that start the
server. A trial runs that very script, so the deployed file is the measured one.
"""

from __future__ import annotations

import abc
import importlib.metadata
import importlib.util
import signal
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from tuner.apps import AppRef
from tuner.errors import ToolMissingError
from tuner.logsigns import LoadSign
from tuner.servers.base import (
    HTTP_OVER_TCP,
    Artifact,
    ArtifactRequest,
    Bind,
    LaunchSpec,
    ServerAdapter,
    SizedRequest,
    StartupSigns,
    comment_block,
    python_env_lines,
    sizing_code,
)
from tuner.servers.setting_builders import SettingStyle
from tuner.settings import Value

# The launcher's exit code when the app cannot be imported: no setting can fix that.
APP_IMPORT_FAILED = 4

SIGNS = StartupSigns(
    port_in_use=("Address already in use", "is in use by another program"),
    app_broken_exit_codes=frozenset({APP_IMPORT_FAILED}),
)

# For a forked server process that must not outlive the process that forked it (bjoern's
# launcher, Tornado's fork_processes, flup's prefork children): the kernel signals it when that
# parent dies, even by SIGKILL (Linux, prctl PR_SET_PDEATHSIG). Pasted into the launchers,
# which need nothing but the standard library and their server.
DIE_WITH_PARENT = """
def die_with(parent, signum):
    \"\"\"Have the kernel send `signum` to this process when `parent` dies; False if it
    died already, before the request took effect.\"\"\"
    import ctypes
    import os

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signum)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    return os.getppid() == parent
"""

# Every launcher starts like this: the app is imported before the server, so an app that
# cannot load is one clear exit code instead of a server answering 500s. `address` is where
# it listens (`PythonLauncherAdapter.address_lines`), for a user to edit.
_PROLOGUE = """
import importlib
import os
import sys
import traceback

{address}
APP = {spec!r}

{env}sys.path.insert(0, APP_DIR)
os.chdir(APP_DIR)
try:
    module_name, _, callable_name = APP.partition(":")
    app = getattr(importlib.import_module(module_name), callable_name)
except Exception:
    traceback.print_exc()
    sys.exit({app_failed})
"""


class PythonLauncherAdapter(ServerAdapter):
    """An adapter whose server runs from a launcher script: subclasses give the script's
    imports and the lines that start the server (`server_code`)."""

    # The module the launcher imports, and the distribution that installs it (its version).
    module: str
    distribution: str
    binary = "python"
    # Most servers set no SIGTERM handler, so the process ends at once: all a measured server
    # needs. A server that handles it (Twisted) stops cleanly and quickly.
    stop_signal: signal.Signals = signal.SIGTERM
    load_signs: tuple[LoadSign, ...] = ()
    # Lines the launcher states first, before the evidence header (e.g. "not for production").
    notice: tuple[str, ...] = ()

    @abc.abstractmethod
    def server_code(self, values: Mapping[str, Value]) -> list[str]:
        """The lines that start the server on HOST:PORT for `app`, tuned by `values`."""

    def executable(self) -> str:
        self.check_installed()
        return sys.executable

    def check_installed(self) -> None:
        try:
            found = importlib.util.find_spec(self.module)
        except ModuleNotFoundError:  # a submodule's package (flup of flup.server.fcgi) is absent
            found = None
        if found is None:
            raise ToolMissingError(
                f"{self.name}: Python module {self.module!r} is not installed; {self.install_hint}"
            )

    def version(self) -> str:
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            raise ToolMissingError(
                f"{self.name}: {self.distribution} is not installed; {self.install_hint}"
            ) from None

    def _spec(self, script: Path, app: AppRef, files: Mapping[str, str], bind: Bind) -> LaunchSpec:
        return LaunchSpec(
            argv=(self.executable(), str(script)),
            env={"PYTHONUNBUFFERED": "1"},
            cwd=app.pythonpath,
            stop_signal=self.stop_signal,
            stop_grace_s=5.0,
            signs=SIGNS,
            files=files,
            load_signs=self.load_signs,
            bind=bind if bind.kind != HTTP_OVER_TCP else None,
        )

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        script = (workdir / self.artifact_filename).resolve()
        text = self._render_artifact(ArtifactRequest(app, bind, values)).text
        return self._spec(script, app, {str(script): text}, bind)

    def address_lines(self, app: AppRef, bind: Bind) -> list[str]:
        """The launcher's constants a user edits: the app's folder and where to listen."""
        return [
            "# EDIT for your deployment: the app's folder, and where to listen (127.0.0.1 accepts",
            "# connections from this machine only, e.g. behind nginx).",
            f"APP_DIR = {app.pythonpath!r}",
            f"HOST = {bind.host!r}",
            f"PORT = {bind.port!r}",
        ]

    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        """The launcher script for `bind` (its `address_lines`), the same for every server:
        notice, evidence header, how to run it, the app's import, the tuned settings as
        constants, then the server's own lines (`server_code`)."""
        app, bind = request.app, request.bind
        resolved = self.resolve(request.values, bind=bind)
        lines = ["#!/usr/bin/env python3", *(f"# {line}" for line in self.notice)]
        lines += comment_block(request.header, "#")
        lines.append(f"# Run: python3 {self.artifact_filename}  (with {self.install_hint}).")
        lines.append(
            _PROLOGUE.format(
                address="\n".join(self.address_lines(app, bind)),
                spec=app.spec,
                app_failed=APP_IMPORT_FAILED,
                env="".join(f"{line}\n" for line in python_env_lines(request.env)),
            ).rstrip()
        )
        lines.append("")
        lines.append("# Tuned settings (every one listed, defaults included).")
        for setting in self.table.settings:
            lines += [f"# {part}" for part in textwrap.wrap(setting.doc, 94)]
            lines += [f"{key} = {text}" for key, text in setting.config(resolved[setting.name])]
        lines.append("")
        lines += self.server_code(resolved)
        return Artifact(
            self.artifact_filename,
            "\n".join(lines) + "\n",
            run_hint=f"python3 {self.artifact_filename}",
            mode=0o755,
        )

    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        return self._spec(path, app, {}, bind)

    def sized_lines(self) -> list[str]:
        """Lines run after the sized count constants are set, to keep other constants in step
        with them (none by default)."""
        return []

    def _render_sized(self, request: SizedRequest) -> tuple[Artifact, ...]:
        """The launcher with its count constants computed at boot: the sizing code goes after
        the tuned constants and sets them from the rule, then prints the `sizing:` line,
        before the server's own lines (which read the constants)."""
        artifact = self._render_artifact(request)
        start = "\n".join(self.server_code(self.resolve(request.values, bind=request.bind)))
        at = artifact.text.rindex(start)
        model = self.process_model
        sized = sizing_code(request.rule)
        if model.processes:
            sized.append(f'{constant(model.processes)} = SIZED["processes"]')
        if model.threads:
            sized.append(f'{constant(model.threads)} = SIZED["threads"]')
        sized += self.sized_lines()
        sized.append('print(SIZED["line"], file=sys.stderr, flush=True)')
        text = artifact.text[:at] + "\n".join(sized) + "\n\n" + artifact.text[at:]
        filename = request.filename
        return (replace(artifact, filename=filename, text=text, run_hint=f"python3 {filename}"),)


def constant(name: str) -> str:
    """A setting's name as the launcher's constant: `keep_alive_conn_limit` -> KEEP_ALIVE_..."""
    return name.upper().replace("-", "_")


# A launcher's setting is a Python constant (`THREADS = 8`), never on a command line.
PYTHON = SettingStyle(key_of=constant, text=repr, command_line=False)
