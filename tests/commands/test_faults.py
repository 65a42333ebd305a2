"""Trust under faults: apps and servers that misbehave, and a tuner that is stopped or killed.

For each fault: the trial is recorded with a one-line reason (or the study stops when no config
can work), the study goes on where that makes sense, no server process or port is left, and no
completed trial is lost. apps/faulty.py picks its fault by path and environment.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import psutil
import pytest

from tests.conftest import require_adapter, unavailable
from tests.support.cli import read_until, wait_under_load, wait_until_stale
from tests.support.cli import run_tuner as tuner_cli
from tests.support.speed import scaled
from tuner.cli import build_parser
from tuner.commands.setup import build_setup
from tuner.commands.tune_options import TuneOptions
from tuner.measure import runner
from tuner.search.records import TrialRecord
from tuner.search.study import QuietListener, load_records, open_study, run_search

REPO = Path(__file__).resolve().parents[2]
FAULTY = str(REPO / "apps" / "faulty.py")
CPUS = sorted(os.sched_getaffinity(0))
SPLIT = ["--server-cpus", str(CPUS[0]), "--load-cpus", str(CPUS[-1])] if len(CPUS) > 1 else []
# Each fault shows within a few hundred requests: one 0.6 s window (the engine counts a window
# from 0.5 s) after 0.2 s of warm-up.
SHORT = ["--duration", "0.6", "--warmup", "0.2", "--connections", "8", *SPLIT]
# A dead tuner's trial is failed 2 s after its last heartbeat instead of 30 s.
FAST_HEARTBEAT = {"TUNER_HEARTBEAT_S": "1", "TUNER_HEARTBEAT_GRACE_S": "2"}


def search(
    tmp_path: Path, app: str, server: str, *extra: str, trials: int = 2
) -> list[TrialRecord]:
    """Run `trials` trials of a study the way `tuner tune` does, without the confirmation."""
    require_adapter(server)
    args = build_parser().parse_args(
        ["tune", app, "--server", server, "--storage", f"sqlite:///{tmp_path}/s.db"]
        + ["--study-name", "faults", *SHORT, *extra]
    )
    setup = build_setup(TuneOptions.from_args(args))
    listener = QuietListener()
    run_search(setup, open_study(setup), n_trials=trials, timeout_s=None, listener=listener)
    # Every trial asked for ended and was recorded: a loop over none would pass anything.
    assert len(listener.ended) == trials, [(r.state, r.fail_reason) for r in listener.ended]
    return listener.ended


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


# --- the app -----------------------------------------------------------------------------------


def test_app_that_fails_to_import_stops_before_any_study(tmp_path: Path, since: float) -> None:
    done = tuner_cli(
        "tune", "apps/faulty_import.py", "--server", "gunicorn",
        "--storage", f"sqlite:///{tmp_path}/s.db", *SHORT,
    )  # fmt: skip
    assert done.returncode == 2
    line = one_error_line(done)
    assert "failed to import" in line and "nosuchlib" in line
    assert not (tmp_path / "s.db").exists()  # checked before any study is created


@pytest.mark.parametrize("server", ["gunicorn", "uwsgi"])
def test_app_broken_only_under_the_server_stops_the_study(
    tmp_path: Path, since: float, server: str
) -> None:
    require_adapter(server)
    done = tuner_cli(
        "tune", FAULTY, "--server", server, "--trials", "5",
        "--storage", f"sqlite:///{tmp_path}/s.db", "--study-name", "broken", *SHORT,
        env={"FAULTY_BROKEN_IN_SERVER": "1"},
    )  # fmt: skip
    assert done.returncode == 2
    line = one_error_line(done)
    assert "could not load the app" in line and "refusing to load under a server" in line
    _, records = load_records(f"sqlite:///{tmp_path}/s.db", "broken")
    assert [r.state for r in records if r.state != "WAITING"] == ["FAIL"]  # stopped at once
    assert records[0].fail_reason.startswith("app_broken: ")


def test_crashing_worker_is_an_slo_violation_for_gunicorn(tmp_path: Path, since: float) -> None:
    # gunicorn's master replaces the dead worker: the study sees failed requests, not a dead
    # server, and the sampler learns to avoid the config through the error-rate constraint.
    records = search(tmp_path, FAULTY, "gunicorn", "--path", "/crash?every=25", trials=1)
    assert len(records) == 1
    assert records[0].state == "COMPLETE" and not records[0].feasible
    assert records[0].fail_reason.startswith("violates SLO: ")
    assert "of requests failed" in records[0].fail_reason


def test_crashing_worker_kills_a_uwsgi_without_master(tmp_path: Path, since: float) -> None:
    # uWSGI's default runs no master: nobody respawns the only worker, the server is gone.
    records = search(tmp_path, FAULTY, "uwsgi", "--path", "/crash?every=25", trials=1)
    assert records[0].state == "FAIL"
    assert records[0].fail_reason.startswith("crashed: uwsgi died during the measurement")
    assert "\n" not in records[0].fail_reason


def test_hanging_requests_make_the_trial_unfair(tmp_path: Path, since: float) -> None:
    # Measured (so the sampler learns from it) but infeasible: it can never win.
    # A hung request is under 0.8 s old at the window's end, short of its 2 s timeout: unfair,
    # not timed out; the drain waits for it until then, not 5 s.
    records = search(
        tmp_path, FAULTY, "gunicorn", "--path", "/hang?every=40", "--request-timeout", "2",
        trials=1,
    )  # fmt: skip
    assert records[0].state == "COMPLETE" and not records[0].feasible
    assert records[0].fail_reason.startswith("unfair: ")
    assert records[0].why_infeasible == "unfair"


def test_5xx_answers_are_an_slo_violation(tmp_path: Path, since: float) -> None:
    records = search(tmp_path, FAULTY, "gunicorn", "--path", "/error?every=10", trials=1)
    assert records[0].state == "COMPLETE" and not records[0].feasible
    assert "status_5xx" in records[0].fail_reason


def test_leaking_app_violates_the_memory_limit(tmp_path: Path, since: float) -> None:
    records = search(
        tmp_path, FAULTY, "gunicorn", "--path", "/leak?kb=256", "--max-memory", "40", trials=1
    )
    assert records[0].state == "COMPLETE" and not records[0].feasible
    assert "memory (PSS)" in records[0].fail_reason and "--max-memory 40" in records[0].fail_reason


def test_slow_start_is_waited_for_and_measured(tmp_path: Path, since: float) -> None:
    require_adapter("gunicorn")
    done = tuner_cli(
        "bench", FAULTY, "--server", "gunicorn", "--json", *SHORT, env={"FAULTY_START_S": "1.5"}
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["startup_s"] >= 1.5


# --- the server --------------------------------------------------------------------------------


def test_value_the_server_rejects_fails_that_trial_only(tmp_path: Path, since: float) -> None:
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    if somaxconn >= 60000:
        unavailable("somaxconn is near its maximum; uWSGI accepts every listen value")
    space = tmp_path / "space.toml"
    space.write_text(
        'server = "uwsgi"\n[params.listen]\ntype = "int"\n'
        f"low = {somaxconn + 1}\nhigh = {somaxconn + 100}\n"
    )
    records = search(
        tmp_path, str(REPO / "apps/hello.py"), "uwsgi", "--space", str(space), trials=3
    )
    assert [r.state for r in records[:2]] == ["COMPLETE", "COMPLETE"]  # baselines: listen=100
    assert records[2].state == "FAIL"
    assert records[2].fail_reason.startswith("server_exited: uwsgi exited with code 1")
    assert "somaxconn" in records[2].fail_reason


def test_missing_server_binary_is_one_line_exit_2(tmp_path: Path, since: float) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from tuner.servers.gunicorn import GunicornAdapter as A; "
            "A.binary = 'gunicorn-not-installed'; from tuner.cli import main; "
            "sys.exit(main(sys.argv[1:]))",
            "tune",
            "apps/hello.py",
            "--server",
            "gunicorn",
            "--out",
            str(tmp_path / "g.py"),
            "--storage",
            f"sqlite:///{tmp_path}/s.db",
            *SHORT,
        ],  # fmt: skip
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "gunicorn-not-installed not found on PATH; pip install gunicorn" in one_error_line(done)
    assert not (tmp_path / "g.py").exists()


class _Answer200(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header("Content-Length", "8")
        self.end_headers()
        self.wfile.write(b"impostor")

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def port_taken(answering: bool) -> Iterator[int]:
    """A port held by another process-like listener; `answering` serves HTTP 200 on it."""
    if answering:
        impostor = http.server.HTTPServer(("127.0.0.1", 0), _Answer200)
        thread = threading.Thread(target=impostor.serve_forever, daemon=True)
        thread.start()
        try:
            yield impostor.server_address[1]
        finally:
            impostor.shutdown()
            impostor.server_close()
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize(
    ("server", "answering"), [("gunicorn", True), ("uwsgi", False)], ids=["answering", "silent"]
)
def test_port_taken_by_another_process_retries_on_a_free_one(
    tmp_path: Path, since: float, monkeypatch: pytest.MonkeyPatch, server: str, answering: bool
) -> None:
    with port_taken(answering) as taken:
        ports = iter([taken])
        real_free_port = runner.free_port
        monkeypatch.setattr(
            runner, "free_port", lambda host: next(ports, 0) or real_free_port(host)
        )
        records = search(tmp_path, str(REPO / "apps/hello.py"), server, trials=1)
    assert next(ports, None) is None  # the taken port was tried first
    assert records[0].state == "COMPLETE", records[0].fail_reason
    # The measured server is ours, on another port: an impostor answering there was not it.
    assert f":{taken}" not in (tmp_path / "faults/trials/0/server.log").read_text()


# --- the tuner is stopped ----------------------------------------------------------------------


def _start_tune(
    tmp_path: Path, trials: int = 20, duration: float | None = None
) -> subprocess.Popen[str]:
    """A tune whose trials (by default) run long enough, on this machine, for a test that sees
    one under load to signal the tuner while that trial is measured."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tuner",
            "tune",
            str(REPO / "apps/hello.py"),
            "--server",
            "gunicorn",
            "--trials",
            str(trials),
            "--top-k",
            "1",
            "--confirm-rounds",
            "1",
            "--storage",
            f"sqlite:///{tmp_path}/s.db",
            "--study-name",
            "stopped",
            "--no-branch-starts",  # no queued trials: the resumed study has nothing waiting
            "--no-clean-venv-check",  # the written file's boot is checked in test_tune.py
            "--out",
            str(tmp_path / "gunicorn.conf.py"),
            "--duration",
            str(duration or scaled(1.2)),
            "--warmup",
            "0.5",
            "--connections",
            "8",
            *SPLIT,
        ],  # fmt: skip
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1", **FAST_HEARTBEAT},
    )


