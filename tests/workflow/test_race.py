"""The race's decisions (tuner/workflow/race_rule.py) on constructed standings: pure logic."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tuner.metrics.stats import Spread
from tuner.workflow import race_rule
from tuner.workflow.confirm import Candidate
from tuner.workflow.race_rule import BudgetPlan, RunCost, Standing
from tuner.workflow.race_runner import default_and_best


def standing(server: str, *runs: float, trials: int = 6, gain: float = 0.0) -> Standing:
    return Standing(server, trials, Spread.of(runs), gain)


def calls(standings: list[Standing], noise: float = 0.1, rungs_left: int = 2) -> dict[str, str]:
    """server -> its reason if stopped, "" if it goes on."""
    judged = race_rule.judge(standings, noise=noise, rungs_left=rungs_left, higher_is_better=True)
    assert [c.server for c in judged] == [s.server for s in standings]
    return {c.server: c.reason if c.stop else "" for c in judged}


FIELD = [
    standing("granian", 3100, 3150),
    standing("gunicorn", 3000, 3080),
    standing("uwsgi", 2950, 3050),
    standing("waitress", 1500, 1560),
    standing("werkzeug", 1000, 1010),
]


def test_a_clear_loser_stops_after_the_first_rung_with_its_reason() -> None:
    decided = calls(FIELD)
    assert decided["werkzeug"].startswith("behind granian by x3.1 after 6 trials, beyond the noise")
    assert decided["waitress"].startswith("behind granian by x2.0 after 6 trials")
    # gunicorn's and uwsgi's runs overlap the leader's or trail it inside the noise
    assert decided["granian"] == decided["gunicorn"] == decided["uwsgi"] == ""


def test_servers_inside_the_noise_never_stop_each_other() -> None:
    """Five servers whose runs overlap the leader's, or trail it by less than the noise: none
    stops, whatever their rank."""
    close = [
        standing("a", 1000, 1100),
        standing("b", 990, 1090),
        standing("c", 980, 1000),
        standing("d", 920, 980),  # apart from a's runs, but x1.11 on medians: inside 12%
        standing("e", 1040, 1060),
    ]
    assert set(calls(close, noise=0.12).values()) == {""}


def test_a_gap_beyond_the_noise_is_not_enough_when_the_last_rung_gained_as_much() -> None:
    """x2.0 behind, but its best doubled over its last rung: two more such rungs could close it."""
    climbing = [*FIELD[:3], standing("waitress", 1500, 1560, gain=1.0)]
    assert calls(climbing)["waitress"] == ""
    assert calls(climbing, rungs_left=0)["waitress"].startswith("behind granian by x2.0")


def test_the_reason_says_what_was_counted_on_the_untried_configs() -> None:
    """Rungs left: the last rung's gain was counted, and fell short. None left: the gain,
    however large, could not count, and the reason says so instead of looking wrong."""
    climbing = [*FIELD[:3], standing("waitress", 1500, 1560, gain=2.0)]
    assert calls(FIELD)["waitress"].endswith(
        "beyond the noise (10%) and what its untried configs could add (its last rung gained "
        "nothing)"
    )
    assert calls(climbing, rungs_left=0)["waitress"].endswith(
        "with no rung left in the budget for its untried configs (its last rung gained 200%)"
    )
    done = [*FIELD[:3], Standing("waitress", 30, Spread.of([1500, 1560]), 0.5, done=True)]
    assert calls(done)["waitress"].endswith("(10%), with all the trials it may draw drawn")


def test_the_top_three_never_stop_and_all_reach_the_final() -> None:
    """Three servers, one far behind: the final rounds measure all three, so none stops
    drawing trials (each must be there tuned, not as a first rung left it)."""
    three = [
        standing("granian", 3000, 3010),
        standing("waitress", 1500, 1520),
        standing("werkzeug", 600, 610),
    ]
    assert set(calls(three, rungs_left=0).values()) == {""}
    finalists = race_rule.finalists(three, noise=0.1, higher_is_better=True)
    assert finalists == ["granian", "waitress", "werkzeug"]


def test_a_server_third_after_a_rung_that_found_nothing_goes_on() -> None:
    """x1.5 behind the leader, no gain over its default, no rung left: a fourth server would
    stop; in third place it draws on, and the fourth, as far behind, stops."""
    field = [
        standing("bjoern", 14000, 14200),
        standing("uwsgi", 11000, 11100),
        standing("granian", 9300, 9400),
        standing("waitress", 9200, 9300),
    ]
    decided = calls(field, rungs_left=0)
    assert decided["granian"] == ""
    assert decided["waitress"].startswith("behind bjoern by x1.5")


def test_a_lower_is_better_headline_is_judged_the_other_way() -> None:
    p99 = [
        standing("a", 5.0, 5.2),
        standing("b", 5.1, 5.3),
        standing("c", 5.0, 5.4),
        standing("d", 20.0, 21.0),
    ]
    judged = race_rule.judge(p99, noise=0.1, rungs_left=1, higher_is_better=False)
    stopped = {c.server: c.reason for c in judged if c.stop}
    assert list(stopped) == ["d"] and stopped["d"].startswith("behind a by x4.0")


def test_the_final_takes_the_top_three_and_all_the_noise_cannot_separate() -> None:
    field = [
        standing("granian", 3100, 3150),
        standing("gunicorn", 2850, 2950),  # fourth, but x1.08 behind: inside 10%
        standing("bjoern", 2900, 3000),
        standing("waitress", 1500, 1560),
        standing("uwsgi", 2950, 3000),
        standing("cheroot", 2500, 3200),  # far behind on medians, but its runs overlap
    ]
    chosen = race_rule.finalists(field, noise=0.1, higher_is_better=True)
    assert chosen == ["granian", "uwsgi", "bjoern", "gunicorn", "cheroot"]


def test_two_servers_both_reach_the_final() -> None:
    assert race_rule.finalists(FIELD[3:], noise=0.1, higher_is_better=True) == [
        "waitress",
        "werkzeug",
    ]


@pytest.mark.parametrize(
    ("probes", "repeats", "expected"),
    [
        ([], [], race_rule.MIN_NOISE),
        ([10.0, 13.0, 10.0], [], 0.3),  # the CPU probe's range
        # one probe of ten far out (a moment's hiccup) is left out: 11.6-12.1 over 11.98
        ([11.95, 12.04, 16.65, 12.13, 12.11, 11.87, 11.75, 11.98, 12.05, 11.58], [], 0.10),
        ([11.6, 11.9, 12.1, 12.0, 12.5, 16.6, 16.5], [], (16.5 - 11.6) / 12.05),  # drift stays
        # the median of the repeats' ranges (20%, 33%, 22%)
        (
            [10.0, 10.1],
            [Spread.of([90, 110]), Spread.of([100, 140]), Spread.of([100, 125])],
            0.2222,
        ),
    ],
)
def test_the_noise_is_the_largest_measured_spread(
    probes: list[float], repeats: list[Spread], expected: float
) -> None:
    assert race_rule.race_noise(probes, repeats) == pytest.approx(expected, abs=1e-4)


def test_the_gain_of_a_rung() -> None:
    assert race_rule.gain_over(1000, 1500, higher_is_better=True) == pytest.approx(0.5)
    assert race_rule.gain_over(10.0, 5.0, higher_is_better=False) == pytest.approx(1.0)
    assert race_rule.gain_over(1000, 900, higher_is_better=True) == 0.0
    assert race_rule.gain_over(None, 900, higher_is_better=True) == 0.0


def test_the_budget_shrinks_the_first_rung_and_ends_the_race_before_the_final() -> None:
    plan = BudgetPlan(budget_s=14 * 60, servers=10, final_candidates=6, final_rounds=3)
    cost = RunCost(rung_s=4.0, final_s=7.5)
    # final: (3 x 6 + 7) x 3 = 75 runs = 562 s; 278 s left for 10 servers at 4 s: 6 runs each
    assert plan.final_runs() == 75
    assert plan.first_rung(cost) == 4  # 6 runs each, less the 2 race rounds
    assert plan.first_rung(RunCost(40.0, 75.0)) == race_rule.MIN_FIRST_RUNG  # never below
    assert plan.first_rung(RunCost(1.0, 1.0)) == race_rule.RUNG_TRIALS  # never above
    # after 10 minutes, a rung of 3 servers (24 runs, 96 s) and the final (562 s) do not fit
    assert not plan.rung_fits(600.0, cost, alive=3, finalists=3)
    assert plan.rung_fits(100.0, cost, alive=3, finalists=3)
    assert plan.rungs_left(100.0, cost, alive=3) == 1  # (840 - 100 - 562) / 96
    assert plan.fixed_s(cost) == pytest.approx(10 * 5 * 4.0 + 75 * 7.5)


def test_finalists_beyond_the_top_three_bring_what_the_budget_holds() -> None:
    """A wait-bound app: seven finalists the noise cannot separate. Every candidate of all
    seven would take the final rounds past the budget; the four beyond the top three bring
    what fits, down to their default and their best, and a further rung is judged against
    that leaner final."""
    plan = BudgetPlan(budget_s=14 * 60, servers=10, final_candidates=6, final_rounds=3)
    cost = RunCost(rung_s=4.0, final_s=7.5)
    assert plan.final_runs(7) == (7 * 6 + 3) * 3  # 135 runs, 1,012 s: past the budget alone
    assert plan.final_runs(7, race_rule.LEAN_CANDIDATES) == (3 * 6 + 4 * 2 + 3) * 3  # 87, 652 s
    assert plan.final_runs(3, 2) == plan.final_runs(3)  # nobody beyond the top three
    assert plan.extra_candidates(60.0, cost, finalists=7) == 3  # 60 + 99 x 7.5 <= 840
    assert plan.extra_candidates(180.0, cost, finalists=7) == race_rule.LEAN_CANDIDATES
    assert plan.extra_candidates(800.0, cost, finalists=7) == race_rule.LEAN_CANDIDATES  # the least
    assert replace(plan, budget_s=30 * 60).extra_candidates(0.0, cost, finalists=7) == 6
    # a rung of one server (8 runs, 32 s) fits beside the lean final, not beside the full one
    assert plan.rung_fits(100.0, cost, alive=1, finalists=7)  # 100 + 32 + 652 <= 840
    assert not plan.rung_fits(180.0, cost, alive=1, finalists=7)


def test_a_lean_finalist_brings_its_default_then_its_best_then_the_rest_in_order() -> None:
    picks = [
        Candidate("default", 0, {"workers": 1}),
        Candidate("2*cpus+1", 1, {"workers": 5}),
        Candidate("trial 3", 3, {"workers": 3}),
        Candidate("trial 5", 5, {"workers": 9}),
        Candidate("trial 5, logging off", 5, {"workers": 9, "accesslog": None}),
    ]
    labels = [c.label for c in default_and_best(picks, 5, 2)]
    assert labels == ["default", "trial 5"]
    assert [c.label for c in default_and_best(picks, 5, 3)][2] == "2*cpus+1"
    assert [c.label for c in default_and_best(picks, 0, 2)] == ["default", "2*cpus+1"]
    assert [c.label for c in default_and_best(picks, None, 3)] == ["default", "2*cpus+1", "trial 3"]


def test_the_trials_at_other_sizes_are_planned_as_final_runs_of_each_finalist() -> None:
    """compare --for-cpus: each finalist's count-only trials at the other sizes come after the
    final rounds, at the same windows, and the budget holds them as it holds those rounds."""
    plain = BudgetPlan(budget_s=14 * 60, servers=10, final_candidates=6, final_rounds=3)
    sized = replace(plain, sized_runs=10)
    cost = RunCost(rung_s=4.0, final_s=7.5)
    assert sized.final_runs() == plain.final_runs() + 3 * 10  # the top three finalists
    assert sized.final_runs(finalists=5) == plain.final_runs(finalists=5) + 5 * 10
    assert sized.fixed_s(cost) == pytest.approx(plain.fixed_s(cost) + 30 * 7.5)
    # 30 more runs at 7.5 s leave less for the first rung: 4 trials each becomes 3 (its least)
    assert (plain.first_rung(cost), sized.first_rung(cost)) == (4, race_rule.MIN_FIRST_RUNG)
    assert plain.rung_fits(100.0, cost, alive=3, finalists=3)
    assert not sized.rung_fits(100.0, cost, alive=3, finalists=3)


def test_the_final_rounds_are_planned_with_the_races_share_of_repeats() -> None:
    """Beside a busy neighbour half the race's runs lost too much and were measured again; the
    final's runs will be too, so the plan counts them, and what the budget leaves after the
    final's own runs is how many of its lossy runs may be measured again."""
    plan = BudgetPlan(budget_s=14 * 60, servers=10, final_candidates=6, final_rounds=3)
    quiet, busy = RunCost(4.0, 7.5), RunCost(4.0, 7.5, repeat_share=0.5)
    assert busy.final_expected_s == pytest.approx(11.25)
    assert plan.fixed_s(busy) == pytest.approx(10 * 5 * 4.0 + 75 * 11.25)
    assert plan.first_rung(busy) == race_rule.MIN_FIRST_RUNG < plan.first_rung(quiet)
    assert plan.rung_fits(100.0, quiet, alive=3, finalists=3)
    assert not plan.rung_fits(100.0, busy, alive=3, finalists=3)
    # 840 - 200 spent - 75 final runs x 7.5 s = 77.5 s: 10 repeats of 7.5 s
    assert plan.runs_of_final(candidates=25, finalists=3) == 75 == plan.final_runs(3, 6)
    assert plan.repeats_left(200.0, busy, runs=75) == 10
    assert plan.repeats_left(400.0, busy, runs=75) == 0  # none, not < 0
    # Finalists with fewer candidates than the plan's most (3 trials, fewer configs to bring):
    # 15 a round, 45 runs; the time left holds 13 more.
    assert plan.repeats_left(400.0, busy, runs=plan.runs_of_final(15, 3)) == 13
    # --for-cpus: each finalist's trials at the other sizes are runs of the final too.
    sized = BudgetPlan(14 * 60, servers=10, final_candidates=6, final_rounds=3, sized_runs=10)
    assert sized.runs_of_final(candidates=15, finalists=3) == 45 + 30
    # The share predicts 38 of the 75 lossy; the budget that holds them all, for the user:
    # 400 spent + (75 + 38) runs x 7.5 s.
    assert plan.expected_repeats(busy, runs=75) == 38
    assert plan.budget_for_repeats(400.0, busy, runs=75) == pytest.approx(400 + 113 * 7.5)
    assert plan.expected_repeats(quiet, runs=75) == 0
    # A rung's rounds are repeated as often: 3 servers x (6 trials + 2 rounds x 1.5) x 4 s.
    assert plan.rung_s(3, busy) == pytest.approx(3 * 9 * 4.0)
    assert plan.rung_s(3, quiet) == pytest.approx(3 * 8 * 4.0)
