"""The defaults of every registered model, pinned: parameter values, initial values or
fields (with every option of the default initial field), and model options.

A config that leaves a value out relies on its default, so changing a default silently
changes the results of every such config (and of every saved run re-made from one).
Most defaults are a choice, not an equation, so no physics test can catch a changed one;
this table does: a default may change, but only as a conscious edit of this table.
Defaults that are published values are also checked with their sources in
`test_ode_reference.py` (ODE) and in the model docstrings (Pearson's Gray-Scott square,
Kassam and Trefethen's Kuramoto-Sivashinsky start, the classic KdV scaling).

The table was written from the code once and read against the docstrings and the
README; a model registered without an entry here fails
(`test_every_registered_model_has_its_defaults_pinned`).
"""

from __future__ import annotations

import dataclasses
import inspect
import math

import numpy as np
import pytest

import sim
from physics.md import ParticleModel
from physics.ode.base import OdeModel
from physics.pde import GENERATORS, PdeModel
from physics.sde import SdeModel

TWO_PI = 2 * math.pi
NET = "random (from the model's seed)"  # a network's weights: drawn from the option `seed`

# name -> params, initial and options.
# - params: the declared default of every parameter.
# - initial: ODE and SDE: the value of every state component; PDE: (kind, every option of that
#   kind); MD: the particles `sim` starts from (sim.families.md._runs.default_system).
# - options: every constructor field (a PDE's `domain` as it resolves, never None).
DEFAULTS = {
    # ---------------------------------------------------------------- SDE
    "ornstein_uhlenbeck": {
        "params": {"theta": 1.0, "mu": 0.0, "sigma": 0.5},
        "initial": {"x": 1.0},
        "options": {},
    },
    "geometric_brownian_motion": {
        "params": {"mu": 0.05, "sigma": 0.2},
        "initial": {"x": 1.0},
        "options": {},
    },
    "stochastic_lotka_volterra": {
        "params": {
            "alpha": 0.55,
            "beta": 0.028,
            "gamma": 0.80,
            "delta": 0.024,
            "sigma_prey": 0.1,
            "sigma_predator": 0.1,
        },
        "initial": {"prey": 30.0, "predator": 4.0},
        "options": {},
    },
    # ---------------------------------------------------------------- ODE
    "lotka_volterra": {
        "params": {"alpha": 0.55, "beta": 0.028, "gamma": 0.80, "delta": 0.024},
        "initial": {"prey": 30.0, "predator": 4.0},
        "options": {},
    },
    "lorenz": {
        "params": {"sigma": 10.0, "rho": 28.0, "beta": 8.0 / 3.0},
        "initial": {"x": 1.0, "y": 1.0, "z": 1.0},
        "options": {},
    },
    "van_der_pol": {
        "params": {"mu": 1.0},
        "initial": {"x": 2.0, "v": 0.0},
        "options": {},
    },
    "sir": {
        "params": {"beta": 0.3, "gamma": 0.1},
        "initial": {"susceptible": 0.99, "infected": 0.01, "recovered": 0.0},
        "options": {},
    },
    "damped_pendulum": {
        "params": {"g": 9.81, "length": 1.0, "damping": 0.1},
        "initial": {"theta": 1.0, "omega": 0.0},
        "options": {},
    },
    "fitzhugh_nagumo": {
        "params": {"a": 0.7, "b": 0.8, "tau": 12.5, "current": 0.5},
        "initial": {"v": -1.0, "w": 1.0},
        "options": {},
    },
    "brusselator": {
        "params": {"A": 1.0, "B": 3.0},
        "initial": {"x": 1.0, "y": 1.0},
        "options": {},
    },
    # ---------------------------------------------------------------- maps
    "logistic_map": {"params": {"r": 3.7}, "initial": {"x": 0.2}, "options": {}},
    "henon_map": {"params": {"a": 1.4, "b": 0.3}, "initial": {"x": 0.0, "y": 0.0}, "options": {}},
    "robertson": {
        "params": {"k1": 0.04, "k2": 3.0e7, "k3": 1.0e4},
        "initial": {"y1": 1.0, "y2": 0.0, "y3": 0.0},
        "options": {},
    },
    "neural_ode": {
        "params": {"net": NET},
        "initial": {"y1": 0.0, "y2": 0.0},
        "options": {
            "state_names": ("y1", "y2"),
            "width": 64,
            "depth": 2,
            "activation": "tanh",
            "features": "identity",
            "initial": None,
            "seed": 0,
        },
    },
    "hybrid_lotka_volterra": {
        "params": {"alpha": 0.55, "gamma": 0.80, "net": NET},
        "initial": {"prey": 30.0, "predator": 4.0},
        "options": {"width": 32, "depth": 2, "activation": "tanh", "scale": 20.0, "seed": 0},
    },
    # ---------------------------------------------------------------- PDE, periodic
    "heat": {
        "params": {"diffusivity": 0.1},
        "initial": ("sine", {"modes": 1, "amplitude": 1.0, "offset": 0.0}),
        "options": {"points": (64,), "domain": ((0.0, TWO_PI),)},
    },
    "advection_diffusion": {
        "params": {"velocity": 1.0, "diffusivity": 0.01},
        "initial": ("gaussian", {"center": None, "width": 0.5, "amplitude": 1.0, "offset": 0.0}),
        "options": {"points": (64,), "domain": ((0.0, TWO_PI),), "direction": None},
    },
    "burgers": {
        "params": {"viscosity": 0.01},
        "initial": ("sine", {"modes": 1, "amplitude": 1.0, "offset": 0.0}),
        "options": {"points": (128,), "domain": ((0.0, TWO_PI),)},
    },
    "kdv": {
        # the classic scaling a = 6, b = 1 on [-20, 20]; the soliton starts at low + L / 4
        "params": {"nonlinearity": 6.0, "dispersion": 1.0},
        "initial": ("soliton", {"speed": 1.0, "position": None}),
        "options": {"points": (256,), "domain": ((-20.0, 20.0),)},
    },
    "kuramoto_sivashinsky": {
        # Kassam and Trefethen (2005): a = p = q = 1, 128 nodes on [0, 32 pi]
        "params": {"nonlinearity": 1.0, "anti_diffusivity": 1.0, "hyper_diffusivity": 1.0},
        "initial": ("kassam_trefethen", {}),
        "options": {"points": (128,), "domain": ((0.0, 32 * math.pi),)},
    },
    "allen_cahn": {
        "params": {"diffusivity": 0.01, "rate": 1.0},
        "initial": (
            "random",
            {"seed": 0, "max_mode": 8, "amplitude": 0.5, "offset": 0.0, "zero_mean": True},
        ),
        "options": {"points": (128,), "domain": ((0.0, TWO_PI),)},
    },
    "gray_scott": {
        # Pearson (1993): D_u = 2e-5, D_v = 1e-5 on [0, 2.5]^2, a square of 20/256 of the
        # side, 1% noise
        "params": {"feed": 0.035, "kill": 0.065, "diffusivity_u": 2e-5, "diffusivity_v": 1e-5},
        "initial": ("pearson", {"size": 20 / 256, "noise": 0.01, "seed": 0}),
        "options": {"points": (128, 128), "domain": ((0.0, 2.5), (0.0, 2.5))},
    },
    "navier_stokes_2d": {
        "params": {"viscosity": 1e-3, "drag": 0.0, "forcing": 0.0},
        "initial": ("taylor_green", {"amplitude": 1.0, "modes": 1}),
        "options": {
            "points": (64, 64),
            "domain": ((0.0, TWO_PI), (0.0, TWO_PI)),
            "forcing_mode": 4,
        },
    },
    "navier_stokes_3d": {
        "params": {"viscosity": 0.01},
        "initial": ("taylor_green", {"amplitude": 1.0, "modes": 1}),
        "options": {
            "points": (32, 32, 32),
            "domain": ((0.0, TWO_PI),) * 3,
            "form": "rotational",
        },
    },
    # ---------------------------------------------------------------- PDE, bounded
    "heat_fd": {
        # half a sine: zero on the default Dirichlet sides
        "params": {"diffusivity": 0.1},
        "initial": ("sine", {"modes": 0.5, "amplitude": 1.0, "offset": 0.0}),
        "options": {
            "points": (65,),
            "domain": ((0.0, 1.0),),
            "boundary": "dirichlet",
            "boundary_value": 0.0,
        },
    },
    "fisher_kpp": {
        # u = 1 (invaded) left of x = 0.1, 0 beyond, behind a no-flux box
        "params": {"diffusivity": 1e-3, "rate": 1.0},
        "initial": (
            "tanh_front",
            {"position": 0.1, "width": 0.02, "low": 1.0, "high": 0.0, "axis": 0},
        ),
        "options": {
            "points": (201,),
            "domain": ((0.0, 1.0),),
            "boundary": "neumann",
            "boundary_value": 0.0,
        },
    },
    # ---------------------------------------------------------------- MD (reduced units)
    "lennard_jones": {
        "params": {"epsilon": 1.0, "sigma": 1.0},
        "initial": {"lattice": "fcc", "particles": 256, "density": 0.8442, "temperature": 1.0},
        "options": {
            "cutoff": 2.5,
            "shift": False,
            "force_shift": False,
            "tail_correction": False,
            "n_species": 1,
            "units": "reduced",
        },
    },
    "wca": {
        "params": {"epsilon": 1.0, "sigma": 1.0},
        "initial": {"lattice": "fcc", "particles": 256, "density": 0.8442, "temperature": 1.0},
        "options": {"cutoff": 1.5, "n_species": 1, "units": "reduced"},
    },
    "morse": {
        "params": {"epsilon": 1.0, "alpha": 5.0, "r0": 1.0},
        "initial": {"lattice": "fcc", "particles": 256, "density": 0.8442, "temperature": 1.0},
        "options": {"cutoff": 2.5, "shift": False, "n_species": 1, "units": "reduced"},
    },
    "soft_sphere": {
        "params": {"epsilon": 1.0, "sigma": 1.0, "alpha": 2.0},
        "initial": {"lattice": "fcc", "particles": 256, "density": 0.8442, "temperature": 1.0},
        "options": {"cutoff": 1.5, "n_species": 1, "units": "reduced"},
    },
    "lj_coulomb": {
        "params": {"epsilon": 1.0, "sigma": 1.0, "charges": (1.0, -1.0)},
        "initial": {"lattice": "rocksalt", "particles": 216, "density": 0.8442, "temperature": 1.0},
        "options": {
            "cutoff": 2.5,
            "shift": False,
            "tail_correction": False,
            "electrostatics": "pme",
            "ewald_accuracy": 1e-5,
            "ewald_alpha": 0.0,
            "ewald_kmax": (),
            "pme_mesh": (),
            "pme_order": 5,
            "n_species": 2,
            "units": "reduced",
        },
    },
    "bead_spring": {
        "params": {"epsilon": 1.0, "sigma": 1.0, "bond_k": 100.0, "bond_length": 1.0},
        "initial": {"chains": 16, "beads": 16, "density": 0.3, "temperature": 1.0},
        "options": {"cutoff": 1.5, "n_species": 1, "units": "reduced"},
    },
}

