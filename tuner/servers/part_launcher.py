"""The launcher part of the adapter contract (tuner/servers/base.py): the program, the command
line of one measurement and the binds it listens at, and what a host needs to run a config."""

from __future__ import annotations

import abc
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import final

from tuner.apps import AppRef
from tuner.errors import ConfigError, ToolMissingError
from tuner.logsigns import CutSign, LoadSign
from tuner.servers.binds import HTTP_OVER_TCP, Bind, Protocol, Transport
from tuner.servers.part_settings import SettingsPart
from tuner.settings import Value

# Programs of the system, not of a Python environment: a launcher run by one finds the server
# through PATH (a shell script), or runs the rest of its argv (unshare).
SYSTEM_PROGRAMS = frozenset({"/bin/sh", "/usr/bin/sh", "/bin/bash", "/usr/bin/unshare"})


@dataclass(frozen=True)
class StartupSigns:
    """How a server's own log and exit code say why it did not start.

    `port_in_use`: log text meaning the address is taken (the trial retries on another port).
    `rejected_value`: log text of a value the server refused, to pick the log's key line.
    `app_broken_exit_codes`: exit codes meaning the app itself cannot be loaded (no setting can
    fix that, so the study stops); `app_broken_if_logged` does the same for an exit code the
    server also uses for other failures, when its log contains the given text (or any of the
    given texts).
    """

    port_in_use: tuple[str, ...] = ("Address already in use",)
    rejected_value: tuple[str, ...] = ()
    app_broken_exit_codes: frozenset[int] = frozenset()
    app_broken_if_logged: Mapping[int, str | tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class LaunchSpec:
    """How to start one server: an argv list (never a shell), files to write first, how to stop.

    `env` holds only the variables to set on top of the tuner's own environment. `files` maps
    absolute paths to text that must exist before the argv runs (a generated launcher or config
    file); they are written by whoever starts the process. `load_signs` are the log lines that
    say the server fell behind while serving.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    stop_signal: signal.Signals
    stop_grace_s: float
    signs: StartupSigns = field(default_factory=StartupSigns)
    files: Mapping[str, str] = field(default_factory=dict)
    load_signs: tuple[LoadSign, ...] = ()
    # Folders made for this one run (a server root under a fresh TMPDIR), removed with the
    # process once it has stopped.
    scratch: tuple[str, ...] = ()
    # Where the server listens when that is not HTTP on the host:port it was started for (a
    # unix socket, the uwsgi protocol): its readiness is checked there, in its protocol.
    bind: Bind | None = None
    # What the stop repeats every 0.5 s to the processes still there (the master excepted,
    # which the stop signal already made stop its workers), if not `stop_signal`: the quick
    # signal of a server whose quick signal is unsafe as the first one (gunicorn's gthread).
    quick_stop_signal: signal.Signals | None = None

    def write_files(self) -> None:
        for path, text in self.files.items():
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")


class LauncherPart(SettingsPart):
    """How a server is started for one measurement: its program, its command line (`_launch`,
    required), the binds it can listen at, and what a host needs to run a config (in a clean
    environment too). Required besides `_launch`: `version`."""

    binary: str
    # One `pip install` (or apt) line that brings the server.
    install_hint: str
    # The PyPI distribution that brings the server (None: nothing to install, e.g. stdlib).
    distribution: str | None = None
    # How the server can be bound, as (transport, protocol) pairs (see `Bind`). HTTP over
    # TCP is what every server does; a server that can listen on a unix socket or speak
    # another protocol (for a front such as nginx) declares it here, and its hooks honour
    # `bind.path` and `bind.protocol`.
    binds: frozenset[tuple[Transport, Protocol]] = frozenset({HTTP_OVER_TCP})

    @final
    def launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        """How to start the server bound as `bind` for one measurement; generated files go
        under `workdir`. The bind is checked against `binds` first, and the app's interface
        against `interfaces` (`_launch` does the rest)."""
        self.check_bind(bind)
        self.check_app(app)
        return self._launch(app, bind, values, workdir)

    @abc.abstractmethod
    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        """`launch` for a bind already checked. `workdir` may be relative: make a path in it
        absolute (`workdir.resolve()`), as the server runs in the app's folder. A spec for a
        bind other than HTTP over TCP names it (`LaunchSpec.bind`), so readiness is checked
        there, in its protocol."""

    def needs_front(self) -> bool:
        """True for a server that does not speak HTTP over TCP (FastCGI only): the load
        generator speaks HTTP, so it is measured only behind a front that translates."""
        return HTTP_OVER_TCP not in self.binds

    def check_bind(self, bind: Bind) -> None:
        """Raise ConfigError for a bind the server cannot listen at (not in `binds`)."""
        if bind.kind not in self.binds:
            kinds = ", ".join(f"{p} over {t}" for t, p in sorted(self.binds))
            raise ConfigError(
                f"{self.name} cannot listen for {bind.protocol} over {bind.transport}; "
                f"it supports: {kinds}"
            )

    def cut_signs(self, values: Mapping[str, Value]) -> tuple[CutSign, ...]:
        """The lines in which the server's log says it ended requests it was serving (a worker
        killed over its timeout, recycled, a request turned away at a cap), each with what
        in `values` did it; none by default. A stream cut in a run is reported with those its
        log shows over the measurement window."""
        return ()

    @abc.abstractmethod
    def version(self) -> str: ...

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

    # --- what a host needs to run a config -------------------------------------------------

    def extras(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        """The distribution's extras a config needs (gunicorn's `gevent` for gevent workers)."""
        return ()

    def extra_distributions(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        """Other distributions a config needs that no extra of the server's brings: uWSGI's
        gevent loop imports `gevent`, which the `pyuwsgi` wheel does not declare. Names only;
        `requirements` pins each to the version installed here."""
        return ()

    def requirements(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        """pip requirement lines that run this config: the server's distribution with the
        extras the config needs, then its extra distributions, each pinned to the version
        installed here (the one measured). A written artifact is booted in a clean virtual
        environment holding only these (and the app's own requirements) before it is written,
        so a line missing here is a file that is refused."""
        if self.distribution is None:
            return tuple(_pinned(name) for name in self.extra_distributions(values))
        extras = sorted(set(self.extras(values)))
        server = _pinned(self.distribution, f"[{','.join(extras)}]" if extras else "")
        return (server, *(_pinned(name) for name in self.extra_distributions(values)))

    def launch_in(self, spec: LaunchSpec, bin_dir: Path) -> LaunchSpec:
        """`spec` run by the programs of another environment (a clean venv's `bin` folder):
        its Python for a spec that starts this Python, else the server's own binary there;
        a launcher run by a system program (a shell script) finds them first on PATH, as
        in an activated virtualenv. An adapter whose argv starts otherwise overrides this."""
        search_path = os.pathsep.join([str(bin_dir), spec.env.get("PATH", os.defpath)])
        return replace(
            spec,
            argv=tuple(self.argv_in(list(spec.argv), bin_dir)),
            env={**spec.env, "PATH": search_path},
        )

    def argv_in(self, argv: list[str], bin_dir: Path) -> list[str]:
        """`argv` (a launch or check command) with its program taken from `bin_dir`."""
        program = argv[0]
        if program == sys.executable:
            replacement = bin_dir / "python"
        elif Path(program).name == self.binary:
            replacement = bin_dir / self.binary
        elif program in SYSTEM_PROGRAMS:
            return argv  # the system's own: what it runs comes from PATH
        else:
            raise ToolMissingError(
                f"{self.name}: cannot tell which program of a clean environment replaces "
                f"{program!r}; the adapter must override launch_in"
            )
        return [str(replacement), *argv[1:]]

    def own_bin_first(self) -> str:
        """PATH with the folder of the measured server binary first, as in an activated
        virtualenv: a shell launcher then runs the server that was measured."""
        return os.pathsep.join([os.path.dirname(self.executable()), os.environ.get("PATH", "")])


def _pinned(distribution: str, extras: str = "") -> str:
    """`name[extras]==version` with the version installed here, or unpinned if it is not."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{distribution}{extras}=={version(distribution)}"
    except PackageNotFoundError:
        return f"{distribution}{extras}"
