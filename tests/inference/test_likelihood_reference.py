"""Priors, noise models and weights against SciPy's densities, point by point: the
priors of `[infer]` configs and of PEtab parameter tables (on every parameter scale,
with the change of variables where a value is sampled on a log scale), the noise models
of configs and of PEtab observables (the negative log-likelihood a fit minimises and the
log density NUTS samples), and the weights of `[fit]` in every loss that takes them.

The models are ramps, x(t) = x0 + k t (a constant derivative, which every solver
integrates exactly), so each residual is computed here by hand."""

import copy
import math

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density, potential_energy
from scipy import stats

import sim
from inference import build_bayes_model, build_problem
from inference._petab import load_petab
from inference._petab_bayes import numpyro_model
from inference._petab_problem import PetabParameter, _negative_log_prior
from inference._priors import check_prior, make_distribution
from solvers import OdeSolver

# ----------------------------------------------------------------------------- config priors

# (spec, the SciPy distribution of the same density, points to evaluate it at)
CONFIG_PRIORS = [
    ({"dist": "normal", "loc": -0.3, "scale": 1.7}, stats.norm(-0.3, 1.7), [-4.0, -0.3, 0.2, 5.0]),
    (
        {"dist": "lognormal", "loc": 0.4, "scale": 0.6},
        stats.lognorm(0.6, scale=math.exp(0.4)),
        [0.05, 1.0, 1.49, 7.0],
    ),
    (
        {"dist": "truncated_normal", "loc": 1.0, "scale": 2.0, "low": 0.0},
        stats.truncnorm(-0.5, np.inf, 1.0, 2.0),
        [0.01, 1.0, 3.0, 9.0],
    ),
    (
        {"dist": "truncated_normal", "loc": 0.0, "scale": 1.0, "low": -1.0, "high": 2.0},
        stats.truncnorm(-1.0, 2.0, 0.0, 1.0),
        [-0.9, 0.0, 1.9],
    ),
    ({"dist": "halfnormal", "scale": 0.8}, stats.halfnorm(scale=0.8), [0.01, 0.5, 3.0]),
    ({"dist": "uniform", "low": -1.5, "high": 2.5}, stats.uniform(-1.5, 4.0), [-1.4, 0.0, 2.4]),
    ({"dist": "exponential", "rate": 2.5}, stats.expon(scale=1 / 2.5), [0.01, 0.4, 3.0]),
    (
        {"dist": "gamma", "concentration": 3.0, "rate": 1.5},
        stats.gamma(3.0, scale=1 / 1.5),
        [0.1, 2.0, 6.0],
    ),
    (
        {"dist": "beta", "concentration1": 2.0, "concentration0": 5.0},
        stats.beta(2.0, 5.0),
        [0.05, 0.3, 0.9],
    ),
    ({"dist": "cauchy", "loc": 1.0, "scale": 0.5}, stats.cauchy(1.0, 0.5), [-20.0, 1.0, 1.7]),
    ({"dist": "halfcauchy", "scale": 2.0}, stats.halfcauchy(scale=2.0), [0.01, 2.0, 40.0]),
    (
        {"dist": "student_t", "df": 3.0, "loc": -1.0, "scale": 0.7},
        stats.t(3.0, -1.0, 0.7),
        [-8.0, -1.0, 0.5],
    ),
]