# The options of the generic initial kinds, for a config that names a kind and leaves
# options out: (kind, every option with its default). None: the middle of the box.
GENERATOR_DEFAULTS = {
    "constant": {"value": 0.0},
    "sine": {"modes": 1, "amplitude": 1.0, "offset": 0.0},
    "cosine": {"modes": 1, "amplitude": 1.0, "offset": 0.0},
    "gaussian": {"center": None, "width": 0.1, "amplitude": 1.0, "offset": 0.0},
    "random": {"seed": 0, "max_mode": 4, "amplitude": 1.0, "offset": 0.0, "zero_mean": True},
    "tanh_front": {"position": None, "width": 0.1, "low": 1.0, "high": 0.0, "axis": 0},
}
# The model-specific kinds that are not a model's default initial field.
SPECIAL_DEFAULTS = {("burgers", 2, "taylor_green"): {"amplitude": 1.0, "modes": 1}}


def test_every_registered_model_has_its_defaults_pinned():
    assert set(DEFAULTS) == set(sim.model_names())
    assert set(GENERATOR_DEFAULTS) == set(GENERATORS)


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_default_parameters(name):
    model = sim.get_model(name)
    expected = DEFAULTS[name]["params"]
    assert {p.name: p.default for p in model.parameters} == expected
    values = model.default_params()
    assert set(values) == set(expected)
    for key, value in expected.items():
        if value != NET:
            np.testing.assert_array_equal(np.asarray(values[key]), value, err_msg=key)


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_default_options(name):
    model = sim.get_model(name)
    fields = [f.name for f in dataclasses.fields(type(model)) if f.init]
    assert {f: getattr(model, f) for f in fields} == DEFAULTS[name]["options"]


