"""`bench` on a client_bound run: its rate is a floor, and the note says about how many load
CPUs it would have needed. Pure logic on constructed measurements, no servers."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from tests.support.measurements import measurement
from tuner.loadgen.capacity import need_of, need_text
from tuner.metrics.measurement import Measurement, ServerCpu
from tuner.report.bench_view import emit_result, result_table

BOUND = measurement(
    20_000, client_bound=True, loadgen_cpu_pct=98.0, loadgen_busy_cpus=0.98,
    server_cpu=ServerCpu(0.8, 1.0),
)  # fmt: skip


def throughput(m: Measurement) -> str:
    table = result_table(m, "bench", {})
    labels, values = (list(column.cells) for column in table.columns)
    return str(values[labels.index("throughput")])


def test_a_client_bound_rate_reads_as_a_floor_and_a_measured_one_does_not() -> None:
    assert throughput(BOUND).startswith(">= 20,000.0 req/s")
    assert throughput(BOUND).endswith("; a floor: client_bound)")
    measured = measurement(20_000, server_cpu=ServerCpu(0.8, 1.0), loadgen_busy_cpus=0.5)
    assert not throughput(measured).startswith(">=") and "floor" not in throughput(measured)


def test_the_estimate_needs_a_client_bound_run_with_both_cpu_figures() -> None:
    need = need_of(BOUND)
    assert need is not None and need.load_cpus == 2  # 25,000 req/s at 18,000 per core
    assert need_of(measurement(20_000, server_cpu=ServerCpu(0.8, 1.0))) is None  # not bound
    assert need_of(measurement(20_000, client_bound=True, loadgen_busy_cpus=1.0)) is None


def test_the_terminal_prints_the_estimate_after_the_measurements_own_notes() -> None:
    buffer = StringIO()
    out = Console(file=buffer, width=400)
    said = need_text(need_of(BOUND), load_cpus=1, spare=0)
    emit_result(out, BOUND, {}, title="bench", as_json=False, more_notes=[said])
    text = buffer.getvalue()
    assert "note: about 2 load CPUs would have been needed" in text
    assert "this machine has none to spare" in text
