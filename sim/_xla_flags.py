"""XLA settings that simjax asks for before JAX starts its CPU backend.

Small loops compiled whole. XLA's CPU runtime runs a compiled program as a sequence of
kernels, one per fused operation, and a `while` loop as its body's kernels called one
after another at every iteration: for the loop of a small ODE solve (tens of kernels on
vectors of a few numbers, a step of a microsecond or so) the calls are most of the time.
XLA compiles a loop whose bytes accessed per iteration are below a threshold into one
function instead (its `xla_cpu_small_while_loop_byte_threshold`, 1,024 bytes by
default): a Lotka-Volterra solve with forward sensitivities of six quantities and 21 save
times carries 2.3 kB of saves, and took 2-3x longer per gradient than the same solve with
4 save times (measured, experiments/benchmarks/RESULTS.md). simjax raises the threshold
to 128 KiB: every small ODE system with its sensitivities and saves fits, and so do the
loops of NUTS around such a solve (XLA counts a loop's nested loops in its bytes: the
tree building of `sim infer` on lynx-hare needs more than 64 KiB), while the loops of a
PDE grid or a molecular dynamics box (larger; their kernels are worth running apart, and
a 64 x 64 Gray-Scott run was 1.3-1.4x slower compiled whole) do not.

Said in XLA_FLAGS, which XLA reads once, when JAX first compiles or starts a device:
`sim` sets it on import (and the `sim` command before anything else), so it applies
when nothing in the process has used JAX before (otherwise it is not set). A user's own
`--xla_backend_extra_options` in XLA_FLAGS stands unchanged (to keep XLA's default, set
`--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024`).

Enough threads for several CPU devices. XLA runs the programs of all its CPU devices on
one pool of threads, one thread per core unless the environment variable NPROC says how
many. jaxlib 0.10's LAPACK kernels (the batched LU factorisations of implicit solvers,
among others) split a large enough batch into pieces, schedule them on that pool and
wait for them: when every thread of the pool is such a waiting kernel (two devices each
factorising its runs' Newton matrices, on two cores), nothing is left to run the pieces
and the process waits for ever, deaf to SIGTERM (a sweep of a 65-point finite-difference
heat model with kvaerno5 on 2 devices, 8 runs each, on 2 cores). With more CPU devices
than one, `threads_for_devices` sets NPROC to the cores plus the devices, so that
threads are left over however many devices wait (a device's program waits in at most
one such kernel at a time in simjax's programs). Later jaxlib releases call LAPACK
without the pool; a user's own NPROC stands.

Not with XLA's older CPU fusion emitters (`--xla_cpu_use_fusion_emitters=false` in
XLA_FLAGS): with them, loops compiled whole gave a wrong gradient of a PEtab objective
(Elowitz 2000, 21 parameters, kvaerno5 at rtol 1e-12: -0.0836 for a component that finite
differences, XLA's default emitters and the older ones without the setting all give as
-0.0455; the objective itself was right), so the setting is left out when they are asked
for.
"""

from __future__ import annotations

import os
import re
import sys

SMALL_LOOP_BYTES = 1 << 17
"""Loops accessing fewer bytes per iteration are compiled into one function."""
LEGACY_EMITTERS = "xla_cpu_use_fusion_emitters=false"
"""XLA_FLAGS with this (XLA's older CPU emitters) keep XLA's own threshold (see above)."""


def small_loops_whole() -> None:
    """Add XLA's small-loop threshold (`SMALL_LOOP_BYTES`) to XLA_FLAGS, unless the user
    gave XLA backend options of their own, asked for XLA's older CPU emitters
    (`LEGACY_EMITTERS`), or JAX has started a backend already (it has
    read XLA_FLAGS then: the setting would not apply, yet JAX's persistent cache would
    key this process's programs by it)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_extra_options" in flags or LEGACY_EMITTERS in flags.lower() or jax_started():
        return
    option = (
        f"--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold={SMALL_LOOP_BYTES}"
    )
    os.environ["XLA_FLAGS"] = f"{flags} {option}".strip()


def threads_for_devices() -> None:
    """Set NPROC (the size of XLA's CPU thread pool) to the usable cores plus the CPU
    devices when XLA_FLAGS (`--xla_force_host_platform_device_count`) or
    JAX_NUM_CPU_DEVICES asks for more than one device, unless NPROC is set or JAX has
    started a backend already (see the module docstring)."""
    if "NPROC" in os.environ or jax_started():
        return
    devices = cpu_devices_asked()
    if devices < 2:
        return
    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
    os.environ["NPROC"] = str(cores + devices)


def cpu_devices_asked() -> int:
    """The number of CPU devices the environment asks JAX for (1 when it says nothing)."""
    found = re.findall(
        r"--xla_force_host_platform_device_count=(\d+)", os.environ.get("XLA_FLAGS", "")
    )
    if found:
        return int(found[-1])
    count = os.environ.get("JAX_NUM_CPU_DEVICES", "")
    return int(count) if count.isdigit() and int(count) > 0 else 1


def jax_started() -> bool:
    """Whether JAX has initialised a backend in this process (without importing JAX)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    started = getattr(bridge, "backends_are_initialized", None)
    return bool(started and started())
