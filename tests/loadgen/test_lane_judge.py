"""The lanes' records judged over the measurement window (pure logic, no server): which
streams and probes count, their figures, and the bad input only a run can show."""

from __future__ import annotations

import math

import pytest

from tuner.errors import ConfigError
from tuner.loadgen.beside import LaneReport, ProbeRecord, StreamRecord
from tuner.loadgen.lane_judge import judge, probe_figures, stream_figures
from tuner.loadgen.lanes import Lanes, Probe, Streams
from tuner.metrics.lanes import ProbeFigures, ServerCause, StreamFigures, causes_text, counts_text

WINDOW = (1.0, 3.0)  # warm-up until 1 s, measured until 3 s


def stream(
    started: float, chunks: list[float], ended: float | None, cause: str | None = None
) -> StreamRecord:
    return StreamRecord(
        started=started,
        first_byte=chunks[0] if chunks else None,
        ended=ended,
        cause=cause,
        status=200,
        chunk_times=chunks,
    )


def test_streams_count_where_they_end_and_their_longest_gap_in_the_window() -> None:
    records = [
        stream(0.0, [0.1, 0.2], 0.3),  # ended in the warm-up: not judged
        stream(0.5, [0.6, 1.2, 1.3], 1.4),  # completed in the window; gap 0.6 ended at 1.2
        stream(1.5, [1.55, 1.6], 1.7, "closed early"),  # cut
        stream(2.0, [2.05, 2.5], None),  # open at the end: longest gap 0.45
        stream(2.8, [], 2.9, "reset"),  # cut before its first byte
    ]
    figures = stream_figures("/s", records, WINDOW)
    assert (figures.completed, figures.cut, figures.open_at_end) == (1, 2, 1)
    assert figures.cut_causes == {"closed early": 1, "reset": 1}
    assert counts_text(figures.cut_causes) == "1 closed early, 1 reset"
    assert figures.cut_share == pytest.approx(2 / 3)
    assert figures.chunks == 6  # 1.2, 1.3, 1.55, 1.6, 2.05, 2.5
    # The longest gaps: 0.6, 0.05, 0.45 -> p99 the largest, p50 the middle.
    assert figures.max_gap_p99_ms == pytest.approx(600)
    assert figures.max_gap_p50_ms == pytest.approx(450)
    # First byte: 0.1 (0.5 -> 0.6), 0.05, 0.05 over the judged streams that had one.
    assert figures.ttfb_p99_ms == pytest.approx(100)


def test_no_stream_no_figures_but_zero_counts() -> None:
    figures = stream_figures("/s", [], WINDOW)
    assert (figures.completed, figures.cut, figures.open_at_end, figures.cut_share) == (0, 0, 0, 0)
    assert math.isnan(figures.ttfb_p99_ms) and "0 cut" in figures.describe()


def probe(
    started: float, latency: float, cause: str | None = None, status: int = 200
) -> ProbeRecord:
    return ProbeRecord(started, latency, cause, status if cause is None else 0)


def test_probes_count_when_sent_in_the_window_and_the_longest_failed_run() -> None:
    policy = Probe("/healthz", timeout_s=1.0, failures=3)
    records = [
        probe(0.5, 1.0, "over 1 s"),  # warm-up: not judged
        probe(1.0, 0.002),
        probe(1.5, 1.2, "over 1 s"),  # a late answer counts as the timeout
        probe(2.0, 0.1, "status 503"),
        probe(2.5, 1.0, "over 1 s"),
        probe(3.0, 0.01),  # after the window
    ]
    figures = probe_figures(policy, records, WINDOW)
    assert (figures.sent, figures.failed, figures.longest_failed_run) == (4, 3, 3)
    assert figures.fail_causes == {"over 1 s": 2, "status 503": 1}
    assert figures.restart and "3 probes of /healthz in a row failed" in figures.restart_text()
    assert figures.max_ms == pytest.approx(1000)
    assert not probe_figures(Probe("/healthz", failures=4), records, WINDOW).restart


def test_a_stream_path_that_answers_a_plain_response_is_bad_input() -> None:
    plain = StreamRecord(0.0, 0.01, 0.02, None, 200, "a plain response of 2 bytes (text/plain)")
    report = LaneReport((plain,), (), 3.0)
    with pytest.raises(
        ConfigError, match=r"stream path /s: answers a plain response .* not a stream"
    ):
        judge(Lanes(Streams(1, "/s")), report, 1.0, stopped_early=False)


