"""Neural ODE models: the network, the models' declarations, and simulate/grad through them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from physics.ode import HybridLotkaVolterra, LotkaVolterra, Mlp, NeuralOde
from solvers import OdeSolver

SPIRAL_A = jnp.array([[-0.1, 2.0], [-2.0, -0.1]])  # Chen et al. (2018), dy/dt = (y^3) A


def spiral_truth():
    """The spiral ODE as a NeuralOde: cubic features and one affine layer of weight A^T."""
    model = NeuralOde(features="cubic", depth=0, initial=(2.0, 0.0))
    return model, {"net": ({"weight": SPIRAL_A.T, "bias": jnp.zeros(2)},)}


def test_mlp_matches_explicit_layers():
    mlp = Mlp(3, 2, width=5, depth=2, activation="tanh")
    w = mlp.init(jax.random.key(1))
    assert [layer["weight"].shape for layer in w] == [(5, 3), (5, 5), (2, 5)]
    x = jnp.array([0.3, -1.0, 2.0])
    h = jnp.tanh(w[0]["weight"] @ x + w[0]["bias"])
    h = jnp.tanh(w[1]["weight"] @ h + w[1]["bias"])
    np.testing.assert_allclose(mlp(w, x), w[2]["weight"] @ h + w[2]["bias"], rtol=1e-14)


def test_mlp_init_bounds_and_final_scale():
    mlp = Mlp(4, 2, width=64, depth=1)
    w = mlp.init(jax.random.key(0))
    assert float(jnp.max(jnp.abs(w[0]["weight"]))) <= 0.5  # 1/sqrt(4)
    assert float(jnp.max(jnp.abs(w[1]["weight"]))) <= 1 / 8  # 1/sqrt(64)
    small = mlp.init(jax.random.key(0), final_scale=1e-2)
    np.testing.assert_allclose(small[1]["weight"], 1e-2 * w[1]["weight"], rtol=1e-14)
    np.testing.assert_array_equal(small[0]["weight"], w[0]["weight"])


def test_mlp_depth_zero_is_affine():
    mlp = Mlp(2, 2, depth=0)
    w = ({"weight": jnp.array([[1.0, 2.0], [3.0, 4.0]]), "bias": jnp.array([0.5, -0.5])},)
    np.testing.assert_allclose(mlp(w, jnp.array([1.0, 1.0])), [3.5, 6.5])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"activation": "tahn"}, "Perhaps you meant 'tanh'"),
        ({"depth": -1}, "depth"),
        ({"width": 0}, "width"),
        ({"width": True}, "width must be a positive integer, got True"),
        ({"depth": True}, "depth must be an integer >= 0, got True"),
    ],
)
def test_mlp_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Mlp(2, 2, **kwargs)
    with pytest.raises(ValueError, match="in_size must be a positive integer, got False"):
        Mlp(False, 2)


def test_mlp_defaults():
    mlp = Mlp(2, 3)
    assert (mlp.width, mlp.depth, mlp.activation) == (64, 2, "tanh")


def test_weights_of_the_wrong_depth_are_refused():
    mlp = Mlp(2, 2, depth=2)
    with pytest.raises(ValueError, match="expects 3"):
        mlp(Mlp(2, 2, depth=1).init(jax.random.key(0)), jnp.ones(2))


def test_spiral_vector_field_is_exact():
    model, params = spiral_truth()
    y = jnp.array([0.7, -1.3])
    np.testing.assert_allclose(model.vector_field(0.0, y, params), (y**3) @ SPIRAL_A, rtol=1e-14)


def test_neural_ode_declarations():
    model = NeuralOde(state_names=["a", "b", "c"], width=8, depth=1, initial=[1, 2, 3])
    assert model.state_names == ("a", "b", "c")
    assert model.observable_names == ("a", "b", "c")
    assert model.parameter_names == ("net",)
    assert model.initial_defaults == {"a": 1.0, "b": 2.0, "c": 3.0}
    np.testing.assert_array_equal(model.initial_state({"b": jnp.asarray(5.0)}), [1.0, 5.0, 3.0])
    weights = model.default_params()["net"]
    assert [layer["weight"].shape for layer in weights] == [(8, 3), (3, 8)]
    hash(model)  # static options only: the model can be a jit static argument


def test_default_weights_follow_the_seed():
    a = NeuralOde(seed=0).default_params()
    b = NeuralOde(seed=0).default_params()
    c = NeuralOde(seed=1).default_params()
    assert all(
        np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=False)
    )
    assert not np.array_equal(jax.tree.leaves(a)[1], jax.tree.leaves(c)[1])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"features": "cube"}, "Perhaps you meant 'cubic'"),
        ({"state_names": ("x", "x")}, "distinct"),
        ({"state_names": ()}, "one or more non-empty strings"),
        ({"state_names": ("x", "")}, "one or more non-empty strings"),
        ({"state_names": ("x", "y"), "initial": (1.0,)}, "initial has 1 values"),
        ({"activation": "rleu"}, "Perhaps you meant 'relu'"),
    ],
)
def test_neural_ode_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NeuralOde(**kwargs)


def test_a_neural_ode_of_one_state():
    assert NeuralOde(state_names=("x",), width=4, depth=1).state_names == ("x",)


def test_simulate_the_spiral_against_scipy():
    # The spiral decays: d/dt (y1^4 + y2^4)/4 = (y^3) A (y^3)^T = -0.1 (y1^6 + y2^6), so the
    # quartic norm falls; the trajectory matches an independent DOP853 solve.
    from scipy.integrate import solve_ivp

    model, params = spiral_truth()
    t = np.linspace(0.0, 5.0, 51)
    solver = OdeSolver(method="dopri5", rtol=jnp.asarray(1e-10), atol=jnp.asarray(1e-12))
    traj = sim.simulate(model, params, jnp.asarray(t), solver=solver)
    y = np.stack([traj.observables["y1"], traj.observables["y2"]])
    A = np.asarray(SPIRAL_A)
    ref = solve_ivp(
        lambda _, v: (v**3) @ A,
        (0.0, 5.0),
        [2.0, 0.0],
        t_eval=t,
        method="DOP853",
        rtol=1e-12,
        atol=1e-14,
    )
    np.testing.assert_allclose(y, ref.y, rtol=0, atol=1e-7)
    assert np.all(np.diff(y[0] ** 4 + y[1] ** 4) < 0)


def test_simulate_vmaps_over_weights():
    model = NeuralOde(width=4, depth=1)
    keys = jax.random.split(jax.random.key(0), 3)
    # (compiled: one compilation each instead of op-by-op dispatch)
    batch = jax.jit(jax.vmap(lambda k: {"net": model.net.init(k)}))(keys)
    t = jnp.linspace(0.0, 1.0, 5)

    def y1(p):
        return sim.simulate(model, p, t, initial=jnp.array([1.0, 0.0])).observables["y1"]

    out = jax.jit(jax.vmap(y1))(batch)
    assert out.shape == (3, 5)
    single = jax.jit(y1)
    for i in range(3):
        one = jax.tree.map(lambda x: x[i], batch)  # noqa: B023 (called in the loop)
        np.testing.assert_allclose(out[i], single(one), rtol=1e-12)


def test_hybrid_is_lotka_volterra_when_the_correction_is_the_interaction():
    # A depth-0 correction is affine, so it cannot be x*y exactly; instead check the
    # split of the vector field into its known and learned parts.
    model = HybridLotkaVolterra(width=8, depth=1)
    params = model.default_params()
    y = jnp.array([30.0, 4.0])
    np.testing.assert_allclose(
        model.vector_field(0.0, y, params),
        model.known(y, params) + model.correction(y, params),
        rtol=1e-14,
    )
    np.testing.assert_allclose(model.known(y, params), [0.55 * 30.0, -0.8 * 4.0], rtol=1e-14)
    # the untrained correction is small beside the interaction terms (about 3 here)
    assert float(jnp.max(jnp.abs(model.correction(y, params)))) < 0.5
    lv = LotkaVolterra()
    assert model.initial_defaults == lv.initial_defaults
    assert model.state_names == lv.state_names


def test_simulate_fills_the_network_from_the_model_when_missing():
    model = HybridLotkaVolterra(width=8, depth=1)
    t = jnp.linspace(0.0, 1.0, 3)
    partial = sim.simulate(model, {"alpha": 0.6}, t).observables["prey"]
    full = sim.simulate(
        model, {**model.default_params(), "alpha": jnp.asarray(0.6)}, t
    ).observables["prey"]
    np.testing.assert_array_equal(partial, full)
    with pytest.raises(ValueError, match="has no parameter 'beta'"):
        sim.simulate(model, {"beta": 0.1}, t)


def test_registered_by_name():
    assert {"neural_ode", "hybrid_lotka_volterra"} <= set(sim.model_names())
    model = sim.get_model("neural_ode", state_names=["u", "v"], features="cubic")
    assert model.state_names == ("u", "v")
    assert isinstance(sim.get_model("hybrid_lotka_volterra", width=8), HybridLotkaVolterra)
    with pytest.raises(ValueError, match="Perhaps you meant 'width'"):
        sim.get_model("neural_ode", widht=8)
