"""Point charges by Ewald summation and smooth particle-mesh Ewald: Madelung constants of
ionic crystals, PME against Ewald, forces and virial against the derivatives of the
energy, the Ewald energy independent of its splitting parameter, derivatives with respect
to charges and Lennard-Jones parameters, and the inputs the model refuses."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from physics import md
from physics.md._electrostatics import bspline_weights, pme_mesh
from solvers import NeighbourList

# Madelung constants referred to the nearest-neighbour distance (Kittel, Introduction to
# Solid State Physics, 8th ed., Table 3.9 context; Johnson & Templeton, J. Chem. Phys.
# 34, 2004 (1961)): the energy per ion pair is -M q^2 / r_nn.
MADELUNG = {
    "rocksalt": (1.747565, 0.5),
    "caesium_chloride": (1.762675, math.sqrt(3) / 2),
    "zincblende": (1.638055, math.sqrt(3) / 4),
}


def charges_only(**options):
    model = md.LennardJonesCoulomb(**options)
    return model, {**model.default_params(), "epsilon": jnp.asarray(0.0)}


def madelung(kind: str, model) -> float:
    cells = 4 if kind == "caesium_chloride" else 2
    system = md.lattice(kind, cells, 1.0)
    _, params = charges_only()
    nearest = MADELUNG[kind][1] * float(system.space.box[0]) / cells
    sized = model.for_system(system)  # (compiled whole: a third of the time op by op)
    return -float(jax.jit(lambda s: sized.energy(s, params))(system)) / (system.n / 2) * nearest


@pytest.mark.parametrize("kind", list(MADELUNG))
def test_madelung_constants_by_ewald(kind):
    box = float(md.lattice(kind, 4 if kind == "caesium_chloride" else 2, 1.0).space.box[0])
    model = md.LennardJonesCoulomb(cutoff=0.49 * box, electrostatics="ewald", ewald_accuracy=1e-10)
    assert madelung(kind, model) == pytest.approx(MADELUNG[kind][0], rel=1e-6)


@pytest.mark.parametrize("kind", list(MADELUNG))
def test_madelung_constants_by_pme(kind):
    box = float(md.lattice(kind, 4 if kind == "caesium_chloride" else 2, 1.0).space.box[0])
    model = md.LennardJonesCoulomb(cutoff=0.49 * box, electrostatics="pme", ewald_accuracy=1e-5)
    assert madelung(kind, model) == pytest.approx(MADELUNG[kind][0], rel=1e-4)


def ions(n=96, density=0.4, seed=0):
    """A random neutral ionic configuration: species alternate 0, 1 (charges +1, -1)."""
    system = md.random_packing(jax.random.key(seed), n, density, min_distance=0.9)
    return dataclasses.replace(system, species=jnp.asarray(np.arange(n) % 2, jnp.int32))


def stretched(system, factors):
    """Positions and box edges multiplied by `factors` [3], axis by axis."""
    return dataclasses.replace(
        system, position=system.position * factors, space=md.Periodic(system.space.box * factors)
    )


def energy_and_forces(model, system, params, neighbours=None):
    """Energy and forces in one compiled call (faster than op by op)."""
    return jax.jit(
        lambda s: (model.energy(s, params, neighbours), model.forces(s, params, neighbours))
    )(system)


def relative_rms(a, b):
    return float(jnp.sqrt(jnp.mean((a - b) ** 2)) / jnp.sqrt(jnp.mean(b**2)))


def test_pme_agrees_with_ewald_on_random_ions():
    system = ions(n=64)
    cutoff = 0.49 * float(system.space.box[0])
    params = md.LennardJonesCoulomb().default_params()
    ewald = md.LennardJonesCoulomb(
        cutoff=cutoff, electrostatics="ewald", ewald_accuracy=1e-9
    ).for_system(system)
    pme = md.LennardJonesCoulomb(
        cutoff=cutoff,
        electrostatics="pme",
        ewald_accuracy=1e-6,
        pme_order=6,
        ewald_alpha=ewald.alpha,
    ).for_system(system)
    assert pme.pme_mesh[0] >= 2 * pme.pme_order  # a real mesh, not a degenerate one
    e_ewald, f_ewald = energy_and_forces(ewald, system, params)
    e_pme, f_pme = energy_and_forces(pme, system, params)
    assert float(e_pme) == pytest.approx(float(e_ewald), rel=1e-5)
    assert relative_rms(f_pme, f_ewald) < 1e-5
    # and particle by particle: no force misses by more than 1e-5 of the largest
    # (measured 1.8e-7; the RMS 2.6e-7)
    worst = jnp.max(jnp.linalg.norm(f_pme - f_ewald, axis=1)) / jnp.max(
        jnp.linalg.norm(f_ewald, axis=1)
    )
    assert float(worst) < 1e-5
    # and the accuracy is what decides it: a coarse mesh misses by far more
    coarse = dataclasses.replace(pme, pme_mesh=(12, 12, 12))
    assert relative_rms(energy_and_forces(coarse, system, params)[1], f_ewald) > 1e-4


@pytest.mark.parametrize("method", ["ewald", "pme"])
def test_forces_and_virial_are_derivatives_of_the_energy(method):
    system = ions(n=64, density=0.3, seed=3)
    model = md.LennardJonesCoulomb(
        cutoff=2.5, electrostatics=method, ewald_accuracy=1e-5
    ).for_system(system)
    params = {
        **model.default_params(),
        "epsilon": jnp.asarray(0.3),
        "charges": jnp.asarray([0.8, -0.8]),
    }
    energy = jax.jit(lambda s: model.energy(s, params))
    # (one compiled program: `virial` op by op took four times as long as all three)
    grad, (forces, virial), total = jax.jit(
        lambda s: (
            jax.grad(lambda r: model.energy(s.at(r), params))(s.position),
            model.forces_and_virial(s, params),
            model.virial(s, params),
        )
    )(system)
    np.testing.assert_allclose(
        np.asarray(forces),
        -np.asarray(grad),
        rtol=1e-11,
        atol=1e-11 * float(jnp.max(jnp.abs(grad))),
    )
    # W_aa = -dU/d(lambda_a) under the stretch of axis a, by central differences
    for axis in range(3):
        h = 1e-6
        stretch = lambda s: float(energy(stretched(system, jnp.ones(3).at[axis].set(s))))
        numeric = -(stretch(1 + h) - stretch(1 - h)) / (2 * h)
        assert float(virial[axis]) == pytest.approx(numeric, rel=1e-6)
    assert float(total) == pytest.approx(float(jnp.sum(virial)), rel=1e-12)


def test_the_coulomb_virial_is_the_coulomb_energy():
    # U is homogeneous of degree -1 in the lengths, so W = -dU/d(lambda) = U (Euler); the
    # Ewald sum is so up to its truncation errors.
    system = ions(n=64, density=0.3, seed=4)
    model, params = charges_only(cutoff=2.5, electrostatics="ewald", ewald_accuracy=1e-10)
    model = model.for_system(system)
    virial, energy = jax.jit(lambda s: (model.virial(s, params), model.energy(s, params)))(system)
    assert float(virial) == pytest.approx(float(energy), rel=1e-8)


def test_neighbour_list_gives_the_all_pairs_energy_and_forces():
    system = ions(n=96, density=0.4, seed=5)
    model = md.LennardJonesCoulomb(cutoff=2.4, electrostatics="pme").for_system(system)
    params = model.default_params()
    box = system.space.box
    neighbours = NeighbourList.allocate(system.position, box, model.cutoff, 0.3)
    index = jax.jit(lambda r: neighbours.build(r, box).index)(
        system.position
    )  # (compiled whole: an eighth of the time op by op)
    (e_list, f_list), (e_all, f_all) = (
        energy_and_forces(model, system, params, index),
        energy_and_forces(model, system, params),
    )
    assert float(e_list) == pytest.approx(float(e_all), rel=1e-12)
    np.testing.assert_allclose(np.asarray(f_list), np.asarray(f_all), rtol=1e-10, atol=1e-10)


def test_the_ewald_energy_does_not_depend_on_alpha():
    system = ions(n=64, density=0.3, seed=1)
    params = md.LennardJonesCoulomb().default_params()
    cutoff = 0.49 * float(system.space.box[0])
    energies = []
    for alpha_rc in (5.5, 6.0, 6.5):
        alpha = alpha_rc / cutoff
        model = md.LennardJonesCoulomb(
            cutoff=cutoff, electrostatics="ewald", ewald_accuracy=1e-14, ewald_alpha=alpha
        ).for_system(system)
        energies.append(
            float(jax.jit(lambda s, model=model: model.energy(s, params))(system))
        )  # (compiled whole)
    assert max(energies) - min(energies) < 1e-8 * abs(energies[0])
    # while each of its three parts changes by far more
    low = md.LennardJonesCoulomb(
        cutoff=cutoff, electrostatics="ewald", ewald_alpha=5.5 / cutoff
    ).for_system(system)
    high = md.LennardJonesCoulomb(
        cutoff=cutoff, electrostatics="ewald", ewald_alpha=6.5 / cutoff
    ).for_system(system)
    assert abs(
        float(low.coulomb_self_energy(system, params) - high.coulomb_self_energy(system, params))
    ) > 1e-2 * abs(energies[0])


def test_gradients_with_respect_to_charges_and_lennard_jones_parameters():
    system = ions(n=64, density=0.3, seed=2)
    model = md.LennardJonesCoulomb(cutoff=2.5, electrostatics="pme").for_system(system)
    params = {**model.default_params(), "charges": jnp.asarray([0.7, -0.7])}
    energy = jax.jit(lambda p: model.energy(system, p))
    grad = jax.grad(energy)(params)
    for name, index in (("charges", 0), ("charges", 1), ("epsilon", None), ("sigma", None)):
        h = 1e-6
        step = jnp.zeros_like(params[name]).at[index].set(h) if index is not None else h

        def at(sign, name=name, step=step):
            return float(energy({**params, name: params[name] + sign * step}))

        numeric = (at(1) - at(-1)) / (2 * h)
        value = grad[name][index] if index is not None else grad[name]
        assert float(value) == pytest.approx(numeric, rel=1e-6)
    # the Coulomb energy is a quadratic form in the charges: q . dU/dq = 2 U (Euler)
    coulomb, only = charges_only(cutoff=2.5, electrostatics="pme")
    coulomb = coulomb.for_system(system)
    u, dq = jax.jit(jax.value_and_grad(lambda q: coulomb.energy(system, {**only, "charges": q})))(
        params["charges"]
    )
    assert float(jnp.dot(params["charges"], dq)) == pytest.approx(2 * float(u), rel=1e-10)


def test_bspline_weights_are_a_partition_of_unity_and_match_the_closed_form():
    f = jnp.linspace(0.0, 0.999, 7)
    for order in range(3, 9):
        np.testing.assert_allclose(
            np.asarray(jnp.sum(bspline_weights(f, order), axis=-1)), 1.0, rtol=1e-14
        )
    # M_4 (cubic): M_4(x) = x^3 / 6 on [0, 1]; M_4(f + 3) = (1 - f)^3 / 6
    w = bspline_weights(f, 4)
    np.testing.assert_allclose(np.asarray(w[:, 0]), np.asarray(f**3 / 6), rtol=1e-13)
    np.testing.assert_allclose(
        np.asarray(w[:, 3]), np.asarray((1 - f) ** 3 / 6), rtol=1e-13, atol=1e-16
    )


def test_a_tighter_accuracy_chooses_more_k_vectors_and_a_finer_mesh():
    system = ions()
    loose = md.LennardJonesCoulomb(electrostatics="ewald", ewald_accuracy=1e-3).for_system(system)
    tight = md.LennardJonesCoulomb(electrostatics="ewald", ewald_accuracy=1e-7).for_system(system)
    assert tight.alpha > loose.alpha and all(
        t > s for t, s in zip(tight.ewald_kmax, loose.ewald_kmax, strict=False)
    )
    edges = system.space.box
    assert pme_mesh(edges, 1.4, 1e-7, 5)[0] > pme_mesh(edges, 1.4, 1e-3, 5)[0]


def test_ionic_lattices_are_neutral_with_their_nearest_neighbours_of_the_other_species():
    for kind, (_, ratio) in MADELUNG.items():
        system = md.lattice(kind, 2, 1.0)
        species = np.asarray(system.species)
        assert np.sum(species == 0) == np.sum(species == 1) == system.n // 2
        box = np.asarray(system.space.box)
        d = np.asarray(system.position)[:, None] - np.asarray(system.position)[None]
        d -= box * np.round(d / box)
        r = np.sqrt(np.sum(d * d, axis=-1)) + np.eye(system.n) * 1e9
        nearest = ratio * box[0] / 2
        np.testing.assert_allclose(np.min(r, axis=1), nearest, rtol=1e-12)
        assert np.all(species[np.argmin(r, axis=1)] != species)


@pytest.mark.parametrize(
    "options, words",
    [
        ({"electrostatics": "pppm"}, "electrostatics = 'pppm' is not a method"),
        ({"ewald_accuracy": 2.0}, "ewald_accuracy = 2.0"),
        ({"pme_order": 2}, "pme_order = 2"),
        ({"pme_mesh": (16, 16)}, "pme_mesh = [16, 16]"),
        (
            {"ewald_kmax": 5, "electrostatics": "ewald"},
            "ewald_kmax = 5; expected three whole numbers",
        ),
        ({"ewald_accuracy": 0.5}, "at most 0.01"),
        (
            {"electrostatics": "ewald", "pme_mesh": (16, 16, 16)},
            "pme_mesh = (16, 16, 16) does not apply to electrostatics = 'ewald'",
        ),
        (
            {"electrostatics": "pme", "ewald_kmax": (4, 4, 4)},
            "ewald_kmax = (4, 4, 4) does not apply to electrostatics = 'pme'",
        ),
    ],
)
def test_bad_options_are_refused(options, words):
    with pytest.raises(ValueError, match="lj_coulomb: ") as info:
        md.LennardJonesCoulomb(**options)
    assert words in str(info.value)


@pytest.mark.parametrize("method", ["ewald", "pme"])
def test_an_accuracy_beyond_memory_is_refused(method):
    system = ions(n=64)
    with pytest.raises(
        ValueError, match=r"ewald_accuracy = 1e-300 asks for .* loosen ewald_accuracy"
    ):
        md.LennardJonesCoulomb(electrostatics=method, ewald_accuracy=1e-300).for_system(system)
    with pytest.raises(ValueError, match=r"pme_mesh = \[1024, 1024, 1024\] gives more than"):
        md.LennardJonesCoulomb(pme_mesh=(1024, 1024, 1024))
    # a splitting parameter too large for any k-space sum (its k-vectors overflowed)
    with pytest.raises(
        ValueError,
        match=r"ewald_alpha = 1e\+308 with ewald_accuracy = 1e-05 asks for .* lower ewald_alpha",
    ):
        md.LennardJonesCoulomb(electrostatics=method, ewald_alpha=1e308).for_system(system)


def test_a_charged_system_and_wrong_charges_are_refused():
    system = ions(n=64)
    model = md.LennardJonesCoulomb()
    with pytest.raises(
        ValueError,
        match=r"params.charges up to 1e\+200 give Coulomb energies beyond the float range",
    ):
        model.check_params(
            system, {**model.default_params(), "charges": jnp.asarray([1e200, -1e200])}
        )
    with pytest.raises(ValueError, match=r"net charge is 16 .*neutral system"):
        model.check_params(system, {**model.default_params(), "charges": jnp.asarray([1.0, -0.5])})
    with pytest.raises(
        ValueError, match=r"params.charges must hold one charge per species \(2 values"
    ):
        model.check_params(
            system, {**model.default_params(), "charges": jnp.asarray([1.0, -1.0, 0.0])}
        )
    with pytest.raises(ValueError, match="3-D periodic box"):
        model.check_params(dataclasses.replace(system, space=md.Free()), model.default_params())


def test_a_traced_box_needs_the_sizes_fixed_first():
    system = ions(n=64)
    model = md.LennardJonesCoulomb()
    params = model.default_params()
    with pytest.raises(ValueError, match="for_system"):
        jax.jit(lambda s: model.energy(s, params))(system)
    sized = model.for_system(system)
    # (the unsized model with the concrete box closed over: compiled whole, as op by op it
    # compiled some 100 small programs)
    assert float(jax.jit(lambda s: sized.energy(s, params))(system)) == pytest.approx(
        float(jax.jit(lambda: model.energy(system, params))()), rel=1e-12
    )
