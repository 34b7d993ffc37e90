"""Molecular dynamics calibrates like any family: Lennard-Jones epsilon and sigma fitted by
gradients through the Verlet steps of a short trajectory."""

import sys
from pathlib import Path

import numpy as np
import pytest

import sim
from inference import fit

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
sys.path.insert(0, str(EXPERIMENTS / "data"))
from make_lj_observations import TRUTH, observations, write  # noqa: E402

CONFIG = EXPERIMENTS / "lj_calibration.toml"


@pytest.mark.slow  # (19 s; the neighbour-list fit below checks residuals and Jacobian by default)
def test_recovers_epsilon_and_sigma_within_two_standard_errors(tmp_cwd, capsys):
    # `sim fit experiments/lj_calibration.toml` on the shipped data: 5% noise on the
    # potential energy and pressure of a run at epsilon = 1.2, sigma = 1.05; the fit
    # starts at 1, 1. Then `sim plot` of the fit file (data and fitted curves).
    from ..sim.test_examples import cli, plot

    code, err = cli(["fit", str(CONFIG), "-o", "fit.h5", "--quiet"], capsys)
    assert code == 0, err
    plot("fit.h5", capsys)
    record = sim.read("fit.h5")
    assert bool(record.attrs["converged"]), record.attrs["message"]
    for name, truth in TRUTH.items():
        estimate, stderr = float(record.estimate[name]), float(record.stderr[name])
        assert 0 < stderr < 0.05 * truth, (name, stderr)
        assert abs(estimate - truth) < 2 * stderr, (name, estimate, stderr)
    # The start (epsilon = sigma = 1) is far outside that.
    assert abs(1.0 - TRUTH["epsilon"]) > 10 * float(record.stderr["epsilon"])


def test_a_neighbour_list_fit_computes_the_all_pairs_residuals_and_jacobian():
    # With the neighbour list on, the list is sized from the initial positions outside
    # the compiled fit; residuals and their forward-mode Jacobian (what Levenberg-Marquardt
    # steps on) equal those of the all-pairs run, whose forces every pair enters.
    import jax

    from inference import build_problem

    out = []
    for flag in ("false", "true"):
        problem, start, _, _ = build_problem(
            sim.load_config(CONFIG, [f"solver.neighbour_list={flag}"])
        )
        u = problem.unconstrained(start)
        out.append(
            jax.jit(
                lambda v, p=problem: (p.residuals(v)[0], jax.jacfwd(lambda w: p.residuals(w)[0])(v))
            )(u)
        )
    (r_all, j_all), (r_nl, j_nl) = out
    assert float(np.sum(np.asarray(r_all) ** 2)) > 100  # the start is far from the data
    np.testing.assert_allclose(r_nl, r_all, rtol=1e-9, atol=1e-9)
    for name in TRUTH:
        assert np.max(np.abs(j_all[name])) > 1
        np.testing.assert_allclose(j_nl[name], j_all[name], rtol=1e-8, atol=1e-8)


@pytest.mark.slow
def test_md_standard_errors_match_the_spread_over_noisy_data_sets(tmp_path):
    estimates, errors = [], []
    for seed in range(8):
        data = write(tmp_path / f"obs{seed}.h5", *observations(CONFIG, seed=seed + 10))
        result = fit(sim.load_config(CONFIG, [f'data.file="{data}"']))
        estimates.append([result.estimate[n] for n in TRUTH])
        errors.append([result.stderr[n] for n in TRUTH])
    spread = np.std(estimates, axis=0, ddof=1)
    reported = np.mean(errors, axis=0)
    assert np.all(reported / spread > 1 / 1.8) and np.all(reported / spread < 1.8), (
        reported,
        spread,
    )


@pytest.mark.parametrize(
    "override, key",
    [
        ('fit.free=["epsilon", "initial.x"]', "fit.free"),
        ('data.observables={ prey = "/pressure" }', "data.observables.prey"),
        ('fit.free=["epsilon", "rho"]', "fit.free"),
    ],
)
def test_bad_md_fit_configs(override, key):
    with pytest.raises(sim.InputError, match=key.replace(".", r"\.")) as info:
        fit(sim.load_config(CONFIG, [override]))
    assert "\n" not in str(info.value)
    if "initial" in override:
        assert "MD runs have no initial values" in str(info.value)
