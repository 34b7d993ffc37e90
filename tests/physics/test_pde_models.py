"""Every PDE model declares itself, and bad options get one clear line."""

import numpy as np
import pytest

import sim
from physics.pde import GridPdeModel, PdeModel

PDE_MODELS = [n for n in sim.model_names() if issubclass(sim.model_class(n), PdeModel)]


def test_the_pde_models_are_registered():
    expected = {
        "heat",
        "advection_diffusion",
        "burgers",
        "kdv",
        "kuramoto_sivashinsky",
        "allen_cahn",
        "gray_scott",
        "navier_stokes_2d",
        "heat_fd",
        "fisher_kpp",
    }
    assert expected <= set(PDE_MODELS)


@pytest.mark.parametrize("name", PDE_MODELS)
def test_every_pde_model_declares_itself(name):
    model = sim.get_model(name)
    for p in model.parameters:
        assert p.unit and p.doc and p.violation(p.default) is None
    u0 = model.initial_field()
    assert u0.shape == model.field_shape and np.isfinite(u0).all()
    assert set(model.field_names) <= set(model.observable_names)
    assert all(len(c) == n for c, n in zip(model.coordinates(), model.points, strict=False))


@pytest.mark.parametrize(
    "name, options, match",
    [
        ("heat", {"points": [63]}, r"points\[0\] = 63: expected an even whole number"),
        (
            "heat",
            {"points": [64], "domain": [[0.0, 1.0], [0.0, 1.0]]},
            "expected one \\[low, high\\] pair per axis",
        ),
        ("heat", {"points": [64], "domain": [[1.0, 0.0]]}, "expected finite low < high"),
        (
            "heat",
            {"points": [64], "domain": [0.0, 1.0]},
            "expected one \\[low, high\\] pair per axis",
        ),
        ("navier_stokes_2d", {"points": [32, 32, 32]}, "expected a list of 2 whole numbers"),
        ("kdv", {"points": [64, 64]}, "expected a list of 1 whole numbers"),
        ("heat_fd", {"boundary": "robin"}, "unknown boundary kind"),
        ("heat_fd", {"boundary": "dirichlet", "boundary_value": [1.0, 2.0, 3.0]}, "boundary_value"),
        ("navier_stokes_2d", {"points": [16, 16], "forcing_mode": 8}, "not resolved"),
        # the forcing acts along y: mode 4 needs points[1] // 3 > 4 whatever points[0] is
        (
            "navier_stokes_2d",
            {"points": [32, 12], "forcing_mode": 4},
            r"forcing_mode = 4 is not resolved by points\[1\] = 12 \(dealiased modes < 4\)",
        ),
        ("navier_stokes_2d", {"points": [32, 8, 32]}, "expected a list of 2 whole numbers"),
    ],
)
def test_bad_grid_options_are_rejected_with_the_option_named(name, options, match):
    with pytest.raises(ValueError, match=match):
        sim.get_model(name, **options)


def test_unknown_initial_kinds_and_options_are_rejected():
    model = sim.get_model("heat", points=[32])
    with pytest.raises(ValueError, match="Perhaps you meant 'gaussian'"):
        model.initial_field("gausian")
    with pytest.raises(ValueError, match="has no option 'widht'"):
        model.initial_field("gaussian", widht=0.1)


def test_named_initial_fields_have_the_grid_shape_and_are_reproducible():
    model = sim.get_model("gray_scott", points=[32, 32])
    a = model.initial_field("pearson", seed=1)
    assert a.shape == (2, 32, 32)
    np.testing.assert_array_equal(a, model.initial_field("pearson", seed=1))
    r = sim.get_model("allen_cahn", points=[16, 16]).initial_field("random", seed=4, amplitude=0.5)
    assert abs(np.max(np.abs(r)) - 0.5) < 1e-12 and abs(r.mean()) < 0.1


def test_bounded_models_use_end_nodes():
    model = sim.get_model("heat_fd", points=[11], boundary=[["dirichlet", "neumann"]])
    assert isinstance(model, GridPdeModel)
    (x,) = model.coordinates()
    assert x[0] == 0.0 and x[-1] == 1.0
    assert model.boundary_kinds == (("dirichlet", "neumann"),)


def test_grid_helpers_follow_the_options():
    # points and domain as a config gives them (lists, whole numbers), and what follows
    # from them: lengths high - low, the state's shape, the nodes and their 'ij' mesh.
    model = sim.get_model("gray_scott", points=[12, 8], domain=[[-1, 2], [0.5, 4.5]])
    assert model.points == (12, 8) and model.domain == ((-1.0, 2.0), (0.5, 4.5))
    assert all(isinstance(v, float) for pair in model.domain for v in pair)
    assert model.lengths == (3.0, 4.0) and model.ndim == 2 and model.field_shape == (2, 12, 8)
    assert model.periodic_axes == (True, True)
    x, y = model.mesh()
    assert x.shape == y.shape == (12, 8)
    np.testing.assert_array_equal(
        x, np.broadcast_to((-1.0 + 3.0 * np.arange(12) / 12)[:, None], (12, 8))
    )
    np.testing.assert_array_equal(
        y, np.broadcast_to((0.5 + 4.0 * np.arange(8) / 8)[None, :], (12, 8))
    )
    # one whole number is one axis; the default domain on every axis
    heat = sim.get_model("heat", points=np.int64(16))
    assert (
        heat.points == (16,) and heat.domain == ((0.0, 2 * np.pi),) and heat.lengths == (2 * np.pi,)
    )
    # a bounded model: end nodes on bounded axes, low + j L / n on periodic ones
    model = sim.get_model(
        "heat_fd",
        points=[5, 6],
        domain=[[1.0, 3.0], [-2.0, 1.0]],
        boundary=[["dirichlet", "neumann"], "periodic"],
        boundary_value=[[1.5, -0.5], 0.0],
    )
    assert model.periodic_axes == (False, True) and model.lengths == (2.0, 3.0)
    assert model.boundary_kinds == (("dirichlet", "neumann"), ("periodic", "periodic"))
    assert model.boundary_values == ((1.5, -0.5), (0.0, 0.0))
    x, y = model.coordinates()
    np.testing.assert_array_equal(x, [1.0, 1.5, 2.0, 2.5, 3.0])
    np.testing.assert_array_equal(y, [-2.0, -1.5, -1.0, -0.5, 0.0, 0.5])


@pytest.mark.parametrize("seed", [1.5, True, "3"])
def test_a_seed_that_is_not_a_whole_number_is_refused(seed):
    # (it used to be truncated by int() before the generator could check it; under the
    # tests' runtime type checking the generator's annotation refuses it first)
    model = sim.get_model("heat", points=[16])
    with pytest.raises((ValueError, TypeError), match="seed"):
        model.initial_field("random", seed=seed)