def options_of(function) -> list[str]:
    """The options of an initial-field function (after its two positional arguments)."""
    return list(inspect.signature(function).parameters)[2:]


@pytest.mark.parametrize(
    "name",
    sorted(n for n in DEFAULTS if issubclass(sim.model_class(n), (OdeModel, SdeModel, PdeModel))),
)
def test_default_initial_state(name):
    model = sim.get_model(name)
    expected = DEFAULTS[name]["initial"]
    if isinstance(model, (OdeModel, SdeModel)):
        assert {k: float(v) for k, v in model.default_initial().items()} == expected
        np.testing.assert_array_equal(
            model.initial_state(), [expected[k] for k in model.state_names]
        )
        return
    kind, options = expected
    assert model.initial_kind == kind
    function = model.special_initial_kinds().get(kind) or GENERATORS[kind]
    assert set(options) == set(options_of(function)), "list every option of the default kind"
    # The default field is the one the options above give, spelt out.
    np.testing.assert_array_equal(model.initial_field(), model.initial_field(kind, **options))


@pytest.mark.parametrize("kind", sorted(GENERATOR_DEFAULTS))
def test_default_options_of_the_initial_kinds(kind):
    model = sim.get_model("heat", points=[12, 8], domain=[[-1.0, 2.0], [0.5, 4.5]])
    options = GENERATOR_DEFAULTS[kind]
    assert set(options) == set(options_of(GENERATORS[kind]))
    np.testing.assert_array_equal(model.initial_field(kind), model.initial_field(kind, **options))


