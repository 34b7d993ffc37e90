"""Observation models: observables as formulas of states and parameters, noise models
(normal, laplace, lognormal, log10-normal) whose negative log-likelihood is the density
of the data with every constant, sigmas from data, numbers, formulas or free quantities."""

from pathlib import Path

import equinox as eqx
import h5py
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.integrate import solve_ivp

import sim
from inference._observation import build_observation, observable_specs
from tests.helpers import cli

CHAIN = """
[model]
name = "chain"
[model.states]
x = "-k * x"
y = "k * x - m * y"
[model.parameters]
k = { value = 0.5, positive = true }
m = { value = 0.4, positive = true }
[initial]
x = 2.0
y = 0.0
[solver]
rtol = 1e-10
atol = 1e-12
"""
TIMES = np.linspace(0.0, 4.0, 21)


def _chain(k, m, t=TIMES, y0=(2.0, 0.0)):
    return solve_ivp(
        lambda _, v: [-k * v[0], k * v[0] - m * v[1]],
        (0.0, t[-1]),
        y0,
        t_eval=t,
        rtol=1e-12,
        atol=1e-13,
    ).y


def test_each_noise_model_is_the_density_of_the_data(tmp_path):
    # The observation models as a config writes them, evaluated on given states and
    # parameters (no solve), against SciPy's densities of the data: normal, Laplace,
    # lognormal (log y normal, density of y) and log10-normal, with a sigma that is a
    # number, a formula of a parameter and a state, and a free quantity.
    (tmp_path / "c.toml").write_text(CHAIN)
    config = sim.load_config(tmp_path / "c.toml")
    section = {
        "observables": {
            "x": {"path": "/x", "noise": "normal", "sigma": 0.2},
            "total": {"path": "/total", "formula": "x + y", "noise": "laplace", "sigma": "s"},
            "y": {"path": "/y", "noise": "lognormal", "sigma": "0.1 + 0.05 * m * y"},
            "scaled": {
                "path": "/scaled",
                "formula": "2 * k * y",
                "noise": "log10-normal",
                "sigma": 0.3,
            },
        }
    }
    specs = observable_specs(config, section, "data")
    observation = build_observation(
        config,
        specs,
        model_observables=("x", "y"),
        symbols=("x", "y", "k", "m", "t"),
        free=["k", "s"],
        free_key="fit.free",
        varying={"k", "s", "x", "y"},
        sigma_data={},
        default_noise="normal",
    )
    assert not observation.least_squares and observation.outputs == ("x", "y")
    rng = np.random.default_rng(3)
    x, y = rng.uniform(0.5, 2.0, 7), rng.uniform(0.5, 2.0, 7)
    k, m, s = 0.7, 0.3, 0.25
    data = {name: rng.uniform(0.3, 3.0, 7) for name in ("x", "total", "y", "scaled")}
    data["y"][2] = np.nan  # (missing: adds nothing)
    values = {
        "x": jnp.asarray(x),
        "y": jnp.asarray(y),
        "k": jnp.asarray(k),
        "m": jnp.asarray(m),
        "s": jnp.asarray(s),
        "t": jnp.arange(7.0),
    }
    terms = np.asarray(
        observation.terms(
            values, {n: jnp.asarray(v) for n, v in data.items()}, {n: jnp.ones(()) for n in data}
        )
    ).reshape(4, 7)
    seen = np.isfinite(data["y"])
    expected = [
        -stats.norm.logpdf(data["x"], x, 0.2),
        -stats.laplace.logpdf(data["total"], x + y, s),
        np.where(
            seen,
            -stats.lognorm.logpdf(np.where(seen, data["y"], 1.0), 0.1 + 0.05 * m * y, scale=y),
            0.0,
        ),
        -(
            stats.norm.logpdf(np.log10(data["scaled"]), np.log10(2 * k * y), 0.3)
            - np.log(data["scaled"] * np.log(10.0))
        ),
    ]
    np.testing.assert_allclose(terms, np.stack(expected), rtol=1e-12, atol=1e-12)


