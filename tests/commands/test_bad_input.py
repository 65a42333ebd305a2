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
from tuner.servers.base import Bind

REPO = Path(__file__).resolve().parents[2]
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
        "asgi_app.py": "async def app(scope, receive, send):\n    pass\n",
        "asgi2_app.py": "def app(scope):\n    async def inner(receive, send):\n"
        "        pass\n    return inner\n",
    }
    out = {}
    for name, text in made.items():
        (tmp_path / name).write_text(text)
        out[name] = tmp_path / name
    return out


TUNE = ["tune", HELLO, "--server", "gunicorn", *SHORT]
COMPARE = ["compare", HELLO, "--servers", "gunicorn,uwsgi", "--storage", "{db}", *SHORT]
CASES = [
    # (argv after substitution, text the error line must contain)
    (TUNE + ["--connections", "0"], "connections 0: expected at least one"),
    (TUNE + ["--duration", "-1"], "duration_s -1.0: expected a number > 0"),
    (TUNE + ["--trials", "many"], "--trials: invalid int value: 'many'"),
    (TUNE + ["--server-cpus", "x"], "--server-cpus 'x': expected CPU numbers"),
    (TUNE + ["--server-cpus", "0", "--load-cpus", "0"], "share CPU 0"),
    (TUNE + ["--server-cpus", "999"], "CPU 999 is not available"),
    (TUNE + ["--path", "no-slash"], "--path 'no-slash': expected a URL path"),
    (TUNE + ["--path", "/a b"], "path '/a b': expected an absolute path"),
    (TUNE + ["--workload", "{tmp}/missing.toml"], "missing.toml: cannot read it"),
    (TUNE + ["--workload", "{tmp}/bad.toml"], "bad.toml: not valid TOML"),
    (TUNE + ["--workload", "{tmp}/wl_method.toml"], "method 'FETCH': expected one of"),
    (TUNE + ["--workload", "{tmp}/wl_crlf.toml"], "header 'X-A': expected a token"),
    (TUNE + ["--workload", "{tmp}/wl_empty.toml"], "wl_empty.toml: expected a non-empty"),
    (TUNE + ["--space", "{tmp}/missing.toml"], "missing.toml: cannot read search space"),
    (TUNE + ["--space", "{tmp}/bad.toml"], "bad.toml: invalid TOML"),
    (TUNE + ["--space", "{tmp}/space_type.toml"], "params.workers: type = 'integer'"),
    (TUNE + ["--space", "{tmp}/space_range.toml"], "params.workers: low 9 > high 1"),
    (TUNE + ["--storage", "nosuchdb://x"], "--storage 'nosuchdb://x': cannot open it"),
    (TUNE + ["--storage", "postgresql://me:s3cret@127.0.0.1:1/db"], "cannot open it"),
    (TUNE + ["--storage", "sqlite:////proc/no/such/dir/s.db"], "cannot create the folder"),
    (TUNE + ["--study-name", "a'b"], '--study-name "a\'b": use letters'),
    (TUNE + ["--study-name", "line\nbreak"], "--study-name 'line\\nbreak': use letters"),
    (TUNE + ["--study-name", "../up"], "--study-name '../up': use letters"),
    (TUNE + ["--max-error-rate", "2"], "--max-error-rate 2.0: expected a fraction"),
    (TUNE + ["--trials", "0"], "--trials 0: expected a whole number >= 1"),
    # The study's own folder (its trial logs go there) only becomes a folder once trials ran.
    (TUNE + ["--study-name", "mine", "--out", "{tmp}/mine"], "is the study's own folder"),
    (
        TUNE + ["--space", "search_spaces/uwsgi.toml"],
        "server = 'uwsgi'; expected server = 'gunicorn'",
    ),
    # --for-cpus: two sizes or more, each one the server's pinned CPUs can give.
    (TUNE + ["--for-cpus", "0.5,999"], "--for-cpus '0.5,999': 999 is above the"),
    (TUNE + ["--for-cpus", "0,1"], "--for-cpus '0,1': '0' is not a CPU limit"),
    (TUNE + ["--for-cpus=-0.5,1"], "--for-cpus '-0.5,1': '-0.5' is not a CPU limit"),
    (TUNE + ["--for-cpus", "0.5,many"], "'many' is not a CPU limit"),
    (TUNE + ["--for-cpus", "0.5,0.5"], "--for-cpus '0.5,0.5': 0.5 is given twice"),
    (TUNE + ["--for-cpus", "1"], "one size; a rule needs two at least (for one CPU limit, use"),
    (TUNE + ["--for-cpus", "0.5,1", "--cpu-limit", "1"], "each size is its own CPU limit"),
    (
        ["tune", HELLO, "--server", "werkzeug", "--for-cpus", "0.5,1", *SHORT],
        "--for-cpus: werkzeug writes no file sized at boot yet; servers that do: gunicorn",
    ),
    # compare --for-cpus: the same sizes as tune's, and servers that write a sized file.
    (COMPARE + ["--for-cpus", "0.5,999"], "--for-cpus '0.5,999': 999 is above the"),
    (COMPARE + ["--for-cpus", "0,1"], "--for-cpus '0,1': '0' is not a CPU limit"),
    (COMPARE + ["--for-cpus=-1,1"], "--for-cpus '-1,1': '-1' is not a CPU limit"),
    (COMPARE + ["--for-cpus", "1"], "one size; a rule needs two at least (for one CPU limit, use"),
    (COMPARE + ["--for-cpus", "0.5,1", "--cpu-limit", "1"], "each size is its own CPU limit"),
    (
        ["compare", HELLO, "--servers", "gunicorn,werkzeug", "--for-cpus", "0.5,1", *SHORT],
        "--for-cpus: werkzeug writes no file sized at boot yet; servers that do: gunicorn",
    ),
    (["tune", "apps/nope.py", "--server", "gunicorn"], "nope.py does not exist"),
    (["tune", "apps/hello.py:1bad", "--server", "gunicorn"], "callable '1bad' must be"),
    (["tune", "os", "--server", "gunicorn"], "app os:app is not usable: module 'os' has no"),
    (["tune", HELLO, "--server", "nginx"], "unknown server 'nginx'; valid servers: gunicorn"),
    # An app's interface decides which servers can run it, before any trial or file.
    (
        ["tune", "{tmp}/asgi_app.py", "--server", "waitress", *SHORT],
        "waitress cannot serve an ASGI 3 application; servers that can:",
    ),
    (
        ["bench", "{tmp}/asgi_app.py", "--server", "cheroot", *SHORT],
        "cheroot cannot serve an ASGI 3 application; servers that can:",
    ),
    (
        ["compare", "{tmp}/asgi_app.py", "--servers", "waitress,cheroot", *SHORT],
        "waitress cannot serve an ASGI 3 application",
    ),
    (["tune", "{tmp}/asgi2_app.py", "--server", "waitress", *SHORT], "ASGI 2 double callable"),
    # A file name the server cannot read its file from, refused before the study runs.
    (
        ["tune", "{tmp}/asgi_app.py", "--server", "hypercorn", "--out", "{tmp}/h.toml", *SHORT],
        "hypercorn reads a Python config file only from a name ending in .py; 'h.toml' does not",
    ),
    (
        ["compare", HELLO, HELLO, "--servers", "gunicorn,waitress", *SHORT],
        "both are a WSGI application; two entry points must be",
    ),
    (
        ["compare", HELLO, "{tmp}/asgi_app.py", HELLO, "--servers", "gunicorn", *SHORT],
        "give one app, or a project's two entry points",
    ),
    (
        ["compare", HELLO, "{tmp}/asgi_app.py", "--servers", "uvicorn", *SHORT],
        "only uvicorn serves these entry points; name another server",
    ),
    (
        ["compare", HELLO, "--servers", "waitress,cheroot", "--budget", "0", "--storage", "{db}"],
        "--budget 0: expected minutes > 0",
    ),
    (
        ["compare", HELLO, "--servers", "waitress,cheroot", "--budget", "-5", "--storage", "{db}"],
        "--budget -5: expected minutes > 0",
    ),
    (
        ["compare", HELLO, "--servers", "waitress,cheroot", "--budget", "5", "--full"],
        "--budget 5 with --full: a full compare runs --trials per server and has no budget",
    ),
    (["bench", HELLO, "--server", "gunicorn", "--set", "workers=abc", *SHORT], "workers='abc'"),
    (["bench", HELLO, "--server", "gunicorn", "--set", "wurkers=2", *SHORT], "setting 'wurkers'"),
    (["bench", HELLO, "--server", "gunicorn", "--set", "workers=0", *SHORT], "workers='0'"),
    (["bench", HELLO, "--server", "uwsgi", "--set", "listen=70000", *SHORT], "listen='70000'"),
    (["load", "http://10.1.2.3:80/", *SHORT], "host '10.1.2.3': the load generator only"),
    (["load", "ftp://127.0.0.1:21/", *SHORT], "url 'ftp://127.0.0.1:21/': expected http"),
    (["load", "http://127.0.0.1/", *SHORT], "with an explicit port"),
    (
        ["emit", "--study", "nope", "--trial", "0", "--out", "{out}", "--storage", "{db}"],
        "--study 'nope': no such study",
    ),
    (
        ["emit", "--study", "known", "--trial", "99", "--out", "{out}", "--storage", "{db}"],
        "--trial 99: study 'known' has no such trial",
    ),
    (
        ["emit", "--study", "x", "--trial", "0", "--out", "{out}", "--storage", "bad://"],
        "--storage 'bad://': cannot open it",
    ),
    (
        ["emit", "--study", "known", "--front", "--storage", "{db}"],
        "--front: study 'known' has no confirmed front",
    ),
    (
        ["emit", "--study", "known", "--point", "1", "--out", "{out}", "--storage", "{db}"],
        "--point 1: study 'known' has no confirmed front",
    ),
    (
        ["emit", "--study", "known", "--storage", "{db}"],
        "--out FILE: the file to write (or --front to list the front's points)",
    ),
]


