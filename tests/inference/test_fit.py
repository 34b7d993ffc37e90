"""Calibration recovers known parameters with honest standard errors."""

from pathlib import Path

import h5py
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from inference import build_problem, fit
from solvers import OdeSolver

from ..helpers import cli, write_blowup

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
TRUE = {"alpha": 0.55, "beta": 0.028, "gamma": 0.80, "delta": 0.024}
TRUE_INITIAL = {"prey": 33.0, "predator": 6.0}
YEARS = np.arange(0.0, 21.0)
NOISE = 0.05  # 5% multiplicative noise


def at_truth(*free):
    """Overrides that hold every quantity but `free` at its true value."""
    fixed = [f"params.{k}={v}" for k, v in TRUE.items() if k not in free]
    return fixed + [f"initial.{k}={v}" for k, v in TRUE_INITIAL.items()]


def exact_lv(years):
    model = sim.get_model("lotka_volterra")
    traj = sim.simulate(
        model,
        TRUE,
        jnp.asarray(years),
        initial=TRUE_INITIAL,
        solver=OdeSolver(rtol=1e-12, atol=1e-12),
    )
    return np.asarray(traj.observables["prey"]), np.asarray(traj.observables["predator"])


def write_data(path, prey, predator, years=YEARS):
    with h5py.File(path, "w") as f:
        f["t"] = years
        f["prey"] = prey
        f["predator"] = predator
    return path


def lv_config(tmp_path, data, **fit):
    # The solver tolerances of experiments/lynx_hare.toml: in one process a fit of the same
    # free quantities, loss and optimiser reuses the compiled steps of
    # `sim fit experiments/lynx_hare.toml` (run by tests/test_readme.py), and the other way
    # round. (Measured: the noise-free fits below still land within 2e-9 of the truth.)
    fit = {"loss": "lognormal", **fit}
    fit_lines = "\n".join(f"{k} = {v!r}".replace("'", '"') for k, v in fit.items())
    text = f"""
[model]
name = "lotka_volterra"
[params]
alpha = 0.5
beta = 0.03
gamma = 0.7
delta = 0.02
[initial]
prey = 30.0
predator = 5.0
[solver]
rtol = 1e-8
atol = 1e-8
[data]
file = "{data.name}"
time = "/t"
[data.observables]
prey = "/prey"
predator = "/predator"
[fit]
free = ["alpha", "beta", "gamma", "delta", "initial.prey", "initial.predator"]
{fit_lines}
"""
    path = tmp_path / "fit.toml"
    path.write_text(text)
    return sim.load_config(path)


def noisy(rng):
    prey, predator = exact_lv(YEARS)
    return prey * np.exp(NOISE * rng.standard_normal(prey.shape)), predator * np.exp(
        NOISE * rng.standard_normal(predator.shape)
    )


def test_recovers_lotka_volterra_within_two_standard_errors_and_errors_match_spread(tmp_path):
    rng = np.random.default_rng(0)
    estimates, stderrs = [], []
    for i in range(12):
        data = write_data(tmp_path / f"d{i}.h5", *noisy(rng))
        result = fit(lv_config(tmp_path, data))
        assert result.converged, result.message
        estimates.append([result.estimate[k] for k in TRUE])
        stderrs.append([result.stderr[k] for k in TRUE])
        if i == 0:
            for k, v in TRUE.items():
                assert abs(result.estimate[k] - v) < 2 * result.stderr[k], (
                    k,
                    result.estimate[k],
                    result.stderr[k],
                )
    estimates, stderrs = np.array(estimates), np.array(stderrs)
    # Over repeated noisy data sets the mean reported standard error matches the actual
    # spread of the estimates (sample of 12: allow a factor 0.6 to 1.6).
    ratio = stderrs.mean(axis=0) / estimates.std(axis=0, ddof=1)
    assert np.all((ratio > 0.6) & (ratio < 1.6)), ratio
    # And the estimates scatter around the truth (no bias beyond the sampling error).
    bias = np.abs(estimates.mean(axis=0) - np.array(list(TRUE.values())))
    assert np.all(bias < 3 * estimates.std(axis=0, ddof=1) / np.sqrt(12) + 1e-12), bias


