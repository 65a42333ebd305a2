"""A server's load signs: counted in its log, quoted in the reason of a trial that cannot win;
its cut signs: counted over a window, a worker's end once."""

from __future__ import annotations

from pathlib import Path

from tuner.logsigns import CutSign, LoadSign, LogWindow, cut_signs_seen, load_sign_lines, log_size
from tuner.metrics.measurement import Measurement
from tuner.search.objectives import Slo, infeasible_reason
from tuner.servers.granian import SETTINGS as GRANIAN
from tuner.servers.granian import GranianAdapter
from tuner.servers.gunicorn import SETTINGS as GUNICORN
from tuner.servers.gunicorn import GunicornAdapter
from tuner.servers.gunicorn_asgi import SETTINGS as ASGI
from tuner.servers.gunicorn_asgi import GunicornAsgiAdapter
from tuner.servers.uvicorn import SETTINGS as UVICORN
from tuner.servers.uvicorn import UvicornAdapter
from tuner.servers.uwsgi import SETTINGS as UWSGI
from tuner.servers.uwsgi import UwsgiAdapter
from tuner.servers.waitress import WaitressAdapter

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


# --- cut signs: each adapter's lines, as its server's source writes them -------------------

# gunicorn 27.0.1, error_fmt "%(asctime)s [%(process)d] [%(levelname)s] %(message)s" with
# arbiter.py's `self.log.critical("WORKER TIMEOUT (pid:%s)", pid)`, `"Worker (pid:%s) was sent
# %s!"` (+ " Perhaps out of memory?" for SIGKILL) and `"Worker exiting (pid: %s)"`, and the
# workers' `"Autorestarting worker after current request."`.
GUNICORN_TIMEOUT = (
    "[2026-01-02 10:00:01 +0000] [100] [CRITICAL] WORKER TIMEOUT (pid:201)\n"
    "[2026-01-02 10:00:01 +0000] [201] [INFO] Worker exiting (pid: 201)\n"
    "[2026-01-02 10:00:01 +0000] [100] [WARNING] Worker (pid:201) was sent SIGABRT!\n"
    "[2026-01-02 10:00:01 +0000] [100] [ERROR] Worker (pid:201) exited with code 1.\n"
    "[2026-01-02 10:00:01 +0000] [300] [INFO] Booting worker with pid: 300\n"
)
GUNICORN_RECYCLE = (
    "[2026-01-02 10:00:02 +0000] [202] [INFO] Autorestarting worker after current request.\n"
    "[2026-01-02 10:00:03 +0000] [202] [INFO] Worker exiting (pid: 202)\n"
)
GUNICORN_OOM = (
    "[2026-01-02 10:00:04 +0000] [100] [ERROR] Worker (pid:203) was sent SIGKILL! Perhaps out "
    "of memory?\n"
)


def _seen(tmp_path: Path, text: str, signs: tuple[CutSign, ...]) -> dict[str, int]:
    log = tmp_path / "server.log"
    log.write_text(text)
    return {sign.cause: n for sign, n in cut_signs_seen(log, signs, 0, log_size(log))}


def test_gunicorn_a_timed_out_worker_counts_once_as_its_timeout(tmp_path: Path) -> None:
    signs = GunicornAdapter().cut_signs(GUNICORN.defaults())
    text = GUNICORN_TIMEOUT + GUNICORN_TIMEOUT.replace("201", "204") + GUNICORN_RECYCLE
    assert _seen(tmp_path, text + GUNICORN_OOM, signs) == {
        "gunicorn WORKER TIMEOUT": 2,
        "gunicorn worker recycled": 1,
        "gunicorn worker SIGKILLed": 1,
    }
    # An exit no earlier line explains is still a worker gone under the load.
    assert _seen(tmp_path, GUNICORN_RECYCLE.splitlines(True)[1], signs) == {
        "gunicorn worker exited": 1
    }


def test_gunicorn_explanations_name_the_settings_that_did_it() -> None:
    values = {**GUNICORN.defaults(), "timeout": 1, "max_requests": 30, "graceful_timeout": 2}
    said = {sign.cause: sign.explanation for sign in GunicornAdapter().cut_signs(values)}
    assert said["gunicorn WORKER TIMEOUT"].startswith("timeout = 1 s kills a worker")
    assert said["gunicorn worker recycled"].startswith("max_requests = 30: ")
    assert "graceful_timeout = 2 s" in said["gunicorn worker recycled"]


