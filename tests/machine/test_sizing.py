"""The sizing rule fitted from the best counts at measured CPU limits (pure)."""

from __future__ import annotations

import pytest

from tuner.errors import ConfigError
from tuner.machine import bootlimits
from tuner.machine.sizing import CountLine, SizePoint, SizingRule, fit_line, fit_memory, fit_rule

MB = 2**20


def test_two_sizes_give_the_line_through_both() -> None:
    line = fit_line([0.5, 1.0], [2.0, 3.0])
    assert line == CountLine(2.0, 1.0)
    assert line.at(0.5) == 2 and line.at(1.0) == 3 and line.at(2.0) == 5
    assert line.describe() == "2 x CPUs + 1"
    assert fit_line([0.5, 2.0], [4.0, 4.0]) == CountLine(0.0, 4.0)
    assert CountLine(0.0, 4.0).describe() == "4"


def test_more_sizes_give_the_least_squares_line() -> None:
    line = fit_line([1.0, 2.0, 3.0], [2.0, 5.0, 5.0])
    assert line.per_cpu == pytest.approx(1.5) and line.base == pytest.approx(1.0)


def test_memory_splits_into_master_and_processes() -> None:
    # A 30M master and 20M per process, measured at 1, 3 and 5 processes.
    assert fit_memory([(1, 50.0), (3, 90.0), (5, 130.0)]) == (30.0, 20.0)
    # One process count only: the master counts as one more process.
    assert fit_memory([(3, 100.0), (3, 80.0)]) == (25.0, 25.0)
    # A line that says a process costs nothing is no line: the same fallback.
    assert fit_memory([(1, 90.0), (4, 60.0)]) == (45.0, 45.0)


def test_a_rule_needs_two_sizes() -> None:
    with pytest.raises(ConfigError, match="two CPU limits"):
        fit_rule([SizePoint(1.0, 3, 1), SizePoint(1.0, 4, 1)], [(3, 90.0)], "WEB_CONCURRENCY")


def test_the_rule_reproduces_its_points_and_says_where_it_extrapolates() -> None:
    rule = fit_rule(
        [SizePoint(1.0, 3, 4, rps=900.0), SizePoint(0.5, 2, 4, rps=450.0)],
        [(2, 70.0), (3, 90.0)],
        "WEB_CONCURRENCY",
    )
    assert rule.measured_cpus == (0.5, 1.0)
    assert [rule.counts(p.cpus) for p in rule.points] == [(2, 4), (3, 4)]
    assert rule.counts(2.0) == (5, 4)
    # 0.8 x 150M less the 30M master leaves 90M: 4 processes of 20M, not the rule's 5.
    assert rule.counts(2.0, 150 * MB) == (4, 4)
    text = "\n".join(rule.describe_lines())
    assert "processes = 2 x CPUs + 1, threads per process = 4" in text
    assert "0.5 CPUs: 2 processes x 4 threads, 450 req/s" in text
    assert "Measured between 0.5 and 1 CPUs" in text and "extrapolated" in text
    assert "the master 30M and each process 20M" in text and "20% kept free" in text
    assert "WEB_CONCURRENCY=N overrides" in text
    literal = rule.literal()
    assert literal["processes"] == [2.0, 1.0] and literal["measured_cpus"] == [0.5, 1.0]


def test_a_point_off_the_line_is_said() -> None:
    rule = fit_rule(
        [SizePoint(0.5, 2, 1), SizePoint(1.0, 2, 1), SizePoint(2.0, 6, 1)],
        [(2, 60.0), (6, 140.0)],
        "WEB_CONCURRENCY",
    )
    lines = rule.describe_lines()
    assert any("(the rule gives" in line for line in lines)


def test_the_rule_is_kept_whole_as_json() -> None:
    import json

    rule = fit_rule(
        [SizePoint(0.5, 2, 4, rps=450.0), SizePoint(1.0, 3, 4)], [(2, 70.0)], "UWSGI_PROCESSES"
    )
    again = SizingRule.from_dict(json.loads(json.dumps(rule.to_dict())))
    assert again == rule


def test_a_count_that_falls_as_cpus_grow_is_held_at_the_largest_sizes() -> None:
    # Measured (fib, gunicorn gthread): 12 threads best at 0.5 CPUs, 6 at 1 CPU. The line
    # through them, -12 x CPUs + 18, would give 1 thread at 2 CPUs and above.
    rule = fit_rule([SizePoint(0.5, 1, 12), SizePoint(1.0, 1, 6)], [(1, 60.0)], "WEB_CONCURRENCY")
    assert rule.threads == CountLine(0.0, 6.0)
    assert [rule.counts(cpus)[1] for cpus in (0.5, 0.75, 1.0, 2.0, 4.0)] == [6] * 5
    text = "\n".join(rule.describe_lines())
    assert "The best threads fell as CPUs grew: held at 6" in text
    assert "0.5 CPUs: 1 process x 12 threads (the rule gives 1 x 6)" in text
    # a rising line is kept as fitted
    assert fit_rule(
        [SizePoint(0.5, 2, 4), SizePoint(1.0, 3, 4)], [(2, 70.0)], "WEB_CONCURRENCY"
    ).processes == CountLine(2.0, 1.0)


def test_a_rule_with_least_processes_raises_a_lower_count_and_says_why() -> None:
    import json
    from dataclasses import replace

    fitted = fit_rule([SizePoint(0.5, 1, 4), SizePoint(1.0, 3, 4)], [(1, 60.0)], "X")
    assert "least_processes" not in fitted.literal()  # every other file's rule is as before
    rule = replace(fitted, least_processes=2, least_reason="the supervisor recycles workers")
    assert SizingRule.from_dict(json.loads(json.dumps(rule.to_dict()))) == rule
    assert SizingRule.from_dict(fitted.to_dict()) == fitted
    assert [fitted.counts(cpus)[0] for cpus in (0.25, 0.5, 1.0)] == [1, 1, 3]
    assert [rule.counts(cpus)[0] for cpus in (0.25, 0.5, 1.0)] == [2, 2, 3]
    text = "\n".join(rule.describe_lines())
    assert "At least 2 processes on any box, the override included: the supervisor" in text
    assert "0.5 CPUs: 1 process x 4 threads (the rule gives 2 x 4)" in text
    box = {"cpus": 0.5, "cpus_from": "x", "memory": 64 * MB, "memory_from": "y"}
    sized = bootlimits.size(rule.literal(), box, {})  # memory fits none: the floor still holds
    assert sized["processes"] == 2
    assert sized["line"].endswith("; at least 2: the supervisor recycles workers)")
    assert bootlimits.size(rule.literal(), box, {"X": "1"})["processes"] == 2
    assert bootlimits.size(rule.literal(), box, {"X": "5"})["processes"] == 5
