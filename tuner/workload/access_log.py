"""Reading an HTTP access log: which requests (method and target) it records, how often.

One format covers nginx's `combined` and gunicorn's default `access_log_format` (the same
fields in the same order); the Common Log Format and lines with extra fields after the user
agent are read too, and nginx's `\\xHH` escapes are decoded. A line not in the format is
malformed: counted, never fatal; a request the load generator should not or cannot send is
skipped with its reason. A `.gz` file is read through gzip. The formats, with an example line:
docs/pages/commands/workload.md.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from tuner.errors import ConfigError
from tuner.loadgen.spec import METHODS

# host ident user [time] "request" status bytes ["referer" "agent" [anything]]
_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_LINE = re.compile(
    r"(\S+) (\S+) (\S+) \[([^\]]+)\] "
    + _QUOTED
    + r" (\d{3}) (\d+|-)"
    + rf"(?: {_QUOTED} {_QUOTED}(?: .*)?)?"
    + r"\s*"
)
_REQUEST_LINE = re.compile(r"([A-Za-z]+) (\S+)(?: HTTP/\d(?:\.\d)?)?")
_ESCAPE = re.compile(r"\\x([0-9A-Fa-f]{2})")
# Requests that change state on the server: their bodies are not in the log, so a replay
# would send them empty (usually a 400) or, worse, delete or create things in the app under
# test. Only replayed on request (`--unsafe`).
UNSAFE_METHODS = ("POST", "PUT", "PATCH", "DELETE")

# Why a well-formed line's request is not replayed, as reported to the user.
SKIP_UNSAFE = "POST/PUT/PATCH/DELETE (access logs have no bodies; --unsafe sends them empty)"
SKIP_HEAD = "HEAD (the load generator cannot tell its empty reply from a cut one)"
SKIP_METHOD = "other methods"
SKIP_TARGET = "targets that are not a plain ASCII path (e.g. '*', spaces, raw bytes)"
SKIP_NOT_HTTP = "request lines that are not HTTP (e.g. TLS or garbage sent to the port)"


@dataclass
class AccessLog:
    """What one access log holds: counts of replayable (method, target), and the rest."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    lines: int = 0  # non-blank lines read
    malformed: int = 0
    first_malformed: int | None = None  # 1-based line number
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> requests

    @property
    def parsed(self) -> int:
        return self.lines - self.malformed

    @property
    def requests(self) -> int:
        return sum(self.counts.values())


def read_access_log(path: Path, *, unsafe: bool = False, keep_query: bool = True) -> AccessLog:
    """Count the requests of the access log at `path` (see the module docstring)."""
    try:
        # Rotated logs are often gzipped (access.log.2.gz).
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8", errors="surrogateescape") as handle:
            return count_requests(handle, unsafe=unsafe, keep_query=keep_query)
    except (OSError, EOFError) as exc:  # EOFError: a gzip file cut short
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(f"access log {path}: cannot read it ({reason})") from None


def count_requests(
    lines: Iterable[str], *, unsafe: bool = False, keep_query: bool = True
) -> AccessLog:
    log = AccessLog()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        log.lines += 1
        match = _LINE.fullmatch(line.rstrip("\r\n"))
        if match is None:
            log.malformed += 1
            if log.first_malformed is None:
                log.first_malformed = number
            continue
        request = _replayable(match.group(5), unsafe, keep_query)
        if isinstance(request, tuple):
            log.counts[request] += 1
        else:
            log.skipped[request] += 1
    return log


def _replayable(request_line: str, unsafe: bool, keep_query: bool) -> tuple[str, str] | str:
    """(method, target) to replay, or why not."""
    parts = _REQUEST_LINE.fullmatch(request_line)
    if parts is None:
        return SKIP_NOT_HTTP
    method = parts.group(1)  # methods are case-sensitive: "get" is not GET
    if method == "HEAD":
        return SKIP_HEAD
    if method in UNSAFE_METHODS and not unsafe:
        return SKIP_UNSAFE
    if method not in METHODS:
        return SKIP_METHOD
    target = _unescape(parts.group(2))
    if target is None:
        return SKIP_TARGET
    if target.lower().startswith(("http://", "https://")):  # absolute form, via a proxy
        split = urlsplit(target)
        target = (split.path or "/") + (f"?{split.query}" if split.query else "")
    if not keep_query:
        target = target.split("?", 1)[0]
    if not target.startswith("/") or not target.isprintable() or " " in target:
        return SKIP_TARGET
    return method, target


def _unescape(target: str) -> str | None:
    """nginx's `\\xHH` escapes decoded; None when the target holds bytes a path cannot."""
    if "\\" in target:
        target = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), target)
    try:
        target.encode("ascii")
    except UnicodeEncodeError:  # raw UTF-8 or undecodable bytes (surrogates)
        return None
    return target
