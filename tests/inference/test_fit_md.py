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


def test_recovers_epsilon_and_sigma_within_two_standard_errors(tmp_cwd):
    # The shipped data: 5% noise on the potential energy and pressure of a run at
    # epsilon = 1.2, sigma = 1.05; the fit starts at 1, 1.
    result = fit(sim.load_config(CONFIG))
    # Its fit file draws (data and fitted curves of both series).
    from ..sim.test_examples import check_png

    result.save("fit.h5")
    sim.plot("fit.h5", "fit.png")
    check_png("fit.png")
    assert result.converged, result.message
    for name, truth in TRUTH.items():
        estimate, stderr = result.estimate[name], result.stderr[name]
        assert 0 < stderr < 0.05 * truth, (name, stderr)
        assert abs(estimate - truth) < 2 * stderr, (name, estimate, stderr)
    # The start (epsilon = sigma = 1) is far outside that.
    assert abs(1.0 - TRUTH["epsilon"]) > 10 * result.stderr["epsilon"]


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
    assert np.all(reported / spread > 1 / 1.8) and np.all(reported / spread < 1.8), (reported, spread)


@pytest.mark.parametrize(
    "override, key",
    [
        ('fit.free=["epsilon", "initial.x"]', "fit.free"),
        ('data.observables={ prey = "/pressure" }', "data.observables.prey"),
        ('fit.free=["epsilon", "rho"]', "fit.free"),
    ],
)
def test_bad_md_fit_configs(override, key):
    with pytest.raises(sim.InputError, match=key.replace(".", r"\.")):
        fit(sim.load_config(CONFIG, [override]))
