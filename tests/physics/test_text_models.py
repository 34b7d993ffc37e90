"""ODE models written as text: the expression language evaluates as NumPy does, refuses
what it does not have (with the column), and a config-defined model runs, sweeps and fits
like a built-in one (checked against scipy's solve_ivp and the built-in Lotka-Volterra)."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import sim
from physics._expressions import ExpressionError, parse
from physics.ode import ode_model
from solvers import OdeSolver
from tests.helpers import cli


def test_expressions_evaluate_as_numpy_does():
    x, k = 1.7, 0.3
    cases = {
        "-k * x ** 2 + 3 / x - (x - 1)": -k * x**2 + 3 / x - (x - 1),
        "exp(-k * t) * sin(2 * pi * x) + log(x) - sqrt(x) + tanh(k)": np.exp(-k * 2.0) * np.sin(2 * np.pi * x) + np.log(x) - np.sqrt(x) + np.tanh(k),
        "max(x, 2) + min(x, 2) + abs(-x) + pow(x, 3) + log10(100) + e": 2 + x + x + x**3 + 2 + np.e,
        "where(x > 1 and k < 1, x, -x) + piecewise(not (x > 2), 1, 0)": x + 1,
        "x if x < 1 or k > 1 else 2 * x": 2 * x,
        "+x - -k": x + k,
    }
    for text, want in cases.items():
        e = parse(text, ["x", "k", "t"])
        np.testing.assert_allclose(float(e({"x": x, "k": k, "t": 2.0})), want, rtol=1e-14, err_msg=text)
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
        ("x" + " + x" * 450, "nested"),  # (by the parser or by the depth limit, as the stack allows)
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


SIR = {"S": "-beta * S * I / N", "I": "beta * S * I / N - gamma * I", "R": "gamma * I"}
LV = {"prey": "alpha * prey - beta * prey * predator", "predator": "delta * prey * predator - gamma * predator"}
BRUSSELATOR = {"x": "a + x ** 2 * y - (b + 1) * x", "y": "b * x - x ** 2 * y"}


@pytest.mark.parametrize(
    "states, params, initial, rhs, t1",
    [
        (SIR, {"beta": 0.3, "gamma": 0.1, "N": 1000.0}, {"S": 990.0, "I": 10.0, "R": 0.0},
         lambda t, y: [-0.3 * y[0] * y[1] / 1000, 0.3 * y[0] * y[1] / 1000 - 0.1 * y[1], 0.1 * y[1]], 100.0),
        (LV, {"alpha": 0.55, "beta": 0.028, "gamma": 0.8, "delta": 0.024}, {"prey": 30.0, "predator": 4.0},
         lambda t, y: [0.55 * y[0] - 0.028 * y[0] * y[1], 0.024 * y[0] * y[1] - 0.8 * y[1]], 20.0),
        (BRUSSELATOR, {"a": 1.0, "b": 3.0}, {"x": 1.5, "y": 3.0},
         lambda t, y: [1 + y[0] ** 2 * y[1] - 4 * y[0], 3 * y[0] - y[0] ** 2 * y[1]], 20.0),
    ],
    ids=["sir", "lotka_volterra", "brusselator"],
)
def test_text_models_match_solve_ivp(states, params, initial, rhs, t1):
    model = ode_model("m", states, params)
    t = np.linspace(0.0, t1, 11)
    solver = OdeSolver(method="dopri5", rtol=1e-10, atol=1e-10, max_steps=100_000)
    traj = sim.simulate(model, model.default_params(), jnp.asarray(t), initial=initial, solver=solver)
    y0 = [initial[name] for name in states]
    ref = solve_ivp(rhs, (0.0, t1), y0, t_eval=t, method="DOP853", rtol=1e-12, atol=1e-12)
    for i, name in enumerate(states):
        np.testing.assert_allclose(np.asarray(traj.observables[name]), ref.y[i], rtol=1e-7, atol=1e-7 * np.max(np.abs(ref.y[i])))


def test_text_model_gradient_matches_finite_differences():
    model = ode_model("lv", LV, {"alpha": 0.55, "beta": 0.028, "gamma": 0.8, "delta": 0.024})
    t = jnp.linspace(0.0, 5.0, 6)
    solver = OdeSolver(rtol=1e-10, atol=1e-10)

    def final_prey(alpha):
        params = {**model.default_params(), "alpha": alpha}
        return sim.simulate(model, params, t, initial={"prey": 30.0, "predator": 4.0}, solver=solver).observables["prey"][-1]

    grad = float(jax.grad(final_prey)(jnp.asarray(0.55)))
    h = 1e-5
    fd = (float(final_prey(jnp.asarray(0.55 + h))) - float(final_prey(jnp.asarray(0.55 - h)))) / (2 * h)
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
    built_in = '[model]\nname = "lotka_volterra"\n[params]\nalpha = 0.55\nbeta = 0.028\ngamma = 0.8\ndelta = 0.024\n[initial]' + TEXT_LV.split("[initial]")[1]
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
    np.testing.assert_allclose(run.observables["total"], run.observables["prey"] + run.observables["predator"], rtol=1e-15)
    np.testing.assert_allclose(run.observables["prey"], sim.read("built_in_run.h5").observables["prey"], rtol=1e-10)


@pytest.mark.parametrize(
    "override, key",
    [
        ('model.states.prey="alpha * prey - beta * prey * predatr"', "model.states.prey"),
        ('model.states.prey="alpha * (prey"', "model.states.prey"),
        ('model.parameters.alpha={ value = 0.5, bound = [0, 1] }', "model.parameters.alpha"),
        ('model.parameters.alpha={ value = 1.5, bounds = [0, 1] }', "model.parameters.alpha"),
        ('model.parameters.alpha={ value = 0.5, bounds = [1, 0] }', "model.parameters.alpha.bounds"),
        (('model.parameters.alpha={ value = 0.5, bounds = [0, 1] }', "params.alpha=2.0"), "params.alpha"),
        ('model.parameters.prey=1.0', "model.parameters.prey"),
        ('model.noise={ hare = "0.1" }', "model.noise.hare"),
        ('model.states.prey={ rate = "alpha * prey", positive = true }', "model.states.prey.positive"),
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
    code, err = cli(["run", "text.toml", "-o", "out.h5", *[a for o in overrides for a in ("--set", o)]], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and key in err and "Traceback" not in err, err
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
        pytest.param("ornstein_uhlenbeck", "theta * (mu - x)", "sigma", "theta = 1.5\nmu = 0.4\nsigma = 0.7", "sra1", marks=pytest.mark.slow),
        ("geometric_brownian_motion", "mu * x", "sigma * x", "mu = 0.05\nsigma = 0.2", "milstein"),  # diagonal noise
    ],
)
def test_an_sde_written_in_its_config_draws_the_paths_of_the_built_in_model(built_in, drift, noise, params, method, tmp_cwd, capsys):
    text = f'[model.states]\nx = "{drift}"\n[model.noise]\nx = "{noise}"\n[model.parameters]\n{params}'
    Path("text.toml").write_text(SDE.format(name="mine", model=text, method=method))
    Path("built_in.toml").write_text(SDE.format(name=built_in, model=f"[params]\n{params}", method=method))
    for name in ("text", "built_in"):
        code, err = cli(["run", f"{name}.toml", "-o", f"{name}.h5", "--quiet"], capsys)
        assert code == 0, err
    a, b = sim.read("text.h5").observables["x"], sim.read("built_in.h5").observables["x"]
    assert a.shape == (11, 20) and a.tobytes() == b.tobytes()
    expected = "additive" if method == "sra1" else "diagonal"
    assert sim.setup(sim.load_config("text.toml")).model.noise == expected


@pytest.mark.parametrize("noise, expected", [("sigma", "additive"), ("sigma * exp(-t)", "additive"), ("sigma * x", "diagonal")])
def test_the_noise_of_a_text_sde_is_additive_unless_it_reads_the_state(noise, expected, tmp_cwd):
    text = f'[model.states]\nx = "theta * (mu - x)"\n[model.noise]\nx = "{noise}"\n[model.parameters]\ntheta = 1.5\nmu = 0.4\nsigma = 0.7'
    Path("text.toml").write_text(SDE.format(name="mine", model=text, method="euler"))
    assert sim.setup(sim.load_config("text.toml")).model.noise == expected


@pytest.mark.slow  # (two full fits; by default a text model's run and sweep are checked against the built-in's)
def test_a_fit_of_the_text_lotka_volterra_gives_the_built_in_estimates(tmp_cwd, capsys):
    # The lynx-hare fit of experiments/lynx_hare.toml, with the model written as text
    # (parameters and states declared positive, as the built-in model declares them).
    repo = Path(__file__).resolve().parents[2]
    (tmp_cwd / "data").mkdir()
    (tmp_cwd / "data" / "lynx_hare.h5").write_bytes((repo / "experiments" / "data" / "lynx_hare.h5").read_bytes())
    built_in = (repo / "experiments" / "lynx_hare.toml").read_text()
    text = built_in.replace(
        '[model]\nname = "lotka_volterra"\n',
        '[model]\nname = "lv"\n[model.states]\n'
        'prey = { rate = "alpha * prey - beta * prey * predator", positive = true }\n'
        'predator = { rate = "delta * prey * predator - gamma * predator", positive = true }\n'
        "[model.parameters]\n"
        + "".join(f"{p} = {{ value = {v}, positive = true }}\n" for p, v in [("alpha", 0.55), ("beta", 0.028), ("gamma", 0.8), ("delta", 0.024)]),
    )
    assert text != built_in
    Path("built_in.toml").write_text(built_in)
    Path("text.toml").write_text(text)
    for name in ("built_in", "text"):
        code, err = cli(["fit", f"{name}.toml", "-o", f"{name}.h5", "--quiet"], capsys)
        assert code == 0, err
    a, b = sim.read("text.h5"), sim.read("built_in.h5")
    assert set(a.estimate) == set(b.estimate) == {"alpha", "beta", "gamma", "delta", "initial.prey", "initial.predator"}
    for name in b.estimate:
        np.testing.assert_allclose(a.estimate[name], b.estimate[name], rtol=1e-10, err_msg=name)
        np.testing.assert_allclose(a.stderr[name], b.stderr[name], rtol=1e-8, err_msg=name)


def test_a_fit_keeps_to_the_bounds_a_text_model_declares(tmp_cwd, capsys):
    """experiments/sir_boarding_school.toml declares beta in [0, 5]: a fit starting on a
    bound is refused before anything runs (its logistic transform has no value there)."""
    from inference._fit import build_problem  # noqa: F401  (the fit's set-up, without a run)

    config = Path(__file__).resolve().parents[2] / "experiments" / "sir_boarding_school.toml"
    code, err = cli(["fit", str(config), "-o", "fit.h5", "--set", "params.beta=5.0"], capsys)
    assert code == 2 and "params.beta: start value 5 must lie strictly inside the allowed range of beta ((0, 5))" in err, err
    assert not Path("fit.h5").exists()
