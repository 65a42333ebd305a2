"""`tuner tune` and `tuner emit` end to end: real servers, real load, short windows."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from tests.support.cli import REPO, SHORT, read_until, wait_under_load
from tests.support.cli import run_tuner as tuner
from tests.support.serverwatch import wait_none_left
from tests.support.speed import scaled
from tuner.search.study import load_records
from tuner.servers import get_adapter
from tuner.workflow.confirm import EXTRA_ROUNDS

# One server: the workflow checked here (baselines, interleaved rounds, verdict, file, study)
# is the same code for every server; uWSGI's own tune runs end to end in test_compare.py and
# test_report.py, and every server's written file boots in tests/servers/test_contract.py.
SERVER, CONFIG_NAME = "gunicorn", "gunicorn.conf.py"


@pytest.fixture(scope="module")
def e2e(
    tmp_path_factory: pytest.TempPathFactory, real_servers: None
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One real study, end to end: its outputs are checked below, and a copy of its storage is
    resumed (a second study only to have something to resume cost 30 s)."""
    started = time.time()
    tmp_path = tmp_path_factory.mktemp("e2e")
    done = tuner(
        "tune",
        "apps/hello.py",
        "--server",
        SERVER,
        "--trials",
        "4",
        "--top-k",
        "1",
        "--confirm-rounds",
        "2",
        "--storage",
        f"sqlite:///{tmp_path}/s.db",
        "--study-name",
        "e2e",
        "--out",
        str(tmp_path / CONFIG_NAME),
        "--seed",
        "1",
        "--json",
        *SHORT,
    )
    assert wait_none_left(started) == []
    return done, tmp_path


