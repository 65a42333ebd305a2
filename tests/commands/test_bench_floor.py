"""`tuner bench` on a run our load generator capped: a real server, real load."""

from __future__ import annotations

import os
import re

from tests.support.cli import run_tuner as tuner

CPUS = sorted(os.sched_getaffinity(0))


def test_a_client_bound_bench_reads_as_a_floor_and_says_the_load_cpus_it_needed(since) -> None:
    """uWSGI's http-socket closes after each response: a new connection per request on hello
    costs our load generator about twice the CPU it costs the server (seen here: load 98% of
    its core, server 44% of its), so one load CPU is the limit on any machine, however fast."""
    done = tuner(
        "bench", "apps.hello:app", "--server", "uwsgi",
        "--set", "protocol=http-socket", "--set", "disable-logging=true",
        "--server-cpus", str(CPUS[0]), "--load-cpus", str(CPUS[-1]),
        "--connections", "64", "--duration", "2", "--warmup", "0.5",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = " ".join(done.stdout.split())
    assert re.search(r"verdict │ client_bound", table), table  # the premise
    assert re.search(r"throughput │ >= [\d,.]+ req/s", table), table
    assert "a floor: client_bound" in table
    notes = " ".join(done.stderr.split())
    needed = re.search(r"about (\d+) load CPUs would have been needed", notes)
    assert needed and int(needed.group(1)) >= 2, notes  # more than the one it had
    spare = len(CPUS) - 2
    assert (f"{spare} to spare" if spare else "this machine has none to spare") in notes, notes
