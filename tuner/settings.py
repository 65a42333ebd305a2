"""A server setting declared once, as data: its type, default, doc, and how it renders.

Each server adapter holds one table (a tuple of `Setting`). The same table validates `--set`
values and search-space files, builds the server's command line and writes its config file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from tuner.errors import ConfigError

Value = int | float | bool | str
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class SettingKind(str, Enum):
    """What a setting's values are. A member is its text ("int"), as app settings files and
    search spaces spell it, so it compares equal to that text."""

    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    CHOICE = "choice"

    def __str__(self) -> str:
        return str(self.value)


def renders_nothing(_value: Value) -> list[Any]:
    """A rendering of a setting that is not on the command line (or not in the file)."""
    return []


@dataclass(frozen=True)
class Setting:
    """One server setting.

    `default` is the server's own default (what it does when the setting is absent). `argv`
    renders a value as command-line arguments and `config` as (key, value-text) for the
    server's config file; both return nothing for a value that means "leave the server's
    default", and by default nothing at all. Adapters declare theirs with the builders of
    tuner/servers/setting_builders.py.
    """

    name: str
    kind: SettingKind
    default: Value
    doc: str
    argv: Callable[[Value], list[str]] = renders_nothing
    config: Callable[[Value], list[tuple[str, str]]] = renders_nothing
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None

    def __post_init__(self) -> None:
        # A kind read from a file arrives as its text; a wrong one fails here, at declaration.
        object.__setattr__(self, "kind", SettingKind(self.kind))

    def coerce(self, raw: object) -> Value:
        """Turn a CLI string or a parsed TOML value into this setting's type, or raise."""
        try:
            value = _COERCERS[self.kind](raw, self.choices)
        except (TypeError, ValueError):
            raise ConfigError(f"{self.name}={raw!r}: {self.expected()}") from None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            too_low = self.minimum is not None and value < self.minimum
            too_high = self.maximum is not None and value > self.maximum
            if too_low or too_high:
                raise ConfigError(f"{self.name}={raw!r}: {self.expected()}")
        return value

    def expected(self) -> str:
        if self.kind is SettingKind.CHOICE:
            return "expected one of " + ", ".join(self.choices)
        if self.kind is SettingKind.BOOL:
            return "expected true or false"
        bounds = []
        if self.minimum is not None:
            bounds.append(f">= {self.minimum:g}")
        if self.maximum is not None:
            bounds.append(f"<= {self.maximum:g}")
        number = "an integer" if self.kind is SettingKind.INT else "a number"
        return f"expected {number} " + " and ".join(bounds)


def _to_int(raw: object, _: tuple[str, ...]) -> int:
    if isinstance(raw, (bool, float)):
        raise TypeError
    return int(str(raw).strip())


def _to_float(raw: object, _: tuple[str, ...]) -> float:
    if isinstance(raw, bool):
        raise TypeError
    return float(str(raw).strip())


def _to_bool(raw: object, _: tuple[str, ...]) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError


def _to_choice(raw: object, choices: tuple[str, ...]) -> str:
    text = str(raw).strip()
    if text not in choices:
        raise ValueError
    return text


_COERCERS: dict[SettingKind, Callable[[object, tuple[str, ...]], Value]] = {
    SettingKind.INT: _to_int,
    SettingKind.FLOAT: _to_float,
    SettingKind.BOOL: _to_bool,
    SettingKind.CHOICE: _to_choice,
}


@dataclass(frozen=True)
class SettingsTable:
    """A server's settings, by name, with validation of a whole set of values."""

    server: str
    settings: tuple[Setting, ...]
    by_name: Mapping[str, Setting] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {s.name: s for s in self.settings})

    def get(self, name: str) -> Setting:
        try:
            return self.by_name[name]
        except KeyError:
            valid = ", ".join(sorted(self.by_name))
            raise ConfigError(
                f"unknown {self.server} setting {name!r}; valid settings: {valid}"
            ) from None

    def defaults(self) -> dict[str, Value]:
        return {s.name: s.default for s in self.settings}

    def resolve(self, values: Mapping[str, object]) -> dict[str, Value]:
        """Every setting's value: the server defaults overlaid with `values` (coerced)."""
        resolved = self.defaults()
        for name, raw in values.items():
            resolved[name] = self.get(name).coerce(raw)
        return resolved

    def argv(self, values: Mapping[str, Value]) -> list[str]:
        args: list[str] = []
        for setting in self.settings:
            args += setting.argv(values[setting.name])
        return args

    def config_lines(self, values: Mapping[str, Value]) -> list[tuple[str, str]]:
        lines: list[tuple[str, str]] = []
        for setting in self.settings:
            lines += setting.config(values[setting.name])
        return lines


def parse_assignments(pairs: list[str]) -> dict[str, str]:
    """`["workers=3", "worker_class=gevent"]` -> dict; a pair without `=` is a ConfigError."""
    values: dict[str, str] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--set {pair!r}: expected KEY=VALUE, e.g. workers=3")
        values[name.strip()] = raw
    return values
