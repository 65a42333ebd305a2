"""fapws3, cogen and Spawning (named by the older WSGI shoot-outs) are Python 2 code that
cannot be installed here: asking for one is one clear line and exit 2, not a crash."""

from __future__ import annotations

import pytest

from tests.support.cli import run_tuner
from tuner.servers import server_names

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")


@pytest.mark.parametrize(
    ("server", "release"), [("fapws3", "0.11.dev"), ("cogen", "0.2.1"), ("spawning", "0.9.7")]
)
def test_a_python2_only_server_is_refused_in_one_line_and_not_listed(
    server: str, release: str
) -> None:
    done = run_tuner("bench", "apps/hello.py", "--server", server)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert server in lines[0] and release in lines[0] and "Python 2" in lines[0]
    assert server not in server_names()
