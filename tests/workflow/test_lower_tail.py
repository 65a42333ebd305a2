"""The lower tail among equals: when the default would be written, a config that ties with it
on req/s and is lower on p99 beyond the noise and by a tenth, and still so after 4 more rounds of
the two, is written instead; less than that, or at a real memory cost, the default stays. Pure
logic, no servers."""

from __future__ import annotations

from tests.support.measurements import measurement
from tuner.search.objectives import LATENCY, THROUGHPUT, Objective, Slo
from tuner.search.records import BASELINE_DEFAULT
from tuner.workflow.confirm import EXTRA_ROUNDS, Candidate, Confirmed, decide, extra_rounds
from tuner.workflow.lower_tail import lower_tail, settle_with_tail

DEFAULTS = {"threads": 8}
RPS = [2570, 2690, 1930, 2600, 2450]
ROUNDS = range(5)


def entry(label: str, rps: list[float], p99: list[float], pss: float = 40.0, **settings: int):
    runs = [measurement(r, p99=p, pss=pss) for r, p in zip(rps, p99, strict=True)]
    return Confirmed(Candidate(label, None, {**DEFAULTS, **settings}), runs, rounds=list(ROUNDS))


def more_of(p99: dict[str, list[float]], asked: list[list[str]]):
    """`more` as `lower_tail` calls it: each config's next rounds, at req/s as before."""

    def more(entries) -> bool:
        asked.append([e.candidate.label for e in entries])
        for e in entries:
            start = max(e.rounds) + 1
            for index, value in enumerate(p99[e.candidate.label]):
                e.runs.append(measurement(RPS[index], p99=value, pss=40.0))
                e.rounds.append(start + index)
        return True

    return more


def nothing(entries) -> None:
    raise AssertionError("no config should be measured again")


def default() -> Confirmed:
    return entry(BASELINE_DEFAULT, RPS, [269, 228, 298, 250, 280])


def test_a_config_as_fast_with_a_far_lower_tail_replaces_the_default():
    one = entry("trial 6", [2540, 2730, 2950, 2500, 2400], [34, 29, 57, 31, 33], threads=1)
    confirmed = [default(), one]
    verdict = decide(confirmed, THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner is verdict.default  # by req/s alone
    asked: list[list[str]] = []
    more = more_of({"default": [240, 260, 255, 270], "trial 6": [30, 41, 28, 35]}, asked)
    after = lower_tail(verdict, confirmed, THROUGHPUT, Slo(), DEFAULTS, more)
    assert asked == [["default", "trial 6"]]
    assert after is not None and after.winner is one
    assert not after.beats_default  # not on the objective's own figure
    assert after.tied_with == (BASELINE_DEFAULT,)
    assert after.summary.startswith(
        "trial 6 is written instead of the default: it ties with the default on req/s and its "
        "p99 is lower beyond the noise"
    )
    assert f"the lower tail. On req/s: {verdict.summary}" in after.summary
    assert f"after {EXTRA_ROUNDS} more rounds of trial 6 and the default" in after.summary


def test_a_lower_tail_that_does_not_hold_over_more_rounds_leaves_the_default():
    # Five lucky rounds: over four more its p99 is the default's.
    lucky = entry("trial 6", RPS, [200, 180, 230, 190, 210], threads=1)
    confirmed = [default(), lucky]
    verdict = decide(confirmed, THROUGHPUT, Slo(), DEFAULTS)
    asked: list[list[str]] = []
    more = more_of({"default": [240, 260, 255, 270], "trial 6": [250, 270, 240, 280]}, asked)
    after = lower_tail(verdict, confirmed, THROUGHPUT, Slo(), DEFAULTS, more)
    assert asked == [["default", "trial 6"]]
    assert after is not None and after.winner is after.default
    assert "trial 6's lower p99 did not hold beyond the noise, so the default stays" in (
        after.summary
    )


def unchanged(objective: Objective, *others: Confirmed) -> bool:
    """Whether the verdict over the default and `others` comes out of `lower_tail` as it went
    in, nothing measured again."""
    confirmed = [default(), *others]
    verdict = decide(confirmed, objective, Slo(), DEFAULTS)
    return lower_tail(verdict, confirmed, objective, Slo(), DEFAULTS, nothing) is verdict


def test_a_tail_lower_by_less_than_a_tenth_leaves_the_default():
    # Lower in every round, so beyond the noise, but by 5%: no reason for a change.
    assert unchanged(THROUGHPUT, entry("trial 6", RPS, [256, 217, 283, 238, 266], threads=1))


def test_a_lower_tail_that_costs_memory_leaves_the_default():
    assert unchanged(THROUGHPUT, entry("trial 6", RPS, [34, 29, 57, 31, 33], pss=60.0, threads=1))


def test_a_config_faster_or_slower_on_the_objective_is_not_an_equal():
    faster = entry("trial 6", [r * 1.5 for r in RPS], [34, 29, 57, 31, 33], threads=1)
    slower = entry("trial 7", [r * 0.6 for r in RPS], [20, 19, 22, 21, 20], threads=2)
    assert unchanged(THROUGHPUT, faster, slower)  # the faster beats the default on req/s
    assert unchanged(THROUGHPUT, slower)


def test_an_objective_on_p99_already_weighs_the_tail():
    assert unchanged(LATENCY, entry("trial 6", RPS, [34, 29, 57, 31, 33], threads=1))


def test_more_rounds_asked_twice_take_new_round_indexes():
    # A close call gave the default and the best median rounds 5-8; the lower tail's rounds
    # of the default come after them, never at 5-8 again.
    close = default()
    close.runs += [measurement(2500, p99=260.0, pss=40.0) for _ in range(4)]
    close.rounds += [5, 6, 7, 8]
    tail = entry("trial 6", RPS, [34, 29, 57, 31, 33], threads=1)
    assert list(extra_rounds([close, tail], 5)) == [9, 10, 11, 12]
    assert list(extra_rounds([tail], 5)) == [5, 6, 7, 8]


def test_each_size_and_tune_settle_with_the_tail_as_one_step():
    # tune and every --for-cpus size decide through settle_with_tail: settle, then the tail.
    one = entry("trial 6", [2540, 2730, 2950, 2500, 2400], [34, 29, 57, 31, 33], threads=1)
    asked: list[list[str]] = []
    more = more_of({"default": [240, 260, 255, 270], "trial 6": [30, 41, 28, 35]}, asked)
    after = settle_with_tail([default(), one], THROUGHPUT, Slo(), DEFAULTS, more)
    assert after is not None and after.winner is one
    assert asked[-1] == ["default", "trial 6"]


def test_a_lower_tail_the_budget_cannot_look_at_again_leaves_the_default_and_says_so():
    one = entry("trial 6", [2540, 2730, 2950, 2500, 2400], [34, 29, 57, 31, 33], threads=1)
    confirmed = [default(), one]
    verdict = decide(confirmed, THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner is verdict.default
    after = lower_tail(verdict, confirmed, THROUGHPUT, Slo(), DEFAULTS, lambda _entries: False)
    assert after is not None and after.winner is verdict.default
    assert after.summary == (
        f"{verdict.summary} (no second look: the budget held no more runs for 4 more rounds of "
        "trial 6 and the default, for its lower p99)"
    )
