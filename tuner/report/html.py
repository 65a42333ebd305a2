"""One self-contained HTML page: inline CSS, charts as base64 data URIs, no external URL.

The page must open offline and from a mail attachment, so nothing is fetched: no CDN script,
no web font, no linked image. Files are written atomically, the HTML last, so a reader never
sees a page whose images are missing or half written.
"""

from __future__ import annotations

import base64
import html
import os
import re
from collections.abc import Sequence
from pathlib import Path

from tuner.errors import ConfigError
from tuner.files import atomic_write
from tuner.report.figures import Chart
from tuner.report.tables import Table

# Figures, ratios and spreads ("1,234", "x1.05", "2.1 / 2.3 / 2.9", "0.00%") align right.
NUMERIC = re.compile(r"^(n/a|x?[\d.,]+%?( / [\d.,]+%?)*)$")

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; white-space: nowrap; }
figure { margin: 1rem 0; } figcaption, p.note { color: #555; font-size: 0.85rem; }
img { max-width: 100%; }
"""


def render_page(
    title: str,
    summary: Sequence[str],
    charts: Sequence[Chart],
    tables: Sequence[Table],
    links: Sequence[tuple[str, str]] = (),
) -> str:
    """The page; `links`: (file beside it, text) pairs, relative so the folder opens offline."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        *(f"<p>{_e(line)}</p>" for line in summary),
        *(f'<p><a href="{_e(href)}">{_e(text)}</a></p>' for href, text in links),
    ]
    for chart in charts:
        data = base64.b64encode(chart.png).decode("ascii")
        parts += [
            f'<h2 id="{_e(chart.name)}">{_e(chart.title)}</h2>',
            f'<figure><img alt="{_e(chart.title)}" src="data:image/png;base64,{data}">',
            f"<figcaption>{_e(chart.caption)}</figcaption></figure>",
        ]
    for table in tables:
        parts.append(render_table(table))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def render_table(table: Table) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in table.columns)
    body = "".join("<tr>" + "".join(_cell(value) for value in row) + "</tr>" for row in table.rows)
    notes = "".join(f'<p class="note">{_e(note)}</p>' for note in table.notes)
    return f"<h2>{_e(table.title)}</h2><table><tr>{head}</tr>{body}</table>{notes}"


def _cell(value: str) -> str:
    numeric = NUMERIC.match(value) is not None
    return f'<td class="num">{_e(value)}</td>' if numeric else f"<td>{_e(value)}</td>"


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)


def check_out_dir(out: Path) -> Path:
    """Fail before any measuring or drawing if the report cannot be written there."""
    out = out.resolve()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file; give a folder for the report")
    existing = next((p for p in (out, *out.parents) if p.exists()), None)
    if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {str(out)!r}: cannot create a folder there (not writable)")
    return out


def write_report(
    out: Path,
    page_name: str,
    page: str,
    charts: Sequence[Chart],
    linked: Sequence[tuple[str, str]] = (),
) -> Path:
    """Write each chart's PNG, then the pages `page` links to (`linked`: name, HTML), then
    `page`; every file appears whole or not at all, and no link points at a missing page."""
    out = check_out_dir(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for chart in charts:
            atomic_write(out / f"{chart.name}.png", chart.png)
        for name, html_text in linked:
            atomic_write(out / name, html_text.encode("utf-8"))
        return atomic_write(out / page_name, page.encode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"--out {str(out)!r}: cannot write the report ({exc.strerror})") from exc
