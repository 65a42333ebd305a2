"""A config that starves keep-alive connections it has no thread for is followed, in the same
study, by the nearest config with a thread per connection: real uWSGI, real load."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import require_adapter, unavailable
from tuner.cli import build_parser
from tuner.commands.tune import build_setup
from tuner.errors import ToolMissingError
from tuner.search.study import QuietListener, open_study, run_search

CPUS = sorted(os.sched_getaffinity(0))
SPLIT = ["--server-cpus", str(CPUS[0]), "--load-cpus", str(CPUS[-1])] if len(CPUS) > 1 else []


def test_a_starved_http11_config_is_followed_by_one_with_a_thread_per_connection(
    tmp_path: Path, since: float
) -> None:
    require_adapter("uwsgi")
    args = build_parser().parse_args(
        ["tune", "apps/hello.py", "--server", "uwsgi", "--storage", f"sqlite:///{tmp_path}/s.db"]
        + ["--study-name", "covering", "--duration", "0.6", "--warmup", "0.2"]
        # The starved requests are 0.8 s old at the window's end, short of their 2 s timeout
        # (so starved, not timed out); the drain waits for them until then, not 5 s.
        + ["--request-timeout", "2", "--connections", "8", "--no-branch-starts", *SPLIT]
    )
    setup = build_setup(args)
    study = open_study(setup)  # queues the two baselines
    starving = {"protocol": "http11-socket", "processes": 1, "threads": 1, "master": True}
    defaults = setup.adapter.table.defaults()
    study.enqueue_trial(
        {p.name: starving.get(p.setting, defaults[p.setting]) for p in setup.space.params}
    )
    listener = QuietListener()
    run_search(setup, study, n_trials=4, timeout_s=None, listener=listener)

    by_number = {r.number: r for r in listener.ended}
    starved = by_number[2]
    assert starved.fail_reason.startswith("unfair: ")
    assert "starved: 7 of 8 connections" in starved.fail_reason, starved.fail_reason
    assert starved.state == "COMPLETE" and not starved.feasible
    covering = by_number[3]
    assert covering.covers_for == 2
    assert covering.settings["protocol"] == "http11-socket"
    assert (covering.settings["processes"], covering.settings["threads"]) == (1, 8)
    assert covering.state == "COMPLETE" and covering.feasible, covering.fail_reason
    assert covering.measurement is not None and covering.measurement.starved_connections == 0


def test_flup_behind_nginx_keeping_connections_is_followed_by_a_spare_slot_each(
    tmp_path: Path, since: float
) -> None:
    """flup's default (5 spare threads) behind nginx with fastcgi_keep_conn starves 8
    connections; the repair sees the front's setting and queues max_spare = 9."""
    require_adapter("flup")
    from tuner.front import nginx

    try:
        nginx.executable()
    except ToolMissingError as exc:
        unavailable(str(exc))
    args = build_parser().parse_args(
        ["tune", "apps/hello.py", "--server", "flup", "--front", "nginx"]
        + ["--storage", f"sqlite:///{tmp_path}/s.db", "--study-name", "covering"]
        + ["--duration", "0.6", "--warmup", "0.2", "--request-timeout", "2"]
        + ["--connections", "8", "--no-branch-starts", *SPLIT]
    )
    setup = build_setup(args)
    study = open_study(setup)  # queues the two baselines: the default, and 2*cpus+1 children
    listener = QuietListener()
    run_search(setup, study, n_trials=3, timeout_s=None, listener=listener)

    by_number = {r.number: r for r in listener.ended}
    default = by_number[0]
    assert default.settings["fastcgi_keep_conn"] is True and default.settings["max_spare"] == 5
    assert "starved: " in default.fail_reason, default.fail_reason
    covering = by_number[2]
    assert covering.covers_for == 0, [r.settings for r in listener.ended]
    assert (covering.settings["mode"], covering.settings["max_spare"]) == ("threaded", 9)
    assert covering.settings["fastcgi_keep_conn"] is True
    assert covering.state == "COMPLETE" and covering.feasible, covering.fail_reason
    assert covering.measurement is not None and covering.measurement.starved_connections == 0
