"""The replay benchmark's surrogate (benchmarks/surrogate.py): grid lines parsed, a config mapped
to the nearest measured point of its concurrency model. Pure logic: no server."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks.surrogate import Surrogate, grid_axes, grid_points, missing, parse_grid
from tuner.errors import ConfigError
from tuner.servers import get_adapter

GRID = """\
== fib on gunicorn
  grid 1/6 {'workers': 1, 'worker_class': 'sync'}: 4,000 req/s
  grid 2/6 {'workers': 3, 'worker_class': 'sync'}: 5,000 req/s
  grid 3/6 {'workers': 1, 'worker_class': 'gthread', 'threads': 2}: 3,000 req/s
  grid 4/6 {'workers': 1, 'worker_class': 'gthread', 'threads': 8}: 3,600 req/s
  grid 5/6 {'workers': 3, 'worker_class': 'gthread', 'threads': 8}: excluded (failed/unfair/errors)
  grid 6/6 {'workers': 1, 'worker_class': 'gevent', 'worker_connections': 100}: excluded (x)
    failed: gunicorn exited
  grid winner: grid #2 {'workers': 3}
"""


@pytest.fixture
def surrogate() -> Surrogate:
    adapter = get_adapter("gunicorn")
    _app, rows = parse_grid(GRID)
    return Surrogate(adapter, grid_points(adapter, rows))


def resolved(**values: object) -> dict:
    return get_adapter("gunicorn").resolve(values)


def test_grid_lines_parse_with_their_rates_and_exclusions() -> None:
    app, rows = parse_grid(GRID)
    assert app == "fib"
    assert [r.index for r in rows] == [1, 2, 3, 4, 5, 6]
    assert missing(rows) == 0 and missing(rows[:4]) == 2
    assert rows[1].settings == {"workers": 3, "worker_class": "sync"}
    assert [r.rps for r in rows] == [4000.0, 5000.0, 3000.0, 3600.0, None, None]


def test_a_grid_line_whose_config_is_not_a_dict_is_refused() -> None:
    with pytest.raises(ConfigError, match="not a dict"):
        parse_grid("  grid 1/1 {'workers': oops}: 1 req/s\n")


def test_the_axes_are_the_numeric_settings_the_grid_varies(surrogate: Surrogate) -> None:
    assert surrogate.axes == ("workers", "threads", "worker_connections")
    assert grid_axes(surrogate.grid) == surrogate.axes


def test_a_config_maps_to_the_nearest_point_of_its_own_model(surrogate: Surrogate) -> None:
    answer = surrogate.answer(resolved(worker_class="sync", workers=4))
    assert (answer.rps, answer.sources, answer.model) == (5000.0, ("grid #2",), "sync")
    # gthread with 3 workers is nearer grid #3/#4 than any sync point: the model decides first.
    assert surrogate.answer(resolved(worker_class="gthread", threads=2)).rps == 3000.0


def test_equally_near_points_are_averaged_geometrically(surrogate: Surrogate) -> None:
    answer = surrogate.answer(resolved(worker_class="gthread", threads=4))  # log2 4: 1 from both
    assert answer.sources == ("grid #3", "grid #4")
    assert answer.rps == pytest.approx(math.sqrt(3000 * 3600))


def test_settings_off_the_grid_axes_do_not_change_the_value(surrogate: Surrogate) -> None:
    plain = surrogate.answer(resolved(worker_class="sync", workers=3))
    other = surrogate.answer(
        resolved(worker_class="sync", workers=3, accesslog=True, http_parser="python")
    )
    assert plain == other


def test_a_config_nearest_an_excluded_point_is_unfair_at_the_nearest_measured_value(
    surrogate: Surrogate,
) -> None:
    answer = surrogate.answer(resolved(worker_class="gthread", threads=8, workers=4))
    assert not answer.fair and answer.value is None
    assert (answer.rps, answer.sources) == (3600.0, ("grid #4",))


def test_a_model_without_a_measurement_reports_the_grid_median(surrogate: Surrogate) -> None:
    answer = surrogate.answer(resolved(worker_class="gevent", worker_connections=100))
    assert answer.rps == 3800.0  # median of 4000, 5000, 3000, 3600
    assert answer.value is None and not answer.fair  # its only grid point was excluded


def test_the_best_branch_is_the_model_of_the_grids_best_point(surrogate: Surrogate) -> None:
    assert (surrogate.best().model, surrogate.best().rps) == ("sync", 5000.0)
    assert surrogate.branch_best() == {"sync": 5000.0, "gthread": 3600.0}


def test_a_grid_with_nothing_measured_is_refused() -> None:
    adapter = get_adapter("gunicorn")
    _app, rows = parse_grid("  grid 1/1 {'workers': 1}: excluded (failed)\n")
    with pytest.raises(ConfigError, match="excluded"):
        Surrogate(adapter, grid_points(adapter, rows))


def test_a_replayed_study_runs_the_tuners_study_code_with_branch_starts(
    surrogate: Surrogate, tmp_path: Path
) -> None:
    from benchmarks.branch_starts import base_setup, in_memory_storage, replay_study

    with in_memory_storage():
        setup = base_setup("gunicorn", "fib", tmp_path, duration=2.0)
        on = replay_study(setup, surrogate, seed=1, on=True, trials=8, sigma=0.1)
        off = replay_study(setup, surrogate, seed=1, on=False, trials=8, sigma=0.1)
    # Both baselines are sync; then one start per model the baselines miss, in the order
    # tuner.search.branches draws them.
    assert on.models[:2] == ("sync", "sync")
    assert set(on.models[2:4]) == {"gthread", "gevent"}
    assert on.to_best_branch == 1  # the grid's best branch is sync: the default is in it
    assert on.measured <= 8 and off.measured <= 8
    assert off.models[:2] == ("sync", "sync")


def test_a_kept_study_gives_its_fair_measured_trials_and_its_noise(tmp_path: Path) -> None:
    import optuna

    from benchmarks.surrogate import confirmation_noise, study_points
    from tests.support.measurements import measurement

    db = tmp_path / "studies.db"
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{db}", direction="maximize")
    study.set_user_attr("setup", {"server": "gunicorn", "app": "apps/fib.py"})
    rounds = [{"rps": {"min": 900.0, "median": 1000.0, "max": 900.0 * math.e**0.3386}}]
    study.set_user_attr("result", {"confirmation": rounds})
    trials = [
        ({"worker_class": "gthread", "threads": 4}, measurement(2000.0), {}),
        ({"worker_class": "sync"}, measurement(1500.0, unfair_reasons=("x",)), {}),
        ({"worker_class": "sync"}, measurement(1600.0), {"duplicate_of": 0}),
    ]
    for settings, figures, extra in trials:
        trial = study.ask()
        attrs = {"settings": settings, "metrics": figures.to_json(), **extra}
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        study.tell(trial, figures.median_rps)
    points = study_points(get_adapter("gunicorn"), db)
    assert [(p.model, p.rps, p.source) for p in points] == [("gthread", 2000.0, "study trial 0")]
    assert study_points(get_adapter("uwsgi"), db) == []  # another server's study
    assert study_points(get_adapter("gunicorn"), db, app="iowait") == []  # another app's
    with_unfair = study_points(get_adapter("gunicorn"), db, app="fib", keep_unfair=True)
    assert [(p.model, p.rps) for p in with_unfair] == [("gthread", 2000.0), ("sync", None)]
    assert confirmation_noise(db, "gunicorn") == pytest.approx(0.2, abs=1e-3)
    assert confirmation_noise(db, "uwsgi") is None


def test_the_space_reaches_a_config_by_the_settings_the_surrogate_looks_at(
    surrogate: Surrogate, tmp_path: Path
) -> None:
    from benchmarks.branch_starts import base_setup, space_reach

    setup = base_setup("gunicorn", "fib", tmp_path, duration=2.0)
    reach = space_reach(setup, surrogate)
    assert reach(resolved(worker_class="sync", workers=3))  # threads=1 is inactive for sync
    assert reach(resolved(worker_class="gthread", workers=3, threads=4))  # keepalive=2 aside
    assert not reach(resolved(worker_class="sync", workers=4 * setup.space_cpus + 2))
    assert not reach(resolved(worker_class="gthread", workers=1, threads=64))


def test_a_setting_the_grid_varies_that_is_no_number_must_match() -> None:
    adapter = get_adapter("werkzeug")
    _app, rows = parse_grid(
        "  grid 1/4 {'mode': 'threaded', 'request_log': True, 'backlog': 128}: 2,000 req/s\n"
        "  grid 2/4 {'mode': 'threaded', 'request_log': False, 'backlog': 128}: 3,000 req/s\n"
        "  grid 3/4 {'mode': 'single', 'request_log': True, 'backlog': 128}: 1,000 req/s\n"
        "  grid 4/4 {'mode': 'single', 'request_log': False, 'backlog': 128}: excluded (x)\n"
    )
    surrogate = Surrogate(adapter, grid_points(adapter, rows))
    assert surrogate.keys == ("mode", "request_log")
    quiet = adapter.resolve({"mode": "threaded", "request_log": False, "backlog": 1024})
    assert surrogate.answer(quiet).rps == 3000.0  # not averaged with the logging point
    single = surrogate.answer(adapter.resolve({"mode": "single", "request_log": False}))
    assert (single.rps, single.fair) == (1000.0, False)  # its match was excluded
