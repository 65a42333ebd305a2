"""benchmarks/wrk.py: wrk's command as the benchmarks run it, against a real gunicorn started
by the runner's own `start_server` (as vs_techempower.py's cross-check does), its report read
into figures; and a report's pieces read by the rules (units, errors, what is missing)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.wrk import WrkFigures, ms, parse_report, wrk_command
from tests.conftest import HOST, ROOT, SERVER_CPU
from tests.measure.test_cores_lost import LOAD_CPUS
from tuner.apps import parse_app
from tuner.loadgen import LoadSpec
from tuner.loadgen.spec import Workload
from tuner.measure.runner import BenchPlan, start_server
from tuner.servers.base import ServerAdapter

REPORT = """Running 2s test @ http://127.0.0.1:8080/json
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    12.10ms    3.02ms  40.00ms   80.00%
  Latency Distribution
     50%  812.00us
     75%    1.00ms
     90%    1.20ms
     99%    2.00s
  9000 requests in 2.00s, 1.20MB read
  Socket errors: connect 0, read 2, write 0, timeout 3
  Non-2xx or 3xx responses: 4
Requests/sec:   4500.25
Transfer/sec:    600.00KB
"""


def test_a_report_reads_into_figures_in_milliseconds_with_every_error() -> None:
    assert parse_report(REPORT) == WrkFigures(
        rps=4500.25, p50_ms=0.812, p90_ms=1.2, p99_ms=2000.0, errors=2 + 3 + 4
    )


def test_a_report_without_errors_counts_none_and_a_missing_figure_is_named() -> None:
    clean = REPORT.replace("  Socket errors: connect 0, read 2, write 0, timeout 3\n", "")
    clean = clean.replace("  Non-2xx or 3xx responses: 4\n", "")
    assert parse_report(clean).errors == 0
    with pytest.raises(ValueError, match="Requests/sec"):
        parse_report(clean.replace("Requests/sec:   4500.25\n", ""))
    with pytest.raises(ValueError, match="not a wrk latency"):
        ms("12 ms")


def test_the_command_is_pinned_one_thread_per_load_cpu_for_whole_seconds() -> None:
    command = wrk_command("http://h:1/x", 64, 0.5, (1, 2), 9.5)
    assert command[:3] == ["taskset", "-c", "1,2"]
    assert command[3:] == [
        "wrk",
        "-t2",
        "-c64",
        "-d1s",
        "--timeout=10s",
        "--latency",
        "http://h:1/x",
    ]
    assert "-t1" in wrk_command(
        "http://h:1/x", 1, 2.0, (1, 2), 10
    )  # never more threads than connections


def test_wrk_drives_a_server_the_runner_started_and_its_report_reads(
    gunicorn: ServerAdapter, tmp_path: Path
) -> None:
    plan = BenchPlan(
        adapter=gunicorn,
        app=parse_app("apps/hello.py", cwd=ROOT),
        settings=gunicorn.resolve({"workers": 1}),
        load=LoadSpec(host=HOST, port=1, workload=Workload.single("/"), connections=8,
                      duration_s=1.0, warmup_s=0.0, load_cpus=LOAD_CPUS),
        server_cpus=(SERVER_CPU,),
        log_path=tmp_path / "server.log",
    )  # fmt: skip
    with start_server(plan) as server:
        url = f"http://{server.host}:{server.port}/"
        done = subprocess.run(
            wrk_command(url, 8, 1.0, LOAD_CPUS, 10), capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        figures = parse_report(done.stdout)
    assert figures.rps > 0 and figures.errors == 0, done.stdout
    assert 0 < figures.p50_ms <= figures.p90_ms <= figures.p99_ms, figures
    assert not server.alive()