def _case_id(argv: list[str]) -> str:
    """The words that make the case: the command and what differs from the common options."""
    common = {*TUNE[1:], *SHORT}
    return " ".join([argv[0]] + [Path(a).name for a in argv[1:] if a not in common])


@pytest.mark.parametrize(("argv", "needle"), CASES, ids=[_case_id(c[0]) for c in CASES])
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


def test_a_django_project_whose_settings_cannot_be_found_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sample project, pointed at from its own folder, with a settings module it lacks.
    project = REPO / "apps" / "djangoproject"
    monkeypatch.chdir(project)
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "mysite.production")
    out = tmp_path / "gunicorn.conf.py"
    argv = ["tune", "mysite.wsgi:application", "--server", "gunicorn", *SHORT]
    code = main([*argv, "--out", str(out), "--storage", f"sqlite:///{tmp_path}/s.db"])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "settings module 'mysite.production' cannot be imported" in lines[0]
    assert "DJANGO_SETTINGS_MODULE='mysite.production', from the environment" in lines[0]
    assert not out.exists() and not list(tmp_path.iterdir())


# --- what a value could inject into an emitted file ---------------------------------------------

NASTY = "x\nimport os; os.system('id')\r# ' \" \\ \u2028 %(home) $(HOME) @(/etc/passwd)"


