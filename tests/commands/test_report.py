"""`tuner report`, `studies`, `show` on real short studies: offline HTML, valid PNGs, bad input."""

from __future__ import annotations

import base64
import re
import statistics
import threading
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server

import httpx
import optuna
import pytest
from matplotlib import image as mpimg
from PIL import Image

from tests.conftest import unavailable
from tests.report.pages import STUDIES  # the `storage` fixture holds these studies
from tests.support.cli import run_tuner as tuner
from tuner.cli import main
from tuner.report.data import worker_axes

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Any absolute or protocol-relative URL in an attribute would make the page fetch something.
EXTERNAL = re.compile(r"""(?:src|href|url)\s*[=(]\s*["']?\s*(?:[a-z]+:)?//""", re.IGNORECASE)


@pytest.mark.parametrize("name", list(STUDIES))
def test_report_is_offline_html_with_valid_pngs(storage: str, tmp_path: Path, name: str) -> None:
    out = tmp_path / "report"
    done = tuner("report", "--study", name, "--storage", storage, "--out", str(out))
    assert done.returncode == 0, done.stderr
    page = (out / "report.html").read_text(encoding="utf-8")
    expected = ["history", "importances", "workers", "latency", "memory"]
    expected += ["front"] if name == "multi" else []
    for chart in expected:
        png = (out / f"{chart}.png").read_bytes()
        assert png.startswith(PNG_SIGNATURE)
        assert mpimg.imread(out / f"{chart}.png").ndim == 3  # decodes to pixel rows
        with Image.open(out / f"{chart}.png") as img:
            img.verify()
        assert f'id="{chart}"' in page
        assert base64.b64encode(png).decode() in page  # the page embeds the same image
    assert ("front.png" in {p.name for p in out.iterdir()}) == (name == "multi")
    assert "http://" not in page and "https://" not in page
    assert not EXTERNAL.search(page)
    for title in (
        "Top trials",
        "Failed and pruned trials",
        "Confirmation",
        "Baselines and ratios",
        "Machine, CPU split and versions",
    ):
        assert title in page
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp files left
    assert "Top trials" in done.stdout and name in done.stdout


def test_studies_lists_and_show_prints_best_and_pareto(storage: str) -> None:
    done = tuner("studies", "--storage", storage)
    assert done.returncode == 0, done.stderr
    for name, (server, objective) in STUDIES.items():
        row = next(line for line in done.stdout.splitlines() if f" {name} " in line)
        assert server in row and objective in row and "apps/hello.py" in row
    shown = tuner("show", "--study", "multi", "--storage", storage)
    assert shown.returncode == 0, shown.stderr
    assert "Top trials" in shown.stdout and "Pareto front" in shown.stdout
    single = tuner("show", "--study", "single", "--storage", storage)
    assert single.returncode == 0 and "Pareto front" not in single.stdout


def test_studies_are_plain_optuna_studies(storage: str) -> None:
    for name in STUDIES:
        study = optuna.load_study(study_name=name, storage=storage)
        assert study.user_attrs["setup"]["app"] == "apps/hello.py"
        complete = [t for t in study.trials if t.state.name == "COMPLETE"]
        assert complete and all(isinstance(t.user_attrs["settings"], dict) for t in complete)
        metrics = complete[0].user_attrs["metrics"]
        assert metrics["schema_version"] == 2
        assert metrics["rps"] == statistics.median(metrics["windows_rps"])
        assert complete[0].user_attrs["context"]["server"] == study.user_attrs["setup"]["server"]


def test_optuna_dashboard_serves_the_study(storage: str) -> None:
    try:  # a tool for users, not a dependency; the test extra installs it
        import optuna_dashboard as dashboard
    except ImportError:
        unavailable("optuna-dashboard is not installed (pip install -e '.[test]')")
    server = make_server("127.0.0.1", 0, dashboard.wsgi(storage), handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_port}/api/studies"
        studies = httpx.get(base, timeout=30).json()["study_summaries"]
        assert {s["study_name"] for s in studies} == set(STUDIES)
        study_id = next(s["study_id"] for s in studies if s["study_name"] == "single")
        detail = httpx.get(f"{base}/{study_id}", timeout=30).json()
        attrs = {a["key"]: a["value"] for a in detail["trials"][0]["user_attrs"]}
        assert attrs["baseline"] == "default" and "worker_class" in attrs["settings"]  # JSON text
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:  # keep pytest output clean
        pass


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["report", "--study", "nope"], "nope"),
        (["show", "--study", "nope"], "nope"),
        (["report", "--study", "single", "--out", "{file}"], "is a file"),
        (["report", "--study", "single", "--out", "/proc/tuner-report"], "/proc/tuner-report"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    storage: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    needle: str,
) -> None:
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    args = [arg.replace("{file}", str(a_file)) for arg in args]
    out_args = (
        ["--out", str(tmp_path / "out")] if args[0] == "report" and "--out" not in args else []
    )
    assert main([*args, "--storage", storage, *out_args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
    assert a_file.read_text() == "x"


def test_missing_storage_file_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/missing/s.db"
    for args in (["studies"], ["report", "--study", "x"], ["show", "--study", "x"]):
        assert main([*args, "--storage", url]) == 2
        assert capsys.readouterr().err.startswith("error:")
    assert not (tmp_path / "missing").exists()


def test_workers_figure_groups_trials_by_the_servers_concurrency_model() -> None:
    assert worker_axes("gunicorn", {"workers": 3, "worker_class": "gthread"}) == (3, "gthread")
    assert worker_axes("uwsgi", {"processes": 2, "gevent": 100, "protocol": "http"}) == (
        2,
        "http / gevent",
    )
    threaded = {"processes": 4, "threads": 8, "protocol": "http11-socket"}
    assert worker_axes("uwsgi", threaded) == (4, "http11-socket / threads")
    assert worker_axes("uwsgi", {}) == (1, "http-socket / processes")  # an old, partial record
