"""The config queued after one starved keep-alive connections: pure logic, real adapters."""

from __future__ import annotations

from tuner.search.covering import covering_config
from tuner.servers import get_adapter

UWSGI = get_adapter("uwsgi")
LIMITS = {"processes": (1, 5), "threads": (1, 32)}


def _uwsgi(**values: object) -> dict:
    return UWSGI.resolve({"protocol": "http11-socket", **values})


def test_more_threads_first_keeping_the_processes() -> None:
    fixed = covering_config(UWSGI, _uwsgi(processes=4, threads=2), 64, LIMITS)
    assert fixed is not None
    assert (fixed["processes"], fixed["threads"]) == (4, 16)
    assert fixed["protocol"] == "http11-socket"


def test_more_processes_when_threads_hit_the_space_limit() -> None:
    fixed = covering_config(UWSGI, _uwsgi(processes=1, threads=8), 64, LIMITS)
    assert fixed is not None
    assert (fixed["processes"], fixed["threads"]) == (2, 32)


def test_nothing_when_the_space_cannot_hold_enough_threads() -> None:
    assert covering_config(UWSGI, _uwsgi(processes=1, threads=8), 256, LIMITS) is None


def test_nothing_when_threads_already_cover_the_connections() -> None:
    # Starved for another reason (a hanging app): more threads would not help.
    assert covering_config(UWSGI, _uwsgi(processes=4, threads=16), 64, LIMITS) is None


def test_nothing_for_models_that_do_not_pin_a_thread_per_connection() -> None:
    assert covering_config(UWSGI, UWSGI.resolve({"protocol": "http-socket"}), 64, LIMITS) is None
    gevent = UWSGI.resolve({"protocol": "http", "gevent": 100})
    assert covering_config(UWSGI, gevent, 64, LIMITS) is None
    gunicorn = get_adapter("gunicorn")
    gthread = gunicorn.resolve({"worker_class": "gthread", "threads": 2})
    assert covering_config(gunicorn, gthread, 64, {"workers": (1, 5), "threads": (1, 32)}) is None
