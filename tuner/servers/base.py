"""The adapter contract: everything the tuner needs to know about one server, as data.

An adapter declares its settings table, how to launch the server (argv, environment, generated
files), its process model (does it fork workers; which setting counts processes, which threads),
its baselines, the deployable artifact it writes and how that artifact is booted, and how the
server's log says that it did not start. Nothing outside `tuner/servers/` names a server: the
rest of the tuner only reads these declarations, so adding a server is its module, its
`search_spaces/NAME.toml` and one registry line.

Shapes differ, so nothing here assumes a config file or pre-forking: gunicorn and uWSGI fork
workers and read a config file; a one-process thread-pool server may be configured only on its
command line, in its environment, or from a small Python launcher the adapter writes.
"""

from __future__ import annotations

import abc
import copy
import importlib
import importlib.resources
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import final

from tuner.apps import AppRef, Interface
from tuner.errors import ConfigError, ToolMissingError
from tuner.logsigns import LoadSign
from tuner.machine.bootlimits import boot_source
from tuner.machine.sizing import SizingRule
from tuner.settings import SettingsTable, Value

# Programs of the system, not of a Python environment: a launcher run by one finds the server
# through PATH (a shell script), or runs the rest of its argv (unshare).
SYSTEM_PROGRAMS = frozenset({"/bin/sh", "/usr/bin/sh", "/bin/bash", "/usr/bin/unshare"})
BASELINE_DEFAULT = "default"
# The folk rule for pre-forking servers ("2 x cores + 1 workers", gunicorn's docs).
BASELINE_FORK_RULE = "2*cpus+1"


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


@dataclass(frozen=True)
class ProcessModel:
    """How a server runs concurrent requests, for baselines, repairs and report axes.

    `forks_workers`: the server itself starts several worker processes (a `2*cpus+1` rule means
    something only then). `processes` / `threads`: the settings that count worker processes and
    threads per process, or None where the server has no such setting (one process, or no
    threads). `kind_label`: what `ServerAdapter.concurrency_model` names ("worker_class").
    """

    forks_workers: bool
    processes: str | None
    threads: str | None
    kind_label: str


@dataclass(frozen=True)
class EventLoops:
    """Which processes of a server's tree run the app's event loop on their main thread, so
    the tuner can see the app block it (tuner.metrics.loops): the server's own process when it
    serves alone (`root`), else its children whose command line contains `worker_marker`
    (not a supervisor's helpers, such as multiprocessing's resource tracker; "": every child,
    for a master that forks nothing but its workers)."""

    root: bool
    worker_marker: str = ""

    def pick(self, pids: Sequence[int], cmdline: Callable[[int], str]) -> list[int]:
        """The loop processes among `pids` (the tree, its root first)."""
        if self.root:
            return list(pids[:1])
        return [pid for pid in pids[1:] if self.worker_marker in cmdline(pid)]


@dataclass(frozen=True)
class Baseline:
    """A config every study measures next to its search: the default, or a documented rule."""

    label: str
    values: Mapping[str, Value]
    why: str


@dataclass(frozen=True)
class Artifact:
    """The deployable file an adapter writes: a config file, an environment file or a launcher.

    `text` is complete (header included); `mode` is its file mode (0o755 for a launcher).
    `run_hint` is the one command that uses it, for the file's reader and the terminal.
    """

    filename: str
    text: str
    run_hint: str
    mode: int = 0o644


@dataclass(frozen=True)
class ArtifactRequest:
    """What a deployable file is rendered from: the app, the `Bind` its server listens at,
    the config (`values`), the `header` that goes first as comments, and the app's own
    settings (`env`, tuner/appsettings.py) that the file sets in the app's environment. Built
    once, by `render_artifact` (or `render_sized`), and handed whole to the adapter's hooks;
    a hook that changes one part (a wrapper's values, a launcher's header) `replace`s it."""

    app: AppRef
    bind: Bind
    values: Mapping[str, Value]
    header: str = ""
    env: Mapping[str, str] | None = None


@dataclass(frozen=True, kw_only=True)
class SizedRequest(ArtifactRequest):
    """An `ArtifactRequest` for the files sized at boot (`render_sized`): the `rule` their
    counts come from (the adapter's own variable in it) and `filename`, the name of the
    config file. Its header already describes the rule."""

    rule: SizingRule
    filename: str


