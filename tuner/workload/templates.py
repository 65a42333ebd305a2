"""Which path segments are IDs, so that `/items/42` and `/items/7` are one template.

The rule is conservative (merging two endpoints would misstate the traffic mix; leaving two
URLs of one endpoint apart only costs a longer file): a whole segment is an ID only when it has
one of the shapes below (`{int}`, `{uuid}`, `{hex}`, `{slug}`, `{token}`), never partly, and
`fold` makes it a placeholder only where the log shows it varying. The shapes, with examples:
docs/pages/commands/workload.md, "Templates".
"""

from __future__ import annotations

import re
from collections.abc import Collection

_INT = re.compile(r"\d+")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_HEX = re.compile(r"[0-9a-f]{8,}|[0-9A-F]{8,}")
_SLUG = re.compile(r"[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*[-_]\d+")
_TOKEN = re.compile(r"[A-Za-z0-9_-]{12,}")


def id_kind(segment: str) -> str | None:
    """The kind of ID `segment` looks like (`int`, `uuid`, `hex`, `slug`, `token`), or None."""
    if _INT.fullmatch(segment):
        return "int"
    if _UUID.fullmatch(segment):
        return "uuid"
    if _HEX.fullmatch(segment) and _has_digit(segment) and not segment.isdigit():
        return "hex"
    if _SLUG.fullmatch(segment):
        return "slug"
    if (
        _TOKEN.fullmatch(segment)
        and _has_digit(segment)
        and any(c.isupper() for c in segment)
        and any(c.islower() for c in segment)
    ):
        return "token"
    return None


def template_key(path: str) -> str:
    """`path` (without its query) with every ID-shaped segment replaced by `{kind}`."""
    path = path.split("?", 1)[0]
    return "/".join(_placeholder(s) for s in path.split("/"))


def fold(paths: Collection[str]) -> str:
    """The template of `paths`, which share one `template_key`: ID-shaped segments in which
    they differ become `{kind}`; the others keep their literal value."""
    split = [p.split("?", 1)[0].split("/") for p in paths]
    segments = []
    for position in zip(*split, strict=True):
        first = position[0]
        varies = any(s != first for s in position)
        segments.append(_placeholder(first) if varies else first)
    return "/".join(segments)


def _placeholder(segment: str) -> str:
    kind = id_kind(segment)
    return f"{{{kind}}}" if kind else segment


def _has_digit(segment: str) -> bool:
    return any(c.isdigit() for c in segment)
