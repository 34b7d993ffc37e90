"""Warnings at the end of `sim infer` and `sim fit`: raised when the draws or the estimates
cannot be trusted, silent when they can, and written as plain lines to a log file."""

import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

from inference._diagnostics import ess_tail, sampling_warnings, summarise
from inference._fit_estimates import fit_warnings
from inference._fit_problem import Free
from tests.helpers import cli_out as cli, host_devices


def ar1(rng, chains, draws, rho):
    """Chains of an AR(1) process with unit marginal variance."""
    x = np.zeros((chains, draws))
    x[:, 0] = rng.standard_normal(chains)
    for t in range(1, draws):
        x[:, t] = rho * x[:, t - 1] + np.sqrt(1 - rho**2) * rng.standard_normal(chains)
    return x


def test_good_draws_give_no_warning():
    rng = np.random.default_rng(0)
    posterior = {"a": rng.standard_normal((4, 1000)), "b": ar1(rng, 4, 1000, 0.3)}
    assert sampling_warnings(posterior, np.zeros((4, 1000), bool), summarise(posterior)) == []


def test_each_warning_says_what_to_try():
    rng = np.random.default_rng(1)
    apart = rng.standard_normal((4, 1000)) + np.arange(4)[:, None]  # chains in different places
    sticky = ar1(rng, 4, 1000, 0.995)  # well mixed at length, few independent draws
    diverging = np.zeros((4, 1000), bool)
    diverging[2, 10:13] = True
    posterior = {"apart": apart, "sticky": sticky}
    lines = sampling_warnings(posterior, diverging, summarise(posterior))
    assert len(lines) == 3 and all(line.startswith("warning: ") for line in lines)
    assert (
        "r_hat" in lines[0]
        and "apart" in lines[0]
        and "--warmup" in lines[0]
        and "reparametrise" in lines[0]
    )
    assert (
        "ESS" in lines[1]
        and "sticky" in lines[1]
        and "400 for 4 chains" in lines[1]
        and "--samples" in lines[1]
    )
    assert "3 divergent transitions" in lines[2] and "target_accept" in lines[2]


def test_tail_ess_against_arviz():
    # An independent implementation (ArviZ's tail ESS, Vehtari et al. 2021).
    az = pytest.importorskip("arviz")
    rng = np.random.default_rng(2)
    for rho in (0.0, 0.5, 0.9):
        draws = ar1(rng, 4, 2000, rho)
        assert ess_tail(draws) == pytest.approx(float(az.ess(draws, method="tail")), rel=0.02)


def test_fit_warnings_for_a_bound_and_a_singular_covariance():
    free = [
        Free(name="k", kind="params", key="k", transform="logistic", low=0.1, high=0.5),
        Free(name="y0", kind="initial", key="y", transform="log"),
    ]
    assert fit_warnings(free, {"k": 0.3, "y0": 2.0}, np.array([[1e-4, 0.0], [0.0, 1e-2]])) == []
    (line,) = fit_warnings(free, {"k": 0.5 - 1e-9, "y0": 2.0}, np.array([[1e-4, 0.0], [0.0, 1e-2]]))
    assert (
        line.startswith("warning: at a bound: k = 0.5 in [0.1, 0.5]")
        and "widen [fit] bounds" in line
    )
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])  # y0 = 2 k exactly
    (line,) = fit_warnings(free, {"k": 0.3, "y0": 2.0}, singular)
    assert "singular" in line and "k, y0" in line and "sim profile" in line
    (line,) = fit_warnings(free, {"k": 0.3, "y0": 2.0}, np.full((2, 2), np.nan))
    assert "singular (not finite)" in line
    # the inverse of a singular matrix, rounded: finite, with variances below zero (what a
    # fit of k1 and k2 of which the data fix only k1 + k2 gave: -1.7e11)
    rounded = np.array([[-1.75e11, 1.75e11], [1.75e11, -1.75e11]])
    (line,) = fit_warnings(free, {"k": 0.3, "y0": 2.0}, rounded)
    assert "singular (a variance that is not positive)" in line
    # singularity is judged on the correlations, whatever the scale: estimates known to
    # 1e-5 and correlated by 0.9 are well determined; correlated by 1 - 1e-12 they are not
    sd = np.array([1e-5, 3e-5])
    for rho, warned in ((0.9, False), (1 - 1e-12, True)):
        cov = np.outer(sd, sd) * np.array([[1.0, rho], [rho, 1.0]])
        assert len(fit_warnings(free, {"k": 0.3, "y0": 2.0}, cov)) == warned, rho
        assert len(fit_warnings(free, {"k": 0.3, "y0": 2.0}, cov * 1e16)) == warned, rho


