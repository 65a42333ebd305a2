"""A real gunicorn access log, round trip: load with concrete paths -> log -> from-log -> bench."""

from __future__ import annotations

import json

from tests.support.cli import REPO
from tests.support.cli import run_tuner as tuner
from tuner.apps import parse_app
from tuner.loadgen import load_workload_file
from tuner.procs.process import ServerProcess, free_port
from tuner.servers.base import Bind

SHORT = ["--duration", "1", "--warmup", "0.3", "--connections", "8"]
USERS = {f"/users/{n}": w for n, w in [(1, 4), (2, 2), (3, 1), (4, 1)]}
ORDERS = [
    "/orders/3f2504e0-4f89-11d3-9a0c-0305e82c3301",
    "/orders/9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d",
]
TRAFFIC = f"""
[[requests]]
path = "/users/{{int}}"
weight = 6
[requests.paths]
{chr(10).join(f'"{path}" = {weight}' for path, weight in USERS.items())}

[[requests]]
paths = {json.dumps(ORDERS)}
weight = 3

[[requests]]
path = "/search?q=wsgi"

[[requests]]
method = "POST"
path = "/users"
body = "{{}}"
"""


def test_gunicorn_access_log_round_trip(since, gunicorn, tmp_path) -> None:
    traffic = tmp_path / "traffic.toml"
    traffic.write_text(TRAFFIC)
    port = free_port()
    # accesslog: gunicorn's `--access-logfile -`, into the server's log beside its own lines.
    settings = gunicorn.resolve({"accesslog": True, "workers": 2})
    app = parse_app("apps/hello.py", REPO)
    spec = gunicorn.launch(app, Bind.tcp("127.0.0.1", port), settings, tmp_path)
    log = tmp_path / "server.log"
    with ServerProcess.start(spec, cpus=(0,), log_path=log, host="127.0.0.1", port=port):
        url = f"http://127.0.0.1:{port}/"
        done = tuner("load", url, "--workload", str(traffic), "--json", *SHORT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["requests"] > 100

    workload = tmp_path / "workload.toml"
    done = tuner("workload", "from-log", str(log), "--out", str(workload))
    assert done.returncode == 0, done.stderr
    # gunicorn's own lines ("Booting worker ...") share the file: counted, not fatal.
    assert "lines of" in done.stderr and "are not in the nginx combined" in done.stderr
    assert "not replayed: " in done.stderr and "POST/PUT/PATCH/DELETE" in done.stderr
    entries = {r.path: r for r in load_workload_file(workload).requests}
    # Every concrete path the load sent comes back, under the template it was sent as.
    users = dict(entries["/users/{int}"].paths)
    assert set(users) == set(USERS)
    assert set(dict(entries["/orders/{uuid}"].paths)) == set(ORDERS)
    assert entries["/search?q=wsgi"].paths == ()
    # The log's mix is the load's mix (6 : 3 : 1, paths 4 : 2 : 1 : 1), up to the requests
    # in flight when the run ended and the readiness probe's GET /.
    total = sum(entries[p].weight for p in ["/users/{int}", "/orders/{uuid}", "/search?q=wsgi"])
    assert abs(entries["/users/{int}"].weight / total - 0.6) < 0.02
    assert abs(entries["/orders/{uuid}"].weight / total - 0.3) < 0.02
    assert abs(users["/users/1"] / users["/users/3"] - 4) < 0.2

    done = tuner(
        "bench", "apps/hello.py", "--server", "gunicorn", "--workload", str(workload), "--json",
        *SHORT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["requests"] > 100 and sum(result["errors"].values()) == 0


def test_bench_probes_readiness_on_a_concrete_path(since, gunicorn, tmp_path) -> None:
    # fib answers /<int> and /, so the template `/{int}` itself would be a 404.
    workload = tmp_path / "fib.toml"
    workload.write_text('[[requests]]\npath = "/{int}"\n[requests.paths]\n"/9000" = 3\n"/10" = 1\n')
    done = tuner(
        "bench",
        "apps/fib.py",
        "--server",
        "gunicorn",
        "--workload",
        str(workload),
        "--json",
        *SHORT,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["requests"] > 100 and sum(result["errors"].values()) == 0
