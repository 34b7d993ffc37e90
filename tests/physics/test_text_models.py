"""ODE models written as text: the expression language evaluates as NumPy does, refuses
what it does not have (with the column), differentiates symbolically as JAX does, and a
config-defined model runs, sweeps and fits like a built-in one (checked against scipy's
solve_ivp and the built-in Lotka-Volterra), its Jacobian symbolic in implicit solves."""

import dataclasses
import sys
from pathlib import Path

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest
from scipy.integrate import solve_ivp

import physics._text
import sim
from physics._expressions import MAX_LENGTH, ExpressionError, parse
from physics.ode import ode_model
from solvers import OdeSolver
from tests.helpers import cli

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_expressions_evaluate_as_numpy_does():
    x, k = 1.7, 0.3
    cases = {
        "-k * x ** 2 + 3 / x - (x - 1)": -k * x**2 + 3 / x - (x - 1),
        "exp(-k * t) * sin(2 * pi * x) + log(x) - sqrt(x) + tanh(k)": np.exp(-k * 2.0)
        * np.sin(2 * np.pi * x)
        + np.log(x)
        - np.sqrt(x)
        + np.tanh(k),
        "max(x, 2) + min(x, 2) + abs(-x) + pow(x, 3) + log10(100) + e": 2 + x + x + x**3 + 2 + np.e,
        "where(x > 1 and k < 1, x, -x) + piecewise(not (x > 2), 1, 0)": x + 1,
        "x if x < 1 or k > 1 else 2 * x": 2 * x,
        "+x - -k": x + k,
    }
    for text, want in cases.items():
        e = parse(text, ["x", "k", "t"])
        np.testing.assert_allclose(
            float(e({"x": x, "k": k, "t": 2.0})), want, rtol=1e-14, err_msg=text
        )
    assert parse("k * x + 1", ["x", "k", "t"]).names == {"k", "x"}


@pytest.mark.parametrize(
    "text, says",
    [
        ("x * (k + ", "column"),
        ("x * kk", "column 5: unknown name 'kk'; did you mean 'k'?"),
        ("x.__class__", "column 1: Attribute is not in the expression language"),
        ("__import__('os')", "column 1: unknown function '__import__'"),
        ("exp(x=1)", "no keywords"),
        ("x ^ 2", "write x ** 2"),
        ("exp(x, k)", "exp() takes 1 argument, got 2"),
        ("0 < x < 1", "chained comparisons"),
        ("'x'", "expected a number"),
        ("x[0]", "Subscript is not in the expression language"),
        ("exp", "'exp' is a function"),
        ("lambda: x", "Lambda is not in the expression language"),
        ("", "empty"),
        ("1e400 * x", "column 1: expected a finite number, got '1e400'"),
        (
            "x" + " + x" * 450,
            "nested",
        ),  # (by the parser or by the depth limit, as the stack allows)
        ("-" * 5000 + "x", "nested too deeply"),
        ("(" * 300 + "x" + ")" * 300, "too many nested parentheses"),
        ("x" * 200_000, "at most 100,000 characters"),
    ],
    ids=lambda v: v[:20] if isinstance(v, str) else None,
)
def test_what_the_language_does_not_have_is_refused_with_its_column(text, says):
    with pytest.raises(ExpressionError) as info:
        parse(text, ["x", "k", "t"])
    assert says in str(info.value), str(info.value)


# Every operator and function of the language, conditions and branches included.
DERIVATIVE_CASES = [
    "x + y",
    "x - y",
    "x * y",
    "x / y",
    "-x * y + +k",
    "x ** 3",
    "x ** y",
    "pow(y, x)",
    "2 ** x * x ** -1.5",
    "exp(x * y)",
    "log(x * y)",
    "log10(x + y)",
    "sqrt(x * y)",
    "sin(x * y)",
    "cos(x / y)",
    "tan(x + y)",
    "arcsin(x * y)",
    "arccos(x * y)",
    "arctan(x / y)",
    "sinh(x - y)",
    "cosh(x * y)",
    "tanh(x * y)",
    "abs(x - y) * k",
    "sign(x - y) * x + floor(3 * x) * y + ceil(2 * y) * x",
    "min(x, y) * x",
    "max(x ** 2, y) + max(k, 2)",
    "where(x > y, x ** 2, y * x)",
    "piecewise(x < 0.5 and y > 0.3, sin(x), y * t)",
    "x * y if not x > y or k > 1 else x / y",
    "pi * x + e * y ** 2 - exp(-k * t) * x",
]
SYMBOLS = ["x", "y", "k", "t"]


