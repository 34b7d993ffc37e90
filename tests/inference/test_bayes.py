"""Bayesian inference: credible intervals that cover, diagnostics, files, bad priors."""

import os
from pathlib import Path

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer import MCMC

import sim
from inference import build_bayes_model, make_problem
from inference._bayes import ess_bulk, nuts_kernel, r_hat
from sim.cli import main

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
YEARS = np.arange(0.0, 21.0)

CONFIG = """
[model]
name = "lotka_volterra"
[initial]
prey = 33.0
predator = 6.0
[solver]
rtol = 1e-6
atol = 1e-6
[data]
file = "obs.h5"
time = "/t"
[data.observables]
prey = "/prey"
predator = "/predator"
[infer]
chains = 1
warmup = 200
samples = 200
[infer.priors]
alpha = { dist = "lognormal", loc = -0.6, scale = 0.1 }
beta = { dist = "lognormal", loc = -3.6, scale = 0.1 }
gamma = { dist = "lognormal", loc = -0.22, scale = 0.1 }
delta = { dist = "lognormal", loc = -3.7, scale = 0.1 }
[infer.noise]
model = "lognormal"
sigma = { dist = "lognormal", loc = -2.5, scale = 0.3 }
"""


def write_obs(path, prey, predator):
    with h5py.File(path, "w") as f:
        f["t"] = YEARS
        f["prey"] = prey
        f["predator"] = predator


def draw_data_set(model, rng):
    """Parameters and noise scale drawn from the priors, then noisy observations."""
    key = jax.random.PRNGKey(int(rng.integers(2**31)))
    truth = {name: float(prior.sample(jax.random.fold_in(key, i))) for i, (name, prior) in enumerate(model.priors.items())}
    sigma = float(model.sigma_prior.sample(jax.random.fold_in(key, 99)))
    pred = model.problem._predict({k: jnp.asarray(v) for k, v in truth.items()})
    noisy = {k: np.asarray(v) * np.exp(sigma * rng.standard_normal(v.shape)) for k, v in pred.items()}
    return truth, noisy


def coverage(tmp_path, n_sets, seed=0, iterations=70):
    rng = np.random.default_rng(seed)
    write_obs(tmp_path / "obs.h5", np.ones(21), np.ones(21))
    (tmp_path / "c.toml").write_text(CONFIG)
    model, _, section = build_bayes_model(sim.load_config(tmp_path / "c.toml"))
    # The data are arguments of the compiled sampler: one compilation serves every data set.
    mcmc = MCMC(
        nuts_kernel(model, section), num_warmup=iterations, num_samples=iterations, num_chains=1, progress_bar=False, jit_model_args=True
    )
    hits, total = 0, 0
    for i in range(n_sets):
        truth, noisy = draw_data_set(model, rng)
        with jax.numpy_dtype_promotion("standard"):
            mcmc.run(jax.random.PRNGKey(i), {k: jnp.asarray(v) for k, v in noisy.items()})
        samples = mcmc.get_samples()
        for name, value in truth.items():
            lo, hi = np.quantile(np.asarray(samples[name]), [0.05, 0.95])
            hits += int(lo <= value <= hi)
            total += 1
    return hits, total


@pytest.mark.slow
def test_credible_intervals_cover_true_values(tmp_path):
    # Simulation-based calibration in miniature (Cook, Gelman & Rubin 2006): data drawn
    # from the prior predictive; 90% intervals must contain the truth about 90% of the
    # time. 3 data sets x 4 parameters = 12 intervals: P(fewer than 8 hits) under the
    # nominal rate is below 0.5%.
    hits, total = coverage(tmp_path, 3)
    assert hits >= 8, (hits, total)


@pytest.mark.slow
def test_credible_interval_coverage_over_twenty_data_sets(tmp_path):
    hits, total = coverage(tmp_path, 20, seed=1, iterations=500)
    rate = hits / total
    print(f"90% interval coverage over 20 data sets: {hits}/{total} = {rate:.3f}")
    # Binomial(80, 0.9): 2.5% and 97.5% quantiles are 66 and 77 hits.
    assert 0.80 <= rate <= 0.98, rate


