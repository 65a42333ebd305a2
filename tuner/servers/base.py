"""What every server adapter provides: validate settings, build a command line, write a config.

An adapter is the only place that knows a server's flags; `tuner.measure.process` only runs the
`LaunchSpec` it returns.
"""

from __future__ import annotations

import abc
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tuner.apps import AppRef
from tuner.errors import ToolMissingError
from tuner.settings import SettingsTable, Value


@dataclass(frozen=True)
class LaunchSpec:
    """How to start one server: an argv list (never a shell) and how to stop it.

    `env` holds only the variables to set on top of the tuner's own environment.
    `app_broken_exit_codes` are exit codes by which the server says the app itself cannot be
    loaded (no config can fix that), so a start failure with one becomes AppBrokenError.
    `app_broken_if_logged` does the same for an exit code the server also uses for other
    failures, when its log contains the given text.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    stop_signal: signal.Signals
    stop_grace_s: float
    app_broken_exit_codes: frozenset[int] = field(default_factory=frozenset)
    app_broken_if_logged: Mapping[int, str] = field(default_factory=dict)


def bind_address(host: str, port: int) -> str:
    """`host:port`, with IPv6 literals bracketed as both servers expect."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class ServerAdapter(abc.ABC):
    """One WSGI server: its settings table and how to run it with a set of values."""

    name: str
    config_filename: str
    table: SettingsTable
    binary: str
    install_hint: str
    # The setting that counts worker processes ("workers" / "processes").
    worker_setting: str
    # What `concurrency_model` names, for report axes ("worker_class").
    model_label: str
    # The setting that counts threads per worker process.
    thread_setting: str = "threads"

    @abc.abstractmethod
    def check_combination(self, values: Mapping[str, Value]) -> None:
        """Raise ConfigError for a combination of values the server cannot run as meant."""

    @abc.abstractmethod
    def launch_spec(
        self, app: AppRef, host: str, port: int, values: Mapping[str, Value]
    ) -> LaunchSpec: ...

    @abc.abstractmethod
    def render_config(
        self,
        app: AppRef,
        host: str,
        port: int,
        values: Mapping[str, Value],
        header: str = "",
    ) -> str:
        """A complete config file, from the same table as the command line."""

    @abc.abstractmethod
    def config_argv(self, config_path: Path, app: AppRef) -> list[str]:
        """The command that boots the server from a file written by `render_config`."""

    def config_check_argv(self, config_path: Path, app: AppRef) -> list[str] | None:
        """A command that checks the file without serving (exit 0 = valid), if the server has
        one; booting the file is the check either way."""
        return None

    @abc.abstractmethod
    def version(self) -> str: ...

    @abc.abstractmethod
    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        """How a config serves concurrent requests, in a few words ("gthread"), for reports."""

    def pins_connections(self, values: Mapping[str, Value]) -> bool:
        """True when each open keep-alive connection holds a worker thread for as long as it
        stays open: such a config answers at most workers x threads clients at a time and
        leaves the others waiting, however idle the held connections are."""
        return False

    def resolve(self, values: Mapping[str, object]) -> dict[str, Value]:
        """Every setting's value (server defaults + `values`), checked alone and together."""
        resolved = self.table.resolve(values)
        self.check_combination(resolved)
        return resolved

    def executable(self) -> str:
        """The server binary: the one installed next to this Python first, else from PATH.

        Preferring the tuner's own environment means an un-activated virtualenv still runs
        the server version installed with the tuner.
        """
        beside_python = Path(sys.executable).with_name(self.binary)
        if beside_python.is_file():
            return str(beside_python)
        found = shutil.which(self.binary)
        if found is None:
            raise ToolMissingError(f"{self.binary} not found on PATH; {self.install_hint}")
        return found

    def check_installed(self) -> None:
        self.executable()

    def _version_output(self, *args: str) -> str:
        try:
            result = subprocess.run(
                [self.executable(), *args], capture_output=True, text=True, timeout=30
            )
        except OSError as exc:
            raise ToolMissingError(
                f"{self.binary} cannot run ({exc}); {self.install_hint}"
            ) from exc
        return (result.stdout + result.stderr).strip()

    def worker_count(self, values: Mapping[str, object]) -> int:
        return int(self.resolve(values)[self.worker_setting])

    def baseline_rule_values(self, cpus: int) -> dict[str, Value]:
        """The folk rule "2 * cpus + 1 workers", every other setting at the server default."""
        return self.resolve({self.worker_setting: 2 * cpus + 1})


def comment_block(header: str, prefix: str) -> list[str]:
    """`header` as comment lines; every line is prefixed, so a newline cannot end a comment."""
    return [f"{prefix} {line}".rstrip() for line in header.splitlines()] if header else []


_VERSION = re.compile(r"\d+(?:\.\d+)+")


def first_version_number(text: str) -> str:
    match = _VERSION.search(text)
    return match.group(0) if match else text.strip()
