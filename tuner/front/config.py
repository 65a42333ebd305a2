"""What a front opens to the search: how it reaches the server, in what protocol, buffered or not.

These are settings of the deployment, not of the server: they live in their own table (the
`front_*` names and `proxy_buffering`), are searched from `search_spaces/front-nginx.toml`,
and are split off a trial's values before the server's adapter sees them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tuner.servers.base import ServerAdapter
from tuner.settings import Setting, SettingsTable, Value

TRANSPORT = "front_transport"
PROTOCOL = "front_protocol"
BUFFERING = "proxy_buffering"
FRONT_SETTINGS = (TRANSPORT, PROTOCOL, BUFFERING)
ALL_BINDS = (("tcp", "http"), ("unix", "http"), ("tcp", "uwsgi"), ("unix", "uwsgi"))


@dataclass(frozen=True)
class FrontConfig:
    """One front setup: the server's transport (tcp/unix) and protocol, nginx's buffering."""

    transport: str = "tcp"
    protocol: str = "http"
    buffering: bool = True

    @classmethod
    def from_values(cls, values: Mapping[str, Value]) -> FrontConfig:
        return cls(
            transport=str(values.get(TRANSPORT, "tcp")),
            protocol=str(values.get(PROTOCOL, "http")),
            buffering=bool(values.get(BUFFERING, True)),
        )

    def describe(self) -> str:
        buffering = "on" if self.buffering else "off"
        return f"{self.protocol} over {self.transport}, proxy_buffering {buffering}"


def _nothing(_value: Value) -> list:
    return []  # not a server setting: nothing on its command line or in its file


def front_table(binds: Iterable[tuple[str, str]] = ALL_BINDS) -> tuple[Setting, ...]:
    """The front's settings for a server that can be bound as `binds` (its adapter's):
    FastCGI is left out (no front speaks it yet). Defaults: HTTP over TCP with buffering on,
    what nginx and the server do without being told otherwise."""
    kinds = [(t, p) for t, p in binds if p in ("http", "uwsgi")]
    transports = tuple(sorted({t for t, _ in kinds}))
    protocols = tuple(sorted({p for _, p in kinds}))
    return (
        Setting(
            TRANSPORT,
            "choice",
            "tcp",
            "how nginx reaches the server: tcp (loopback port) or unix (a unix socket)",
            _nothing,
            _nothing,
            choices=transports,
        ),
        Setting(
            PROTOCOL,
            "choice",
            "http",
            "what the server speaks to nginx: http (proxy_pass) or uwsgi (uwsgi_pass)",
            _nothing,
            _nothing,
            choices=protocols,
        ),
        Setting(
            BUFFERING,
            "bool",
            True,
            "nginx reads the server's whole response before sending it on (proxy_buffering / "
            "uwsgi_buffering), so a slow client does not hold a server worker",
            _nothing,
            _nothing,
        ),
    )


def combined_table(adapter: ServerAdapter) -> SettingsTable:
    """The server's settings and the front's, as one table (the study sees one config)."""
    front = front_table(adapter.binds)
    return SettingsTable(adapter.table.server, (*adapter.table.settings, *front))


def split(values: Mapping[str, Value]) -> tuple[dict[str, Value], FrontConfig]:
    """A trial's values as (server settings, front config)."""
    server = {k: v for k, v in values.items() if k not in FRONT_SETTINGS}
    return server, FrontConfig.from_values(values)
