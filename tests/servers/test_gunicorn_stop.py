"""gunicorn gthread servers stop by themselves, never by our SIGKILL fallback.

A gthread worker's SIGINT/SIGQUIT handler takes its thread pool's lock, so a quick-stop signal
landing while the worker holds that lock (accepting a connection, starting a thread) deadlocks
it (see tuner/servers/gunicorn.py `_stop_signals`). The stop here lands in that window on
purpose: connections arrive for CPU-bound requests, so the worker's main thread spends its
time starting pool threads, each waiting for the GIL before it runs.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import HOST, ROOT, SERVER_CPU
from tuner.apps import parse_app
from tuner.procs.process import ServerProcess, free_port
from tuner.servers.base import Bind, ServerAdapter
from tuner.settings import Value

TRIES = 3
# Longer than the adapter's 5 s: a deadlock never ends, while a slow exit on a busy machine
# must not fail the test.
GRACE_S = 10.0
REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


@contextmanager
def flooding(port: int) -> Iterator[threading.Event]:
    """A thread opening connections that each send a request and stay open, until the event
    is set; every socket is closed on exit."""
    stop = threading.Event()
    held: list[socket.socket] = []

    def flood() -> None:
        while not stop.is_set():
            try:
                conn = socket.create_connection((HOST, port), timeout=1.0)
                held.append(conn)
                conn.sendall(REQUEST)
            except OSError:
                stop.wait(0.01)  # refused once the server stopped listening

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()


@contextmanager
def running_with_grace(
    gunicorn: ServerAdapter, values: dict[str, Value], log_path: Path
) -> Iterator[ServerProcess]:
    """`running` apps.cpu with a stop grace of GRACE_S."""
    port = free_port(HOST)
    spec = gunicorn.launch(
        parse_app("apps.cpu:app", cwd=ROOT), Bind.tcp(HOST, port), values, log_path.parent
    )
    spec = dataclasses.replace(spec, stop_grace_s=GRACE_S)
    with ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=log_path, host=HOST, port=port
    ) as server:
        yield server


def test_gthread_stops_by_itself_while_connections_arrive(
    gunicorn: ServerAdapter, tmp_path: Path
) -> None:
    # With SIGINT first, every try here deadlocked the worker (3 of 3 exits were -9, 21 s);
    # with SIGTERM, then SIGQUIT repeated, 0 of 3 (the whole test 4 s).
    values: dict[str, Value] = {"workers": 1, "worker_class": "gthread", "threads": 32}
    exits = []
    for attempt in range(TRIES):
        log_path = tmp_path / f"gunicorn-{attempt}.log"
        with running_with_grace(gunicorn, values, log_path) as server:
            with flooding(server.port) as stop_flooding:
                stop_flooding.wait(0.05)
                # The worker is still working through the accept backlog when the signal lands.
                stop_flooding.set()
                server.stop()
            # A deadlocked worker keeps its master waiting (graceful_timeout, 30 s), so the
            # master too ends by our SIGKILL: exit code 0 means gunicorn stopped by itself.
            exits.append(server.returncode)
    assert exits == [0] * TRIES, (exits, server.log_tail())
