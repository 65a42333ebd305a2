"""`compare`: each server's default and tuned config, re-measured side by side.

Every server was tuned by its own study on the same app, load and CPUs. Their defaults and
winners are then measured again in interleaved rounds (gunicorn default, gunicorn tuned, uwsgi
default, uwsgi tuned, and again), so drift of the machine hits every server alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tuner.loadgen.engine import keep_workers
from tuner.machine.sizing import SizingRule
from tuner.measure.runner import run_bench
from tuner.metrics.measurement import Measurement
from tuner.search.records import BASELINE_DEFAULT
from tuner.search.study import StudySetup
from tuner.workflow.confirm import Candidate, Confirmed, ConfirmedSummary, OnRun, confirm
from tuner.workflow.race_rule import MIN_FINALISTS, gap
from tuner.workflow.race_runner import FinalResult, RaceResult
from tuner.workflow.tune_steps import TuneOutcome


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
    # A raced compare: the trials its study drew; why it stopped drawing them early ("" if
    # it did not); whether it reached the final rounds (if not, `tuned` is its best config as
    # the race's rounds measured it, and no file is written).
    trials: int | None = None
    stopped: str = ""
    finalist: bool = True
    # A finalist beyond the top three: the configs it brought to the final rounds, when the
    # budget held fewer than its candidates (its default and best first).
    lean_final: int | None = None
    app: str = ""  # the entry point it served, as given (a project's WSGI or ASGI one)
    sizing: SizingRule | None = None  # --for-cpus: the rule its written file sizes itself by

    def to_json(self) -> dict[str, Any]:
        return {
            "trials": self.trials,
            "stopped": self.stopped,
            "finalist": self.finalist,
            "lean_final": self.lean_final,
            "server": self.server,
            "app": self.app,
            "study": self.study,
            "default": self.default.to_json(),
            "tuned": self.tuned.to_json() if self.tuned else None,
            "tuned_is_default": self.tuned_is_default,
            "config_file": self.config_file,
            "verdict": self.verdict,
            "one_process": self.one_process,
            "sizing": self.sizing.to_dict() if self.sizing else None,
        }


def candidates(setup: StudySetup, outcome: TuneOutcome) -> list[Candidate]:
    """The server's default, and its written winner when that is not the default."""
    server = setup.contender
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
    by_server = {setup.contender: setup for setup in setups}

    def measure(candidate: Candidate, round_index: int) -> Measurement:
        setup = by_server[candidate.server]
        plan = setup.plan(
            candidate.settings,
            log_dir / f"{candidate.label.replace(' ', '-')}-round{round_index}.log",
        )
        return run_bench(plan).measurement

    chosen = [c for setup in setups for c in candidates(setup, outcomes[setup.contender])]
    return confirm(chosen, rounds, measure, on_run)


def rows(
    setups: Sequence[StudySetup],
    outcomes: Mapping[str, TuneOutcome],
    confirmed: Sequence[Confirmed],
) -> list[ServerRow]:
    by_label = {entry.candidate.label: entry.summary() for entry in confirmed}
    result = []
    for setup in setups:
        server = setup.contender
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
                app=setup.app_text,
                sizing=outcome.sizing,
            )
        )
    return result


def race_rows(race: RaceResult, final: FinalResult) -> list[ServerRow]:
    """The rows of a raced compare: each server's default from the final rounds; a finalist's
    tuned config from them too, with its verdict and file; another server's best config from
    the race's rounds, with why it is not in the final."""
    by_server: dict[str, list[Confirmed]] = {}
    for entry in final.confirmed:
        by_server.setdefault(entry.candidate.server, []).append(entry)
    rows = []
    for lane in race.lanes:
        server = lane.server
        entries = {entry.candidate.label: entry for entry in by_server.get(server, [])}
        default = entries[BASELINE_DEFAULT].summary()
        base = ServerRow(
            server=server,
            study=lane.setup.name,
            default=default,
            tuned=None,
            tuned_is_default=False,
            config_file=None,
            verdict="",
            one_process=lane.setup.adapter.process_model.processes is None,
            trials=lane.trials(),
            stopped=lane.stopped,
            app=lane.setup.app_text,
        )
        outcome = final.outcomes.get(server)
        if outcome is not None:
            verdict = outcome.verdict
            winner = verdict.winner if verdict else None
            kept = winner is not None and winner.candidate.label == BASELINE_DEFAULT
            rows.append(
                replace(
                    base,
                    tuned=default if kept else (winner.summary() if winner else None),
                    tuned_is_default=kept,
                    config_file=str(outcome.out_path) if outcome.out_path else None,
                    verdict=verdict.summary
                    if verdict
                    else "no config passed the SLOs; no file written",
                    sizing=outcome.sizing,
                    lean_final=race.extra_candidates if server in race.lean else None,
                )
            )
            continue
        best = lane.best()
        rows.append(
            replace(
                base,
                tuned=lane.entry(best).summary() if best is not None else None,
                verdict=f"not in the final rounds: {_out_of_final(race, server)}; no file "
                f"written (`tuner tune --study-name {lane.setup.name}` resumes its study)",
                finalist=False,
            )
        )
    return rows


def _out_of_final(race: RaceResult, server: str) -> str:
    """Why a server is not a finalist: behind the leader beyond the noise, outside the top."""
    standing = race.standings.get(server)
    leader = race.finalists[0] if race.finalists else None
    if standing is None or leader is None:
        return "no config that could win"
    times = gap(
        race.standings[leader].confirmed,
        standing.confirmed,
        higher_is_better=race.lanes[0].setup.objective.headlines[0].higher_is_better,
    )
    return (
        f"behind {leader} by x{times:.1f}, beyond the noise ({race.noise:.0%}), outside the "
        f"top {MIN_FINALISTS}"
    )
