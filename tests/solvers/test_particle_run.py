"""The one capacity policy of particle runs (solvers/_particle_run.py): the fixed lists of
sweeps and fits, and how a batch's overflowed runs are redone."""

import math

import numpy as np
import pytest

from solvers import (
    ALL_PAIRS,
    FIXED_FACTOR,
    Result,
    fixed_capacity,
    larger_capacity,
    redo_overflowed,
)
from solvers._neighbours import CAPACITY_FACTOR


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
    # the growable start counts the same neighbours with CAPACITY_FACTOR to spare (at
    # least 2 more)
    assert capacity == min(
        math.ceil(FIXED_FACTOR * max(math.ceil(CAPACITY_FACTOR * most), most + 2)), 119
    )


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
    values = {
        "stats/result": np.array([0, over, 0, over]),
        "x": np.array([[1.0, 1.0], [np.nan, np.nan], [3.0, 3.0], [np.nan, np.nan]]),
    }
    tried = []

    def rerun(capacity):  # run 1 fits 20 neighbours, run 3 needs all pairs
        tried.append(capacity)
        fits = np.array(
            [True, capacity == ALL_PAIRS or capacity >= 20, True, capacity == ALL_PAIRS]
        )
        return {
            "stats/result": np.where(fits, 0, over),
            "x": np.where(fits[:, None], 10.0 * capacity, np.nan) * np.ones((4, 2)),
        }

    out = redo_overflowed(values, 10, 30, rerun)
    assert tried == [20, 29, ALL_PAIRS]
    np.testing.assert_array_equal(out["stats/result"], [0, 0, 0, 0])
    # run 1 keeps its first good rerun only until a later rerun replaces every run still
    # marked: it was fixed at 20 and not marked again
    np.testing.assert_array_equal(
        out["x"], [[1.0, 1.0], [200.0, 200.0], [3.0, 3.0], [-10.0, -10.0]]
    )


def test_runs_that_still_overflow_with_all_pairs_stay_marked():
    over = int(Result.neighbour_overflow)
    values = {"stats/result": np.array([over]), "x": np.array([np.nan])}
    out = redo_overflowed(
        values, ALL_PAIRS, 10, lambda c: pytest.fail("nothing larger than all pairs")
    )
    assert out["stats/result"].tolist() == [over]


def test_a_run_grows_a_small_list_and_equals_the_all_pairs_run():
    # The driver alone (no front door): a Lennard-Jones liquid of 32 particles whose list
    # starts with room for 2 neighbours must grow it, redo the overflowed chunk, and end
    # where the run without a list ends.
    import jax
    import jax.numpy as jnp

    from physics import md
    from solvers import ParticleRun, ParticleSolver, VelocityVerlet

    model = md.LennardJones(cutoff=1.6, force_shift=True)
    system = md.thermalize(md.lattice("fcc", 2, 0.8), jax.random.key(0), 1.0)
    params = {k: jnp.asarray(v) for k, v in model.default_params().items()}
    times = np.linspace(0.0, 0.1, 3)  # 2 saves of 10 steps, one chunk each

    def run(**options):
        solver = ParticleSolver(VelocityVerlet(dt=0.005), chunk_steps=10, **options)
        return ParticleRun(model, params, system, solver, times=times, every=10).run()

    grown_obs, grown_state, grown = run(capacity=2)
    # (the grown run's settings: its start's programs, compiled above, start it too)
    streamed = ParticleRun(
        model,
        params,
        system,
        ParticleSolver(VelocityVerlet(dt=0.005), chunk_steps=10, capacity=2),
        times=times,
        every=10,
    )
    start = streamed.start()
    for n in (0, streamed.chunk + 1):  # a streamed chunk holds 1 to `chunk` frames
        with pytest.raises(
            ValueError, match=f"a chunk of {n} frames; this run takes 1 to {streamed.chunk}"
        ):
            streamed.advance(start, 0, n)
    pairs_obs, pairs_state, pairs = run(neighbour_list=False)
    assert int(grown["capacity"]) > 2 and int(grown["neighbour_builds"]) >= 1, grown
    assert int(pairs["capacity"]) == 0 and int(pairs["neighbour_builds"]) == 0, pairs
    assert int(grown["result"]) == int(pairs["result"]) == int(Result.successful)
    assert int(grown["num_steps"]) == 20
    np.testing.assert_allclose(grown_obs["position"], pairs_obs["position"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        grown_obs["potential_energy"], pairs_obs["potential_energy"], rtol=1e-12
    )
