"""The one store for unfinished work. Runs (`sim._stream`), sweeps (`sim._sweep_store`)
and fits and training (`inference._checkpoint`) keep what they have not finished the same
way:

- names: an unfinished output `NAME` is `.NAME.partial` beside it (runs and sweeps write
  their rows there and rename it when complete), and the state to continue from is
  `.NAME.checkpoint` (`companion_path`);
- states: a pytree is stored as one HDF5 dataset per leaf, PRNG keys with their
  implementation (`write_tree`), and read back into a template of the same structure
  with every leaf's shape and dtype checked (`read_leaves`, `tree_from_leaves`);
- "the same work": a resume compares the resolved config it was started from with the
  current one (`config_difference`), ignoring only what does not change what is
  computed: where and how often results are written (`[output]`,
  `fit.checkpoint_every`), and for runs the bounds that can only stop them (`[checks]`,
  `solver.max_steps`: a run either computes the same numbers or stops). A sweep keeps
  `[checks]` (they decide the status recorded for each run); a fit also compares its
  data by digest.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import h5py
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PyTree

from ._errors import DataError
from ._shards import is_split, write_blocks
from ._store import companion_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

WRITING = ("output", "fit.checkpoint_every")
"""Config keys that say where and how often results are written: never part of the work."""
RUN_BOUNDS = ("checks", "solver.max_steps")
"""Config keys that can only stop a run early: a run resumed with others computes the same
numbers (or stops)."""


def partial_path(path: str | Path) -> Path:
    """Where the rows of an unfinished output `path` are written: `.<name>.partial`."""
    return companion_path(Path(path), "partial")


def checkpoint_path(path: str | Path) -> Path:
    """The state an unfinished output `path` continues from: `.<name>.checkpoint`."""
    return companion_path(Path(path), "checkpoint")


def remove_stale(path: Path) -> None:
    """The temporary files that interrupted writes of `path` left (`.<name>.*.tmp`)."""
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()


# ----------------------------------------------------------------------------- the same work


def as_text(value: Any) -> str:
    """An HDF5 attribute read as text (h5py gives bytes or str)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _without(data: dict, dotted: str) -> None:
    head, _, rest = dotted.partition(".")
    if not rest:
        data.pop(head, None)
    elif isinstance(data.get(head), dict):
        _without(data[head], rest)


def _comparable(text: str, ignore: tuple[str, ...]) -> dict:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {"": text}
    for key in WRITING + ignore:
        _without(data, key)
    return data


_UNSET = object()


def _shown(value: Any) -> str:
    return "no value" if value is _UNSET else repr(value)


def _first_change(a: dict, b: dict, prefix: str = "") -> str:
    for key in [*a, *(k for k in b if k not in a)]:
        x, y = a.get(key, _UNSET), b.get(key, _UNSET)
        if x == y:
            continue
        if isinstance(x, dict) and isinstance(y, dict):
            return _first_change(x, y, f"{prefix}{key}.")
        return f"{prefix}{key}: stored {_shown(x)}, now {_shown(y)}"
    return ""


def config_difference(stored: str, current: str, ignore: tuple[str, ...] = ()) -> str:
    """'' when two resolved configs describe the same work, else the first difference
    ("solver.rtol: stored 1e-06, now 1e-08"). Keys in `WRITING` and in `ignore` (dotted:
    `solver.max_steps`, or a whole section) are left out.

    Arguments:
        stored: the resolved config TOML the work was started from (str, or the bytes of
            an HDF5 attribute).
        current: the resolved config TOML of the work now asked for (str or bytes).
        ignore: further dotted keys or sections to leave out of the comparison.

    Returns:
        "" when the two agree on every key compared, else "KEY: stored X, now Y" for the
        first key that differs ("no value" for a missing one), or "the configs differ"
        (text that is not TOML is compared whole).
    """
    a, b = _comparable(as_text(stored), ignore), _comparable(as_text(current), ignore)
    if a == b:
        return ""
    return _first_change(a, b) or "the configs differ"


# ----------------------------------------------------------------------------- states


def _stored(leaf) -> bool:
    """Whether a leaf is state (arrays and numbers); other leaves (functions, markers)
    are the same in every state of a structure and are taken from the template."""
    return isinstance(
        leaf, (jax.Array, jax.ShapeDtypeStruct, np.ndarray, np.generic, bool, int, float, complex)
    )


