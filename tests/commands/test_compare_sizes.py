"""`compare --for-cpus`: a short real race of two servers that write files sized at boot. Each
server's study runs at the largest size; each finalist (both: two servers are fewer than the
three the final always takes) then measures its counts at the other size, and its file computes
its counts at boot by the rule through both points. The terminal, the page and compare.json show
each server's points and rule. Its structure is tested, not its figures.

No branch starts: they would put gunicorn's gevent worker in the first rung, and where it wins
at 1 CPU its count-only study at half a CPU draws gevent alone, which a run can judge unfair in
every trial (fairness 0.49-0.89 seen), so that no count passes and no rule can be fitted. The
seeded draws after the baselines are a gthread config for gunicorn, so every model the test
meets is fair at half a CPU."""

from __future__ import annotations

import ast
import html
import json
import time
from pathlib import Path

import optuna
import pytest

from tests.support.cli import SHORT, SHORT_RACE
from tests.support.cli import run_tuner as tuner
from tests.support.serverwatch import wait_none_left
from tuner.machine.sizing import SizingRule

pytestmark = pytest.mark.usefixtures("real_servers")

# The file of each server that holds the rule: gunicorn's config computes its own counts;
# uWSGI's ini cannot, so a launcher beside it does (docs/pages/deployed/limits.md).
RULE_FILE = {"gunicorn": "gunicorn.conf.py", "uwsgi": "uwsgi_sized.py"}


def written_rule(path: Path) -> object:
    """The SIZING_RULE literal a written file holds."""
    line = next(line for line in path.read_text().splitlines() if line.startswith("SIZING_RULE"))
    return ast.literal_eval(line.removeprefix("SIZING_RULE = "))


def test_compare_for_cpus_writes_each_servers_file_sized_at_boot(tmp_path: Path) -> None:
    started = time.time()
    storage = f"sqlite:///{tmp_path}/s.db"
    done = tuner(
        "compare",
        "apps/hello.py",
        "--servers",
        ",".join(RULE_FILE),
        "--for-cpus",
        "0.5,1",
        "--trials",
        "3",
        "--no-branch-starts",
        *SHORT_RACE,
        "--name",
        "sized",
        "--storage",
        storage,
        *SHORT,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert wait_none_left(started) == []
    assert "race: at 1 CPUs; then each finalist draws 6 trials at 0.5 CPUs" in done.stdout
    summary = json.loads((tmp_path / "sized" / "compare.json").read_text())
    assert summary["for_cpus"] == [0.5, 1.0] and summary["left_out"] == []
    rows = {row["server"]: row for row in summary["servers"]}
    assert set(rows) == set(RULE_FILE)
    terminal = " ".join(done.stdout.split())
    page = " ".join(html.unescape((tmp_path / "sized" / "compare.html").read_text()).split())
    for server, row in rows.items():
        assert row["finalist"], row
        rule = SizingRule.from_dict(row["sizing"])
        assert [point.cpus for point in rule.points] == [0.5, 1.0]
        assert rule.env and rule.master_mb > 0 and rule.process_mb > 0
        # The file the server boots computes its counts by this very rule.
        assert row["config_file"] is not None
        assert written_rule(tmp_path / "sized" / RULE_FILE[server]) == rule.literal()
        # Each server's points and rule show, on the terminal and on the page.
        for shown in (terminal, page):
            assert f"Sized at boot: {server}" in shown
            for line in rule.describe_lines()[:3]:  # the rule and both points
                assert " ".join(line.split()) in shown, line
    assert "ranked at 1 CPUs, the largest size" in page
    # Each server's study at the reference size, and its own count-only study at the other.
    names = {s.study_name for s in optuna.get_all_study_summaries(storage)}
    expected = {f"sized-{server}{size}" for server in RULE_FILE for size in ("", "-0.5cpus")}
    assert names == expected
