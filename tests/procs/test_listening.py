"""listens_on_port asks the kernel which processes listen on a TCP port: real sockets here."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from tuner.procs.listening import listens_on_port


def test_the_process_holding_a_listening_socket_is_found_ipv4_and_ipv6() -> None:
    with (
        socket.create_server(("127.0.0.1", 0)) as v4,
        socket.create_server(("::1", 0), family=socket.AF_INET6) as v6,
    ):
        for sock in (v4, v6):
            port = sock.getsockname()[1]
            assert listens_on_port([os.getpid()], port)
            # Another process does not hold it (pid 1 is never this test).
            assert not listens_on_port([1], port)


def test_a_connected_socket_on_the_port_is_not_a_listener() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
        )
        try:
            with socket.create_connection(("127.0.0.1", port)) as client:
                accepted, _ = server.accept()
                with accepted:
                    # The child holds no socket; ours holds the listener and both ends.
                    assert not listens_on_port([child.pid], port)
                    assert listens_on_port([os.getpid()], port)
                    assert client.getsockname()[1] != port
        finally:
            child.communicate(b"")
    # Closed: nobody listens there any more.
    assert not listens_on_port([os.getpid()], port)
