"""A confirmation run whose CPUs lost too much is measured again once, the cleaner kept: pure
logic, with a fake `measure` whose runs say what their CPUs lost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from tests.support.measurements import cores, measurement
from tuner.errors import ServerStartError
from tuner.metrics.coreshare import CoreShare
from tuner.metrics.lossy import LOAD_LOSSY, LOSSY, Loss, worst_loss
from tuner.metrics.measurement import Measurement
from tuner.report.study_view import confirm_run_text
from tuner.search.objectives import THROUGHPUT, Slo
from tuner.workflow.confirm import (
    Candidate,
    Confirmed,
    ConfirmedSummary,
    confirm,
    decide,
    measured_more,
    settle,
)
from tuner.workflow.repeats import Repeat, RunAllowance
from tuner.workflow.tune_steps import noise_summary

CLEAN = cores(stolen=0.01)
STOLEN = cores(stolen=0.18)  # over LOSSY on the server CPU


class Script:
    """A fake `measure`: per (label, round), the runs it returns in turn (a ServerStartError
    instance is raised); every call and every on_run report recorded."""

    def __init__(self, runs: Mapping[tuple[str, int], Sequence[Measurement | Exception]]):
        self.runs = {key: list(value) for key, value in runs.items()}
        self.calls: list[tuple[str, int]] = []
        self.told: list[tuple[str, int, Measurement | None, Repeat | None]] = []

    def measure(self, candidate: Candidate, round_index: int) -> Measurement:
        self.calls.append((candidate.label, round_index))
        queued = self.runs.get((candidate.label, round_index))
        got = queued.pop(0) if queued else measurement(100, cores=CLEAN)
        if isinstance(got, Exception):
            raise got
        return got

    def on_run(
        self, candidate: Candidate, round_index: int, run: Measurement | None, repeat: Repeat | None
    ) -> None:
        self.told.append((candidate.label, round_index, run, repeat))


def _confirm(script: Script, rounds: int = 3, labels: Sequence[str] = "AB") -> list[Confirmed]:
    candidates = [Candidate(label, None, {"label": label}) for label in labels]
    return confirm(candidates, rounds, script.measure, script.on_run)


def test_a_run_that_lost_too_much_is_measured_again_in_its_place_and_the_clean_one_kept():
    script = Script({("B", 1): [measurement(80, cores=STOLEN), measurement(120, cores=CLEAN)]})
    a, b = _confirm(script)
    # Measured again at once, in the same round and place (B first in the reversed round 1).
    assert script.calls == [("A", 0), ("B", 0), ("B", 1), ("B", 1), ("A", 1), ("A", 2), ("B", 2)]
    assert [run.median_rps for run in b.runs] == [100, 120, 100]
    assert b.rounds == [0, 1, 2]  # one run per round: the pairs are as before
    assert b.rps is not None and 80 not in b.rps.samples
    clean_loss = Loss("server", CoreShare(1, 0.01, 0.0), LOSSY)  # the repeat's worst CPU set
    assert b.repeats == [
        Repeat(1, Loss("server", CoreShare(1, 0.18, 0.0), LOSSY), clean_loss, False)
    ]
    assert not a.repeats and len(a.runs) == 3
    # on_run is told once per round and config: the run kept, and why it was measured twice.
    told = [(label, r, run.median_rps if run else None, rep) for label, r, run, rep in script.told]
    assert told[2] == ("B", 1, 120, b.repeats[0])
    assert all(rep is None for label, r, _, rep in told if (label, r) != ("B", 1))


def test_the_repeat_keeps_the_run_with_less_lost_and_does_not_loop():
    script = Script(
        {
            ("A", 0): [measurement(80, cores=STOLEN), measurement(90, cores=cores(other=0.12))],
            ("B", 0): [measurement(90, cores=cores(other=0.12)), measurement(70, cores=STOLEN)],
        }
    )
    a, b = _confirm(script, rounds=1)
    assert script.calls == [("A", 0), ("A", 0), ("B", 0), ("B", 0)]  # twice each, no more
    # A: its repeat lost less (12% against 18%), still too much: kept all the same.
    assert [run.median_rps for run in a.runs] == [90] and not a.repeats[0].kept_first
    # B: its repeat lost more: the first run is kept.
    assert [run.median_rps for run in b.runs] == [90] and b.repeats[0].kept_first
    assert b.repeats[0].text() == (
        "repeated: server CPUs lost 12% to other processes; the repeat lost more (server CPUs "
        "lost 18% to steal), the first kept"
    )
    # The line of a first run kept says its loss once, in the repeat's words.
    line = confirm_run_text(b.runs[0], b.repeats[0])
    assert line.count("12% to other processes") == 1


def test_a_machine_always_busy_costs_at_most_twice_the_runs():
    busy = [measurement(80, cores=STOLEN)] * 2
    script = Script({(label, r): busy for label in "AB" for r in range(3)})
    a, b = _confirm(script)
    assert len(script.calls) == 2 * 2 * 3
    assert len(a.runs) == len(b.runs) == 3 and len(a.repeats) == len(b.repeats) == 3
    assert all(rep.kept_first for rep in a.repeats + b.repeats)  # as much lost: the first kept


@pytest.mark.parametrize(
    "run",
    [
        measurement(100, cores=cores(stolen=0.05, other=0.05)),  # at the line, not over it
        measurement(100, cores=cores(load_stolen=0.3, load_other=0.15)),  # the load has room
        measurement(100),  # no figures of what the CPUs lost
    ],
)
def test_clean_runs_are_never_repeated(run: Measurement):
    script = Script({(label, r): [run] * 3 for label in "AB" for r in range(3)})
    a, b = _confirm(script)
    assert len(script.calls) == 6 and not a.repeats and not b.repeats
    assert all(rep is None for *_, rep in script.told)


def test_the_load_cpus_count_when_large_or_when_the_load_was_the_limit():
    free = measurement(100, cores=cores(load_other=0.2))
    bound = measurement(100, cores=cores(load_other=0.2), client_bound=True)
    crowded = measurement(100, cores=cores(load_stolen=0.3, load_other=0.3))
    assert (loss := worst_loss(free)) is not None and not loss.lossy
    assert (loss := worst_loss(bound)) is not None and loss.lossy and loss.where == "load"
    assert (loss := worst_loss(crowded)) is not None and loss.lossy
    assert loss == Loss("load", CoreShare(1, 0.3, 0.3), LOAD_LOSSY)
    assert loss.text() == "load CPUs lost 30% to steal and 30% to other processes"
    # The set that lost most against its own line is the one named: 8% of the server CPUs
    # (0.8 of its line) weighs more than 35% of a free load's (0.7 of its line).
    both = measurement(100, cores=cores(stolen=0.08, load_other=0.35))
    assert (loss := worst_loss(both)) is not None and loss.where == "server"


def test_a_failed_repeat_keeps_the_first_run_and_counts_as_a_failure():
    failed = ServerStartError("exited with 3")
    script = Script({("A", 0): [measurement(80, cores=STOLEN), failed]})
    a, _ = _confirm(script, rounds=1)
    assert [run.median_rps for run in a.runs] == [80] and a.rounds == [0]
    assert a.failures == ["server_exited: exited with 3"]
    assert a.repeats[0].kept_first and a.repeats[0].second is None
    assert a.repeats[0].text().endswith("; the repeat failed, the first kept")


def test_the_record_and_the_texts_say_which_runs_were_repeated_and_why():
    script = Script(
        {
            ("B", 0): [measurement(80, cores=STOLEN), measurement(100, cores=CLEAN)],
            ("B", 3): [measurement(85, cores=cores(stolen=0.12)), measurement(101, cores=CLEAN)],
        }
    )
    a, b = _confirm(script, rounds=5)
    assert [repeat.round_index for repeat in b.repeats] == [0, 3]
    assert confirm_run_text(b.runs[0], b.repeats[0]) == (
        "100 req/s p99 10.00 ms (repeated: server CPUs lost 18% to steal)"
    )
    said = (
        "server CPUs lost up to 18% to steal in 2 of 5 runs of B (repeated, the cleaner run kept)"
    )
    assert b.repeats_text() == said and a.repeats_text() == ""
    assert said in noise_summary([], [a, b])
    # Kept where the confirmation figures are stored, and read back.
    stored = b.summary().to_json()
    assert stored["repeats"][0] == {
        "round": 0,
        "first": {"where": "server", "cpus": 1, "stolen": 0.18, "other": 0.0, "limit": LOSSY},
        "repeat": {"where": "server", "cpus": 1, "stolen": 0.01, "other": 0.0, "limit": LOSSY},
        "kept": "repeat",
        "made": True,
    }
    again = ConfirmedSummary.from_json(stored)
    assert again.repeats == tuple(b.repeats) and again.repeats_text() == said
    # Stored before repeats were kept: no field, none repeated.
    del stored["repeats"]
    assert ConfirmedSummary.from_json(stored).repeats == ()


def test_the_verdict_is_that_of_the_clean_runs():
    """The run kept takes its round's place: the pairs judge it against the other config's
    run of the same round, as if the lossy run had never been."""
    stolen_then_clean = [measurement(70, cores=STOLEN), measurement(130, cores=CLEAN)]
    script = Script({("best", r): stolen_then_clean for r in (1, 3)})
    script.runs |= {("best", r): [measurement(130, cores=CLEAN)] for r in (0, 2, 4)}
    confirmed = _confirm(script, rounds=5, labels=("default", "best"))
    verdict = decide(confirmed, THROUGHPUT, Slo())
    # Kept, the two stolen runs (70 against 100) would have lost two rounds of five.
    assert verdict is not None and verdict.winner is confirmed[1] and verdict.beats_default
    clean = [
        Confirmed(Candidate("default", None, {"label": "default"}), runs=[measurement(100)] * 5),
        Confirmed(Candidate("best", None, {"label": "best"}), runs=[measurement(130)] * 5),
    ]
    again = decide(clean, THROUGHPUT, Slo())
    assert again is not None and again.summary == verdict.summary


def test_a_kept_repeat_that_lost_a_little_says_whose_loss_it_is() -> None:
    """The first run's loss, then the kept repeat's, named as such (not the same words
    twice, as if one run had lost both)."""
    first = cores(other=0.18)
    again = cores(other=0.06)
    runs = iter([measurement(100.0, cores=first), measurement(120.0, cores=again)])
    (entry,) = confirm([Candidate("trial 8", 8, {})], 1, lambda _c, _r: next(runs))
    line = confirm_run_text(entry.runs[0], entry.repeats[0])
    assert line == (
        "120 req/s p99 10.00 ms (repeated: server CPUs lost 18% to other processes, "
        "the repeat kept: server CPUs lost 6% to other processes)"
    )


def test_a_budgets_allowance_repeats_only_as_many_runs_as_it_holds():
    # compare: the final rounds have time for one repeat; two runs lose too much.
    script = Script(
        {
            ("A", 0): [measurement(80, cores=STOLEN), measurement(100, cores=CLEAN)],
            ("B", 0): [measurement(70, cores=STOLEN), measurement(100, cores=CLEAN)],
        }
    )
    allowance = RunAllowance(1)
    candidates = [Candidate(label, None, {"label": label}) for label in "AB"]
    a, b = confirm(candidates, 1, script.measure, script.on_run, allowance)
    assert script.calls == [("A", 0), ("A", 0), ("B", 0)]  # B's lossy run is not measured again
    assert [run.median_rps for run in a.runs] == [100] and a.repeats[0].made
    assert [run.median_rps for run in b.runs] == [70]
    assert b.repeats[0].kept_first and not b.repeats[0].made
    assert b.repeats[0].text() == (
        "not repeated, the budget holding no more repeats for it: server CPUs lost 18% to steal"
    )
    assert b.repeats_text() == (
        "1 lossy run(s) of B not repeated: the budget held no more repeats for it"
    )
    assert a.repeats_text().startswith("server CPUs lost 18% to steal in 1 of 1 runs of A")
    # Kept with the study and read back as it was.
    summary = ConfirmedSummary.from_json(b.summary().to_json())
    assert summary.repeats == (b.repeats[0],) and not summary.repeats[0].made


def test_an_allowance_gives_a_verdicts_more_rounds_all_their_runs_or_none():
    allowance = RunAllowance(9)
    assert not allowance.take_all(10) and allowance.left == 9  # nothing taken
    assert allowance.take_all(8) and allowance.left == 1
    assert allowance.take() and not allowance.take()


def test_a_second_look_the_budget_cannot_hold_is_not_measured_and_the_verdict_says_so():
    # compare's final: five rounds leave a close call (trial 7's median the better, 4 of 5
    # pairs won); its 8 more runs do not fit the 7 the budget has left.
    def script_for() -> Script:
        first = {("trial 7", r): [measurement(v, cores=CLEAN)] for r, v in enumerate(
            [106, 112, 104, 109, 111])}  # fmt: skip
        default = {("default", r): [measurement(v, cores=CLEAN)] for r, v in enumerate(
            [100, 104, 108, 101, 105])}  # fmt: skip
        later = {("trial 7", r): [measurement(120, cores=CLEAN)] for r in range(5, 9)}
        return Script(first | default | later)

    candidates = [Candidate(label, None, {"label": label}) for label in ("default", "trial 7")]
    for left, looked in ((7, False), (8, True)):
        script = script_for()
        allowance = RunAllowance(left)
        confirmed = confirm(candidates, 5, script.measure, script.on_run)
        more = measured_more(script.measure, 5, script.on_run, allowance)
        verdict = settle(confirmed, THROUGHPUT, Slo(), None, more)
        assert verdict is not None
        if looked:  # all 8 measured, in rounds 5-8, and they decide
            assert len(script.calls) == 18 and allowance.left == 0
            assert verdict.winner.candidate.label == "trial 7" and verdict.beats_default
            assert "after 4 more rounds of trial 7 and the default" in verdict.summary
        else:  # none measured: the first look's default, saying why
            assert len(script.calls) == 10 and allowance.left == 7
            assert verdict.winner.candidate.label == "default"
            assert verdict.summary.endswith(
                "(no second look: the budget held no more runs for 4 more rounds of trial 7 "
                "and the default)"
            )


def test_compares_spare_runs_go_to_the_finalists_configs_only():
    # The other servers' defaults are in the final for the table: their lossy runs are kept,
    # and the spare runs wait for a finalist's, even when theirs come first in the round.
    script = Script(
        {
            ("default", 0): [measurement(70, cores=STOLEN), measurement(100, cores=CLEAN)],
            ("trial 4", 0): [measurement(80, cores=STOLEN), measurement(100, cores=CLEAN)],
        }
    )
    allowance = RunAllowance(1, servers=["bjoern"])
    candidates = [Candidate("default", None, {}, "gunicorn"), Candidate("trial 4", 4, {}, "bjoern")]
    stopped, finalist = confirm(candidates, 1, script.measure, script.on_run, allowance)
    assert script.calls == [("default", 0), ("trial 4", 0), ("trial 4", 0)]
    assert not stopped.repeats[0].made and [run.median_rps for run in stopped.runs] == [70]
    assert finalist.repeats[0].made and [run.median_rps for run in finalist.runs] == [100]
    assert allowance.left == 0
