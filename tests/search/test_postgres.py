"""Many machines, one study: two tuners share a study through a real PostgreSQL server.

TUNER_TEST_POSTGRES_URL names a database to use; without it the tests start their own
PostgreSQL (initdb into a temporary folder, pg_ctl on a free port, stopped at the end) when
the server binaries are installed (tests/support/postgres.py, through scripts/postgres). Otherwise
they skip, and fail when CI=true.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from tests.conftest import unavailable
from tests.support.cli import read_until, wait_under_load, wait_until_stale
from tests.support.postgres import throwaway_postgres
from tuner.loadgen.checks import nearly_fair
from tuner.search.storage import with_postgres_driver
from tuner.search.study import load_records

REPO = Path(__file__).resolve().parents[2]
CPUS = sorted(os.sched_getaffinity(0))
# Sharing, not figures, is tested: one 0.6 s window (a window counts from 0.5 s) after 0.2 s.
SHORT = ["--duration", "0.6", "--warmup", "0.2", "--connections", "8"]
FAST_HEARTBEAT = {"TUNER_HEARTBEAT_S": "1", "TUNER_HEARTBEAT_GRACE_S": "2"}


@pytest.fixture(scope="module")
def postgres_url(real_servers: None) -> Iterator[str]:
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        unavailable("psycopg2 is not installed (pip install -e '.[test]')")
    if url := os.environ.get("TUNER_TEST_POSTGRES_URL"):
        yield url
        return
    with throwaway_postgres(max_connections=50) as url:
        yield url


def _tune(
    url: str, study: str, server_cpu: int, load_cpu: int, tmp: Path, trials: int, *extra: str
) -> subprocess.Popen[str]:
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
            url,
            "--study-name",
            study,
            "--server-cpus",
            str(server_cpu),
            "--load-cpus",
            str(load_cpu),
            "--out",
            str(tmp / f"host{server_cpu}.conf.py"),
            "--seed",
            str(server_cpu),
            "--no-clean-venv-check",  # the written file's boot: commands/test_tune.py
            *SHORT,
            *extra,
        ],  # fmt: skip
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO), **FAST_HEARTBEAT},
    )


@pytest.fixture
def two_cpus() -> None:
    """One CPU per host's server; a skip locally, a failure when CI=true."""
    if len(CPUS) < 2:
        unavailable("needs 2 CPUs: one per host's server")


