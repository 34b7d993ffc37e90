"""PEtab problems: objectives against the reference log-likelihoods of the benchmark
collection, gradients against finite differences, bad tables as one-line errors."""

from pathlib import Path

import jax
import numpy as np
import pytest

from inference._petab import PetabError, _negative_log_likelihood, load_petab

DATA = Path(__file__).resolve().parents[1] / "data" / "petab"

# Log-likelihoods at the nominal parameters, as AMICI's tests keep them
# (AMICI-dev/AMICI, tests/benchmark_models/benchmark_models.yaml: "llh").
REFERENCE_LLH = {
    "Boehm_JProteomeRes2014": -138.22199693517703,
    "Brannmark_JBC2010": -141.889113770537,
    "Borghans_BiophysChem1997": 83.3237191357272,
    "Fujita_SciSignal2010": 53.08377736998929,
}
DEFAULT = ("Boehm_JProteomeRes2014",)


def problem_file(name: str) -> Path:
    return DATA / name / f"{name}.yaml"


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in DEFAULT else pytest.mark.slow) for n in REFERENCE_LLH])
def test_the_objective_at_the_nominal_parameters_is_the_reference(name):
    problem = load_petab(problem_file(name))
    value = float(jax.jit(problem.objective)(problem.nominal()))
    assert abs(-value - REFERENCE_LLH[name]) < 1e-3, (value, REFERENCE_LLH[name])


def test_the_noise_models_are_the_densities_of_the_data():
    """Each PEtab noise model is a normalised density of the untransformed measurement:
    its integral over y is 1 (a check independent of the formulas' derivation)."""
    from scipy.integrate import quad

    for transformation in ("lin", "log", "log10"):
        for distribution in ("normal", "laplace"):
            h, sigma = 2.0, 0.3 if transformation != "lin" else 0.7
            density = lambda y: float(np.exp(-_negative_log_likelihood(y, h, sigma, transformation, distribution)))  # noqa: E731
            # (pieces a decade wide for the transformed ones, whose tails reach far)
            edges = [-10.0, h, 30.0] if transformation == "lin" else [1e-12, *np.geomspace(1e-9, 1e9, 19)]
            total = sum(quad(density, a, b, limit=400)[0] for a, b in zip(edges[:-1], edges[1:]))
            assert abs(total - 1.0) < 1e-6, (transformation, distribution, total)


def test_the_gradient_of_the_objective_matches_finite_differences():
    problem = load_petab(problem_file("Boehm_JProteomeRes2014"))
    objective = jax.jit(problem.objective)
    x = problem.nominal()
    gradient = np.asarray(jax.jit(jax.grad(problem.objective))(x))
    for k in range(len(x)):
        e = np.zeros_like(x)
        e[k] = 1e-5
        central = (float(objective(x + e)) - float(objective(x - e))) / 2e-5
        assert abs(gradient[k] - central) <= 1e-4 * max(1.0, abs(central)), (problem.estimated[k], gradient[k], central)
