"""The SDE family through the front door: `sim.simulate`, `sim run` (files, chunks,
resume), sweeps and bad input, checked against the Ornstein-Uhlenbeck process's exact
moments and against single runs."""

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from solvers import SdeEnsemble, SdeSolver
from tests.helpers import cli

OU = """
[model]
name = "ornstein_uhlenbeck"
[params]
theta = 1.5
mu = 0.4
sigma = 0.7
[initial]
x = 2.0
[time]
t1 = 1.0
save = 11
[solver]
method = "{method}"
dt = 0.02
[ensemble]
paths = {paths}
seed = 7
"""


def config(tmp_path, method="euler", paths=2000, extra=""):
    path = tmp_path / "ou.toml"
    path.write_text(OU.format(method=method, paths=paths) + extra)
    return path


@pytest.mark.parametrize("method", ["euler", pytest.param("sra1", marks=pytest.mark.slow)])
def test_ensemble_moments_match_the_exact_process(tmp_path, method):
    # x(t) is Gaussian with mean mu + (x0 - mu) e^{-theta t} and variance
    # sigma^2 (1 - e^{-2 theta t}) / (2 theta) (Uhlenbeck & Ornstein 1930).
    result = sim.run(sim.load_config(config(tmp_path, method)))
    x = np.asarray(result.observables["x"])
    assert x.shape == (11, 2000)
    t = np.asarray(result.time)
    theta, mu, sigma, x0 = 1.5, 0.4, 0.7, 2.0
    mean = mu + (x0 - mu) * np.exp(-theta * t)
    var = sigma**2 * (1 - np.exp(-2 * theta * t)) / (2 * theta)
    n = x.shape[1]
    np.testing.assert_array_equal(x[0], x0)
    for i in range(1, len(t)):
        assert abs(x[i].mean() - mean[i]) < 4 * np.sqrt(var[i] / n), (i, x[i].mean(), mean[i])
        assert abs(x[i].var(ddof=1) - var[i]) < 4 * np.sqrt(2 / (n - 1)) * var[i] + 0.02 * var[i], (
            i,
            x[i].var(),
            var[i],
        )


def test_run_file_layout_and_bit_identical_chunks(tmp_cwd, capsys):
    path = config(tmp_cwd, paths=5)
    code, err = cli(["run", str(path), "-o", "whole.h5", "--quiet"], capsys)
    assert code == 0, err
    code, err = cli(
        ["run", str(path), "-o", "chunked.h5", "--quiet", "--set", "output.chunk=3"], capsys
    )
    assert code == 0, err
    with h5py.File("whole.h5") as a, h5py.File("chunked.h5") as b:
        assert a["observables/x"].shape == (11, 5)
        assert a["observables/x"][()].tobytes() == b["observables/x"][()].tobytes()
        assert a.attrs["seed"] == 7
    # the run equals simulate with the same key (a scan there, a resumable loop here)
    setup = sim.setup(sim.load_config(path))
    traj = sim.simulate(
        setup.model,
        setup.params,
        setup.t,
        initial=setup.initial,
        solver=setup.solver,
        key=setup.key,
    )
    np.testing.assert_allclose(
        np.asarray(traj.observables["x"]), sim.read("whole.h5").observables["x"], rtol=1e-13
    )
    # drawn as paths, their mean and the 5-95% band
    from sim._plot import draw

    ax = draw(sim.read("whole.h5")).axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert "mean of 5 paths" in labels and labels.count("paths") == 1 and len(ax.collections) == 1
    mean = next(
        line for line in ax.get_lines() if line.get_label() == "mean of 5 paths"
    ).get_ydata()
    np.testing.assert_allclose(mean, sim.read("whole.h5").observables["x"].mean(axis=1))
    # one path is [T]
    code, err = cli(
        ["run", str(path), "-o", "one.h5", "--quiet", "--set", "ensemble.paths=1"], capsys
    )
    assert code == 0, err
    with h5py.File("one.h5") as f:
        assert f["observables/x"].shape == (11,)


@pytest.mark.slow  # (the solver-level reproducibility test runs by default)
def test_same_seed_same_bytes_and_paths_do_not_depend_on_their_number(tmp_path):
    model = sim.get_model("geometric_brownian_motion")
    t = jnp.linspace(0.0, 1.0, 6)
    solver = SdeSolver(method="milstein", dt=0.05)
    run = lambda paths, seed: sim.simulate(
        model, None, t, solver=SdeEnsemble(solver, paths), key=jax.random.key(seed)
    ).observables["x"]  # noqa: E731
    a, b = np.asarray(run(4, 1)), np.asarray(run(4, 1))
    assert a.tobytes() == b.tobytes()
    assert not np.allclose(a[1:], np.asarray(run(4, 2))[1:])
    np.testing.assert_array_equal(np.asarray(run(8, 1))[:, :4], a)
    with pytest.raises(ValueError, match="needs a key"):
        sim.simulate(model, None, t, solver=solver)


