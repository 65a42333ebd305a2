"""The noise summary and the report tables as pure logic: constructed measurements and
confirmation entries, no server, no Optuna study. Every figure below is chosen so that a
wrong min / median / max, ratio, order or note changes the text that is checked."""

from __future__ import annotations

import io
import math
from dataclasses import replace

import pytest
from rich.console import Console

from tests.support.measurements import measurement
from tuner.machine.limits import Limits
from tuner.metrics.coreshare import CoresGot, CoreShare
from tuner.metrics.lossy import LOSSY, Loss
from tuner.metrics.measurement import Latency, TemplateFigures
from tuner.metrics.stats import Spread, spread_text
from tuner.report import tables
from tuner.report.bench_view import result_table
from tuner.report.compare_page import best_line, ceiling_line, compare_chart, compare_table
from tuner.report.data import StoredResult, StudyData, contenders
from tuner.report.study_view import record_line
from tuner.search.attrs import StudyAttrs
from tuner.search.records import TrialRecord
from tuner.workflow.confirm import Candidate, Confirmed, ConfirmedSummary
from tuner.workflow.repeats import Repeat
from tuner.workflow.side_by_side import ServerRow
from tuner.workflow.tune_steps import noise_summary

# --- Spread and spread_text ----------------------------------------------------------------


def test_spread_is_min_median_max_of_the_samples_in_any_order() -> None:
    spread = Spread.of([30.0, 10.0, 20.0, 40.0])
    assert (spread.low, spread.median, spread.high) == (10.0, 25.0, 40.0)
    assert spread.samples == (30.0, 10.0, 20.0, 40.0)
    assert spread.relative_range == pytest.approx(30.0 / 25.0)
    with pytest.raises(ValueError, match="no samples"):
        Spread.of([])


def test_a_zero_median_has_no_relative_range_instead_of_dividing_by_zero() -> None:
    assert Spread.of([-1.0, 0.0, 1.0]).relative_range == 0.0


def test_a_stored_spread_reads_back_by_key_not_by_position() -> None:
    spread = Spread.from_dict({"max": 9.0, "min": 1.0, "median": 4.0})
    assert (spread.low, spread.median, spread.high, spread.samples) == (1.0, 4.0, 9.0, ())


def test_spread_text_is_min_median_max_in_the_pattern_or_na() -> None:
    assert spread_text(Spread.of([1234.4, 2345.6, 999.0]), "{:,.0f}") == "999 / 1,234 / 2,346"
    assert spread_text(Spread.of([0.123, 0.456]), "{:.2f}") == "0.12 / 0.29 / 0.46"
    assert spread_text(None, "{:.2f}") == "n/a"


# --- the "noise:" line of `tuner tune` -----------------------------------------------------


def _confirmed(label: str, rps: list[float]) -> Confirmed:
    return Confirmed(Candidate(label, None, {}), runs=[measurement(r) for r in rps])


def test_noise_summary_reports_the_cpu_probe_range_over_the_study() -> None:
    probes = [[0, 4.0], [5, 5.0], [10, 4.2]]  # [trial number, ms]: the ms are the samples
    assert noise_summary(probes, []) == "CPU probe 4.0-5.0 ms (24% range over 3 probes)"


def test_noise_summary_reports_the_median_and_max_spread_of_repeated_configs() -> None:
    confirmed = [
        _confirmed("default", [100, 110, 90]),  # 20% range
        _confirmed("trial 3", [200, 260, 250]),  # 24%
        _confirmed("trial 5", [1000, 1500, 1000]),  # 50%
        _confirmed("one round", [700]),  # one run says nothing about noise: left out
        Confirmed(Candidate("failed", None, {}), failures=["server_start: no"]),  # no runs
    ]
    assert noise_summary([], confirmed) == (
        "repeats of one config varied 24% in req/s (median over 3 configs, max 50%)"
    )


def test_noise_summary_joins_both_and_says_when_nothing_was_measured() -> None:
    both = noise_summary([[0, 2.0], [5, 3.0]], [_confirmed("default", [100, 150])])
    assert both == (
        "CPU probe 2.0-3.0 ms (40% range over 2 probes); "
        "repeats of one config varied 40% in req/s (median over 1 configs, max 40%)"
    )
    too_few = noise_summary([[0, 2.0]], [_confirmed("default", [100])])
    assert too_few == "not measured (too few probes or rounds)"


