"""Configs CPU-bound in every run are judged per CPU-second received: a round whose CPUs a
neighbour or the hypervisor took a share of does not count against the config measured in it.
Pure logic: runs with chosen figures (the real path: tests/measure/test_cores_lost.py)."""

from __future__ import annotations

from tests.support.measurements import measurement
from tuner.metrics.coreshare import CoresGot, CoreShare
from tuner.metrics.measurement import Measurement, ServerCpu
from tuner.report.compare_page import best_line
from tuner.report.study_view import confirm_run_text
from tuner.search.objectives import THROUGHPUT, Slo
from tuner.workflow.confirm import Candidate, Confirmed, ConfirmedSummary, decide
from tuner.workflow.side_by_side import ServerRow

# The share of the server's CPU a neighbour took in each of five rounds: the trial and the
# default were each unlucky in turn.
TRIAL_LOST = [0.0, 0.4, 0.0, 0.4, 0.0]
DEFAULT_LOST = [0.4, 0.0, 0.4, 0.0, 0.4]


def cpu_bound_run(per_cpu: float, lost: float, idle: float = 0.01) -> Measurement:
    """A run of a config serving `per_cpu` req per CPU-second, busy for all the CPU it got
    (its CPU idle `idle` of the time) beside a neighbour that took `lost` of it."""
    got = 1.0 - lost
    busy = max(0.01, got - idle)
    cores = CoresGot(CoreShare(1, 0.0, lost, waited=lost, idle=idle), CoreShare(1, 0.0, 0.0))
    return measurement(per_cpu * got, server_cpu=ServerCpu(busy, 1.0), cores=cores)


def confirmed(label: str, runs: list[Measurement]) -> Confirmed:
    return Confirmed(Candidate(label, None, {}), runs=runs, rounds=list(range(len(runs))))


def test_a_config_better_per_cpu_second_beats_the_default_its_req_s_could_not() -> None:
    trial = confirmed("trial 7", [cpu_bound_run(1200, lost) for lost in TRIAL_LOST])
    default = confirmed("default", [cpu_bound_run(1000, lost) for lost in DEFAULT_LOST])
    # By req/s the trial lost two of five rounds: no verdict at 1/32.
    verdict = decide([default, trial], THROUGHPUT, Slo())
    assert verdict is not None
    assert verdict.winner is trial and verdict.beats_default, verdict.summary
    assert "judged per CPU-second received (both CPU-bound in every run" in verdict.summary
    assert "x1.20 on medians" in verdict.summary
    assert "better in 5 of 5 interleaved rounds" in verdict.summary
    # req/s is still shown: the ratio of its medians and its ranges.
    assert "(throughput x2.00;" in verdict.summary
    assert "trial 7 720.0-1,200.0 req/s vs default 600.0-1,000.0 req/s" in verdict.summary


def test_a_default_that_waited_in_one_run_is_judged_by_req_s() -> None:
    trial = confirmed("trial 7", [cpu_bound_run(1200, lost) for lost in TRIAL_LOST])
    runs = [cpu_bound_run(1000, lost) for lost in DEFAULT_LOST]
    runs[2] = cpu_bound_run(1000, 0.4, idle=0.3)  # idle a third of the run: not CPU-bound
    default = confirmed("default", runs)
    assert default.per_cpu is None and default.cpu_bound_runs == 4
    verdict = decide([default, trial], THROUGHPUT, Slo())
    assert verdict is not None
    assert verdict.winner is default and not verdict.beats_default, verdict.summary
    assert "per CPU-second" not in verdict.summary


def test_the_figure_is_kept_in_the_summary_and_read_back() -> None:
    trial = confirmed("trial 7", [cpu_bound_run(1200, lost) for lost in TRIAL_LOST])
    summary = trial.summary()
    assert summary.per_cpu is not None and round(summary.per_cpu.median) == 1200
    assert summary.cpu_bound_runs == 5
    data = summary.to_json()
    assert data["rps_per_cpu_s"]["rounds"] == [0, 1, 2, 3, 4]
    again = ConfirmedSummary.from_json(data)
    assert again.per_cpu == summary.per_cpu and again.cpu_bound_runs == 5
    # An older record without it reads as never judged per CPU-second.
    del data["rps_per_cpu_s"], data["cpu_bound_runs"]
    old = ConfirmedSummary.from_json(data)
    assert old.per_cpu is None and old.cpu_bound_runs == 0


def _row(server: str, entry: Confirmed) -> ServerRow:
    summary = entry.summary()
    return ServerRow(server, f"{server}-study", summary, summary, True, None, "verdict")


def test_compare_names_the_fastest_where_per_cpu_second_separates_a_req_s_tie() -> None:
    fast = _row("bjoern", confirmed("default", [cpu_bound_run(1200, x) for x in TRIAL_LOST]))
    slow = _row("uwsgi", confirmed("default", [cpu_bound_run(1000, x) for x in DEFAULT_LOST]))
    line = best_line([fast, slow])
    assert line.startswith("fastest tuned: bjoern, x"), line
    assert "judged per CPU-second received against uwsgi x1.20 (medians)" in line
    # Where one waited in a run, req/s judges, and five rounds of it do not separate them.
    runs = [cpu_bound_run(1000, x) for x in DEFAULT_LOST]
    runs[0] = cpu_bound_run(1000, 0.4, idle=0.3)
    waited = _row("uwsgi", confirmed("default", runs))
    line = best_line([fast, waited])
    assert "tie on req/s" in line and "per CPU-second" not in line, line


def test_a_confirmation_runs_line_gives_the_figure_beside_req_s_where_cpu_bound() -> None:
    line = confirm_run_text(cpu_bound_run(1200, 0.4), None)
    assert line.startswith("720 req/s p99 10.00 ms, 1,200 req per CPU-second (CPU-bound)"), line
    assert "req per CPU-second" not in confirm_run_text(cpu_bound_run(1200, 0.4, idle=0.3), None)
    data = cpu_bound_run(1200, 0.4).to_json()
    assert (data["cpu_bound"], data["cpus_received"], data["rps_per_cpu_s"]) == (True, 0.6, 1200)