def bind_address(host: str, port: int) -> str:
    """`host:port`, with IPv6 literals bracketed as servers expect."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Text(str, Enum):
    """A member that is its text: compared, hashed, formatted and stored as its value, so a
    recorded study (front_protocol = "uwsgi") reads the same as before it was a type."""

    def __str__(self) -> str:
        return str(self.value)


class Transport(_Text):
    """How a server is reached: a TCP host:port, or a unix socket."""

    TCP = "tcp"
    UNIX = "unix"


class Protocol(_Text):
    """What a server speaks where it listens: HTTP, uWSGI's binary `uwsgi` protocol (nginx's
    uwsgi_pass) or FastCGI (nginx's fastcgi_pass). A server reached directly by the load
    generator speaks HTTP over TCP; anything else needs a front."""

    HTTP = "http"
    UWSGI = "uwsgi"
    FASTCGI = "fastcgi"


HTTP_OVER_TCP = (Transport.TCP, Protocol.HTTP)


@dataclass(frozen=True)
class Bind:
    """Where a server listens and what it speaks there: `host`:`port`, or the unix socket
    at `path` (then host and port are unused). `kept_open`: whether its client keeps each
    connection open for the next request (the load generator's HTTP keep-alive, nginx's
    upstream keepalive, FastCGI's keep-conn flag) or closes it after one (nginx's uwsgi_pass,
    fastcgi_keep_conn off); a server whose workers stay on a connection until it closes
    holds one for each kept connection (`ServerAdapter.pins_connections`)."""

    host: str = "127.0.0.1"
    port: int = 0
    path: str | None = None
    protocol: Protocol = Protocol.HTTP
    kept_open: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.protocol, Protocol):
            valid = ", ".join(p.value for p in Protocol)
            raise ValueError(f"protocol {self.protocol!r}: expected a Protocol ({valid})")

    @classmethod
    def tcp(
        cls, host: str, port: int, protocol: Protocol = Protocol.HTTP, kept_open: bool = True
    ) -> Bind:
        return cls(host=host, port=port, protocol=protocol, kept_open=kept_open)

    @classmethod
    def unix(cls, path: str, protocol: Protocol = Protocol.HTTP, kept_open: bool = True) -> Bind:
        return cls(path=path, protocol=protocol, kept_open=kept_open)

    @property
    def transport(self) -> Transport:
        return Transport.UNIX if self.path is not None else Transport.TCP

    @property
    def kind(self) -> tuple[Transport, Protocol]:
        """(transport, protocol), as adapters declare what they support."""
        return (self.transport, self.protocol)

    def address(self) -> str:
        """The socket's path, or `host:port` (IPv6 bracketed)."""
        return self.path if self.path is not None else bind_address(self.host, self.port)

    def describe(self) -> str:
        where = f"unix:{self.path}" if self.path is not None else self.address()
        return f"{self.protocol.value} on {where}"


# How the load generator reaches a server without a front: HTTP keep-alive over TCP.
DIRECT = Bind()


class ServerAdapter(abc.ABC):
    """One server, declared: settings, launch, process model, baselines, artifact, signs.

    Required: the class attributes below, `_launch`, `_render_artifact`, `_artifact_launch`,
    `version` and `concurrency_model`. The other methods have defaults that fit most servers.

    One method per operation, each taking the `Bind` the server listens at: `Bind.tcp(host,
    port)` for a server the load generator reaches, or what a front reaches it by (a unix
    socket, the uwsgi protocol, FastCGI). Where the bind is required it comes right after
    what the operation is about (the app, the file) and before the values: `launch(app, bind,
    values, workdir)`, `render_artifact(app, bind, values, header, env)`, `artifact_launch(path,
    app, bind, values)`. Where it is optional it is the keyword `bind=DIRECT` after the values:
    `resolve(values, bind=...)`, `pins_connections(values, bind=...)`.

    `launch`, `render_artifact` and `artifact_launch` are final: each checks the bind against
    `binds` (`check_bind`), then calls the adapter's hook of the same name with a leading
    underscore. The check lives here, not in each adapter nor in each caller (the runner, the
    written file's boot, the front's block, the tests): adapters are as short either way, but
    here no caller can forget it and no adapter repeats it. The file hooks take one value,
    what the file is rendered from (`_render_artifact(ArtifactRequest)`,
    `_render_sized(SizedRequest)`), built once by the final method. A server that speaks only
    HTTP over TCP reads `bind.host` and `bind.port` in its hooks and needs nothing else. A hook
    that needs another operation calls that one's hook (the bind is checked already); a
    wrapper (`WrappedAdapter`) asks the wrapped adapter's hooks, derived from this class.
    """

    name: str
    table: SettingsTable
    binary: str
    # One `pip install` (or apt) line that brings the server.
    install_hint: str
    process_model: ProcessModel
    # The name of the deployable file (`Artifact.filename`).
    artifact_filename: str
    # A search space shipped outside `search_spaces/` (a plugin's own); None = the shipped one.
    space_file: Path | None = None
    # The PyPI distribution that brings the server (None: nothing to install, e.g. stdlib).
    distribution: str | None = None
    # Settings that change what an operator sees (access logs), each with the value that stops
    # the per-request log: a written file keeps them at the server's default unless changing
    # them is measurably better, and the confirmation measures the best config both ways.
    logging_settings: Mapping[str, Value] = MappingProxyType({})
    # How the server can be bound, as (transport, protocol) pairs (see `Bind`). HTTP over
    # TCP is what every server does; a server that can listen on a unix socket or speak
    # another protocol (for a front such as nginx) declares it here, and its hooks honour
    # `bind.path` and `bind.protocol`.
    binds: frozenset[tuple[Transport, Protocol]] = frozenset({HTTP_OVER_TCP})
    # The app interfaces the server runs. For one that runs both, `serving` returns it set up
    # for one: a copy of this adapter, or the adapter `interface_adapters` names for it.
    interfaces: frozenset[Interface] = frozenset({Interface.WSGI})
    # An interface the server runs through an adapter of its own (gunicorn's uvicorn worker,
    # granian's --interface asgi), named "module:Class" and imported when asked for, as the
    # registry names adapters: it subclasses this one, and an import here would tie the two
    # modules in a loop.
    interface_adapters: Mapping[Interface, str] = MappingProxyType({})
    # Settings that only mean something while the server speaks HTTP (uWSGI's `protocol`):
    # a search behind a front leaves them at their default when another protocol is drawn.
    http_only_settings: tuple[str, ...] = ()
    # The environment variable that overrides the process count a file sized at boot computes
    # (the server's own convention: WEB_CONCURRENCY for gunicorn); None: this server writes
    # no such file yet (`render_sized`).
    sizing_env: str | None = None

    # --- the app's interface ----------------------------------------------------------------

    def serving(self, interface: Interface) -> ServerAdapter:
        """This adapter set up for apps of `interface`, whose `interfaces` is that one alone.
        A server that runs one interface returns itself; one that runs both (gunicorn with the
        uvicorn worker, granian's --interface) returns a copy whose table defaults and search
        space are that interface's. ConfigError for an interface the server cannot run."""
        if interface not in self.interfaces:
            raise ConfigError(f"{self.name} cannot serve {interface.describe()}")
        if self.interfaces == {interface}:
            return self
        target = self.interface_adapters.get(interface)
        if target is not None:
            module, _, name = target.partition(":")
            adapter: ServerAdapter = getattr(importlib.import_module(module), name)()
            return adapter
        alone = copy.copy(self)  # this very table, space and launch, for `interface` alone
        alone.interfaces = frozenset({interface})
        return alone

    def check_app(self, app: AppRef) -> None:
        """Raise ConfigError for an app whose interface this adapter is not set up to serve."""
        if app.interface not in self.interfaces:
            served = " or ".join(sorted(i.value.upper() for i in self.interfaces))
            raise ConfigError(
                f"{self.name} (as set up here) serves {served} apps; {app} is "
                f"{app.interface.describe()}"
            )

    # --- settings -------------------------------------------------------------------------

    def check_combination(self, values: Mapping[str, Value]) -> None:  # noqa: B027 - a hook
        """Raise ConfigError for a combination of values the server cannot run as meant."""

    def resolve(self, values: Mapping[str, object], *, bind: Bind = DIRECT) -> dict[str, Value]:
        """Every setting's value (server defaults + `values`) as the server runs bound as
        `bind` (by default as the load generator reaches it), checked alone, together and at
        the bind: what a trial records is what ran. An adapter whose bind decides a setting
        (gunicorn's protocol) overrides this to set it."""
        resolved = self.table.resolve(values)
        self.check_combination(resolved)
        self.check_bound(bind, resolved)
        return resolved

    # --- running ----------------------------------------------------------------------------

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

    def check_bound(self, bind: Bind, values: Mapping[str, Value]) -> None:  # noqa: B027 - a hook
        """Raise ConfigError for settings the server cannot run as meant when bound as `bind`
        (gunicorn's reuse_port on a unix socket)."""

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

    # --- process model ----------------------------------------------------------------------

    @abc.abstractmethod
    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        """How a config serves concurrent requests, in a few words ("gthread"), for reports."""

    def pins_connections(self, values: Mapping[str, Value], *, bind: Bind = DIRECT) -> bool:
        """True when each connection kept open holds a worker thread or process for as long
        as it stays open, reached as `bind` (by default as the load generator reaches it:
        HTTP over TCP, kept open; its `kept_open` says whether the client keeps them): such a
        config answers at most processes x threads clients at a time and leaves the others
        waiting, however idle the held connections are."""
        return False

    def event_loops(self, values: Mapping[str, Value]) -> EventLoops | None:
        """Where a config runs the app's event loop, for a server that serves async apps on
        one (ASGI); None where the app's code is not run on a loop it could block (WSGI)."""
        return None

    def processes(self, values: Mapping[str, Value]) -> int:
        """Worker processes a config runs (1 where the server has no such setting)."""
        key = self.process_model.processes
        return max(1, int(values[key])) if key else 1

    def threads(self, values: Mapping[str, Value]) -> int:
        """Threads per worker process (1 where the server has no such setting)."""
        key = self.process_model.threads
        return max(1, int(values[key])) if key else 1

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

    # --- baselines --------------------------------------------------------------------------

    def baselines(self, cpus: float) -> tuple[Baseline, ...]:
        """The configs every study measures beside its search, the server's default first.

        The `2*cpus+1` rule only where the server forks worker processes; a server whose docs
        recommend another rule overrides this. `cpus` may be a fraction (a container's CPU
        quota): 2 x 1.5 + 1 = 4 workers, 2 x 0.5 + 1 = 2.
        """
        default = Baseline(BASELINE_DEFAULT, self.resolve({}), f"{self.name}'s own defaults")
        key = self.process_model.processes
        if not (self.process_model.forks_workers and key):
            return (default,)
        rule = Baseline(
            BASELINE_FORK_RULE,
            self.resolve({key: max(1, round(2 * cpus + 1))}),
            f"{key} = 2 x {cpus:g} CPUs + 1, the folk rule for pre-forking servers",
        )
        return (default, rule)

    # --- a hand grid, for the benchmark that checks the tuner --------------------------------

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        """The configs a careful engineer would try by hand on `cpus` CPUs (about 40-64):
        `benchmarks/grid_vs_tuner.py` measures them all to see whether the tuner finds as good
        a config. By default every process count of `worker_counts` (if the server forks) by
        1, 4, 16 and 64 threads (if it has threads); servers with other levers override it."""
        model = self.process_model
        counts = worker_counts(cpus) if model.forks_workers and model.processes else [1]
        threads = [1, 2, 4, 8, 16, 32, 64] if model.threads else [1]
        grid: list[dict[str, Value]] = []
        for count in counts:
            for thread_count in threads:
                values: dict[str, Value] = {}
                if model.forks_workers and model.processes:
                    values[model.processes] = count
                if model.threads:
                    values[model.threads] = thread_count
                grid.append(values)
        return grid

    # --- the deployable artifact -----------------------------------------------------------

    @final
    def render_artifact(
        self,
        app: AppRef,
        bind: Bind,
        values: Mapping[str, Value],
        header: str = "",
        env: Mapping[str, str] | None = None,
    ) -> Artifact:
        """The file a user deploys for a server bound as `bind`, from the same table as the
        command line; `header` goes first, as comments. `env` holds the app's own settings
        (tuner/appsettings.py): the file must set them in the environment the app is imported
        in, the server's own way (gunicorn `raw_env`, uWSGI `env`, `export` in a shell
        launcher, `os.environ` in a Python one), so that booting the file alone runs the app
        as measured. The bind and the app's interface are checked first (`_render_artifact`
        does the rest)."""
        self.check_bind(bind)
        self.check_app(app)
        return self._render_artifact(ArtifactRequest(app, bind, values, header, env))

    @abc.abstractmethod
    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        """`render_artifact` for a bind already checked."""

    @final
    def artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        """How to boot the artifact written at `path` (rendered for `bind`), exactly as its
        `run_hint` tells a user to: this is how the tuner proves the file works. The bind is
        checked first, and the app's interface (`_artifact_launch` does the rest)."""
        self.check_bind(bind)
        self.check_app(app)
        return self._artifact_launch(path, app, bind, values)

    @abc.abstractmethod
    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        """`artifact_launch` for a bind already checked (a spec naming the bind as
        `_launch`'s does)."""

    # --- a file sized at boot -------------------------------------------------------------

    @final
    def render_sized(
        self,
        app: AppRef,
        bind: Bind,
        values: Mapping[str, Value],
        rule: SizingRule,
        header: str = "",
        env: Mapping[str, str] | None = None,
        filename: str | None = None,
    ) -> tuple[Artifact, ...]:
        """The files that compute their process and thread counts at boot from `rule` and the
        box's own limits (tuner/machine/bootlimits.py), the one to run first: the config file
        itself where its format computes (gunicorn.conf.py), else a launcher beside it that
        computes and starts the server with the counts. `values` are the other settings (and
        the counts of one measured size, which the file keeps where it cannot compute).
        `filename`: the config file's name, if not `artifact_filename` (a launcher names it).
        The rule, its points and its range go in the header."""
        self.check_bind(bind)
        self.check_app(app)
        if self.sizing_env is None:
            raise ConfigError(
                f"{self.name} writes no file sized at boot yet; size it per box with "
                "--cpu-limit, one study per size"
            )
        # The variable and the count it overrides are this server's (a launcher passes the
        # count on in that same variable), and so are the fewest processes this config runs.
        least, reason = self.sized_least_processes(values)
        rule = replace(
            rule,
            env=self.sizing_env,
            overrides=self.sized_override(),
            least_processes=least,
            least_reason=reason,
        )
        described = "\n".join(["Sized at boot:", *rule.describe_lines()])
        full = f"{header}\n{described}" if header else described
        request = SizedRequest(
            app, bind, values, full, env, rule=rule, filename=filename or self.artifact_filename
        )
        return self._render_sized(request)

    def sized_override(self) -> str:
        """The count `sizing_env` overrides: the processes, or the threads of a one-process
        server (whose threads are what scales)."""
        return "processes" if self.process_model.processes else "threads"

    def sized_least_processes(self, values: Mapping[str, Value]) -> tuple[int, str]:
        """The fewest processes a file sized at boot starts for this config, on any box and
        whatever its override says, and why (`SizingRule.least_processes`): one by default."""
        return 1, ""

    def _render_sized(self, request: SizedRequest) -> tuple[Artifact, ...]:
        """`render_sized` for a bind already checked, by an adapter with `sizing_env`."""
        raise NotImplementedError

    @final
    def sized_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        """How to boot the sized files whose first (`render_sized`) is at `path`, as its
        run_hint says. By default as the artifact: a config file that computes boots as any."""
        self.check_bind(bind)
        self.check_app(app)
        return self._sized_launch(path, app, bind, values)

    def _sized_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        return self._artifact_launch(path, app, bind, values)

    def shell_launcher(self, lines: list[str]) -> Artifact:
        """The artifact as a shell script, run as `sh FILE` (granian, waitress, mod_wsgi)."""
        return Artifact(
            self.artifact_filename,
            "\n".join(lines) + "\n",
            run_hint=f"sh {self.artifact_filename}",
            mode=0o755,
        )

    def own_bin_first(self) -> str:
        """PATH with the folder of the measured server binary first, as in an activated
        virtualenv: a shell launcher then runs the server that was measured."""
        return os.pathsep.join([os.path.dirname(self.executable()), os.environ.get("PATH", "")])

    def sized_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        """`artifact_check_argv` for the first of the sized files (`render_sized`) at `path`:
        by default the artifact's own check (a config file that computes is still one)."""
        return self.artifact_check_argv(path, app)

    def artifact_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        """A command that checks the artifact without serving (exit 0 = valid), if the server
        has one; booting it is the check either way."""
        return None


def _pinned(distribution: str, extras: str = "") -> str:
    """`name[extras]==version` with the version installed here, or unpinned if it is not."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{distribution}{extras}=={version(distribution)}"
    except PackageNotFoundError:
        return f"{distribution}{extras}"


def shipped_space(stem: str) -> Path:
    """The shipped search space search_spaces/STEM.toml: a server's own (STEM = its name), or
    the one of a server set up for one of its interfaces (gunicorn's for ASGI apps,
    `space_file`). Installed (wheel or editable), that folder is the package
    `tuner.search_spaces`. Run from a checkout, the checkout's own folder comes first: with the
    code on PYTHONPATH, the package would resolve through whichever install exists, possibly
    another checkout's."""
    name = f"{stem}.toml"
    checkout = Path(__file__).resolve().parents[2] / "search_spaces"
    if (checkout / name).is_file():
        return checkout / name
    try:
        folder = importlib.resources.files("tuner.search_spaces")
    except ModuleNotFoundError:  # a broken install; load_space names the missing file
        return checkout / name
    # A real folder: wheels install as files, and load_space reports paths users can open.
    return Path(str(folder / name))


def worker_counts(cpus: int) -> list[int]:
    """Eight worker-process counts from 1 to past 4*cpus+1, denser at the low end."""
    top = 4 * cpus + 4
    counts = sorted({1, 2, cpus, cpus + 1, 2 * cpus + 1, 3 * cpus, 4 * cpus + 1, top})
    while len(counts) < 8:
        counts = sorted(set(counts) | {max(counts) + 1})
    return counts[:8]


def shell_env_lines(env: Mapping[str, str] | None) -> list[str]:
    """`export NAME=value` lines that set the app's settings in a shell launcher."""
    if not env:
        return []
    lines = ["# The app's own settings, as measured (it reads them from its environment)."]
    return lines + [f"export {name}={shlex.quote(value)}" for name, value in env.items()]


def python_env_lines(env: Mapping[str, str] | None) -> list[str]:
    """`os.environ[NAME] = value` lines for a Python launcher, run before the app is imported."""
    if not env:
        return []
    lines = ["# The app's own settings, as measured (it reads them from its environment)."]
    return lines + [f"os.environ[{name!r}] = {value!r}" for name, value in env.items()]


def sizing_code(rule: SizingRule) -> list[str]:
    """The lines a sized Python file runs at boot: the limit reader (stdlib only, copied from
    tuner/machine/bootlimits.py) and the rule, then `SIZED = size(...)` with the counts and
    the log line. What follows uses `SIZED["processes"]`, `SIZED["threads"]`, `SIZED["line"]`."""
    return [
        "# --- Sized at boot: reads this box's CPU quota, affinity mask and memory limit (code",
        "# copied from the tuner, standard library only) and applies the rule in the header.",
        *boot_source().splitlines(),
        "",
        "",
        f"SIZING_RULE = {rule.literal()!r}",
        "SIZED = size(SIZING_RULE, read_box(), os.environ)",
    ]


def comment_block(header: str, prefix: str) -> list[str]:
    """`header` as comment lines; every line is prefixed, so a newline cannot end a comment."""
    return [f"{prefix} {line}".rstrip() for line in header.splitlines()] if header else []


_VERSION = re.compile(r"\d+(?:\.\d+)+")


def first_version_number(text: str) -> str:
    match = _VERSION.search(text)
    return match.group(0) if match else text.strip()
