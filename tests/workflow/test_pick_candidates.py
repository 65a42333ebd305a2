"""Candidate picking for the confirmation rounds (pure logic, no server): the objective decides
the ranking, unusable trials never qualify, the baselines always come first."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.measurements import measurement
from tuner.cli import build_parser
from tuner.commands.setup import build_setup
from tuner.commands.tune_options import TuneOptions
from tuner.search.records import TrialRecord
from tuner.search.study import StudySetup
from tuner.workflow.tune_steps import pick_candidates

REPO = Path(__file__).resolve().parents[2]


def _setup(tmp_path: Path, objective: str) -> StudySetup:
    args = build_parser().parse_args(
        ["tune", str(REPO / "apps/hello.py"), "--server", "gunicorn", "--objective", objective]
        + ["--storage", f"sqlite:///{tmp_path}/s.db"]
    )
    return build_setup(TuneOptions.from_args(args))


def _trial(number: int, rps: float, p99: float, **extra: object) -> TrialRecord:
    figures = measurement(rps, p99=p99)
    return TrialRecord(number, "COMPLETE", {"workers": number + 10}, figures, **extra)  # type: ignore[arg-type]


RECORDS = [
    _trial(2, rps=900, p99=30.0),  # fastest
    _trial(3, rps=500, p99=4.0),  # lowest tail
    _trial(4, rps=9000, p99=1.0, feasible=False),  # unfair or over an SLO: never picked
    _trial(5, rps=700, p99=9.0),
]


@pytest.mark.parametrize(("objective", "expected"), [("throughput", [2, 5]), ("latency", [3, 5])])
def test_the_objective_ranks_the_usable_trials(
    tmp_path: Path, objective: str, expected: list[int]
) -> None:
    picked = pick_candidates(_setup(tmp_path, objective), RECORDS, top_k=2, pareto=[])
    assert [c.label for c in picked[:2]] == ["default", "2*cpus+1"]
    assert [c.trial_number for c in picked[2:]] == expected


def test_a_searched_config_equal_to_a_baseline_gives_its_place_to_the_next(
    tmp_path: Path,
) -> None:
    setup = _setup(tmp_path, "throughput")
    rule = dict(setup.adapter.baselines(setup.cpus)[1].values)  # the 2*cpus+1 rule's settings
    records = [
        TrialRecord(6, "COMPLETE", rule, measurement(5000, p99=2.0)),  # fastest, but a baseline
        TrialRecord(7, "COMPLETE", {**rule}, measurement(4000, p99=2.0)),  # the same again
        *RECORDS,
    ]
    picked = pick_candidates(setup, records, top_k=2, pareto=[])
    assert [c.label for c in picked[:2]] == ["default", "2*cpus+1"]
    assert [c.trial_number for c in picked[2:]] == [2, 5]


def _top(settings: dict[str, object]) -> list[TrialRecord]:
    return [TrialRecord(8, "COMPLETE", settings, measurement(5000, p99=2.0))]  # type: ignore[arg-type]


def test_the_top_config_is_also_measured_with_only_its_concurrency_changed(
    tmp_path: Path,
) -> None:
    setup = _setup(tmp_path, "throughput")
    top = {
        "workers": 5,
        "worker_class": "gevent",
        "worker_connections": 2000,
        "backlog": 4096,
        "accesslog": True,
    }
    picked = pick_candidates(setup, _top(top), top_k=1, pareto=[])
    labels = [c.label for c in picked]
    assert labels == [
        "default",
        "2*cpus+1",
        "trial 8",
        "trial 8, default logging",
        "trial 8, other settings at default",
    ]
    defaults = setup.adapter.resolve({})
    lean = picked[-1].settings
    changed = {k: v for k, v in lean.items() if defaults[k] != v}
    # The process count and the worker class make its concurrency; the rest goes back.
    assert changed == {"workers": 5, "worker_class": "gevent"}
    assert picked[-1].trial_number == 8


def test_no_lean_variant_when_the_top_config_changes_only_its_concurrency(
    tmp_path: Path,
) -> None:
    setup = _setup(tmp_path, "throughput")
    picked = pick_candidates(
        setup, _top({"workers": 4, "worker_class": "gthread", "threads": 8}), top_k=1, pareto=[]
    )
    assert [c.label for c in picked] == ["default", "2*cpus+1", "trial 8"]


def test_a_setting_the_concurrency_model_needs_is_kept(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["tune", str(REPO / "apps/hello.py"), "--server", "uwsgi"]
        + ["--storage", f"sqlite:///{tmp_path}/s.db"]
    )
    setup = build_setup(TuneOptions.from_args(args))
    defaults = setup.adapter.resolve({})
    top = {
        "processes": 3,
        "gevent": 100,
        "listen": 1024,
        "max-requests": 5000,
        "master": True,
        "disable-logging": True,
    }
    picked = pick_candidates(setup, _top(top), top_k=1, pareto=[])
    lean = picked[-1]
    assert lean.label == "trial 8, other settings at default"
    changed = {k: v for k, v in lean.settings.items() if defaults[k] != v}
    assert changed == {"processes": 3, "gevent": 100}


@pytest.mark.timeout(20)
def test_a_setting_the_bind_decides_does_not_revert(tmp_path: Path) -> None:
    # Behind uwsgi_pass gunicorn runs keepalive 0 and protocol uwsgi whatever the table's
    # default says: reverting them changes nothing, and must not loop for ever.
    args = build_parser().parse_args(
        ["tune", str(REPO / "apps/hello.py"), "--server", "gunicorn", "--front", "nginx"]
        + ["--storage", f"sqlite:///{tmp_path}/s.db"]
    )
    setup = build_setup(TuneOptions.from_args(args))
    top = {"front_protocol": "uwsgi", "workers": 4, "worker_class": "gthread", "threads": 4}
    top["max_requests"] = 1000
    picked = pick_candidates(setup, _top(setup.adapter.resolve(top)), top_k=1, pareto=[])
    lean = picked[-1]
    assert lean.label == "trial 8, other settings at default"
    assert (lean.settings["protocol"], lean.settings["keepalive"]) == ("uwsgi", 0)
    assert lean.settings["max_requests"] == setup.adapter.resolve({})["max_requests"]


def _uneven(number: int, rps: float, index: float, **changes: object) -> TrialRecord:
    """A trial judged unfair by its fairness index alone (no connection starved)."""
    unfair = measurement(
        rps,
        p99=2.0,
        fairness_index=index,
        unfair_reasons=(f"unequal_share: fairness index {index:.2f} (< 0.9)",),
        **changes,
    )
    return TrialRecord(number, "COMPLETE", {"workers": number}, unfair, feasible=False)


def test_a_nearly_fair_trial_faster_than_the_picks_is_measured_again(tmp_path: Path) -> None:
    # gunicorn hello at stop 24: 1 gevent worker measured 0.89 in its one trial and was fair in
    # the grid's runs; a single run at the line must not rule the fastest config out.
    setup = _setup(tmp_path, "throughput")
    records = [*RECORDS, _uneven(6, rps=1200, index=0.89), _uneven(7, rps=1500, index=0.60)]
    picked = pick_candidates(setup, records, top_k=2, pareto=[])
    assert [c.trial_number for c in picked[2:]] == [2, 5, 6]


@pytest.mark.parametrize(
    "trial",
    [
        _uneven(6, rps=600, index=0.89),  # slower than the best fair trial: nothing to learn
        _uneven(6, rps=1200, index=0.80),  # clearly uneven
        _uneven(6, rps=1200, index=0.89, starved_connections=3),  # some got nothing
        _uneven(6, rps=1200, index=0.89, error_rate=0.2),  # over the error SLO anyway
    ],
    ids=["slower", "clearly-uneven", "starved", "errors"],
)
def test_no_retry_for_a_trial_that_is_slower_or_clearly_unfair(
    tmp_path: Path, trial: TrialRecord
) -> None:
    picked = pick_candidates(_setup(tmp_path, "throughput"), [*RECORDS, trial], 2, pareto=[])
    assert [c.trial_number for c in picked[2:]] == [2, 5]


def test_a_config_that_logs_every_request_is_also_measured_quiet(tmp_path: Path) -> None:
    # uWSGI logs a line per request by default; the uWSGI hello grid's best turned it off.
    args = build_parser().parse_args(
        ["tune", str(REPO / "apps/hello.py"), "--server", "uwsgi"]
        + ["--storage", f"sqlite:///{tmp_path}/s.db"]
    )
    setup = build_setup(TuneOptions.from_args(args))
    picked = pick_candidates(setup, _top({"processes": 3, "threads": 8}), top_k=1, pareto=[])
    quiet = {c.label: c.settings for c in picked if c.label.endswith(", logging off")}
    assert quiet == {
        "trial 8, logging off": setup.adapter.resolve(
            {"processes": 3, "threads": 8, "disable-logging": True}
        ),
        # The uWSGI fib grid's best was the default with its request log off.
        "default, logging off": setup.adapter.resolve({"disable-logging": True}),
    }


def test_no_quiet_variant_where_the_default_is_quiet(tmp_path: Path) -> None:
    setup = _setup(tmp_path, "throughput")  # gunicorn: no access log by default
    picked = pick_candidates(setup, _top({"workers": 4, "accesslog": True}), 1, pareto=[])
    assert [c.label for c in picked] == [
        "default",
        "2*cpus+1",
        "trial 8",
        "trial 8, default logging",
    ]


def test_a_trial_as_fast_within_the_noise_with_a_far_lower_tail_is_measured_again(
    tmp_path: Path,
) -> None:
    # granian WSGI on TechEmpower's /db: the top trials by req/s all queue requests behind
    # their threads; one as fast within one run's noise holds a tenth of their p99.
    records = [
        _trial(2, rps=2700, p99=260.0),
        _trial(5, rps=2650, p99=250.0),
        _trial(6, rps=2500, p99=30.0),  # 7% behind the best: one run cannot tell
        _trial(7, rps=1500, p99=5.0),  # lower still, but far behind: not worth a run
    ]
    picked = pick_candidates(_setup(tmp_path, "throughput"), records, top_k=2, pareto=[])
    assert [c.trial_number for c in picked[2:5]] == [2, 5, 6]


def test_no_tail_trial_when_the_shortlist_already_holds_a_low_tail(tmp_path: Path) -> None:
    records = [
        _trial(2, rps=2700, p99=32.0),
        _trial(5, rps=2650, p99=250.0),
        _trial(6, rps=2500, p99=30.0),  # lower than trial 2's by less than the noise
    ]
    setup = _setup(tmp_path, "throughput")
    picked = pick_candidates(setup, records, top_k=2, pareto=[])
    assert 6 not in [c.trial_number for c in picked]
    latency = pick_candidates(_setup(tmp_path, "latency"), records, top_k=1, pareto=[])
    assert [c.trial_number for c in latency[2:3]] == [6]  # ranked on p99 already


def _uwsgi_setup(tmp_path: Path, objective: str) -> StudySetup:
    args = build_parser().parse_args(
        ["tune", str(REPO / "apps/hello.py"), "--server", "uwsgi", "--objective", objective]
        + ["--rate", "500", "--storage", f"sqlite:///{tmp_path}/s.db"]
    )
    return build_setup(TuneOptions.from_args(args))


def test_each_front_point_is_also_measured_with_its_threads_at_the_default(
    tmp_path: Path,
) -> None:
    # uWSGI on fib: the study's front kept 2 processes x 8 threads, where 2 processes alone
    # were as fast for less memory and never measured beside it.
    records = [
        TrialRecord(2, "COMPLETE", {"processes": 2, "threads": 8}, measurement(900, p99=2.0)),
        TrialRecord(3, "COMPLETE", {"processes": 4, "threads": 4}, measurement(900, p99=1.5)),
        TrialRecord(4, "COMPLETE", {"processes": 5}, measurement(900, p99=1.0)),
    ]
    setup = _uwsgi_setup(tmp_path, "multi")
    picked = pick_candidates(setup, records, top_k=3, pareto=[2, 3, 4])
    resolved = [setup.adapter.resolve(c.settings) for c in picked]
    threads = [(r["processes"], r["threads"]) for r in resolved]
    assert (2, 8) in threads and (2, 1) in threads
    assert (4, 4) in threads and (4, 1) in threads
    variants = [c.trial_number for c in picked if c.label.endswith("threads at default")]
    assert sorted(variants) == [2, 3]  # trial 4's threads are the default's already


def test_each_front_point_is_also_measured_with_only_its_concurrency_changed(
    tmp_path: Path,
) -> None:
    # granian on the DB app: the front's point set four settings that did nothing beside its
    # thread count, and the grid's point was that thread count alone; only the single pick's
    # top config had its lean variant measured.
    records = [
        TrialRecord(2, "COMPLETE", {"processes": 2, "thunder-lock": True}, measurement(900, 2.0)),
        TrialRecord(3, "COMPLETE", {"processes": 4, "listen": 1024}, measurement(900, p99=1.5)),
        TrialRecord(4, "COMPLETE", {"processes": 5}, measurement(900, p99=1.0)),
    ]
    setup = _uwsgi_setup(tmp_path, "multi")
    defaults = setup.adapter.resolve({})
    picked = pick_candidates(setup, records, top_k=3, pareto=[2, 3, 4])
    lean = {c.trial_number: c for c in picked if c.label.endswith("other settings at default")}
    assert sorted(lean) == [2, 3]  # trial 4 changes only its processes
    for number, processes in ((2, 2), (3, 4)):
        assert setup.adapter.resolve(lean[number].settings) == {**defaults, "processes": processes}


def test_no_threads_variant_outside_the_front(tmp_path: Path) -> None:
    records = [
        TrialRecord(2, "COMPLETE", {"processes": 2, "threads": 8}, measurement(900, p99=2.0)),
        TrialRecord(3, "COMPLETE", {"processes": 4, "threads": 4}, measurement(800, p99=1.5)),
    ]
    setup = _uwsgi_setup(tmp_path, "throughput")
    picked = pick_candidates(setup, records, top_k=2, pareto=[])
    resolved = [setup.adapter.resolve(c.settings) for c in picked]
    assert (4, 1) not in [(r["processes"], r["threads"]) for r in resolved]


def test_the_tail_trial_is_sought_within_the_studys_measured_noise(tmp_path: Path) -> None:
    records = [
        _trial(2, rps=2700, p99=260.0),
        _trial(5, rps=2650, p99=250.0),
        _trial(6, rps=1800, p99=20.0),  # 33% behind: past the floor, inside a 40% noise
    ]
    setup = _setup(tmp_path, "throughput")
    floor = pick_candidates(setup, records, top_k=2, pareto=[])
    assert 6 not in [c.trial_number for c in floor]
    noisy = pick_candidates(setup, records, top_k=2, pareto=[], noise=0.40)
    assert [c.trial_number for c in noisy[2:5]] == [2, 5, 6]