def test_noise_summary_names_what_the_runs_cpus_lost() -> None:
    stolen = CoresGot(CoreShare(1, 0.18, 0.0), CoreShare(1, 0.0, 0.0))
    runs = [replace(measurement(100), cores=stolen), measurement(150)]
    confirmed = [Confirmed(Candidate("default", None, {}), runs=runs)]
    assert noise_summary([], confirmed) == (
        "repeats of one config varied 40% in req/s (median over 1 configs, max 40%); "
        "steal in those runs: server CPUs 18% (up to 18%)"
    )


# --- `tuner bench`: the result table -------------------------------------------------------


def _rows(table: object) -> dict[str, str]:
    """A two-column rich table as {row name: text}, as a terminal shows it."""
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(table)
    rows = {}
    for line in out.getvalue().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("│").split("│")]
        if len(cells) == 2 and cells[0]:
            rows[cells[0]] = cells[1]
    return rows


def test_bench_table_shows_the_figures_of_a_trustworthy_run() -> None:
    m = replace(
        measurement(1234.5, p99=8.0, pss=30.0),
        overall_rps=1200.25,
        requests=6172,
        duration_s=5.0,
        latency=Latency(1.0, 2.5, 8.0, 12.0, 40.0, 1.5),
        starved_connections=0,
        fairness_index=0.98,
        startup_s=0.42,
    )
    rows = _rows(result_table(m, "gunicorn", {"workers": 3, "threads": 4}))
    assert rows["throughput"] == "1,234.5 req/s (median of 1 s windows; overall 1,200.2)"
    assert rows["requests"] == "6,172 in 5.0 s"
    assert rows["latency"] == "p50 1.00  p90 2.50  p99 8.00  p99.9 12.00  max 40.00 ms"
    assert rows["starved connections"] == "0 of 64"
    assert rows["fairness"] == "0.98 (1 = every connection served alike)"
    assert (
        rows["memory (whole tree)"] == "PSS mean 30.0 MB  peak 30.0  USS peak 30.0  RSS peak 60.0"
    )
    assert rows["startup"] == "0.42 s"
    assert rows["load generator CPU"] == "20% (kernel 5%)"
    assert rows["verdict"] == "trustworthy"
    assert rows["settings"] == "workers=3 threads=4"
    assert "container limits" not in rows


def test_bench_table_flags_an_unfair_client_bound_run_and_leaves_out_what_was_not_seen() -> None:
    m = measurement(
        500,
        pss=None,
        unfair_reasons=("starved: 3 of 64",),
        client_bound=True,
        starved_connections=3,
        startup_s=None,
    )
    rows = _rows(result_table(m, "load", {}))
    assert rows["verdict"] == "client_bound, unfair"
    only_unfair = _rows(result_table(replace(m, client_bound=False), "load", {}))
    assert only_unfair["verdict"] == "unfair"
    assert rows["starved connections"] == "3 of 64"
    for absent in ("fairness", "memory (whole tree)", "startup", "settings"):
        assert absent not in rows, absent


def test_bench_table_shows_the_container_limits_and_what_they_cost() -> None:
    context = {
        "limits": Limits(cpus=1.5, memory_bytes=512 * 1024 * 1024).to_dict(),
        "cgroup": {"throttled_fraction": 0.37, "memory_peak_mb": 81.6},
    }
    rows = _rows(result_table(measurement(900), "gunicorn", {}, context))
    assert rows["container limits"] == (
        "1.5 CPUs, 512M memory; CPU-throttled in 37% of periods; memory peak 82 MB"
    )


# --- `tuner compare`: servers side by side ---------------------------------------------------


def _summary(label: str, rps: list[float], p99: list[float], pss: list[float]) -> ConfirmedSummary:
    return ConfirmedSummary(label, None, {}, Spread.of(rps), Spread.of(p99), Spread.of(pss))


def _row(server: str, default: ConfirmedSummary, tuned: ConfirmedSummary | None, **kw) -> ServerRow:
    fields = {"tuned_is_default": False, "config_file": None, "verdict": f"{server} verdict"}
    return ServerRow(server, f"{server}-study", default, tuned, **{**fields, **kw})


