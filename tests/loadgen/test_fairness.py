"""Jain's fairness index of per-connection responses, and when it makes a run unfair (pure)."""

from __future__ import annotations

import pytest

from tuner.loadgen.checks import FAIRNESS_MIN_INDEX, RunTotals, assess, fairness_index


def judge(shares: list[int]) -> list[str]:
    rps = sum(shares) / 1.5
    judged = assess(
        RunTotals(
            rps=rps,
            mean_completed_ms=1000 * len(shares) / rps,  # Little's law holds
            connections=len(shares),
            open_loop=False,
            starved=0,
            fairness=fairness_index(shares),
            error_rate=0.0,
            loadgen_cpu=50.0,
            late_requests=0,
            requests=sum(shares),
        )
    )
    return list(judged.unfair_reasons)


def test_equal_shares_are_perfectly_fair() -> None:
    assert fairness_index([30] * 64) == pytest.approx(1.0)
    assert judge([30] * 64) == []


def test_a_fair_queue_with_a_little_spread_passes() -> None:
    shares = [28, 29, 30, 31, 32] * 12
    assert fairness_index(shares) > 0.99
    assert judge(shares) == []


def test_one_connection_served_over_and_over_is_unfair() -> None:
    # gunicorn's gevent worker under overload: a few clients get nearly everything.
    shares = [400, 350, 300] + [10] * 61
    index = fairness_index(shares)
    assert index is not None and index < FAIRNESS_MIN_INDEX
    (reason,) = judge(shares)
    assert reason.startswith("unequal_share: fairness index")


def test_a_random_order_server_is_still_fair() -> None:
    # Every connection equally likely to be next: Poisson-like spread around 20 responses.
    shares = [12, 15, 17, 18, 19, 20, 20, 21, 22, 23, 25, 28] * 5
    index = fairness_index(shares)
    assert index is not None and index > FAIRNESS_MIN_INDEX
    assert judge(shares) == []


def test_too_few_responses_per_connection_are_not_judged() -> None:
    # One sync worker, 64 clients, 50 ms each: 30 responses in the window, one per client in
    # turn; that looks uneven (30 got one, 34 none) but is a fair queue.
    assert fairness_index([1] * 30 + [0] * 34) is None
    assert fairness_index([]) is None


def test_a_window_shorter_than_one_turn_of_a_slow_queue_is_not_unfair() -> None:
    # 1 sync worker, 50 ms a request, 64 clients: a turn takes 3.2 s; a 1.5 s window sees 30
    # responses whose waits average 1.4 s, so rps x mean latency / connections is only 0.45.
    judged = assess(
        RunTotals(
            rps=20.0,
            mean_completed_ms=1430.0,
            connections=64,
            open_loop=False,
            starved=0,
            fairness=None,
            error_rate=0.0,
            loadgen_cpu=5.0,
            late_requests=0,
            requests=30,
        )
    )
    assert judged.littles_law_ratio is not None and judged.littles_law_ratio < 0.5
    assert judged.unfair_reasons == ()


def test_starved_slow_clients_are_named_and_counted_among_all_connections() -> None:
    judged = assess(
        RunTotals(
            rps=1000.0,
            mean_completed_ms=50.0,
            connections=54,  # the fast ones: Little's law is theirs
            open_loop=False,
            starved=2,
            fairness=None,
            error_rate=0.0,
            loadgen_cpu=10.0,
            late_requests=0,
            requests=2000,
            slow_connections=6,
            slow_starved=2,
        )
    )
    assert judged.unfair_reasons == (
        "starved: 2 of 60 connections (2 of them slow clients) got no response during the "
        "measurement window (the server serves some clients and ignores others)",
    )
