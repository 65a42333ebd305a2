"""nginx's upstream keep-alive pool (`front_keepalive`) as deployed: many clients in front,
what the server behind sees. Real gunicorn (gthread, which keeps connections) behind a real
nginx, with the recorder app logging the peer port of each request: one port per connection.

`keepalive N` is the idle connections each nginx worker caches, not a cap: nginx opens one
per request in flight. So many clients share a few kept connections when few requests are in
flight at once, and a pool smaller than the requests in flight closes and reopens connections.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from tests.support.cli import REPO, run_tuner
from tests.support.serverwatch import wait_none_left

RECORDER = str(REPO / "tests" / "support" / "apps" / "recorder_app.py")
CLIENTS = 256
# Connections the load does not open: the readiness checks of the server and of nginx.
SLACK = 8


def through_nginx(tmp_path: Path, keepalive: int, *load: str) -> tuple[Counter[str], int]:
    """A bench of the recorder behind nginx with `front_keepalive` = `keepalive`: the
    requests each connection to the server carried (by its client port), and nginx's
    worker count."""
    record, logs = tmp_path / f"k{keepalive}.log", tmp_path / f"logs-k{keepalive}"
    done = run_tuner(
        "bench", RECORDER, "--server", "gunicorn", "--front", "nginx",
        "--set", "worker_class=gthread", "--set", "workers=1", "--set", "threads=4",
        "--set", f"front_keepalive={keepalive}", "--connections", str(CLIENTS),
        "--warmup", "0.3", *load, "--log-dir", str(logs), "--json",
        env={"RECORD_FILE": str(record)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["requests"] > 0 and sum(result["errors"].values()) == 0, result["errors"]
    assert result["settings"]["front_keepalive"] == keepalive
    conf = (logs / "gunicorn.nginx" / "nginx.conf").read_text()
    assert f"keepalive {keepalive};" in conf
    found = re.search(r"worker_processes (\d+);", conf)
    assert found is not None, conf
    ports = Counter(line.split(" ")[2] for line in record.read_text().splitlines())
    return ports, int(found.group(1))


def test_many_clients_share_a_few_kept_connections(nginx_front, tmp_path):
    """256 clients at a rate far below what the server can do: few requests are in flight
    at once, so their requests reach the server over a handful of nginx's kept connections,
    not one per client."""
    ports, workers = through_nginx(tmp_path, 4, "--rate", "300", "--duration", "2")
    total = ports.total()
    assert total >= 300, total
    # Far fewer connections than clients (a stall on a busy machine puts a burst in flight,
    # which opens a few more: a bound, not the pool's size).
    assert len(ports) <= CLIENTS // 4, ports.most_common(8)
    # The pool's connections carried most of the requests, each reused across many.
    kept = ports.most_common(4 * workers)
    assert sum(n for _, n in kept) >= 0.5 * total, (kept, total)
    assert wait_none_left(nginx_front) == []


def test_a_pool_below_the_requests_in_flight_reopens_connections(nginx_front, tmp_path):
    """256 clients in a closed loop keep about 256 requests in flight: with keepalive 256
    each keeps a connection to the server for the whole run; with keepalive 4 nginx closes
    the idle ones past 4 per worker and opens new ones for the next requests."""
    large, _ = through_nginx(tmp_path, 256, "--duration", "1.5")
    small, workers = through_nginx(tmp_path, 4, "--duration", "1.5")
    # The large pool: a connection per client, kept, each carrying many requests.
    assert len(large) <= CLIENTS + SLACK, len(large)
    assert large.total() >= 2 * len(large), (large.total(), len(large))
    # The small pool: connections closed and reopened, far more of them than clients, and
    # none kept long: the pool's few hold no more than a small share of the requests.
    assert len(small) > 2 * len(large), (len(small), len(large))
    kept = small.most_common(4 * workers)
    assert sum(n for _, n in kept) <= 0.5 * small.total(), (kept, small.total())
    assert wait_none_left(nginx_front) == []
