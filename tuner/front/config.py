"""What a front opens to the search: how it reaches the server, in what protocol, buffered or not.

These are settings of the deployment, not of the server: they live in their own table (the
`front_*` names, `proxy_buffering` and, for FastCGI, `fastcgi_keep_conn`), are searched from
`search_spaces/front-nginx.toml`, and are split off a trial's values before the server's
adapter sees them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tuner.servers.base import Protocol, ServerAdapter, Transport
from tuner.servers.setting_builders import BOOL, CHOICE, INT, unrendered
from tuner.settings import Setting, SettingsTable, Value

TRANSPORT = "front_transport"
PROTOCOL = "front_protocol"
BUFFERING = "proxy_buffering"
KEEP_CONN = "fastcgi_keep_conn"
KEEPALIVE = "front_keepalive"
FRONT_SETTINGS = (TRANSPORT, PROTOCOL, BUFFERING, KEEP_CONN, KEEPALIVE)
# Idle connections to the server each nginx worker keeps for the next request (nginx's docs
# use 16-32; the load is 64 connections, spread over the workers).
DEFAULT_KEEPALIVE = 32
# Every (transport, protocol) a front can reach a server by: nginx's proxy_pass, uwsgi_pass
# and fastcgi_pass, each over TCP or a unix socket.
ALL_BINDS = tuple((t, p) for p in Protocol for t in Transport)


@dataclass(frozen=True)
class FrontConfig:
    """One front setup: the server's transport (tcp/unix) and protocol, nginx's buffering,
    (FastCGI) whether nginx keeps its connections to the server open between requests, and
    where it keeps them, how many idle ones each nginx worker keeps (`keepalive N`)."""

    transport: Transport = Transport.TCP
    protocol: Protocol = Protocol.HTTP
    buffering: bool = True
    keep_conn: bool = True
    keepalive: int = DEFAULT_KEEPALIVE

    @classmethod
    def from_values(cls, values: Mapping[str, Value]) -> FrontConfig:
        """The front's settings of a config, as recorded (front_protocol = "uwsgi")."""
        return cls(
            transport=Transport(values.get(TRANSPORT, Transport.TCP)),
            protocol=Protocol(values.get(PROTOCOL, Protocol.HTTP)),
            buffering=bool(values.get(BUFFERING, True)),
            keep_conn=bool(values.get(KEEP_CONN, True)),
            keepalive=int(values.get(KEEPALIVE, DEFAULT_KEEPALIVE)),
        )

    @property
    def keeps_connections(self) -> bool:
        """nginx keeps its connections to the server open between requests: for HTTP (an
        upstream keepalive) and FastCGI with keep_conn; uwsgi_pass closes each after one."""
        return self.protocol is Protocol.HTTP or (
            self.protocol is Protocol.FASTCGI and self.keep_conn
        )

    def describe(self) -> str:
        buffering = "on" if self.buffering else "off"
        text = f"{self.protocol} over {self.transport}, proxy_buffering {buffering}"
        if self.protocol is Protocol.FASTCGI:
            text += f", fastcgi_keep_conn {'on' if self.keep_conn else 'off'}"
        if self.keeps_connections:
            text += f", upstream keepalive {self.keepalive} idle per nginx worker"
        return text


def front_table(
    binds: Iterable[tuple[Transport, Protocol]] = ALL_BINDS,
) -> tuple[Setting, ...]:
    """The front's settings for a server that can be bound as `binds` (its adapter's).
    Defaults: what nginx and the server do without being told otherwise, HTTP over TCP with
    buffering on; for a server that speaks no HTTP, its first protocol (FastCGI), with
    nginx's connections to it kept open (the keep-alive upstream HTTP gets too), 32 idle
    ones per nginx worker."""
    kinds = [(t, p) for t, p in binds if (t, p) in ALL_BINDS]
    # The settings' choices are the text a study records.
    transports = tuple(sorted({t.value for t, _ in kinds}))
    protocols = tuple(sorted({p.value for _, p in kinds}))
    default_transport = Transport.TCP.value if Transport.TCP in transports else transports[0]
    default_protocol = Protocol.HTTP.value if Protocol.HTTP in protocols else protocols[0]
    keep_conn = (
        unrendered(
            KEEP_CONN,
            BOOL,
            True,
            "nginx keeps its FastCGI connections to the server open for the next request "
            "(fastcgi_keep_conn with an upstream keepalive); each open one holds a server "
            "thread or process, so off can suit a server with few of them",
        ),
    )
    # Only where nginx keeps connections: HTTP's proxy_pass, FastCGI's keep-conn.
    keepalive = (
        unrendered(
            KEEPALIVE,
            INT,
            DEFAULT_KEEPALIVE,
            "idle connections to the server each nginx worker keeps for the next request "
            "(the upstream's keepalive N); not a cap: nginx opens as many as requests are in "
            "flight and closes the least recently used idle one past N, so few make the "
            "next requests open new connections, many let every server thread keep one",
            minimum=1,
        ),
    )
    # Not the server's settings: nothing on its command line or in its file.
    return (
        unrendered(
            TRANSPORT,
            CHOICE,
            default_transport,
            "how nginx reaches the server: tcp (loopback port) or unix (a unix socket)",
            choices=transports,
        ),
        unrendered(
            PROTOCOL,
            CHOICE,
            default_protocol,
            "what the server speaks to nginx: http (proxy_pass), uwsgi (uwsgi_pass) or "
            "fastcgi (fastcgi_pass)",
            choices=protocols,
        ),
        unrendered(
            BUFFERING,
            BOOL,
            True,
            "nginx reads the server's whole response before sending it on (proxy_buffering / "
            "uwsgi_buffering / fastcgi_buffering), so a slow client does not hold a server worker",
        ),
        *(keep_conn if Protocol.FASTCGI in protocols else ()),
        *(keepalive if Protocol.HTTP in protocols or Protocol.FASTCGI in protocols else ()),
    )


def combined_table(adapter: ServerAdapter) -> SettingsTable:
    """The server's settings and the front's, as one table (the study sees one config)."""
    front = front_table(adapter.binds)
    return SettingsTable(adapter.table.server, (*adapter.table.settings, *front))


def split(values: Mapping[str, Value]) -> tuple[dict[str, Value], FrontConfig]:
    """A trial's values as (server settings, front config)."""
    server = {k: v for k, v in values.items() if k not in FRONT_SETTINGS}
    return server, FrontConfig.from_values(values)
