"""The one store for unfinished work (sim/_unfinished.py): states written leaf by leaf and
read back into a template, and the names of partial and checkpoint files."""

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sim import DataError
from sim._unfinished import checkpoint_path, partial_path, read_leaves, tree_from_leaves, write_tree


def test_a_state_comes_back_bit_for_bit_with_its_keys_numbers_and_markers(tmp_path):
    marker = jnp.sin  # a leaf that is no state: taken from the template
    state = {
        "y": jnp.asarray([1.0, np.nextafter(2.0, 3.0)]),
        "count": jnp.asarray(7, jnp.int32),
        "key": jax.random.key(5),
        "step": 3,
        "scale": 0.1,
        "flag": True,
        "fn": marker,
        "none": None,
    }
    with h5py.File(tmp_path / "s.h5", "w") as f:
        write_tree(f.create_group("state"), state)
    with h5py.File(tmp_path / "s.h5", "r") as f:
        leaves = read_leaves(f["state"])
    template = jax.tree.map(
        lambda x: x, {**state, "step": 0, "scale": 0.0, "flag": False, "key": jax.random.key(0)}
    )
    back = tree_from_leaves(leaves, template, tmp_path / "s.h5", "state")
    assert np.asarray(back["y"]).tobytes() == np.asarray(state["y"]).tobytes()
    assert back["count"].dtype == jnp.int32 and int(back["count"]) == 7
    assert (back["step"], back["scale"], back["flag"]) == (3, 0.1, True)
    assert type(back["step"]) is int and type(back["flag"]) is bool
    assert np.array_equal(jax.random.key_data(back["key"]), jax.random.key_data(state["key"]))
    assert back["fn"] is marker and back["none"] is None
    # a template of shapes only (jax.eval_shape) takes it too
    shapes = jax.eval_shape(lambda: {k: v for k, v in state.items() if k in ("y", "count", "key")})
    with h5py.File(tmp_path / "t.h5", "w") as f:
        write_tree(f.create_group("state"), {k: state[k] for k in ("y", "count", "key")})
    with h5py.File(tmp_path / "t.h5", "r") as f:
        again = tree_from_leaves(read_leaves(f["state"]), shapes, tmp_path / "t.h5", "state")
    assert np.asarray(again["y"]).tobytes() == np.asarray(state["y"]).tobytes()


def test_a_state_of_another_shape_is_refused_naming_the_leaf(tmp_path):
    with h5py.File(tmp_path / "s.h5", "w") as f:
        write_tree(f.create_group("state"), {"a": jnp.zeros(3), "b": jnp.zeros((2, 2))})
    with h5py.File(tmp_path / "s.h5", "r") as f:
        leaves = read_leaves(f["state"])
    with pytest.raises(DataError, match=r"state/0001.*shape \(2, 2\).*needs \(2, 3\)"):
        tree_from_leaves(
            leaves, {"a": jnp.zeros(3), "b": jnp.zeros((2, 3))}, tmp_path / "s.h5", "state"
        )
    with pytest.raises(DataError, match="holds 2 arrays; this state has 3"):
        tree_from_leaves(
            leaves,
            {"a": jnp.zeros(3), "b": jnp.zeros((2, 2)), "c": jnp.zeros(1)},
            tmp_path / "s.h5",
            "state",
        )
    with pytest.raises(DataError, match="expected a PRNG key"):
        tree_from_leaves(
            leaves, {"a": jax.random.key(0), "b": jnp.zeros((2, 2))}, tmp_path / "s.h5", "state"
        )


def test_runs_sweeps_and_fits_name_their_files_alike(tmp_path):
    from inference import _checkpoint
    from sim import _stream, _sweep_store

    out = tmp_path / "out.h5"
    assert (
        partial_path(out)
        == tmp_path / ".out.h5.partial"
        == _stream.partial_path(out)
        == _sweep_store.partial_path(out)
    )
    assert (
        checkpoint_path(out)
        == tmp_path / ".out.h5.checkpoint"
        == _stream.checkpoint_path(out)
        == _checkpoint.checkpoint_path(out)
    )
