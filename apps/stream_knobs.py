"""What the two streaming apps (stream_tokens.py, stream_sse.py) share: their two knobs, read
from the environment, and the plan of one stream.

`STREAM_SECONDS` is how long a stream lasts, `TOKEN_MS` the gap before each token, each a
number or a uniform range LOW-HIGH (defaults "2-10" and "20-50", as chat backends stream).
Each stream draws its length and its gaps from a `random.Random` seeded for that request
(`?seed=N`, else the process's next stream number), so lengths vary from stream to stream yet
a run repeats itself, and a test can plan the same stream to compare with what it read.
"""

from __future__ import annotations

import itertools
import math
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass

STREAM_SECONDS = "STREAM_SECONDS"
TOKEN_MS = "TOKEN_MS"
DEFAULTS = {STREAM_SECONDS: "2-10", TOKEN_MS: "20-50"}
MEDIA_TYPE = "text/event-stream"
# No cache may keep a stream, and nginx (`--front nginx`) must pass each event on as it comes
# instead of buffering the response.
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
DONE = b"event: done\ndata: [DONE]\n\n"
WORDS = ("the", "tuner", "streams", "tokens", "to", "a", "client", "as", "models", "do", "now")

# The seed of a stream that names none: a per-process count (next() on it is atomic).
_stream_numbers = itertools.count()


@dataclass(frozen=True)
class Span:
    """A number, or a uniform range from `low` to `high`."""

    low: float
    high: float

    def draw(self, rng: random.Random) -> float:
        return self.low if self.low == self.high else rng.uniform(self.low, self.high)


@dataclass(frozen=True)
class StreamKnobs:
    seconds: Span
    token_ms: Span

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> StreamKnobs:
        """The knobs from the environment; a bad value exits with one line naming it."""
        return cls(
            seconds=_span(environ, STREAM_SECONDS, smallest=0.0),
            token_ms=_span(environ, TOKEN_MS, smallest=0.001),  # zero gaps would never end
        )

    def plan(self, seed: int) -> list[tuple[float, str]]:
        """(seconds to wait, token) for each event of the stream seeded `seed`: the gaps fill
        its drawn length, and the done event follows the last token at once."""
        rng = random.Random(seed)
        length_s = self.seconds.draw(rng)
        events: list[tuple[float, str]] = []
        elapsed_s = 0.0
        while True:
            gap_s = self.token_ms.draw(rng) / 1000
            if elapsed_s + gap_s > length_s:
                return events
            elapsed_s += gap_s
            events.append((gap_s, rng.choice(WORDS)))


def stream_seed(query_value: str | None) -> int:
    """The seed a request asks for (`?seed=N`), else the next stream number of this process."""
    if query_value is not None and query_value.isdigit():
        return int(query_value)
    return next(_stream_numbers)


def event(token: str) -> bytes:
    return f"data: {token}\n\n".encode()


def _span(environ: Mapping[str, str], name: str, *, smallest: float) -> Span:
    raw = environ.get(name, "").strip() or DEFAULTS[name]
    low_text, dash, high_text = raw.partition("-")
    try:
        low = float(low_text)
        high = float(high_text) if dash else low
    except ValueError:
        low = high = float("nan")
    if not (math.isfinite(high) and smallest <= low <= high):  # NaN fails this too
        raise SystemExit(
            f"{name}={raw!r}: expected a number or a range LOW-HIGH, "
            f"finite and at least {smallest:g}"
        )
    return Span(low, high)
