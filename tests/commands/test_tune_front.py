"""A front of known shape, found and confirmed: gunicorn's sync workers over `workers` only,
on an app whose memory per worker and latency per worker count the test sets
(tests/support/apps/front_shape_app.py). More workers hold more memory and, at a rate one
worker carries only with a queue behind each slow request, give a lower p99."""

from __future__ import annotations

import json

from tests.support.cli import REPO, run_tuner

# 40 MB per worker; 1 request in 200 sleeps 200 ms, the others 5 ms; 50 req/s offered: one
# worker carries it (about 30% busy), but the ~10 requests that arrive during a slow one wait.
SHAPE = {
    "FRONT_SHAPE_MB": "40",
    "FRONT_SHAPE_FAST_MS": "5",
    "FRONT_SHAPE_SLOW_MS": "200",
    "FRONT_SHAPE_EVERY": "200",
}
SPACE = 'server = "gunicorn"\n\n[params.workers]\nchoices = [1, 2, 4]\n'


def test_the_confirmed_front_orders_workers_by_memory_and_latency(tmp_path, since) -> None:
    space = tmp_path / "workers.toml"
    space.write_text(SPACE)
    out = tmp_path / "gunicorn.conf.py"
    done = run_tuner(
        "tune",
        str(REPO / "tests/support/apps/front_shape_app.py"),
        "--server",
        "gunicorn",
        "--objective",
        "multi",
        "--rate",
        "50",
        "--space",
        str(space),
        "--trials",
        "5",
        "--confirm-rounds",
        "5",
        "--no-branch-starts",
        "--no-clean-venv-check",
        "--duration",
        "4",
        "--warmup",
        "1",
        "--connections",
        "16",
        "--storage",
        f"sqlite:///{tmp_path}/s.db",
        "--out",
        str(out),
        "--json",
        timeout=900,
        env=SHAPE,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    front = result["front"]
    assert front["rate_rps"] == 50 and front["rate_source"] == "--rate"
    points = front["points"]
    workers = [point["settings"]["workers"] for point in points]
    pss = [point["pss_mb"]["median"] for point in points]
    p99 = [point["p99_ms"]["median"] for point in points]
    # One worker is the cheapest point; more workers cost more memory and buy a lower p99.
    assert len(points) >= 2, points
    assert workers[0] == 1 and workers == sorted(workers), workers
    assert pss == sorted(pss) and p99 == sorted(p99, reverse=True), (pss, p99)
    assert p99[0] > 3 * p99[-1], p99  # the queue behind a slow request, gone
    assert pss[-1] - pss[0] > 30 * (workers[-1] - workers[0]), pss  # ~40 MB a worker
    assert sum(point["picked"] for point in points) == 1 and out.exists()
