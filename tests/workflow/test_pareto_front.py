"""The confirmed front: merges by the noise of the paired rounds, the pick, what is kept."""

from __future__ import annotations

from tests.support.measurements import measurement
from tuner.metrics.measurement import Measurement
from tuner.search.objectives import Slo
from tuner.workflow.confirm import Candidate, Confirmed
from tuner.workflow.pareto_front import (
    ConfirmedFront,
    covers,
    decide_front,
    emit_command,
    merge_front,
)

RATE = 500.0


def runs(p99: list[float], pss: list[float], rps: float = RATE) -> list[Measurement]:
    return [measurement(rps, p99=a, pss=b, target_rps=RATE) for a, b in zip(p99, pss, strict=True)]


def entry(label: str, p99: list[float], pss: list[float], rps: float = RATE) -> Confirmed:
    return Confirmed(Candidate(label, None, {"workers": label}), runs=runs(p99, pss, rps))


def labels(points: list) -> list[tuple[str, list[str]]]:
    return [(p.entry.candidate.label, [m.candidate.label for m in p.merged]) for p in points]


ONE = entry("default", [40, 41, 39, 42, 40], [50, 50, 51, 50, 50])
TWO = entry("trial 2", [20, 21, 19, 22, 20], [90, 91, 90, 90, 91])
FOUR = entry("trial 4", [10, 11, 10, 11, 10], [170, 170, 171, 170, 170])


def test_clearly_separated_points_all_stay_cheapest_first() -> None:
    assert labels(merge_front([FOUR, ONE, TWO])) == [
        ("default", []),
        ("trial 2", []),
        ("trial 4", []),
    ]


def test_points_the_noise_cannot_separate_merge_into_the_cheapest() -> None:
    # Dearer by a little in every round, faster in some rounds and slower in others.
    twin = entry("trial 3", [19, 22, 21, 20, 21], [92, 93, 92, 92, 93])
    assert covers(TWO, twin) and not covers(twin, TWO)  # the cheaper covers it
    assert labels(merge_front([twin, TWO, ONE])) == [("default", []), ("trial 2", ["trial 3"])]
    # Equal within the noise on both figures: either covers the other; the cheaper stands.
    same = entry("trial 5", [21, 20, 20, 21, 19], [91, 90, 91, 91, 90])
    assert covers(TWO, same) and covers(same, TWO)
    assert labels(merge_front([same, TWO])) == [("trial 2", ["trial 5"])]


def test_a_point_dominated_beyond_the_noise_is_merged_into_the_one_that_beats_it() -> None:
    dominated = entry("trial 6", [30, 31, 30, 32, 30], [120, 121, 120, 120, 121])
    assert labels(merge_front([dominated, ONE, TWO])) == [
        ("default", []),
        ("trial 2", ["trial 6"]),
    ]


def test_a_cheaper_median_that_is_clearly_slower_and_not_clearly_cheaper_gives_way() -> None:
    """The cheapest by a hair's median, yet the next point is as cheap within the noise and
    faster in every round: the slower one is covered and joins it."""
    slow = entry("trial 7", [30, 31, 30, 31, 30], [89, 92, 89, 92, 90])
    fast = entry("trial 8", [20, 21, 20, 21, 20], [91, 90, 91, 90, 91])
    assert labels(merge_front([slow, fast])) == [("trial 8", ["trial 7"])]


def test_the_pick_is_the_knee_without_limits_and_the_verdict_gives_both_figures() -> None:
    decided = decide_front([ONE, TWO, FOUR], Slo(carry_rate=True), rate_rps=RATE, rate_source="x")
    assert decided is not None
    front, verdict = decided.front, decided.verdict
    assert verdict.winner is TWO and verdict.default is ONE
    assert not verdict.beats_default  # faster for more memory: a trade, not a win
    assert verdict.summary.startswith(
        "trial 2 is the knee of the front (confirmed front of 3 points at 500 req/s offered)"
    )
    assert "p99 x0.50 (better), PSS x1.80 (worse)" in verdict.summary
    assert [p.picked for p in front.points] == [False, True, False]
    assert front.rule == "the knee of the front" and front.rate_rps == RATE