def test_forward_sensitivity_gradient_matches_finite_differences():
    config = sim.load_config(EXPERIMENTS / "lynx_hare.toml", ["solver.rtol=1e-12", "solver.atol=1e-12"])
    free = ["alpha", "beta", "gamma", "delta", "initial.prey", "initial.predator"]
    problem, start, _ = make_problem(config, None, free, free_key="x", gradient="forward_sensitivity")

    # one compiled function for both (the finite differences use its value)
    value_and_grad = jax.jit(jax.value_and_grad(lambda x: jnp.sum(jnp.log(problem.predict(x)["prey"]) ** 2)))

    def f(x):
        return value_and_grad(x)[0]

    grad = value_and_grad(start)[1]
    for name in free:
        h = 1e-6 * float(start[name])
        plus = f({**start, name: start[name] + h})
        minus = f({**start, name: start[name] - h})
        fd = (plus - minus) / (2 * h)
        assert abs(float(grad[name]) - float(fd)) <= 1e-6 * abs(float(fd)), (name, grad[name], fd)


def test_diagnostics_on_known_draws():
    rng = np.random.default_rng(0)
    independent = rng.standard_normal((4, 1000))
    assert 3000 < ess_bulk(independent) < 5000
    assert r_hat(independent) < 1.01
    stuck = independent + np.arange(4)[:, None]  # chains centred in different places
    assert r_hat(stuck) > 1.5


def test_sim_infer_cli_writes_posterior_layout(tmp_cwd, capsys):
    # `sim infer` with two chains on the heat-equation problem of
    # tests/inference/test_fit_pde.py (16 points, ETDRK2: NUTS compiles in seconds; noisy
    # snapshots of a run at diffusivity 0.35): the posterior file, its ArviZ export and
    # `sim plot` of it, and a 90% interval that holds the truth. The same command on
    # experiments/lynx_hare.toml runs with `-m slow` (below).
    from .test_fit_pde import SMALL, noisy_snapshots

    noisy_snapshots(tmp_cwd, "heat", "diffusivity", 0.35, 0.2, "gaussian", seed=0, size=SMALL)  # c.toml, snap.h5
    with pytest.raises(SystemExit) as info:
        main(["infer", "c.toml", "-o", "post.h5", "--chains", "2", "--quiet", "--arviz", "post.nc"])
        raise SystemExit(0)
    out = capsys.readouterr().out
    assert info.value.code == 0
    for word in ("diffusivity", "sigma.u", "ess_bulk", "r_hat", "divergences"):
        assert word in out
    with h5py.File("post.h5") as f:
        assert f.attrs["format"] == "simjax.posterior"
        assert f["posterior/diffusivity"].shape == (2, 100)
        assert f["sample_stats/diverging"].shape == (2, 100)
        assert not np.any(f["sample_stats/diverging"][()])
        names = [n.decode() for n in f["summary/quantity"][()]]
        assert names == ["diffusivity", "sigma.u"]
        for stat in ("mean", "sd", "5%", "50%", "95%", "ess_bulk", "r_hat"):
            assert f[f"summary/{stat}"].shape == (len(names),)
        lo, mid, hi = (f[f"predictive/u/{q}"][()] for q in ("5%", "50%", "95%"))
        assert np.all(lo <= mid) and np.all(mid <= hi) and lo.shape == (*f["predictive/time"].shape, 16)
        diffusivity = f["posterior/diffusivity"][()]
    lo, hi = np.quantile(diffusivity, [0.05, 0.95])
    assert lo < 0.35 < hi, (lo, hi)
    import arviz as az

    exported = az.from_netcdf("post.nc")
    np.testing.assert_array_equal(np.asarray(exported.posterior["diffusivity"]), diffusivity)
    # `sim plot` draws it: traces, pair plot, predictive bands over the data.
    from ..sim.test_examples import plot

    plot("post.h5", capsys)


@pytest.mark.slow
def test_sim_infer_cli_on_lynx_hare(tmp_cwd, capsys):
    # The README's `sim infer experiments/lynx_hare.toml` (short chains) and `sim plot` of
    # its posterior.
    code = None
    with pytest.raises(SystemExit) as info:
        main(["infer", str(EXPERIMENTS / "lynx_hare.toml"), "-o", "post.h5", "--chains", "2", "--warmup", "40", "--samples", "20", "--quiet", "--arviz", "post.nc"])
        raise SystemExit(0)
    code = info.value.code
    out = capsys.readouterr().out
    assert code == 0
    for word in ("alpha", "initial.prey", "sigma.prey", "ess_bulk", "r_hat", "divergences"):
        assert word in out
    with h5py.File("post.h5") as f:
        assert f.attrs["format"] == "simjax.posterior"
        assert f["posterior/alpha"].shape == (2, 20)
        assert f["sample_stats/diverging"].shape == (2, 20)
        names = [n.decode() for n in f["summary/quantity"][()]]
        assert "alpha" in names and "initial.predator" in names
        for stat in ("mean", "sd", "5%", "50%", "95%", "ess_bulk", "r_hat"):
            assert f[f"summary/{stat}"].shape == (len(names),)
        lo, mid, hi = (f[f"predictive/prey/{q}"][()] for q in ("5%", "50%", "95%"))
        assert np.all(lo <= mid) and np.all(mid <= hi) and lo.shape == f["predictive/time"].shape
        # The posterior mean of alpha sits where the Stan case study puts it (0.55 +- 0.065).
        assert abs(float(np.mean(f["posterior/alpha"][()])) - 0.55) < 0.15
        alpha = f["posterior/alpha"][()]
    import arviz as az

    exported = az.from_netcdf("post.nc")
    np.testing.assert_array_equal(np.asarray(exported.posterior["alpha"]), alpha)
    # `sim plot` draws it: traces, pair plot, predictive bands over the data.
    from ..sim.test_examples import plot

    plot("post.h5", capsys)


