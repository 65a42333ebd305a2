"""Container limits: --cpu-limit and --memory-limit put the server tree in a real cgroup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import require_adapter
from tests.support.cli import REPO, run_tuner
from tuner.errors import ConfigError
from tuner.machine import limits as limits_module
from tuner.machine.limits import Cgroup, Limits, parse_cpu_limit, parse_memory_limit
from tuner.servers import get_adapter

# Runs the tuner or a server in a subprocess: not in the fast set.
pytestmark = pytest.mark.usefixtures("real_servers")

SHORT = ("--duration", "1.5", "--warmup", "0.3", "--json")


def tuner_cgroups() -> set[Path]:
    """Every tuner cgroup folder on this machine now."""
    found: set[Path] = set()
    for base in limits_module._sweep_bases():
        found |= set(base.glob("tuner-*"))
    return found


@pytest.fixture
def cgroups_left_unchanged(real_servers: None) -> object:
    """Fails the test if it leaves a tuner cgroup behind."""
    before = tuner_cgroups()
    yield
    deadline = time.monotonic() + 10
    while (left := tuner_cgroups() - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"cgroups left behind: {sorted(map(str, left))}"


def test_limit_options_parse_and_describe() -> None:
    assert parse_cpu_limit("1.5") == 1.5
    assert parse_memory_limit("512M") == 512 * 2**20
    assert parse_memory_limit("1.5G") == 1536 * 2**20
    assert parse_memory_limit("800MiB") == 800 * 2**20
    for bad in ("0", "-1", "many", "nan"):
        with pytest.raises(ConfigError, match="--cpu-limit"):
            parse_cpu_limit(bad)
    for bad in ("12Q", "", "8M"):  # 8M is below the 16M floor
        with pytest.raises(ConfigError, match="--memory-limit"):
            parse_memory_limit(bad)
    assert Limits(1.5, 512 * 2**20).describe() == "1.5 CPUs, 512M memory"
    assert Limits(None, 3 * 2**30).describe() == "3G memory"
    assert not Limits() and Limits(0.5)
    assert Limits.from_dict(Limits(0.5, 2**30).to_dict()) == Limits(0.5, 2**30)
    assert Limits(0.5).effective_cpus(2) == 0.5 and Limits(4).effective_cpus(2) == 2


def test_the_fork_rule_follows_a_fractional_cpu_quota() -> None:
    gunicorn = get_adapter("gunicorn")
    rule = {b.label: b for b in gunicorn.baselines(1.5)}["2*cpus+1"]
    assert gunicorn.processes(rule.values) == 4
    rule = {b.label: b for b in gunicorn.baselines(0.5)}["2*cpus+1"]
    assert gunicorn.processes(rule.values) == 2


def test_no_writable_cgroup_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits_module, "_v2_root", lambda: None)
    monkeypatch.setattr(limits_module, "_v1_mount", lambda controller: Path("/proc/1"))
    with pytest.raises(ConfigError) as caught:
        Cgroup.create(Limits(0.5))
    message = str(caught.value)
    assert "\n" not in message and "writable cgroup" in message


def test_cpu_quota_throttles_the_whole_tree(cgroups_left_unchanged: object) -> None:
    require_adapter("gunicorn")
    done = run_tuner(
        "bench", "apps/cpu.py", "--server", "gunicorn", "--set", "workers=2",
        "--cpu-limit", "0.3", *SHORT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["limits"] == {"cpus": 0.3, "memory_bytes": None}
    # ~5 ms of CPU per request against 30 ms of CPU per 100 ms period: throttled most periods.
    assert result["cgroup"]["throttled_fraction"] > 0.3
    assert result["cgroup"]["throttled_s"] > 0


def test_an_oom_killed_config_fails_with_that_reason(cgroups_left_unchanged: object) -> None:
    require_adapter("gunicorn")
    done = run_tuner(
        "bench", "apps/json_api.py", "--server", "gunicorn", "--set", "workers=4",
        "--memory-limit", "40M", *SHORT,
    )  # fmt: skip
    assert done.returncode == 1
    line = done.stderr.strip()
    assert "\n" not in line
    assert "OOM-killed" in line and "40M memory" in line


def test_sigkill_of_the_tuner_removes_the_cgroup(cgroups_left_unchanged: object) -> None:
    require_adapter("gunicorn")
    tuner = subprocess.Popen(
        [sys.executable, "-m", "tuner", "bench", "apps/hello.py", "--server", "gunicorn",
         "--cpu-limit", "0.5", "--memory-limit", "256M", "--duration", "60"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    try:
        mine = f"tuner-{tuner.pid}-"
        deadline = time.monotonic() + 30
        while not [p for p in tuner_cgroups() if p.name.startswith(mine)]:
            assert tuner.poll() is None and time.monotonic() < deadline, "no cgroup appeared"
            time.sleep(0.05)
        # the server joined it: its cgroup.procs lists the server's processes
        deadline = time.monotonic() + 30
        ours = [p for p in tuner_cgroups() if p.name.startswith(mine)]
        while not all((p / "cgroup.procs").read_text().split() for p in ours):
            assert time.monotonic() < deadline, "the server never joined its cgroup"
            time.sleep(0.05)
    finally:
        tuner.send_signal(signal.SIGKILL)
        tuner.wait()
    # cgroups_left_unchanged polls until the watchdog's cleaner removed them


def test_tune_under_limits_uses_them_for_baselines_and_says_so(tmp_path: Path) -> None:
    require_adapter("gunicorn")
    out = tmp_path / "gunicorn.conf.py"
    done = run_tuner(
        "tune", "apps/hello.py", "--server", "gunicorn", "--trials", "2", "--duration", "0.6",
        "--warmup", "0.2", "--cpu-limit", "0.5", "--memory-limit", "512M", "--top-k", "1",
        "--confirm-rounds", "1", "--storage", f"sqlite:///{tmp_path / 'db.sqlite'}",
        "--out", str(out), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["interface"] == "wsgi"
    rule = [c for c in summary["confirmation"] if c["label"] == "2*cpus+1"]
    assert len(rule) == 1 and rule[0]["settings"]["workers"] == 2  # 2 x 0.5 + 1
    assert rule[0]["trial"] == 1  # the study measured the same rule as its trial 1
    assert "limited to 0.5 CPUs, 512M memory" in out.read_text()
