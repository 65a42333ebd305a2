"""`tuner compare` on apps/hello.py with a few short trials per server: table, files, studies."""

from __future__ import annotations

import html
import json
from pathlib import Path

import optuna
import pytest

from tests.report.pages import COMPARED_SERVERS as SERVERS  # the `compared` fixture
from tests.support.cli import SHORT
from tuner.cli import main


def test_compare_prints_table_and_writes_one_config_per_server(compared) -> None:
    done, folder = compared
    out = folder / "cmp"  # beside the SQLite file, like `tune`
    assert "Servers side by side" in done.stdout
    for server in SERVERS:
        rows = [line for line in done.stdout.splitlines() if line.startswith(f"│ {server} ")]
        assert len(rows) == 2, done.stdout  # default and tuned
        assert "x1.00" in rows[0]  # the default against itself
    assert "Tuned by tuner" in (out / "gunicorn.conf.py").read_text()
    assert "Tuned by tuner" in (out / "uwsgi.ini").read_text()
    summary = json.loads((out / "compare.json").read_text())
    assert [s["server"] for s in summary["servers"]] == list(SERVERS)
    for entry in summary["servers"]:
        assert entry["default"]["rps"]["median"] > 0
        assert entry["tuned"] is not None and entry["config_file"].startswith(str(out))
    page = (out / "compare.html").read_text()
    assert (out / "compare.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "data:image/png;base64," in page and "http://" not in page and "https://" not in page


def test_the_page_marks_client_bound_figures_and_ranks_no_server_by_them(compared) -> None:
    """Whichever figures our load generator capped in this run (compare.json says which),
    the page and the terminal mark exactly those as floors, and name a fastest server only
    when no tuned server was capped."""
    done, folder = compared
    out = folder / "cmp"
    page = html.unescape((out / "compare.html").read_text())
    summary = json.loads((out / "compare.json").read_text())
    for entry in summary["servers"]:
        for name in ("default", "tuned"):
            figures = entry[name]
            if name == "tuned" and entry["tuned_is_default"]:
                continue
            note = f"{entry['server']} {name}: client_bound"
            assert (note in page) == figures["client_bound"], (note, figures)
            assert (note in " ".join(done.stdout.split())) == figures["client_bound"]
    bound = any(entry["tuned"]["client_bound"] for entry in summary["servers"])
    assert ("fastest tuned:" in page) != bound
    assert ("no fastest tuned server named" in page) == bound


def test_each_server_has_a_plain_optuna_study(compared) -> None:
    _, folder = compared
    for server in SERVERS:
        study = optuna.load_study(study_name=f"cmp-{server}", storage=f"sqlite:///{folder}/s.db")
        assert study.user_attrs["setup"]["server"] == server
        run = [t for t in study.trials if t.state.name != "WAITING"]  # branch starts may wait
        assert len(run) == 3


@pytest.mark.parametrize(
    ("servers", "needle"), [("gunicorn,nginx", "nginx"), ("uwsgi", "at least two")]
)
def test_bad_servers_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], servers: str, needle: str
) -> None:
    argv = [
        "compare",
        "apps/hello.py",
        "--servers",
        servers,
        "--storage",
        f"sqlite:///{tmp_path}/s.db",
    ]
    assert main([*argv, *SHORT]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], lines
    assert list(tmp_path.iterdir()) == []