def _write(path: Path, **datasets):
    with h5py.File(path, "w") as f:
        for name, value in datasets.items():
            f[name] = value


BAD = {
    "unknown_noise": (
        'total = { path = "/total", formula = "x + y", noise = "laplce", sigma = 0.1 }',
        "data.observables.total.noise",
        "Perhaps you meant 'laplace'",
    ),
    "unknown_symbol": (
        'total = { path = "/total", formula = "x + yy", sigma = 0.1 }',
        "data.observables.total.formula",
        "column 5: unknown name 'yy'",
    ),
    "sigma_not_free": (
        'total = { path = "/total", formula = "x + y", sigma = "s_total" }',
        "data.observables.total.sigma",
        "'s_total' is neither a free quantity",
    ),
    "negative_sigma": (
        'total = { path = "/total", formula = "x + y", sigma = -0.5 }',
        "data.observables.total.sigma",
        "positive standard deviation",
    ),
    # (a sigma whose square overflows: the objective would be infinite, and a fit "converged" at its
    # start)
    "huge_sigma": (
        'total = { path = "/total", formula = "x + y", sigma = 1e308 }',
        "data.observables.total.sigma",
        "between 1e-150 and 1e150",
    ),
    "tiny_sigma": (
        'total = { path = "/total", formula = "x + y", sigma = 1e-200 }',
        "data.observables.total.sigma",
        "between 1e-150 and 1e150",
    ),
    "unknown_key": (
        'total = { path = "/total", formula = "x + y", sigma = 0.1, scale = 2 }',
        "data.observables.total.scale",
        "an observable has",
    ),
    "no_sigma": (
        'total = { path = "/total", formula = "x + y" }',
        "data.observables.total.sigma",
        "required with observation models",
    ),
    "not_an_observable": (
        'z = { path = "/total", sigma = 0.1 }',
        "data.observables.z",
        "give a formula",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_observation_models_are_one_line_errors(case, tmp_cwd, capsys):
    entry, key, fragment = BAD[case]
    _write(tmp_cwd / "obs.h5", t=TIMES, total=np.ones(TIMES.size))
    (tmp_cwd / "c.toml").write_text(
        CHAIN + f'[data]\nfile = "obs.h5"\ntime = "/t"\n[data.observables]\n{entry}\n[fit]\nfree = '
        '["k"]\n'
    )
    code, err = cli(["fit", "c.toml", "-o", "out.h5"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert key in err and fragment in err, err
    assert not (tmp_cwd / "out.h5").exists()


def test_an_experiment_s_bad_formula_is_named_by_its_experiment(tmp_cwd, capsys):
    _write(tmp_cwd / "a.h5", t=TIMES, total=np.ones(TIMES.size))
    experiment = (
        '[[experiments]]\nname = "a"\nfile = "a.h5"\ntime = "/t"\nobservables = { total '
        '= { path = "/total", formula = "x +* y", sigma = 0.1 } }\n'
    )
    (tmp_cwd / "c.toml").write_text(CHAIN + experiment + '[fit]\nfree = ["k"]\n')
    code, err = cli(["fit", "c.toml", "-o", "out.h5"], capsys)
    assert code == 2 and "experiments.0.observables.total.formula" in err and "column" in err, err
    # Levenberg-Marquardt asked for, with a noise model that is no least-squares problem
    (tmp_cwd / "c.toml").write_text(
        CHAIN
        + experiment.replace("x +* y", "x + y").replace(
            "sigma = 0.1", 'noise = "laplace", sigma = 0.1'
        )
        + '[fit]\nfree = ["k"]\noptimizer = "levenberg_marquardt"\n'
    )
    code, err = cli(["fit", "c.toml", "-o", "out.h5"], capsys)
    assert code == 2 and "fit.optimizer" in err and "bfgs" in err, err
    # sim infer: the observables give their noise models; [infer.noise] would be ignored
    (tmp_cwd / "c.toml").write_text(
        CHAIN
        + experiment.replace("x +* y", "x + y")
        + '[infer.priors]\nk = { dist = "lognormal", loc = 0.0, scale = 1.0 '
        '}\n[infer.noise]\nmodel = "normal"\n'
    )
    code, err = cli(["infer", "c.toml", "-o", "out.h5"], capsys)
    assert code == 2 and "infer.noise" in err, err
    assert not (tmp_cwd / "out.h5").exists()


@pytest.mark.slow
def test_a_formula_observable_is_its_formula_of_the_states_and_a_free_sigma_is_estimated(tmp_cwd):
    # Data: the total x + y of the chain, with normal noise of sd 0.05, and x with 10%
    # lognormal noise. The sigma of the total is free; its estimate is the noise's.
    from inference import build_problem, fit

    k, m, sd = 0.7, 0.3, 0.05
    times = np.linspace(0.0, 8.0, 81)
    x, y = _chain(k, m, times)
    rng = np.random.default_rng(7)
    total = x + y + sd * rng.standard_normal(times.size)
    x_obs = x * np.exp(0.1 * rng.standard_normal(times.size))
    _write(tmp_cwd / "obs.h5", t=times, total=total, x=x_obs)
    data = (
        '[data]\nfile = "obs.h5"\ntime = "/t"\n[data.observables]\ntotal = { path = "/total", '
        'formula = "x + y", sigma = "s" }\nx = { path = "/x", noise = "lognormal", sigma = 0.1 }\n'
    )
    (tmp_cwd / "c.toml").write_text(CHAIN + data + '[fit]\nfree = ["k", "m", "s"]\n')
    config = sim.load_config("c.toml")
    problem, _, _, section = build_problem(config)
    assert section.optimizer == "bfgs"  # (a free sigma: no least-squares problem)
    at = {"k": jnp.asarray(k), "m": jnp.asarray(m), "s": jnp.asarray(sd)}
    values = eqx.filter_jit(lambda p, x: p.values(x))(problem, at)
    h, sigma = problem.observation.observed[0].prediction(values)
    np.testing.assert_allclose(np.asarray(h), x + y, rtol=1e-8, atol=1e-9)
    assert float(sigma) == sd
    result = fit(config)
    assert result.converged, result.message
    for name, truth in (("k", k), ("m", m), ("s", sd)):
        assert abs(result.estimate[name] - truth) < 3 * result.stderr[name], (
            name,
            result.estimate[name],
            result.stderr[name],
        )
    assert abs(result.estimate["s"] / sd - 1) < 0.2
    # the objective: the negative log-likelihood of both observables at the estimate
    xe, ye = _chain(result.estimate["k"], result.estimate["m"], times)
    expected = (
        -stats.norm.logpdf(total, xe + ye, result.estimate["s"]).sum()
        - stats.lognorm.logpdf(x_obs, 0.1, scale=xe).sum()
    )
    assert result.objective == pytest.approx(expected, rel=1e-7)


def test_a_sigma_dataset_whose_square_overflows_is_refused(tmp_cwd, capsys):
    _write(tmp_cwd / "obs.h5", t=TIMES, total=np.ones(TIMES.size), sigma=np.full(TIMES.size, 1e300))
    (tmp_cwd / "c.toml").write_text(
        CHAIN
        + '[data]\nfile = "obs.h5"\ntime = "/t"\n[data.observables]\ntotal = { path = "/total", '
        'formula = "x + y", sigma = "/sigma" }\n[fit]\nfree = ["k"]\n'
    )
    code, err = cli(["fit", "c.toml", "-o", "out.h5"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "obs.h5" in err and "/sigma" in err and "between 1e-150 and 1e150" in err, err
    assert not (tmp_cwd / "out.h5").exists()
