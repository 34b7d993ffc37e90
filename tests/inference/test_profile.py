"""Profile likelihoods: intervals against the exact ones of a Gaussian likelihood, a
parameter that the data cannot determine reported as such, and `sim profile` end to end."""

from pathlib import Path

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from inference._profile import THRESHOLD, profile


def test_the_threshold_is_the_95_percent_chi_square_quantile_over_two():
    assert abs(THRESHOLD - 3.841458820694124 / 2) < 1e-12


def test_profiles_of_a_gaussian_likelihood_give_the_exact_intervals():
    """For f(x) = (x - mu)' H (x - mu) / 2 the profile of x_i is a parabola whose 95%
    interval is mu_i -+ 1.96 sqrt(Sigma_ii), Sigma = H^-1 (the correlated others are
    re-optimised: the marginal variance, not 1 / H_ii)."""
    mu = np.array([0.3, -1.2, 2.0])
    a = np.array([[1.0, 0.6, 0.1], [0.0, 1.5, -0.4], [0.0, 0.0, 0.8]])
    h = a.T @ a * 4.0
    sigma = np.linalg.inv(h)
    f = lambda x: 0.5 * (x - mu) @ jnp.asarray(h) @ (x - mu)
    names = ["a", "b", "c"]
    lower, upper = np.full(3, -10.0), np.full(3, 10.0)
    profiles = profile(
        jax.value_and_grad(f), mu, 0.0, lower, upper, names, names, lambda x: np.asarray(x)
    )
    z = np.sqrt(2 * THRESHOLD)  # 1.95996...
    for i, name in enumerate(names):
        p = profiles[name]
        half = z * np.sqrt(sigma[i, i])
        # (the crossing is interpolated linearly between profile points: a small bias)
        np.testing.assert_allclose(
            [p["lower"], p["upper"]], [mu[i] - half, mu[i] + half], rtol=0, atol=0.01 * half
        )
        assert p["stop_lower"] == p["stop_upper"] == "threshold"
        # every point of the profile is the minimum over the others: the parabola
        np.testing.assert_allclose(
            p["objective"], 0.5 * (p["value"] - mu[i]) ** 2 / sigma[i, i], atol=1e-6
        )
        assert np.all(np.diff(p["value"]) > 0)
        # and the others along it are the conditional mean mu_j + Sigma_ji / Sigma_ii (x_i - mu_i)
        assert sorted(p["estimate"]) == [n for n in names if n != name]
        for j, other in enumerate(names):
            if j != i:
                expected = mu[j] + sigma[j, i] / sigma[i, i] * (p["value"] - mu[i])
                np.testing.assert_allclose(
                    p["estimate"][other], expected, atol=1e-4, err_msg=f"{name}: {other}"
                )


def test_a_parameter_the_data_cannot_determine_has_a_flat_open_profile():
    """f depends on x0 + x1 only: any x0 is as good as another (x1 compensates)."""
    f = lambda x: 0.5 * ((x[0] + x[1] - 1.0) / 0.1) ** 2 + 0.5 * ((x[2] - 2.0) / 0.2) ** 2
    names = ["a", "b", "c"]
    lower, upper = np.array([-3.0, -10.0, -3.0]), np.array([3.0, 10.0, 3.0])
    profiles = profile(
        jax.value_and_grad(f),
        np.array([0.5, 0.5, 2.0]),
        0.0,
        lower,
        upper,
        names,
        ["a", "c"],
        lambda x: np.asarray(x),
    )
    flat = profiles["a"]
    assert np.isnan(flat["lower"]) and np.isnan(flat["upper"])
    assert flat["stop_lower"] == flat["stop_upper"] == "bound"
    assert (
        flat["value"][0] == -3.0 + 0.0
        and flat["value"][-1] == 3.0
        and np.max(flat["objective"]) < 1e-8
    )
    # (x1 takes up what x0 leaves)
    np.testing.assert_allclose(flat["estimate"]["b"], 1.0 - flat["value"], atol=1e-5)
    np.testing.assert_allclose(
        [profiles["c"]["lower"], profiles["c"]["upper"]],
        [2.0 - 1.96 * 0.2, 2.0 + 1.96 * 0.2],
        atol=0.01 * 0.4,
    )


