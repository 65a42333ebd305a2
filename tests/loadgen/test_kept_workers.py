"""Load workers kept across runs (`keep_workers`, a study's trials): the same processes serve
every run, a run stopped early leaves nothing behind for the next, a worker that died is
replaced, and the workers are gone once the block ends."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import psutil
import pytest

from tests.conftest import HOST, require_adapter, running
from tuner.loadgen import LoadSpec, Workload, run_load
from tuner.loadgen.engine import keep_workers
from tuner.metrics.measurement import Errors, Measurement
from tuner.procs.process import ServerProcess

LOAD_CPUS = (max(os.sched_getaffinity(0)),)


@pytest.fixture(scope="module")
def server(real_servers: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the tests here: they are about the load workers, which each test starts
    and ends itself; the server only answers."""
    # gthread: a sync worker sometimes leaves all 8 keep-alive clients unanswered for a second
    # on a busy machine, which says nothing about the load workers.
    values = {"worker_class": "gthread", "threads": 8}
    log_path = tmp_path_factory.mktemp("kept") / "server.log"
    with running(require_adapter("gunicorn"), values=values, log_path=log_path) as started:
        yield started


def spec(port: int, duration_s: float = 1.0) -> LoadSpec:
    return LoadSpec(
        host=HOST,
        port=port,
        workload=Workload.single("/"),
        connections=8,
        warmup_s=0.2,
        duration_s=duration_s,
        load_cpus=LOAD_CPUS,
        timeout_s=2.0,
    )


def load_workers() -> list[psutil.Process]:
    return [
        child
        for child in psutil.Process().children()
        if any("multiprocessing.spawn" in word for word in child.cmdline())
    ]


def assert_measured(result: Measurement, duration_s: float) -> None:
    assert result.errors == Errors()
    assert result.requests > 0
    # Never short (the end is a timer), late by what a busy machine may delay it, and not
    # the 0.2 s warm-up longer.
    assert duration_s <= result.duration_s < duration_s + 0.15, result.duration_s
    assert len(result.window_rps) == round(duration_s)


def test_kept_workers_serve_every_run_and_leave_with_the_block(server: ServerProcess) -> None:
    with keep_workers():
        assert_measured(run_load(spec(server.port)), 1.0)
        workers = load_workers()
        assert len(workers) == len(LOAD_CPUS)
        assert all(w.cpu_affinity() == list(LOAD_CPUS) for w in workers)
        # Stopped after its first window: the Stop a finished worker never read stays in
        # its pipe and must not disturb the next run.
        stopped = run_load(spec(server.port, duration_s=20.0), lambda _window: False)
        assert stopped.duration_s < 2.0
        with keep_workers():  # nested: still the same workers
            assert_measured(run_load(spec(server.port, duration_s=2.0)), 2.0)
        assert load_workers() == workers
    _, alive = psutil.wait_procs(workers, timeout=30)  # a safety bound, not the premise
    assert not alive
    assert load_workers() == []


def test_a_dead_kept_worker_is_replaced(server: ServerProcess) -> None:
    with keep_workers():
        run_load(spec(server.port))
        (worker,) = load_workers()
        os.kill(worker.pid, signal.SIGKILL)
        # Not reaped here: multiprocessing reaps its own children.
        deadline = time.monotonic() + 30  # a safety bound, not the premise
        while worker.is_running() and worker.status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert_measured(run_load(spec(server.port)), 1.0)
        (replacement,) = load_workers()
        assert replacement.pid != worker.pid
    assert load_workers() == []


def test_without_the_block_each_run_has_its_own_workers(server: ServerProcess) -> None:
    assert_measured(run_load(spec(server.port)), 1.0)
    assert load_workers() == []