def test_symbolic_derivatives_equal_jax_grad_and_their_text_reads_back():
    # Random points in (0.1, 0.9), where every function is defined and smooth (the kinks
    # of abs, min, max and the branches are met with probability 0).
    rng = np.random.default_rng(0)
    values = {s: rng.uniform(0.1, 0.9, 16) for s in SYMBOLS}
    expressions = [parse(text, SYMBOLS) for text in DERIVATIVE_CASES]
    derivatives = [[e.derivative(s) for s in SYMBOLS] for e in expressions]
    read_back = [[parse(d.text, SYMBOLS) for d in row] for row in derivatives]

    @jax.jit  # (one program for every case: compiled once)
    def evaluate(values):
        at = lambda e: jnp.broadcast_to(e(values), (16,))  # noqa: E731
        grads = [jax.grad(lambda v, e=e: jnp.sum(e(v)))(values) for e in expressions]
        return (
            grads,
            [[at(d) for d in row] for row in derivatives],
            [[at(d) for d in row] for row in read_back],
        )

    grads, symbolic, again = evaluate(values)
    for i, text in enumerate(DERIVATIVE_CASES):
        for j, name in enumerate(SYMBOLS):
            d = derivatives[i][j]
            np.testing.assert_allclose(
                symbolic[i][j],
                grads[i][name],
                rtol=1e-12,
                atol=0,
                err_msg=f"d({text})/d{name} = {d.text}",
            )
            np.testing.assert_array_equal(again[i][j], symbolic[i][j], err_msg=d.text)
            assert d.is_zero or name in expressions[i].names, (text, name)


@pytest.mark.parametrize(
    "text, name, derivative",
    [
        ("k * x ** 2 + sin(t)", "x", "k * (2 * x)"),
        ("3e7 * y ** 2", "y", "60000000 * y"),
        ("-0.04 * x + 1e4 * x * y", "x", "-0.04 + 10000 * y"),
        ("exp(-k * t) * x", "t", "-(k * exp(-k * t) * x)"),
        ("x ** y", "y", "x ** y * log(x)"),
        ("1 / x", "x", "-1 / x ** 2"),
        ("min(x, y) + abs(x)", "x", "where(x <= y, 1, 0) + sign(x)"),
        (
            "where(x > 1, x ** 2, -x) if t < 2 else k",
            "x",
            "where(x > 1, 2 * x, -1) if t < 2 else 0",
        ),
        ("0 * x + k + x - x", "x", "0"),  # (1 - 1, folded)
        ("sign(x) + floor(x) + ceil(x) + (x > 1)", "x", "0"),
        ("k * t", "x", "0"),
    ],
)
def test_derivatives_are_folded_and_printed_as_one_would_write_them(text, name, derivative):
    d = parse(text, SYMBOLS).derivative(name)
    assert d.text == derivative
    assert d.names == parse(derivative, SYMBOLS).names


def test_deep_and_hostile_expressions_are_differentiated_without_recursion():
    # A product of 250 factors (nearly as deep as the parser's stack allows under pytest):
    # its derivative is twice as deep and shares subtrees that its text writes again at
    # each use. It is built and evaluated with no recursion; its text, longer than an
    # expression may be, is refused in one line.
    x = 1.001
    d = parse("x" + " * x" * 249, ["x"]).derivative("x")
    np.testing.assert_allclose(float(d({"x": x})), 250 * x**249, rtol=1e-12)
    with pytest.raises(ExpressionError, match=f"characters, more than the {MAX_LENGTH:,}") as info:
        d.text  # noqa: B018
    assert "\n" not in str(info.value) and "characters>)" in repr(d)
    d2 = parse("x" + " * x" * 49, ["x"]).derivative("x").derivative("x")
    np.testing.assert_allclose(float(d2({"x": x})), 50 * 49 * x**48, rtol=1e-12)
    assert parse("x" + " + x * y" * 249, ["x", "y"]).derivative("x").text == "1" + " + y" * 249
    assert parse("-" * 249 + "x", ["x"]).derivative("x").text == "-1"


SIR = {"S": "-beta * S * I / N", "I": "beta * S * I / N - gamma * I", "R": "gamma * I"}
LV = {
    "prey": "alpha * prey - beta * prey * predator",
    "predator": "delta * prey * predator - gamma * predator",
}
BRUSSELATOR = {"x": "a + x ** 2 * y - (b + 1) * x", "y": "b * x - x ** 2 * y"}