DECAY = """
[model]
name = "decay"
[model.states]
y = "-k * y"
[model.parameters]
k = {{ value = 0.3, positive = true }}
a = {{ value = 1.0, positive = true }}
b = {{ value = 1.0, positive = true }}
[model.observables]
signal = "a * b * y"
[initial]
y = 1.0
[time]
t0 = 0.0
[data]
file = "decay.h5"
time = "/t"
[data.observables]
signal = "/signal"
[data.sigma]
signal = "/sigma"
[fit]
free = {free}
"""


def _decay_data(folder: Path, k: float = 0.5, scale: float = 2.0, noise: float = 0.05) -> None:
    t = np.linspace(0.0, 6.0, 25)
    rng = np.random.default_rng(3)
    with h5py.File(folder / "decay.h5", "w") as f:
        f["t"] = t
        f["signal"] = scale * np.exp(-k * t) + noise * rng.standard_normal(t.size)
        f["sigma"] = np.full(t.size, noise)


def test_sim_profile_of_a_config_reports_intervals_and_a_product_it_cannot_split(tmp_cwd):
    """signal = a * b * exp(-k t): k and the product a * b are determined, a and b apart
    are not. The interval of k matches the Gauss-Newton one (nearly linear model)."""
    from sim.cli import main

    _decay_data(tmp_cwd)
    Path("decay.toml").write_text(DECAY.format(free='["k", "a", "b"]'))
    main(
        ["profile", "decay.toml", "--param", "k", "--param", "a", "-o", "profile.h5", "--quiet"]
    )  # (returns: exit 0)
    with h5py.File("profile.h5") as f:
        assert f.attrs["format"] == "simjax.profile"
        assert f["profile/a"]["identifiable"][()].decode() == "not identifiable"
        assert "b" not in f["profile"]
        assert f["profile/k"]["identifiable"][()].decode() == "identifiable"
        a_objective = f["profile/a/objective"][()]
        assert np.ptp(a_objective) < 1e-3  # flat: b compensates
        product = f["profile/a/value"][()] * f["profile/a/estimate/b"][()]
        np.testing.assert_allclose(product, product[0], rtol=1e-3)
        k, lo, hi = f["optimum/k"][()], f["profile/k/lower"][()], f["profile/k/upper"][()]
    assert lo < 0.5 < hi and lo < k < hi
    main(["plot", "profile.h5", "-o", "profile.png"])
    assert Path("profile.png").stat().st_size > 10_000


@pytest.mark.slow  # (a fit of another free set: its own compilation and a second profile)
def test_the_profile_interval_of_a_nearly_linear_model_is_the_gauss_newton_one(tmp_cwd):
    from sim.cli import main

    _decay_data(tmp_cwd)
    Path("decay.toml").write_text(DECAY.format(free='["k", "a", "b"]'))
    main(["profile", "decay.toml", "--param", "k", "-o", "profile.h5", "--quiet"])
    with h5py.File("profile.h5") as f:
        lo, hi = f["profile/k/lower"][()], f["profile/k/upper"][()]
    # against the Gauss-Newton interval of the identifiable model (free k and a only)
    import sim
    from inference import fit

    Path("decay2.toml").write_text(DECAY.format(free='["k", "a"]'))
    gn = fit(sim.load_config("decay2.toml"))
    np.testing.assert_allclose(
        [lo, hi],
        [gn.estimate["k"] - 1.96 * gn.stderr["k"], gn.estimate["k"] + 1.96 * gn.stderr["k"]],
        rtol=0.03,
    )
    # the fit's /objective: the negative log-likelihood with its constants (scipy's)
    from scipy.stats import norm

    with h5py.File("decay.h5") as f:
        t, y = f["t"][()], f["signal"][()]
    predicted = gn.estimate["a"] * 1.0 * np.exp(-gn.estimate["k"] * t)  # (b = 1, y(0) = 1)
    # (to the solver's tolerance; a missing constant would be 25 log(sqrt(2 pi) 0.05) = -52 off)
    assert abs(gn.objective - -np.sum(norm.logpdf(y, predicted, 0.05))) < 1e-3