GUNICORN = _row(
    "gunicorn",
    _summary("default", [900, 1000, 1100], [8.0, 10.0, 12.0], [40.0, 40.0, 41.0]),
    _summary("trial 4", [2400, 2500, 2600], [4.0, 5.0, 6.0], [60.0, 60.0, 62.0]),
    config_file="/tmp/studies/g/gunicorn.conf.py",
)
UWSGI = _row(
    "uwsgi",
    _summary("default", [1900, 2000, 2100], [5.0, 6.0, 7.0], [30.0, 30.0, 30.0]),
    _summary("default", [1900, 2000, 2100], [5.0, 6.0, 7.0], [30.0, 30.0, 30.0]),
    tuned_is_default=True,
    config_file="/tmp/studies/u/uwsgi.ini",
)
WAITRESS = _row(
    "waitress", _summary("default", [500, 600, 700], [20.0, 22.0, 25.0], [20.0, 20.0, 20.0]), None
)


def test_compare_table_puts_each_servers_default_and_tuned_side_by_side() -> None:
    table = compare_table([GUNICORN, UWSGI, WAITRESS])
    assert table.rows == [
        ("gunicorn", "default", "900 / 1,000 / 1,100", "8.00 / 10.00 / 12.00")
        + ("40.0 / 40.0 / 41.0", "x1.00", "x1.00", "x1.00", "", "", ""),
        ("gunicorn", "tuned", "2,400 / 2,500 / 2,600", "4.00 / 5.00 / 6.00")
        + ("60.0 / 60.0 / 62.0", "x2.50", "x0.50", "x1.50", "", "", "gunicorn.conf.py"),
        ("uwsgi", "default", "1,900 / 2,000 / 2,100", "5.00 / 6.00 / 7.00")
        + ("30.0 / 30.0 / 30.0", "x1.00", "x1.00", "x1.00", "", "", ""),
        ("uwsgi", "tuned (= default)", "1,900 / 2,000 / 2,100", "5.00 / 6.00 / 7.00")
        + ("30.0 / 30.0 / 30.0", "x1.00", "x1.00", "x1.00", "", "", "uwsgi.ini"),
        ("waitress", "default", "500 / 600 / 700", "20.00 / 22.00 / 25.00")
        + ("20.0 / 20.0 / 20.0", "x1.00", "x1.00", "x1.00", "", "", ""),
        ("waitress", "tuned", "n/a", "n/a", "n/a", "", "", "", "", "", "no winner"),
    ]
    assert len(table.columns) == len(table.rows[0])
    assert table.notes == [
        "gunicorn: gunicorn verdict; file: /tmp/studies/g/gunicorn.conf.py",
        "uwsgi: uwsgi verdict; file: /tmp/studies/u/uwsgi.ini",
        "waitress: waitress verdict; file: none",
        "fastest tuned: gunicorn, x1.25 the req/s of tuned uwsgi (medians)",
    ]


def test_compare_table_names_the_runs_measured_twice_once_per_config() -> None:
    stolen = Repeat(
        2,
        Loss("server", CoreShare(1, 0.18, 0.0), LOSSY),
        Loss("server", CoreShare(1, 0.01, 0.0), LOSSY),
        False,
    )
    default = replace(UWSGI.default, label="uwsgi default", runs=3, repeats=(stolen,))
    # The tuned config is the default itself: its runs are the default's, said once.
    uwsgi = replace(UWSGI, default=default, tuned=default)
    notes = compare_table([GUNICORN, uwsgi]).notes
    said = [note for note in notes if "repeated" in note]
    assert said == [
        "server CPUs lost 18% to steal in 1 of 3 runs of uwsgi default "
        "(repeated, the cleaner run kept)"
    ]


def test_the_fastest_tuned_server_is_ranked_by_median_whatever_the_order() -> None:
    assert best_line([UWSGI, GUNICORN]) == best_line([GUNICORN, UWSGI])
    slower = replace(GUNICORN, tuned=_summary("trial 4", [1000, 1500, 9000], [1.0], [1.0]))
    # The highest max (9000) is not the fastest: the medians order them, and as the ranges
    # overlap, the line calls it a tie rather than a win.
    assert best_line([slower, UWSGI]) == (
        "fastest tuned: uwsgi and gunicorn tie on req/s (x1.33 on medians, inside the noise: "
        "their ranges overlap); the least memory among them: gunicorn (PSS 1.0 MB)"
    )
    assert best_line([GUNICORN, WAITRESS]) == "not enough tuned servers to rank"


