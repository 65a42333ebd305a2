"""What one server's runs say about the app's concurrency, and the starts it gives the next
server (tuner/search/carryover.py): pure logic on constructed measurements."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.measurements import measurement
from tuner.cli import build_parser
from tuner.commands.setup import build_setup
from tuner.commands.tune_options import TuneOptions
from tuner.metrics.measurement import Measurement, ServerCpu
from tuner.search.attrs import TrialAttrs
from tuner.search.branches import RandomDraw, Replay
from tuner.search.carryover import (
    RequestShape,
    Sample,
    carried_starts,
    shape_of,
    with_concurrency,
)
from tuner.search.space import SearchSpace, default_space_path, load_space, suggest
from tuner.search.study import open_study
from tuner.servers import get_adapter
from tuner.servers.base import ServerAdapter
from tuner.settings import Value


def run(rps: float, busy: float, mean_ms: float, of_cpus: float = 1.0) -> Measurement:
    m = measurement(rps, server_cpu=ServerCpu(busy, of_cpus))
    return replace(m, latency=replace(m.latency, mean_ms=mean_ms))


def test_a_cpu_bound_app_wants_a_request_per_cpu() -> None:
    """One worker, its CPU busy all the time, 100 req/s: 10 ms of CPU per request, and the
    request holds its worker 10 ms (Little's law), though 64 clients queue 640 ms for it."""
    shape = shape_of([Sample(run(100, 1.0, 640.0), slots=1, connections=64)])
    assert shape is not None
    assert shape.cpu_s == pytest.approx(0.010) and shape.held_s == pytest.approx(0.010)
    assert shape.waiting == pytest.approx(0.0)
    assert shape.concurrency(1, 64) == 1
    assert shape.concurrency(2, 64) == 2


def test_a_waiting_app_wants_as_many_as_it_waits_for() -> None:
    """50 ms of waiting for 0.5 ms of CPU: a hundred requests at once keep a CPU busy, and no
    more than the load's connections are ever in flight."""
    shape = shape_of([Sample(run(20, 0.01, 3200.0), slots=1, connections=64)])
    assert shape is not None
    assert shape.held_s == pytest.approx(0.050) and shape.waiting == pytest.approx(0.99)
    assert shape.concurrency(1, 1000) == 100
    assert shape.concurrency(1, 64) == 64


def test_the_least_queued_run_gives_the_estimate() -> None:
    """Sixteen threads sharing one CPU hold each request longer (53 ms) than the app's own
    50 ms; the run with the shortest hold is the one least inflated by queueing for the CPU.
    A run with errors (fast failures) or without the server's CPU is not read."""
    samples = [
        Sample(run(300, 0.2, 210.0), slots=16, connections=64),
        Sample(run(20, 0.01, 3200.0), slots=1, connections=64),
        Sample(replace(run(900, 0.05, 1.0), error_rate=0.5), slots=1, connections=64),
        Sample(replace(run(900, 0.05, 1.0), server_cpu=None), slots=1, connections=64),
    ]
    shape = shape_of(samples)
    assert shape is not None and shape.held_s == pytest.approx(0.050)
    assert shape_of(samples[2:]) is None


def test_the_measured_latency_caps_the_hold_where_slots_outnumber_clients() -> None:
    """64 threads for 16 connections: only 16 requests are ever in flight."""
    shape = shape_of([Sample(run(320, 0.1, 50.0), slots=64, connections=16)])
    assert shape is not None and shape.held_s == pytest.approx(0.050)


def test_a_run_that_kept_its_cpus_busy_caps_the_estimate() -> None:
    """Four threads of one process on a CPU-bound app: each request holds its thread 4x its
    CPU time, queued for the GIL, which looks like waiting (x4 on 1 CPU). The same run kept its
    CPU busy, so four per CPU were enough; one process per request, busy too, says one."""
    threads = Sample(run(400, 0.97, 160.0), slots=4, connections=64, processes=1)
    shape = shape_of([threads])
    assert shape is not None and shape.waiting == pytest.approx(0.75, abs=0.01)
    assert shape.busy_at == 4 and shape.concurrency(2, 64) == 8
    one = Sample(run(100, 1.0, 640.0), slots=1, connections=64, processes=1)
    shape = shape_of([threads, one])
    assert shape is not None and shape.busy_at == 1 and shape.concurrency(2, 64) == 2


def test_a_run_that_left_its_cpus_idle_caps_nothing() -> None:
    """The waiting app's run: 64 threads, a fifth of a CPU busy."""
    shape = shape_of([Sample(run(1240, 0.2, 52.0), slots=64, connections=64, processes=1)])
    assert shape is not None and shape.busy_at is None
    assert shape.concurrency(1, 64) == 64


def test_a_request_never_holds_a_slot_shorter_than_its_cpu_time() -> None:
    shape = RequestShape(cpu_s=0.01, held_s=0.01)
    assert shape.waiting == 0.0 and shape.concurrency(4, 64) == 4


def _space(server: str) -> tuple[ServerAdapter, SearchSpace]:
    """The server's adapter and its shipped space."""
    adapter = get_adapter(server)
    return adapter, load_space(default_space_path(server), adapter.table, server)


def _settings(space: SearchSpace, params: Mapping[str, Value]) -> dict[str, Value]:
    """What a start (params by name) runs, as settings."""
    return suggest(space, Replay(dict(params), RandomDraw(random.Random(0))), 2)


def test_a_forking_threaded_start_gets_a_process_per_cpu_and_the_threads_for_the_rest() -> None:
    adapter, space = _space("gunicorn")
    gthread = {"worker_class": "gthread", "workers": 5, "threads": 2}
    moved = with_concurrency(space, adapter, 2, gthread, 40, slot_models={"sync"})
    assert moved is not None
    settings = _settings(space, moved)
    assert settings["workers"] == 2 and settings["threads"] == 20
    assert adapter.concurrency_model(adapter.resolve(settings)) == "gthread"


def test_a_process_per_request_default_gets_its_processes_within_the_space() -> None:
    """gunicorn's sync default on 2 CPUs, for 64 requests at once: its space stops at
    4 x cpus + 1 = 9 workers. For a CPU-bound app (2 at once), 2 workers."""
    adapter, space = _space("gunicorn")
    default = {p.name: adapter.resolve({})[p.setting] for p in space.params}
    for target, workers in ((64, 9), (2, 2)):
        moved = with_concurrency(space, adapter, 2, default, target, slot_models={"sync"})
        assert moved is not None and _settings(space, moved)["workers"] == workers


def test_a_greenlet_start_is_left_as_drawn() -> None:
    """gevent serves more requests than its processes: its worker count is not a concurrency."""
    adapter, space = _space("gunicorn")
    gevent = {"worker_class": "gevent", "workers": 3, "worker_connections": 500}
    assert with_concurrency(space, adapter, 2, gevent, 64, slot_models={"sync"}) is None


def test_a_one_process_threaded_server_gets_threads() -> None:
    adapter, space = _space("waitress")
    default = {p.name: adapter.resolve({})[p.setting] for p in space.params}
    models = {adapter.concurrency_model(b.values) for b in adapter.baselines(2)}
    moved = with_concurrency(space, adapter, 2, default, 24, slot_models=models)
    assert moved is not None
    assert adapter.threads(adapter.resolve(_settings(space, moved))) == 24


def test_the_starts_carry_the_default_and_every_branch_once() -> None:
    adapter, space = _space("gunicorn")
    default = {p.name: adapter.resolve({})[p.setting] for p in space.params}
    starts = [
        {"worker_class": "gthread", "workers": 1, "threads": 16},
        {"worker_class": "gevent", "workers": 1, "worker_connections": 1000},
    ]
    carried = carried_starts(space, adapter, 2, default, starts, 2, slot_models={"sync"})
    models = [adapter.concurrency_model(adapter.resolve(_settings(space, p))) for p, _ in carried]
    assert models == ["sync", "gthread", "gevent"]
    assert _settings(space, carried[1][0])["threads"] == 2  # 2 workers x 2 threads: the lowest
    assert carried[2] == (starts[1], False)  # greenlets: queued as drawn, not said to be moved
    assert [moved for _, moved in carried] == [True, True, False]
    # The default already at the target: not queued again (it is the baseline).
    one = carried_starts(space, adapter, 1, default, starts, 1, slot_models={"sync"})
    assert [adapter.concurrency_model(adapter.resolve(_settings(space, p))) for p, _ in one] == [
        "gthread",
        "gevent",
    ]


def test_a_study_with_a_known_concurrency_queues_its_starts_there(tmp_path: Path) -> None:
    """A study opened with `start_concurrency` (no server started): its queued starts, after
    the baselines, are the default's model and each branch at that many requests at once."""
    args = build_parser().parse_args(
        ["tune", "apps/hello.py", "--server", "gunicorn", "--server-cpus", "0",
         "--storage", f"sqlite:///{tmp_path / 's.db'}", "--study-name", "carried"]
    )  # fmt: skip
    setup = replace(build_setup(TuneOptions.from_args(args)), start_concurrency=12)
    study = open_study(setup)
    queued = [
        t
        for t in study.optuna_study.get_trials(deepcopy=False)
        if TrialAttrs.read(t.user_attrs).branch_start
    ]
    settings = [_settings(setup.space, t.system_attrs["fixed_params"]) for t in queued]
    models = [setup.adapter.concurrency_model(setup.adapter.resolve(s)) for s in settings]
    assert models == ["sync", "gthread", "gevent"]
    # The gevent start cannot be moved (greenlets are no slots): it does not say it was.
    carried = [TrialAttrs.read(t.user_attrs).carried for t in queued]
    assert carried == [12, 12, None]
    assert settings[0]["workers"] == 5  # 4 x cpus + 1: the space's most, short of 12
    assert settings[1]["workers"] == 1 and settings[1]["threads"] == 12
