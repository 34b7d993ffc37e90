"""Progress on the terminal (steps and ETA) for long work; silent when disabled."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress as _RichProgress


class Progress:
    """A progress bar on stderr, shown only when enabled and stderr is a terminal.

    Families call `start(total)` once they know the amount of work, then `advance(n)`.
    """

    def __init__(self, enabled: bool, description: str = ""):
        self.enabled = enabled and sys.stderr.isatty()
        self.description = description
        self._bar: _RichProgress | None = None
        self._task = None

    def __enter__(self) -> Progress:
        if self.enabled:
            # (rich is imported only when a bar is shown)
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
            from rich.progress import Progress as _RichProgress

            self._bar = _RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._bar.__enter__()
        return self

    def start(self, total: int, description: str | None = None) -> None:
        if self._bar is not None:
            self._task = self._bar.add_task(description or self.description, total=total)

    def describe(self, description: str) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, description=description)

    def advance(self, n: int = 1) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, n)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
