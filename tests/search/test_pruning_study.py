"""The pruner in a real study: real gunicorn, real load, one-second windows. A config that is
hopelessly behind is stopped after its warm-up windows, with the reason recorded; one inside
the noise of the contenders runs to the end.

apps/iowait.py waits 50 ms per request, so throughput is set by how many requests the config
serves at once: 16 connections on 16 sync workers give about 320 req/s, 2 workers about 40, a
gap no CPU noise on a shared machine can close or open. Sync workers close each connection, so
the kernel's accept queue serves the connections in turn: the contenders are fair (the pruner
only counts fair ones)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.conftest import require_adapter
from tuner.cli import build_parser
from tuner.commands.setup import build_setup
from tuner.commands.tune_options import TuneOptions
from tuner.search.pruning import MIN_CONTENDERS, MIN_MARGIN, WARMUP_WINDOWS
from tuner.search.study import QuietListener, open_study, run_search

CPUS = sorted(os.sched_getaffinity(0))
SPLIT = ["--server-cpus", str(CPUS[0]), "--load-cpus", str(CPUS[-1])] if len(CPUS) > 1 else []
DURATION_S = 3  # windows 0, 1, 2: a pruned trial stops after WARMUP_WINDOWS (2) of 3

SPACE = """
server = "gunicorn"
[params.workers]
type = "int"
low = 1
high = 16
"""
REASON = re.compile(
    r"pruned: median (?P<mine>[\d,.]+) req/s after 2\+ windows, more than (?P<margin>\d+)% "
    r"\(the study's measured noise\) behind the best contender's (?P<best>[\d,.]+)$"
)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def test_a_hopeless_trial_is_pruned_and_one_inside_the_noise_is_not(
    tmp_path: Path, since: float
) -> None:
    require_adapter("gunicorn")
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    args = build_parser().parse_args(
        ["tune", "apps/iowait.py", "--server", "gunicorn", "--space", str(space)]
        + ["--storage", f"sqlite:///{tmp_path}/s.db", "--study-name", "pruning"]
        + ["--duration", str(DURATION_S), "--warmup", "0.5", "--connections", "16"]
        + ["--no-branch-starts", *SPLIT]
    )
    setup = build_setup(TuneOptions.from_args(args))
    study = open_study(setup)  # queues the two baselines: 1 and 3 workers, 20 and 60 req/s
    study.queue({"workers": 16})  # about 320 req/s
    # Judged against MIN_CONTENDERS (3) fair contenders, before the second CPU probe (trial 5)
    # can widen the margin: about 40 req/s, far behind beyond any noise.
    study.queue({"workers": 2})
    study.queue({"workers": 15})  # about 300: inside the noise
    study.queue({"workers": 2})  # the pruned config again: not measured again
    listener = QuietListener()
    run_search(setup, study, n_trials=6, timeout_s=None, listener=listener)

    by_number = {r.number: r for r in listener.ended}
    # The repeat gave its slot back: one more trial at least was drawn from the space.
    assert set(range(7)) <= set(by_number), sorted(by_number)
    # These had too few contenders to be judged; the third is the best there is.
    contenders = [by_number[n] for n in range(MIN_CONTENDERS)]
    for record in contenders:
        assert record.state == "COMPLETE" and record.feasible, (record.number, record.fail_reason)

    pruned = by_number[3]
    assert pruned.state == "PRUNED", (pruned.state, pruned.fail_reason)
    assert pruned.settings["workers"] == 2
    match = REASON.match(pruned.fail_reason)
    assert match, pruned.fail_reason
    mine, best = _number(match["mine"]), _number(match["best"])
    margin = int(match["margin"]) / 100
    assert margin >= MIN_MARGIN
    assert mine < best * (1 - margin)  # the reason's own figures justify the call
    fastest = max(record.rps for record in contenders)
    assert best <= fastest * 1.5 and mine < fastest / 4, (mine, best, fastest)
    # It stopped after its warm-up windows instead of measuring all of them.
    assert pruned.measurement is not None
    assert pruned.measurement.duration_s < DURATION_S - 0.5, pruned.measurement.duration_s
    assert all(rps > 0 for rps in pruned.measurement.window_rps[:WARMUP_WINDOWS])

    kept = by_number[4]
    assert kept.state == "COMPLETE" and kept.feasible, (kept.state, kept.fail_reason)
    assert kept.settings["workers"] == 15
    assert kept.measurement is not None
    assert len(kept.measurement.window_rps) == DURATION_S
    # It really was inside the noise: its median is within the floor margin of the best.
    assert kept.rps > fastest * (1 - MIN_MARGIN), (kept.rps, fastest)

    again = by_number[5]
    assert again.state == "PRUNED" and again.duplicate_of == 3, (again.state, again.duplicate_of)
    assert again.fail_reason == pruned.fail_reason
    assert not (setup.workdir / "trials" / "5").exists()  # no server was started for it
