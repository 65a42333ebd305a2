"""The sized-at-boot benchmark's pure pieces (benchmarks/sizing_at_boot.py): the `sizing:` line
read back, the written files moved to another port, the table, and its bad input. No server."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.sizing_at_boot import (
    DEPLOYED,
    SIZED,
    STUDY_FILE,
    STUDY_TRIAL,
    PairFailed,
    Row,
    copy_bound,
    parse_args,
    parse_sizing_line,
    rule_text,
    table_lines,
)
from tests.conftest import ROOT
from tuner.apps import parse_app
from tuner.machine import bootlimits
from tuner.machine.sizing import SizePoint, fit_rule
from tuner.metrics.stats import Spread
from tuner.procs.process import LOOPBACK
from tuner.servers import get_adapter
from tuner.servers.base import Bind
from tuner.workflow.proven_file import DEPLOY_PORT

MB = 2**20


def literal(env: str = "WEB_CONCURRENCY") -> dict:
    """2 processes at 0.5 CPU, 4 at 1, one thread: 4 x CPUs; 40M master, 40M per process."""
    rule = fit_rule([SizePoint(0.5, 2, 1), SizePoint(1.0, 4, 1)], [(2, 120.0), (4, 200.0)], env)
    return rule.literal()


def line_for(cpus: float, memory: int | None = None, environ: dict | None = None) -> str:
    """The line a sized file logs, made by the code the file runs (bootlimits.size)."""
    box = {"cpus": cpus, "cpus_from": "cgroup v1 /x/cpu.cfs_quota_us", "memory": memory}
    box["memory_from"] = "cgroup v1 /x/memory.limit_in_bytes" if memory else ""
    return bootlimits.size(literal(), box, environ or {})["line"]


def test_the_sizing_line_reads_back_as_the_counts_the_file_chose() -> None:
    chose = parse_sizing_line(line_for(0.75))
    assert chose is not None
    assert (chose.cpus, chose.processes, chose.threads) == (0.75, 3, 1)
    assert chose.source == "cgroup v1 /x/cpu.cfs_quota_us" and chose.counts() == "3 x 1"


@pytest.mark.parametrize(
    ("cpus", "memory", "environ", "expected", "why"),
    [
        (0.25, None, None, (1, 1), "extrapolated"),  # one process, one thread: singular words
        (1.0, 160 * MB, None, (2, 1), "memory fits 2"),  # nested parentheses in the reason
        (1.0, None, {"WEB_CONCURRENCY": "7"}, (7, 1), "WEB_CONCURRENCY=7 overrides 4"),
    ],
)
def test_every_form_of_the_line_reads_back(
    cpus: float, memory: int | None, environ: dict | None, expected: tuple, why: str
) -> None:
    line = line_for(cpus, memory, environ)
    chose = parse_sizing_line(line)
    assert chose is not None, line
    assert (chose.processes, chose.threads) == expected and why in chose.why


def test_a_line_in_a_log_prefix_and_other_lines() -> None:
    assert parse_sizing_line("[INFO] Booting worker with pid: 42") is None
    prefixed = "[2026-12-02 05:00:00 +0000] [42] [INFO] " + line_for(0.75)
    assert parse_sizing_line(prefixed) is not None


def test_the_rule_in_words() -> None:
    assert rule_text(literal()) == "processes 4 x CPUs; threads 1"


@pytest.mark.parametrize("server", ["gunicorn", "uwsgi"])
def test_copies_of_the_written_sized_files_listen_on_the_given_port_only(
    server: str, tmp_path: Path
) -> None:
    """The premise of booting the written files: they name the deploy address, which the
    copies replace, and nothing else changes."""
    adapter = get_adapter(server)
    rule = fit_rule([SizePoint(0.5, 2, 1), SizePoint(1.0, 4, 1)], [(2, 120.0)], adapter.sizing_env)
    values = {"master": True} if "master" in adapter.table.by_name else {}
    app = parse_app("apps.fib:app", cwd=ROOT)
    written = []
    for artifact in adapter.render_sized(app, Bind.tcp(LOOPBACK, DEPLOY_PORT), values, rule):
        path = tmp_path / "written" / artifact.filename
        path.parent.mkdir(exist_ok=True)
        path.write_text(artifact.text)
        path.chmod(artifact.mode)
        written.append(path)
    copy_bound(written, tmp_path / "copy", 40123)
    for path in written:
        copied = tmp_path / "copy" / path.name
        moved = path.read_text().replace(DEPLOYED, f"{LOOPBACK}:40123")
        assert copied.read_text() == moved and copied.stat().st_mode == path.stat().st_mode
    assert any(f"{LOOPBACK}:40123" in (tmp_path / "copy" / p.name).read_text() for p in written)


def test_a_file_without_the_deploy_address_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "server.conf"
    path.write_text("bind = 'unix:/run/app.sock'\n")
    with pytest.raises(PairFailed, match="in none of"):
        copy_bound([path], tmp_path / "copy", 40123)


def _row(sized: float, study: float) -> Row:
    row = Row("fib", "gunicorn", rule="processes 4 x CPUs; threads 1", points="0.5 CPUs: 2 x 1")
    row.sized = parse_sizing_line(line_for(0.75))
    row.study_counts = "3 x 1"
    row.spreads = {
        SIZED: Spread.of([sized * 0.98, sized, sized * 1.01]),
        STUDY_FILE: Spread.of([study * 0.99, study, study * 1.02]),
        STUDY_TRIAL: None,
    }
    row.notes = ["study's file: 1 of 3 runs failed", "sized file: unfair in 1 of 3 runs"]
    row.sized_study_s, row.study_s = 480.0, 300.0
    return row


def test_the_table_says_met_against_the_target_and_shows_failures() -> None:
    met, missed = _row(950.0, 1000.0), _row(940.0, 1000.0)
    failed = Row("iowait", "uwsgi", error="tuner tune at exited 1: no config passed")
    lines = table_lines([met, missed, failed], 0.75)
    header, rows = lines[0], lines[2:5]
    assert "sized file at 0.75 CPUs" in header and ">= 0.95" in header
    assert "| 0.75 CPUs (cgroup v1), 3 x 1 | 3 x 1 |" in rows[0]
    assert "| 0.95 | yes |" in rows[0] and "| 0.94 | NO |" in rows[1]
    assert "no run" in rows[0] and "8.0 min | 5.0 min |" in rows[0]
    assert rows[2] == "| iowait | uwsgi | failed: tuner tune at exited 1: no config passed |"
    notes = "\n".join(lines[5:])
    assert "; study's file: 1 of 3 runs failed; sized file: unfair in 1 of 3 runs" in notes


def test_no_ratio_without_the_study_figure() -> None:
    row = _row(960.0, 1000.0)
    row.spreads[STUDY_FILE] = None
    assert row.ratio is None and "| n/a | n/a |" in table_lines([row], 0.75)[2]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--apps", "hello"], "--apps: 'hello' is not one of fib, iowait"),
        (["--servers", "werkzeug"], "werkzeug writes no file sized at boot"),
        (["--for-cpus", "1"], "one size"),
        (["--for-cpus", "0.5,999"], "999 is above the"),
        (["--at", "0.5"], "--at 0.5: one of --for-cpus"),
        (["--at", "999"], "--at 999: above the"),
        (["--at", "0"], "expected a number above 0"),
        (["--trials", "2.5"], "expected a whole number above 0"),
        (["--warmup", "-1"], "expected a number 0 or more"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