@pytest.mark.parametrize(
    "optimizer, extra",
    [
        pytest.param("bfgs", {}, marks=pytest.mark.slow),
        ("adam", {"max_steps": 600, "learning_rate": 0.02}),
    ],
)
def test_other_optimizers_reach_the_levenberg_marquardt_minimum(tmp_path, optimizer, extra):
    prey, predator = exact_lv(YEARS)
    data = write_data(tmp_path / "d.h5", prey, predator)
    config = lv_config(tmp_path, data, optimizer=optimizer, **extra)
    config = config.with_overrides(['fit.free=["alpha", "gamma"]', *at_truth("alpha", "gamma")])
    result = fit(config)
    # Noise-free data: the minimum is the truth for the free parameters.
    tol = 1e-6 if optimizer == "bfgs" else 2e-3
    assert abs(result.estimate["alpha"] - 0.55) / 0.55 < tol
    assert abs(result.estimate["gamma"] - 0.80) / 0.80 < tol
    assert result.loss_history[-1] < 1e-6 * result.loss_history[0]
    # (Adam too stops once the loss and the step are within the tolerances: on noise-free
    # data, before its max_steps)
    assert result.converged and result.message == "converged"
    assert len(result.loss_history) < 600


def test_an_adam_fit_stopped_by_max_steps_does_not_claim_convergence(tmp_path):
    prey, predator = exact_lv(YEARS)
    data = write_data(tmp_path / "d.h5", prey, predator)
    config = lv_config(tmp_path, data, optimizer="adam", max_steps=20, learning_rate=0.02)
    result = fit(
        config.with_overrides(['fit.free=["alpha", "gamma"]', *at_truth("alpha", "gamma")])
    )
    assert not result.converged and "max_steps (20)" in result.message
    assert len(result.loss_history) == 20 + 1


def test_missing_observations_are_skipped_and_bounds_respected(tmp_path):
    prey, predator = exact_lv(YEARS)
    prey = prey.copy()
    prey[[3, 7, 11]] = np.nan
    data = write_data(tmp_path / "d.h5", prey, predator)
    config = lv_config(tmp_path, data, loss="normal").with_overrides(
        ['fit.free=["alpha", "delta"]', "fit.bounds.alpha=[0.1, 0.9]", *at_truth("alpha", "delta")]
    )
    problem, start, obs, _ = build_problem(config)
    assert obs.count == 2 * len(YEARS) - 3
    result = fit(config)
    assert abs(result.estimate["alpha"] - 0.55) < 1e-6
    assert abs(result.estimate["delta"] - 0.024) < 1e-8


def log_misfits(result, prey, predator):
    """Sum of squared log residuals per observable of a fit to data at YEARS (its fitted
    prediction is on 201 points over [0, 20]: every 10th is a data year)."""
    fitted = {k: result.prediction[k][::10] for k in ("prey", "predator")}
    return {
        k: float(np.sum((np.log(y) - np.log(fitted[k])) ** 2))
        for k, y in (("prey", prey), ("predator", predator))
    }


def test_weights_scale_each_observables_share_of_the_loss(tmp_path):
    # fit.weights multiply each observable's squared residuals. Weighting the prey 10 times
    # must lower the prey's misfit and raise the predator's: at the two minima,
    # P(A) + Q(A) <= P(B) + Q(B) and 10 P(B) + Q(B) <= 10 P(A) + Q(A) give P(B) <= P(A),
    # Q(B) >= Q(A). (The fits of the test above: the same compiled steps.)
    prey, predator = noisy(np.random.default_rng(4))
    data = write_data(tmp_path / "d.h5", prey, predator)
    plain = fit(lv_config(tmp_path, data))
    weighted = fit(lv_config(tmp_path, data).with_overrides(["fit.weights.prey=10.0"]))
    a, b = log_misfits(plain, prey, predator), log_misfits(weighted, prey, predator)
    # The loss is half the weighted sum (measured: to 4e-16 relative, from the fitted
    # curves, solved again on the fine grid).
    assert plain.loss_history[-1] == pytest.approx(0.5 * (a["prey"] + a["predator"]), rel=1e-10)
    assert weighted.loss_history[-1] == pytest.approx(
        0.5 * (10 * b["prey"] + b["predator"]), rel=1e-10
    )
    # Measured: prey 0.0574 -> 0.0555, predator 0.0447 -> 0.0531 (a fit that ignored the
    # weights would give equal misfits, and fail the loss above).
    assert b["prey"] < a["prey"] and b["predator"] > a["predator"], (a, b)