@pytest.mark.parametrize(
    "states, params, initial, rhs, t1",
    [
        (
            SIR,
            {"beta": 0.3, "gamma": 0.1, "N": 1000.0},
            {"S": 990.0, "I": 10.0, "R": 0.0},
            lambda t, y: [
                -0.3 * y[0] * y[1] / 1000,
                0.3 * y[0] * y[1] / 1000 - 0.1 * y[1],
                0.1 * y[1],
            ],
            100.0,
        ),
        (
            LV,
            {"alpha": 0.55, "beta": 0.028, "gamma": 0.8, "delta": 0.024},
            {"prey": 30.0, "predator": 4.0},
            lambda t, y: [0.55 * y[0] - 0.028 * y[0] * y[1], 0.024 * y[0] * y[1] - 0.8 * y[1]],
            20.0,
        ),
        (
            BRUSSELATOR,
            {"a": 1.0, "b": 3.0},
            {"x": 1.5, "y": 3.0},
            lambda t, y: [1 + y[0] ** 2 * y[1] - 4 * y[0], 3 * y[0] - y[0] ** 2 * y[1]],
            20.0,
        ),
    ],
    ids=["sir", "lotka_volterra", "brusselator"],
)
def test_text_models_match_solve_ivp(states, params, initial, rhs, t1):
    model = ode_model("m", states, params)
    t = np.linspace(0.0, t1, 11)
    solver = OdeSolver(method="dopri5", rtol=1e-10, atol=1e-10, max_steps=100_000)
    traj = sim.simulate(
        model, model.default_params(), jnp.asarray(t), initial=initial, solver=solver
    )
    y0 = [initial[name] for name in states]
    ref = solve_ivp(rhs, (0.0, t1), y0, t_eval=t, method="DOP853", rtol=1e-12, atol=1e-12)
    for i, name in enumerate(states):
        np.testing.assert_allclose(
            np.asarray(traj.observables[name]),
            ref.y[i],
            rtol=1e-7,
            atol=1e-7 * np.max(np.abs(ref.y[i])),
        )


ROBERTSON = {
    "y1": "-k1 * y1 + k3 * y2 * y3",
    "y2": "k1 * y1 - k3 * y2 * y3 - k2 * y2 ** 2",
    "y3": "k2 * y2 ** 2",
}
ROBERTSON_RATES = {"k1": 0.04, "k2": 3e7, "k3": 1e4}
FORCED = {"x": "-k * x + A * sin(omega * t) * y", "y": "x - y ** 3 / 3"}  # (reads t)


def autodiff(model):
    """The same model with JAX autodiff through the evaluation of its rates."""
    return dataclasses.replace(model, symbolic_jacobian=False)


@pytest.mark.parametrize(
    "states, params, y",
    [
        (SIR, {"beta": 0.3, "gamma": 0.1, "N": 1000.0}, [700.0, 200.0, 100.0]),
        (BRUSSELATOR, {"a": 1.0, "b": 3.0}, [1.3, 2.9]),
        (ROBERTSON, ROBERTSON_RATES, [0.9, 3e-5, 0.1]),
        (FORCED, {"k": 0.2, "A": 1.5, "omega": 2.0}, [0.7, -0.4]),
    ],
    ids=["sir", "brusselator", "robertson", "forced"],
)
def test_the_symbolic_jacobian_equals_autodiff_and_finite_differences(states, params, y):
    model = ode_model("m", states, params)
    params, y, t = model.default_params(), jnp.asarray(y), jnp.asarray(0.8)
    every = (0, 1, 2)  # by t, the states and the parameters

    @jax.jit  # (one program for every check: compiled once)
    def derivatives(t, y, params):
        # Central differences, exact for these rates up to cubic terms; steps relative to
        # each state.
        h = 1e-6 * jnp.maximum(jnp.abs(y), 1e-3)
        step = lambda j, s: model.vector_field(t, y.at[j].add(s * h[j]), params)  # noqa: E731
        differences = jnp.stack(
            [(step(j, 1) - step(j, -1)) / (2 * h[j]) for j in range(len(y))], axis=1
        )
        jvps = {  # every JVP of the vector field, forward and reverse, symbolic and by autodiff
            (jac_of.__name__, m.symbolic_jacobian): jac_of(m.vector_field, argnums=every)(
                t, y, params
            )
            for jac_of in (jax.jacfwd, jax.jacrev)
            for m in (model, autodiff(model))
        }
        return model.jacobian(t, y, params), differences, jvps

    jac, differences, jvps = derivatives(t, y, params)
    np.testing.assert_allclose(jac, jvps["jacfwd", False][1], rtol=1e-12, atol=0)
    np.testing.assert_allclose(
        jac, differences, rtol=1e-6, atol=1e-9 * float(jnp.max(jnp.abs(jac)))
    )
    for mode in ("jacfwd", "jacrev"):
        want = jvps[mode, False]
        for got in (jvps[mode, True], jvps["jacfwd", False]):
            assert jax.tree.all(
                jax.tree.map(lambda a, b: np.allclose(a, b, rtol=1e-12, atol=0), got, want)
            ), mode


def counting_symbolic_tangents(monkeypatch) -> list:
    """Count the traces of the symbolic JVP rule of text models (each appends one entry)."""
    calls = []
    rule = physics._text.symbolic_tangent
    monkeypatch.setattr(physics._text, "symbolic_tangent", lambda *a: calls.append(1) or rule(*a))
    return calls