@pytest.mark.parametrize(
    "spec, reference, points",
    CONFIG_PRIORS,
    ids=[f"{s['dist']}{i}" for i, (s, _, _) in enumerate(CONFIG_PRIORS)],
)
def test_every_config_prior_is_scipy_s_density_at_every_point(spec, reference, points):
    # make_distribution(check_prior(spec)).log_prob against scipy.stats' logpdf of the same
    # parameterisation: a swapped argument, a rate read as a scale, a lost log fails.
    checked = check_prior(None, "infer.priors.k", {k: v for k, v in spec.items()})
    prior = make_distribution(checked)
    with jax.numpy_dtype_promotion("standard"):  # (as `sim infer` samples)
        got = np.asarray(prior.log_prob(jnp.asarray(points, dtype=float)))
    np.testing.assert_allclose(got, reference.logpdf(points), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- config models

RAMP = """
[model]
name = "ramp"
[model.states]
x = "k"
[model.parameters]
k = {{ value = 0.5, positive = true }}
[initial]
x = 1.0
[solver]
rtol = 1e-10
atol = 1e-12
[data]
file = "obs.h5"
time = "/t"
{data}
{rest}
"""
TIMES = np.array([0.5, 1.0, 2.0, 3.5])
Y = np.array([1.3, 1.4, 2.2, 2.6])
SIGMA = np.array([0.2, 0.3, 0.25, 0.4])
K = 0.45


def _ramp(k=K):
    return 1.0 + k * TIMES


def _config(tmp_path, data, rest):
    with h5py.File(tmp_path / "obs.h5", "w") as f:
        f["t"], f["x"], f["sx"] = TIMES, Y, SIGMA
    (tmp_path / "c.toml").write_text(RAMP.format(data=data, rest=rest))
    return sim.load_config(tmp_path / "c.toml")


PLAIN = '[data.observables]\nx = "/x"\n[data.sigma]\nx = "/sx"'


def test_infer_noise_models_give_scipy_s_log_density_and_its_change_of_variables(tmp_path):
    # The NumPyro model of [infer] with normal and lognormal noise: its log density at
    # (k, sigma) against the priors' and the data's scipy.stats logpdf with the ramp's
    # prediction; its potential energy at unconstrained (log k, log sigma) against the
    # same plus the Jacobian log k + log sigma of the exp transforms. A lognormal built
    # from the prediction itself (not its log), or a lost Jacobian, fails.
    priors = '[infer.priors]\nk = { dist = "gamma", concentration = 2.0, rate = 3.0 }\n'
    sigma = 0.3
    for noise, density in (
        ("normal", lambda h: stats.norm.logpdf(Y, h, sigma)),
        ("lognormal", lambda h: stats.lognorm.logpdf(Y, sigma, scale=h)),
    ):
        rest = (
            priors
            + f'[infer.noise]\nmodel = "{noise}"\nsigma = {{ dist = "halfnormal", scale = 0.5 }}\n'
        )
        model, _, _ = build_bayes_model(_config(tmp_path, '[data.observables]\nx = "/x"', rest))
        expected = (
            stats.gamma.logpdf(K, 2.0, scale=1 / 3.0)
            + stats.halfnorm.logpdf(sigma, scale=0.5)
            + density(_ramp()).sum()
        )
        with jax.numpy_dtype_promotion("standard"):
            got, _ = log_density(
                model, (), {}, {"k": jnp.asarray(K), "sigma.x": jnp.asarray(sigma)}
            )
            energy = potential_energy(model, (), {}, {"k": jnp.log(K), "sigma.x": jnp.log(sigma)})
        assert float(got) == pytest.approx(expected, rel=1e-10, abs=1e-10), noise
        assert float(energy) == pytest.approx(
            -(expected + math.log(K) + math.log(sigma)), rel=1e-10, abs=1e-10
        ), noise


def test_observation_models_give_the_fit_s_nll_and_the_posterior_s_density(tmp_path):
    # Four observables of one ramp, one per noise model (normal, Laplace, lognormal,
    # log10-normal): the fit's per-observation terms and its loss, and the NumPyro log
    # density of `sim infer` with a lognormal prior on k, against scipy.stats
    # (log10-normal: the normal density of log10 y, over y: minus log(y ln 10)).
    obs = (
        "[data.observables]\n"
        'x = { path = "/x", noise = "normal", sigma = 0.2 }\n'
        'a = { path = "/x", formula = "x", noise = "laplace", sigma = 0.3 }\n'
        'b = { path = "/x", formula = "x", noise = "lognormal", sigma = 0.15 }\n'
        'c = { path = "/x", formula = "x", noise = "log10-normal", sigma = 0.05 }\n'
    )
    h = _ramp()
    nll = np.stack(
        [
            -stats.norm.logpdf(Y, h, 0.2),
            -stats.laplace.logpdf(Y, h, 0.3),
            -stats.lognorm.logpdf(Y, 0.15, scale=h),
            -(stats.norm.logpdf(np.log10(Y), np.log10(h), 0.05) - np.log(Y * np.log(10.0))),
        ]
    ).ravel()
    config = _config(
        tmp_path,
        obs,
        '[fit]\nfree = ["k"]\n[infer.priors]\nk = { dist = "lognormal", loc = -1.0, scale = 0.5 '
        "}\n",
    )
    problem, _, _, _ = build_problem(config)
    terms, loss = problem.residuals_at(
        {"k": jnp.asarray(K)}
    )  # (Laplace: no least squares, the terms)
    np.testing.assert_allclose(np.asarray(terms), nll, rtol=1e-10)
    assert float(loss) == pytest.approx(nll.sum(), rel=1e-10)
    model, _, _ = build_bayes_model(config)
    with jax.numpy_dtype_promotion("standard"):
        got, _ = log_density(model, (), {}, {"k": jnp.asarray(K)})
    assert float(got) == pytest.approx(
        stats.lognorm.logpdf(K, 0.5, scale=math.exp(-1.0)) - nll.sum(), rel=1e-10
    )


# ----------------------------------------------------------------------------- weights


@pytest.mark.parametrize("loss", ["normal", "lognormal", "mse"])
def test_weights_scale_the_squared_residuals_of_each_loss(tmp_path, loss):
    # [fit] weights = { x = 4 } and the sigma dataset: the residual vector is
    # sqrt(4) (y - h) / sigma (on logarithms for lognormal; / sqrt(n) for mse) and the
    # loss half the sum of 4 (...)^2, against the hand-computed ramp residuals.
    config = _config(
        tmp_path, PLAIN, f'[fit]\nfree = ["k"]\nloss = "{loss}"\nweights = {{ x = 4.0 }}\n'
    )
    problem, _, _, _ = build_problem(config)
    r, value = problem.residuals_at({"k": jnp.asarray(K)})
    h = _ramp()
    base = {
        "normal": (Y - h) / SIGMA,
        "lognormal": (np.log(Y) - np.log(h)) / SIGMA,
        "mse": (Y - h) / math.sqrt(Y.size),
    }[loss]
    np.testing.assert_allclose(np.asarray(r), 2.0 * base, rtol=1e-10)
    assert float(value) == pytest.approx(0.5 * np.sum(4.0 * base**2), rel=1e-10)


def test_weights_scale_the_residuals_and_the_nll_of_observation_models(tmp_path):
    # Normal noise with a number sigma (least squares): residuals sqrt(w) (y - h) / sigma,
    # loss half the sum of w (...)^2; Laplace noise: each term w times the Laplace
    # -logpdf, loss their sum. A weight applied squared, or not at all, fails.
    normal = '[data.observables]\nx = { path = "/x", noise = "normal", sigma = 0.2 }'
    problem, _, _, _ = build_problem(
        _config(tmp_path, normal, '[fit]\nfree = ["k"]\nweights = { x = 4.0 }\n')
    )
    assert problem.least_squares
    r, value = problem.residuals_at({"k": jnp.asarray(K)})
    np.testing.assert_allclose(np.asarray(r), 2.0 * (Y - _ramp()) / 0.2, rtol=1e-10)
    assert float(value) == pytest.approx(0.5 * np.sum(4.0 * ((Y - _ramp()) / 0.2) ** 2), rel=1e-10)
    laplace = '[data.observables]\nx = { path = "/x", noise = "laplace", sigma = 0.3 }'
    problem, _, _, _ = build_problem(
        _config(tmp_path, laplace, '[fit]\nfree = ["k"]\nweights = { x = 3.0 }\n')
    )
    terms, value = problem.residuals_at({"k": jnp.asarray(K)})
    np.testing.assert_allclose(
        np.asarray(terms), -3.0 * stats.laplace.logpdf(Y, _ramp(), 0.3), rtol=1e-10
    )
    assert float(value) == pytest.approx(
        -3.0 * stats.laplace.logpdf(Y, _ramp(), 0.3).sum(), rel=1e-10
    )


# ----------------------------------------------------------------------------- PEtab priors

SCALE_OF = {"lin": lambda v: v, "log": np.log, "log10": np.log10}


def _petab_reference(kind, a, b, v, x):
    """PEtab v1's objective priors as log densities: parameterScale* of the value x on
    the parameter's scale, the others of the linear value v (logNormal: log v normal,
    logLaplace: log v Laplace, both densities of v)."""
    if kind == "parameterScaleNormal":
        return stats.norm.logpdf(x, a, b)
    if kind == "parameterScaleLaplace":
        return stats.laplace.logpdf(x, a, b)
    if kind == "parameterScaleUniform":
        return stats.uniform.logpdf(x, a, b - a)
    if kind == "normal":
        return stats.norm.logpdf(v, a, b)
    if kind == "laplace":
        return stats.laplace.logpdf(v, a, b)
    if kind == "uniform":
        return stats.uniform.logpdf(v, a, b - a)
    if kind == "logNormal":
        return stats.lognorm.logpdf(v, b, scale=math.exp(a))
    return stats.laplace.logpdf(np.log(v), a, b) - np.log(v)  # logLaplace


PETAB_PRIORS = {
    "normal": (1.5, 0.8),
    "laplace": (2.0, 0.5),
    "uniform": (0.5, 4.0),
    "logNormal": (0.3, 0.7),
    "logLaplace": (0.6, 0.4),
    "parameterScaleNormal": (0.2, 0.6),
    "parameterScaleLaplace": (-0.1, 0.3),
    "parameterScaleUniform": (-1.0, 1.0),
}
VALUES = [0.6, 1.3, 2.7]  # (linear values, inside every uniform prior above)


@pytest.mark.parametrize("scale", ["lin", "log", "log10"])
@pytest.mark.parametrize("kind", list(PETAB_PRIORS))
def test_every_petab_prior_on_every_scale_is_scipy_s_density(kind, scale):
    # The objective prior a PEtab fit adds (-log density of the linear value, or of the
    # scaled one for parameterScale*) against scipy.stats at values on each scale.
    a, b = PETAB_PRIORS[kind]
    p = PetabParameter("k", scale, 1e-3, 1e3, 1.0, True, kind, (a, b))
    for v in VALUES:
        x = float(SCALE_OF[scale](v))
        if kind == "parameterScaleUniform" and not a <= x <= b:
            continue
        got = float(_negative_log_prior(jnp.asarray(x), p))
        assert got == pytest.approx(-_petab_reference(kind, a, b, v, x), rel=1e-10, abs=1e-12), (
            kind,
            scale,
            v,
        )
    if kind.endswith("niform"):  # (outside the uniform's interval: no density)
        outside = b + 1.0 if kind.startswith("parameterScale") else float(SCALE_OF[scale](b + 1.0))
        assert float(_negative_log_prior(jnp.asarray(outside), p)) == math.inf


# ----------------------------------------------------------------------------- PEtab problems

SBML = """<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">
  <model id="ramp">
    <listOfCompartments><compartment id="c" size="1" constant="true"/></listOfCompartments>
    <listOfSpecies>
      <species id="A" compartment="c" initialAmount="1" hasOnlySubstanceUnits="true" boundaryCondition="false" constant="false"/>
    </listOfSpecies>
    <listOfParameters><parameter id="k" value="0.5" constant="true"/><parameter id="A0" value="1" constant="true"/></listOfParameters>
    <listOfInitialAssignments>
      <initialAssignment symbol="A"><math xmlns="http://www.w3.org/1998/Math/MathML"><ci>A0</ci></math></initialAssignment>
    </listOfInitialAssignments>
    <listOfRules>
      <rateRule variable="A"><math xmlns="http://www.w3.org/1998/Math/MathML"><ci>k</ci></math></rateRule>
    </listOfRules>
  </model>
</sbml>
"""
# observable -> (transformation, distribution, sigma)
PETAB_NOISE = {
    "o_lin_n": ("lin", "normal", 0.2),
    "o_log_n": ("log", "normal", 0.1),
    "o_l10_n": ("log10", "normal", 0.05),
    "o_lin_l": ("lin", "laplace", 0.3),
    "o_log_l": ("log", "laplace", 0.15),
    "o_l10_l": ("log10", "laplace", 0.07),
}
PETAB_T = np.array([0.0, 1.0, 2.5])
PETAB_Y = np.array([2.1, 2.8, 3.9])


@pytest.fixture(scope="module")
def ramp_petab(tmp_path_factory):
    """A(t) = A0 + k t observed through each of PEtab's six noise models; k on a log10
    scale with a logNormal prior, A0 on a log scale with a parameterScaleNormal one."""
    folder = tmp_path_factory.mktemp("ramp")
    (folder / "model.xml").write_text(SBML)
    (folder / "conditions.tsv").write_text("conditionId\nc0\n")
    rows = "".join(f"{o}\tA\t{s}\t{tr}\t{d}\n" for o, (tr, d, s) in PETAB_NOISE.items())
    (folder / "observables.tsv").write_text(
        "observableId\tobservableFormula\tnoiseFormula\tobservableTransformation\t"
        "noiseDistribution\n" + rows
    )
    rows = "".join(
        f"{o}\tc0\t{t!r}\t{y!r}\n"
        for o in PETAB_NOISE
        for t, y in zip(PETAB_T.tolist(), PETAB_Y.tolist(), strict=False)
    )
    (folder / "measurements.tsv").write_text(
        "observableId\tsimulationConditionId\ttime\tmeasurement\n" + rows
    )
    (folder / "parameters.tsv").write_text(
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\t"
        "objectivePriorType\tobjectivePriorParameters\n"
        "k\tlog10\t0.01\t10\t0.5\t1\tlogNormal\t-0.5;0.8\nA0\tlog\t0.1\t10\t2\t1\t"
        "parameterScaleNormal\t0.5;0.3\n"
    )
    (folder / "ramp.yaml").write_text(
        "format_version: 1\nparameter_file: parameters.tsv\nproblems:\n- sbml_files: [model.xml]\n "
        " condition_files: [conditions.tsv]\n"
        "  measurement_files: [measurements.tsv]\n  observable_files: [observables.tsv]\n"
    )
    # (explicit steps: the ramp is not stiff, and PEtab's default implicit solver took most
    # of the test in tracing and compiling)
    return load_petab(
        folder / "ramp.yaml", OdeSolver(method="tsit5", rtol=1e-10, atol=1e-12, throw=False)
    )


def _petab_nll(k, a0):
    """-log p(y | h) of every measurement, scipy.stats on each transformed scale with the
    Jacobian of the transformation of y (the PEtab noise models)."""
    h = a0 + k * PETAB_T
    out = []
    for transformation, distribution, s in PETAB_NOISE.values():
        ref = stats.norm if distribution == "normal" else stats.laplace
        t = SCALE_OF[transformation]
        jacobian = {"lin": 0.0, "log": np.log(PETAB_Y), "log10": np.log(PETAB_Y * np.log(10.0))}[
            transformation
        ]
        out.append(-(ref.logpdf(t(PETAB_Y), t(h), s) - jacobian))
    return np.concatenate(out)


def test_petab_noise_models_priors_and_posterior_are_scipy_s(ramp_petab):
    # The objective's per-measurement terms against scipy.stats on the hand-computed
    # ramp; the priors a fit adds (densities of the linear k, of log A0); NumPyro's log
    # density of the posterior at x = (log10 k, log A0): the density of x, so the logNormal
    # prior of k gains the Jacobian log(k ln 10), and the parameterScale one none.
    problem = ramp_petab
    k, a0 = 0.6, 2.2
    x = jnp.asarray([math.log10(k), math.log(a0)])
    nll = _petab_nll(k, a0)

    terms_of = jax.jit(
        problem.residual_terms
    )  # (compiled once; NumPyro's model calls the objective)
    terms = terms_of(x)
    fast = copy.copy(problem)

    def objective(x, solver=None):
        # (under the strict promotion it was traced with, not the standard one NumPyro's
        # model runs under, which is part of jit's cache key and would trace and compile
        # it again)
        with jax.numpy_dtype_promotion("strict"):
            return jnp.sum(terms_of(x))

    fast.objective = objective
    with jax.numpy_dtype_promotion("standard"):
        prior = problem.prior(x)
        density, _ = log_density(numpyro_model(fast), (), {}, {"x": x})
    np.testing.assert_allclose(np.asarray(terms), nll, rtol=1e-9)
    log_prior_k = stats.lognorm.logpdf(k, 0.8, scale=math.exp(-0.5))
    log_prior_a0 = stats.norm.logpdf(math.log(a0), 0.5, 0.3)
    assert float(prior) == pytest.approx(-(log_prior_k + log_prior_a0), rel=1e-10)
    box = -math.log(math.log10(10) - math.log10(0.01)) - math.log(
        math.log(10) - math.log(0.1)
    )  # (the bounds' uniform)
    expected = -nll.sum() + log_prior_k + math.log(k * math.log(10.0)) + log_prior_a0 + box
    assert float(density) == pytest.approx(expected, rel=1e-9)


def test_r_hat_and_bulk_ess_are_arviz_s_and_need_four_draws_a_chain():
    # Rank-normalised split R-hat (bulk and folded) and bulk ESS (Vehtari et al. 2021)
    # against ArviZ's implementation on autocorrelated chains; with fewer than 4 draws a
    # chain neither is estimable (NaN), from 4 on both are.
    import arviz as az

    from inference._diagnostics import ess_bulk, r_hat

    # (odd draw counts too: the chains are split before they are ranked, so the middle
    # draw takes no part. On 4 draws a chain the two ESS estimators' treatments of so
    # short a run part, so ESS is compared from 17 on.)
    rng = np.random.default_rng(0)
    for shape in ((4, 50), (2, 17), (3, 4)):
        draws = rng.standard_normal(shape).cumsum(axis=1) * 0.1 + rng.standard_normal(shape)
        assert r_hat(draws) == pytest.approx(float(az.rhat(draws, method="rank")), rel=1e-12), shape
        if shape[1] >= 17:
            assert ess_bulk(draws) == pytest.approx(
                float(az.ess(draws, method="bulk")), rel=1e-12
            ), shape
    short = rng.standard_normal((4, 3))
    assert np.isnan(r_hat(short)) and np.isnan(ess_bulk(short))


def test_petab_prior_parameters_out_of_their_range_are_refused():
    # A uniform prior needs lower < upper (equal bounds too are no interval); every other
    # prior a positive scale; the rest are accepted as written.
    from inference._petab import PetabError
    from inference._petab_problem import _prior_of

    for kind, text in (
        ("uniform", "2;1"),
        ("parameterScaleUniform", "1;1"),
        ("normal", "0;0"),
        ("laplace", "0;-1"),
        ("logNormal", "1;-0.5"),
    ):
        with pytest.raises(PetabError, match="objectivePriorParameters"):
            _prior_of(
                {"objectivePriorType": kind, "objectivePriorParameters": text},
                "p.tsv, row 1",
                "lin",
            )
    for kind, text, expected in (("uniform", "1;2", (1.0, 2.0)), ("normal", "-3;0.5", (-3.0, 0.5))):
        assert _prior_of(
            {"objectivePriorType": kind, "objectivePriorParameters": text}, "p.tsv, row 1", "lin"
        ) == (kind, expected)
