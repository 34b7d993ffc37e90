"""The reprs of inference results: one short line naming each estimate with its value and
how the work ended, never the config text, the data or the predictions."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from inference import FitResult, PosteriorResult
from inference._data import Observations
from inference._fit_rdf import RdfFitResult
from inference._petab_bayes import PetabPosterior
from inference._petab_fit import PetabFit
from inference._profile import THRESHOLD, ProfileResult, profile

# A resolved config as long as a real one: none of it belongs in a repr.
CONFIG = "\n".join(f"[section{i}]\nkey = {i}.5" for i in range(200))
DATA = Observations(Path("data.h5"), np.arange(21.0), {"prey": np.ones(21)}, {})
ESTIMATE = {"alpha": 0.552301234, "beta": 0.0279871, "initial.prey": 31.25}


def g6(value) -> str:
    return format(float(value), ".6g")


def short(text: str) -> None:
    assert "\n" not in text and len(text) < 400, text
    assert "section1" not in text and "config" not in text, text


def test_a_fit_shows_each_estimate_its_final_loss_and_whether_it_converged():
    result = FitResult(
        model="lotka_volterra",
        config=CONFIG,
        names=list(ESTIMATE),
        estimate=ESTIMATE,
        stderr=dict.fromkeys(ESTIMATE, 0.01),
        covariance=np.eye(3),
        loss_history=np.array([90.0, 12.5, 3.14159265]),
        converged=True,
        message="converged",
        time=np.linspace(0, 20, 2001),
        prediction={"prey": np.ones(2001)},
        observations=DATA,
    )
    text = repr(result)
    short(text)
    assert text == (
        "FitResult(model='lotka_volterra', alpha=0.552301, beta=0.0279871, initial.prey=31.25, "
        "loss=3.14159, converged=True)"
    )
    result.converged, result.starts_objective = False, np.zeros(8)
    assert repr(result).endswith("loss=3.14159, converged=False, starts=8)")


def test_a_fit_of_many_parameters_names_the_first_and_counts_the_rest():
    names = [f"k{i}" for i in range(40)]
    result = PetabFit(
        problem="problem.yaml",
        model="big",
        names=names,
        estimate={n: float(i) for i, n in enumerate(names)},
        objective=-12.75,
        starts_objective=np.array([-12.75, -12.75, 3.0]),
        starts_estimate={n: np.zeros(3) for n in names},
        converged=np.array([True, True, False]),
        message="",
        reached_best=2,
    )
    text = repr(result)
    short(text)
    assert text.startswith("PetabFit(problem='problem.yaml', k0=0, k1=1, ")
    assert "k11=11, +28 more, objective=-12.75, starts=3, converged=2/3, reached_best=2/3)" in text
    assert "k12" not in text


def test_a_posterior_shows_mean_and_sd_of_each_quantity_and_its_diagnostics():
    rng = np.random.default_rng(0)
    summary = {
        name: {"mean": m, "sd": 0.1 * m, "5%": 0, "50%": 0, "95%": 0, "ess_bulk": 900.0, "r_hat": r}
        for (name, m), r in zip(ESTIMATE.items(), (1.001, 1.02, 1.004), strict=True)
    }
    diverging = rng.random((4, 500)) < 0.002
    result = PosteriorResult(
        model="lotka_volterra",
        config=CONFIG,
        seed=0,
        posterior={n: rng.random((4, 500)) for n in ESTIMATE},
        diverging=diverging,
        summary=summary,
        time=np.linspace(0, 20, 2001),
        predictive={},
        observations=DATA,
    )
    text = repr(result)
    short(text)
    means = ", ".join(f"{n}={g6(m)}±{g6(0.1 * m)}" for n, m in ESTIMATE.items())
    assert text == (
        f"PosteriorResult(model='lotka_volterra', chains=4, draws=500, {means}, "
        f"divergences={int(diverging.sum())}, max_r_hat=1.02)"
    )
    petab = PetabPosterior("p.yaml", "m", 0, result.posterior, diverging, summary)
    assert repr(petab).startswith("PetabPosterior(problem='p.yaml', model='m', chains=4, draws=500")


def test_a_profile_shows_each_estimate_with_its_interval():
    # f(x) = |x - mu|^2 / 2 / s^2: each 95% interval is mu -+ 1.96 s (closed), and a
    # parameter with no curvature stays under the threshold to its bounds (open)
    mu, s = np.array([0.3, -1.2]), np.array([0.1, 0.5])
    f = lambda x: 0.5 * jnp.sum(((x - mu) / s) ** 2)
    names = ["a", "b"]
    profiles = profile(
        jax.value_and_grad(f), mu, 0.0, np.full(2, -10.0), np.full(2, 10.0), names, names,
        lambda x: np.asarray(x),
    )  # fmt: skip
    result = ProfileResult(
        CONFIG, "gauss", names, dict(zip(names, mu, strict=True)), 0.0, profiles, THRESHOLD
    )
    text = repr(result)
    short(text)
    intervals = ", ".join(
        f"{n}={g6(m)} in [{g6(profiles[n]['lower'])}, {g6(profiles[n]['upper'])}]"
        for n, m in zip(names, mu, strict=True)
    )
    assert text == f"ProfileResult(model='gauss', objective=0, {intervals})"
    z = np.sqrt(2 * THRESHOLD)
    assert abs(profiles["a"]["lower"] - (0.3 - z * 0.1)) < 2e-3  # (the numbers are the interval)
    profiles["b"]["upper"] = np.nan
    assert "b=-1.2 in [" in repr(result) and ", open])" in repr(result)


def test_an_rdf_fit_shows_its_estimates_loss_and_convergence():
    arrays = {k: np.zeros(3) for k in ("loss_stderr", "ess", "r", "target", "start", "fitted")}
    result = RdfFitResult(
        model="lennard_jones",
        config=CONFIG,
        names=["epsilon", "sigma"],
        estimate={"epsilon": 1.0125, "sigma": 0.99},
        stderr={"epsilon": np.nan, "sigma": np.nan},
        loss_history=np.array([2.0, 0.5]),
        path={},
        aim={},
        converged=False,
        message="max steps",
        frames=100,
        **arrays,
    )
    text = repr(result)
    short(text)
    assert text == (
        "RdfFitResult(model='lennard_jones', epsilon=1.0125, sigma=0.99, loss=0.5, converged=False)"
    )


def test_a_training_shows_its_size_steps_and_final_loss_not_its_weights():
    from inference import TrainResult
    from physics.ode import NeuralOde

    model = NeuralOde(state_names=("x", "y"), width=16, depth=2)
    params = model.default_params()
    size = sum(int(np.size(leaf)) for leaf in jax.tree.leaves(params))
    assert size > 100
    result = TrainResult(model, params, np.array([1.0, 0.25, 0.0625]), 12.34)
    text = repr(result)
    short(text)
    assert text == (
        f"TrainResult(model={model.name!r}, parameters={size}, steps=3, loss=0.0625, seconds=12.3)"
    )
