"""Finds gunicorn / uWSGI processes started since a moment: a test's proof that none leaked."""

from __future__ import annotations

import time

import psutil

SERVER_NAMES = ("gunicorn", "uwsgi")


def servers_started_since(since: float) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "create_time", "status"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.info["create_time"] < since - 1:
                continue
        except (psutil.Error, TypeError):
            continue
        if any(name in cmdline for name in SERVER_NAMES) and "pytest" not in cmdline:
            found.append(proc)
    return found


def wait_none_left(since: float, timeout_s: float = 10.0) -> list[str]:
    """Waits (polling) until no server process started since `since` is alive; returns leftovers."""
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        left = servers_started_since(since)
        if not left or time.monotonic() > deadline:
            return [f"{p.pid} {' '.join(p.info['cmdline'] or [])}" for p in left]
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