@pytest.mark.slow  # (the solver's gradient test runs by default: tests/solvers/test_sde.py)
def test_gradient_of_the_ensemble_mean_matches_finite_differences():
    model = sim.get_model("ornstein_uhlenbeck")
    t = jnp.linspace(0.0, 1.0, 5)
    ensemble = SdeEnsemble(SdeSolver(method="euler", dt=0.05), 64)
    key = jax.random.key(3)

    def mean_at_end(theta):
        params = {**model.default_params(), "theta": theta}
        return jnp.mean(
            sim.simulate(model, params, t, solver=ensemble, key=key).observables["x"][-1]
        )

    grad = float(jax.grad(mean_at_end)(jnp.asarray(1.2)))
    h = 1e-5
    fd = (float(mean_at_end(jnp.asarray(1.2 + h))) - float(mean_at_end(jnp.asarray(1.2 - h)))) / (
        2 * h
    )
    assert grad == pytest.approx(fd, rel=1e-6)
    # against the exact derivative of the mean, -t (x0 - mu) e^{-theta t}, within the sampling error
    assert grad == pytest.approx(-1.0 * (1.0 - 0.0) * np.exp(-1.2), abs=0.1)


def test_sweep_runs_each_with_its_own_key(tmp_path):
    # (five paths, as the run above: the single runs below reuse its compiled `simulate`)
    path = config(
        tmp_path,
        paths=5,
        extra="[sweep]\nchunk = 2\n[sweep.params]\ntheta = { values = [0.5, 1.0, 2.0] }\n",
    )
    result = sim.sweep(sim.load_config(path))
    assert result.observables["x"].shape == (3, 11, 5) and np.all(result.status == 1)
    setup = sim.setup(sim.load_config(path))
    for i, theta in enumerate(result.params["theta"]):
        params = {**setup.params, "theta": jnp.asarray(theta)}
        key = jax.random.fold_in(setup.key, i)
        traj = sim.simulate(
            setup.model, params, setup.t, initial=setup.initial, solver=setup.solver, key=key
        )
        np.testing.assert_allclose(result.observables["x"][i], traj.observables["x"], rtol=1e-12)


BAD = {
    "missing dt": ("dt = 0.02\n", "", "solver.dt: required key is missing"),
    "negative dt": ("dt = 0.02\n", "dt = -1.0\n", "solver.dt: expected a number > 0"),
    "additive-only method on multiplicative noise": (
        'name = "ornstein_uhlenbeck"\n[params]\ntheta = 1.5\nmu = 0.4\n',
        'name = "geometric_brownian_motion"\n[params]\n',
        "solver.method: SDE method 'sra1' does not apply to diagonal noise",
    ),
    "zero paths": ("paths = 2000", "paths = 0", "ensemble.paths"),
    "unknown ensemble key": ("seed = 7", "seed = 7\nwalkers = 3", "ensemble.walkers"),
    "time.dt": (
        "[time]\n",
        "[time]\ndt = 0.1\n",
        "time.dt: SDE runs take their step as [solver] dt",
    ),
    "more steps than max_steps": (
        "dt = 0.02\n",
        "dt = 1e-7\n",
        "solver.dt: 1e-07 takes 10,000,000 steps from t0 to t1, beyond solver.max_steps = 16,384",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_writes_nothing(case, tmp_cwd, capsys):
    old, new, fragment = BAD[case]
    text = OU.format(method="sra1" if "additive" in case else "euler", paths=2000).replace(old, new)
    (tmp_cwd / "bad.toml").write_text(text)
    code, err = cli(["run", "bad.toml", "-o", "out.h5"], capsys)
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and not list(tmp_cwd.glob("*out.h5*"))


def test_an_ensemble_in_an_ode_config_is_refused(tmp_cwd, capsys):
    (tmp_cwd / "lv.toml").write_text(
        '[model]\nname = "lotka_volterra"\n[time]\nt1 = 1.0\n[ensemble]\npaths = 3\n'
    )
    code, err = cli(["run", "lv.toml", "-o", "out.h5"], capsys)
    assert (
        code == 2
        and "ensemble: is for SDE models; model 'lotka_volterra' is one of the ODE models" in err
    ), err