@pytest.mark.parametrize("name, ndim, kind", sorted(SPECIAL_DEFAULTS))
def test_default_options_of_the_other_model_kinds(name, ndim, kind):
    model = sim.get_model(name, points=[8] * ndim)
    options = SPECIAL_DEFAULTS[(name, ndim, kind)]
    assert set(options) == set(options_of(model.special_initial_kinds()[kind]))
    np.testing.assert_array_equal(model.initial_field(kind), model.initial_field(kind, **options))


@pytest.mark.parametrize(
    "name",
    [n for n in sorted(DEFAULTS) if issubclass(sim.model_class(n), ParticleModel)],
)
def test_default_particles(name):
    # The particles `sim.simulate` starts an MD model from when none are given.
    from sim.families.md._runs import default_system

    expected = DEFAULTS[name]["initial"]
    system = default_system(sim.get_model(name))
    n = system.n
    position, velocity, mass = (
        np.asarray(a) for a in (system.position, system.velocity, system.mass)
    )
    edges = np.asarray(system.space.edges)
    assert float(n / np.prod(edges)) == pytest.approx(expected["density"], rel=1e-12)
    # kinetic temperature 2K / (dim (n - 1)) (zero total momentum), exactly as drawn
    assert float((mass[:, None] * velocity**2).sum() / (3 * (n - 1))) == pytest.approx(
        expected["temperature"], rel=1e-12
    )
    np.testing.assert_allclose((mass[:, None] * velocity).sum(axis=0), 0.0, atol=1e-12)
    np.testing.assert_array_equal(mass, 1.0)
    if expected.get("lattice") == "rocksalt":
        # 6 nearest neighbours of the other species at a / 2, a = (8 / density)^(1/3)
        assert n == expected["particles"] and system.bonds is None
        d = position[:, None, :] - position[None, :, :]
        d -= edges * np.round(d / edges)
        r = np.sqrt((d**2).sum(-1)) + np.eye(n) * 1e9
        half = (8 / expected["density"]) ** (1 / 3) / 2
        nearest = np.abs(r - half) < 1e-9 * half
        species = np.asarray(system.species)
        assert np.all(nearest.sum(axis=1) == 6) and np.all(
            species[:, None] != species[None, :], where=nearest
        )
    elif "lattice" in expected:
        assert n == expected["particles"] and system.bonds is None
        # fcc: 12 nearest neighbours of every particle at a / sqrt(2), a = (4 / density)^(1/3)
        d = position[:, None, :] - position[None, :, :]
        d -= edges * np.round(d / edges)
        r = np.sqrt((d**2).sum(-1)) + np.eye(n) * 1e9
        a = (4 / expected["density"]) ** (1 / 3)
        assert np.all(np.sum(np.abs(r - a / math.sqrt(2)) < 1e-9 * a, axis=1) == 12)
        assert r.min() == pytest.approx(a / math.sqrt(2), rel=1e-12)
    else:
        chains, beads = expected["chains"], expected["beads"]
        assert n == chains * beads
        # consecutive beads of each chain are bonded, at the default bond length
        bonds = np.asarray(system.bonds)
        first = np.arange(n).reshape(chains, beads)
        expected_bonds = set(
            zip(first[:, :-1].ravel().tolist(), first[:, 1:].ravel().tolist(), strict=False)
        )
        assert {tuple(sorted(b)) for b in bonds.tolist()} == expected_bonds and len(bonds) == len(
            expected_bonds
        )
        d = position[bonds[:, 0]] - position[bonds[:, 1]]
        d -= edges * np.round(d / edges)
        np.testing.assert_allclose(
            np.sqrt((d**2).sum(-1)), DEFAULTS[name]["params"]["bond_length"], rtol=1e-12
        )
