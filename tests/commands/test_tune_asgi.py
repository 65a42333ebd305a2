"""`tuner tune` of an ASGI app on gunicorn, end to end: the study searches the uvicorn worker's
space (not gunicorn's WSGI one), measures its baselines, and writes a gunicorn.conf.py that
runs the uvicorn worker and boots with only its pip line. Short windows: wiring, not figures."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from tests.support.cli import REPO, SHORT
from tests.support.cli import run_tuner as tuner
from tests.support.serverwatch import wait_none_left
from tuner.apps import Interface
from tuner.search.study import load_records
from tuner.servers import adapter_serving


def test_tune_an_asgi_app_on_gunicorn_writes_a_uvicorn_worker_file(
    tmp_path: Path, since: float
) -> None:
    started = time.time()
    storage, out = f"sqlite:///{tmp_path}/s.db", tmp_path / "gunicorn.conf.py"
    done = tuner(
        "tune", "apps/async_wait.py", "--server", "gunicorn", "--trials", "4",
        "--top-k", "1", "--confirm-rounds", "1", "--storage", storage,
        "--study-name", "asgi", "--out", str(out), "--seed", "1", "--json", *SHORT,
    )  # fmt: skip
    assert wait_none_left(started) == []
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["interface"] == "asgi"  # the app, as the tuner found it
    assert result["trials"] == 4
    asgi = adapter_serving("gunicorn", Interface.ASGI)
    _, records = load_records(storage, "asgi")
    assert [r.baseline for r in records[:2]] == ["default", "2*cpus+1"]
    for record in records:  # every trial ran a config of the uvicorn worker's table
        assert set(record.settings) <= set(asgi.table.by_name), record.settings
        asgi.resolve(record.settings)
    assert any(r.measured and r.rps > 0 for r in records)
    text = out.read_text()
    assert "booted in a clean virtual environment" in text
    assert "uvicorn-worker==" in text and "worker_class = " in text
    assert "wsgi_app = 'apps.async_wait:app'" in text
    check = subprocess.run(
        ["gunicorn", "--check-config", "-c", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
