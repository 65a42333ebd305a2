"""meinheld cannot be installed on our Python: asking for it is one clear line, not a crash."""

from __future__ import annotations

import pytest

from tests.support.cli import run_tuner
from tuner.servers import server_names

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")


def test_meinheld_is_refused_in_one_line_and_not_listed() -> None:
    done = run_tuner("bench", "apps/hello.py", "--server", "meinheld")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "greenlet" in lines[0], done.stderr
    assert "meinheld" not in server_names()
