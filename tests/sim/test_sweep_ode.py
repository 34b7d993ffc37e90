"""The batched ODE loop of sweeps (`solvers.solve_batch`, used by the ODE family in `sim/_ode.py`):
every run takes the steps a single `simulate` takes (the step counts are equal) and gives its values
to rounding, runs that stop at max_steps fail as single runs do, and the loop gives what `jax.vmap`
of `simulate` gives in every save mode."""

import jax.numpy as jnp
import numpy as np
import pytest

import sim
import sim._sweep as sweep_module
from sim.families.ode import _numerics as ode_family

MODEL = sim.get_model("lotka_volterra")

# Sampled alpha, beta and initial prey: the runs take different numbers of steps, so
# the batch holds finished runs while others go on. max_steps is planted between the
# fewest and the most steps the runs need: some stop there and fail.
CONFIG = """
[model]
name = "lotka_volterra"
[time]
t1 = 15.0
save = 61
[solver]
method = "tsit5"
rtol = 1e-7
atol = 1e-9
max_steps = {max_steps}
[sweep]
mode = "random"
samples = 40
seed = 5
chunk = 16
save = "{save}"
[sweep.params]
alpha = {{ uniform = [0.3, 0.9] }}
beta = {{ loguniform = [0.01, 0.08] }}
"initial.prey" = {{ uniform = [5.0, 60.0] }}
"""


def load(tmp_path, max_steps=4096, save="full"):
    path = tmp_path / f"s_{max_steps}_{save}.toml"
    path.write_text(CONFIG.format(max_steps=max_steps, save=save))
    return sim.load_config(path)


def run(cfg, fast: bool, monkeypatch):
    monkeypatch.setattr(ode_family, "FAST_SWEEPS", fast)
    sweep_module._cached_runner.cache_clear()
    try:
        return sim.sweep(cfg)
    finally:
        sweep_module._cached_runner.cache_clear()


def single(setup, result, i):
    params = {
        **setup.params,
        "alpha": jnp.asarray(result.params["alpha"][i]),
        "beta": jnp.asarray(result.params["beta"][i]),
    }
    initial = {**setup.initial, "prey": jnp.asarray(result.initial["prey"][i])}
    return sim.simulate(setup.model, params, setup.t, initial=initial, solver=setup.solver)


def test_the_batched_loop_is_used_for_tsit5_only(tmp_path):
    setup = sim.setup(load(tmp_path))
    assert ode_family.batched_supports(setup.model, setup.solver, setup.initial)
    for method in ("dopri5", "kvaerno5"):
        other = type(setup.solver)(method=method)
        assert not ode_family.batched_supports(setup.model, other, setup.initial)


@pytest.fixture(scope="module")
def default_sweep(tmp_path_factory):
    """The config's sweep by the batched loop, shared by the tests below."""
    cfg = load(tmp_path_factory.mktemp("sweep"))
    with pytest.MonkeyPatch.context() as patch:
        return cfg, run(cfg, True, patch)


def test_runs_take_the_steps_of_single_runs(default_sweep):
    cfg, result = default_sweep
    setup = sim.setup(cfg)
    steps = result.stats["num_steps"]
    assert np.all(result.status == 1)
    counts = []
    for i in range(len(result.status)):
        traj = single(setup, result, i)
        for name in ("prey", "predator"):
            np.testing.assert_allclose(
                result.observables[name][i], np.asarray(traj.observables[name]), rtol=1e-11, atol=0
            )
        counts.append(int(traj.stats["num_steps"]))
        assert int(steps[i]) == counts[-1]
    assert min(counts) < max(counts)  # the batch mixes finished and running runs


@pytest.mark.parametrize("save", ["full", "summary"])
def test_batched_loop_equals_vmap_of_simulate_with_failures(
    save, default_sweep, tmp_path, monkeypatch
):
    # max_steps between the fewest and the most steps: some runs stop and fail.
    _, probe = default_sweep
    cfg = load(tmp_path, max_steps=int(np.median(probe.stats["num_steps"])), save=save)
    fast = run(cfg, True, monkeypatch)
    slow = run(cfg, False, monkeypatch)
    np.testing.assert_array_equal(fast.status, slow.status)
    np.testing.assert_array_equal(fast.stats["result"], slow.stats["result"])
    np.testing.assert_array_equal(fast.stats["num_steps"], slow.stats["num_steps"])
    assert 0 < np.sum(fast.status == 2) < len(fast.status), fast.status
    for name in ("prey", "predator"):
        a, b = fast.observables[name], slow.observables[name]
        if save == "summary":
            for stat in a:
                np.testing.assert_allclose(a[stat], b[stat], rtol=1e-11, atol=0)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=0)  # NaN where failed, in both
            assert np.all(np.isnan(a[fast.status == 2]))
    assert probe.observables["prey"].shape[0] == 40
