"""Readiness of a server that is not reached by HTTP over TCP: a unix socket, uwsgi, FastCGI.

A server behind a front (nginx) may listen on a unix socket, and may speak a protocol there
instead of HTTP: uWSGI's binary `uwsgi` protocol, or FastCGI (flup). Its readiness is still
one real request to the app, sent the way the front will send it; a 2xx answer means ready.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import struct
from collections.abc import Iterable
from urllib.parse import urlsplit

import psutil

from tuner.procs import listening
from tuner.servers.base import Bind, Protocol

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
        if bind.protocol is Protocol.UWSGI:
            status = _uwsgi_get(bind, ready_path, timeout)
        elif bind.protocol is Protocol.FASTCGI:
            status = _fastcgi_get(bind, ready_path, timeout)
        else:
            status = _http_get(bind, ready_path, timeout)
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


def _cgi_variables(path: str, host: str) -> dict[str, str]:
    """The CGI variables of a GET of `path` at the root of the site, as nginx passes them."""
    parts = urlsplit(path)
    return {
        "REQUEST_METHOD": "GET",
        "REQUEST_URI": path,
        "SCRIPT_NAME": "",
        "PATH_INFO": parts.path or "/",
        "QUERY_STRING": parts.query,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "SERVER_NAME": host,
        "SERVER_PORT": "80",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": host,
    }


def uwsgi_request(path: str, host: str = "localhost") -> bytes:
    """A GET as a uwsgi packet: header (modifier1 0, size, modifier2 0), then CGI variables,
    each as little-endian 16-bit length + bytes (the uwsgi protocol, as nginx sends it)."""
    variables = _cgi_variables(path, host)
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


# FastCGI 1.0 record types and the one role a WSGI server plays (the FastCGI specification).
FCGI_BEGIN_REQUEST, FCGI_END_REQUEST, FCGI_PARAMS, FCGI_STDIN, FCGI_STDOUT = 1, 3, 4, 5, 6
FCGI_RESPONDER = 1
_REQUEST_ID = 1


def _fcgi_record(kind: int, content: bytes) -> bytes:
    """version 1, type, request id, content length, no padding, reserved."""
    return struct.pack(">BBHHBB", 1, kind, _REQUEST_ID, len(content), 0, 0) + content


def _fcgi_length(size: int) -> bytes:
    """A name or value length: one byte below 128, else four with the top bit set."""
    return bytes([size]) if size < 128 else struct.pack(">I", size | 0x80000000)


def fastcgi_request(path: str, host: str = "localhost") -> bytes:
    """A GET as FastCGI records: BEGIN_REQUEST (responder, connection closed after it), the
    CGI variables in PARAMS, an empty PARAMS and an empty STDIN (no body), as nginx sends it."""
    pairs = b"".join(
        _fcgi_length(len(k)) + _fcgi_length(len(v)) + k + v
        for k, v in ((k.encode(), v.encode()) for k, v in _cgi_variables(path, host).items())
    )
    begin = struct.pack(">HB5x", FCGI_RESPONDER, 0)
    return b"".join(
        [
            _fcgi_record(FCGI_BEGIN_REQUEST, begin),
            _fcgi_record(FCGI_PARAMS, pairs),
            _fcgi_record(FCGI_PARAMS, b""),
            _fcgi_record(FCGI_STDIN, b""),
        ]
    )


def fastcgi_status(stdout: bytes) -> int:
    """The HTTP status of a FastCGI responder's output: its `Status:` header, else 200 (CGI)."""
    head = stdout.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    for line in head.split("\r\n"):
        name, _, value = line.partition(":")
        if name.strip().lower() == "status":
            code = value.strip().split(" ", 1)[0]
            if not code.isdigit():
                raise ValueError(f"not a status: {line[:80]!r}")
            return int(code)
    if not head:
        raise ValueError("no response headers")
    return 200


def _fastcgi_get(bind: Bind, ready_path: str, timeout: float) -> int:
    """The status a FastCGI server answers a GET with, read from its STDOUT records."""
    family = socket.AF_UNIX if bind.path is not None else socket.AF_INET
    address = bind.path if bind.path is not None else (bind.host, bind.port)
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(address)
        sock.sendall(fastcgi_request(ready_path))
        stream = sock.makefile("rb")
        stdout = b""
        while len(stdout) < _MAX_ANSWER:
            header = stream.read(8)
            if len(header) < 8:
                break  # closed before END_REQUEST: judge what came
            _, kind, _, length, padding, _ = struct.unpack(">BBHHBB", header)
            content = stream.read(length + padding)[:length]
            if kind == FCGI_STDOUT:
                stdout += content
            elif kind == FCGI_END_REQUEST:
                break
    return fastcgi_status(stdout)


def listens_on(pids: Iterable[int], bind: Bind) -> bool:
    """Whether one of `pids` holds the socket at `bind` (its unix path, or its TCP port)."""
    if bind.path is None:
        pids = list(pids)
        with contextlib.suppress(OSError):  # no sock_diag here: psutil below
            return listening.listens_on_port(pids, bind.port)
    kind = "unix" if bind.path is not None else "inet"
    for pid in pids:
        try:
            connections = psutil.Process(pid).net_connections(kind=kind)
        except psutil.Error:
            continue
        for c in connections:
            # types-psutil types laddr as an (ip, port) addr; a unix socket's is its path (str)
            if bind.path is not None and c.laddr == bind.path:  # type: ignore[comparison-overlap]
                return True
            listens = c.status == psutil.CONN_LISTEN and bool(c.laddr)
            if bind.path is None and listens and c.laddr.port == bind.port:
                return True
    return False
