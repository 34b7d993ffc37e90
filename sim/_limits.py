"""Requested sizes checked against the machine before anything is allocated: a grid of a
billion points, a trillion save times or a sweep of a trillion runs is a one-line config
error naming the key, not a MemoryError, a crash or an hour of swapping.

The estimates are lower bounds of what a run must hold at once (its state with the
solver's work arrays, or the arrays a request implies), compared with the machine's
physical memory; output is compared with the free space of the folder it goes to.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# Arrays a solver keeps per state value: stages of a Runge-Kutta or ETDRK step,
# Fourier transforms, error estimates (a conservative lower bound of the real count).
WORK_ARRAYS = 8


def physical_memory() -> int:
    """Bytes of physical memory (a large number when the platform does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 1 << 50


def readable(n: int | float) -> str:
    """Bytes as text: 74.5 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.3g} PiB"


def memory_problem(nbytes: int | float, what: str) -> str | None:
    """A message when `nbytes` cannot fit in this machine's memory, else None.

    Arguments:
        nbytes: the bytes needed (a lower bound).
        what: what needs them, the message's start ("reading its 1,000 values").

    Returns:
        "<what> would need at least <size> of memory, more than this machine has (<size>)"
        when `nbytes` exceeds the physical memory, else None.
    """
    total = physical_memory()
    if nbytes > total:
        return (
            f"{what} would need at least {readable(nbytes)} of memory, more than this machine "
            f"has ({readable(total)})"
        )
    return None


def disk_problem(folder: str | Path, nbytes: int | float, what: str) -> str | None:
    """A message when `nbytes` cannot fit in the free space of `folder`, else None."""
    folder = Path(folder) if str(folder) else Path(".")
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return None
    if nbytes > free:
        return (
            f"{what} would need {readable(nbytes)} on disk, more than the {readable(free)} "
            f"free in {str(folder)!r}"
        )
    return None
