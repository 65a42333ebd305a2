"""`tune` with streams and a probe beside the load writes a config that survives them: a short
real study of gunicorn on the Flask SSE app, over workers and `timeout`, where one sync worker
leaves the probe waiting behind the streams (the orchestrator would restart it) and a 1-s
`timeout` kills the workers sending 2.5-s streams. The written file keeps the 30-s timeout and
more than one worker, its evidence shows no stream cut and no probe failed over every
confirmation round, and its header says what the streams ruled out.

The draws are the seeded sampler's first, random ones (a timeout of 1 among them); that a
1-s timeout kills a sync worker silent for 2.5 s is gunicorn's mechanism, not a speed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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


def test_the_written_config_cuts_no_stream_and_keeps_its_probe(tmp_path: Path) -> None:
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    out = tmp_path / "gunicorn.conf.py"
    done = tuner(
        "tune", "apps/stream_sse.py", "--server", "gunicorn", "--space", str(space),
        "--trials", "6", "--seed", "3", "--duration", "3", "--warmup", "0.3", "-c", "4",
        "--streams", "2", "--stream-path", "/stream", "--probe", "/healthz",
        "--storage", f"sqlite:///{tmp_path}/s.db", "--out", str(out), "--no-clean-venv-check",
        env={"STREAM_SECONDS": "2.5", "TOKEN_MS": "50"}, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    text = out.read_text()
    assert re.search(r"^timeout = 30\b", text, re.M), text
    workers = int(re.search(r"^workers = (\d+)", text, re.M).group(1))  # type: ignore[union-attr]
    assert workers >= 2, text
    header = [line for line in text.splitlines() if line.startswith("#   this config")]
    assert len(header) == 1 and ", 0 cut;" in header[0], header
    assert re.search(r"streams [1-9]\d* completed, 0 cut; probe 0 of [1-9]\d* failed", header[0])
    assert "# timeout = 30: with streams, timeout = 1 cut " in text, text
    assert "beside it 2 streams on /stream; probe /healthz" in text
