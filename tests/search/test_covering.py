"""A config that starves keep-alive connections it has no thread for is followed, in the same
study, by the nearest config with a thread per connection: real uWSGI, real load."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import require_adapter, unavailable
from tuner.cli import build_parser
from tuner.commands.setup import build_setup
from tuner.commands.tune_options import TuneOptions
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
    setup = build_setup(TuneOptions.from_args(args))
    study = open_study(setup)  # queues the two baselines
    starving = {"protocol": "http11-socket", "processes": 1, "threads": 1, "master": True}
    defaults = setup.adapter.table.defaults()
    study.queue({p.name: starving.get(p.setting, defaults[p.setting]) for p in setup.space.params})
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


def test_flup_behind_nginx_keeping_connections_is_followed_by_a_child_for_each(
    tmp_path: Path, since: float
) -> None:
    """flup's 2*cpus+1 baseline (prefork, 3 or 5 children: one connection each) behind nginx
    with fastcgi_keep_conn starves 8 connections; the repair sees the front's setting and
    queues prefork with max_spare = 9, the next count the space lists. (The default's 5
    spare threads starve only when a burst of connections beats the pool's threads, so the
    test reads the prefork baseline.)"""
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
    setup = build_setup(TuneOptions.from_args(args))
    study = open_study(setup)  # queues the two baselines: the default, and 2*cpus+1 children
    listener = QuietListener()
    # The default may be repaired first (trial 2); the rule's repair follows it then.
    run_search(setup, study, n_trials=4, timeout_s=None, listener=listener)

    rule = {r.number: r for r in listener.ended}[1]
    assert rule.baseline == "2*cpus+1" and rule.settings["mode"] == "prefork"
    assert rule.settings["max_spare"] < 8 and rule.settings["fastcgi_keep_conn"] is True
    assert "starved: " in rule.fail_reason, rule.fail_reason
    covering = [r for r in listener.ended if r.covers_for == 1]
    assert len(covering) == 1, [(r.number, r.covers_for, r.settings) for r in listener.ended]
    fixed = covering[0]
    assert (fixed.settings["mode"], fixed.settings["max_spare"]) == ("prefork", 9)
    assert fixed.settings["fastcgi_keep_conn"] is True
    assert fixed.state == "COMPLETE" and fixed.feasible, fixed.fail_reason
    assert fixed.measurement is not None and fixed.measurement.starved_connections == 0