def _at(server: str, rps: list[float], pss: float) -> ServerRow:
    """A server whose tuned config measured `rps` over the rounds and `pss` MB."""
    return _row(
        server,
        _summary("default", [100, 100, 100], [9.0], [pss]),
        _summary("trial 1", rps, [5.0], [pss]),
    )


def test_servers_inside_the_race_noise_tie_and_the_lightest_is_named() -> None:
    # Every server at the closed loop's ceiling (a wait-bound app): 1% apart with tight,
    # non-overlapping ranges. The race measured 10% of noise: inside it is no difference.
    rows = [
        _at("cheroot", [1234, 1269, 1269], 17.1),
        _at("granian", [1274, 1280, 1280], 38.2),
        _at("waitress", [1216, 1225, 1225], 11.8),
        _at("tornado", [74, 75, 75], 20.0),
    ]
    assert best_line(rows, noise=0.10) == (
        "fastest tuned: granian, cheroot and waitress tie on req/s (x1.04 on medians, inside "
        "the noise the race measured, 10%); the least memory among them: waitress (PSS 11.8 MB)"
    )
    # Without a race (--full) the ranges alone decide, and they do not overlap.
    assert best_line(rows) == "fastest tuned: granian, x1.01 the req/s of tuned cheroot (medians)"
    # Beyond the noise, the fastest is named, whatever the noise.
    assert best_line(rows, noise=0.005).startswith("fastest tuned: granian, x1.01")


def _busy(row: ServerRow, share: float, p50: float = 50.8) -> ServerRow:
    """`row` with its tuned config keeping `share` of its one CPU busy at `p50` ms."""
    assert row.tuned is not None
    busy = replace(row.tuned, cpu_busy=Spread.of([share]), of_cpus=1.0)
    return replace(row, tuned=replace(busy, latency_ms_median={"p50": p50}))


def test_a_tie_with_the_fastest_server_mostly_idle_is_called_the_load_ceiling() -> None:
    """A wait-bound app in a closed loop: 64 connections, each waiting about 50 ms for its
    answer, cannot ask more than about 1,260 req/s of any server; the fastest kept 7% of its
    CPU busy. The page says the tie is likely the load's, and how to rank them."""
    rows = [
        _busy(_at("cheroot", [1234, 1269, 1269], 17.1), 0.21),
        _busy(_at("granian", [1274, 1280, 1280], 38.2), 0.07),
        _busy(_at("waitress", [1216, 1225, 1225], 11.8), 0.61),
        _busy(_at("tornado", [74, 75, 75], 20.0), 0.04),
    ]
    assert ceiling_line(rows, 0.10, 64) == (
        "likely the load's ceiling, not the servers': granian kept 7% of its CPUs busy (the 3 "
        "that tie 7%-61%), and a closed loop's req/s is at most connections / latency (here "
        "64 / 50.8 ms p50 = 1,260); to rank them, raise --connections, or compare p99 at a "
        "fixed --rate (--objective latency)"
    )
    table = compare_table(rows, noise=0.10, connections=64)
    assert table.notes[-1].startswith("likely the load's ceiling")
    assert ceiling_line(rows, 0.10, None) == ""  # an open loop: its ceiling is the rate
    assert ceiling_line(rows, 0.005, 64) == ""  # nobody ties with granian
    busy = [_busy(rows[1], 0.95), *rows[:1], *rows[2:]]  # the fastest had no CPU to spare
    assert ceiling_line(busy, 0.10, 64) == ""
    unknown = [replace(rows[1], tuned=replace(rows[1].tuned, cpu_busy=None)), rows[0]]
    assert ceiling_line(unknown, 0.10, 64) == ""
    assert ceiling_line([_bound(rows[1]), rows[0]], 0.10, 64) == ""  # our limit, said apart
    assert not any(n.startswith("likely") for n in compare_table(busy, connections=64).notes)


def _bound(row: ServerRow) -> ServerRow:
    """`row` with its tuned config measured client_bound (the load generator was the limit)."""
    assert row.tuned is not None
    return replace(row, tuned=replace(row.tuned, client_bound=True))


