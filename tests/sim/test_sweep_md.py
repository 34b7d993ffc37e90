"""MD configs sweep over their parameters: every run of a vmapped Lennard-Jones sweep
equals a single `sim run` (or `simulate`) of its values, also when the neighbour list the
sweep starts with is too small (the chunk is rerun with larger lists)."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from sim.families.md._numerics import _fixed_list
from solvers import Result
from tests.helpers import cli

CONFIG = """
[model]
name = "lennard_jones"
[params]
cutoff = 1.6
shift = true
[system]
lattice = "fcc"
cells = 2
density = 0.8
temperature = 1.0
seed = 3
[time]
dt = 0.004
steps = 60
save_every = 20
[solver]
method = "{method}"
{extra}
[sweep]
mode = "grid"
save = "{save}"
[sweep.params]
epsilon = {{ values = [0.8, 1.2] }}
sigma = {{ values = [0.95, 1.05] }}
"""


# Langevin by default (full frames, a key folded per run); the NVE sweep repeats it with
# `-m slow`: the default run compares NVE sweeps with single runs (`sim run` among them)
# in the neighbour-list test below.
@pytest.mark.parametrize(
    "method, extra",
    # (by default, the planted-overflow test below compares a verlet sweep with single runs)
    [
        pytest.param("verlet", "", marks=pytest.mark.slow),
        pytest.param("langevin", "temperature = 1.0\nfriction = 1.0", marks=pytest.mark.slow),
    ],
    ids=["nve", "langevin"],
)
def test_md_sweep_runs_equal_single_runs(method, extra, tmp_cwd, capsys):
    Path("s.toml").write_text(CONFIG.format(method=method, extra=extra, save="full"))
    code, err = cli(["sweep", "s.toml", "-o", "sweep.h5", "--quiet"], capsys)
    assert code == 0, err
    record = sim.read("sweep.h5")
    assert np.all(record.status == 1)
    eps, sig = record.params["epsilon"], record.params["sigma"]
    assert len(eps) == 4
    setup = sim.setup(sim.load_config("s.toml"))
    for i in range(4):
        if method == "verlet" and i == 0:  # deterministic: the run of `sim run` with those values
            single = sim.run(
                sim.load_config(
                    "s.toml", [f"params.epsilon={float(eps[i])}", f"params.sigma={float(sig[i])}"]
                )
            )
        else:
            # simulate with those values; a Langevin run i draws its noise from the config's key
            # folded with i
            params = {**setup.params, "epsilon": jnp.asarray(eps[i]), "sigma": jnp.asarray(sig[i])}
            key = None if method == "verlet" else jax.random.fold_in(setup.key, i)
            single = sim.simulate(
                setup.model, params, setup.t, initial=setup.initial, solver=setup.solver, key=key
            )
        for name in ("potential_energy", "pressure", "temperature"):
            np.testing.assert_allclose(
                record.observables[name][i],
                np.asarray(single.observables[name]),
                rtol=1e-10,
                atol=1e-10,
            )
        np.testing.assert_allclose(
            record.observables["position"][i],
            np.asarray(single.observables["position"]),
            rtol=1e-10,
            atol=1e-10,
        )
    # Stronger attraction (epsilon) lowers the potential energy.
    pe = record.observables["potential_energy"][:, 0]
    assert pe[np.argmax(eps)] < pe[np.argmin(eps)]


def test_md_sweep_summary_and_bad_keys(tmp_cwd, capsys):
    # save = "summary" (the Langevin sweep above, whose single runs compile the same
    # `simulate`): per run, min, max and mean over the save times (and the particles and
    # coordinates of positions and velocities), and the final value, of every observable
    # equal NumPy's of `simulate` with its values and key (measured: to 4e-15 relative).
    Path("s.toml").write_text(
        CONFIG.format(method="langevin", extra="temperature = 1.0\nfriction = 1.0", save="summary")
    )
    code, err = cli(["sweep", "s.toml", "-o", "sweep.h5", "--quiet"], capsys)
    assert code == 0, err
    record = sim.read("sweep.h5")
    assert np.all(record.status == 1)
    setup = sim.setup(sim.load_config("s.toml"))
    # (the single runs keep the sweep's neighbour list, which none of them overflows: a run
    # starting with the tighter list of `simulate` grows it when its own dynamics overflow
    # it, to a size of its own, and compiled its chunk again for each size; the growth is
    # checked against sweeps by the planted-overflow test with -m slow)
    solver = _fixed_list(setup)
    for i, (eps, sig) in enumerate(
        zip(record.params["epsilon"], record.params["sigma"], strict=False)
    ):
        params = {**setup.params, "epsilon": jnp.asarray(eps), "sigma": jnp.asarray(sig)}
        single = sim.simulate(
            setup.model,
            params,
            setup.t,
            initial=setup.initial,
            solver=solver,
            key=jax.random.fold_in(setup.key, i),
        )
        assert (
            int(single.stats["result"]) == Result.successful
            and int(single.stats["capacity"]) == solver.capacity
        )
        assert set(record.observables) == set(single.observables) and {
            "position",
            "velocity",
            "total_energy",
        } <= set(single.observables)
        for name, value in single.observables.items():
            value = np.asarray(value)
            stats = record.observables[name]
            assert stats["final"][i].shape == value.shape[1:]
            np.testing.assert_allclose(stats["final"][i], value[-1], rtol=1e-10, atol=1e-10)
            for stat, reduce in (("min", np.min), ("max", np.max), ("mean", np.mean)):
                np.testing.assert_allclose(
                    stats[stat][i],
                    reduce(value),
                    rtol=1e-10,
                    atol=1e-10,
                    err_msg=f"{name} {stat} run {i}",
                )
    for key, named in [
        ("initial.x", "initial values"),
        ("system.density", "[system]"),
        ("temperature", "[system] or [solver]"),
    ]:
        code, err = cli(
            [
                "sweep",
                "s.toml",
                "-o",
                "bad.h5",
                "--quiet",
                "--set",
                f"sweep.params.{key}={{ values = [1.0, 2.0] }}",
            ],
            capsys,
        )
        assert (
            code == 2
            and f"sweep.params.{key}" in err
            and named in err
            and len(err.strip().splitlines()) == 1
        ), err
        assert "[params]" in err and "Traceback" not in err
        assert not Path("bad.h5").exists()


@pytest.mark.slow  # a sweep, its redone runs and single runs: three compiled programs
def test_md_sweep_with_too_small_neighbour_list_equals_single_runs(tmp_cwd, capsys, monkeypatch):
    """Planted: the sweep's list starts with 60% of the neighbours counted (12 of 19), so
    the runs overflow it in their first build; the sweep must rerun each chunk with a
    larger list (doubled, to 24) and lose no run."""
    import sim._sweep as sweep_module
    import sim.families.md._numerics as md_family
    import solvers._particle_run as policy

    monkeypatch.setattr(policy, "FIXED_FACTOR", 0.6)
    sweep_module._cached_runner.cache_clear()
    tried = []
    larger = policy.larger_capacity
    monkeypatch.setattr(
        policy, "larger_capacity", lambda c, n: tried.append(larger(c, n)) or tried[-1]
    )
    codes = []  # the result codes of each chunk before its overflowed runs are rerun
    settle = md_family.settle_overflows
    monkeypatch.setattr(
        md_family,
        "settle_overflows",
        lambda s, v, r: codes.extend(np.asarray(v["stats/result"]).tolist()) or settle(s, v, r),
    )
    text = CONFIG.format(method="verlet", extra="", save="final").replace(
        "steps = 60", "steps = 100"
    )
    text = text.replace("sigma = { values = [0.95, 1.05] }\n", "").replace(
        'save = "final"', 'save = "final"\nchunk = 3'
    )  # 2 chunks
    text = text.replace(
        "epsilon = { values = [0.8, 1.2] }", "epsilon = { values = [0.7, 0.9, 1.1, 1.3] }"
    )
    Path("s.toml").write_text(text)
    code, err = cli(["sweep", "s.toml", "-o", "sweep.h5", "--quiet"], capsys)
    sweep_module._cached_runner.cache_clear()
    assert code == 0, err
    assert tried and tried[0] is not None and tried[0] > 0, (
        tried
    )  # the planted overflow happened and was rerun
    # reported as the overflow it is, never as another failure (max steps shares no code with it)
    assert Result.neighbour_overflow in codes and set(codes) <= {
        Result.successful,
        Result.neighbour_overflow,
    }, codes
    record = sim.read("sweep.h5")
    assert np.all(record.status == 1), record.status
    setup = sim.setup(sim.load_config("s.toml"))
    assert setup.solver.capacity is None  # single runs size (and grow) their own lists
    for i, eps in enumerate(record.params["epsilon"]):
        if i == 0:  # the run of `sim run` with that value
            single = sim.run(sim.load_config("s.toml", [f"params.epsilon={float(eps)}"]))
        else:  # simulate with that value
            params = {**setup.params, "epsilon": jnp.asarray(eps)}
            single = sim.simulate(
                setup.model, params, setup.t, initial=setup.initial, solver=setup.solver
            )
        for name in ("potential_energy", "kinetic_energy", "pressure"):
            np.testing.assert_allclose(
                record.observables[name][i],
                np.asarray(single.observables[name][-1]),
                rtol=1e-10,
                atol=1e-10,
            )
        np.testing.assert_allclose(
            record.observables["position"][i],
            np.asarray(single.observables["position"][-1]),
            rtol=1e-10,
            atol=1e-10,
        )
