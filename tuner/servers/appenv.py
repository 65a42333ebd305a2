"""A server adapter plus the app's own settings (tuner/appsettings.py), as one adapter.

The rest of the tuner sees one settings table: the server's settings and the app's
environment variables (named as such, e.g. DB_POOL_SIZE). So the search space, `--set`,
baselines, repeats, records and reports need nothing new: a config is one dict. This wrapper
splits it again where the server is concerned: the server's part goes to the real adapter,
the app's part becomes the environment of the server process for a trial, and the lines the
written file sets it with (the adapter's `render_artifact(env=...)`: gunicorn `raw_env`,
uWSGI `env`, `export` in a launcher script).

Every method of the contract is delegated; `tests/test_app_settings.py` checks that none is
left to `ServerAdapter`'s default, which would silently ignore the real adapter's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from tuner.apps import AppRef
from tuner.appsettings import AppSettings, load_app_settings, settings_path
from tuner.servers.base import Artifact, Baseline, Bind, LaunchSpec, ServerAdapter
from tuner.settings import SettingsTable, Value


class WithAppSettings(ServerAdapter):
    def __init__(self, inner: ServerAdapter, app_settings: AppSettings) -> None:
        self.inner = inner
        self.app_settings = app_settings
        self.name = inner.name
        self.table = SettingsTable(inner.table.server, inner.table.settings + app_settings.settings)
        self.binary = inner.binary
        self.install_hint = inner.install_hint
        self.process_model = inner.process_model
        self.artifact_filename = inner.artifact_filename
        self.space_file = inner.space_file
        self.distribution = inner.distribution
        self.logging_settings = inner.logging_settings
        self.binds = inner.binds

    # --- splitting a config ---------------------------------------------------------------

    def server_part(self, values: Mapping[str, Value]) -> dict[str, Value]:
        names = set(self.app_settings.names())
        return {name: value for name, value in values.items() if name not in names}

    def app_part(self, values: Mapping[str, Value]) -> dict[str, Value]:
        """Every app setting's value (defaults for those not in `values`), coerced."""
        table = {s.name: s for s in self.app_settings.settings}
        return {
            name: setting.coerce(values[name]) if name in values else setting.default
            for name, setting in table.items()
        }

    def environment(self, values: Mapping[str, Value]) -> dict[str, str]:
        return self.app_settings.environment(self.app_part(values))

    # --- settings -------------------------------------------------------------------------

    def check_combination(self, values: Mapping[str, Value]) -> None:
        self.inner.check_combination(self.server_part(values))

    def resolve(self, values: Mapping[str, object]) -> dict[str, Value]:
        server = self.inner.resolve(self.server_part(values))  # type: ignore[arg-type]
        return {**server, **self.app_part(values)}  # type: ignore[arg-type]

    def resolve_at(self, bind: Bind, values: Mapping[str, object]) -> dict[str, Value]:
        server = self.inner.resolve_at(bind, self.server_part(values))  # type: ignore[arg-type]
        return {**server, **self.app_part(values)}  # type: ignore[arg-type]

    # --- running ----------------------------------------------------------------------------

    def launch_spec(
        self, app: AppRef, host: str, port: int, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        spec = self.inner.launch_spec(app, host, port, self.server_part(values), workdir)
        return self._with_app(spec, values)

    def _with_app(self, spec: LaunchSpec, values: Mapping[str, Value]) -> LaunchSpec:
        """The server's launch with the app's environment and the app's own load signs."""
        processes = self.inner.processes(self.inner.resolve(self.server_part(values)))
        signs = self.app_settings.load_signs(processes, self.app_part(values))
        return replace(
            spec,
            env={**spec.env, **self.environment(values)},
            load_signs=spec.load_signs + signs,
        )

    def launch_at(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        spec = self.inner.launch_at(app, bind, self.server_part(values), workdir)
        return self._with_app(spec, values)

    def check_bound(self, bind: Bind, values: Mapping[str, Value]) -> None:
        self.inner.check_bound(bind, self.server_part(values))

    def check_bind(self, bind: Bind) -> None:
        self.inner.check_bind(bind)

    def version(self) -> str:
        return self.inner.version()

    def executable(self) -> str:
        return self.inner.executable()

    def check_installed(self) -> None:
        self.inner.check_installed()

    def needs_front(self) -> bool:
        return self.inner.needs_front()

    # --- process model ----------------------------------------------------------------------

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        return self.inner.concurrency_model(self.server_part(values))

    def pins_connections(self, values: Mapping[str, Value]) -> bool:
        return self.inner.pins_connections(self.server_part(values))

    def pins_connections_at(self, bind: Bind, values: Mapping[str, Value]) -> bool:
        return self.inner.pins_connections_at(bind, self.server_part(values))

    def processes(self, values: Mapping[str, Value]) -> int:
        return self.inner.processes(self.server_part(values))

    def threads(self, values: Mapping[str, Value]) -> int:
        return self.inner.threads(self.server_part(values))

    # --- what a host needs ----------------------------------------------------------------

    def extras(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        return self.inner.extras(self.server_part(values))

    def extra_distributions(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        return self.inner.extra_distributions(self.server_part(values))

    def requirements(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        return self.inner.requirements(self.server_part(values))

    def launch_in(self, spec: LaunchSpec, bin_dir: Path) -> LaunchSpec:
        return self.inner.launch_in(spec, bin_dir)

    def argv_in(self, argv: list[str], bin_dir: Path) -> list[str]:
        return self.inner.argv_in(argv, bin_dir)

    # --- baselines and the hand grid: the server's, with the app at its defaults ------------

    def baselines(self, cpus: float) -> tuple[Baseline, ...]:
        return tuple(
            replace(b, values={**b.values, **self.app_part({})}) for b in self.inner.baselines(cpus)
        )

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        return self.inner.hand_grid(cpus)

    # --- the deployable artifact: the server's, setting the app's environment -------------

    def render_artifact(
        self,
        app: AppRef,
        host: str,
        port: int,
        values: Mapping[str, Value],
        header: str = "",
        env: Mapping[str, str] | None = None,
    ) -> Artifact:
        environment = {**self.environment(values), **(env or {})}
        return self.inner.render_artifact(
            app, host, port, self.server_part(values), header, env=environment
        )

    def render_artifact_at(
        self,
        app: AppRef,
        bind: Bind,
        values: Mapping[str, Value],
        header: str = "",
        env: Mapping[str, str] | None = None,
    ) -> Artifact:
        environment = {**self.environment(values), **(env or {})}
        return self.inner.render_artifact_at(
            app, bind, self.server_part(values), header, env=environment
        )

    def artifact_launch(
        self, path: Path, app: AppRef, host: str, port: int, values: Mapping[str, Value]
    ) -> LaunchSpec:
        # No environment added: booting the file proves that it sets the app's variables.
        return self.inner.artifact_launch(path, app, host, port, self.server_part(values))

    def artifact_launch_at(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        return self.inner.artifact_launch_at(path, app, bind, self.server_part(values))

    def shell_launcher(self, lines: list[str]) -> Artifact:
        return self.inner.shell_launcher(lines)

    def own_bin_first(self) -> str:
        return self.inner.own_bin_first()

    def artifact_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        return self.inner.artifact_check_argv(path, app)


def with_app_settings(adapter: ServerAdapter, app_settings: AppSettings) -> ServerAdapter:
    """`adapter` itself when the app declares no settings, else the two as one adapter."""
    return WithAppSettings(adapter, app_settings) if app_settings else adapter


def adapter_for_app(server: str, app: AppRef, settings_file: Path | None) -> ServerAdapter:
    """The server's adapter, with the app's own settings if it declares any (the file given,
    else NAME.tuner.toml beside the app's module)."""
    from tuner.servers import get_adapter

    declared = load_app_settings(settings_path(app, settings_file))
    return with_app_settings(get_adapter(server), declared)
