"""How adapters declare their settings: a server's way of writing a value, held once.

A server writes its settings one way throughout: gunicorn `--workers 3` and `workers = 3`,
waitress `--threads=4`, granian `--workers 2` and `GRANIAN_WORKERS=2`, a Python launcher
`THREADS = 10` and nothing on the command line. `SettingStyle` holds that way, and its three
builders declare a setting in it: `value` (`--name VALUE`), `switch` (`--name` or
`--no-name`) and `flag` (`--name` when on). `unrendered` declares one the adapter writes
elsewhere. A setting that renders unlike the rest of its server's is a `Setting` with
renderers of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tuner.settings import Setting, SettingKind, Value, renders_nothing

INT, FLOAT, BOOL, CHOICE = SettingKind.INT, SettingKind.FLOAT, SettingKind.BOOL, SettingKind.CHOICE


def dashed(name: str) -> str:
    """`--name` with underscores as dashes, the flag most servers spell a setting with."""
    return "--" + name.replace("_", "-")


def same(name: str) -> str:
    return name


def true_false(value: Value) -> str:
    return "true" if value else "false"


@dataclass(frozen=True)
class SettingStyle:
    """How one server writes a setting. On its command line: `flag(name)` then the value as a
    second argument, or joined as `--flag=VALUE` (`joined`); nothing where `command_line` is
    off. In its file: `key_of(name)` with `text(value)`, or `truth(value)` for a switch."""

    flag_of: Callable[[str], str] = dashed
    key_of: Callable[[str], str] = same
    text: Callable[[Value], str] = str
    truth: Callable[[Value], str] = true_false
    joined: bool = False
    command_line: bool = True

    def value(
        self,
        name: str,
        kind: SettingKind,
        default: Value,
        doc: str,
        *,
        choices: tuple[str, ...] = (),
        minimum: float | None = None,
        maximum: float | None = None,
        unset: Value | None = None,
        flag: str | None = None,
        key: str | None = None,
        text: Callable[[Value], str] | None = None,
    ) -> Setting:
        """A setting written with its value: `--flag VALUE` and `key = text(VALUE)`. The
        `unset` value renders nothing in either, leaving the server's own rule."""
        option = flag or self.flag_of(name)
        entry = key or self.key_of(name)
        written = text or self.text

        def argv(value: Value) -> list[str]:
            if not self.command_line or value == unset:
                return []
            return [f"{option}={value}"] if self.joined else [option, str(value)]

        def config(value: Value) -> list[tuple[str, str]]:
            return [] if value == unset else [(entry, written(value))]

        return Setting(
            name,
            kind,
            default,
            doc,
            argv,
            config,
            choices=choices,
            minimum=minimum,
            maximum=maximum,
        )

    def switch(self, name: str, default: bool, doc: str, *, key: str | None = None) -> Setting:
        """A switch written both ways, `--name` or `--no-name` (explicit beats a default that
        may change), and `key = truth(VALUE)`."""
        option = self.flag_of(name)[2:]
        entry = key or self.key_of(name)
        return Setting(
            name,
            BOOL,
            default,
            doc,
            argv=lambda value: [f"--{option}" if value else f"--no-{option}"],
            config=lambda value: [(entry, self.truth(value))],
        )

    def flag(
        self,
        name: str,
        default: bool,
        doc: str,
        *,
        flag: str | None = None,
        written_off: bool = True,
    ) -> Setting:
        """A switch whose flag is given only when on; in the file `key = truth(VALUE)`, or
        only when on where `written_off` is false (the server's default is off)."""
        option = flag or self.flag_of(name)
        entry = self.key_of(name)
        return Setting(
            name,
            BOOL,
            default,
            doc,
            argv=lambda value: [option] if value else [],
            config=lambda value: [(entry, self.truth(value))] if value or written_off else [],
        )


def unrendered(
    name: str,
    kind: SettingKind,
    default: Value,
    doc: str,
    *,
    choices: tuple[str, ...] = (),
    minimum: float | None = None,
    maximum: float | None = None,
) -> Setting:
    """A setting on neither the command line nor as a key of the file: the adapter writes it
    elsewhere (into a worker class, the front's config, the app's environment)."""
    return Setting(
        name,
        kind,
        default,
        doc,
        renders_nothing,
        renders_nothing,
        choices=choices,
        minimum=minimum,
        maximum=maximum,
    )
