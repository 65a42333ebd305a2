"""What a server's log says about how it coped with the load: its `LoadSign` and `CutSign`
lines, counted.

A server that falls behind often keeps serving and only says so in its log (waitress: "Task
queue depth is 7"); a server that ends a stream it was sending (a worker killed or recycled
under it) says why there too. The runner reads the log once after the measurement, so a
trial's figures come with the server's own explanation of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# A log is read whole once per trial; past this size only its end is read (a server writing
# one warning per request for a minute stays well below it).
_MAX_READ_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class LoadSign:
    """A line a running server logs when it falls behind under load, and what it means.

    The server keeps serving, so nothing fails; but the figures are explained by it (e.g.
    waitress's "Task queue depth is N": every thread was busy and requests waited), so the
    runner counts these lines after each measurement and the trial shows them.
    """

    text: str
    meaning: str


def load_sign_lines(log_path: Path, signs: Sequence[LoadSign]) -> tuple[str, ...]:
    """One line per sign the log shows: how often, its last occurrence, and what it means."""
    if not signs:
        return ()
    counts = [0] * len(signs)
    last = [""] * len(signs)
    try:
        with open(log_path, "rb") as log_file:
            log_file.seek(0, 2)
            log_file.seek(max(0, log_file.tell() - _MAX_READ_BYTES))
            for raw in log_file:
                line = raw.decode("utf-8", errors="replace")
                for index, sign in enumerate(signs):
                    if sign.text in line:
                        counts[index] += 1
                        last[index] = line.strip()
    except OSError:
        return ()
    return tuple(
        f'"{last[i][-120:]}" x{counts[i]}: {sign.meaning}'
        for i, sign in enumerate(signs)
        if counts[i]
    )


@dataclass(frozen=True)
class CutSign:
    """A line a server logs when it ends requests it was serving: a worker killed over its
    timeout, recycled, a request turned away at a cap. `pattern` is a regular expression
    searched in each line; a group named `pid` names the worker the line is about, so the
    several lines one worker's end writes (gunicorn: the timeout, the kill, the exit) count
    once, as the first of them (see `cut_signs_seen`). `cause` names it in a few words
    ("gunicorn WORKER TIMEOUT"), `explanation` says which setting did it and how."""

    pattern: str
    cause: str
    explanation: str


def log_size(log_path: Path) -> int:
    """Where the log ends now, in bytes (0 when there is none yet)."""
    try:
        return log_path.stat().st_size
    except OSError:
        return 0


class LogWindow:
    """The part of a log written over a stretch of time, as byte offsets: from where it ended
    when made, or at `begin()`, to where it ended at `end()`."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.start = self.stop = log_size(log_path)

    def begin(self) -> None:
        self.start = self.stop = log_size(self.log_path)

    def end(self) -> None:
        self.stop = log_size(self.log_path)


def cut_signs_seen(
    log_path: Path, signs: Sequence[CutSign], start: int, end: int
) -> tuple[tuple[CutSign, int], ...]:
    """Each sign the log shows between the byte offsets `start` and `end`, with how often, in
    the signs' order. Each line counts for the first sign it matches. A worker ends once: a
    line whose sign names a worker (`pid`) already named by an earlier line is that same end
    and does not count again."""
    if not signs or end <= start:
        return ()
    compiled = [re.compile(sign.pattern) for sign in signs]
    counts = [0] * len(signs)
    ended: set[str] = set()
    try:
        with open(log_path, "rb") as log_file:
            log_file.seek(max(start, end - _MAX_READ_BYTES))
            text = log_file.read(end - log_file.tell()).decode("utf-8", errors="replace")
    except OSError:
        return ()
    for line in text.splitlines():
        for index, pattern in enumerate(compiled):
            match = pattern.search(line)
            if match is None:
                continue
            pid = match.groupdict().get("pid")
            if pid is None or pid not in ended:
                counts[index] += 1
            if pid is not None:
                ended.add(pid)
            break
    return tuple((sign, counts[i]) for i, sign in enumerate(signs) if counts[i])