def test_sim_profile_names_an_unknown_parameter_in_one_line(tmp_cwd, capsys):
    from sim.cli import main

    _decay_data(tmp_cwd)
    Path("decay.toml").write_text(DECAY.format(free='["k", "a"]'))
    with pytest.raises(SystemExit) as done:
        main(["profile", "decay.toml", "--param", "kk", "-o", "profile.h5"])
    err = capsys.readouterr().err
    assert (
        done.value.code == 2
        and len(err.strip().splitlines()) == 1
        and "--param kk" in err
        and "'k'" in err
    ), err
    assert not Path("profile.h5").exists()


STIFF_NOTE = (
    "model 'decay' is declared stiff: using stiff solver kvaerno5 (set [solver] method to choose)"
)


def test_sim_profile_says_when_it_solves_a_stiff_model_with_the_stiff_default(tmp_cwd, capsys):
    # The decay model declared stiff: the profile is solved with kvaerno5 and says so once,
    # after its work, as `sim run` and `sim fit` do; --quiet silences it. (A named method
    # keeps the line away: `solver_notes`, tests/sim/test_cli.py.)
    from sim.cli import main

    _decay_data(tmp_cwd)
    Path("decay.toml").write_text(
        DECAY.format(free='["k", "a"]').replace('name = "decay"', 'name = "decay"\nstiff = true')
    )
    with pytest.raises(SystemExit) as done:
        main(["profile", "decay.toml", "--param", "k", "-o", "profile.h5"])
        raise SystemExit(0)
    captured = capsys.readouterr()
    assert done.value.code == 0, captured.err
    assert captured.err.count(STIFF_NOTE) == 1, captured.err
    lines = captured.err.strip().splitlines()
    assert lines[-2] == STIFF_NOTE and lines[-1].startswith("wrote profile.h5"), lines
    with h5py.File("profile.h5") as f:
        k, lo, hi = f["optimum/k"][()], f["profile/k/lower"][()], f["profile/k/upper"][()]
    # (the data's k = 0.5 inside the 95% interval around the estimate)
    assert lo < 0.5 < hi and lo < k < hi, (lo, k, hi)
    with pytest.raises(SystemExit) as done:
        main(["profile", "decay.toml", "--param", "k", "-o", "quiet.h5", "--quiet"])
        raise SystemExit(0)
    err = capsys.readouterr().err
    assert done.value.code == 0 and err == "", err


@pytest.mark.slow
def test_sim_profile_of_a_petab_problem(tmp_cwd):
    """Boehm et al. 2014: the noise parameter's interval from 16 measurements is about
    -30%/+55% of the estimate (a chi-square quantity), k_phos closed on both sides."""
    from sim.cli import main

    problem = (
        Path(__file__).resolve().parents[1]
        / "data"
        / "petab"
        / "Boehm_JProteomeRes2014"
        / "Boehm_JProteomeRes2014.yaml"
    )
    main(
        [
            "profile",
            str(problem),
            "--param",
            "k_phos",
            "--param",
            "sd_pSTAT5A_rel",
            "-o",
            "profile.h5",
            "--quiet",
        ]
    )
    with h5py.File("profile.h5") as f:
        assert abs(f["objective"][()] - 138.22198) < 1e-3
        for name in ("k_phos", "sd_pSTAT5A_rel"):
            assert f[f"profile/{name}"]["identifiable"][()].decode() == "identifiable"
            assert np.min(f[f"profile/{name}/objective"][()]) >= f["objective"][()] - 1e-6
        sd, lo, hi = (
            f["optimum/sd_pSTAT5A_rel"][()],
            f["profile/sd_pSTAT5A_rel/lower"][()],
            f["profile/sd_pSTAT5A_rel/upper"][()],
        )
    assert 0.6 < lo / sd < 0.75 and 1.45 < hi / sd < 1.7