GUNICORN_LISTENING = re.compile(r"\[(\d+)\] \[INFO\] Listening at:")


def _wait_mid_trial(
    proc: subprocess.Popen[str], done_trials: int, tmp_path: Path
) -> tuple[list[psutil.Process], int, int]:
    """Wait until `done_trials` more trials ended and the next one's server is listening under
    load; returns the tuner's process tree at that moment (servers, watchdogs, load workers),
    that trial's number and its server's port."""
    read_until(proc.stderr, "trial ", done_trials)
    # The previous trial's load workers may still be exiting while the next server boots, so
    # "under load" alone does not mean this server is up yet: wait for the running trial's own
    # "Listening at:" line. The running trial is looked up each time: a sampled config that
    # repeats an earlier one is reused without a server (no log ever). The port comes from
    # the master's --bind: with reuse_port gunicorn logs "Listening at:  (pid)", no address.
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "no trial's server listened within 60 s"
        assert proc.poll() is None, f"the tuner exited ({proc.returncode})"
        records = load_records(f"sqlite:///{tmp_path}/s.db", "stopped")[1]
        running = [r.number for r in records if r.state == "RUNNING"]
        if running:
            trial = running[-1]
            log = tmp_path / "stopped" / "trials" / str(trial) / "server.log"
            if found := GUNICORN_LISTENING.search(log.read_text() if log.exists() else ""):
                break
        time.sleep(0.05)
    wait_under_load(proc, "gunicorn")
    argv = psutil.Process(int(found[1])).cmdline()
    port = int(argv[argv.index("--bind") + 1].rsplit(":", 1)[1])
    return psutil.Process(proc.pid).children(recursive=True), trial, port


