"""A server's load signs: counted in its log, quoted in the reason of a trial that cannot win."""

from __future__ import annotations

from pathlib import Path

from tuner.logsigns import LoadSign, load_sign_lines
from tuner.metrics.measurement import Measurement
from tuner.search.objectives import Slo, infeasible_reason

QUEUE = LoadSign("Task queue depth is", "every thread was busy")
LIMIT = LoadSign("connection limit", "stopped accepting")


def test_each_sign_is_counted_with_its_last_line_and_meaning(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "INFO:waitress:Serving on http://127.0.0.1:8000\n"
        "WARNING:waitress.queue:Task queue depth is 1\n"
        "WARNING:waitress.queue:Task queue depth is 7\n"
        "an unrelated line\n"
    )
    assert load_sign_lines(log, [QUEUE, LIMIT]) == (
        '"WARNING:waitress.queue:Task queue depth is 7" x2: every thread was busy',
    )


def test_no_signs_or_no_log_say_nothing(tmp_path: Path) -> None:
    assert load_sign_lines(tmp_path / "missing.log", [QUEUE]) == ()
    (tmp_path / "empty.log").write_text("Task queue depth is 3\n")
    assert load_sign_lines(tmp_path / "empty.log", []) == ()


def test_a_trial_that_cannot_win_quotes_the_server_log() -> None:
    said = '"Task queue depth is 7" x2: every thread was busy'
    failing = Measurement.from_json(
        {"rps": 10.0, "error_rate": 0.5, "errors": {"read": 5}, "server_log": [said]}
    )
    assert failing.server_log == (said,)
    assert Measurement.from_json(failing.to_json()) == failing
    reason = infeasible_reason(Slo(), failing)
    assert reason.startswith("violates SLO: 50.0% of requests failed")
    assert reason.endswith(f"; server log: {said}")
    fine = Measurement.from_json({**failing.to_json(), "error_rate": 0.0})
    assert infeasible_reason(Slo(), fine) == ""
