"""The settings part of the adapter contract (tuner/servers/base.py): the table, and the
checks a config goes through before it runs."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from tuner.servers.binds import DIRECT, Bind
from tuner.servers.part_identity import IdentityPart
from tuner.settings import SettingsTable, Value


class SettingsPart(IdentityPart):
    """A server's settings table, and how a config is checked alone, together and at a bind.
    The defaults check nothing beyond the table: a server overrides `check_combination` and
    `check_bound` where values that pass one by one cannot run together or at a bind."""

    table: SettingsTable
    # Settings that change what an operator sees (access logs), each with the value that stops
    # the per-request log: a written file keeps them at the server's default unless changing
    # them is measurably better, and the confirmation measures the best config both ways.
    logging_settings: Mapping[str, Value] = MappingProxyType({})
    # Settings that only mean something while the server speaks HTTP (uWSGI's `protocol`):
    # a search behind a front leaves them at their default when another protocol is drawn.
    http_only_settings: tuple[str, ...] = ()

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

    def check_bound(self, bind: Bind, values: Mapping[str, Value]) -> None:  # noqa: B027 - a hook
        """Raise ConfigError for settings the server cannot run as meant when bound as `bind`
        (gunicorn's reuse_port on a unix socket)."""
