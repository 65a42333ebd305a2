"""The report's tables in the terminal, with rich."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table as RichTable

from tuner.report.tables import Table

PIPED_WIDTH = 160
FREE_TEXT = frozenset({"settings", "reason", "value", "notes", "config file"})


def console() -> Console:
    """stdout; piped output (logs, files) is not squeezed into 80 columns."""
    out = Console()
    return out if out.is_terminal else Console(width=PIPED_WIDTH)


def print_tables(console: Console, tables: Sequence[Table]) -> None:
    for table in tables:
        if not table.rows:
            console.print(f"[bold]{table.title}[/]: {'; '.join(table.notes)}")
            continue
        shown = RichTable(title=table.title, title_justify="left")
        for column in table.columns:
            # Free text (settings, reasons) takes the width left; nothing is ever cut off.
            shown.add_column(column, overflow="fold", ratio=1 if column in FREE_TEXT else None)
        for row in table.rows:
            shown.add_row(*row)
        console.print(shown)
        for note in table.notes:
            console.print(f"  {note}", highlight=False)
