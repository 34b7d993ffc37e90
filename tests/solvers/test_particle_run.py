"""The one capacity policy of particle runs (solvers/_particle_run.py): the fixed lists of
sweeps and fits, and how a batch's overflowed runs are redone."""

import math

import numpy as np
import pytest

from solvers import ALL_PAIRS, FIXED_FACTOR, Result, fixed_capacity, larger_capacity, redo_overflowed


def _most_neighbours(position: np.ndarray, box: np.ndarray | None, radius: float) -> int:
    """The largest number of particles within `radius` of one particle, by brute force."""
    dr = position[:, None, :] - position[None, :, :]
    if box is not None:
        dr -= box * np.round(dr / box)
    r = np.sqrt(np.sum(dr * dr, axis=-1))
    np.fill_diagonal(r, np.inf)
    return int(np.max(np.sum(r < radius, axis=1)))


@pytest.mark.parametrize("periodic", [True, False])
def test_a_fixed_list_has_room_for_twice_the_neighbours_counted(periodic):
    rng = np.random.default_rng(3)
    box = np.array([7.0, 7.0, 7.0])
    position = rng.uniform(0.0, 7.0, size=(120, 3))
    most = _most_neighbours(position, box if periodic else None, 2.5 + 0.3)
    capacity = fixed_capacity(position, box if periodic else None, 2.5, 0.3)
    assert FIXED_FACTOR * most <= capacity <= 119, (most, capacity)
    # the growable start counts the same neighbours with 25% to spare (at least 2 more)
    assert capacity == min(math.ceil(FIXED_FACTOR * max(math.ceil(1.25 * most), most + 2)), 119)


def test_a_fixed_list_never_exceeds_all_other_particles():
    position = np.array([[0.0, 0.0], [0.5, 0.0], [0.0, 0.5], [0.5, 0.5]])
    assert fixed_capacity(position, None, 2.5, 0.3) == 3


def test_larger_capacities_double_then_take_all_pairs():
    seen, capacity = [], 5
    while capacity is not None:
        seen.append(capacity)
        capacity = larger_capacity(capacity, 50)
    assert seen == [5, 10, 20, 40, 49, ALL_PAIRS]


def test_overflowed_runs_are_redone_and_the_others_kept():
    over = int(Result.neighbour_overflow)
    values = {"stats/result": np.array([0, over, 0, over]), "x": np.array([[1.0, 1.0], [np.nan, np.nan], [3.0, 3.0], [np.nan, np.nan]])}
    tried = []

    def rerun(capacity):  # run 1 fits 20 neighbours, run 3 needs all pairs
        tried.append(capacity)
        fits = np.array([True, capacity == ALL_PAIRS or capacity >= 20, True, capacity == ALL_PAIRS])
        return {"stats/result": np.where(fits, 0, over), "x": np.where(fits[:, None], 10.0 * capacity, np.nan) * np.ones((4, 2))}

    out = redo_overflowed(values, 10, 30, rerun)
    assert tried == [20, 29, ALL_PAIRS]
    np.testing.assert_array_equal(out["stats/result"], [0, 0, 0, 0])
    # run 1 keeps its first good rerun only until a later rerun replaces every run still
    # marked: it was fixed at 20 and not marked again
    np.testing.assert_array_equal(out["x"], [[1.0, 1.0], [200.0, 200.0], [3.0, 3.0], [-10.0, -10.0]])


def test_runs_that_still_overflow_with_all_pairs_stay_marked():
    over = int(Result.neighbour_overflow)
    values = {"stats/result": np.array([over]), "x": np.array([np.nan])}
    out = redo_overflowed(values, ALL_PAIRS, 10, lambda c: pytest.fail("nothing larger than all pairs"))
    assert out["stats/result"].tolist() == [over]
