"""`simulate` is pure: jit, vmap over 1,000 parameter sets, grad against finite differences."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from solvers import OdeSolver, SdeSolver

MODEL = sim.get_model("lotka_volterra")
T = jnp.linspace(0.0, 10.0, 51)
TIGHT = OdeSolver(rtol=1e-12, atol=1e-12)


def loss(params, initial):
    traj = sim.simulate(MODEL, params, T, initial=initial, solver=TIGHT)
    return jnp.sum(traj.observables["prey"] ** 2 + traj.observables["predator"] ** 2) / T.shape[0]


def central_difference(f, x, h):
    return (f(x + h) - f(x - h)) / (2 * h)


def test_jit_matches_eager_and_does_not_recompile_on_new_values():
    params = MODEL.default_params()
    eager = sim.simulate(MODEL, params, T)
    jitted = jax.jit(lambda p: sim.simulate(MODEL, p, T))(params)
    np.testing.assert_allclose(jitted.observables["prey"], eager.observables["prey"], rtol=1e-12)
    traced = []

    @jax.jit
    def f(p):
        traced.append(1)
        return sim.simulate(MODEL, p, T).observables["prey"]

    f(params)
    f({**params, "alpha": params["alpha"] * 1.1})
    assert len(traced) == 1


def test_vmap_over_a_thousand_parameter_sets():
    params = MODEL.default_params()
    alphas = jnp.linspace(0.3, 0.8, 1000)
    batch = jax.vmap(lambda a: sim.simulate(MODEL, {**params, "alpha": a}, T))(alphas)
    assert batch.observables["prey"].shape == (1000, T.shape[0])
    assert bool(jnp.all(batch.ok))
    for i in (0, 517, 999):
        single = sim.simulate(MODEL, {**params, "alpha": alphas[i]}, T)
        np.testing.assert_allclose(
            batch.observables["prey"][i], single.observables["prey"], rtol=1e-9
        )


@pytest.fixture(scope="module")
def compiled_loss():
    """The loss and its gradient with respect to every parameter and initial value,
    compiled once for the tests below (the finite differences use its value)."""
    value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    params, initial = MODEL.default_params(), MODEL.default_initial()
    _, (grad_params, grad_initial) = value_and_grad(params, initial)
    return value_and_grad, params, initial, {**grad_params, **grad_initial}


@pytest.mark.parametrize("name", ["alpha", "beta", "gamma", "delta", "prey", "predator"])
def test_gradient_matches_finite_differences(name, compiled_loss):
    # with respect to each parameter (alpha ... delta) and initial value (prey, predator)
    value_and_grad, params, initial, grads = compiled_loss
    is_param = name in params

    def f(v):
        p, y0 = ({**params, name: v}, initial) if is_param else (params, {**initial, name: v})
        return value_and_grad(p, y0)[0]

    x = params[name] if is_param else initial[name]
    h = 1e-6 * float(x)
    fd = central_difference(f, x, h)
    rel = abs(float(grads[name]) - float(fd)) / abs(float(fd))
    assert rel < 1e-6, (name, float(grads[name]), float(fd), rel)


def test_initial_as_array_and_unknown_names_rejected():
    traj = sim.simulate(MODEL, None, T, initial=jnp.array([30.0, 4.0]))
    ref = sim.simulate(MODEL, None, T)
    np.testing.assert_allclose(traj.observables["prey"], ref.observables["prey"], rtol=1e-12)
    with pytest.raises(ValueError, match="Perhaps you meant 'alpha'"):
        sim.simulate(MODEL, {"alpah": 0.5}, T)
    with pytest.raises(ValueError, match="no state component 'prei'"):
        sim.simulate(MODEL, None, T, initial={"prei": 3.0})
    with pytest.raises(ValueError, match="shape"):
        sim.simulate(MODEL, None, T, initial=jnp.ones(3))
    with pytest.raises(ValueError, match="at least 2"):
        sim.simulate(MODEL, None, jnp.array([1.0]))


def test_failed_solve_is_flagged_per_batch_member():
    # Robertson with an explicit method and few steps fails; with throw=False the batch
    # member is flagged (result != 0) and its values are NaN, never plausible numbers.
    model = sim.get_model("robertson")
    solver = OdeSolver(method="tsit5", max_steps=50, throw=False)
    k1 = jnp.array([0.04, 0.05])
    batch = jax.vmap(
        lambda k: sim.simulate(model, {"k1": k}, jnp.array([0.0, 40.0]), solver=solver)
    )(k1)
    assert not bool(jnp.any(batch.ok))
    assert bool(jnp.all(jnp.isnan(batch.observables["y1"][:, -1])))


def test_trajectory_is_a_pytree():
    traj = sim.simulate(MODEL, None, T)
    leaves = jax.tree.leaves(traj)
    assert any(leaf.shape == T.shape for leaf in leaves)
    assert isinstance(traj, eqx.Module)


def _general(model, params, t, **kwargs):
    """`sim.simulate` through its general path (what it traces inside a caller's jit)."""
    from sim import _simulate

    call = _simulate._compiled_call
    _simulate._compiled_call = lambda *args: None
    try:
        return sim.simulate(model, params, t, **kwargs)
    finally:
        _simulate._compiled_call = call


def _bits(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=False):
        assert (x.dtype, x.shape, x.weak_type) == (y.dtype, y.shape, y.weak_type)
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_call_from_python_gives_the_general_paths_bits_and_does_not_recompile_on_new_values():
    from sim import _simulate

    params = MODEL.default_params()
    solver = OdeSolver(rtol=1e-7, atol=1e-9)
    initial = {"prey": jnp.asarray(20.0)}
    _bits(
        sim.simulate(MODEL, params, T, initial=initial, solver=solver),
        _general(MODEL, params, T, initial=initial, solver=solver),
    )
    # Python numbers, numpy save times, an initial array, defaults filled in
    _bits(
        sim.simulate(MODEL, {"alpha": 0.6}, np.asarray(T), initial={"prey": 20}),
        _general(MODEL, {"alpha": 0.6}, np.asarray(T), initial={"prey": 20}),
    )
    _bits(
        sim.simulate(MODEL, None, T, initial=jnp.array([3.0, 4.0])),
        _general(MODEL, None, T, initial=jnp.array([3.0, 4.0])),
    )
    compiled = {id(p): p._cache_size() for p in _simulate._PROGRAMS.values()}
    # the same model and solver again: the remembered layout of the arguments
    for i in range(2):
        p = {**params, "alpha": params["alpha"] * (1.0 + 0.1 * i)}
        _bits(
            sim.simulate(MODEL, p, T, initial=initial, solver=solver),
            _general(MODEL, p, T, initial=initial, solver=solver),
        )
    for i in range(3):
        p = {**params, "alpha": params["alpha"] * (1.0 + 0.1 * i)}
        s = OdeSolver(rtol=1e-7 * (i + 1), atol=1e-9 / (i + 1))
        t = T * (1.0 + 0.1 * i)
        _bits(
            sim.simulate(MODEL, p, t, initial=initial, solver=s),
            _general(MODEL, p, t, initial=initial, solver=s),
        )
    assert {id(p): p._cache_size() for p in _simulate._PROGRAMS.values()} == compiled


def test_calls_from_python_fill_each_text_models_own_defaults():
    # Text models are one class: the defaults a call from Python adds belong to each
    # model's own declarations. dx/dt = -k x has x(t) = x0 exp(-k t); dx/dt = -k x + c
    # has x(t) = c/k + (x0 - c/k) exp(-k t), with its default c = 2.
    from physics.ode import ode_model

    t = jnp.linspace(0.0, 1.0, 5)
    solver = OdeSolver(rtol=1e-10, atol=1e-12)
    decay = ode_model("m", {"x": "-k * x"}, {"k": 1.0})
    driven = ode_model("m", {"x": "-k * x + c"}, {"k": 1.0, "c": 2.0})
    for _ in range(2):  # (the second time, each from what the first call kept)
        a = sim.simulate(decay, {"k": 0.5}, t, initial={"x": 1.0}, solver=solver)
        b = sim.simulate(driven, {"k": 0.5}, t, initial={"x": 1.0}, solver=solver)
        np.testing.assert_allclose(a.observables["x"], np.exp(-0.5 * t), rtol=1e-8)
        np.testing.assert_allclose(b.observables["x"], 4.0 - 3.0 * np.exp(-0.5 * t), rtol=1e-8)


@pytest.mark.raising_checks
def test_call_from_python_raises_the_errors_of_the_general_path():
    model = sim.get_model("robertson")
    solver = OdeSolver(method="tsit5", max_steps=20)
    with pytest.raises(eqx.EquinoxRuntimeError, match="maximum number of solver steps"):
        sim.simulate(model, None, jnp.array([0.0, 40.0]), solver=solver)
    with pytest.raises(TypeError, match="needs an OdeSolver"):
        sim.simulate(MODEL, None, T, solver=SdeSolver(dt=0.1))


@pytest.mark.raising_checks
def test_a_failed_check_raises_its_own_message_once_without_running_the_general_path(monkeypatch):
    from sim import _simulate

    model = sim.get_model("robertson")
    solver = OdeSolver(method="tsit5", max_steps=20)
    t = jnp.array([0.0, 40.0])
    with pytest.raises(eqx.EquinoxRuntimeError) as general:
        _general(model, None, t, solver=solver)
    runs = []
    program = _simulate._program

    def counted(*args):
        compiled = program(*args)
        return lambda *a: (runs.append(1), compiled(*a))[1]

    def refused(*args):
        raise AssertionError("the general path ran")

    monkeypatch.setattr(_simulate, "_program", counted)
    monkeypatch.setattr(_simulate, "_PROGRAMS", {})
    monkeypatch.setattr(_simulate, "_CALLS", {})
    monkeypatch.setattr(_simulate, "_simulate_driver", refused)
    with pytest.raises(eqx.EquinoxRuntimeError) as compiled:
        sim.simulate(model, None, t, solver=solver)
    assert runs == [1]
    message = str(compiled.value)
    assert message.startswith("the maximum number of solver steps was reached")
    assert message in str(general.value)
    assert "XLA" not in message and "pure_callback" not in message


def test_a_parameter_that_is_no_number_is_refused_by_the_general_path():
    with pytest.raises((TypeError, ValueError)) as compiled:
        sim.simulate(MODEL, {"alpha": "fast"}, T)
    with pytest.raises(type(compiled.value)) as general:
        _general(MODEL, {"alpha": "fast"}, T)
    assert str(compiled.value) == str(general.value)


def test_transformed_calls_take_the_general_path():
    from sim import _simulate

    params = MODEL.default_params()
    before = len(_simulate._PROGRAMS)
    jax.jit(lambda: sim.simulate(MODEL, params, T))()
    jax.grad(lambda a: sim.simulate(MODEL, {**params, "alpha": a}, T).observables["prey"][-1])(0.5)
    jax.vmap(lambda a: sim.simulate(MODEL, {**params, "alpha": a}, T))(jnp.array([0.4, 0.5]))
    assert len(_simulate._PROGRAMS) == before