def test_newton_iterations_and_batched_gradients_use_the_symbolic_jvp(monkeypatch):
    calls = counting_symbolic_tangents(monkeypatch)
    model = ode_model("robertson", ROBERTSON, ROBERTSON_RATES)
    params = {k: jnp.asarray(v) for k, v in model.default_params().items()}
    y_prev, h = jnp.asarray([0.9, 3e-5, 0.1]), 0.1

    def implicit_euler_step(m, params):  # y = y_prev + h f(y), by optimistix's Newton
        residual = lambda y, _: y - y_prev - h * m.vector_field(0.0, y, params)  # noqa: E731
        return optx.root_find(residual, optx.Newton(rtol=1e-12, atol=1e-14), y_prev).value

    y = implicit_euler_step(model, params)
    assert calls, "the Newton iterations did not use the symbolic JVP"
    calls.clear()
    jax.make_jaxpr(implicit_euler_step)(autodiff(model), params)
    assert not calls
    # jit without recompiling for new parameter values, vmap over parameters, gradients
    # by parameters (an integer one and one that is not a number and not read included).
    traces = []

    @jax.jit
    def sensitivity(params):
        traces.append(1)
        return jax.vmap(jax.grad(lambda k1: model.vector_field(0.0, y, {**params, "k1": k1})[1]))(
            params["k1"] * jnp.arange(1.0, 4.0)
        )

    np.testing.assert_allclose(sensitivity(params), [y[0]] * 3, rtol=1e-15)
    np.testing.assert_allclose(
        sensitivity({k: 1.5 * v for k, v in params.items()}), [y[0]] * 3, rtol=1e-15
    )
    assert len(traces) == 1
    odd = {**params, "k3": 10_000, "note": "not read"}

    @jax.jit
    def checks(y):
        return (
            y - y_prev - h * model.vector_field(0.0, y, params),
            jax.jacfwd(model.vector_field, argnums=1)(0.0, y, odd) - model.jacobian(0.0, y, params),
            jax.grad(lambda k2: model.vector_field(0.0, y, {**odd, "k2": k2})[2])(3e7) - y[1] ** 2,
        )

    residual, jacobian_difference, gradient_difference = checks(y)
    np.testing.assert_allclose(residual, 0.0, atol=1e-12 * float(jnp.max(jnp.abs(y))))
    np.testing.assert_allclose(
        jacobian_difference,
        0.0,
        atol=1e-15 * float(jnp.max(jnp.abs(model.jacobian(0.0, y, params)))),
    )
    assert gradient_difference == 0.0


def robertson_reference(t, k1=0.04):
    rhs = lambda _, y: [
        -k1 * y[0] + 1e4 * y[1] * y[2],
        k1 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
        3e7 * y[1] ** 2,
    ]  # noqa: E731
    return solve_ivp(
        rhs, (t[0], t[-1]), [1.0, 0.0, 0.0], t_eval=t, method="Radau", rtol=1e-10, atol=1e-14
    ).y


@pytest.mark.slow  # (tracing and compiling a Kvaerno solve takes about 10 s, its gradient 40 s)
def test_an_implicit_solve_of_text_robertson_uses_the_symbolic_jacobian(monkeypatch):
    calls = counting_symbolic_tangents(monkeypatch)
    model = ode_model("robertson", ROBERTSON, ROBERTSON_RATES)
    t = np.concatenate([[0.0], np.logspace(-5, 2, 8)])
    solver = OdeSolver(method="kvaerno5", rtol=1e-8, atol=1e-12)
    initial = {"y1": 1.0, "y2": 0.0, "y3": 0.0}

    def solve(k1):
        traj = sim.simulate(
            model,
            {**model.default_params(), "k1": k1},
            jnp.asarray(t),
            initial=initial,
            solver=solver,
        )
        return jnp.stack([traj.observables[name] for name in ROBERTSON])

    ys = solve(jnp.asarray(0.04))
    assert calls, "the Kvaerno solve did not use the symbolic JVP"
    # Radau at rtol 1e-10 is two orders more accurate than this solve, whose global error
    # is a modest multiple of its local tolerances (rtol 1e-8, atol 1e-12). Measured:
    # 1e-10 relative on y1, 3e-9 relative on y2, 6e-11 absolute on y3 where it is large
    # (1e-15 at t = 1e-5, where it is 1.6e-11). Allowed: 100 times the tolerances.
    np.testing.assert_allclose(ys, robertson_reference(t), rtol=1e-6, atol=1e-10)
    # d y3(100) / d k1, reverse mode through the Kvaerno steps and their Newton iterations,
    # against central differences of two solves, whose step sequences differ with k1: an
    # error of order rtol / (h / k1) = 1e-5 at most; measured 1.4e-7.
    grad = float(jax.grad(lambda k1: solve(k1)[2, -1])(jnp.asarray(0.04)))
    h = 0.04 * 1e-3
    fd = (
        float(solve(jnp.asarray(0.04 + h))[2, -1]) - float(solve(jnp.asarray(0.04 - h))[2, -1])
    ) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-5)


