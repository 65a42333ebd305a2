"""What the front's tests share: nginx, found or the test fails in CI (skips elsewhere)."""

from __future__ import annotations

import pytest

from tests.conftest import unavailable
from tuner.errors import ToolMissingError


@pytest.fixture
def nginx_front(since: float) -> float:
    """nginx is installed (a failure in CI, a skip elsewhere); the test's start time."""
    from tuner.front import nginx

    try:
        nginx.executable()
    except ToolMissingError as exc:
        unavailable(str(exc))
    return since