DECAY = """
[model]
name = "decay"
[model.states]
y = "-(k1 + k2) * y"
[model.parameters]
k1 = { value = 0.3, positive = true }
k2 = { value = 0.3, positive = true }
[initial]
y = 2.0
[time]
t1 = 4.0
[data]
file = "obs.h5"
time = "/t"
[data.observables]
y = "/y"
"""


def write_decay(folder, rate=0.7):
    t = np.linspace(0.0, 4.0, 9)
    with h5py.File(folder / "obs.h5", "w") as f:
        f["t"] = t
        f["y"] = (
            2.0
            * np.exp(-rate * t)
            * np.exp(0.05 * np.random.default_rng(0).standard_normal(t.size))
        )


def test_sim_fit_warns_of_a_parameter_at_its_bound(tmp_cwd, capsys):
    # The data decay at rate 0.7; k1 is held in [0.01, 0.2] (warnings show with --quiet).
    write_decay(tmp_cwd)
    (tmp_cwd / "b.toml").write_text(
        DECAY
        + '[params]\nk1 = 0.1\n[fit]\nfree = ["k1"]\nloss = "lognormal"\nbounds = { k1 = [0.01, '
        "0.2] }\n"
    )
    code, _, err = cli(["fit", "b.toml", "-o", "b.h5", "--quiet"], capsys)
    assert code == 0, err
    assert err.splitlines() == [
        next(line for line in err.splitlines() if line.startswith("warning: at a bound: k1 = 0.19"))
    ], err


@pytest.mark.slow
def test_sim_fit_warns_of_a_singular_covariance(tmp_cwd, capsys):
    # Only k1 + k2 is determined by the data.
    write_decay(tmp_cwd)
    (tmp_cwd / "c.toml").write_text(DECAY + '[fit]\nfree = ["k1", "k2"]\nloss = "lognormal"\n')
    code, _, err = cli(["fit", "c.toml", "-o", "f.h5"], capsys)
    assert code == 0, err
    assert any(
        line.startswith("warning: the covariance of the estimates is singular")
        for line in err.splitlines()
    ), err
    assert "\r" not in err


# (a `sim infer` process; the warnings themselves are checked in this process above)
@pytest.mark.slow
def test_sim_infer_of_a_bad_run_ends_with_warnings_in_its_log(tmp_path):
    # Two chains of 20 draws after 5 warmup steps: neither mixed nor long enough.
    write_decay(tmp_path)
    (tmp_path / "c.toml").write_text(
        DECAY.replace("k1 + k2", "k1") + "[infer]\nchains = 2\nwarmup = 5\nsamples = 20\n"
        '[infer.priors]\nk1 = { dist = "lognormal", loc = 0.0, scale = 1.0 }\n'
        '[infer.noise]\nmodel = "lognormal"\nsigma = { dist = "lognormal", loc = -2.0, scale = 0.5 '
        "}\n"
    )
    with open(tmp_path / "log.txt", "w") as log:
        proc = subprocess.run(
            [sys.executable, "-m", "_sim_entry", "infer", "c.toml", "-o", "p.h5"],
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=600,
            env={**os.environ, "XLA_FLAGS": host_devices(2)},
        )
    text = (tmp_path / "log.txt").read_text()
    assert proc.returncode == 0, text
    assert "\r" not in text
    lines = text.splitlines()
    assert any(line.startswith("warning: r_hat above 1.01") for line in lines), text
    assert any(
        line.startswith("warning: bulk/tail ESS below 100 per chain (200 for 2 chains)")
        for line in lines
    ), text
    assert any(line.startswith("wrote p.h5; compiled in ") for line in lines), text
