"""The checks of what a user gives the load generator that its specs share: a number, a path."""

from __future__ import annotations

import math
from typing import TypeGuard


def number(value: object) -> TypeGuard[float]:
    """A finite int or float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_path(value: object) -> bool:
    """An absolute URL path a request line can carry: ASCII, no spaces or line breaks."""
    return (
        isinstance(value, str)
        and value.startswith("/")
        and value.isascii()
        and not any(c in value for c in " \r\n\t")
    )