def test_tune_end_to_end_writes_a_file_that_boots(e2e, since):
    done, tmp_path = e2e
    server, storage, out = SERVER, f"sqlite:///{tmp_path}/s.db", tmp_path / CONFIG_NAME
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["trials"] == 4
    labels = [c["label"] for c in result["confirmation"]]
    # The baselines, then the fastest searched config that was fair and not a baseline again;
    # with 4 short trials every searched one can be unfair (gevent often is), then none.
    _, records = load_records(storage, "e2e")
    resolve = get_adapter(server).resolve
    baselines = [resolve(r.settings) for r in records if r.baseline]
    searched = [
        r
        for r in records
        if r.measured and r.feasible and not r.baseline and resolve(r.settings) not in baselines
    ]
    best = max(searched, key=lambda r: r.rps, default=None)
    assert labels[:2] == ["default", "2*cpus+1"]
    assert labels[2:3] == ([best.label] if best else []), (labels, records)
    # --confirm-rounds 2: every candidate measured twice, interleaved, and none failed; then,
    # when the pairs had not decided for the best median against the default that was to be
    # written, the two EXTRA_ROUNDS more.
    confirm_lines = [line for line in done.stderr.splitlines() if line.startswith("confirm round")]

    # Odd rounds (counted from 0) in the reverse order.
    def in_round(r: int, names: list[str]) -> list[str]:
        return names if r % 2 == 1 else names[::-1]

    expected = [f"confirm round {r}: {label}: " for r in (1, 2) for label in in_round(r, labels)]
    summary = result["verdict"]["summary"]
    if match := re.search(rf"after {EXTRA_ROUNDS} more rounds of (.+?) and the default", summary):
        pair = ["default", match.group(1)]
        more = range(3, 3 + EXTRA_ROUNDS)
        expected += [f"confirm round {r}: {label}: " for r in more for label in in_round(r, pair)]
    assert len(confirm_lines) == len(expected), confirm_lines
    assert [line[: len(want)] for line, want in zip(confirm_lines, expected, strict=True)] == (
        expected
    )
    assert "failed" not in "".join(confirm_lines)
    for entry in result["confirmation"]:
        assert entry["failures"] == [] and entry["rps"]["min"] > 0, entry
        slug = entry["label"].replace(" ", "-").replace("*", "x")
        logs = sorted(p.name for p in (tmp_path / "e2e" / "confirm").glob(f"{slug}-round*.log"))
        rounds = 2 + EXTRA_ROUNDS * (f"confirm round 3: {entry['label']}: " in expected)
        assert logs == [f"{slug}-round{r}.log" for r in range(rounds)]
    text = out.read_text()
    assert "Tuned by tuner" in text and "verdict:" in text and "2*cpus+1 rule" in text
    assert result["config_file"] == str(out)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left
    if server == "gunicorn":
        check = subprocess.run(
            ["gunicorn", "--check-config", "-c", str(out), "apps.hello:app"],
            cwd=REPO, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert check.returncode == 0, check.stderr
    study = optuna.load_study(study_name="e2e", storage=storage)
    assert study.trials[0].user_attrs["baseline"] == "default"
    assert study.trials[1].user_attrs["baseline"] == "2*cpus+1"
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert complete and all("rps" in t.user_attrs["metrics"] for t in complete)


def test_resume_adds_trials_and_emit_writes_any_trial(e2e, tmp_path, since):
    # A copy of the end-to-end study (4 trials, so the next is trial 4), resumed here.
    assert e2e[0].returncode == 0, e2e[0].stderr
    shutil.copy(e2e[1] / "s.db", tmp_path / "s.db")
    storage = f"sqlite:///{tmp_path}/s.db"
    done = tuner(
        "tune", "apps/hello.py", "--server", SERVER, "--top-k", "1", "--confirm-rounds", "1",
        "--storage", storage, "--study-name", "e2e", "--out", str(tmp_path / CONFIG_NAME),
        "--json", "--no-clean-venv-check",  # the written file is not what this test is about
        *SHORT, "--trials", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    study = optuna.load_study(study_name="e2e", storage=storage)
    # 4 + 1 run; the branch starts the runs did not reach are still queued (WAITING)
    assert len([t for t in study.trials if t.state.name != "WAITING"]) == 5
    assert sum(t.user_attrs.get("baseline") == "default" for t in study.trials) == 1
    emitted = tmp_path / "trial4.conf.py"
    done = tuner(
        "emit", "--study", "e2e", "--trial", "4", "--out", str(emitted), "--storage", storage
    )
    assert done.returncode == 0, done.stderr
    assert "trial 4" in emitted.read_text()


def test_slo_nobody_meets_writes_no_file(tmp_path, since):
    out = tmp_path / "gunicorn.conf.py"
    done = tuner(
        "tune",
        "apps/iowait.py",
        "--server",
        "gunicorn",
        "--trials",
        "2",
        "--top-k",
        "1",
        "--confirm-rounds",
        "1",
        "--slo-p99",
        "1",
        "--storage",
        f"sqlite:///{tmp_path}/s.db",
        "--out",
        str(out),
        "--json",
        *SHORT,
    )
    assert done.returncode == 1, done.stderr  # measured fine, but nothing meets the SLO
    result = json.loads(done.stdout)
    assert result["verdict"] is None and result["config_file"] is None
    assert result["completed"] >= 1 and len(result["cannot_win"]) == result["completed"]
    assert all(e["reason"].startswith(("violates SLO: ", "unfair: ")) for e in result["cannot_win"])
    assert not out.exists()
    study = optuna.load_study(
        study_name="iowait-gunicorn-throughput", storage=f"sqlite:///{tmp_path}/s.db"
    )
    for trial in study.trials:
        if trial.state.name == "COMPLETE":
            assert trial.constraints["p99_ms"] > 0  # 50 ms per request > the 1 ms SLO


def test_sigint_mid_study_keeps_trials_and_leaves_no_server(tmp_path, since):
    storage = f"sqlite:///{tmp_path}/s.db"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tuner",
            "tune",
            "apps/hello.py",
            "--server",
            "gunicorn",
            "--trials",
            "20",
            "--storage",
            storage,
            "--study-name",
            "cut",
            "--duration",
            str(scaled(1.2)),  # long enough to be caught under load, as in test_faults.py
            "--warmup",
            "0.5",
            "--connections",
            "8",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Wait until two trials are done, then interrupt the third while it is measured.
    read_until(proc.stderr, "trial ", 2)
    wait_under_load(proc, "gunicorn")
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR2)  # the tuner prints every thread's stack, to see where
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=5)  # collects the stacks; output read so far is kept
        proc.kill()
        _, err = proc.communicate()
        # The head too: where the SIGINT landed (an "Exception ignored" KeyboardInterrupt, the
        # trial it hit) is there; the stacks are at the end. Seen once in 5 runs, cause unknown.
        pytest.fail(
            f"the tuner did not exit within 60 s of SIGINT; its output:\n{err[:4000]}\n...\n"
            f"{err[-5000:]}"
        )
    assert proc.returncode == 130, err
    assert "interrupted" in err
    study = optuna.load_study(study_name="cut", storage=storage)
    states = [t.state.name for t in study.trials]
    assert states.count("COMPLETE") >= 2
    assert "RUNNING" not in states


def test_bad_input_through_the_real_command_is_one_line_and_exit_2(tmp_path, real_servers):
    # The cases themselves run in-process (test_bad_input.py); this proves the same
    # contract through `python -m tuner`: exit code, one line on stderr, no traceback, no file.
    done = tuner(
        "tune", "apps/hello.py", "--server", "gunicorn", "--study-name", "a b/c",
        "--out", str(tmp_path / "x.conf"), *SHORT,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --study-name 'a b/c'"), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "x.conf").exists()


def test_bad_space_file_names_file_and_key(tmp_path, real_servers):
    space = tmp_path / "space.toml"
    space.write_text('server = "gunicorn"\n[params.wurkers]\ntype = "int"\nlow = 1\nhigh = 4\n')
    done = tuner("tune", "apps/hello.py", "--server", "gunicorn", "--space", str(space), *SHORT)
    assert done.returncode == 2
    assert "space.toml" in done.stderr and "wurkers" in done.stderr
