"""Readiness of a server that is not reached by HTTP over TCP: a unix socket, the uwsgi protocol.

A server behind a front (nginx) may listen on a unix socket, and uWSGI may speak its binary
`uwsgi` protocol there instead of HTTP. Its readiness is still one real request to the app,
sent the way the front will send it; a 2xx answer means ready.
"""

from __future__ import annotations

import http.client
import socket
import struct
from collections.abc import Iterable
from urllib.parse import urlsplit

import psutil

from tuner.servers.base import Bind

_MAX_ANSWER = 1 << 20


class _UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a unix socket: same requests and parsing, another transport."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def probe(bind: Bind, ready_path: str, timeout: float) -> tuple[bool, str]:
    """One GET of `ready_path` to the server at `bind`: (True, "") on 2xx, else (False, why)."""
    try:
        if bind.protocol == "uwsgi":
            status = _uwsgi_get(bind, ready_path, timeout)
        elif bind.protocol == "http":
            status = _http_get(bind, ready_path, timeout)
        else:
            return False, f"no readiness probe speaks {bind.protocol}"
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return False, f"last try: {type(exc).__name__}: {exc}"
    if 200 <= status < 300:
        return True, ""
    return False, f"last answer: status {status}"


def _http_get(bind: Bind, ready_path: str, timeout: float) -> int:
    connection: http.client.HTTPConnection
    if bind.path is not None:
        connection = _UnixHTTPConnection(bind.path, timeout)
    else:
        connection = http.client.HTTPConnection(bind.host, bind.port, timeout=timeout)
    try:
        connection.request("GET", ready_path)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def uwsgi_request(path: str, host: str = "localhost") -> bytes:
    """A GET as a uwsgi packet: header (modifier1 0, size, modifier2 0), then CGI variables,
    each as little-endian 16-bit length + bytes (the uwsgi protocol, as nginx sends it)."""
    parts = urlsplit(path)
    variables = {
        "REQUEST_METHOD": "GET",
        "REQUEST_URI": path,
        "PATH_INFO": parts.path or "/",
        "QUERY_STRING": parts.query,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "SERVER_NAME": host,
        "SERVER_PORT": "80",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": host,
    }
    body = b"".join(
        struct.pack("<H", len(k)) + k + struct.pack("<H", len(v)) + v
        for k, v in ((k.encode(), v.encode()) for k, v in variables.items())
    )
    return struct.pack("<BHB", 0, len(body), 0) + body


def _uwsgi_get(bind: Bind, ready_path: str, timeout: float) -> int:
    """The status of the HTTP response a uwsgi server writes back (it closes when done)."""
    family = socket.AF_UNIX if bind.path is not None else socket.AF_INET
    address = bind.path if bind.path is not None else (bind.host, bind.port)
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(address)
        sock.sendall(uwsgi_request(ready_path))
        answer = b""
        while b"\r\n" not in answer and len(answer) < _MAX_ANSWER:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status_line = answer.split(b"\r\n", 1)[0].decode("latin-1")
    fields = status_line.split()
    if len(fields) < 2 or not fields[1].isdigit():
        raise ValueError(f"not an HTTP status line: {status_line[:80]!r}")
    return int(fields[1])


def listens_on(pids: Iterable[int], bind: Bind) -> bool:
    """Whether one of `pids` holds the socket at `bind` (its unix path, or its TCP port)."""
    kind = "unix" if bind.path is not None else "inet"
    for pid in pids:
        try:
            connections = psutil.Process(pid).net_connections(kind=kind)
        except psutil.Error:
            continue
        for c in connections:
            if bind.path is not None and c.laddr == bind.path:
                return True
            listening = c.status == psutil.CONN_LISTEN and bool(c.laddr)
            if bind.path is None and listening and c.laddr.port == bind.port:
                return True
    return False
