"""`compare`: each server's default and tuned config, re-measured side by side.

Every server was tuned by its own study on the same app, load and CPUs. Their defaults and
winners are then measured again in interleaved rounds (gunicorn default, gunicorn tuned, uwsgi
default, uwsgi tuned, and again), so drift of the machine hits every server alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.loadgen.engine import keep_workers
from tuner.measure.runner import run_bench
from tuner.metrics.measurement import Measurement
from tuner.search.records import BASELINE_DEFAULT
from tuner.search.study import StudySetup
from tuner.workflow.confirm import Candidate, Confirmed, ConfirmedSummary, confirm
from tuner.workflow.tune import TuneOutcome

OnRun = Callable[[Candidate, int, Measurement | None], None]


@dataclass(frozen=True)
class ServerRow:
    """One server's figures in the comparison."""

    server: str
    study: str
    default: ConfirmedSummary
    tuned: ConfirmedSummary | None  # None when no config passed the SLOs
    tuned_is_default: bool  # the study's winner is the default config itself
    config_file: str | None
    verdict: str
    one_process: bool = False  # the server runs Python in one process (no processes setting)

    def to_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "study": self.study,
            "default": self.default.to_json(),
            "tuned": self.tuned.to_json() if self.tuned else None,
            "tuned_is_default": self.tuned_is_default,
            "config_file": self.config_file,
            "verdict": self.verdict,
            "one_process": self.one_process,
        }


def candidates(setup: StudySetup, outcome: TuneOutcome) -> list[Candidate]:
    """The server's default, and its written winner when that is not the default."""
    server = setup.adapter.name
    defaults = setup.adapter.table.defaults()
    trial0 = next((r.number for r in outcome.records if r.baseline == BASELINE_DEFAULT), None)
    chosen = [Candidate(f"{server} default", trial0, defaults, server=server)]
    winner = outcome.verdict.winner.candidate if outcome.verdict else None
    if winner is not None and winner.settings != defaults:
        chosen.append(Candidate(f"{server} tuned", winner.trial_number, winner.settings, server))
    return chosen


@keep_workers()  # the load workers serve every round of every server
def side_by_side(
    setups: Sequence[StudySetup],
    outcomes: Mapping[str, TuneOutcome],
    rounds: int,
    log_dir: Path,
    on_run: OnRun | None = None,
) -> list[Confirmed]:
    by_server = {setup.adapter.name: setup for setup in setups}

    def measure(candidate: Candidate, round_index: int) -> Measurement:
        setup = by_server[candidate.server]
        plan = setup.plan(
            candidate.settings,
            log_dir / f"{candidate.label.replace(' ', '-')}-round{round_index}.log",
        )
        return run_bench(plan).measurement

    chosen = [c for setup in setups for c in candidates(setup, outcomes[setup.adapter.name])]
    return confirm(chosen, rounds, measure, on_run)


def rows(
    setups: Sequence[StudySetup],
    outcomes: Mapping[str, TuneOutcome],
    confirmed: Sequence[Confirmed],
) -> list[ServerRow]:
    by_label = {entry.candidate.label: entry.summary() for entry in confirmed}
    result = []
    for setup in setups:
        server = setup.adapter.name
        outcome = outcomes[server]
        default = by_label[f"{server} default"]
        kept = outcome.verdict is not None and f"{server} tuned" not in by_label
        tuned = default if kept else by_label.get(f"{server} tuned")
        result.append(
            ServerRow(
                server=server,
                study=setup.name,
                default=default,
                tuned=tuned,
                tuned_is_default=kept,
                config_file=str(outcome.out_path) if outcome.out_path else None,
                verdict=outcome.verdict.summary
                if outcome.verdict
                else "no config passed the SLOs; no file written",
                one_process=setup.adapter.process_model.processes is None,
            )
        )
    return result
