"""A measurement says what its CPUs lost to other processes, read from the kernel's counters.

A busy process pinned to the server's CPU stands in for a neighbour (the steal a hypervisor
takes cannot be made on purpose; other processes are counted the same way, from /proc/stat).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from benchmarks.steal_spread import spinning
from tests.conftest import HOST, ROOT, SERVER_CPU
from tuner.apps import parse_app
from tuner.loadgen import LoadSpec
from tuner.loadgen.engine import keep_workers
from tuner.loadgen.spec import Workload
from tuner.measure.runner import BenchPlan, run_bench
from tuner.metrics.lossy import LOSSY, worst_loss
from tuner.metrics.measurement import Measurement
from tuner.servers.base import ServerAdapter
from tuner.workflow.confirm import Candidate, confirm

OTHER_CPUS = sorted(os.sched_getaffinity(0) - {SERVER_CPU})
LOAD_CPUS = (OTHER_CPUS[0],) if OTHER_CPUS else (SERVER_CPU,)


def _measure(
    gunicorn: ServerAdapter,
    log: Path,
    workers: int = 1,
    app: str = "apps/hello.py",
    threads: int = 1,
    connections: int = 8,
    worker_class: str = "sync",
) -> Measurement:
    load = LoadSpec(
        host=HOST,
        port=1,
        workload=Workload.single("/"),
        connections=connections,
        duration_s=2.0,
        warmup_s=0.3,
        load_cpus=LOAD_CPUS,
    )
    plan = BenchPlan(
        adapter=gunicorn,
        app=parse_app(app, cwd=ROOT),
        settings=gunicorn.resolve(
            {"workers": workers, "threads": threads, "worker_class": worker_class}
        ),
        load=load,
        server_cpus=(SERVER_CPU,),
        log_path=log,
    )
    return run_bench(plan).measurement


@contextlib.contextmanager
def spinning_on_the_server_cpu() -> Iterator[psutil.Process]:
    """A process spinning on the server's CPU until the block ends (the benchmarks' own)."""
    with spinning((SERVER_CPU,)) as (spinner,):
        process = psutil.Process(spinner.pid)
        # Started and pinned: it has spent CPU time on that CPU (a real condition, not a sleep).
        while process.cpu_times().user < 0.2 or process.cpu_affinity() != [SERVER_CPU]:
            process.cpu_percent(interval=0.05)
        yield process


@pytest.fixture
def hog() -> Iterator[psutil.Process]:
    with spinning_on_the_server_cpu() as process:
        yield process


def test_a_busy_neighbour_on_the_server_cpu_is_counted_as_other(
    gunicorn: ServerAdapter, hog: psutil.Process, tmp_path: Path
) -> None:
    measured = _measure(gunicorn, tmp_path / "server.log")
    assert measured.cores is not None
    # The hog competes at the server's priority: the scheduler gives it a large share of the
    # CPU (all of it while the server waits), none of which is the server's or ours.
    assert measured.cores.server.other >= 0.25, measured.cores.describe()
    assert measured.cores.server.cpus == 1
    assert "other processes" in measured.cores.describe()
    # Kept in the JSON a study stores, and read back.
    again = Measurement.from_json(measured.to_json()).cores
    assert again is not None
    assert again.server.other == pytest.approx(measured.cores.server.other, abs=1e-4)


def test_the_server_cpu_without_a_neighbour_loses_less(
    gunicorn: ServerAdapter, tmp_path: Path
) -> None:
    clean = _measure(gunicorn, tmp_path / "clean.log")
    assert clean.cores is not None
    if OTHER_CPUS:
        assert clean.cores.load is not None
    # Against a run beside a spinning process, not a fixed figure: a busy machine's own
    # processes count in both, the spinning one only in the second.
    with spinning_on_the_server_cpu():
        beside = _measure(gunicorn, tmp_path / "beside.log")
    assert beside.cores is not None
    assert clean.cores.server.other + 0.1 <= beside.cores.server.other, (
        clean.cores.describe(),
        beside.cores.describe(),
    )


@pytest.mark.skipif(not OTHER_CPUS, reason="needs a load CPU apart from the server's")
def test_a_studys_kept_load_workers_count_as_ours_not_as_other_processes(
    gunicorn: ServerAdapter, tmp_path: Path
) -> None:
    # A study keeps its load workers alive from run to run: never reaped, their CPU time must
    # still count as ours (it read as 80-95% "other processes" on the load CPU before).
    fresh = _measure(gunicorn, tmp_path / "fresh.log")  # its load workers reaped: ours
    with keep_workers():
        _measure(gunicorn, tmp_path / "first.log")
        kept = _measure(gunicorn, tmp_path / "second.log")
    assert fresh.cores is not None and fresh.cores.load is not None
    assert kept.cores is not None and kept.cores.load is not None
    # Against the fresh run, not a fixed figure: a busy machine's processes count in both.
    assert kept.cores.load.other <= fresh.cores.load.other + 0.05, (
        fresh.cores.describe(),
        kept.cores.describe(),
    )


def test_a_confirmation_run_beside_a_neighbour_is_measured_again_and_the_clean_one_kept(
    gunicorn: ServerAdapter, tmp_path: Path
) -> None:
    calls: list[tuple[str, int]] = []
    with spinning_on_the_server_cpu() as neighbour:

        def measure(candidate: Candidate, round_index: int) -> Measurement:
            calls.append((candidate.label, round_index))
            workers = int(candidate.settings["workers"])
            run = _measure(gunicorn, tmp_path / f"run{len(calls)}.log", workers)
            if neighbour.is_running():  # the first run is over: the neighbour leaves
                neighbour.kill()
                neighbour.wait()
            return run

        one, two = confirm(
            [Candidate("one", None, {"workers": 1}), Candidate("two", None, {"workers": 2})],
            1,
            measure,
        )
    # Measured again at once, in its place; then the other config, its one run kept (measured
    # again only if something else on a busy machine took its CPU too: not this test's doing).
    assert calls[:3] == [("one", 0), ("one", 0), ("two", 0)], calls
    assert calls[3:] in ([], [("two", 0)]), calls
    assert len(two.runs) == 1 and len(two.repeats) == len(calls) - 3
    assert len(one.runs) == 1 and one.rounds == [0] and len(one.repeats) == 1
    repeat = one.repeats[0]
    assert repeat.first.where == "server" and repeat.first.other >= 0.25, repeat
    # The repeat, without the neighbour, is kept, and its figures are clean.
    assert not repeat.kept_first and repeat.second is not None, repeat
    assert repeat.second.share < LOSSY, repeat
    kept = one.runs[0].cores
    assert kept is not None and kept.server.other == repeat.second.other
    assert repeat.text().startswith("repeated: server CPUs lost ")


def test_a_server_asleep_on_io_beside_a_neighbour_lost_nothing_it_needed(
    gunicorn: ServerAdapter, hog: psutil.Process, tmp_path: Path
) -> None:
    # One sync worker waiting 50 ms per request: the neighbour has the CPU nearly all the time,
    # and the server, woken ahead of it, waits for a CPU at most at each wake-up.
    asleep = _measure(gunicorn, tmp_path / "iowait.log", app="apps/iowait.py")
    assert asleep.cores is not None and asleep.cores.server.waited is not None
    assert asleep.cores.server.other >= 0.25, asleep.cores.describe()
    server = asleep.cores.server
    assert server.waited < LOSSY, asleep.cores.describe()  # the counters alone said lossy
    loss = worst_loss(asleep)
    assert loss is not None and not loss.lossy, loss
    # Beside the same neighbour, a CPU-bound server waits about the neighbour's share.
    hungry = _measure(gunicorn, tmp_path / "hello.log")
    assert hungry.cores is not None and hungry.cores.server.waited is not None
    assert hungry.cores.server.waited >= 0.25, hungry.cores.describe()
    hungry_loss = worst_loss(hungry)
    assert hungry_loss is not None and hungry_loss.lossy, hungry_loss


def test_many_threads_asleep_on_io_beside_a_neighbour_lost_little(
    gunicorn: ServerAdapter, hog: psutil.Process, tmp_path: Path
) -> None:
    # 2 workers x 16 threads, each request 50 ms asleep: every thread is woken behind the
    # neighbour some of the time, and together they wait a good share of the CPU's time, but
    # each thread's requests are slowed only by its own wait: the run lost little it needed.
    many = _measure(
        gunicorn,
        tmp_path / "many.log",
        workers=2,
        app="apps/iowait.py",
        threads=16,
        connections=32,
        worker_class="gthread",
    )
    assert many.cores is not None and many.cores.server.waited is not None
    assert many.cores.server.other >= 0.25, many.cores.describe()
    assert many.cores.server.waited < LOSSY, many.cores.describe()
    loss = worst_loss(many)
    assert loss is not None and not loss.lossy, loss


def test_a_cpu_bound_server_beside_a_neighbour_is_judged_per_cpu_second_received(
    gunicorn: ServerAdapter, hog: psutil.Process, tmp_path: Path
) -> None:
    # Four threads computing: the server wants its CPU all the time, and the neighbour takes a
    # large share of it. What the server got is what the CPU gave less the neighbour's time.
    hungry = _measure(
        gunicorn, tmp_path / "fib.log", app="apps/fib.py", threads=4, worker_class="gthread"
    )
    assert hungry.cores is not None and hungry.server_cpu is not None
    assert hungry.cpu_bound, (hungry.server_cpu.describe(), hungry.cores.describe())
    received = hungry.cpus_received
    assert received is not None and received <= 1 - hungry.cores.server.other + 1e-9
    assert hungry.rps_per_cpu_s == pytest.approx(hungry.median_rps / received)
    data = hungry.to_json()
    assert data["cpu_bound"] is True
    assert data["rps_per_cpu_s"] == pytest.approx(hungry.median_rps / received, rel=1e-3)
    assert data["cores"]["server"]["idle"] < 0.1
    # Asleep on I/O beside the same neighbour: the CPU did not limit it, req/s judges it.
    asleep = _measure(gunicorn, tmp_path / "iowait.log", app="apps/iowait.py")
    assert not asleep.cpu_bound, asleep.cores.describe() if asleep.cores else None
    assert asleep.to_json()["cpu_bound"] is False
