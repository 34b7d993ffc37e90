"""A batch of independent runs split over devices, each device computing its own slice.

`on_batch_shards(f, mesh, in_specs, out_specs)` is `jax.shard_map` of `f`, a function of
a batch (vmapped over its leading axis), over a one-axis mesh: every device runs `f` on
its rows alone, so its linear algebra (the LU factorisations of implicit solvers) and its
FFTs stay on that device and nothing is exchanged. Under `jax.jit` with a sharding of
the batch instead, XLA's partitioner replicates an FFT's operands (each call
all-gathered the whole batch before every transform) and puts collectives between the
devices' programs.

One detail of lineax (0.1.1) and equinox (0.13) is not public API and is touched here
only. Both check that a value has the structure they expect by comparing
`jax.ShapeDtypeStruct`s, the sharding included: lineax a vector against its operator's
structure, equinox the arguments of a closure-converted function against its example's.
Inside `shard_map`, JAX 0.10 gives every value a sharding over the all-manual mesh of
the map, which a structure built from shapes lacks, so every linear solve traced inside
one (the Newton iterations of kvaerno5 and the other implicit methods) failed with
"pytree does not match out_structure". While `f` is traced inside the map, the function
through which each makes the structures it compares (lineax's `strip_weak_dtype`,
equinox's `_strip_weak_dtype`) leaves out such shardings (they say only that a value
lives on the device that computes it); shardings of any other mesh are kept.
`tests/solvers/test_batch_shards.py` pins the behaviour against the installed versions:
if either changes, that test fails by name.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding

# (module, function): lineax's `strip_weak_dtype` where it is defined and where it was
# imported by name, and equinox's own copy, with which `filter_closure_convert` checks the
# arguments of a converted function (lineax materialises a Jacobian operator through one).
_STRIPPERS = (
    ("lineax._misc", "strip_weak_dtype"),
    ("lineax._operator", "strip_weak_dtype"),
    ("lineax._solve", "strip_weak_dtype"),
    ("lineax._solver.misc", "strip_weak_dtype"),
    ("equinox._ad", "_strip_weak_dtype"),
)

_lock = threading.RLock()
_depth = 0
_saved: dict[tuple[Any, str], Callable] = {}


def _local_structure(tree):
    """lineax's `strip_weak_dtype` without shardings over an all-manual mesh."""

    def one(x):
        if type(x) is not jax.ShapeDtypeStruct:
            return x
        sharding = x.sharding
        if isinstance(sharding, NamedSharding) and sharding.mesh.are_all_axes_manual:
            sharding = None
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding)

    return jax.tree.map(one, tree)


def _found() -> list[tuple[Any, str]]:
    """The (module, name) pairs of `_STRIPPERS` that the installed versions have."""
    out = []
    for module_name, name in _STRIPPERS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # pragma: no cover - another lineax or equinox
            continue
        if callable(getattr(module, name, None)):
            out.append((module, name))
    return out


@contextlib.contextmanager
def local_structures() -> Iterator[None]:
    """Within the block (re-entrant, any thread), lineax compares structures without
    shardings over an all-manual mesh (see the module docstring)."""
    global _depth
    with _lock:
        if _depth == 0:
            for module, name in _found():
                _saved[module, name] = getattr(module, name)
                setattr(module, name, _local_structure)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for (module, name), original in _saved.items():
                    setattr(module, name, original)
                _saved.clear()


def on_batch_shards(f: Callable, mesh: Mesh, in_specs, out_specs) -> Callable:
    """`jax.jit` of `jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)`
    for a function of independent runs (no collectives inside), traced, lowered and
    compiled with lineax's and equinox's structures compared per device
    (`local_structures`: equinox lowers its primitives, a linear solve among them, by
    tracing them again, so the lowering needs it as much as the trace).

    Arguments:
        f: a function of batched arrays (the runs on the leading axis of those whose
            spec names the mesh axis).
        mesh: a one-axis mesh of the devices.
        in_specs, out_specs: as for `jax.shard_map`.

    Returns:
        The jitted function; each call runs in `local_structures` (compiled on the first
        call for each shape, as `jax.jit` does).
    """
    jitted = jax.jit(
        jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    )

    @functools.wraps(f)
    def call(*args):
        with local_structures():
            return jitted(*args)

    return call