def test_the_user_s_limits_pick_their_point() -> None:
    within = decide_front(
        [ONE, TWO, FOUR], Slo(max_memory_mb=100, carry_rate=True), rate_rps=RATE, rate_source=""
    )
    assert within is not None and within.verdict.winner is TWO
    assert within.front.rule == "the fastest p99 within --max-memory 100 MB"
    # FOUR breaks the memory SLO: it is not on the front at all.
    assert [p.summary.label for p in within.front.points] == ["default", "trial 2"]
    meeting = decide_front([ONE, TWO, FOUR], Slo(p99_ms=30), rate_rps=RATE, rate_source="")
    assert meeting is not None and meeting.verdict.winner is TWO
    fastest = decide_front([ONE, TWO, FOUR], Slo(p99_ms=12), rate_rps=RATE, rate_source="")
    assert fastest is not None and fastest.verdict.winner is FOUR


def test_a_config_that_cannot_carry_the_rate_is_off_the_front() -> None:
    short = entry("trial 9", [5, 5, 5, 5, 5], [30, 30, 30, 30, 30], rps=RATE * 0.7)
    decided = decide_front([ONE, short], Slo(carry_rate=True), rate_rps=RATE, rate_source="")
    assert decided is not None and decided.verdict.winner is ONE
    assert [p.summary.label for p in decided.front.points] == ["default"]
    assert decide_front([short], Slo(carry_rate=True), rate_rps=RATE, rate_source="") is None


def test_the_front_is_kept_and_read_back_with_its_ranges() -> None:
    twin = entry("trial 3", [19, 22, 21, 20, 21], [92, 93, 92, 92, 93])
    decided = decide_front([ONE, TWO, twin], Slo(), rate_rps=RATE, rate_source="--rate")
    assert decided is not None
    kept = ConfirmedFront.from_json(decided.front.to_json())
    assert kept == decided.front
    # Two points are the front's two corners: the knee is the cheaper.
    assert kept.lines() == [
        "1. default [written]: p99 39.0-42.0 ms, PSS 50.0-51.0 MB at 500 req/s",
        "2. trial 2: p99 19.0-22.0 ms, PSS 90.0-91.0 MB at 500 req/s (merged: trial 3)",
    ]
    assert ConfirmedFront.from_json(None) is None and ConfirmedFront.from_json({}) is None


def test_the_emit_command_names_the_point_and_a_storage_other_than_the_default() -> None:
    assert emit_command("s1", 2, "sqlite:///studies/tuner.db") == (
        "tuner emit --study s1 --point 2 --out FILE"
    )
    assert emit_command("s1", 1, "sqlite:////tmp/x.db", "gunicorn.conf.py") == (
        "tuner emit --study s1 --point 1 --out gunicorn.conf.py --storage sqlite:////tmp/x.db"
    )


def test_the_default_stands_for_a_point_the_noise_cannot_separate_it_from() -> None:
    """Equal within the noise both ways, the default keeps the point even when the other
    config's median was a hair cheaper; a config the default only covers one way (clearly
    worse) never hands its point to the default."""
    hair = entry("trial 9", [40, 42, 39, 41, 40], [50, 49, 50, 50, 49])
    assert covers(hair, ONE) and covers(ONE, hair)
    assert labels(merge_front([hair, ONE, TWO])) == [
        ("default", ["trial 9"]),
        ("trial 2", []),
    ]
    better = entry("trial 10", [30, 31, 30, 31, 30], [45, 45, 46, 45, 45])
    assert covers(better, ONE) and not covers(ONE, better)
    assert labels(merge_front([better, ONE]))[0] == ("trial 10", ["default"])


def test_of_equals_the_config_with_fewest_changes_from_the_default_stands() -> None:
    """Measured on the DB app on granian (front_vs_grid): the study's point set the runtime
    mode, backpressure, workers_lifetime and the pool beside its 1 blocking thread; the grid's
    point was the 1 blocking thread alone, as heavy, its p99 not separated by the pairs. Its
    lean variant is measured beside it; equal both ways, it is the point written."""
    defaults = {"blocking_threads": 2, "runtime_mode": "st", "backpressure": None, "lifetime": 0}
    searched = {"blocking_threads": 1, "runtime_mode": "mt", "backpressure": 32, "lifetime": 60}
    lean_settings = {**defaults, "blocking_threads": 1}
    point = Confirmed(
        Candidate("trial 12", 12, searched),
        runs=runs([1.85, 2.18, 2.39, 2.02, 2.25], [65.05, 65.08, 65.1, 65.07, 65.06]),
    )
    lean = Confirmed(
        Candidate("trial 12, other settings at default", 12, lean_settings),
        runs=runs([2.07, 1.76, 2.23, 2.15, 1.98], [65.1, 65.12, 65.1, 65.11, 65.1]),
    )
    assert covers(point, lean) and covers(lean, point)
    assert labels(merge_front([point, lean])) == [
        ("trial 12", ["trial 12, other settings at default"])
    ]
    assert labels(merge_front([point, lean], defaults=defaults)) == [
        ("trial 12, other settings at default", ["trial 12"])
    ]
    # Clearly slower (a tenth and more in every pair), the lean config does not stand for it.
    slow = Confirmed(
        Candidate("trial 12, other settings at default", 12, lean_settings),
        runs=runs([2.6, 2.9, 3.1, 2.8, 3.0], [65.1] * 5),
    )
    assert not covers(slow, point)
    assert labels(merge_front([point, slow], defaults=defaults))[0][0] == "trial 12"


