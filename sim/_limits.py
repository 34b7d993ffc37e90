"""Requested sizes checked against the machine before anything is allocated: a grid of a
billion points, a trillion save times or a sweep of a trillion runs is a one-line config
error naming the key, not a MemoryError, a crash or an hour of swapping.

The estimates are lower bounds of what a run must hold at once (its state with the
solver's work arrays, or the arrays a request implies), compared with the memory that
holds them: a run's state with the memory of the device it runs on (a GPU's own memory,
the machine's physical memory on a CPU), what is read or gathered on the host with the
physical memory; output is compared with the free space of the folder it goes to.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
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


def visible_gpus() -> list[str]:
    """The NVIDIA GPUs this process may use, without starting JAX: the ids in
    CUDA_VISIBLE_DEVICES when it is set (empty or -1: none), else one per GPU that
    `nvidia-smi -L` lists (none without the tool)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        ids = [v.strip() for v in listed.split(",") if v.strip()]
        return [] if not ids or ids[0] == "-1" else ids
    return [str(i) for i in range(_listed_gpus())]


@functools.cache
def _listed_gpus() -> int:
    """How many GPUs `nvidia-smi -L` lists (0 without the tool), asked once a process."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return 0
    lines = [line for line in done.stdout.splitlines() if line.startswith("GPU ")]
    return len(lines) if done.returncode == 0 else 0


def device_memory() -> tuple[int, str] | None:
    """(bytes, device): the memory of the smallest local accelerator device JAX runs on
    (`memory_stats()["bytes_limit"]`), or None on a CPU. JAX is asked only when it has
    started, or when the machine shows a GPU and JAX is not told to use the CPU
    (JAX_PLATFORMS): the run that follows starts it then anyway, and a CPU run does not
    start it before its command has set its device count."""
    from ._xla_flags import jax_started

    if not jax_started():
        platforms = os.environ.get("JAX_PLATFORMS", "").lower()
        if platforms in ("cpu",) or not visible_gpus():
            return None
    import jax

    found = []
    for device in jax.local_devices():
        if device.platform == "cpu":
            return None
        stats = device.memory_stats() or {}
        if stats.get("bytes_limit"):
            found.append((int(stats["bytes_limit"]), f"{device.platform}:{device.id}"))
    return min(found) if found else None


def readable(n: int | float) -> str:
    """Bytes as text: 74.5 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.3g} PiB"


def memory_problem(
    nbytes: int | float, what: str, *, device: bool = False, devices: int = 1
) -> str | None:
    """A message when `nbytes` cannot fit in this machine's memory, else None.

    Arguments:
        nbytes: the bytes needed (a lower bound).
        what: what needs them, the message's start ("reading its 1,000 values").
        device: the bytes live on the device a run computes on (its state and work
            arrays): compared with a GPU's memory where the run is on one
            (`device_memory`), with the physical memory on a CPU.
        devices: the devices the bytes are split over (a grid split in slabs).

    Returns:
        "<what> would need at least <size> of memory, more than this machine has (<size>)"
        (or "more than each of its N <device> devices has") when `nbytes` exceeds it,
        else None.
    """
    accelerator = device_memory() if device else None
    if accelerator is not None:
        limit, name = accelerator
        share = nbytes / max(devices, 1)
        if share > limit:
            each = f"each of {devices} devices like {name}" if devices > 1 else name
            return (
                f"{what} would need at least {readable(share)} of memory on "
                f"{'each device' if devices > 1 else 'the device'}, more than {each} has "
                f"({readable(limit)})"
            )
        return None
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
