"""`tune` with streams and a probe beside the load writes a config that survives them: a short
real study of gunicorn on the Flask SSE app, over workers and `timeout`, where one sync worker
leaves the probe waiting behind the streams (the orchestrator would restart it) and a 1-s
`timeout` kills the workers sending 2.5-s streams. The written file keeps the 30-s timeout and
more than one worker, its evidence shows no stream cut and no probe failed over every
confirmation round, and its header says what the streams ruled out. Two more studies over the
other failures: recycling (`max_requests` with a 1-s drain under 4-s streams, on gevent) and a
cap (granian's WSGI `blocking_threads` with more streams than threads): the written config
recycles nothing and leaves threads for the requests and the probe.

The draws are the seeded sampler's first, random ones (a timeout of 1 among them); that a
1-s timeout kills a sync worker silent for 2.5 s is gunicorn's mechanism, not a speed."""

from __future__ import annotations

import re
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.support.cli import run_tuner as tuner

pytestmark = pytest.mark.usefixtures("real_servers")

SPACE = """server = "gunicorn"

[params.workers]
low = 1
high = 4

[params.timeout]
choices = [1, 30]
lanes = ["streams"]
"""


def tune(
    tmp_path: Path, server: str, space: str, out: str, *options: str, stream_s: float
) -> tuple[str, str]:
    """A short study of the Flask SSE app with `space`: the file it wrote and its one
    "this config" header line."""
    space_file = tmp_path / "space.toml"
    space_file.write_text(space)
    written = tmp_path / out
    done = tuner(
        "tune", "apps/stream_sse.py", "--server", server, "--space", str(space_file),
        "--warmup", "0.3", "--stream-path", "/stream", *options,
        "--storage", f"sqlite:///{tmp_path}/s.db", "--out", str(written), "--no-clean-venv-check",
        env={"STREAM_SECONDS": str(stream_s), "TOKEN_MS": "50"}, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    text = written.read_text()
    header = [line for line in text.splitlines() if line.startswith("#   this config")]
    assert len(header) == 1, text
    return text, header[0]


def test_the_written_config_cuts_no_stream_and_keeps_its_probe(tmp_path: Path) -> None:
    text, header = tune(
        tmp_path, "gunicorn", SPACE, "gunicorn.conf.py",
        "--trials", "6", "--seed", "3", "--duration", "3", "-c", "4",
        "--streams", "2", "--probe", "/healthz", stream_s=2.5,
    )  # fmt: skip
    assert re.search(r"^timeout = 30\b", text, re.M), text
    workers = int(re.search(r"^workers = (\d+)", text, re.M).group(1))  # type: ignore[union-attr]
    assert workers >= 2, text
    assert ", 0 cut;" in header, header
    assert re.search(r"streams [1-9]\d* completed, 0 cut; probe 0 of [1-9]\d* failed", header)
    assert "# timeout = 30: with streams, timeout = 1 cut " in text, text
    assert "beside it 2 streams on /stream; probe /healthz" in text


# Recycling: a gevent worker recycled every 30 requests with a 1-s drain is killed with 4-s
# streams on it (gunicorn's graceful_timeout is the drain's limit, not a speed).
RECYCLING = """server = "gunicorn"

[params.worker_class]
choices = ["gevent"]

[params.max_requests]
choices = [0, 30]

[params.graceful_timeout]
choices = [1]
when = { max_requests = [30] }
lanes = ["streams"]
"""


def test_the_written_config_does_not_recycle_workers_under_their_streams(tmp_path: Path) -> None:
    text, header = tune(
        tmp_path, "gunicorn", RECYCLING, "gunicorn.conf.py",
        "--trials", "4", "--seed", "1", "--duration", "4", "-c", "2", "--streams", "2",
        stream_s=4,
    )  # fmt: skip
    assert re.search(r"^max_requests = 0\b", text, re.M), text
    assert re.search(r"streams [1-9]\d* completed, 0 cut", header), header
    ruled_out = r"^# max_requests = 0\b.*: with streams, max_requests = 30\b.* cut [1-9]\d* of "
    assert re.search(ruled_out, text, re.M), text


# A cap: on granian's WSGI interface each stream holds one of its blocking threads, so with two
# threads and three streams the probe waits behind streams that never end for long
# (emmett-framework/granian#873).
CAP = """server = "granian"

[params.blocking_threads]
choices = [2, 8]
"""


def test_the_written_config_leaves_threads_for_the_probe_beside_the_streams(
    tmp_path: Path,
) -> None:
    text, header = tune(
        tmp_path, "granian", CAP, "granian.sh",
        "--trials", "6", "--seed", "1", "--duration", "4", "-c", "2",
        "--streams", "3", "--probe", "/healthz", stream_s=3,
    )  # fmt: skip
    assert "GRANIAN_BLOCKING_THREADS=2\n" not in text, text
    assert re.search(r"probe 0 of [1-9]\d* failed", header), header
    # The starving config was drawn and lost: pruned (its request lane starved first) or
    # ruled out by the lanes; either way not the pick.
    study = optuna.load_study(
        study_name="stream_sse-granian-throughput", storage=f"sqlite:///{tmp_path}/s.db"
    )
    starved = [t for t in study.trials if t.params.get("blocking_threads") == 2]
    assert starved, [t.params for t in study.trials]
    assert all(t.state is TrialState.PRUNED or "fail_reason" in t.user_attrs for t in starved), [
        (t.state, t.user_attrs.get("fail_reason")) for t in starved
    ]
