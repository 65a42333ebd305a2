"""`tuner compare` races by default: a short real race of four servers on apps/fib.py, the
fourth werkzeug's dev server, far behind granian on a CPU-bound app (x5 on fib's medians in
docs/pages/benchmarks.md, "Every server, side by side"; about x3 at this test's 0.6 s windows
and 16 connections). A slower machine slows both alike, as both run the same app on the same
CPU, and the noise margin would have to pass 200% to hide the gap. Its structure is tested,
not its figures."""

from __future__ import annotations

import html
import json
import time

import pytest

from tests.support.cli import SHORT, SHORT_RACE
from tests.support.cli import run_tuner as tuner
from tests.support.serverwatch import wait_none_left
from tuner.workflow.confirm import EXTRA_ROUNDS

pytestmark = pytest.mark.usefixtures("real_servers")

SERVERS = ("granian", "waitress", "cheroot", "werkzeug")
PODIUM = {"granian", "waitress", "cheroot"}


def test_the_server_far_behind_stops_early_and_the_page_says_why(tmp_path) -> None:
    """A one-minute budget leaves room for the first rung (its smallest, 3 trials a server)
    and the final rounds only: werkzeug, fourth and x5 behind granian with no rung left to
    catch up, stops drawing trials with its reason; the top three never stop and reach the
    final, werkzeug brings its default there."""
    started = time.time()
    done = tuner(
        "compare",
        "apps/fib.py",
        "--servers",
        ",".join(SERVERS),
        "--trials",
        "6",
        *SHORT_RACE,
        "--name",
        "race",
        "--storage",
        f"sqlite:///{tmp_path}/s.db",
        *SHORT,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr
    assert wait_none_left(started) == []
    assert "race: rung 1: 4 servers, 3 trials each" in done.stdout
    assert "race: werkzeug stops drawing trials: behind granian by x" in done.stdout
    summary = json.loads((tmp_path / "race" / "compare.json").read_text())
    assert set(summary["race"]["finalists"]) == PODIUM
    assert set(summary["race"]["stopped"]) == {"werkzeug"}
    assert summary["race"]["stopped"]["werkzeug"].startswith("behind granian by x")
    # The final's configs as the finalists bring them (at least their defaults, and werkzeug's),
    # and the runs the one-minute budget has left beyond them (none here, or a few).
    assert summary["race"]["final_configs"] >= len(SERVERS)
    assert summary["race"]["repeats_left"] >= 0
    rows = {row["server"]: row for row in summary["servers"]}
    assert rows["werkzeug"]["stopped"].startswith("behind granian by x")
    assert "after 3 trials, beyond the noise" in rows["werkzeug"]["stopped"]
    assert rows["granian"]["stopped"] == ""
    assert {server for server, row in rows.items() if row["finalist"]} == PODIUM
    assert rows["werkzeug"]["trials"] == 3
    for server, row in rows.items():  # every server's default and tuned config in the final
        measured = row["default"]["runs"] + len(row["default"]["failures"])
        # One final round; a finalist's close call (its pairs undecided, as one round always
        # leaves them) measures its default EXTRA_ROUNDS more beside its best.
        assert measured in ((1, 1 + EXTRA_ROUNDS) if server in PODIUM else (1,)), (server, row)
        assert row["tuned"] is not None
    page = " ".join(html.unescape((tmp_path / "race" / "compare.html").read_text()).split())
    assert "werkzeug: stopped early: behind granian by x" in page
    final_line = page.split("raced: in the final rounds: ")[1].split("<")[0]
    assert "werkzeug" not in final_line and "granian (" in final_line
    assert "raced: in the final rounds: granian (" in page
    terminal = " ".join(done.stdout.split())
    assert "werkzeug: stopped early: behind granian by x" in terminal
