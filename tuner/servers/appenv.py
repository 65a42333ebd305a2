"""A server adapter plus the app's own settings (tuner/appsettings.py), as one adapter.

The rest of the tuner sees one settings table: the server's settings and the app's
environment variables (named as such, e.g. DB_POOL_SIZE). So the search space, `--set`,
baselines, repeats, records and reports need nothing new: a config is one dict. This wrapper
splits it again where the server is concerned: the server's part goes to the real adapter,
the app's part becomes the environment of the server process for a trial, and the lines the
written file sets it with (the adapter's `render_artifact(..., env=...)`: gunicorn `raw_env`,
uWSGI `env`, `export` in a launcher script).

Every method of the contract is asked of the server's adapter (`WrappedAdapter`, derived
from the contract); this wrapper writes only what the app's settings change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from tuner.apps import AppRef
from tuner.appsettings import AppSettings, load_app_settings, settings_path
from tuner.servers.base import (
    DIRECT,
    Artifact,
    ArtifactRequest,
    Baseline,
    Bind,
    LaunchSpec,
    ServerAdapter,
    SizedRequest,
)
from tuner.servers.wrapped import Request, WrappedAdapter
from tuner.settings import SettingsTable, Value


class WithAppSettings(WrappedAdapter):
    def __init__(self, inner: ServerAdapter, app_settings: AppSettings) -> None:
        table = SettingsTable(inner.table.server, inner.table.settings + app_settings.settings)
        super().__init__(inner, table)
        self.app_settings = app_settings

    # --- splitting a config ---------------------------------------------------------------

    def inner_values(self, values: Mapping[str, Value]) -> dict[str, Value]:
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

    # --- settings: the server's, then the app's -------------------------------------------

    def resolve(self, values: Mapping[str, object], *, bind: Bind = DIRECT) -> dict[str, Value]:
        server = super().resolve(values, bind=bind)
        # The app's part is checked by its own table (app_part); its values are Values, which
        # the wider `values: Mapping[str, object]` of the contract's signature cannot say.
        return {**server, **self.app_part(values)}  # type: ignore[arg-type]

    # --- running: the server's launch, with the app's environment -------------------------

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        return self._with_app(super()._launch(app, bind, values, workdir), bind, values)

    def _with_app(self, spec: LaunchSpec, bind: Bind, values: Mapping[str, Value]) -> LaunchSpec:
        """The server's launch with the app's environment and the app's own load signs (per
        worker process, as the server runs at `bind`)."""
        processes = self.inner.processes(self.inner.resolve(self.inner_values(values), bind=bind))
        signs = self.app_settings.load_signs(processes, self.app_part(values))
        return replace(
            spec,
            env={**spec.env, **self.environment(values)},
            load_signs=spec.load_signs + signs,
        )

    # --- baselines: the server's, with the app at its defaults ----------------------------

    def baselines(self, cpus: float) -> tuple[Baseline, ...]:
        return tuple(
            replace(b, values={**b.values, **self.app_part({})}) for b in super().baselines(cpus)
        )

    # --- the deployable artifact: the server's, setting the app's environment -------------
    # (artifact_launch adds no environment: booting the file proves that it sets the app's
    # variables.)

    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        return super()._render_artifact(self._with_environment(request))

    def _render_sized(self, request: SizedRequest) -> tuple[Artifact, ...]:
        return super()._render_sized(self._with_environment(request))

    def _with_environment(self, request: Request) -> Request:
        """`request` whose env sets the app's settings too (its own env, if any, wins)."""
        return replace(request, env={**self.environment(request.values), **(request.env or {})})


def with_app_settings(adapter: ServerAdapter, app_settings: AppSettings) -> ServerAdapter:
    """`adapter` itself when the app declares no settings, else the two as one adapter."""
    return WithAppSettings(adapter, app_settings) if app_settings else adapter


def adapter_for_app(server: str, app: AppRef, settings_file: Path | None) -> ServerAdapter:
    """The server's adapter set up for the app's interface, with the app's own settings if it
    declares any (the file given, else NAME.tuner.toml beside the app's module)."""
    from tuner.servers import adapter_serving

    declared = load_app_settings(settings_path(app, settings_file))
    return with_app_settings(adapter_serving(server, app.interface), declared)
