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

Not with XLA's older CPU fusion emitters (`--xla_cpu_use_fusion_emitters=false` in
XLA_FLAGS): with them, loops compiled whole gave a wrong gradient of a PEtab objective
(Elowitz 2000, 21 parameters, kvaerno5 at rtol 1e-12: -0.0836 for a component that finite
differences, XLA's default emitters and the older ones without the setting all give as
-0.0455; the objective itself was right), so the setting is left out when they are asked
for.
"""

from __future__ import annotations

import os
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
    if "xla_backend_extra_options" in flags or LEGACY_EMITTERS in flags.lower() or _jax_started():
        return
    option = f"--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold={SMALL_LOOP_BYTES}"
    os.environ["XLA_FLAGS"] = f"{flags} {option}".strip()


def _jax_started() -> bool:
    """Whether JAX has initialised a backend in this process (without importing JAX)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    started = getattr(bridge, "backends_are_initialized", None)
    return bool(started and started())
