"""Neighbour lists against brute force: same pairs, rebuilt on time, overflow flagged."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers import NeighbourList


def brute_pairs(position, box, radius):
    pos = np.asarray(position)
    dr = pos[:, None, :] - pos[None, :, :]
    if box is not None:
        dr = dr - np.asarray(box) * np.round(dr / np.asarray(box))
    r2 = np.sum(dr**2, axis=-1)
    np.fill_diagonal(r2, np.inf)
    return [set(np.nonzero(row < radius**2)[0].tolist()) for row in r2]


def listed_pairs(index, n):
    idx = np.asarray(index)
    rows = []
    for row in idx:
        kept = row[row < n].tolist()
        assert len(kept) == len(set(kept)), "a neighbour is listed twice"
        rows.append(set(kept))
    return rows


# "free-space" has an odd number of rows, which the id lookup takes in two halves. With
# `-m slow`: "dense" repeats the periodic cell list of "cells" (another seed and box), and
# "many-words" has more candidates a row (2,200, all pairs) than the 64 words of 32 that
# `_compact` unrolls, so that its search over the words is a loop.
@pytest.mark.parametrize(
    "n, edge, periodic, cutoff",
    [
        (600, 10.0, True, 2.0),
        (300, 7.0, True, 2.0),
        (251, 16.0, False, 2.0),
        pytest.param(2200, 3.5, True, 1.0, marks=pytest.mark.slow),
        pytest.param(400, 9.0, True, 2.0, marks=pytest.mark.slow),
    ],
    ids=["cells", "all-pairs-small-box", "free-space", "many-words", "dense"],
)
def test_list_matches_brute_force(n, edge, periodic, cutoff):
    rng = np.random.default_rng(n)
    position = jnp.asarray(rng.uniform(0, edge, (n, 3)))
    box = jnp.full(3, edge) if periodic else None
    nl = NeighbourList.allocate(position, box, cutoff=cutoff, skin=0.2 * cutoff)
    nbrs = jax.jit(nl.build)(position, box)
    assert not bool(nbrs.overflow)
    if n > 2048:
        assert nl.cells == () and -(-n // 32) > 64  # (the case it is meant to be)
    assert listed_pairs(nbrs.index, n) == brute_pairs(position, box, 1.2 * cutoff)


def test_free_space_particles_outside_the_grid_are_still_found():
    rng = np.random.default_rng(1)
    position = jnp.asarray(rng.uniform(0, 12, (200, 3)))
    nl = NeighbourList.allocate(position, None, cutoff=1.5, skin=0.3)
    moved = position.at[:20].add(-6.0)  # far below the grid's lower corner
    grown = nl.grown(jax.jit(nl.build)(moved, None), 200)
    assert listed_pairs(jax.jit(grown.build)(moved, None).index, 200) == brute_pairs(
        moved, None, 1.8
    )


def test_rebuilds_only_after_half_the_skin():
    rng = np.random.default_rng(2)
    position = jnp.asarray(rng.uniform(0, 10, (300, 3)))
    box = jnp.full(3, 10.0)
    nl = NeighbourList.allocate(position, box, cutoff=2.0, skin=0.4)
    nbrs = jax.jit(nl.build)(position, box)
    update = jax.jit(nl.update)  # one compilation for the three moves below
    small = position.at[0, 0].add(0.19)
    assert int(update(nbrs, small, box).builds) == 1
    large = position.at[0, 0].add(0.21)
    rebuilt = update(nbrs, large, box)
    assert int(rebuilt.builds) == 2
    np.testing.assert_array_equal(np.asarray(rebuilt.reference), np.asarray(large))
    # wrapping a particle across the box is not a move
    wrapped = position.at[5, 1].add(10.0)
    assert int(update(nbrs, wrapped, box).builds) == 1


def test_overflow_is_flagged_and_growing_fixes_it():
    rng = np.random.default_rng(3)
    position = jnp.asarray(rng.uniform(0, 10, (500, 3)))
    box = jnp.full(3, 10.0)
    nl = NeighbourList.allocate(position, box, cutoff=2.0, skin=0.3, capacity=5)
    nbrs = jax.jit(nl.build)(position, box)
    assert bool(nbrs.overflow)
    assert int(nbrs.max_neighbours) > 5
    bigger = nl.grown(nbrs, 500)
    assert bigger.capacity >= int(nbrs.max_neighbours)
    fixed = jax.jit(bigger.build)(position, box)
    assert not bool(fixed.overflow)
    assert listed_pairs(fixed.index, 500) == brute_pairs(position, box, 2.3)


def test_cell_overflow_is_flagged():
    position = jnp.asarray(np.random.default_rng(4).uniform(0, 10, (400, 3)))
    box = jnp.full(3, 10.0)
    nl = NeighbourList.allocate(position, box, cutoff=2.0, skin=0.3)
    crowded = position.at[:100].set(jnp.asarray(np.random.default_rng(5).uniform(0, 1.5, (100, 3))))
    nbrs = jax.jit(nl.build)(crowded, box)
    assert bool(nbrs.overflow)
    assert int(nbrs.max_occupancy) > nl.cell_capacity


def test_box_shorter_than_twice_the_cutoff_is_refused():
    position = jnp.zeros((10, 3))
    with pytest.raises(ValueError, match="twice the cutoff"):
        NeighbourList.allocate(position, jnp.full(3, 4.0), cutoff=2.5, skin=0.3)