def test_gunicorn_file_is_only_literal_assignments(tmp_path: Path) -> None:
    adapter = get_adapter("gunicorn")
    folder = f"/tmp/we'ird\"\ndir{NASTY}"
    text = adapter.render_artifact(
        AppRef("app", "app", folder), Bind.tcp("127.0.0.1", 8000), {}, header=f"study {NASTY}"
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
        adapter.render_artifact(
            AppRef("app", "app", f"/tmp/{NASTY}"), Bind.tcp("127.0.0.1", 8000), {}
        )
    text = adapter.render_artifact(
        AppRef("app", "app", "/srv/app"), Bind.tcp("127.0.0.1", 8000), {}, header=f"study {NASTY}"
    ).text
    body = [line for line in text.splitlines() if line and not line.startswith(("#", ";"))]
    assert body[0] == "[uwsgi]"
    assert all(" = " in line and "\r" not in line for line in body[1:])
    assert "http-socket = 127.0.0.1:8000" in body


def test_the_run_says_what_the_app_is_on_stdout_and_an_error_stays_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The interface found is the run's first line; it goes to stdout (where the results go),
    so an error met once the study opens is still the only line on stderr."""
    files(tmp_path)
    code = main(TUNE + ["--storage", "nosuchdb://x", "--out", str(tmp_path / "out.conf.py")])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out.splitlines()[0] == f"app {HELLO}: a WSGI application"
    assert len(captured.err.strip().splitlines()) == 1, captured.err
    code = main(["tune", str(tmp_path / "asgi_app.py"), "--server", "waitress", *SHORT])
    assert code == 2 and "an ASGI 3 application" in capsys.readouterr().err