def test_a_stream_longer_than_the_run_is_bad_input_unless_the_run_was_stopped() -> None:
    report = LaneReport((stream(0.0, [0.1, 1.0, 2.0], None),), (), 3.0)
    lanes = Lanes(Streams(1, "/s"))
    with pytest.raises(ConfigError, match=r"no stream ended within the run \(3.0 s"):
        judge(lanes, report, 1.0, stopped_early=False)
    streams = judge(lanes, report, 1.0, stopped_early=True).streams
    assert streams is not None and streams.open_at_end == 1
    # A stream that never sent a byte is the server's failure, judged, not bad input.
    silent = LaneReport((stream(0.0, [], None),), (), 3.0)
    assert judge(lanes, silent, 1.0, stopped_early=False).streams is not None


def test_a_probe_path_that_answers_404_is_bad_input() -> None:
    report = LaneReport((), (ProbeRecord(1.0, 0.01, "status 404", 404),), 3.0)
    with pytest.raises(ConfigError, match="probe path /healthz: answers 404"):
        judge(Lanes(probe=Probe("/healthz")), report, 1.0, stopped_early=False)


def test_lane_figures_round_trip_through_json() -> None:
    streams = StreamFigures("/s", 3, 1, 2, {"reset": 1}, 40, 12.5, 30.0, 50.0, 80.0)
    probe_ = ProbeFigures("/h", 6, 3, 3, 1.0, 3, {"over 1 s": 3}, 2.0, 1000.0, 1000.0)
    assert StreamFigures.from_json(streams.to_json()) == streams
    assert ProbeFigures.from_json(probe_.to_json()) == probe_
    assert probe_.to_json()["restart"] is True
    empty = StreamFigures("/s", 0, 0, 0)
    assert empty.to_json()["ttfb_ms"] == {"p50": None, "p99": None}
    assert math.isnan(StreamFigures.from_json(empty.to_json()).ttfb_p99_ms)


@pytest.mark.parametrize(
    ("lanes", "message"),
    [
        (Lanes(Streams(0, "/s")), "streams 0: expected a whole number 1-512"),
        (Lanes(Streams(2, "s")), "stream path 's': expected an absolute path"),
        (Lanes(probe=Probe("/h", timeout_s=0)), "probe timeout 0: expected seconds > 0"),
        (Lanes(probe=Probe("/h", failures=0)), "probe failures 0: expected a whole number >= 1"),
        (Lanes(probe=Probe("/h", timeout_s=5)), "probe timeout 5 s: expected less than the run"),
    ],
)
def test_lane_problems_name_the_value_and_what_is_valid(lanes: Lanes, message: str) -> None:
    problem = lanes.problem(run_s=3.0)
    assert problem is not None and problem.startswith(message), problem


TIMEOUT = ServerCause(
    "gunicorn WORKER TIMEOUT", 3, "timeout = 30 s kills a worker whose request runs longer"
)


def test_cut_streams_name_the_servers_cause_beside_the_clients() -> None:
    cut = StreamFigures("/s", 40, 3, 8, {"reset": 3}, server_causes=(TIMEOUT,))
    assert cut.describe().startswith(
        "streams: 40 completed, 3 cut (3 reset; server log: gunicorn WORKER TIMEOUT x3 "
        "(timeout = 30 s kills a worker whose request runs longer)), 8 open at the end"
    )
    assert cut.to_json()["server_cut_causes"] == {
        "gunicorn WORKER TIMEOUT": {
            "count": 3,
            "explanation": "timeout = 30 s kills a worker whose request runs longer",
        }
    }
    assert StreamFigures.from_json(cut.to_json()) == cut
    silent = StreamFigures("/s", 40, 2, 8, {"reset": 2})
    assert "server log" not in silent.describe()
    assert silent.to_json()["server_cut_causes"] == {}


def test_the_servers_causes_add_up_over_a_configs_runs() -> None:
    first = StreamFigures("/s", 10, 3, 0, {"reset": 3}, server_causes=(TIMEOUT,))
    second = StreamFigures("/s", 10, 1, 0, {"closed early": 1}, server_causes=(TIMEOUT,))
    assert causes_text([first, second]) == (
        "3 reset, 1 closed early; server log: gunicorn WORKER TIMEOUT x6 (timeout = 30 s "
        "kills a worker whose request runs longer)"
    )
    assert causes_text([StreamFigures("/s", 1, 1, 0, {"reset": 1})]) == "1 reset"
