"""Where a server listens and what it speaks there: a `Bind` (TCP host:port or a unix socket;
HTTP, uWSGI's binary protocol or FastCGI), as every operation of the adapter contract takes it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


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
