"""An ASGI app that blocks its event loop is reported, and its correct twin is not: `tuner
bench` on uvicorn with apps/async_blocking.py (`time.sleep` inside `async def`) and
apps/async_wait.py (`asyncio.sleep`), with one worker (uvicorn's own process runs the loop) and
two (its spawned workers do).

The premise holds with a wide margin on a slower machine: the blocking app's loop sleeps 50 ms
per request against well under 1 ms of work, so it sleeps in `time.sleep` nearly all of the
run, and the awaiting app's loop never sleeps outside epoll, however slow its work."""

from __future__ import annotations

import json

import pytest

from tests.conftest import require_adapter
from tests.support.cli import run_tuner as tuner
from tuner.metrics.loops import BLOCKED_SHARE

pytestmark = pytest.mark.usefixtures("real_servers", "uvicorn")

RUN = ["--duration", "1.5", "--warmup", "0.5", "--connections", "16", "--json"]


@pytest.fixture
def uvicorn() -> None:
    require_adapter("uvicorn")


def bench(app: str, workers: int) -> dict:
    done = tuner(
        "bench", app, "--server", "uvicorn", "--set", f"workers={workers}",
        "--set", "access_log=false", *RUN,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("workers", [1, 2])
def test_time_sleep_inside_async_def_is_reported_as_a_blocked_loop(workers: int) -> None:
    result = bench("apps/async_blocking.py", workers)
    blocked = result.get("blocked_loop")
    assert blocked is not None, result["notes"]
    assert blocked["call"] == "clock_nanosleep"
    # Every worker's loop is blocked alike; the worst far over the line.
    assert blocked["loops"] == blocked["blocked_loops"] == workers
    assert blocked["share"] > (1 + BLOCKED_SHARE) / 2
    (note,) = [n for n in result["notes"] if n.startswith("blocked_loop: ")]
    assert f"worker pid {blocked['pid']} spent" in note and "time.sleep" in note
    # A note, not a reason to reject the config: no server setting fixes the app.
    assert not result["unfair"]


@pytest.mark.parametrize("workers", [1, 2])
def test_asyncio_sleep_leaves_the_loop_free(workers: int) -> None:
    result = bench("apps/async_wait.py", workers)
    assert "blocked_loop" not in result
    assert not any(n.startswith("blocked_loop") for n in result["notes"])
    assert result["requests"] > 0
