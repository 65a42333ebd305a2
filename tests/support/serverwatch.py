"""Finds server processes started since a moment: a test's proof that none leaked."""

from __future__ import annotations

import contextlib
import os
import time

import psutil

from tuner.servers import get_adapter, server_names


def _names() -> tuple[str, ...]:
    """Every registered server's program and launcher file names (gunicorn, uwsgi,
    waitress-serve.sh, twisted_serve.py, ...)."""
    # nginx: the front `--front nginx` starts per trial ("nginx: master process ...").
    names = {"gunicorn", "uwsgi", "nginx"}
    for name in server_names():
        adapter = get_adapter(name)
        names |= {adapter.binary, adapter.artifact_filename}
    # an adapter run by the interpreter itself names it as its binary: not a server's name
    return tuple(sorted(names - {"python", "python3", "sh"}))


SERVER_NAMES = _names()


def is_server(argv: list[str]) -> bool:
    """A server runs as `python .../bin/NAME ...`, `python [-u] LAUNCHER`, `sh LAUNCHER`, or
    under a process title `NAME: ...`; a tuner whose arguments merely mention one is not one."""
    heads = [os.path.basename(arg) for arg in argv[:3]]
    titled = bool(argv) and argv[0].split(":")[0].lower() in SERVER_NAMES
    return titled or any(head in SERVER_NAMES for head in heads)


def servers_started_since(since: float) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "create_time", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.info["create_time"] < since - 1:
                continue
        except (psutil.Error, TypeError):
            continue
        if is_server(proc.info["cmdline"] or []):
            found.append(proc)
    return found


def wait_none_left(since: float, timeout_s: float = 30.0) -> list[str]:
    """Waits (polling) until no server process started since `since` is left, and returns the
    leftovers. Left = alive and either ours (a descendant of this test process) or an orphan
    (its tuner is gone); other people's servers on a shared machine have a live parent of their
    own and are not counted."""
    me = os.getpid()
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        left = []
        for proc in servers_started_since(since):
            with contextlib.suppress(psutil.Error):
                if proc.ppid() == 1 or me in [parent.pid for parent in proc.parents()]:
                    left.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