def test_a_client_bound_server_is_marked_as_a_floor_and_no_fastest_is_named() -> None:
    # gunicorn's tuned req/s is the higher median, but our load generator capped it: it is
    # a floor for gunicorn, so neither "fastest" nor a ratio between the two may be said.
    bound = _bound(GUNICORN)
    table = compare_table([bound, UWSGI])
    tuned = next(r for r in table.rows if r[:2] == ("gunicorn", "tuned"))
    assert tuned[2] == ">= 2,400 / 2,500 / 2,600"
    assert tuned[5] == ">= x2.50"  # a floor over the measured default: a floor of the ratio
    default = next(r for r in table.rows if r[:2] == ("gunicorn", "default"))
    assert default[2] == "900 / 1,000 / 1,100"  # measured, not bound: unmarked
    verdict = table.notes[-1]
    assert verdict.startswith("no fastest tuned server named: gunicorn was client_bound")
    assert "--load-cpus" in verdict
    assert "x1.25" not in " ".join(table.notes)
    assert any(n.startswith("gunicorn tuned: client_bound") for n in table.notes)
    # The order of the rows does not matter, nor which of the two was the bound one.
    assert best_line([UWSGI, bound]) == verdict
    assert best_line([GUNICORN, _bound(UWSGI)]).startswith("no fastest tuned server named: uwsgi")
    # Without a bound figure, the same rows name the fastest as before.
    assert best_line([GUNICORN, UWSGI]).startswith("fastest tuned: gunicorn")


def test_a_bound_default_gives_no_ratio_against_it() -> None:
    row = replace(GUNICORN, default=replace(GUNICORN.default, client_bound=True))
    table = compare_table([row])
    tuned = next(r for r in table.rows if r[:2] == ("gunicorn", "tuned"))
    assert tuned[5] == "n/a (client_bound)"
    assert any(n.startswith("gunicorn default: client_bound") for n in table.notes)


def test_the_chart_hatches_client_bound_bars_and_says_why() -> None:
    chart = compare_chart([_bound(GUNICORN), UWSGI])
    assert "client_bound (gunicorn tuned)" in chart.caption
    assert "client_bound" not in compare_chart([GUNICORN, UWSGI]).caption


# --- `tuner report`: the study's tables ------------------------------------------------------


def _trial(number: int, rps: float, **extra: object) -> TrialRecord:
    return TrialRecord(number, "COMPLETE", {"workers": number}, measurement(rps), **extra)  # type: ignore[arg-type]


RESULT = {
    "confirmation": [
        ConfirmedSummary("default", 0, {}, Spread.of([90, 100, 110]), Spread.of([10.0]),
                         Spread.of([40.0])).to_json(),
        ConfirmedSummary("2*cpus+1", 1, {}, Spread.of([180, 200, 210]), Spread.of([5.0]),
                         Spread.of([80.0])).to_json(),
        ConfirmedSummary("trial 7", 7, {}, Spread.of([390, 400, 420]), Spread.of([2.5]),
                         Spread.of([60.0]), failures=("server_start: no",), unfair_runs=2, runs=3,
                         latency_ms_median={"p50": 1.0}).to_json(),
    ],
    "verdict": {"winner": "trial 7", "winner_trial": 7, "beats_default_beyond_noise": True,
                "summary": "trial 7 beats the default"},
    "noise": "CPU probe 4.0-5.0 ms (24% range over 3 probes)",
    "config_file": "/tmp/g.conf.py",
}  # fmt: skip


def _study(records: list[TrialRecord], result: dict | None = RESULT, **setup: object) -> StudyData:
    attrs = StudyAttrs(result=result)
    setup = {"server": "gunicorn", "app": "apps/hello.py", "objective": "throughput", **setup}
    return StudyData("s", "sqlite:///s.db", setup, attrs, records)


def test_a_stored_result_reads_back_its_verdict_and_says_whether_it_exists() -> None:
    result = StoredResult.from_json(RESULT)
    assert result.present and result.verdict is not None
    assert (result.verdict.winner, result.verdict.winner_trial) == ("trial 7", 7)
    assert result.verdict.beats_default
    assert [c.label for c in result.confirmation] == ["default", "2*cpus+1", "trial 7"]
    assert result.confirmation[2].rps == Spread(390, 400, 420, (390, 400, 420))
    assert result.noise.startswith("CPU probe")
    empty = StoredResult.from_json(None)
    assert not empty.present and empty.verdict is None and empty.confirmation == []