def write_tree(group: h5py.Group, tree: PyTree) -> None:
    """Store the array and number leaves of `tree` in `group` as datasets 0000, 0001, ...
    (PRNG keys as their data with a `key_impl` attribute); `group.attrs["leaves"]`
    counts them.

    Arguments:
        group: the HDF5 group to write in.
        tree: the pytree to store; leaves that are not arrays or numbers (functions,
            markers) are skipped.
    """
    leaves = [leaf for leaf in jax.tree.leaves(tree) if _stored(leaf)]
    group.attrs["leaves"] = len(leaves)
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            dataset = group.create_dataset(f"{i:04d}", data=np.asarray(jax.random.key_data(leaf)))
            dataset.attrs["key_impl"] = str(jax.random.key_impl(leaf))
        elif is_split(leaf):  # (one device's block at a time)
            dataset = group.create_dataset(f"{i:04d}", shape=leaf.shape, dtype=np.dtype(leaf.dtype))
            write_blocks(dataset, leaf)
        else:
            group.create_dataset(f"{i:04d}", data=np.asarray(leaf))


def read_leaves(group: h5py.Group, count: int | None = None) -> list[tuple[np.ndarray, str]]:
    """The leaves `write_tree` stored in `group`: (data, key implementation or ''). `count`
    overrides the group's own count.

    Arguments:
        group: the HDF5 group `write_tree` wrote.
        count: how many leaves to read (datasets 0000 up to count - 1); None for
            `group.attrs["leaves"]`.

    Returns:
        A list of (the leaf's data as a numpy array, its PRNG key implementation or ''),
        in the order of the tree's leaves.
    """
    count = int(group.attrs["leaves"] if count is None else count)
    out = []
    for i in range(count):
        dataset = group[f"{i:04d}"]
        out.append((np.asarray(dataset[()]), as_text(dataset.attrs.get("key_impl", ""))))
    return out


def tree_from_leaves(
    leaves: list[tuple[np.ndarray, str]], template: PyTree, source: Path, key: str
) -> PyTree:
    """The stored `leaves` in the structure of `template` (arrays, Python numbers, or the
    `jax.ShapeDtypeStruct`s of `jax.eval_shape`); a Python number comes back as one.

    Arguments:
        leaves: the stored leaves, as `read_leaves` gives them.
        template: a pytree of the structure, shapes and dtypes the state has; its leaves
            that are not arrays or numbers are taken as they are.
        source: the file the leaves were read from, named in errors.
        key: the group's path in the file, named in errors (with the leaf's dataset).

    Returns:
        A pytree of the structure of `template`: PRNG keys rebuilt with their
        implementation, arrays as JAX arrays of the template's dtype (weakly typed where
        the template's scalar is), Python numbers of the template's type.

    Raises:
        DataError: naming `source` and `key`: the stored leaves do not fit the template.
    """
    like_leaves, treedef = jax.tree.flatten(template)
    stored = [i for i, like in enumerate(like_leaves) if _stored(like)]
    if len(stored) != len(leaves):
        raise DataError(source, key, f"holds {len(leaves)} arrays; this state has {len(stored)}")
    out = list(like_leaves)
    for n, (i, (data, impl)) in enumerate(zip(stored, leaves, strict=False)):
        like, where = like_leaves[i], f"{key}/{n:04d}"
        if isinstance(like, (jax.Array, jax.ShapeDtypeStruct)) and jnp.issubdtype(
            like.dtype, jax.dtypes.prng_key
        ):
            if not impl:
                raise DataError(source, where, "expected a PRNG key")
            out[i] = jax.random.wrap_key_data(jnp.asarray(data), impl=impl)
            continue
        python = isinstance(like, (bool, int, float, complex))
        shape, dtype = (
            (like.shape, like.dtype)
            if isinstance(like, jax.ShapeDtypeStruct)
            else (np.shape(like), np.asarray(like).dtype)
        )
        if data.shape != tuple(shape) or data.dtype != dtype:
            raise DataError(
                source,
                where,
                f"has shape {data.shape} and dtype {data.dtype}; this state needs {tuple(shape)} "
                f"{dtype}",
            )
        out[i] = type(like)(data.item()) if python else _typed_like(like, data)
    return jax.tree.unflatten(treedef, out)


def _typed_like(like, data: np.ndarray) -> jax.Array:
    """`data` as an array typed as `like`: weakly typed where `like` is a weakly typed
    scalar (one a Python number started), so that a restored state has the types of a
    fresh one (with other types, a resumed fit compiled its step program again)."""
    if getattr(like, "weak_type", False) and data.shape == ():
        weak = jnp.asarray(data.item())
        if weak.dtype == data.dtype:
            return weak
    return jnp.asarray(data)