BAD_PRIORS = {
    "unknown_parameter": ('alfa = { dist = "normal", loc = 0.5, scale = 0.1 }', "Perhaps you meant 'alpha'"),
    "unknown_distribution": ('alpha = { dist = "lognormale", loc = 0.5, scale = 0.1 }', "Perhaps you meant 'lognormal'"),
    "negative_scale": ('alpha = { dist = "lognormal", loc = 0.5, scale = -0.1 }', "infer.priors.alpha.scale"),
    "missing_argument": ('alpha = { dist = "lognormal", loc = 0.5 }', "infer.priors.alpha.scale"),
    "unknown_argument": ('alpha = { dist = "lognormal", loc = 0.5, scale = 0.1, sd = 1.0 }', "infer.priors.alpha.sd"),
    "not_a_number": ('alpha = { dist = "lognormal", loc = "half", scale = 0.1 }', "infer.priors.alpha.loc"),
    "missing_dist": ("alpha = { loc = 0.5, scale = 0.1 }", "infer.priors.alpha.dist"),
    "negative_support": ('alpha = { dist = "normal", loc = 0.5, scale = 0.1 }', "must be positive"),
    "uniform_reversed": ('alpha = { dist = "uniform", low = 1.0, high = 0.5 }', "infer.priors.alpha.high"),
    "unknown_initial": ('"initial.pray" = { dist = "lognormal", loc = 3.0, scale = 1.0 }', "Perhaps you meant 'prey'"),
}


@pytest.mark.parametrize("case", sorted(BAD_PRIORS))
def test_bad_priors_one_line_exit_2(case, tmp_cwd, capsys):
    prior, fragment = BAD_PRIORS[case]
    write_obs(tmp_cwd / "obs.h5", 30.0 + YEARS, 5.0 + YEARS)
    text = CONFIG.split("[infer.priors]")[0] + "[infer.priors]\n" + prior + "\n"
    (tmp_cwd / "c.toml").write_text(text)
    before = sorted(os.listdir(tmp_cwd))
    with pytest.raises(SystemExit) as info:
        main(["infer", "c.toml", "--quiet"])
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert fragment in err and "c.toml" in err
    assert sorted(os.listdir(tmp_cwd)) == before


@pytest.mark.parametrize(
    "noise, fragment",
    [
        ('model = "poisson"\nsigma = { dist = "halfnormal", scale = 1.0 }', "no sigma"),
        ('model = "gaussian"', "infer.noise.model"),
        ('model = "normal"\nsigma = { dist = "normal", loc = 0.0, scale = 1.0 }', "must be positive"),
    ],
)
def test_bad_noise_models(noise, fragment, tmp_cwd, capsys):
    write_obs(tmp_cwd / "obs.h5", 30.0 + YEARS, 5.0 + YEARS)
    text = CONFIG.split("[infer.noise]")[0] + "[infer.noise]\n" + noise + "\n"
    (tmp_cwd / "c.toml").write_text(text)
    with pytest.raises(SystemExit) as info:
        main(["infer", "c.toml", "--quiet"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and fragment in err and len(err.strip().splitlines()) == 1


def test_init_from_must_be_a_fit_file(tmp_cwd, capsys):
    write_obs(tmp_cwd / "obs.h5", 30.0 + YEARS, 5.0 + YEARS)
    (tmp_cwd / "c.toml").write_text(CONFIG)
    with pytest.raises(SystemExit) as info:
        main(["infer", "c.toml", "--quiet", "--init-from", "obs.h5"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "expected a fit file" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as info:
        main(["infer", "c.toml", "--quiet", "--init-from", "missing.h5"])
    assert info.value.code == 2 and "--init-from" in capsys.readouterr().err