TEXT_ROBERTSON = """
[model]
name = "robertson_text"
{stiff}
[model.states]
y1 = "-k1 * y1 + k3 * y2 * y3"
y2 = "k1 * y1 - k3 * y2 * y3 - k2 * y2 ** 2"
y3 = "k2 * y2 ** 2"
[model.parameters]
k1 = 0.04
k2 = 3.0e7
k3 = 1.0e4
[initial]
y1 = 1.0
[time]
t1 = {t1}
save = 3
[solver]
rtol = 1e-8
atol = 1e-10
{method}
"""
STIFF_NOTE = (
    "model 'robertson_text' is declared stiff: using stiff solver kvaerno5 (set [solver] "
    "method to choose)"
)


def num_steps(path: str) -> int:
    """The steps a run file's solve took (its `/stats` attributes)."""
    with h5py.File(path) as f:
        return int(f["stats"].attrs["num_steps"])


def test_a_text_model_declared_stiff_gets_the_stiff_default(tmp_cwd, capsys):
    # Robertson written as text with `stiff = true` and no method: kvaerno5, said once, in
    # tens of steps to t = 40.
    Path("stiff.toml").write_text(TEXT_ROBERTSON.format(stiff="stiff = true", t1=40.0, method=""))
    assert sim.load_config("stiff.toml").spec.model.options["stiff"] is True
    assert sim.setup(sim.load_config("stiff.toml")).model.stiff is True
    code, err = cli(["run", "stiff.toml", "-o", "stiff.h5"], capsys)
    assert code == 0, err
    assert err.count(STIFF_NOTE) == 1, err
    record = sim.read("stiff.h5")
    assert tomllib.loads(record.attrs["config"])["solver"]["method"] == "kvaerno5"
    assert num_steps("stiff.h5") < 100
    y = [float(record.observables[name][-1]) for name in ROBERTSON]
    reference = solve_ivp(
        lambda _, y: [
            -0.04 * y[0] + 1e4 * y[1] * y[2],
            0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
            3e7 * y[1] ** 2,
        ],
        (0.0, 40.0),
        [1.0, 0.0, 0.0],
        method="BDF",
        rtol=1e-10,
        atol=1e-14,
    )
    assert reference.success
    # (the solve's rtol 1e-8, atol 1e-10; y2 ~ 1e-5 is held to atol)
    np.testing.assert_allclose(y, reference.y[:, -1], rtol=1e-6, atol=1e-10)

    # Not declared (or declared false), and with tsit5 named: the explicit method, no notice,
    # and to t = 1 already the hundreds of steps its stability allows (eigenvalue near -1e4)
    for name, stiff, method in [
        ("plain", "", ""),
        ("false", "stiff = false", ""),
        ("named", "stiff = true", 'method = "tsit5"'),
    ]:
        Path(f"{name}.toml").write_text(TEXT_ROBERTSON.format(stiff=stiff, t1=1.0, method=method))
        code, err = cli(["run", f"{name}.toml", "-o", f"{name}.h5"], capsys)
        assert code == 0 and "stiff solver" not in err, (name, err)
        record = sim.read(f"{name}.h5")
        assert tomllib.loads(record.attrs["config"])["solver"]["method"] == "tsit5", name
        # (measured: 806 steps to t = 1, against kvaerno5's 65 to t = 40)
        assert num_steps(f"{name}.h5") > 5 * num_steps("stiff.h5"), name
        assert sim.setup(sim.load_config(f"{name}.toml")).model.stiff is (stiff == "stiff = true")


@pytest.mark.parametrize(
    "value, shown",
    [('"yes"', "'yes'"), ("1", "1"), ("[true]", "[True]"), ("{ on = true }", "{'on': True}")],
)
def test_stiff_that_is_not_a_boolean_is_refused(value, shown, tmp_cwd, capsys):
    text = TEXT_ROBERTSON.format(stiff=f"stiff = {value}", t1=1.0, method="")
    Path("bad.toml").write_text(text)
    code, err = cli(["run", "bad.toml", "-o", "out.h5"], capsys)
    assert code == 2, err
    assert err == f"error: bad.toml: model.stiff: expected true or false, got {shown}\n", err
    assert not Path("out.h5").exists()
    # (from Python: refused by the annotation where types are checked at run time, as in
    # these tests, else by the function)
    with pytest.raises((TypeError, ValueError), match="stiff"):
        ode_model("r", ROBERTSON, ROBERTSON_RATES, stiff="yes")


