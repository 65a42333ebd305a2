"""CLI paths that no other test reaches: the internal-error branch, a shared study opened on
other hardware with --allow-mixed-hosts, and a config file that does not boot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import unavailable
from tuner.apps import parse_app
from tuner.cli import build_parser, main
from tuner.commands.setup import build_setup
from tuner.commands.tune_options import TuneOptions
from tuner.errors import ConfigError, TunerError
from tuner.report import data as report_data
from tuner.search.attrs import StudyAttrs
from tuner.search.study import StudySetup, open_study
from tuner.servers import get_adapter
from tuner.workflow.proven_file import BootCheck, ServerConfig, write_artifact

REPO = Path(__file__).resolve().parents[2]


def _boom(*_args: object) -> None:
    raise RuntimeError("a bug in the tuner\nwith a second line")


def test_a_bug_is_one_internal_error_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report_data, "list_studies", _boom)  # the command imports it late
    monkeypatch.delenv("TUNER_DEBUG", raising=False)
    assert main(["studies", "--storage", f"sqlite:///{tmp_path}/s.db"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "error: internal error: RuntimeError: a bug in the tuner "
        "(TUNER_DEBUG=1 shows the traceback; please report it)"
    ]
    monkeypatch.setenv("TUNER_DEBUG", "1")  # then the traceback is the point
    with pytest.raises(RuntimeError, match="a bug in the tuner"):
        main(["studies", "--storage", f"sqlite:///{tmp_path}/s.db"])


def _setup(tmp_path: Path, *extra: str) -> StudySetup:
    args = build_parser().parse_args(
        ["tune", str(REPO / "apps/hello.py"), "--server", "gunicorn"]
        + ["--storage", f"sqlite:///{tmp_path}/s.db", "--study-name", "shared", *extra]
        + ["--no-branch-starts"]
    )
    return build_setup(TuneOptions.from_args(args))


def test_allow_mixed_hosts_joins_a_study_measured_elsewhere(tmp_path: Path) -> None:
    created = open_study(_setup(tmp_path))
    theirs = {**(created.attrs().hardware or {}), "cpu_model": "Other CPU 9000", "cpus": 64}
    created.keep(StudyAttrs(hardware=theirs))
    with pytest.raises(ConfigError, match="Other CPU 9000.*--allow-mixed-hosts"):
        open_study(_setup(tmp_path))
    joined = open_study(_setup(tmp_path, "--allow-mixed-hosts"))
    assert joined.attrs().hardware == theirs  # the study keeps its own record
    # The baselines, enqueued once, not again.
    assert [r.baseline for r in joined.records()] == ["default", "2*cpus+1"]


def test_a_config_that_does_not_boot_is_not_written(tmp_path: Path, since: float) -> None:
    # uWSGI has no config check step: booting the file is what must catch a listen queue
    # above the kernel's somaxconn (uWSGI exits at start).
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    if somaxconn >= 65535:
        unavailable("somaxconn is at its maximum; every listen value boots")
    adapter = get_adapter("uwsgi")
    out = tmp_path / "uwsgi.ini"
    with pytest.raises(TunerError, match="did not boot, so it was not written") as caught:
        write_artifact(
            ServerConfig(
                adapter,
                parse_app(str(REPO / "apps/hello.py")),
                {**adapter.table.defaults(), "listen": somaxconn + 1},
            ),
            ["a header"],
            out,
            boot=BootCheck(server_cpus=(min(os.sched_getaffinity(0)),)),
        )
    assert "somaxconn" in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no file, no temp file left