def test_a_config_stands_for_a_point_only_where_no_other_point_beats_it() -> None:
    """ "Cannot be told from" is not transitive. On the DB app on granian (front_vs_grid) the
    default, written as a point of the front, was dominated side by side by the front's other
    point; one way that happens: the default is equal to the cheap point within the noise
    (0.8% more memory, 5% faster) but clearly slower than the other point and not materially
    cheaper. Standing for the cheap point, it would be a point of the front another beats."""
    cheap = entry("trial 5", [2.0, 2.05, 1.95, 2.0, 2.1], [65.0] * 5)
    fast = entry("trial 9", [1.6, 1.65, 1.55, 1.6, 1.62], [66.0] * 5)
    default = entry("default", [1.9, 1.95, 1.85, 1.92, 1.88], [65.5] * 5)
    assert covers(cheap, default) and covers(default, cheap)
    assert covers(fast, default) and not covers(default, fast)
    assert labels(merge_front([cheap, default, fast])) == [
        ("trial 5", ["default"]),
        ("trial 9", []),
    ]
    # When the fast point costs materially more memory, the default is apart from it too
    # (cheaper one way, slower the other), and it stands for the cheap point.
    dear = entry("trial 9", [1.6, 1.65, 1.55, 1.6, 1.62], [70.0] * 5)
    assert not covers(dear, default) and not covers(default, dear)
    assert labels(merge_front([cheap, default, dear])) == [
        ("default", ["trial 5"]),
        ("trial 9", []),
    ]


def test_a_tenth_of_a_mb_less_is_no_saving_the_default_stands_for_the_slower_config() -> None:
    """Measured on fib (front_vs_grid): a config 0.1 MB under the default in each of 9 rounds,
    its p99 not separated from the default's by the pairs (2x the default's by medians), was
    kept as the point, the default merged into it."""
    p99_default = [2.1, 3.5, 2.4, 8.1, 3.3, 2.6, 4.0, 2.2, 3.1]
    p99_hair = [7.6, 2.2, 9.9, 3.0, 7.0, 2.0, 8.8, 2.1, 6.5]
    default = entry("default", p99_default, [33.0] * 9)
    hair = entry("trial 16", p99_hair, [32.9] * 8 + [33.0])
    assert covers(default, hair) and covers(hair, default)
    assert labels(merge_front([hair, default])) == [("default", ["trial 16"])]
    # 2% less in every round is a saving: that config is the point, the default merged into it.
    saver = entry("trial 17", p99_hair, [32.3] * 9)
    assert not covers(default, saver)
    assert labels(merge_front([saver, default])) == [("trial 17", ["default"])]


def test_a_tail_shorter_by_a_fraction_of_a_percent_is_no_point_of_its_own() -> None:
    """Measured on iowait (front_vs_grid): at 10 req/s every config's p99 is the app's 50 ms
    wait, steady to a tenth of a millisecond; 4 gthread workers were 0.1 ms faster than one
    sync worker in every round, for 13 MB more, and stood as a point of the front."""
    lean = entry("default", [51.52, 51.55, 51.50, 51.53, 51.51], [21.4] * 5)
    many = entry("trial 9", [51.39, 51.41, 51.38, 51.40, 51.39], [34.3] * 5)
    assert covers(lean, many)  # faster beyond the noise, by 0.25%: nothing a user pays for
    assert labels(merge_front([many, lean])) == [("default", ["trial 9"])]
    # A tenth faster is a point of its own.
    faster = entry("trial 10", [46.0, 46.2, 45.9, 46.1, 46.0], [34.3] * 5)
    assert labels(merge_front([faster, lean])) == [("default", []), ("trial 10", [])]