def test_trials_are_ranked_by_the_objective_with_the_ones_that_cannot_win_last() -> None:
    records = [
        _trial(0, 300, baseline="default"),
        _trial(1, 900, feasible=False, fail_reason="unfair: starved"),
        _trial(2, 500),
        TrialRecord(3, "FAIL", {}, fail_reason="server_start: boom"),
        _trial(4, 700),
        TrialRecord(5, "PRUNED", {"workers": 5}, measurement(10), fail_reason="pruned: median"),
        _trial(6, 800, feasible=False, fail_reason="p99 over the SLO"),
    ]
    data = _study(records, result=None)
    assert [r.number for r in data.ranked()] == [4, 2, 0, 1, 6]
    assert data.winner_trial() == 4  # no verdict stored: the best trial that could win
    latency = _study(records, result=None, objective="latency")
    assert latency.objective.name == "latency"
    top = tables.top_trials(data, tables.all_settings)
    assert [row[0] for row in top.rows] == ["4", "2", "0", "1", "6"]
    assert top.title == "Top trials (highest req/s first; unfair or SLO-violating last)"
    notes = {row[0]: row[-2] for row in top.rows}
    assert (notes["0"], notes["1"], notes["6"], notes["4"]) == (
        "default",
        "unfair",
        "violates SLO",
        "",
    )
    assert top.rows[0][1:3] == ("700", "3.33")  # req/s and p50 (p99 / 3 in the builder)
    failed = tables.failed_trials(data, tables.all_settings)
    assert failed.rows == [
        ("3", "fail", "server_start: boom", ""),
        ("5", "pruned", "pruned: median", "workers=5"),
    ]
    assert tables.summary_lines(data) == [
        "gunicorn serving apps/hello.py, objective throughput: 7 trials, 5 complete, "
        "2 failed or pruned.",
        "Concurrency models searched: sync: 6 trials, 1-6 processes.",
    ]


def test_a_stored_verdict_names_the_winner_and_its_contenders() -> None:
    data = _study([_trial(0, 100, baseline="default"), _trial(7, 400), _trial(8, 450)])
    assert data.winner_trial() == 7  # the verdict, not the fastest single trial (8)
    shown = contenders(data)
    assert [(c.label, c.trial, c.source) for c in shown] == [
        ("default", 0, "interleaved re-measurement"),
        ("2*cpus+1", 1, "interleaved re-measurement"),
        ("trial 7", 7, "interleaved re-measurement"),
    ]
    assert shown[2].rps == (390, 400, 420)
    assert shown[2].latency_ms == {"p50": 1.0}
    # Studies from before latency medians were kept: the trial's own percentiles.
    assert shown[0].latency_ms == {"p50": pytest.approx(10 / 3), "p90": 5.0, "p99": 10.0,
                                   "p999": 15.0}  # fmt: skip


def test_when_the_default_wins_the_best_searched_config_is_shown_beside_it() -> None:
    result = {**RESULT, "verdict": {**RESULT["verdict"], "winner": "default", "winner_trial": 0}}
    shown = contenders(_study([_trial(0, 100, baseline="default")], result=result))
    assert [c.label for c in shown] == ["default", "2*cpus+1", "trial 7"]


def test_without_confirmation_the_contenders_are_single_trials_with_unknown_percentiles() -> None:
    records = [
        _trial(0, 100, baseline="default"),
        _trial(1, 200, baseline="2*cpus+1"),
        _trial(2, 150),
        TrialRecord(3, "COMPLETE", {}, replace(measurement(900), latency=Latency(*[math.nan] * 6))),
    ]
    shown = contenders(_study(records, result=None))
    assert [(c.label, c.rps, c.source) for c in shown] == [
        ("default", (100, 100, 100), "one search trial"),
        ("2*cpus+1", (200, 200, 200), "one search trial"),
        ("trial 3", (900, 900, 900), "one search trial"),
    ]
    assert shown[2].latency_ms == {}  # nan percentiles are unknown, not zero
    # A baseline that is also the best trial is shown once.
    alone = contenders(_study([_trial(0, 500, baseline="default"), _trial(2, 150)], result=None))
    assert [c.label for c in alone] == ["default"]


