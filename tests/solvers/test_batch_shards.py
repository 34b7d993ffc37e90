"""`solvers.on_batch_shards`: a batch of runs under `jax.shard_map`, each device solving
its own rows, with the lineax and equinox structure checks it adapts (pinned here against
the installed versions). A one-device mesh is enough: inside any shard_map, JAX gives
values a sharding over the map's manual mesh."""

import diffrax
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec as P

from solvers import _batch_shards, local_structures, on_batch_shards

MESH = Mesh(np.asarray(jax.devices()[:1]), ("batch",))
SPEC = P("batch")

# Four well-conditioned 3 x 3 systems.
A = np.stack(
    [
        np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 2.0]]) + k * np.eye(3)
        for k in range(4)
    ]
)
B = np.arange(12.0).reshape(4, 3) - 5.0


def solve_all(a, b):
    return jax.vmap(
        lambda a, b: lx.linear_solve(lx.MatrixLinearOperator(a), b, solver=lx.LU()).value
    )(a, b)


def test_the_installed_lineax_and_equinox_have_the_pieces_adapted():
    # Each name the adapter swaps while tracing exists where it looks for it.
    assert [(m.__name__, name) for m, name in _batch_shards._found()] == list(
        _batch_shards._STRIPPERS
    )


def test_a_linear_solve_inside_shard_map_needs_the_adapter():
    # The behaviour adapted: lineax refuses a vector whose structure carries the map's
    # manual sharding (if this starts to pass, lineax compares structures per device
    # itself and the adapter can go).
    with pytest.raises(ValueError, match="structure"):
        jax.jit(
            jax.shard_map(solve_all, mesh=MESH, in_specs=SPEC, out_specs=SPEC, check_vma=False)
        )(A, B)


def test_linear_solves_on_batch_shards_match_numpy():
    x = on_batch_shards(solve_all, MESH, SPEC, SPEC)(A, B)
    np.testing.assert_allclose(
        np.asarray(x), np.linalg.solve(A, B[..., None])[..., 0], rtol=1e-13, atol=1e-14
    )


def test_an_implicit_solve_on_batch_shards_matches_the_exact_solution():
    # y' = -k y with Kvaerno5 (Newton iterations through lineax, the Jacobian through a
    # closure-converted function of equinox): y(1) = exp(-k).
    k = np.array([0.5, 1.0, 2.0, 4.0])

    def decay(rates):
        def one(rate):
            term = diffrax.ODETerm(lambda t, y, r: -r * y)
            controller = diffrax.PIDController(rtol=1e-10, atol=1e-12)
            sol = diffrax.diffeqsolve(
                term,
                diffrax.Kvaerno5(),
                0.0,
                1.0,
                0.05,
                jnp.ones(2),
                args=rate,
                stepsize_controller=controller,
            )
            return sol.ys[-1]

        return jax.vmap(one)(rates)

    y = on_batch_shards(decay, MESH, SPEC, SPEC)(k)
    np.testing.assert_allclose(np.asarray(y), np.exp(-k)[:, None] * np.ones((4, 2)), rtol=1e-8)


def test_local_structures_restores_the_functions_it_swapped():
    before = [getattr(m, name) for m, name in _batch_shards._found()]
    with local_structures():
        with local_structures():  # (re-entrant)
            assert all(
                getattr(m, name) is _batch_shards._local_structure
                for m, name in _batch_shards._found()
            )
        assert all(
            getattr(m, name) is _batch_shards._local_structure for m, name in _batch_shards._found()
        )
    assert [getattr(m, name) for m, name in _batch_shards._found()] == before
