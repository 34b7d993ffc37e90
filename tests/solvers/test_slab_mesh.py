"""Particle-mesh Ewald in a run split by slabs (`solvers.SlabRun` of `md.LennardJonesCoulomb`
with electrostatics = "pme"): the model's mesh pieces (`md.MeshEwald`: spreading on a
window of planes, the weights of a block of modes, forces from the mesh potential) against
the Ewald sum, a separate method; the split run against the replicated run of one device
(its energy and forces by automatic differentiation through a whole-mesh FFT) on 1, 2 and
4 devices, and the energy of a rock-salt crystal against its Madelung constant; the
compiled program's collectives; and what cannot be split, refused in one line.
"""

import dataclasses
import json

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from physics import md
from solvers import cannot_split_by_slabs
from tests.helpers import on_host_devices


def ions(n=64, density=0.4, seed=0):
    """A random neutral configuration: species alternate 0, 1 (charges +1, -1)."""
    system = md.random_packing(jax.random.key(seed), n, density, min_distance=0.9)
    return dataclasses.replace(system, species=jnp.asarray(np.arange(n) % 2, jnp.int32))


def _whole(part, position, charges, edges):
    """Energy, forces and dU/d(stretch) of the pieces on one device holding the whole mesh."""
    k = part.mesh
    q = part.spread(position, charges, edges, 0, k[0])
    modes = (
        jnp.asarray(np.fft.fftfreq(k[0], 1 / k[0]).round().astype(int))[:, None, None],
        jnp.asarray(np.fft.fftfreq(k[1], 1 / k[1]).round().astype(int))[None, :, None],
        jnp.asarray(np.arange(k[2] // 2 + 1))[None, None, :],
    )
    transform = jnp.fft.rfftn(q)
    energy, stretch = part.on_modes(transform, modes, edges)
    phi = jnp.fft.irfftn(part.potential(transform, modes, edges), s=k)
    return energy, part.forces(position, charges, edges, 0, phi), stretch


# (odd and even sizes: the last axis's half spectrum has a Nyquist plane or none)
@pytest.mark.parametrize("mesh, order, error", [((24, 25, 27), 5, 1e-4), ((27, 24, 30), 4, 5e-4)])
def test_the_mesh_pieces_give_the_energy_forces_and_virial_of_pme_and_the_ewald_sum(
    mesh, order, error
):
    system = ions()
    edges = system.space.box
    q = jnp.asarray(np.arange(64) % 2 * -2.0 + 1.0)
    alpha = 1.1
    part = md.MeshEwald(alpha=alpha, mesh=mesh, order=order)
    energy, force, stretch = _whole(part, system.position, q, edges)
    ones = jnp.ones(3)
    # the same energy as SPME's (its forces and virial by autodiff through a whole FFT)
    pme = lambda r, e: md.pme_reciprocal_energy(r, q, e, alpha, mesh, order)  # noqa: E731
    np.testing.assert_allclose(energy, pme(system.position, edges), rtol=1e-12)
    np.testing.assert_allclose(force, -jax.grad(pme)(system.position, edges), atol=1e-12)
    pme_stretch = jax.grad(lambda s: pme(system.position * s, edges * s))(ones)
    np.testing.assert_allclose(stretch, pme_stretch, rtol=1e-12, atol=1e-12)
    # and the Ewald sum's, a separate method, up to the mesh's error (larger for lower orders)
    ewald = lambda r, e: md.ewald_reciprocal_energy(r, q, e, alpha, (10, 10, 10))  # noqa: E731
    expected = ewald(system.position, edges)
    expected_force = -jax.grad(ewald)(system.position, edges)
    expected_stretch = jax.grad(lambda s: ewald(system.position * s, edges * s))(ones)
    assert abs(float(energy / expected) - 1) < error, (float(energy), float(expected))
    scale = float(jnp.max(jnp.abs(expected_force)))
    assert float(jnp.max(jnp.abs(force - expected_force))) < error * scale
    largest = float(jnp.max(jnp.abs(expected_stretch)))
    np.testing.assert_allclose(stretch, expected_stretch, atol=error * largest)
    # the self energy, as the model has it
    model = md.LennardJonesCoulomb(ewald_alpha=alpha, pme_mesh=mesh, pme_order=order)
    np.testing.assert_allclose(
        part.self_energy(q), model.coulomb_self_energy(system, model.default_params()), rtol=1e-14
    )


@hypothesis.given(
    first=st.integers(-30, 30),
    planes=st.sampled_from([1, 7, 12]),
    seed=st.integers(0, 2**16),
    order=st.sampled_from([3, 5, 8]),
)
@hypothesis.settings(max_examples=25, deadline=None)
def test_a_window_of_planes_holds_those_planes_of_the_whole_mesh(first, planes, seed, order):
    rng = np.random.default_rng(seed)
    edges = jnp.asarray([3.0, 2.5, 2.0])
    position = jnp.asarray(rng.uniform(-1.0, 4.0, (20, 3)))  # (outside the box too)
    charges = jnp.asarray(rng.normal(size=20))
    part = md.MeshEwald(alpha=1.0, mesh=(12, 8, 9), order=order)
    spread = jax.jit(part.spread, static_argnums=4)
    whole = np.asarray(spread(position, charges, edges, 0, 12))
    window = np.asarray(spread(position, charges, edges, first, planes))
    expected = np.roll(whole, -first, axis=0)[:planes]
    np.testing.assert_allclose(window, expected, rtol=1e-13, atol=1e-13)


SPLIT = r"""
import json, re, sys
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from physics import md
from solvers import ParticleRun, ParticleSolver, SlabRun, VelocityVerlet

# a rock-salt crystal of 512 ions at density 0.6, thermalised (it melts)
crystal = md.lattice("rocksalt", 4, 0.6)
system = md.thermalize(crystal, jax.random.key(0), 1.0)
model = md.LennardJonesCoulomb(cutoff=2.0, pme_mesh=(24, 16, 16), ewald_alpha=1.4)
params = model.default_params()
times = np.linspace(0.0, 0.002 * 100, 5)
out = {}
ref, _, _ = ParticleRun(
    model, params, system, ParticleSolver(VelocityVerlet(dt=0.002)), times=times, every=25
).run()
out["replicated"] = {k: np.asarray(v).tolist() for k, v in ref.items()}
for devices in (1, 2, 4):
    run = SlabRun(model, params, system, 0.002, times=times, every=25, devices=devices)
    obs, _, stats = run.run()
    text = run._program().lower(*run._last_arguments).compile().as_text()
    out[devices] = {
        "obs": {k: np.asarray(v).tolist() for k, v in obs.items()},
        "builds": int(stats["neighbour_builds"]),
        "to_all": text.count("all-to-all"),
        "permutes": text.count("collective-permute"),
        "gathers": text.count("all-gather"),
        "mesh": list(run.physics.mesh.points),
    }
# the crystal at rest, charges alone: its energy, on 4 devices, from the mesh of the accuracy
charges = md.LennardJonesCoulomb(cutoff=2.0, ewald_accuracy=1e-6)
alone = {**charges.default_params(), "epsilon": jnp.asarray(0.0)}
still = crystal.at(crystal.position, jnp.zeros_like(crystal.position))
run = SlabRun(charges, alone, still, 0.002, times=times[:2], every=1, devices=4)
out["madelung"] = {
    "energy": float(run.first_observables()["potential_energy"]),
    "mesh": list(run.physics.mesh.points),
    "box": float(crystal.space.box[0]),
}
print("RESULT " + json.dumps(out))
"""


def test_pme_split_over_two_and_four_devices_is_the_replicated_run():
    done = on_host_devices(SPLIT, [], 4, timeout=1200)
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    out = json.loads(line[len("RESULT ") :])
    reference = out["replicated"]
    for devices in ("1", "2", "4"):
        run = out[devices]
        for name in ("position", "velocity", "potential_energy", "pressure", "total_energy"):
            np.testing.assert_allclose(
                run["obs"][name], reference[name], rtol=1e-11, atol=1e-11, err_msg=name
            )
        assert run["builds"] >= 1 and run["mesh"] == [24, 16, 16]
        if devices != "1":
            # the mesh crosses between the devices in all-to-alls, its planes around the
            # slabs and the ghosts in permutes; nothing is gathered whole
            assert run["to_all"] >= 2 and run["permutes"] > 0 and run["gathers"] == 0, run
    moved = np.asarray(reference["position"])
    assert np.max(np.abs(moved[-1] - moved[0])) > 0.1  # (the particles moved)
    # Madelung constant of rock salt (1.747565; Johnson & Templeton, J. Chem. Phys. 34,
    # 2004 (1961)): U = -(N / 2) M q^2 / r_nn, r_nn half the cubic cell's edge
    madelung = out["madelung"]
    nearest = madelung["box"] / 4 / 2
    assert madelung["mesh"][0] % 4 == 0
    assert -madelung["energy"] / 256 * nearest == pytest.approx(1.747565, rel=1e-5)


def test_what_pme_cannot_split_is_refused_in_one_line():
    system = md.lattice("rocksalt", 4, 0.6)  # a box 9.49 long
    said = lambda model, devices: cannot_split_by_slabs(model, system, devices, 0.3)  # noqa: E731
    ewald = md.LennardJonesCoulomb(cutoff=2.0, electrostatics="ewald")
    assert said(ewald, 2) == (
        "lj_coulomb with electrostatics = 'ewald' cannot be split over devices; "
        "electrostatics = 'pme' can"
    )
    odd = md.LennardJonesCoulomb(cutoff=2.0, pme_mesh=(25, 16, 16))
    assert said(odd, 1) is None  # (one slab takes any mesh)
    assert said(odd, 2) == (
        "lj_coulomb: pme_mesh = [25, 16, 16] does not split into 2 slabs; give a first size "
        "that 2 divides"
    )
    coarse = md.LennardJonesCoulomb(cutoff=2.0, pme_mesh=(16, 16, 16))
    assert said(coarse, 2) is None
    assert said(coarse, 4) == (
        "a mesh of 16 planes split into 4 slabs gives 4 planes a slab, fewer than the 6 + 2 "
        "around it that B-splines of order 5 and the skin 0.3 reach; use fewer slabs or a "
        "finer mesh"
    )
    # a mesh chosen from the accuracy: its first size the next 2-3-5 size the slabs divide
    auto = md.LennardJonesCoulomb(cutoff=2.0)
    chosen = auto.for_system(system).pme_mesh
    for devices in (1, 2, 3, 4):
        mesh = auto.mesh_part(system, devices).mesh
        assert mesh[0] % devices == 0 and mesh[0] >= chosen[0] and mesh[1:] == chosen[1:]
    assert auto.mesh_part(system, 1).mesh == chosen
    assert md.LennardJones().mesh_part(system, 2) is None