def test_confirmation_and_baseline_tables_use_the_medians_against_both_baselines() -> None:
    data = _study([_trial(0, 100, baseline="default"), _trial(1, 200, baseline="2*cpus+1")])
    shown = tables.confirmation(data)
    assert shown.rows == [
        ("default", "0", "90 / 100 / 110", "10.00 / 10.00 / 10.00", "40.0 / 40.0 / 40.0", ""),
        ("2*cpus+1", "1", "180 / 200 / 210", "5.00 / 5.00 / 5.00", "80.0 / 80.0 / 80.0", ""),
        ("trial 7", "7", "390 / 400 / 420", "2.50 / 2.50 / 2.50", "60.0 / 60.0 / 60.0")
        + ("recommended, unfair, 1 failed run(s)",),
    ]
    assert shown.notes == [
        "verdict: trial 7 beats the default",
        "noise: CPU probe 4.0-5.0 ms (24% range over 3 probes)",
        "config file: /tmp/g.conf.py",
    ]
    ratios = tables.baselines(data)
    assert ratios.rows[2] == ("trial 7", "400", "x4.00", "x2.00", "2.50", "x0.25", "60.0", "x1.50")
    assert ratios.rows[0][2:4] == ("x1.00", "x0.50")
    unfinished = tables.confirmation(_study([], result=None))
    assert unfinished.rows == []
    assert unfinished.notes == [
        "the study has no confirmation round yet (interrupted or still running)"
    ]
    assert tables.baselines(_study([], result=None)).notes == ["no data"]


def test_a_confirmation_round_where_nothing_passed_is_told_apart_from_none() -> None:
    nothing_passed = _study([_trial(0, 100)], result={**RESULT, "verdict": None})
    assert nothing_passed.result.present and nothing_passed.result.verdict is None
    assert tables.summary_lines(nothing_passed)[1] == (
        "Verdict: no config passed the SLOs in the confirmation rounds."
    )
    assert tables.summary_lines(_study([_trial(0, 100)], result=None))[1:] == []
    assert (
        tables.summary_lines(_study([_trial(0, 100)]))[1] == "Verdict: trial 7 beats the default."
    )


def test_the_report_shows_the_recommended_trials_figures_per_template() -> None:
    slow = Latency(30.0, 31.0, 31.4, 32.0, 33.0, 30.5)
    fast = Latency(0.3, 0.5, 0.71, 0.9, 1.0, 0.4)
    mixed = measurement(
        400,
        templates=(
            TemplateFigures("GET /fast", 0.75, 300, 300.0, 0, fast),
            TemplateFigures("GET /slow/{int}", 0.25, 100, 100.0, 2, slow),
        ),
    )
    winner = TrialRecord(7, "COMPLETE", {}, mixed)
    other = TrialRecord(5, "COMPLETE", {}, replace(mixed, templates=()))
    table = tables.templates(_study([_trial(0, 100, baseline="default"), other, winner]))
    assert table is not None and table.title.startswith("Per template: trial 7")
    assert table.rows == [
        ("GET /fast", "75%", "300", "0.30", "0.71", "0"),
        ("GET /slow/{int}", "25%", "100", "30.00", "31.40", "2"),
    ]
    assert table in tables.study_tables(_study([winner]))
    # One request per load, or the winner not measured: no such table.
    assert tables.templates(_study([other], result={**RESULT, "verdict": {
        **RESULT["verdict"], "winner": "trial 5", "winner_trial": 5}})) is None  # fmt: skip


def test_a_raced_compare_says_who_reached_the_final_and_who_stopped_early_and_why() -> None:
    """gunicorn and uwsgi in the final, gunicorn stopped early (a compare stored before the
    top three never stopped), and waitress out of the final: its best config as the race's
    rounds measured it, no file."""
    stopped = "behind uwsgi by x3.1 after 6 trials, beyond the noise (10%)"
    raced = [
        replace(GUNICORN, trials=12),
        replace(UWSGI, trials=18),
        replace(
            WAITRESS,
            tuned=_summary("waitress trial 3", [600, 650, 700], [9.0], [20.0]),
            trials=6,
            stopped=stopped,
            finalist=False,
        ),
    ]
    table = compare_table(raced)
    labels = [row[1] for row in table.rows if row[0] == "waitress"]
    assert labels == ["default", "best of 6 trials (race rounds)"]
    assert table.notes[:2] == [
        "raced: in the final rounds: gunicorn (12 trials), uwsgi (18 trials)",
        f"waitress: stopped early: {stopped}",
    ]
    assert table.notes[-1] == "fastest tuned: gunicorn, x1.25 the req/s of tuned uwsgi (medians)"
    stopped_finalist = replace(raced[0], stopped=stopped)
    assert compare_table([stopped_finalist, *raced[1:]]).notes[0] == (
        "raced: in the final rounds: gunicorn (12 trials, stopped early), uwsgi (18 trials)"
    )
    lean = [
        raced[0],
        replace(UWSGI, trials=4, lean_final=2),
        replace(WAITRESS, trials=4, lean_final=3),
    ]
    assert compare_table(lean).notes[0] == (
        "raced: in the final rounds: gunicorn (12 trials), uwsgi (4 trials; its default and "
        "best in the final rounds, for the budget), waitress (4 trials; 3 configs, its "
        "default and best first in the final rounds, for the budget)"
    )