# (with -m slow: a fit of three starts; by default tests/inference/test_multistart.py runs
# the config's starts on one device, two devices and a Dask cluster and checks they agree)
@pytest.mark.slow
def test_multistart_escapes_a_local_minimum(tmp_path):
    # From this start, Levenberg-Marquardt stalls in a local minimum (loss 8.01, against
    # 0.061 at the global one, where the fit from the config's usual start lands). Three
    # starts (the first at the config's values, two drawn around it by Latin hypercube
    # with fit.seed = 0) reach the global minimum: the result is the best start's.
    prey, predator = noisy(np.random.default_rng(3))
    data = write_data(tmp_path / "d.h5", prey, predator)
    far = ["params.alpha=0.35", "params.beta=0.06", "params.gamma=0.5", "params.delta=0.05"]
    best = fit(lv_config(tmp_path, data))
    stuck = fit(lv_config(tmp_path, data).with_overrides(far))
    assert stuck.loss_history[-1] > 100 * best.loss_history[-1], (
        stuck.loss_history[-1],
        best.loss_history[-1],
    )
    three = fit(lv_config(tmp_path, data, starts=3, seed=0).with_overrides(far))
    assert three.seed == 0
    assert three.loss_history[-1] == pytest.approx(best.loss_history[-1], rel=1e-9)
    for name, value in best.estimate.items():
        assert three.estimate[name] == pytest.approx(value, rel=1e-6), name
    # every start's end is kept: the best is the fit's, the stuck one is among them
    assert three.starts_objective.shape == (3,) and three.starts_objective.min() == pytest.approx(
        three.objective, rel=1e-12
    )
    assert three.starts_objective.max() > three.objective + 100
    assert set(three.starts_estimate) == set(best.estimate)
    record = sim.read(three.save(tmp_path / "three.h5"))
    np.testing.assert_array_equal(record["starts/objective"], three.starts_objective)
    # how many reached the best (within 0.1 in negative log-likelihood): fewer than 3 is
    # said, in the result, the file and a warning
    reached = int(np.sum(three.starts_objective <= three.objective + 0.1))
    assert three.reached_best == reached < 3 and record.attrs["reached_best"] == reached
    assert three.starts_summary == f"{reached} of 3 starts reached the best objective (within 0.1)"
    assert [w for w in three.warnings if f"only {reached} of 3 starts reached" in w]
    assert best.reached_best is None and best.starts_summary == ""


def test_fit_file_layout_and_time_offset(tmp_path):
    rng = np.random.default_rng(1)
    data = write_data(tmp_path / "d.h5", *noisy(rng), years=YEARS + 1900.0)
    config = lv_config(tmp_path, data).with_overrides(["data.time_offset=1900.0"])
    result = fit(config)
    path = result.save(tmp_path / "fit.h5")
    record = sim.read(path)
    assert record.format == "simjax.fit"
    for group in ("estimate", "stderr"):
        assert set(record[group]) == {
            "alpha",
            "beta",
            "gamma",
            "delta",
            "initial.prey",
            "initial.predator",
        }
    assert record.loss_history.ndim == 1 and record.loss_history[-1] <= record.loss_history[0]
    assert record.prediction["prey"].shape == record.time.shape
    assert record.time[0] == 0.0 and record.time[-1] == 20.0
    assert "initial.prey" in record.attrs["config"] or "prey = " in record.attrs["config"]
    # the same fit as an xarray Dataset
    ds = result.to_xarray()
    assert list(ds["parameter"].values) == result.names and ds["covariance"].dims == (
        "parameter",
        "parameter_2",
    )
    assert float(ds["estimate"].sel(parameter="beta")) == result.estimate["beta"]
    assert float(ds["stderr"].sel(parameter="initial.prey")) == result.stderr["initial.prey"]
    np.testing.assert_array_equal(ds["prediction_prey"], result.prediction["prey"])
    np.testing.assert_array_equal(ds["data_predator"], result.observations.values["predator"])
    np.testing.assert_array_equal(ds["data_time"], result.observations.time)
    assert ds.attrs["model"] == "lotka_volterra" and ds.sizes["iteration"] == len(
        result.loss_history
    )


# `sim fit experiments/lynx_hare.toml` from the command line, its table and its agreement
# with the Stan case study are checked by tests/test_readme.py (a README command).


