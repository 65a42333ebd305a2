"""An adapter around another one: every question of the contract goes to the wrapped adapter.

Two wrappers add settings of their own to a server's table: the app's environment variables
(`tuner.servers.appenv`) and a front's settings (`tuner.front.fronted`). Each sees a config
with its own settings in it, and the wrapped adapter must not: `inner_values` takes them out.
`WrappedAdapter` forwards every method of `ServerAdapter` with that done, so a wrapper
overrides only what it changes; a method forgotten would otherwise fall back to
`ServerAdapter`'s default and silently ignore the wrapped adapter's own (its baselines, its
process model, its launcher). The bind is checked once, by the wrapper's own `launch`,
`render_artifact` or `artifact_launch` (`check_bind` asks the wrapped adapter): its hooks
then call the wrapped adapter's hooks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from tuner.apps import AppRef, Interface
from tuner.errors import ConfigError
from tuner.servers.base import (
    DIRECT,
    Artifact,
    ArtifactRequest,
    Baseline,
    Bind,
    EventLoops,
    LaunchSpec,
    ServerAdapter,
    SizedRequest,
)
from tuner.settings import SettingsTable, Value

# A file's request, plain or sized: a wrapper hands on the kind it was given.
Request = TypeVar("Request", bound=ArtifactRequest)


class WrappedAdapter(ServerAdapter):
    """`inner` with the settings table `table` (the inner one plus the wrapper's settings)."""

    def __init__(self, inner: ServerAdapter, table: SettingsTable) -> None:
        self.inner = inner
        self.table = table
        self.name = inner.name
        self.binary = inner.binary
        self.install_hint = inner.install_hint
        self.process_model = inner.process_model
        self.artifact_filename = inner.artifact_filename
        self.space_file = inner.space_file
        self.distribution = inner.distribution
        self.logging_settings = inner.logging_settings
        self.binds = inner.binds
        self.interfaces = inner.interfaces
        self.http_only_settings = inner.http_only_settings
        self.sizing_env = inner.sizing_env

    def inner_values(self, values: Mapping[str, Value]) -> dict[str, Value]:
        """The part of a config the wrapped adapter knows: all of it, unless a wrapper adds
        settings of its own."""
        return dict(values)

    def inner_request(self, request: Request) -> Request:
        """`request` with the part of its config the wrapped adapter knows."""
        return replace(request, values=self.inner_values(request.values))

    # --- the app's interface ----------------------------------------------------------------

    def serving(self, interface: Interface) -> ServerAdapter:
        # A wrapper wraps an adapter already set up for one interface (adapter_for_app):
        # it can only confirm that one.
        if self.inner.serving(interface) is not self.inner:
            raise ConfigError(f"{self.name}: set up the interface before wrapping the adapter")
        return self

    def check_app(self, app: AppRef) -> None:
        self.inner.check_app(app)

    # --- settings -------------------------------------------------------------------------

    def check_combination(self, values: Mapping[str, Value]) -> None:
        self.inner.check_combination(self.inner_values(values))

    def resolve(self, values: Mapping[str, object], *, bind: Bind = DIRECT) -> dict[str, Value]:
        return self.inner.resolve(self.inner_values(values), bind=bind)  # type: ignore[arg-type]

    # --- running ----------------------------------------------------------------------------

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        return self.inner._launch(app, bind, self.inner_values(values), workdir)

    def check_bound(self, bind: Bind, values: Mapping[str, Value]) -> None:
        self.inner.check_bound(bind, self.inner_values(values))

    def needs_front(self) -> bool:
        return self.inner.needs_front()

    def check_bind(self, bind: Bind) -> None:
        self.inner.check_bind(bind)

    def version(self) -> str:
        return self.inner.version()

    def executable(self) -> str:
        return self.inner.executable()

    def check_installed(self) -> None:
        self.inner.check_installed()

    # --- process model ----------------------------------------------------------------------

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        return self.inner.concurrency_model(self.inner_values(values))

    def pins_connections(self, values: Mapping[str, Value], *, bind: Bind = DIRECT) -> bool:
        return self.inner.pins_connections(self.inner_values(values), bind=bind)

    def event_loops(self, values: Mapping[str, Value]) -> EventLoops | None:
        return self.inner.event_loops(self.inner_values(values))

    def processes(self, values: Mapping[str, Value]) -> int:
        return self.inner.processes(self.inner_values(values))

    def threads(self, values: Mapping[str, Value]) -> int:
        return self.inner.threads(self.inner_values(values))

    # --- what a host needs ----------------------------------------------------------------

    def extras(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        return self.inner.extras(self.inner_values(values))

    def extra_distributions(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        return self.inner.extra_distributions(self.inner_values(values))

    def requirements(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        return self.inner.requirements(self.inner_values(values))

    def launch_in(self, spec: LaunchSpec, bin_dir: Path) -> LaunchSpec:
        return self.inner.launch_in(spec, bin_dir)

    def argv_in(self, argv: list[str], bin_dir: Path) -> list[str]:
        return self.inner.argv_in(argv, bin_dir)

    # --- baselines and the hand grid --------------------------------------------------------

    def baselines(self, cpus: float) -> tuple[Baseline, ...]:
        return self.inner.baselines(cpus)

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        return self.inner.hand_grid(cpus)

    # --- the deployable artifact -----------------------------------------------------------

    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        return self.inner._render_artifact(self.inner_request(request))

    def check_artifact_name(self, path: Path) -> None:
        self.inner.check_artifact_name(path)

    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        return self.inner._artifact_launch(path, app, bind, self.inner_values(values))

    def _render_sized(self, request: SizedRequest) -> tuple[Artifact, ...]:
        return self.inner._render_sized(self.inner_request(request))

    def _sized_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        return self.inner._sized_launch(path, app, bind, self.inner_values(values))

    def sized_override(self) -> str:
        return self.inner.sized_override()

    def sized_least_processes(self, values: Mapping[str, Value]) -> tuple[int, str]:
        return self.inner.sized_least_processes(self.inner_values(values))

    def shell_launcher(self, lines: list[str]) -> Artifact:
        return self.inner.shell_launcher(lines)

    def own_bin_first(self) -> str:
        return self.inner.own_bin_first()

    def artifact_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        return self.inner.artifact_check_argv(path, app)

    def sized_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        return self.inner.sized_check_argv(path, app)
