"""Progress of long work, and where its time went.

`Progress` shows how far a run, sweep, fit or training has come: on a terminal a live
bar with the elapsed time and an estimate of the time left (rich); when stderr is a file
or a pipe, one plain line at every tenth of the work with its rate and that estimate, so
that a log holds a dozen lines and no carriage returns. `Clock` splits a command's time
into compiling (tracing, lowering and compiling its programs, or loading them from the
persistent cache: JAX reports each as it ends) and the work itself.
"""

from __future__ import annotations

import io
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress as _RichProgress

# JAX's duration events for making a program: tracing it to a jaxpr, lowering that to
# MLIR, and compiling it with XLA (or loading it from the compilation cache).
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)


class Clock:
    """Within the block, the wall time of compiling programs, and of the loop a
    `Progress` follows (from its `start` to its last `advance`) less the compiling that
    happened inside it.

    Example:
        >>> with Clock() as clock:
        ...     result = sim.run(config, output="run.h5")
        >>> clock.compiling, clock.looping      # seconds
    """

    _active: Clock | None = None
    _listening = False

    def __init__(self) -> None:
        self._spans: list[tuple[float, float]] = []
        self._loop: tuple[float, float] | None = None
        self.began = self.ended = 0.0

    def __enter__(self) -> Clock:
        if not Clock._listening:
            import jax

            jax.monitoring.register_event_duration_secs_listener(_on_duration)
            Clock._listening = True
        self._outer, Clock._active = Clock._active, self
        self.began = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.ended = time.perf_counter()
        Clock._active = self._outer

    def _add(self, seconds: float) -> None:
        end = time.perf_counter()
        self._spans.append((end - seconds, end))

    def _progressed(self, started: bool) -> None:
        now = time.perf_counter()
        self._loop = (now, now) if started or self._loop is None else (self._loop[0], now)

    def _compiling_within(self, low: float, high: float) -> float:
        """Seconds of [low, high] spent compiling (nested spans counted once)."""
        total, reach = 0.0, low
        for start, end in sorted(self._spans):
            start, end = max(start, reach), min(end, high)
            if end > start:
                total += end - start
                reach = end
        return total

    @property
    def total(self) -> float:
        """Seconds from entering the block to leaving it (or to now, inside it)."""
        return (self.ended or time.perf_counter()) - self.began

    @property
    def compiling(self) -> float:
        """Seconds spent making programs within the block."""
        return self._compiling_within(self.began, self.ended or time.perf_counter())

    @property
    def looping(self) -> float | None:
        """Seconds of the followed loop without its compiling (None if none ran)."""
        if self._loop is None:
            return None
        low, high = self._loop
        return max(high - low - self._compiling_within(low, high), 0.0)

    def summary(self, work: str) -> str:
        """'compiled in 2.1 s, 68 steps in 4 ms, 2.2 s in all': `work` is what the followed
        loop did (its time without compiling); without a loop, the rest of the time."""
        done = self.looping
        rest = (
            f"{work} in {seconds(done)}"
            if done is not None
            else f"{work} and the rest in {seconds(max(self.total - self.compiling, 0.0))}"
        )
        return f"compiled in {seconds(self.compiling)}, {rest}, {seconds(self.total)} in all"


def _on_duration(event: str, seconds: float, **_) -> None:
    if event in COMPILE_EVENTS and Clock._active is not None:
        Clock._active._add(seconds)


def seconds(value: float) -> str:
    """A duration as people write it: 4 ms, 2.1 s, 3 min 5 s, 1 h 2 min."""
    if value < 1.0:
        return f"{value * 1000:.3g} ms"
    if value < 60.0:
        return f"{value:.3g} s"
    minutes, rest = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    return f"{minutes // 60} h {minutes % 60} min"


class Progress:
    """Progress of long work on stderr, when enabled: a bar on a terminal, a plain line
    at every tenth of the work otherwise.

    Families call `start(total)` once they know the amount of work, then `advance(n)`;
    `describe` changes the description (a fit's current loss).
    """

    def __init__(self, enabled: bool, description: str = "", stream: io.TextIOBase | None = None):
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.bar = enabled and self.stream.isatty()
        self.description = description
        self._bar: _RichProgress | None = None
        self._task = None
        self._total = 0
        self._done = 0
        self._next_line = 1
        self._began = 0.0
        self._notes: list[str] = []

    def __enter__(self) -> Progress:
        if self.bar:
            # (rich is imported only when a bar is shown)
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress as _RichProgress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = _RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self._bar.__enter__()
        return self

    def start(self, total: int, description: str | None = None) -> None:
        if Clock._active is not None:
            Clock._active._progressed(started=True)
        self.description = description or self.description
        self._total, self._done, self._next_line = int(total), 0, 1
        self._began = time.perf_counter()
        if self._bar is not None:
            self._task = self._bar.add_task(self.description, total=total)

    def note(self, line: str) -> None:
        """A line of how the work was done, printed (when enabled) once it has ended
        without an error: a failure stays the one line that says why."""
        self._notes.append(line)

    def describe(self, description: str) -> None:
        self.description = description
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, description=description)

    def advance(self, n: int = 1) -> None:
        if Clock._active is not None:
            Clock._active._progressed(started=False)
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, n)
        self._done += n
        if (
            self.enabled
            and not self.bar
            and self._total > 0
            and self._done * 10 >= self._next_line * self._total
        ):
            self._line()
            self._next_line = self._done * 10 // self._total + 1

    def _line(self) -> None:
        now = time.perf_counter()
        elapsed = now - self._began
        # (the rate of the work itself: compiling, known within a `Clock`, is left out)
        working = elapsed - (
            Clock._active._compiling_within(self._began, now) if Clock._active is not None else 0.0
        )
        rate = self._done / working if working > 0 else float("inf")
        left = (self._total - self._done) / rate if rate > 0 else float("inf")
        eta = "done" if self._done >= self._total else f"ETA {seconds(left)}"
        per = "-" if rate == float("inf") else f"{rate:,.0f}/s" if rate >= 100 else f"{rate:.3g}/s"
        print(
            f"{self.description}: {self._done:,} of {self._total:,} "
            f"({100 * self._done // self._total}%), {per}, {seconds(elapsed)} elapsed, {eta}",
            file=self.stream,
            flush=True,
        )

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
        if self.enabled and exc[0] is None:
            for line in self._notes:
                print(line, file=self.stream, flush=True)
