"""MD through `sim.simulate`: conservation, thermostats, a published state point,
gradients through trajectories, overflow handled by the engine, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from physics import md
from solvers import LangevinBaoab, NoseHooverChain, ParticleSolver, VelocityVerlet
from tests.helpers import optimised


def lj_liquid(cells=4, density=0.8442, temperature=0.8, seed=0):
    return md.thermalize(md.lattice("fcc", cells, density), jax.random.key(seed), temperature)


def relative_drift(total):
    e = np.asarray(total)
    return float(np.max(np.abs(e - e[0])) / abs(e[0]))


def nve_drift(steps, cells):
    model = md.LennardJones(cutoff=2.5, shift=True)
    t = jnp.linspace(0.0, steps * 0.005, 51)
    traj = sim.simulate(model, None, t, initial=lj_liquid(cells), solver=VelocityVerlet(dt=0.005))
    assert int(traj.stats["result"]) == 0
    return relative_drift(traj.observables["total_energy"]), traj


@pytest.mark.slow
def test_nve_energy_drift_over_10000_steps():
    drift, _ = nve_drift(10000, 6)  # 864 particles
    assert drift < 1e-4, drift


# A neighbour list with room for the 84 neighbours the long run below reaches (it starts
# with 73: grown along the way, it compiled the run's chunk once more; the growth is
# tested below), in chunks of 10 saves of 20 steps: the fixture's program is the long
# run's too.
ROOMY = ParticleSolver(VelocityVerlet(0.005), capacity=96, chunk_steps=200)


@pytest.fixture(scope="module")
def small_run():
    """One NVE run of 108 particles with a neighbour list, shared by the tests below so
    that it is compiled and run once."""
    model = md.LennardJones(cutoff=2.5, shift=True)
    system = lj_liquid(3, 0.8)
    t = jnp.linspace(0.0, 1.0, 11)
    return model, system, t, sim.simulate(model, None, t, initial=system, solver=ROOMY)


def test_nve_energy_is_conserved_short(small_run):
    # 2,000 steps of the fixture's 108 particles, ten chunks of the fixture's program,
    # the drift measured every 200 steps: 3.8e-5 (2.8e-5 to 5.2e-5 from three other
    # starting velocities).
    model, system, _, _ = small_run
    traj = sim.simulate(model, None, jnp.linspace(0.0, 10.0, 101), initial=system, solver=ROOMY)
    assert int(traj.stats["result"]) == 0
    drift = relative_drift(traj.observables["total_energy"][::10])
    assert drift < 1e-4, drift
    assert int(traj.stats["neighbour_builds"]) > 10  # the list was rebuilt along the way


def test_neighbour_list_and_all_pairs_give_the_same_trajectory(small_run):
    model, system, t, with_list = small_run
    without = sim.simulate(
        model,
        None,
        t,
        initial=system,
        solver=ParticleSolver(VelocityVerlet(0.005), neighbour_list=False),
    )
    np.testing.assert_allclose(
        np.asarray(with_list.observables["position"]),
        np.asarray(without.observables["position"]),
        atol=1e-10,
    )


def test_overflow_is_handled_by_the_engine(small_run):
    # start with room for 4 neighbours: the engine must grow the list and redo the chunk,
    # giving exactly the run a large enough list gives
    model, system, t, roomy = small_run
    small = sim.simulate(
        model,
        None,
        t,
        initial=system,
        solver=ParticleSolver(VelocityVerlet(0.005), capacity=4, chunk_steps=40),
    )
    assert int(small.stats["result"]) == 0
    assert int(small.stats["capacity"]) > 4
    np.testing.assert_allclose(
        np.asarray(small.observables["total_energy"]),
        np.asarray(roomy.observables["total_energy"]),
        rtol=1e-12,
    )


def canonical_check(traj, dof, target):
    skip = len(traj.time) // 4  # equilibration
    temperature = np.asarray(traj.observables["temperature"])[skip:]
    kinetic = np.asarray(traj.observables["kinetic_energy"])[skip:]
    mean, err = md.block_average(temperature, 10)
    assert abs(mean - target) / target < 0.01, (mean, err)
    # canonical kinetic-energy fluctuations: var(K) = N_f (kT)^2 / 2
    expected = dof * target**2 / 2
    assert np.var(kinetic) == pytest.approx(expected, rel=0.25)


def thermostat_run(thermostat, cells, saves, friction):
    model = md.LennardJones(cutoff=2.5, shift=True)
    system = lj_liquid(cells, 0.8, temperature=1.5)  # start hot: the thermostat must cool it
    target = 1.0
    if thermostat == "langevin":
        integrator = LangevinBaoab(dt=0.005, temperature=target, friction=friction)
        dof = 3 * system.n
    else:
        integrator = NoseHooverChain(dt=0.005, temperature=target, tau=0.25)
        dof = 3 * system.n - 3
    t = jnp.linspace(0.0, 0.05 * saves, saves + 1)  # save every 10 steps
    with (
        optimised()
    ):  # (4,000 steps or more: compiled with LLVM's optimisations, they run in less time)
        traj = sim.simulate(
            model, None, t, initial=system, solver=integrator, key=jax.random.key(1)
        )
    canonical_check(traj, dof, target)
    if thermostat == "nose_hoover":
        h = np.asarray(traj.observables["conserved_energy"])
        assert np.max(np.abs(h - h[0])) / abs(h[0]) < 1e-3


# Nose-Hoover by default; Langevin with `-m slow` (by default the NIST state point below
# checks Langevin sampling of the canonical ensemble, and tests/solvers/test_particles.py
# its exact Boltzmann statistics on harmonic springs).
@pytest.mark.parametrize(
    "thermostat", [pytest.param("langevin", marks=pytest.mark.slow), "nose_hoover"]
)
def test_thermostats_hold_the_temperature_with_canonical_fluctuations(thermostat):
    # strong friction decorrelates the kinetic energy within ~10 steps, so a short run
    # pins the mean temperature well below 1%
    thermostat_run(thermostat, 4, 400, friction=10.0)


@pytest.mark.slow
@pytest.mark.parametrize("thermostat", ["langevin", "nose_hoover"])
def test_thermostats_hold_the_temperature_long(thermostat):
    thermostat_run(thermostat, 5, 4000, friction=1.0)


NIST_U, NIST_P = -5.5121, 6.7714e-3


def state_point(steps, seed):
    """Potential energy per particle and pressure every 20 steps of a Langevin run at
    the NIST state point, after the first fifth (equilibration) of the run."""
    # NIST Standard Reference Simulation Website, Lennard-Jones fluid, Monte Carlo NVT,
    # N = 500, cutoff 3 sigma with long-range corrections, T* = 0.85:
    # rho* = 0.776: U*/N = -5.5121, p* = 6.7714e-3 (https://www.nist.gov/mml/csd/
    # chemical-informatics-research-group/lennard-jones-fluid-properties).
    model = md.LennardJones(cutoff=3.0, tail_correction=True)
    system = lj_liquid(5, 0.776, 0.85, seed)
    t = jnp.linspace(0.0, steps * 0.005, steps // 20 + 1)
    with optimised():  # (2,000 steps or more: see thermostat_run)
        traj = sim.simulate(
            model,
            None,
            t,
            initial=system,
            solver=LangevinBaoab(dt=0.005, temperature=0.85, friction=1.0),
            key=jax.random.key(seed),
        )
    skip = len(t) // 5
    return np.asarray(traj.observables["potential_energy"])[skip:] / system.n, np.asarray(
        traj.observables["pressure"]
    )[skip:]


def test_lennard_jones_state_point_short():
    # 2000 steps (10 time units). The bounds come from the spread of this run over seeds,
    # measured over seeds 0-23 (differences from NIST: mean, standard deviation, largest):
    #   u - U: -0.0026, 0.0069, 0.017                  (seed 0, tested here: -0.0003)
    #   p - P: -0.021,  0.043,  0.089                  (seed 0: -0.024)
    # A short run cannot pin the pressure closer: its spread is that of the physical
    # fluctuations (saving every 2 steps instead of 20 leaves it at 0.052 over seeds 0-9).
    # But p and u fluctuate together (correlation 0.89 over the seeds), and U is known:
    # the control-variate estimate p - b (u - U), b the slope of p on u within the run
    # (4.1 to 5.3), scatters far less around P:
    #   p - b (u - U) - P: -0.0087, 0.021, 0.041       (seed 0: -0.023)
    # Each bound is the size of the mean offset plus 4 standard deviations. (Part of the
    # pressure's offset is that of molecular dynamics against NIST's Monte Carlo: see the
    # long test below.)
    u, p = state_point(2000, 0)
    slope = np.cov(p, u)[0, 1] / np.var(u, ddof=1)
    assert abs(u.mean() - NIST_U) < 0.03, u.mean()
    assert abs(p.mean() - NIST_P) < 0.2, p.mean()
    assert abs(p.mean() - slope * (u.mean() - NIST_U) - NIST_P) < 0.1, (p.mean(), u.mean(), slope)


# NIST's values come from Monte Carlo, which samples the truncated potential with its step
# at the cutoff; molecular dynamics, moved by the forces, does not see the step (presumably
# the cause of what follows). LAMMPS's MD, as simjax's, gives NIST's energy but a pressure
# lower by about 0.01 (0.009 at NIST's energy, by the control variate below: ten standard
# errors), at dt 0.0025 as at 0.005. So the long run holds
# simjax's pressure to that of LAMMPS (version 2025.7.22) under the same conditions, 16
# runs of experiments/data/lammps_lj_state_point.py (Langevin, friction 1, step 0.005,
# 40,000 steps, the first fifth dropped): means with their standard errors and the
# standard deviation of one run:
#   p:              -0.00410 +- 0.00402   (sd 0.0161; NIST: 0.0068)
#   u:              -5.51251 +- 0.00084   (sd 0.0034; NIST: -5.5121)
#   p - b (u - U):  -0.00220 +- 0.00092   (sd 0.0037)
# (b the slope of p on u within the run, U NIST's energy: the control variate of the
# short test above, which scatters far less from run to run than p itself.)
LAMMPS_P, LAMMPS_P_SE, LAMMPS_P_SD = -0.00410, 0.00402, 0.0161
LAMMPS_U_SD = 0.0034
LAMMPS_CONTROL, LAMMPS_CONTROL_SE, LAMMPS_CONTROL_SD = -0.00220, 0.00092, 0.0037


@pytest.mark.slow
def test_lennard_jones_state_point_long():
    u, p = state_point(40000, 1)
    slope = np.cov(p, u)[0, 1] / np.var(u, ddof=1)
    control = p.mean() - slope * (u.mean() - NIST_U)
    # (bounds from the run-to-run deviations measured with LAMMPS: the error from blocks of
    # one run's series scatters from run to run nearly as much as the estimate itself)
    assert abs(u.mean() - NIST_U) < 3 * LAMMPS_U_SD, u.mean()
    assert abs(p.mean() - LAMMPS_P) < 3 * np.hypot(LAMMPS_P_SD, LAMMPS_P_SE), p.mean()
    assert abs(control - LAMMPS_CONTROL) < 3 * np.hypot(LAMMPS_CONTROL_SD, LAMMPS_CONTROL_SE), (
        control,
        slope,
    )


def test_a_run_inside_jit_starts_with_a_roomier_list_as_it_cannot_grow():
    # Outside jax.jit a run grows its list when it overflows, so it starts tight
    # (CAPACITY_FACTOR); inside, an overflow would end it, so its list has the room of
    # TRACED_CAPACITY_FACTOR. Both from the neighbours counted at the start.
    from solvers._neighbours import CAPACITY_FACTOR, NeighbourList, _max_count
    from solvers._particle_run import TRACED_CAPACITY_FACTOR, ParticleRun

    model = md.LennardJones(cutoff=2.5)
    system = lj_liquid(3, 0.8)
    solver = ParticleSolver(VelocityVerlet(0.005))
    times = np.linspace(0.0, 0.1, 3)
    probe = NeighbourList.allocate(system.position, system.space.box, 2.5, solver.skin)
    most = int(_max_count(probe, system.position, system.space.box))
    outside = ParticleRun(
        model, model.default_params(), system, solver, times=times, every=10
    ).problem.neighbour_list.capacity
    inside = []
    jax.jit(
        lambda x: (
            inside.append(
                ParticleRun(
                    model, model.default_params(), system, solver, times=times, every=10
                ).problem.neighbour_list.capacity
            )
            or x
        )
    )(0.0)
    assert outside == max(int(np.ceil(CAPACITY_FACTOR * most)), most + 2)
    assert inside == [max(int(np.ceil(TRACED_CAPACITY_FACTOR * most)), most + 2)]
    assert inside[0] > outside
    # vmapped over its parameters, a run cannot read its flag either
    batched = []
    jax.vmap(
        lambda e: (
            batched.append(
                ParticleRun(
                    model,
                    {**model.default_params(), "epsilon": e},
                    system,
                    solver,
                    times=times,
                    every=10,
                ).problem.neighbour_list.capacity
            )
            or e
        )
    )(jnp.ones(2))
    assert batched == inside


def test_gradients_match_finite_differences():
    # force-shifted: forces continuous at the cutoff, so the trajectory is differentiable
    # in the parameters (with a force jump, pairs crossing the cutoff add terms that
    # autodiff cannot see)
    model = md.LennardJones(cutoff=2.5, force_shift=True)
    system = lj_liquid(3, 0.8)
    t = jnp.linspace(0.0, 0.2, 5)  # 40 steps, neighbour list rebuilt along the way

    # Compiled whole, with the system closed over: its neighbour list is sized from the
    # concrete positions while the program is traced (that once raised a concretization
    # error), and cannot grow in the program (an overflow would be flagged in the result).
    # (One program gives the loss, the result and the gradient, the differences' values
    # too.)
    def loss_and_result(params):
        traj = sim.simulate(model, params, t, initial=system)
        loss = jnp.mean(traj.observables["potential_energy"][1:]) + jnp.mean(
            traj.observables["pressure"][1:]
        )
        return loss, traj.stats["result"]

    value_and_grad = jax.jit(jax.value_and_grad(loss_and_result, has_aux=True))

    def loss(params):
        return value_and_grad(params)[0][0]

    params = {"epsilon": jnp.asarray(1.0), "sigma": jnp.asarray(1.0)}
    (_, result), grad = value_and_grad(params)
    assert int(result) == 0
    for name in ("epsilon", "sigma"):
        h = 1e-5
        up = loss({**params, name: params[name] + h})
        down = loss({**params, name: params[name] - h})
        fd = (up - down) / (2 * h)
        assert float(grad[name]) == pytest.approx(float(fd), rel=1e-5), name


def test_bad_input_is_refused_with_a_clear_message():
    model = md.LennardJones(cutoff=2.5)
    t = jnp.linspace(0.0, 0.1, 3)
    system = lj_liquid(3, 0.8)
    overlapping = system.at(system.position.at[1].set(system.position[0] + 0.01))
    with pytest.raises(ValueError, match="particles 0 and 1 overlap"):
        sim.simulate(model, None, t, initial=overlapping)
    with pytest.raises(ValueError, match="shorter than twice the cutoff"):
        sim.simulate(model, None, t, initial=lj_liquid(2, 0.8))
    with pytest.raises(ValueError, match="whole number of time steps"):
        sim.simulate(model, None, jnp.linspace(0.0, 0.1, 4), initial=system)
    with pytest.raises(ValueError, match="no parameter 'epsilom'"):
        sim.simulate(model, {"epsilom": 1.0}, t, initial=system)
    with pytest.raises(TypeError, match="particle integrator"):
        sim.simulate(model, None, t, initial=system, solver=sim.get_model("lorenz"))
    with pytest.raises(
        ValueError, match="unknown model 'lenard_jones'.*Perhaps you meant 'lennard_jones'"
    ):
        sim.get_model("lenard_jones")