def test_gunicorns_uvicorn_worker_also_says_its_cap(tmp_path: Path) -> None:
    signs = GunicornAsgiAdapter().cut_signs({**ASGI.defaults(), "limit_concurrency": 2})
    line = "[2026-01-02 10:00:05 +0000] [205] [WARNING] Exceeded concurrency limit.\n"
    assert _seen(tmp_path, line * 3 + GUNICORN_TIMEOUT, signs) == {
        "uvicorn concurrency limit": 3,
        "gunicorn WORKER TIMEOUT": 1,
    }
    assert signs[-1].explanation.startswith("limit_concurrency = 2: ")


def test_uvicorn_its_cap_and_its_recycling(tmp_path: Path) -> None:
    # uvicorn 0.55: protocols/http/httptools_impl.py `message = "Exceeded concurrency
    # limit."` (a warning); server.py `logger.info("Maximum request limit of %d exceeded.
    # Terminating process.", max_requests)`.
    text = (
        "WARNING:  Exceeded concurrency limit.\n"
        'INFO:     127.0.0.1:5000 - "GET /stream HTTP/1.1" 503 Service Unavailable\n'
        "WARNING:  Exceeded concurrency limit.\n"
        "INFO:     Maximum request limit of 100 exceeded. Terminating process.\n"
    )
    signs = UvicornAdapter().cut_signs({**UVICORN.defaults(), "limit_max_requests": 100})
    assert _seen(tmp_path, text, signs) == {
        "uvicorn concurrency limit": 2,
        "uvicorn worker recycled": 1,
    }


def test_uwsgi_harakiri_and_recycling_in_both_its_formats(tmp_path: Path) -> None:
    # uWSGI 2.0.30 core/master_utils.c trigger_harakiri: "*** HARAKIRI ON WORKER %d (pid: %d,
    # try: %d, graceful: %s) ***"; core/uwsgi.c: "...The work of process %d is done. Seeya!"
    # (2.0.30) and "...The work of process %d is done (%s). Seeya!" (master).
    text = (
        "Fri Jan  2 10:00:06 2026 - *** HARAKIRI ON WORKER 1 (pid: 401, try: 1, graceful: "
        "yes) ***\n"
        "HARAKIRI: --- uWSGI worker 1 (pid: 401) WAS managing request /stream since ... ---\n"
        "...The work of process 401 is done. Seeya!\n"
        "...The work of process 402 is done. Seeya!\n"
        "...The work of process 403 is done (max requests reached (30 >= 30)). Seeya!\n"
    )
    signs = UwsgiAdapter().cut_signs(UWSGI.defaults())
    assert _seen(tmp_path, text, signs) == {"uWSGI HARAKIRI": 1, "uWSGI worker recycled": 2}


def test_granian_lifetime_respawn_and_a_worker_that_died(tmp_path: Path) -> None:
    # granian 2.8.9 server/common.py: f'worker-{worker.idx + 1} lifetime expired, gracefully
    # respawning..' and f'Unexpected exit from worker-{self.idx + 1}'.
    text = (
        "[INFO] worker-1 lifetime expired, gracefully respawning..\n"
        "[INFO] Respawning worker-1\n"
        "[ERROR] Unexpected exit from worker-2\n"
    )
    signs = GranianAdapter().cut_signs({**GRANIAN.defaults(), "workers_lifetime": 60})
    assert _seen(tmp_path, text, signs) == {"granian worker recycled": 1, "granian worker died": 1}
    assert signs[0].explanation.startswith("workers_lifetime = 60 s: ")


def test_only_the_window_counts_and_a_server_declares_none_by_default(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(GUNICORN_TIMEOUT)  # the warm-up's
    window = LogWindow(log)
    window.begin()
    with open(log, "a") as more:
        more.write(GUNICORN_RECYCLE)
    window.end()
    with open(log, "a") as more:
        more.write(GUNICORN_OOM)  # after the window
    signs = GunicornAdapter().cut_signs(GUNICORN.defaults())
    seen = cut_signs_seen(log, signs, window.start, window.stop)
    assert [(sign.cause, n) for sign, n in seen] == [("gunicorn worker recycled", 1)]
    assert WaitressAdapter().cut_signs({}) == ()
    assert LogWindow(tmp_path / "missing.log").stop == 0
    assert cut_signs_seen(tmp_path / "missing.log", signs, 0, 100) == ()
