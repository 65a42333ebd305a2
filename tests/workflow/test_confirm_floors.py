"""The verdict where the load generator was the limit (client_bound): a req/s so measured is a
floor, and no config is said to beat another by one. Pure logic, no servers."""

from __future__ import annotations

from tests.support.measurements import measurement
from tuner.metrics.measurement import Measurement, ServerCpu
from tuner.search.objectives import MULTI, THROUGHPUT, Slo
from tuner.workflow.confirm import (
    Candidate,
    Confirmed,
    ConfirmedSummary,
    client_bound_line,
    close_call,
    decide,
)
from tuner.workflow.provenance import Evidence, Origin, header_lines
from tuner.workflow.tune_steps import TuneOutcome


def run(rps: float, bound: bool = False) -> Measurement:
    cpu = ServerCpu(0.8, 1.0)
    if not bound:
        return measurement(rps, server_cpu=cpu, loadgen_busy_cpus=0.5)
    return measurement(
        rps, client_bound=True, loadgen_cpu_pct=97.0, loadgen_busy_cpus=0.97, server_cpu=cpu
    )


def entry(label: str, rps: list[float], bound: bool = False) -> Confirmed:
    """Five rounds: the three figures given, then their median twice more."""
    rps = [*rps, sorted(rps)[1], sorted(rps)[1]] if len(rps) == 3 else rps
    return Confirmed(Candidate(label, None, {"label": label}), [run(r, bound) for r in rps])


def test_two_client_bound_configs_get_no_verdict_and_the_default_is_written() -> None:
    default = entry("default", [100, 102, 101], bound=True)
    best = entry("trial 7", [150, 160, 155], bound=True)  # clear of it in every run
    verdict = decide([default, best], THROUGHPUT, Slo())
    assert verdict is not None
    assert verdict.winner is default and not verdict.beats_default
    assert verdict.client_bound == ("trial 7", "default")
    assert "beats" not in verdict.summary.replace("not shown to beat", "")
    assert "both reached the load generator's limit (client_bound)" in verdict.summary
    assert "floors, not results" in verdict.summary
    assert ">= 150.0-160.0 req/s vs default >= 100.0-102.0 req/s" in verdict.summary
    assert "the default (the cheaper) is written" in verdict.summary
    assert "--load-cpus" in verdict.summary
    assert verdict.to_json()["client_bound"] == ["trial 7", "default"]


def test_a_measured_config_above_a_client_bound_default_is_not_said_to_beat_it() -> None:
    default = entry("default", [100, 102, 101], bound=True)
    best = entry("trial 7", [150, 160, 155])
    verdict = decide([default, best], THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is default and not verdict.beats_default
    assert "the default reached the load generator's limit" in verdict.summary
    assert "at most x1.53" in verdict.summary  # the default's own figure may be higher
    # More rounds cannot turn the default's floor into a result.
    assert close_call([default, best], verdict, THROUGHPUT, Slo()) == []


def test_a_client_bound_winner_clear_of_a_measured_default_beats_it_by_at_least() -> None:
    default = entry("default", [100, 102, 101])
    best = entry("trial 7", [150, 160, 155], bound=True)
    verdict = decide([default, best], THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is best and verdict.beats_default
    assert "beats the default beyond the noise (throughput at least x1.53;" in verdict.summary
    assert verdict.client_bound == ("trial 7",)


def test_a_client_bound_winner_inside_the_noise_writes_the_default_and_says_why() -> None:
    default = entry("default", [100, 140, 105])
    best = entry("trial 7", [130, 135, 150], bound=True)  # loses the second round
    verdict = decide([default, best], THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is default and not verdict.beats_default
    assert "trial 7 reached the load generator's limit (client_bound)" in verdict.summary
    assert "req/s at least x1.29 the default's" in verdict.summary
    assert "the default (the cheaper) is written" in verdict.summary
    # Its floor may rise clear of the default with more rounds: worth them.
    assert close_call([default, best], verdict, THROUGHPUT, Slo()) == [default, best]


def test_without_client_bound_runs_the_verdict_is_worded_as_before() -> None:
    default = entry("default", [100, 102, 101])
    best = entry("trial 7", [150, 160, 155])
    verdict = decide([default, best], THROUGHPUT, Slo())
    assert verdict is not None and verdict.beats_default and verdict.client_bound == ()
    assert "(throughput x1.53;" in verdict.summary and ">=" not in verdict.summary


def test_the_trade_off_objective_marks_a_floor_ratio_and_claims_nothing_from_it() -> None:
    """The front is p99 at a rate against memory: a req/s floor (client_bound) is no figure
    of it, and two configs alike on both are no reason to leave the default."""
    default = entry("default", [100, 102, 101], bound=True)
    best = entry("trial 7", [150, 160, 155], bound=True)
    verdict = decide([default, best], MULTI, Slo())
    assert verdict is not None and verdict.winner is default and not verdict.beats_default
    assert verdict.client_bound == ("default",)


def test_the_kept_summary_carries_the_load_cpus_it_would_have_needed() -> None:
    bound = entry("default", [1000, 1010, 1005], bound=True).summary()
    assert bound.load_need is not None and bound.load_need.load_cpus == 2
    kept = ConfirmedSummary.from_json(bound.to_json()).load_need
    assert kept is not None and kept.load_cpus == 2
    assert entry("trial 7", [1000]).summary().load_need is None


def test_the_client_bound_line_names_the_configs_and_the_load_cpus_they_needed() -> None:
    default = entry("default", [1000, 1010, 1005], bound=True)
    best = entry("trial 7", [1500, 1600, 1550])
    line = client_bound_line([default, best], load_cpus=1, spare=0)
    assert line.startswith(
        "client_bound (the load generator was the bottleneck) in the confirmation rounds of "
        "default: its req/s is a floor for the server, not its result"
    )
    assert "about 2 load CPUs would have been needed" in line
    assert line.endswith(
        "this machine has none to spare: run on a bigger box or give the server fewer CPUs"
    )
    assert client_bound_line([best], load_cpus=1, spare=0) == ""


def test_the_file_header_carries_the_client_bound_line() -> None:
    default = entry("default", [100, 102, 101], bound=True)
    best = entry("trial 7", [150, 160, 155], bound=True)
    verdict = decide([default, best], THROUGHPUT, Slo())
    assert verdict is not None
    line = client_bound_line([default, best], load_cpus=1, spare=2)
    lines = header_lines(
        Origin(study_name="s", trial_number=None, context={}, workload="GET /"),
        Evidence(verdict=verdict, chosen=verdict.winner, noise="low", client_bound=line),
    )
    assert f"verdict: {verdict.summary}" in lines and f"WARNING: {line}" in lines
    assert "this machine has 2 to spare" in line


def test_tune_json_names_the_client_bound_configs_and_the_load_cpus_needed() -> None:
    default = entry("default", [1000, 1010, 1005], bound=True)
    best = entry("trial 7", [1500, 1600, 1550], bound=True)
    verdict = decide([default, best], THROUGHPUT, Slo())
    line = client_bound_line([default, best], load_cpus=1, spare=0)
    outcome = TuneOutcome([], [default, best], verdict, None, "", client_bound=line)
    data = outcome.to_json()
    assert data["client_bound"]["configs"] == ["default", "trial 7"]
    assert data["client_bound"]["load_need"]["load_cpus"] == 2
    assert data["client_bound"]["line"] == line
    assert data["verdict"]["client_bound"] == ["trial 7", "default"]
    assert not data["verdict"]["beats_default_beyond_noise"]
    assert TuneOutcome([], [], None, None, "").to_json()["client_bound"] is None