def test_a_full_compare_has_no_race_lines() -> None:
    assert not any(n.startswith("raced:") for n in compare_table([GUNICORN, UWSGI]).notes)


# --- the rule of a file sized at boot (tune --for-cpus) --------------------------------------


def test_a_sized_study_shows_its_rule_by_box_size_and_says_what_is_extrapolated() -> None:
    from tuner.machine.sizing import SizePoint, fit_rule

    rule = fit_rule(
        [SizePoint(0.5, 2, 4, 800.0), SizePoint(1.5, 4, 4, 2400.0)],
        [(2, 120.0), (4, 200.0)],
        "WEB_CONCURRENCY",
    )
    data = replace(
        _study([]), attrs=StudyAttrs(pick={"settings": {}, "header": [], "sizing": rule.to_dict()})
    )
    table = tables.sizing(data)
    assert table is not None and table.title == "Sized at boot"
    rows = {row[0]: row for row in table.rows}
    assert list(rows) == ["0.5", "1", "1.5", "2", "4", "8"]
    assert rows["0.5"] == ("0.5", "2 x 4", "800", "2 x 4", "measured")
    assert rows["1.5"][1:] == ("4 x 4", "2,400", "4 x 4", "measured")
    assert rows["1"][1:] == ("", "", "3 x 4", "between the sizes measured")
    assert rows["8"][3:] == ("17 x 4", "extrapolated")  # 2 x CPUs + 1
    assert any("extrapolated" in note for note in table.notes)
    assert tables.sizing(_study([])) is None  # fixed counts: no such table
    assert "Sized at boot" in [t.title for t in tables.study_tables(data)]


def test_a_sized_compare_shows_each_servers_rule_and_keeps_it_in_its_json() -> None:
    """compare --for-cpus: a table per server sized at boot, titled with its name; a server
    whose file has fixed counts (or none) has no such table, and its JSON says so."""
    from tuner.machine.sizing import SizePoint, SizingRule, fit_rule
    from tuner.report.compare_page import sized_tables

    rule = fit_rule(
        [SizePoint(0.5, 2, 1, 700.0), SizePoint(1.0, 3, 1, 1400.0)],
        [(2, 90.0), (3, 120.0)],
        "WEB_CONCURRENCY",
    )
    sized = replace(GUNICORN, sizing=rule)
    made = sized_tables([sized, UWSGI, WAITRESS])
    assert [table.title for table in made] == ["Sized at boot: gunicorn"]
    rows = {row[0]: row for row in made[0].rows}
    assert rows["0.5"][1:] == ("2 x 1", "700", "2 x 1", "measured")
    assert rows["1"][1:] == ("3 x 1", "1,400", "3 x 1", "measured")
    assert rows["2"][3:] == ("5 x 1", "extrapolated")  # 2 x CPUs + 1
    assert made[0].notes == rule.describe_lines()
    assert SizingRule.from_dict(sized.to_json()["sizing"]) == rule
    assert UWSGI.to_json()["sizing"] is None


def test_a_trial_line_names_its_state_once() -> None:
    pruned = TrialRecord(
        4, "PRUNED", {"workers": 2}, measurement(10), fail_reason="pruned: median 2,204.1 req/s"
    )
    assert record_line(pruned, {}).startswith("trial 4: pruned: median 2,204.1 req/s  ")
    failed = TrialRecord(5, "FAIL", {"workers": 3}, None, fail_reason="server crashed")
    assert record_line(failed, {}).startswith("trial 5: fail server crashed  ")
