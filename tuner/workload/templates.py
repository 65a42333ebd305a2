"""Which path segments are IDs, so that `/items/42` and `/items/7` are one template.

The rule is conservative: merging two different endpoints into one template would misstate the
traffic mix, while leaving two URLs of one endpoint apart only costs a longer file. So a whole
segment (between slashes; the query string is never part of a template) is an ID only when
it has one of these shapes, and never partly (`app.3f2a9c.js`, `42.json` stay literal):

- `{int}`    digits only: `42`, `0007`
- `{uuid}`   a UUID, 8-4-4-4-12 hex digits: `3f2504e0-4f89-11d3-9a0c-0305e82c3301`
- `{hex}`    8 or more hex digits in one case, with at least one digit and one letter
             (hashes, short git SHAs, MongoDB ObjectIds): `5f2b9c1e`, `9C0FFEE1D`; words
             like `deadbeef` or `facade` are not IDs
- `{slug}`   words joined by `-` or `_` that end in a number: `order-1234`, `tune-gunicorn-42`,
             `2024-01-15`
- `{token}`  12 or more of `A-Z a-z 0-9 _ -` with an upper-case letter, a lower-case letter
             and a digit (random base62/base64url IDs: `dQw4w9WgXcQ7`); slugs are lower-case

Then the log decides (`fold`): a segment becomes a placeholder only where the paths that share
a template really differ in it. A path seen with a single value (`/api/v2`, `/items/42` alone)
stays as it was; `/users/alice` and `/users/bob` are not folded (names are not ID-shaped).
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
