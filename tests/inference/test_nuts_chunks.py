"""NUTS in chunks (`inference._chains.run_chains`): the draws of NumPyro's MCMC.run, two
programs without host callbacks that the persistent cache keeps, progress and a safe
point between chunks, and a chain without a valid start."""

import json
import os
import signal
import subprocess
from pathlib import Path

import jax
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import NUTS

from inference._chains import NoValidStart, _OnDevices, chain_programs, chunk_length, run_chains
from sim import _cache, _interrupt
from tests.helpers import SIM_COMMANDS, host_devices, on_host_devices, script_command

ROOT = Path(__file__).resolve().parents[2]

# Rubin (1981), the eight schools: the centred model diverges in its funnel.
SCHOOLS = """
import numpy as np, numpyro, numpyro.distributions as dist

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])

def schools(y, sigma):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("school", 8):
        theta = numpyro.sample("theta", dist.Normal(mu, tau))
        numpyro.sample("y", dist.Normal(theta, sigma), obs=y)
"""
exec(SCHOOLS)  # (the model, here and in the subprocess below)


def test_chunk_length_cuts_the_run_into_about_ten_equal_chunks():
    for total, length in [(2000, 200), (60, 6), (400, 40), (1001, 91), (10, 1), (3, 1), (1, 1)]:
        assert chunk_length(total) == length, total
    # Without a divisor giving 8 to 16 chunks, the last chunk is padded the least.
    for total in (37, 1009, 2001, 997):
        length = chunk_length(total)
        chunks = -(-total // length)
        assert 8 <= chunks <= 16 and chunks * length - total < chunks, (total, length)
    assert chunk_length(37) == 3  # 13 chunks, 2 steps padded (5 would pad 3)


_SAME_DRAWS = (
    SCHOOLS
    + """
import sys
import jax
from numpyro.infer import MCMC, NUTS
jax.config.update("jax_enable_x64", True)
from inference._chains import chain_method, run_chains

divergent = 0
for chains in (int(a) for a in sys.argv[1:] if a.isdigit()):
    method, progress, plan = chain_method(chains, True)
    print(chains, plan, progress)
    mcmc = MCMC(NUTS(schools), num_warmup=23, num_samples=14, num_chains=chains, chain_method=method, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(3), Y, SIGMA, extra_fields=("diverging",))
    # (23 + 14 = 37 steps: 13 chunks of 3, the last padded by 2)
    run = run_chains(NUTS(schools), (Y, SIGMA), chains=chains, warmup=23, samples=14, key=jax.random.PRNGKey(3), method=method)
    # (MCMC.run starts a lone chain op by op, not compiled as run_chains and MCMC.run's
    # device layouts start theirs: its draws part in the 9th digit within these steps)
    rtol = 1e-6 if chains == 1 else 1e-12
    for name, draws in mcmc.get_samples(group_by_chain=True).items():
        assert run.samples[name].shape == (chains, 14, *draws.shape[2:]), name
        np.testing.assert_allclose(run.samples[name], np.asarray(draws), rtol=rtol, atol=0, err_msg=f"{chains} {name}")
    np.testing.assert_array_equal(run.diverging, np.asarray(mcmc.get_extra_fields(group_by_chain=True)["diverging"]))
    divergent += int(run.diverging.sum())
assert divergent > 0, "no divergent transition to compare"
print("ok", divergent)
"""
)


_LAYOUTS = {
    4: "4 4 chains on 2 CPU devices, 2 after one another on each False",
    2: "2 2 chains in parallel, one per CPU device False",
    3: "3 3 chains on one CPU device, one after another False",
    1: "1 1 chain False",
}


# (slow: a process of two CPU devices, as `sim infer` makes on a 2-core machine, for each
# layout; by default the 2-core layout of four chains is checked against MCMC.run in the
# process of four devices below, with its start-up and compilations)
@pytest.mark.slow
@pytest.mark.parametrize("chains", [(4,), (2, 3, 1)])
def test_chunked_chains_draw_what_mcmc_run_draws_on_every_layout(chains):
    # With two CPU devices (as `sim infer` makes on a 2-core machine): 4 chains in two
    # rounds over the devices, 2 one per device, 3 one after another, 1 alone. Each layout's draws
    # (mu, tau, theta of the centred eight schools) and divergences are MCMC.run's with
    # the same chain method and key; measured: equal to the last bit (a lone chain,
    # which MCMC.run starts op by op, to 1e-6). (Compiled by XLA's
    # default code generator, which emits the same arithmetic in both programs; the tests'
    # faster-compiling one, tests/conftest.py, contracts their sums differently, and the
    # trajectories amplify the last bits.)
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
        "JAX_PLATFORMS": "cpu",
    }
    proc = subprocess.run(
        script_command(_SAME_DRAWS, *map(str, chains)),
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[: len(chains)] == [_LAYOUTS[c] for c in chains], lines
    assert lines[-1].startswith("ok"), lines


_ANY_DEVICES = (
    SCHOOLS
    + """
import sys
import jax
from numpyro.infer import MCMC, NUTS
import sim
from inference._chains import _OnDevices, chain_method, run_chains

# (as `sim infer` runs: float64, and the persistent compilation cache of the tests, which
# loads a program another layout or an earlier run compiled)
sim.configure_jax()
assert jax.local_device_count() == 4
counts = [int(a) for a in sys.argv[1:]]


def mcmc(method):
    run = MCMC(NUTS(schools), num_warmup=23, num_samples=14, num_chains=4, chain_method=method, progress_bar=False)
    run.run(jax.random.PRNGKey(3), Y, SIGMA, extra_fields=("diverging",))
    samples = {k: np.asarray(v) for k, v in run.get_samples(group_by_chain=True).items()}
    return samples, np.asarray(run.get_extra_fields(group_by_chain=True)["diverging"])


# The layout of 4 chains on two CPU devices (`sim infer` on a 2-core machine), and
# MCMC.run's draws with it: the chunked chains' to the last bit.
devices, jax.device_count = jax.device_count, lambda: 2
method, progress, plan = chain_method(4, True)
jax.device_count = devices
assert plan == "4 chains on 2 CPU devices, 2 after one another on each" and not progress, plan
assert method == _OnDevices(2), method
layout = mcmc(method)
# (NumPyro's chains one after another: started op by op, their draws part from a compiled
# start's in the 9th digit within these steps)
sequential = mcmc("sequential")
runs = {count: run_chains(NUTS(schools), (Y, SIGMA), chains=4, warmup=23, samples=14, key=jax.random.PRNGKey(3), method=_OnDevices(count)) for count in counts}
for count, run in runs.items():
    for name, draws in sequential[0].items():
        assert run.samples[name].shape == draws.shape, (count, name)
        np.testing.assert_array_equal(run.samples[name], runs[counts[0]].samples[name], err_msg=f"{count} {name}")
        np.testing.assert_allclose(run.samples[name], layout[0][name], rtol=1e-12, atol=0, err_msg=f"{count} {name}")
        np.testing.assert_allclose(run.samples[name], draws, rtol=1e-6, atol=0, err_msg=f"{count} {name}")
    np.testing.assert_array_equal(run.diverging, layout[1])
    np.testing.assert_array_equal(run.diverging, sequential[1])
print("ok", int(run.diverging.sum()))
"""
)


# (by default rounds of one and of two devices; with -m slow, of four too)
@pytest.mark.parametrize("counts", [(1, 2), pytest.param((1, 2, 4), marks=pytest.mark.slow)])
def test_the_same_key_draws_the_same_chains_on_one_two_or_four_devices(counts):
    # Four chains of the centred eight schools, in a process of four devices, in four
    # rounds of one device, two rounds of two (the layout of a 2-core machine), one round
    # of four: the same bits, MCMC.run's with the 2-core layout to the last bit, and
    # NumPyro's MCMC.run's chains one after another to its start's rounding, divergences
    # included. (The chains used to be vectorised on one device, split over two devices
    # one after another on each, or one per device: three programs whose draws parted;
    # then replicated by jax.pmap, whose programs over two or more devices XLA optimises
    # otherwise than over one.)
    env = {**os.environ, "XLA_FLAGS": host_devices(4), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        script_command(_ANY_DEVICES, *map(str, counts)),
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.splitlines()[-1]
    assert last.startswith("ok") and int(last.split()[1]) > 0, proc.stdout


def _run(progress=False, started=None, chains=2, method="vectorized"):
    with jax.numpy_dtype_promotion("standard"):
        return run_chains(
            NUTS(schools),
            (Y, SIGMA),
            chains=chains,
            warmup=30,
            samples=20,
            key=jax.random.PRNGKey(0),
            method=method,
            progress=progress,
            started=started,
        )


# (by default the cache test below shows it of the one-chain-per-device programs: a
# program with a host callback is keyed by the callback's address, which a second
# trace changes, so it is never loaded from the persistent cache)
@pytest.mark.slow
def test_the_chunk_program_holds_no_host_callback():
    programs = {}
    with jax.numpy_dtype_promotion("standard"):
        # (one chain per device, as `sim infer` runs chains; vectorised, as for implicit solvers)
        keys = jax.random.PRNGKey(0)[None]
        init, chunk = chain_programs(
            NUTS(schools), (Y, SIGMA), warmup=30, length=5, method=_OnDevices(1)
        )
        programs["init, parallel"] = init.program.lower(keys[0]).as_text()
        programs["chunk, parallel"] = chunk.program.lower(
            jax.tree.map(lambda x: x[0], init(keys))
        ).as_text()
        keys = jax.random.split(jax.random.PRNGKey(0), 2)
        init, chunk = chain_programs(
            NUTS(schools), (Y, SIGMA), warmup=30, length=5, method="vectorized"
        )
        programs["chunk, vectorized"] = chunk.lower(init(keys)).as_text()
    for name, text in programs.items():
        assert "callback" not in text, name
    # (the check sees one where there is one: a program that prints from inside)
    assert "callback" in jax.jit(lambda x: jax.debug.callback(print, x) or x).lower(1.0).as_text()


@pytest.fixture
def fresh_cache(tmp_path):
    """The persistent compilation cache in an empty folder, the tests' own put back after."""
    previous = os.environ["SIMJAX_CACHE_DIR"]
    folder = _cache.enable(tmp_path / "cache")
    try:
        yield folder
    finally:
        # (an empty SIMJAX_CACHE_DIR: the tests run without the cache, which
        # `_cache.enable("")` would turn on in the current folder)
        if previous.strip():
            _cache.enable(previous)
        else:
            _cache.disable()


def test_a_second_run_loads_both_programs_from_the_persistent_cache(fresh_cache):
    # What a second `sim infer` of the same config does (one chain per device): its
    # two programs are loaded from the cache folder, none compiled (NumPyro's progress
    # bar made the whole sampler a program with host callbacks, which JAX never stores).
    events, recording = [], [False]
    jax.monitoring.register_event_listener(lambda name, **_: recording[0] and events.append(name))
    counts = []
    runs = []
    for _ in range(2):
        events.clear()
        recording[0] = True
        runs.append(_run(chains=1, method=_OnDevices(1)))
        recording[0] = False
        counts.append(
            {
                kind: events.count(f"/jax/compilation_cache/{kind}")
                for kind in ("cache_hits", "cache_misses")
            }
        )
    assert counts[0]["cache_misses"] >= 2 and len(list(fresh_cache.iterdir())) >= 2, counts
    assert counts[1]["cache_misses"] == 0 and counts[1]["cache_hits"] >= 2, counts
    for name, draws in runs[0].samples.items():
        np.testing.assert_array_equal(runs[1].samples[name], draws)


def test_progress_is_a_line_per_tenth_naming_warmup_and_sampling(capsys):
    run = _run(progress=True)
    assert run.samples["theta"].shape == (2, 20, 8) and run.diverging.shape == (2, 20)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 10, lines
    for k, line in enumerate(lines, start=1):
        phase = "warmup" if 5 * k <= 30 else "sampling"
        assert line.startswith(f"{phase}: {5 * k} of 50 ({10 * k}%), "), line
    assert lines[-1].endswith("done") and "ETA" in lines[0], lines


def test_an_interrupt_stops_the_chains_at_the_next_chunk():
    with _interrupt.deferred(), pytest.raises(_interrupt.Interrupted) as info:
        _run(started=lambda: os.kill(os.getpid(), signal.SIGTERM))
    assert info.value.exit_code == 143 and info.value.checkpoint is None


def test_chains_without_a_valid_start_are_refused_before_any_step():
    def nowhere():
        numpyro.sample("x", dist.Normal(0.0, 1.0))
        numpyro.factor("impossible", -np.inf)

    started = []
    with pytest.raises(NoValidStart), jax.numpy_dtype_promotion("standard"):
        run_chains(
            NUTS(nowhere),
            (),
            chains=2,
            warmup=4,
            samples=4,
            key=jax.random.PRNGKey(0),
            method="vectorized",
            started=lambda: started.append(1),
        )
    assert not started


@pytest.mark.slow  # NUTS through Kvaerno5 on one and on two host devices, fresh processes
def test_chains_of_a_model_solved_by_an_implicit_method_draw_the_same_on_two_devices(tmp_path):
    # Each chain is one program for one device, as for explicit methods: a PEtab problem
    # (Kvaerno5 by default) on two CPU devices draws what it draws on one. (Its chains
    # were once vectorised on one device: a chain's start compiled alone leaked the
    # tracers of the prior's bounds into the kernel's transforms.)
    from inference._chains import spreads
    from physics.ode import LotkaVolterra
    from solvers import OdeSolver

    lv = LotkaVolterra()
    assert spreads([(lv, OdeSolver(method="tsit5")), (lv, OdeSolver(method="kvaerno5"))])
    import runpy

    import h5py

    problem = runpy.run_path(str(ROOT / "experiments" / "data" / "make_decay_petab.py"))["write"](
        tmp_path / "decay"
    )
    draws, said = {}, {}
    for devices in (1, 2):
        out = tmp_path / f"posterior{devices}.h5"
        argv = ["infer", str(problem), "--chains", "2", "--warmup", "10", "--samples", "10"]
        done = on_host_devices(SIM_COMMANDS, [json.dumps([[*argv, "-o", str(out)]])], devices)
        said[devices] = done.stderr
        with h5py.File(out) as f:
            draws[devices] = {k: f[f"posterior/{k}"][()] for k in ("k", "A0")}
    assert "2 chains on one CPU device, one after another" in said[1]
    assert "2 chains in parallel, one per CPU device" in said[2]
    assert draws[1]["k"].shape == (2, 10) and np.all(np.isfinite(draws[1]["k"]))
    for name, values in draws[1].items():
        assert np.array_equal(draws[2][name], values), name


def test_sim_infer_and_run_ask_xla_for_one_cpu_device_per_core_they_may_use(monkeypatch):
    # The entry point says it before JAX starts, from the cores the process may run on
    # (its affinity, not the machine's count), for `sim infer` and `sim run` only, and
    # never over a device count the user set.
    import _sim_entry

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5}, raising=False)
    cases = [
        (
            ["infer", "lv.toml"],
            "--xla_cpu_use_thunk_runtime=true",
            "--xla_cpu_use_thunk_runtime=true --xla_force_host_platform_device_count=3",
        ),
        (["--no-cache", "infer", "lv.toml"], None, "--xla_force_host_platform_device_count=3"),
        (["run", "lv.toml"], None, "--xla_force_host_platform_device_count=3"),
        (["sweep", "lv.toml"], None, None),
        (
            ["fit", "lv.toml"],
            "--xla_cpu_use_thunk_runtime=true",
            "--xla_cpu_use_thunk_runtime=true",
        ),
        (
            ["infer", "lv.toml"],
            "--xla_force_host_platform_device_count=1",
            "--xla_force_host_platform_device_count=1",
        ),
    ]
    for args, flags, expected in cases:
        if flags is None:
            monkeypatch.delenv("XLA_FLAGS", raising=False)
        else:
            monkeypatch.setenv("XLA_FLAGS", flags)
        _sim_entry._cpu_devices(args)
        assert os.environ.get("XLA_FLAGS") == expected, (args, flags)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {1}, raising=False)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    _sim_entry._cpu_devices(["infer", "lv.toml"])
    assert "XLA_FLAGS" not in os.environ  # (one core: one device, XLA's default)
