"""Bad input to every command and file format: one clear error line, exit 2, no traceback, and
no output file; and emitted config files that no value can inject code or options into."""

from __future__ import annotations

import ast
from pathlib import Path

import optuna
import pytest

from tuner.apps import AppRef
from tuner.cli import main
from tuner.errors import ConfigError
from tuner.servers import get_adapter

REPO = Path(__file__).resolve().parents[1]
HELLO = str(REPO / "apps/hello.py")
SHORT = ["--duration", "1", "--warmup", "0.5", "--connections", "8"]


def files(tmp_path: Path) -> dict[str, Path]:
    """Broken input files of every format the tuner reads."""
    made = {
        "bad.toml": "server = [unclosed\n",
        "space_type.toml": 'server = "gunicorn"\n[params.workers]\ntype = "integer"\n',
        "space_range.toml": (
            'server = "gunicorn"\n[params.workers]\ntype = "int"\nlow = 9\nhigh = 1\n'
        ),
        "wl_method.toml": '[[requests]]\nmethod = "FETCH"\npath = "/"\n',
        "wl_crlf.toml": '[[requests]]\npath = "/"\nheaders = { X-A = "1\\r\\nHost: evil" }\n',
        "wl_empty.toml": "",
    }
    out = {}
    for name, text in made.items():
        (tmp_path / name).write_text(text)
        out[name] = tmp_path / name
    return out


TUNE = ["tune", HELLO, "--server", "gunicorn", *SHORT]
CASES = [
    # (argv after substitution, text the error line must contain)
    (TUNE + ["--connections", "0"], "connections"),
    (TUNE + ["--duration", "-1"], "duration"),
    (TUNE + ["--trials", "many"], "--trials"),
    (TUNE + ["--server-cpus", "x"], "--server-cpus"),
    (TUNE + ["--server-cpus", "0", "--load-cpus", "0"], "0"),
    (TUNE + ["--server-cpus", "999"], "999"),
    (TUNE + ["--path", "no-slash"], "--path"),
    (TUNE + ["--path", "/a b"], "path"),
    (TUNE + ["--workload", "{tmp}/missing.toml"], "missing.toml"),
    (TUNE + ["--workload", "{tmp}/bad.toml"], "bad.toml"),
    (TUNE + ["--workload", "{tmp}/wl_method.toml"], "FETCH"),
    (TUNE + ["--workload", "{tmp}/wl_crlf.toml"], "header"),
    (TUNE + ["--workload", "{tmp}/wl_empty.toml"], "wl_empty.toml"),
    (TUNE + ["--space", "{tmp}/missing.toml"], "missing.toml"),
    (TUNE + ["--space", "{tmp}/bad.toml"], "bad.toml"),
    (TUNE + ["--space", "{tmp}/space_type.toml"], "workers"),
    (TUNE + ["--space", "{tmp}/space_range.toml"], "workers"),
    (TUNE + ["--storage", "nosuchdb://x"], "nosuchdb"),
    (TUNE + ["--storage", "postgresql://me:s3cret@127.0.0.1:1/db"], "cannot open it"),
    (TUNE + ["--storage", "sqlite:////proc/no/such/dir/s.db"], "--storage"),
    (TUNE + ["--study-name", "a'b"], "--study-name"),
    (TUNE + ["--study-name", "line\nbreak"], "--study-name"),
    (TUNE + ["--study-name", "../up"], "--study-name"),
    (TUNE + ["--max-error-rate", "2"], "--max-error-rate"),
    (["tune", "apps/nope.py", "--server", "gunicorn"], "nope.py"),
    (["tune", "apps/hello.py:1bad", "--server", "gunicorn"], "1bad"),
    (["tune", "os", "--server", "gunicorn"], "os"),
    (["tune", HELLO, "--server", "nginx"], "nginx"),
    (["bench", HELLO, "--server", "gunicorn", "--set", "workers=abc", *SHORT], "workers"),
    (["bench", HELLO, "--server", "gunicorn", "--set", "wurkers=2", *SHORT], "wurkers"),
    (["bench", HELLO, "--server", "gunicorn", "--set", "workers=0", *SHORT], "workers"),
    (["bench", HELLO, "--server", "uwsgi", "--set", "listen=70000", *SHORT], "listen"),
    (["load", "http://10.1.2.3:80/", *SHORT], "10.1.2.3"),
    (["load", "ftp://127.0.0.1:21/", *SHORT], "ftp"),
    (["load", "http://127.0.0.1/", *SHORT], "port"),
    (["emit", "--study", "nope", "--trial", "0", "--out", "{out}", "--storage", "{db}"], "nope"),
    (["emit", "--study", "known", "--trial", "99", "--out", "{out}", "--storage", "{db}"], "99"),
    (["emit", "--study", "x", "--trial", "0", "--out", "{out}", "--storage", "bad://"], "bad://"),
]


@pytest.mark.parametrize(("argv", "needle"), CASES, ids=[" ".join(c[0][-2:]) for c in CASES])
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    files(tmp_path)
    db = f"sqlite:///{tmp_path}/s.db"
    optuna.create_study(study_name="known", storage=db)
    out = tmp_path / "out.conf.py"
    argv = [a.format(tmp=tmp_path, out=out, db=db) for a in argv]
    if "--out" not in argv and argv[0] == "tune":
        argv += ["--out", str(out)]
    if "--storage" not in argv and argv[0] == "tune":
        argv += ["--storage", db]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "internal error" not in err and "Traceback" not in err
    assert needle in lines[0], lines[0]
    assert "s3cret" not in err  # a password never reaches the screen
    assert not out.exists()


def test_heartbeat_environment_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUNER_HEARTBEAT_GRACE_S", "soon")
    code = main([*TUNE, "--storage", f"sqlite:///{tmp_path}/s.db", "--out", str(tmp_path / "o")])
    assert code == 2
    assert "TUNER_HEARTBEAT_GRACE_S" in capsys.readouterr().err


# --- what a value could inject into an emitted file ---------------------------------------------

NASTY = "x\nimport os; os.system('id')\r# ' \" \\ \u2028 %(home) $(HOME) @(/etc/passwd)"


def test_gunicorn_file_is_only_literal_assignments(tmp_path: Path) -> None:
    adapter = get_adapter("gunicorn")
    folder = f"/tmp/we'ird\"\ndir{NASTY}"
    text = adapter.render_artifact(
        AppRef("app", "app", folder), "127.0.0.1", 8000, {}, header=f"study {NASTY}"
    ).text
    tree = ast.parse(text)
    for node in tree.body:  # nothing runs but name = literal
        assert isinstance(node, ast.Assign), ast.dump(node)
        ast.literal_eval(node.value)
    values = {n.targets[0].id: ast.literal_eval(n.value) for n in tree.body}  # type: ignore[attr-defined]
    assert values["chdir"] == folder and values["bind"] == ["127.0.0.1:8000"]


def test_uwsgi_file_refuses_values_it_cannot_write_safely() -> None:
    adapter = get_adapter("uwsgi")
    with pytest.raises(ConfigError, match="can be written to an ini file safely"):
        adapter.render_artifact(AppRef("app", "app", f"/tmp/{NASTY}"), "127.0.0.1", 8000, {})
    text = adapter.render_artifact(
        AppRef("app", "app", "/srv/app"), "127.0.0.1", 8000, {}, header=f"study {NASTY}"
    ).text
    body = [line for line in text.splitlines() if line and not line.startswith(("#", ";"))]
    assert body[0] == "[uwsgi]"
    assert all(" = " in line and "\r" not in line for line in body[1:])
    assert "http-socket = 127.0.0.1:8000" in body
