"""Fronts: a reverse proxy started in front of the server under test (`--front nginx`).

Front knowledge lives here, not in `tuner/servers/`: a server only declares how it can be
bound (`ServerAdapter.binds`); this package decides how the front reaches it, starts the
front for each trial (`trial`), and writes the block a study measured (`block`).
"""

from __future__ import annotations

from tuner.errors import ConfigError
from tuner.front.fronted import FrontedAdapter
from tuner.servers.base import ServerAdapter

FRONTS = ("nginx",)

__all__ = ["FRONTS", "FrontedAdapter", "behind", "front_of"]


def behind(adapter: ServerAdapter, front: str | None) -> ServerAdapter:
    """`adapter` as measured behind `front` (None: the adapter itself, reached directly)."""
    if front is None:
        if adapter.needs_front():
            kinds = ", ".join(sorted({p for _, p in adapter.binds}))
            raise ConfigError(
                f"{adapter.name} speaks {kinds}, not HTTP, and the load is HTTP: measure it "
                f"behind a front (--front {FRONTS[0]})"
            )
        return adapter
    if front not in FRONTS:
        raise ConfigError(f"--front {front!r}: unknown front; valid fronts: {', '.join(FRONTS)}")
    from tuner.front import nginx

    nginx.executable()  # missing nginx: one line now, not a failed trial later
    return FrontedAdapter(adapter, front)


def front_of(adapter: ServerAdapter) -> FrontedAdapter | None:
    return adapter if isinstance(adapter, FrontedAdapter) else None