@pytest.mark.parametrize("method", ["tsit5", pytest.param("kvaerno5", marks=pytest.mark.slow)])
def test_the_prediction_and_curves_of_one_solve_are_those_of_a_solve_each(tmp_path, method):
    # A fit's end solves once at the data's times and the fitted curve's together
    # (`Problem.predict_and_curves`): the steps of an ODE solve do not depend on its save
    # times, so each value is that of a solve of its own times. The lean core (tsit5)
    # and diffrax (kvaerno5); the curve's times fall between, beside and on the data's.
    data = write_data(tmp_path / "d.h5", np.full(YEARS.shape, 30.0), np.full(YEARS.shape, 5.0))
    problem, start, _, _ = build_problem(
        lv_config(tmp_path, data).with_overrides([f'solver.method="{method}"'])
    )
    x = {f.name: jnp.asarray(start[f.name], dtype=float) for f in problem.free}
    t = np.linspace(0.0, 20.0, 201)
    predicted, curves = problem.predict_and_curves(x, t)
    alone = problem.predict(x), problem.curves(x, t)
    for name in ("prey", "predator"):
        np.testing.assert_allclose(
            predicted[name], alone[0][name], rtol=1e-13, atol=0, err_msg=name
        )
        np.testing.assert_allclose(curves[name], alone[1][name], rtol=1e-13, atol=0, err_msg=name)
    assert predicted["prey"].shape == YEARS.shape and curves["prey"].shape == t.shape


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["bfgs", "adam"])
def test_a_model_with_events_fits_with_every_optimiser_or_is_refused_in_one_line(
    tmp_cwd, capsys, optimizer
):
    # The bouncing ball's restitution from its height: Levenberg-Marquardt fits it; BFGS
    # and Adam stopped with "internal error: ValueError: Reverse-mode differentiation
    # does not work for lax.while_loop ..." (exit 1).
    t = np.linspace(0.05, 1.5, 30)
    x = np.where(
        t < np.sqrt(2 / 9.81), 1.0 - 0.5 * 9.81 * t**2, np.nan
    )  # (the first fall only: known in closed form)
    with h5py.File(tmp_cwd / "ball.h5", "w") as f:
        f["t"], f["x"] = t, x
    text = (
        (EXPERIMENTS / "bouncing_ball.toml")
        .read_text()
        .replace("restitution = 0.8", "restitution = 0.7")
        .replace("t1 = 3.0", "t1 = 1.5")
    )
    (tmp_cwd / "ball.toml").write_text(
        text
        + f'\n[data]\nfile = "ball.h5"\ntime = "/t"\n[data.observables]\nx = {{ path = "/x", sigma '
        f"= 0.01 }}\n"
        f'[fit]\nfree = ["g"]\noptimizer = "{optimizer}"\nmax_steps = 20\n'
    )
    code, err = cli(["fit", "ball.toml", "-o", "fit.h5", "--quiet"], capsys)
    assert "internal error" not in err, err
    if code == 0:
        assert abs(sim.read("fit.h5")["estimate/g"] - 9.81) < 0.05
    else:
        assert code == 2 and len(err.strip().splitlines()) == 1 and "fit.optimizer" in err, err
        assert not (tmp_cwd / "fit.h5").exists()


def test_sim_infer_of_a_model_with_events_is_refused_in_one_line(tmp_cwd, capsys):
    # NUTS needs reverse-mode gradients, which the event loop does not have: before this
    # refusal the run stopped with an internal ValueError from JAX (exit 1).
    with h5py.File(tmp_cwd / "ball.h5", "w") as f:
        f["t"], f["x"] = (
            np.linspace(0.05, 0.4, 8),
            1.0 - 0.5 * 9.81 * np.linspace(0.05, 0.4, 8) ** 2,
        )
    text = (EXPERIMENTS / "bouncing_ball.toml").read_text().replace("t1 = 3.0", "t1 = 0.4")
    (tmp_cwd / "ball.toml").write_text(
        text + '\n[data]\nfile = "ball.h5"\ntime = "/t"\nobservables = { x = "/x" }\n'
        '[infer.priors]\ng = { dist = "uniform", low = 5.0, high = 15.0 }\n'
        '[infer.noise]\nsigma = { dist = "halfnormal", scale = 0.1 }\n'
    )
    code, err = cli(["infer", "ball.toml", "-o", "post.h5", "--quiet"], capsys)
    assert (
        code == 2
        and len(err.strip().splitlines()) == 1
        and "events" in err
        and "Traceback" not in err
    ), err
    assert not (tmp_cwd / "post.h5").exists()


