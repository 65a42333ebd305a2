"""The config queued after one starved keep-alive connections: pure logic, real adapters."""

from __future__ import annotations

from tuner.front.fronted import FrontedAdapter
from tuner.search.covering import Allowed, covering_config, space_limits
from tuner.search.space import default_space_path, load_space
from tuner.servers import get_adapter

UWSGI = get_adapter("uwsgi")
LIMITS = {"processes": Allowed(1, 5), "threads": Allowed(1, 32)}


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
    limits = {"workers": Allowed(1, 5), "threads": Allowed(1, 32)}
    assert covering_config(gunicorn, gthread, 64, limits) is None


# --- what the trial ran: the front's settings decide whether connections are held --------

FLUP = FrontedAdapter(get_adapter("flup"), "nginx")
FLUP_LIMITS = {"max_spare": Allowed.listed((1, 2, 3, 5, 9, 17, 33, 64, 128))}


def test_flup_behind_nginx_keeping_its_connections_gets_a_spare_slot_for_each() -> None:
    # fastcgi_keep_conn on (the default): each of nginx's connections holds a thread or a
    # child, so the next listed max_spare at or above the connections covers them.
    for mode in ("threaded", "prefork"):
        starved = FLUP.resolve({"mode": mode, "max_spare": 2})
        fixed = covering_config(FLUP, starved, 8, FLUP_LIMITS)
        assert fixed is not None, mode
        assert (fixed["mode"], fixed["max_spare"], fixed["fastcgi_keep_conn"]) == (mode, 9, True)
    assert covering_config(FLUP, FLUP.resolve({"max_spare": 5}), 200, FLUP_LIMITS) is None


def test_flup_behind_nginx_closing_its_connections_is_not_repaired() -> None:
    # fastcgi_keep_conn off: nginx opens a connection per request, none is held.
    closing = FLUP.resolve({"max_spare": 2, "fastcgi_keep_conn": False})
    assert covering_config(FLUP, closing, 8, FLUP_LIMITS) is None


def test_uwsgi_http11_behind_uwsgi_pass_is_not_repaired() -> None:
    # nginx's uwsgi_pass closes each connection; over HTTP it keeps them (upstream keepalive).
    uwsgi = FrontedAdapter(UWSGI, "nginx")
    over_http = uwsgi.resolve({"protocol": "http11-socket", "processes": 1, "threads": 1})
    assert covering_config(uwsgi, over_http, 8, LIMITS) is not None
    over_uwsgi = uwsgi.resolve({**over_http, "front_protocol": "uwsgi"})
    assert covering_config(uwsgi, over_uwsgi, 8, LIMITS) is None


def test_space_limits_hold_ranges_and_listed_counts() -> None:
    flup = load_space(default_space_path("flup"), get_adapter("flup").table, "flup")
    limits = space_limits(flup, 2)
    assert limits["max_spare"].choices == (1, 2, 3, 5, 9, 17, 33, 64, 128)
    assert "mode" not in limits and "nodelay" not in limits
    assert Allowed(1, 5).at_least(3) == 3 and Allowed(2, 5).at_least(1) == 2
    assert Allowed(1, 5).at_least(6) is None