def _listening_ports() -> set[int]:
    return {c.laddr.port for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN}


def _assert_tree_gone(tree: list[psutil.Process], port: int) -> None:
    _, alive = psutil.wait_procs(tree, timeout=20)  # load workers end with their window
    assert not alive, [p.cmdline() for p in alive]
    assert port not in _listening_ports()


def test_sigterm_then_sigkill_then_resume_loses_nothing(tmp_path: Path, since: float) -> None:
    require_adapter("gunicorn")
    storage = f"sqlite:///{tmp_path}/s.db"

    # SIGTERM mid-trial: like Ctrl-C.
    proc = _start_tune(tmp_path)
    tree, trial, port = _wait_mid_trial(proc, 1, tmp_path)
    assert trial == 1
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "interrupted (SIGTERM)" in err and "completed trial(s) kept" in err
    _assert_tree_gone(tree, port)
    _, records = load_records(storage, "stopped")
    assert [r.state for r in records[:2]] == ["COMPLETE", "FAIL"]
    assert records[1].fail_reason == "interrupted: the tuner got SIGTERM during this trial"

    # SIGKILL mid-trial: nothing can run in the tuner; the watchdog stops the server, and the
    # trial stays RUNNING until the heartbeat grace period has passed.
    proc = _start_tune(tmp_path)
    tree, killed_trial, port = _wait_mid_trial(proc, 1, tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    _assert_tree_gone(tree, port)
    study = optuna.load_study(study_name="stopped", storage=storage)
    assert study.trials[killed_trial].state.name == "RUNNING"
    wait_until_stale(storage, "stopped", killed_trial, FAST_HEARTBEAT)

    # Resume: the dead trial is failed on open, completed ones are kept, the study goes on.
    # Nothing is stopped in this run: short windows will do (the study's identity has none).
    proc = _start_tune(tmp_path, trials=1, duration=0.6)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    _, records = load_records(storage, "stopped")
    states = [r.state for r in records]
    assert "RUNNING" not in states and "WAITING" not in states
    assert records[killed_trial].state == "FAIL"
    assert records[killed_trial].fail_reason.startswith("abandoned: the tuner on ")
    # One measured trial per run (complete, or pruned as hopeless); a sampled config that
    # repeats an earlier one reuses its result and gives its slot back, so it does not count.
    stopped = ("interrupted: ", "abandoned: ")
    measured = [
        r for r in records if not r.fail_reason.startswith(stopped) and r.duplicate_of is None
    ]
    assert len(measured) == 3, [(r.state, r.fail_reason) for r in records]
    assert sum(r.baseline == "default" for r in records) == 1
    assert (tmp_path / "gunicorn.conf.py").exists()