def test_the_estimate_does_not_depend_on_where_levenberg_marquardt_stopped(tmp_path, monkeypatch):
    # Levenberg-Marquardt stops at fit.rtol; the Gauss-Newton polish after it goes on to
    # the minimum, where J^T r = 0 to rounding: a fit stopped early (rtol 1e-3) and one run
    # to the default 1e-8 report the same estimates and standard errors.
    import inference._fit

    data = write_data(tmp_path / "d.h5", *noisy(np.random.default_rng(3)))
    loose = lv_config(tmp_path, data, rtol=1e-3, atol=1e-3)
    tight = fit(lv_config(tmp_path, data))
    polished = fit(loose)
    assert polished.converged and len(polished.loss_history) < len(tight.loss_history)
    for k in tight.estimate:
        np.testing.assert_allclose(polished.estimate[k], tight.estimate[k], rtol=1e-10, err_msg=k)
        np.testing.assert_allclose(polished.stderr[k], tight.stderr[k], rtol=1e-9, err_msg=k)
    # Without the polish the early stop shows.
    monkeypatch.setattr(inference._fit, "gauss_newton_polish", lambda problem, x: x)
    raw = fit(loose)
    assert max(abs(raw.estimate[k] / tight.estimate[k] - 1) for k in tight.estimate) > 1e-6


# (a likelihood, whose value is not finite there, with -m slow)
@pytest.mark.parametrize("loss", ["mse", pytest.param("normal", marks=pytest.mark.slow)])
def test_a_fit_that_starts_where_the_model_cannot_be_solved_fails_in_one_line_for_every_loss(
    tmp_cwd, capsys, loss
):
    # y' = k y^2 from y = 1 blows up at t = 1 / k, before the last observation (t = 2)
    # for the start k = 1. The optimiser sees a constant stand-in residual there and stops
    # at once: with the mse loss the fit was written as converged (exit 0) with a NaN
    # prediction, with a likelihood it failed blaming sigma or the noise model.
    write_blowup(tmp_cwd, 1.0, sections='[fit]\nfree = ["k"]\n')
    code, err = cli(
        ["fit", "c.toml", "-o", f"{loss}.h5", "--set", f'fit.loss="{loss}"', "--quiet"], capsys
    )
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "solve fails where the fit ended (k = 1)" in err, err
    assert not (tmp_cwd / f"{loss}.h5").exists()
    # (from a start the model solves, these fits reach the truth: the next two tests)


# (by default the first start of the multistart fit below is this one, with the mse loss)
@pytest.mark.slow
def test_a_fit_in_the_data_s_units_does_not_step_where_the_model_cannot_be_solved(tmp_path):
    # Without sigma the residuals are in the data's units (here 1e4 to 2.5e4), and a
    # failed solve (y' = k y^2 / 1e4 blows up before t = 2 for k > 0.5) counted as a
    # fixed residual of 1e3: Levenberg-Marquardt from k = 0.05 stepped to k = 4.96,
    # where every failing point cost less than the valid start's, and ended there.
    # (The normal loss here; with the mse loss the same start is the first of the
    # multistart fit of the next test.)
    config = sim.load_config(
        write_blowup(tmp_path, 0.05, scale=1e4, sections='[fit]\nfree = ["k"]\n')
    )
    result = fit(config.with_overrides(['fit.loss="normal"']))
    assert result.converged, result.message
    assert result.estimate["k"] == pytest.approx(0.3, rel=1e-4)


@pytest.mark.parametrize(
    "loss", ["mse", pytest.param("normal", marks=pytest.mark.slow)]
)  # (mse: the prediction is checked; normal: the likelihood)
def test_a_start_that_ends_where_the_model_cannot_be_solved_is_not_reported_converged(
    tmp_path, loss
):
    # Starts drawn in k's bounds [0, 5] where y' = k y^2 / 1e4 blows up before the last
    # observation (k > 0.5): their optimiser stops at once and said it had converged,
    # which `starts/converged` passed on beside an objective of NaN. The first start is
    # the config's, the k = 0.05 of the test above, in the data's units: it does not
    # step where the model cannot be solved either, and reaches the truth.
    config = sim.load_config(
        write_blowup(tmp_path, 0.05, scale=1e4, sections='[fit]\nfree = ["k"]\nstarts = 4\n')
    )
    result = fit(config.with_overrides([f'fit.loss="{loss}"']))
    assert result.converged, result.message
    assert result.estimate["k"] == pytest.approx(0.3, rel=1e-4)
    assert result.starts_estimate["k"][0] == pytest.approx(0.3, rel=1e-4), result.starts_estimate
    failed = result.starts_estimate["k"] > 0.5
    assert 0 < failed.sum() < 4, result.starts_estimate  # (some starts in each kind)
    np.testing.assert_array_equal(result.starts_converged, ~failed)