def test_two_hosts_share_one_study(
    postgres_url: str, tmp_path: Path, since: float, two_cpus: None
) -> None:
    study = f"shared-{uuid.uuid4().hex[:8]}"
    a = _tune(postgres_url, study, CPUS[0], CPUS[1], tmp_path, 3, "--json")
    b = _tune(postgres_url, study, CPUS[1], CPUS[0], tmp_path, 3, "--json")
    out_a, err_a = a.communicate(timeout=240)
    out_b, err_b = b.communicate(timeout=240)
    assert a.returncode == 0, err_a
    assert b.returncode == 0, err_b

    attrs, records = load_records(postgres_url, study)
    assert len(records) == 6
    assert all(r.state in ("COMPLETE", "PRUNED") for r in records), [
        (r.state, r.fail_reason) for r in records
    ]
    assert sorted(r.number for r in records) == list(range(6))
    # Baselines enqueued once, by whichever tuner created the study.
    assert sorted(r.baseline for r in records if r.baseline) == ["2*cpus+1", "default"]
    frozen = optuna.load_study(study_name=study, storage=with_postgres_driver(postgres_url)).trials
    pids = {t.user_attrs["host"]["pid"] for t in frozen}
    assert pids == {a.pid, b.pid}  # both hosts ran trials, each recorded with its hardware
    assert all(t.user_attrs["host"]["server_cpu_count"] == 1 for t in frozen)
    assert attrs.hardware is not None and attrs.hardware["cpus"] == os.cpu_count()
    # What each tuner reported agrees with the shared study: a trial number means the same
    # trial on both hosts, and a tuner that saw the whole study confirmed its best trial.
    reports = [json.loads(out_a), json.loads(out_b)]
    assert sorted(report["trials"] for report in reports)[-1] == 6  # the last one saw all
    by_number = {r.number: r for r in records}
    usable = [r for r in records if r.state == "COMPLETE" and r.feasible and not r.baseline]
    best = max(usable, key=lambda r: r.rps)
    baselines = [r.settings for r in records if r.baseline]
    picked = []
    for report in reports:
        # The searched configs as measured (not their variants: default logging, lean)
        searched = [c for c in report["confirmation"] if c["label"] == f"trial {c['trial']}"]
        for entry in searched:
            assert entry["settings"] == by_number[entry["trial"]].settings, entry
        # saw all six measured (a trial the other host was still running counts in "trials")
        if report["completed"] == 6 and best.settings not in baselines:
            top = [c["trial"] for c in searched]
            assert top[:1] == [best.number], (top, best.number, [(r.number, r.rps) for r in usable])
            # Beside it (--top-k 1) only a trial its one run judged unfair by a little, which
            # the confirmation judges again (tune's `_nearly_fair_retry`): on a busy machine a
            # searched config can be that one (the soak's busy run found it so); and the trial
            # as fast within the study's noise with a lower p99 than the best's (tune's
            # `_tail_candidate`, tuner.workflow.lower_tail): CI's run measured one so.
            extras = [by_number[n] for n in top[1:]]
            retried = [r for r in extras if not r.feasible]
            lower_tails = [r for r in extras if r.feasible]
            assert len(retried) <= 1 and len(lower_tails) <= 1, top
            for record in retried:
                assert record.measurement is not None, record.number
                assert nearly_fair(record.measurement), record.number
            for record in lower_tails:
                assert record.figures.p99_ms < best.figures.p99_ms, (record.number, best.number)
            picked.append(top[0])
    assert len(set(picked)) <= 1  # both saw the whole study: the same best trial


def test_killed_host_leaves_its_trial_failed_not_running(
    postgres_url: str, tmp_path: Path, since: float, two_cpus: None
) -> None:
    study = f"killed-{uuid.uuid4().hex[:8]}"
    victim = _tune(postgres_url, study, CPUS[0], CPUS[1], tmp_path, 20)
    read_until(victim.stderr, "trial ", 1)
    wait_under_load(victim, "gunicorn")  # the next trial is being measured: RUNNING
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=60)
    running = [r.number for r in load_records(postgres_url, study)[1] if r.state == "RUNNING"]
    assert len(running) == 1
    wait_until_stale(postgres_url, study, running[0], FAST_HEARTBEAT)

    # The other host opens the study: the dead host's trial is failed, its work kept.
    other = _tune(postgres_url, study, CPUS[1], CPUS[0], tmp_path, 1, "--json")
    _, err = other.communicate(timeout=180)
    assert other.returncode == 0, err
    _, records = load_records(postgres_url, study)
    dead = records[running[0]]
    assert dead.state == "FAIL" and dead.fail_reason.startswith("abandoned: ")
    assert f"pid {victim.pid}" in dead.fail_reason
    assert "RUNNING" not in {r.state for r in records}
    assert sum(r.state == "COMPLETE" for r in records) == 2


def test_different_hardware_is_refused(postgres_url: str, tmp_path: Path) -> None:
    study = f"mixed-{uuid.uuid4().hex[:8]}"
    # A throughput study, as another host's tuner makes it: maximize (a study whose directions
    # differ is refused for that first).
    created = optuna.create_study(
        study_name=study, storage=with_postgres_driver(postgres_url), direction="maximize"
    )
    created.set_user_attr("setup", {"server": "gunicorn", "app": str(REPO / "apps/hello.py")})
    created.set_user_attr("hardware", {"cpu_model": "Other CPU 9000", "cpus": 64})
    created.set_user_attr("setup", {**created.user_attrs["setup"], "objective": "throughput"})
    refused = _tune(postgres_url, study, CPUS[0], CPUS[-1], tmp_path, 1)
    _, err = refused.communicate(timeout=60)
    assert refused.returncode == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--allow-mixed-hosts" in lines[0] and "Other CPU 9000" in lines[0]
