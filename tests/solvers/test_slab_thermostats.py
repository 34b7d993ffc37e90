"""Thermostats in a run split by slabs (`solvers.SlabRun` with `LangevinBaoab` or
`NoseHooverChain`): the Nose-Hoover chain against the replicated run of one device (a
deterministic thermostat: the same trajectory), Langevin dynamics at its temperature
(the canonical mean kinetic energy), both on 1, 2 and 4 devices (Langevin the same bits:
each particle's noise comes from its id), and the integrators it refuses in one line.
"""

import json

import jax
import numpy as np
import pytest

from physics import md
from solvers import (
    LangevinBaoab,
    NoseHooverChain,
    ParticleRun,
    ParticleSolver,
    SlabRun,
    StochasticCellRescaling,
    VelocityVerlet,
)
from tests.helpers import on_host_devices

MODEL = md.Wca(cutoff=1.2)  # (four slabs fit a box of 256 particles)


def fluid():
    """256 WCA particles on an fcc lattice at density 0.8442, at kT = 0.5."""
    return md.thermalize(md.lattice("fcc", 4, 0.8442), jax.random.key(0), 0.5)


def test_langevin_dynamics_holds_its_temperature():
    system = fluid()
    kt, saves, every = 1.5, 200, 10
    times = np.linspace(0.0, saves * every * 0.005, saves + 1)
    run = SlabRun(
        MODEL,
        MODEL.default_params(),
        system,
        LangevinBaoab(dt=0.005, temperature=kt, friction=5.0),
        times=times,
        every=every,
        chunk=50,
        key=jax.random.key(3),
    )
    obs, state, _ = run.run()
    temperature = np.asarray(obs["temperature"])
    # from 0.5 to kT within a few 1 / (2 gamma); the second half's mean is kT (about 25
    # independent frames of relative spread sqrt(2 / 3N) = 5%: a standard error of 1%)
    assert temperature[0] == pytest.approx(0.5, rel=0.05)
    assert np.mean(temperature[saves // 2 :]) == pytest.approx(kt, rel=0.04)
    assert np.std(temperature[saves // 2 :]) < 0.15 * kt
    assert state.thermostat is not None  # (the key goes on with the state)


def _nose_hoover():
    return NoseHooverChain(dt=0.005, temperature=1.0, tau=0.25)


def test_a_nose_hoover_chain_is_the_replicated_chain_and_keeps_its_conserved_energy():
    system = fluid()
    times = np.linspace(0.0, 0.5, 11)
    params = MODEL.default_params()
    split = SlabRun(MODEL, params, system, _nose_hoover(), times=times, every=10, chunk=4)
    obs, _, _ = split.run()
    whole, _, _ = ParticleRun(
        MODEL, params, system, ParticleSolver(_nose_hoover()), times=times, every=10
    ).run()
    for name in ("position", "temperature", "total_energy", "conserved_energy"):
        np.testing.assert_allclose(obs[name], np.asarray(whole[name]), rtol=1e-11, atol=1e-11)
    conserved = np.asarray(obs["conserved_energy"])
    assert np.max(np.abs(conserved - conserved[0])) < 1e-3 * abs(conserved[0])
    # (the chain acts: at constant energy the run would keep its total energy)
    total = np.asarray(obs["total_energy"])
    assert np.max(np.abs(total - total[0])) > 1e2 * np.max(np.abs(conserved - conserved[0]))


def test_integrators_a_split_run_cannot_take_are_refused_in_one_line():
    system, times = fluid(), np.linspace(0.0, 0.05, 2)
    barostat = StochasticCellRescaling(
        NoseHooverChain(dt=0.005, temperature=1.0), 1.0, 1.0, 1.0, "isotropic"
    )
    with pytest.raises(ValueError, match="steps by VelocityVerlet, LangevinBaoab, NoseHoover"):
        SlabRun(MODEL, MODEL.default_params(), system, barostat, times=times, every=10)
    with pytest.raises(ValueError, match="needs a PRNG key"):
        SlabRun(
            MODEL,
            MODEL.default_params(),
            system,
            LangevinBaoab(dt=0.005, temperature=1.0),
            times=times,
            every=10,
        )
    run = SlabRun(MODEL, MODEL.default_params(), system, 0.005, times=times, every=10)
    assert run.integrator == VelocityVerlet(dt=0.005)


SPLIT = r"""
import json, sys
import jax, numpy as np
jax.config.update("jax_enable_x64", True)
from physics import md
from solvers import LangevinBaoab, NoseHooverChain, SlabRun

model = md.Wca(cutoff=1.2)
system = md.thermalize(md.lattice("fcc", 4, 0.8442), jax.random.key(0), 0.5)
times = np.linspace(0.0, 0.5, 6)
out = {}
for name, integrator in (
    ("langevin", LangevinBaoab(dt=0.005, temperature=1.5, friction=2.0)),
    ("nose_hoover", NoseHooverChain(dt=0.005, temperature=1.0, tau=0.25)),
):
    for devices in (1, 2, 4):
        run = SlabRun(
            model, model.default_params(), system, integrator, times=times, every=20,
            devices=devices, key=jax.random.key(3),
        )
        obs, _, stats = run.run()
        np.save(sys.argv[1] + f"/{name}_{devices}.npy", np.asarray(obs["position"]))
        out[f"{name}_{devices}"] = {
            "temperature": np.asarray(obs["temperature"]).tolist(),
            "builds": int(stats["neighbour_builds"]),
            "own": [int(c) for c in run.own_counts()],
        }
print("RESULT " + json.dumps(out))
"""


def test_thermostats_split_over_two_and_four_devices_are_the_run_on_one(tmp_path):
    done = on_host_devices(SPLIT, [str(tmp_path)], 4, timeout=900)
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    out = json.loads(line[len("RESULT ") :])
    for name in ("langevin", "nose_hoover"):
        one = np.load(tmp_path / f"{name}_1.npy")
        assert out[f"{name}_1"]["builds"] > 1
        for devices in (2, 4):
            several = np.load(tmp_path / f"{name}_{devices}.npy")
            run = out[f"{name}_{devices}"]
            assert sum(run["own"]) == 256 and min(run["own"]) > 0
            if name == "langevin":  # (no sum over devices enters the dynamics)
                assert np.array_equal(several, one), devices
            else:  # (the chain reads the kinetic energy summed over the devices)
                np.testing.assert_allclose(several, one, rtol=0, atol=1e-11)
            np.testing.assert_allclose(
                run["temperature"], out[f"{name}_1"]["temperature"], rtol=1e-11
            )