def test_stiff_is_a_key_of_text_odes_alone(tmp_cwd, capsys):
    # An SDE written as text has no stiff default to choose
    text = '[model.states]\nx = "-x"\n[model.noise]\nx = "0.1"\n'
    model = "stiff = true\n" + text
    Path("sde.toml").write_text(SDE.format(name="mine", model=model, method="euler"))
    code, err = cli(["run", "sde.toml", "-o", "out.h5"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "sde.toml: model.stiff: is not a key of SDE models written in their config" in err
    assert "(stiff is for ODE models)" in err and not Path("out.h5").exists()


def test_text_model_gradient_matches_finite_differences():
    model = ode_model("lv", LV, {"alpha": 0.55, "beta": 0.028, "gamma": 0.8, "delta": 0.024})
    t = jnp.linspace(0.0, 5.0, 6)
    solver = OdeSolver(rtol=1e-10, atol=1e-10)

    def final_prey(alpha):
        params = {**model.default_params(), "alpha": alpha}
        return sim.simulate(
            model, params, t, initial={"prey": 30.0, "predator": 4.0}, solver=solver
        ).observables["prey"][-1]

    # (one compiled program gives the gradient and the values the difference takes)
    value_and_grad = jax.jit(jax.value_and_grad(final_prey))
    grad = float(value_and_grad(jnp.asarray(0.55))[1])
    h = 1e-5
    fd = (
        float(value_and_grad(jnp.asarray(0.55 + h))[0])
        - float(value_and_grad(jnp.asarray(0.55 - h))[0])
    ) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


TEXT_LV = """
[model]
name = "lv"
[model.states]
prey = "alpha * prey - beta * prey * predator"
predator = "delta * prey * predator - gamma * predator"
[model.parameters]
alpha = { value = 0.55, unit = "1/year", positive = true }
beta = 0.028
gamma = 0.8
delta = 0.024
[model.observables]
total = "prey + predator"
[initial]
prey = 30.0
predator = 4.0
[time]
t1 = 15.0
save = 31
[sweep]
[sweep.params]
alpha = { linspace = [0.4, 0.7, 5] }
"""


def test_a_config_defined_model_runs_and_sweeps_as_the_built_in_one(tmp_cwd, capsys):
    Path("text.toml").write_text(TEXT_LV)
    built_in = (
        '[model]\nname = "lotka_volterra"\n[params]\nalpha = 0.55\nbeta = 0.028\ngamma = '
        "0.8\ndelta = 0.024\n[initial]" + TEXT_LV.split("[initial]")[1]
    )
    Path("built_in.toml").write_text(built_in)
    for name in ("text", "built_in"):
        code, err = cli(["sweep", f"{name}.toml", "-o", f"{name}_sweep.h5", "--quiet"], capsys)
        assert code == 0, err
        code, err = cli(["run", f"{name}.toml", "-o", f"{name}_run.h5", "--quiet"], capsys)
        assert code == 0, err
    a, b = sim.read("text_sweep.h5"), sim.read("built_in_sweep.h5")
    for name in ("prey", "predator"):
        np.testing.assert_allclose(a.observables[name], b.observables[name], rtol=1e-10, atol=1e-12)
    run = sim.read("text_run.h5")
    np.testing.assert_allclose(
        run.observables["total"], run.observables["prey"] + run.observables["predator"], rtol=1e-15
    )
    np.testing.assert_allclose(
        run.observables["prey"], sim.read("built_in_run.h5").observables["prey"], rtol=1e-10
    )


@pytest.mark.parametrize(
    "override, key",
    [
        ('model.states.prey="alpha * prey - beta * prey * predatr"', "model.states.prey"),
        ('model.states.prey="alpha * (prey"', "model.states.prey"),
        ("model.parameters.alpha={ value = 0.5, bound = [0, 1] }", "model.parameters.alpha"),
        ("model.parameters.alpha={ value = 1.5, bounds = [0, 1] }", "model.parameters.alpha"),
        (
            "model.parameters.alpha={ value = 0.5, bounds = [1, 0] }",
            "model.parameters.alpha.bounds",
        ),
        (
            ("model.parameters.alpha={ value = 0.5, bounds = [0, 1] }", "params.alpha=2.0"),
            "params.alpha",
        ),
        ("model.parameters.prey=1.0", "model.parameters.prey"),
        ('model.noise={ hare = "0.1" }', "model.noise.hare"),
        (
            'model.states.prey={ rate = "alpha * prey", positive = true }',
            "model.states.prey.positive",
        ),
        ("model.parameters.beta=nan", "model.parameters.beta"),
        ("model.parameters.alpha={ value = -0.5, positive = true }", "model.parameters.alpha"),
        # A mathematical italic x reads as x in an expression: it would read another state.
        ('model.states.\U0001d465="-\U0001d465"', "model.states.\U0001d465"),
        ('model.states.prey="' + "9" * 400 + ' * prey"', "model.states.prey"),
    ],
)
def test_bad_text_models_are_one_line_errors(override, key, tmp_cwd, capsys):
    Path("text.toml").write_text(TEXT_LV)
    overrides = [override] if isinstance(override, str) else list(override)
    code, err = cli(
        ["run", "text.toml", "-o", "out.h5", *[a for o in overrides for a in ("--set", o)]], capsys
    )
    assert (
        code == 2 and len(err.strip().splitlines()) == 1 and key in err and "Traceback" not in err
    ), err
    assert not Path("out.h5").exists()


SDE = """
[model]
name = "{name}"
{model}
[initial]
x = 2.0
[time]
t1 = 1.0
save = 11
[solver]
method = "{method}"
dt = 0.02
[ensemble]
paths = 20
seed = 7
"""


@pytest.mark.parametrize(
    "built_in, drift, noise, params, method",
    [
        # additive noise (-m slow: a second SDE compilation; the noise kind is checked by
        # default below)
        pytest.param(
            "ornstein_uhlenbeck",
            "theta * (mu - x)",
            "sigma",
            "theta = 1.5\nmu = 0.4\nsigma = 0.7",
            "sra1",
            marks=pytest.mark.slow,
        ),
        (
            "geometric_brownian_motion",
            "mu * x",
            "sigma * x",
            "mu = 0.05\nsigma = 0.2",
            "milstein",
        ),  # diagonal noise
    ],
)
def test_an_sde_written_in_its_config_draws_the_paths_of_the_built_in_model(
    built_in, drift, noise, params, method, tmp_cwd, capsys
):
    text = (
        f'[model.states]\nx = "{drift}"\n[model.noise]\nx = "{noise}"\n[model.parameters]\n{params}'
    )
    Path("text.toml").write_text(SDE.format(name="mine", model=text, method=method))
    Path("built_in.toml").write_text(
        SDE.format(name=built_in, model=f"[params]\n{params}", method=method)
    )
    for name in ("text", "built_in"):
        code, err = cli(["run", f"{name}.toml", "-o", f"{name}.h5", "--quiet"], capsys)
        assert code == 0, err
    a, b = sim.read("text.h5").observables["x"], sim.read("built_in.h5").observables["x"]
    assert a.shape == (11, 20) and a.tobytes() == b.tobytes()
    expected = "additive" if method == "sra1" else "diagonal"
    assert sim.setup(sim.load_config("text.toml")).model.noise == expected


@pytest.mark.parametrize(
    "noise, expected",
    [("sigma", "additive"), ("sigma * exp(-t)", "additive"), ("sigma * x", "diagonal")],
)
def test_the_noise_of_a_text_sde_is_additive_unless_it_reads_the_state(noise, expected, tmp_cwd):
    text = (
        '[model.states]\nx = "theta * (mu - x)"\n[model.noise]\nx = '
        f'"{noise}"\n[model.parameters]\ntheta = 1.5\nmu = 0.4\nsigma = 0.7'
    )
    Path("text.toml").write_text(SDE.format(name="mine", model=text, method="euler"))
    assert sim.setup(sim.load_config("text.toml")).model.noise == expected


# (two full fits; by default a text model's run and sweep are checked against the built-in's)
@pytest.mark.slow
def test_a_fit_of_the_text_lotka_volterra_gives_the_built_in_estimates(tmp_cwd, capsys):
    # The lynx-hare fit of experiments/lynx_hare.toml, with the model written as text
    # (parameters and states declared positive, as the built-in model declares them).
    repo = Path(__file__).resolve().parents[2]
    (tmp_cwd / "data").mkdir()
    (tmp_cwd / "data" / "lynx_hare.h5").write_bytes(
        (repo / "experiments" / "data" / "lynx_hare.h5").read_bytes()
    )
    built_in = (repo / "experiments" / "lynx_hare.toml").read_text()
    text = built_in.replace(
        '[model]\nname = "lotka_volterra"\n',
        '[model]\nname = "lv"\n[model.states]\n'
        'prey = { rate = "alpha * prey - beta * prey * predator", positive = true }\n'
        'predator = { rate = "delta * prey * predator - gamma * predator", positive = true }\n'
        "[model.parameters]\n"
        + "".join(
            f"{p} = {{ value = {v}, positive = true }}\n"
            for p, v in [("alpha", 0.55), ("beta", 0.028), ("gamma", 0.8), ("delta", 0.024)]
        ),
    )
    assert text != built_in
    Path("built_in.toml").write_text(built_in)
    Path("text.toml").write_text(text)
    for name in ("built_in", "text"):
        code, err = cli(["fit", f"{name}.toml", "-o", f"{name}.h5", "--quiet"], capsys)
        assert code == 0, err
    a, b = sim.read("text.h5"), sim.read("built_in.h5")
    assert (
        set(a.estimate)
        == set(b.estimate)
        == {"alpha", "beta", "gamma", "delta", "initial.prey", "initial.predator"}
    )
    # The text model's sensitivities come from its symbolic Jacobian, rounded otherwise
    # than autodiff through the built-in's code; the Gauss-Newton polish after
    # Levenberg-Marquardt takes both to the same minimum. Measured: 5.1e-12 on the
    # estimates and 5.7e-12 on the standard errors (1.1e-8 without the polish).
    for name in b.estimate:
        np.testing.assert_allclose(a.estimate[name], b.estimate[name], rtol=1e-10, err_msg=name)
        np.testing.assert_allclose(a.stderr[name], b.stderr[name], rtol=1e-10, err_msg=name)
    np.testing.assert_allclose(float(a.objective), float(b.objective), rtol=1e-12)


def test_a_text_model_built_again_is_an_equal_model_and_is_not_traced_again():
    """A config built twice (a fit after a run, a notebook's second cell) gives an equal
    model, with and without events, so a jitted function of it is traced once; other text
    or other defaults give another model."""
    from physics.ode import text_events, with_events

    traces = []

    @jax.jit
    def rate(model, y):
        traces.append(1)
        return model.vector_field(0.0, y, model.default_params())

    states = {"x": "-k * x + a", "v": {"rate": "x - v", "positive": False}}
    first = ode_model("decay", states, {"k": 0.5, "a": {"value": 1.0, "positive": True}})
    again = ode_model(
        "decay",
        {"x": "-k * x + a", "v": {"rate": "x - v", "positive": False}},
        {"k": 0.5, "a": {"value": 1.0, "positive": True}},
    )
    assert again == first and hash(again) == hash(first) and again is not first
    y = jnp.array([2.0, 1.0])
    np.testing.assert_allclose(rate(first, y), [0.0, 1.0])
    np.testing.assert_allclose(rate(again, y), [0.0, 1.0])
    assert len(traces) == 1
    for other in (
        ode_model("decay", states, {"k": 0.25, "a": {"value": 1.0, "positive": True}}),
        ode_model(
            "decay",
            {"x": "-k * x - a", "v": {"rate": "x - v", "positive": False}},
            {"k": 0.5, "a": {"value": 1.0, "positive": True}},
        ),
        ode_model(
            "decay",
            {"v": {"rate": "x - v", "positive": False}, "x": "-k * x + a"},
            {"k": 0.5, "a": {"value": 1.0, "positive": True}},
        ),
    ):
        assert other != first
    np.testing.assert_allclose(
        rate(ode_model("decay", states, {"k": 0.25, "a": {"value": 1.0, "positive": True}}), y),
        [0.5, 1.0],
    )

    spec = [
        {"when": "x < 0.1", "set": {"x": 1.0}, "terminal": False},
        {"at": [1.0, 2.0], "set": {"a": "2 * a"}},
    ]
    bounced = with_events(first, text_events(first, spec))
    rebuilt = with_events(again, text_events(again, [dict(e) for e in spec]))
    assert type(rebuilt) is type(bounced) and rebuilt == bounced
    assert len(bounced.events()) == 3
    rate(bounced, y)
    rate(rebuilt, y)
    assert len(traces) == 3  # (one trace for the other defaults, one for the model with events)
    moved = with_events(first, text_events(first, [{"when": "x < 0.2", "set": {"x": 1.0}}]))
    assert moved != bounced


def test_text_models_are_values_of_one_class():
    # Every text model is a TextOdeModel whose declarations and parsed expressions are
    # its fields: models compare by content (not by a cache of classes), however many are
    # built, from threads too, and a jitted function is traced once for all equal ones.
    from concurrent.futures import ThreadPoolExecutor

    traces = []

    @jax.jit
    def rate(model, y):
        traces.append(1)
        return model.vector_field(0.0, y, model.default_params())

    y = jnp.array([2.0])
    built = [ode_model("kept", {"x": "-k * x"}, {"k": float(i % 3)}) for i in range(200)]
    assert {type(m) for m in built} == {physics.ode.TextOdeModel}
    assert len(set(built)) == 3 and built[0] == built[3] and built[0] != built[1]
    for model in built:
        rate(model, y)
    assert len(traces) == 3
    with ThreadPoolExecutor(8) as pool:
        threaded = list(
            pool.map(
                lambda _: ode_model("threads", {"x": "-k * x + sin(t)"}, {"k": 0.5}), range(32)
            )
        )
    assert all(m == threaded[0] for m in threaded)
    # (two texts of one meaning written differently are different models)
    assert ode_model("a", {"x": "-k * x"}, {"k": 1.0}) != ode_model(
        "a", {"x": "-(k * x)"}, {"k": 1.0}
    )


def test_a_fit_keeps_to_the_bounds_a_text_model_declares(tmp_cwd, capsys):
    """experiments/sir_boarding_school.toml declares beta in [0, 5]: a fit starting on a
    bound is refused before anything runs (its logistic transform has no value there)."""
    from inference._fit import build_problem  # noqa: F401  (the fit's set-up, without a run)

    config = Path(__file__).resolve().parents[2] / "experiments" / "sir_boarding_school.toml"
    code, err = cli(["fit", str(config), "-o", "fit.h5", "--set", "params.beta=5.0"], capsys)
    assert (
        code == 2
        and "params.beta: start value 5 must lie strictly inside the allowed range of beta ((0, 5))"
        in err
    ), err
    assert not Path("fit.h5").exists()
