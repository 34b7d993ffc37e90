"""Where a command prints: rich consoles and tables, imported when first drawn, and the
lines of notes and warnings on stderr."""

from __future__ import annotations

import shutil
import sys


class _Console:
    """A rich Console made when first used: rich is imported by the commands that print
    with it, not by every command."""

    def __init__(self, **options):
        self._options = options
        self._console = None

    def __getattr__(self, name: str):
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return getattr(self._console, name)


def Table(*columns: str, **options):  # noqa: N802 - rich's Table, imported when a table is drawn
    from rich.table import Table as _Table

    return _Table(*columns, **options)


# Tables keep their columns whole even when output is piped (no terminal width).
out = _Console(width=max(120, shutil.get_terminal_size().columns))


err = _Console(stderr=True)


def _plain_table(columns, rows):
    """A rich table of text taken as it is (no markup: `[params]` stays)."""
    from rich.text import Text

    table = Table(*columns, box=None)
    for row in rows:
        table.add_row(*(Text(str(cell)) for cell in row))
    return table


def _note(line: str) -> None:
    print(line, file=sys.stderr)


def _warn(lines: list[str]) -> None:
    """Warnings go to stderr even with --quiet: they say the result may be wrong."""
    for line in lines:
        print(line, file=sys.stderr)
