"""An app's own settings: environment variables the app reads when it starts, declared as data.

An app may declare them in `NAME.tuner.toml` beside `NAME.py` (or `--app-settings FILE`): each
a typed setting named after its variable, optionally with a `search` in the search-space
syntax, and a `[connections]` table naming what bounds the app's database connections and the
log lines that say the database refused or the pool ran dry. The study tunes them with the
server's settings, and the written file sets them the server's own way. The file format, with
`apps/db.tuner.toml` as the example: docs/pages/deployed/app-settings.md.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tuner.apps import AppRef
from tuner.errors import ConfigError
from tuner.logsigns import LoadSign
from tuner.settings import Setting, SettingKind, Value

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10 only
    import tomli as tomllib

SUFFIX = ".tuner.toml"
KINDS = tuple(kind.value for kind in SettingKind)
_SETTING_KEYS = {"type", "default", "minimum", "maximum", "choices", "doc", "search"}
_CONNECTION_KEYS = {"per_process", "refused", "exhausted"}


@dataclass(frozen=True)
class AppSettings:
    """The settings an app reads from its environment, and what bounds its connections.

    `settings` are ordinary `Setting`s named after their environment variable that render
    nothing on a server's command line or in its file (the adapter writes them as the
    environment instead). `search` holds the search-space params over them, as raw tables
    for `tuner.search.space.extend_space`.
    """

    source: str
    settings: tuple[Setting, ...] = ()
    search: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    per_process: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    exhausted: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.settings)

    def names(self) -> tuple[str, ...]:
        return tuple(setting.name for setting in self.settings)

    def environment(self, values: Mapping[str, Value]) -> dict[str, str]:
        """Every declared variable with its value in `values` (else its default), as text."""
        return {s.name: env_text(values.get(s.name, s.default)) for s in self.settings}

    def load_signs(self, processes: int, values: Mapping[str, Value]) -> tuple[LoadSign, ...]:
        """What the app's log lines mean for a config running `processes` processes."""
        if not (self.refused or self.exhausted):
            return ()
        if self.per_process:
            parts = [f"{name} {values.get(name)}" for name in self.per_process]
            each = sum(int(values.get(name) or 0) for name in self.per_process)
            opened = (
                f"{processes} processes x {each} connections ({' + '.join(parts)}) = "
                f"{processes * each} may be open at once"
            )
        else:
            opened = f"{processes} processes, each with its own pool"
        signs = [
            LoadSign(text, f"the database refused connections: {opened}, over its limit")
            for text in self.refused
        ]
        signs += [
            LoadSign(text, f"requests waited for a pooled connection and gave up: {opened}")
            for text in self.exhausted
        ]
        return tuple(signs)


def env_text(value: Value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def settings_path(app: AppRef, given: Path | None) -> Path | None:
    """The app's settings file: `given`, else NAME.tuner.toml beside the app's module, if any."""
    if given is not None:
        return given
    module = Path(app.pythonpath, *app.module.split("."))
    beside = module.with_name(module.name + SUFFIX)
    return beside if beside.is_file() else None


def load_app_settings(path: Path | None) -> AppSettings:
    """Read and check an app settings file; no file, no settings. ConfigError names the file."""
    if path is None:
        return AppSettings(source="")
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read app settings: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    extra = sorted(set(data) - {"settings", "connections"})
    if extra:
        raise ConfigError(f"{path}: unknown key {extra[0]!r}; valid keys: connections, settings")
    raw = data.get("settings")
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{path}: no [settings.NAME] tables; declare at least one setting")
    settings, search = [], {}
    for name, spec in raw.items():
        setting, param = _load_setting(path, name, spec)
        settings.append(setting)
        if param is not None:
            search[name] = param
    names = {s.name for s in settings}
    connections = _load_connections(path, data.get("connections", {}), names)
    return AppSettings(source=str(path), settings=tuple(settings), search=search, **connections)


def _load_setting(path: Path, name: str, spec: object) -> tuple[Setting, dict[str, Any] | None]:
    def fail(what: str) -> ConfigError:
        return ConfigError(f"{path}: settings.{name}: {what}")

    if not (name.isidentifier() and name.upper() == name):
        raise fail("the name is the environment variable: use upper case, digits and _")
    if not isinstance(spec, dict):
        raise fail("expected a table with type, default and doc")
    unknown = sorted(set(spec) - _SETTING_KEYS)
    if unknown:
        raise fail(f"unknown key {unknown[0]!r}; valid keys: {', '.join(sorted(_SETTING_KEYS))}")
    kind = spec.get("type")
    if kind not in KINDS:
        raise fail(f"type = {kind!r}; valid types: {', '.join(KINDS)}")
    doc = spec.get("doc", "")
    if not isinstance(doc, str) or not doc:
        raise fail("doc: one line saying what the setting does")
    choices = spec.get("choices", [])
    if kind == "choice" and not (isinstance(choices, list) and choices):
        raise fail("type choice needs choices = [...]")
    bounds = {key: spec.get(key) for key in ("minimum", "maximum")}
    for key, bound in bounds.items():
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float))):
            raise fail(f"{key} = {bound!r}; expected a number")
    # The environment, not the server's command line or file, carries it: rendered nowhere.
    setting = Setting(
        name,
        SettingKind(kind),
        default="",
        doc=doc,
        choices=tuple(str(c) for c in choices),
        minimum=bounds["minimum"],
        maximum=bounds["maximum"],
    )
    if "default" not in spec:
        raise fail("default: what the app does when the variable is unset")
    try:
        default = setting.coerce(spec["default"])
    except ConfigError as exc:
        raise fail(f"default: {exc}") from None
    setting = replace(setting, default=default)
    search = spec.get("search")
    if search is None:
        return setting, None
    if not isinstance(search, dict):
        raise fail("search = { ... } as a search-space param (low/high/log/step or choices)")
    if "when" in search or "setting" in search:
        raise fail("search: `when` and `setting` do not apply to an app setting")
    # Its type and doc, unless given, come from the setting, as for a server's param.
    return setting, {**search, "setting": name}


def _load_connections(path: Path, raw: object, names: set[str]) -> dict[str, tuple[str, ...]]:
    where = f"{path}: connections"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a table [connections]")
    unknown = sorted(set(raw) - _CONNECTION_KEYS)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r}; valid keys: "
            + ", ".join(sorted(_CONNECTION_KEYS))
        )
    found: dict[str, tuple[str, ...]] = {}
    for key in sorted(_CONNECTION_KEYS):
        items = raw.get(key, [])
        if not (isinstance(items, list) and all(isinstance(i, str) and i for i in items)):
            raise ConfigError(f"{where}.{key}: expected a list of non-empty strings")
        found[key] = tuple(items)
    for name in found["per_process"]:
        if name not in names:
            raise ConfigError(
                f"{where}.per_process: {name!r} is not a declared setting; declared: "
                + ", ".join(sorted(names))
            )
    return found
