"""`sim run` of charged particles (lj_coulomb): the Madelung energy of rock salt in the
H5MD observables, the Coulomb virial in the pressure, energy conservation of a short NVE
run, and the configs it refuses (one line naming the key, exit 2, nothing written)."""

import os
import subprocess
import sys
from pathlib import Path

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from physics import md
from tests.helpers import cli

# Rock salt's Madelung constant referred to the nearest-neighbour distance (Johnson &
# Templeton, J. Chem. Phys. 34, 2004 (1961)).
MADELUNG_ROCKSALT = 1.747565

CONFIG = """
[model]
name = "lj_coulomb"
electrostatics = "{method}"
ewald_accuracy = {accuracy}

[params]
epsilon = 0.0
charges = [{q}, {minus_q}]
cutoff = 1.95

[system]
lattice = "rocksalt"
cells = 2
density = 1.0
temperature = 0.05
seed = 3

[time]
dt = 0.002
steps = 20
save_every = 10
"""


def write(tmp_path, method="ewald", accuracy=1e-10, q=1.0, minus_q=None, extra=""):
    path = tmp_path / f"{method}.toml"
    path.write_text(
        CONFIG.format(
            method=method, accuracy=accuracy, q=q, minus_q=-q if minus_q is None else minus_q
        )
        + extra
    )
    return path


@pytest.mark.parametrize(
    "method, accuracy, tolerance",
    [("ewald", 1e-10, 1e-6), pytest.param("pme", 1e-5, 1e-4, marks=pytest.mark.slow)],
)
def test_run_gives_the_madelung_energy_and_conserves_energy(
    tmp_path, capsys, method, accuracy, tolerance
):
    config = write(tmp_path, method, accuracy, q=1.5)
    out = tmp_path / "salt.h5"
    code, err = cli(["run", str(config), "-o", str(out), "--quiet"], capsys)
    assert code == 0, err
    with h5py.File(out) as f:
        potential = f["observables/potential_energy/value"][:]
        total = f["observables/total_energy/value"][:]
        pressure = f["observables/pressure/value"][:]
        kinetic = f["observables/kinetic_energy/value"][:]
        edges = f["particles/all/box/edges/value"][0]
        n = f["particles/all/position/value"].shape[1]
        resolved = f.attrs["config"]
    # frame 0: the ions on their lattice sites, r_nn = a / 2, 32 ion pairs of charges +-1.5
    nearest = edges[0] / 2 / 2
    madelung = -potential[0] / (n / 2) * nearest / 1.5**2
    assert madelung == pytest.approx(MADELUNG_ROCKSALT, rel=tolerance)
    # U is homogeneous of degree -1 in the lengths: the virial W = U, P = (2K + U) / 3V
    volume = float(np.prod(edges))
    assert pressure[0] == pytest.approx(
        (2 * kinetic[0] + potential[0]) / (3 * volume), rel=tolerance
    )
    # forces are the energy's: velocity Verlet keeps the total energy over 20 steps
    assert np.max(np.abs(total - total[0])) < 1e-5 * abs(total[0])
    # what the accuracy chose is in the resolved config, so the run can be remade exactly
    assert "ewald_alpha = " in resolved and (
        "ewald_kmax" in resolved if method == "ewald" else "pme_mesh" in resolved
    )


# Madelung constants referred to the nearest-neighbour distance, and that distance in
# lattice constants (Johnson & Templeton, J. Chem. Phys. 34, 2004 (1961)).
CRYSTALS = {
    "rocksalt": (MADELUNG_ROCKSALT, 0.5),
    "caesium_chloride": (1.762675, 3**0.5 / 2),
    "zincblende": (1.638055, 3**0.5 / 4),
}


# (rock salt: the test above; zinc blende, which the command runs as it runs the others,
# with -m slow: tests/physics/test_md_electrostatics.py checks every crystal's constant)
@pytest.mark.parametrize(
    "lattice", ["caesium_chloride", pytest.param("zincblende", marks=pytest.mark.slow)]
)
def test_sim_run_of_each_perfect_crystal_gives_its_madelung_constant(tmp_path, capsys, lattice):
    # Ions of charge +-1 on their sites at rest, Ewald at accuracy 1e-10: frame 0's
    # potential energy per ion pair is -M / r_nn.
    text = CONFIG.format(method="ewald", accuracy=1e-10, q=1.0, minus_q=-1.0)
    text = text.replace('lattice = "rocksalt"', f'lattice = "{lattice}"').replace(
        "cells = 2", "cells = 3"
    )
    text = text.replace("cutoff = 1.95", "cutoff = 1.85").replace(
        "temperature = 0.05", "temperature = 0.0"
    )
    config = tmp_path / f"{lattice}.toml"
    config.write_text(
        text.replace("steps = 20", "steps = 1").replace("save_every = 10", "save_every = 1")
    )
    out = tmp_path / f"{lattice}.h5"
    code, err = cli(["run", str(config), "-o", str(out), "--quiet"], capsys)
    assert code == 0, err
    with h5py.File(out) as f:
        potential = float(f["observables/potential_energy/value"][0])
        edges = f["particles/all/box/edges/value"][0]
        n = f["particles/all/position/value"].shape[1]
    expected, ratio = CRYSTALS[lattice]
    nearest = ratio * float(edges[0]) / 3
    assert -potential / (n / 2) * nearest == pytest.approx(expected, rel=1e-6)


def test_a_charged_system_is_refused(tmp_path, capsys):
    config = write(tmp_path, minus_q=-0.5)
    out = tmp_path / "out.h5"
    code, err = cli(["run", str(config), "-o", str(out)], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert (
        len(lines) == 1 and str(config) in lines[0] and "params.charges = [1.0, -0.5]" in lines[0]
    ), err
    assert "net charge is 16" in lines[0] and "neutral" in lines[0]
    assert "Traceback" not in err and not out.exists()


@pytest.mark.parametrize(
    "replace, key, words",
    [
        (
            ("charges = [1.0, -1.0]", "charges = [1.0, -1.0, 0.0]"),
            "params.charges",
            "expected a list of 2 numbers",
        ),
        (("charges = [1.0, -1.0]", "charges = 1.0"), "params.charges", "one per species"),
        (("cutoff = 1.95", "cutoff = 2.5"), "system", "shorter than twice the cutoff 2.5"),
        (
            ('electrostatics = "ewald"', 'electrostatics = "p3m"'),
            "model.electrostatics",
            "expected one of: ewald, pme",
        ),
        (
            ("ewald_accuracy = 1e-10", "ewald_accuracy = 0.0"),
            "model.ewald_accuracy",
            "above 0 and at most 0.01",
        ),
        (
            ("ewald_accuracy = 1e-10", "ewald_accuracy = 0.999999"),
            "model.ewald_accuracy",
            "above 0 and at most 0.01",
        ),
        (
            ("ewald_accuracy = 1e-10", "ewald_accuracy = 1e-10\npme_order = 5"),
            "model.pme_order",
            "applies to electrostatics = 'pme', not 'ewald'",
        ),
        (
            ("ewald_accuracy = 1e-10", "ewald_accuracy = 1e-10\npme_mesh = [8, 8, 8]"),
            "model.pme_mesh",
            "does not apply to electrostatics = 'ewald'",
        ),
        (
            ("ewald_accuracy = 1e-10", "ewald_accuracy = 1e-10\newald_kmax = 5"),
            "model.ewald_kmax",
            "three whole numbers",
        ),
        (
            ("cutoff = 1.95", 'cutoff = 1.95\nelectrostatics = "pme"'),
            "params.electrostatics",
            "[model] electrostatics = 'ewald' and [params] electrostatics = 'pme' disagree",
        ),
        (
            ("ewald_accuracy = 1e-10", "ewald_accuracy = 1e-10\newald_alpha = 1e308"),
            "ewald_alpha = 1e+308",
            "lower ewald_alpha",
        ),
        (("ewald_accuracy = 1e-10", "pme_order = 12"), "model.pme_order", "from 3 to 8"),
        (
            ("ewald_accuracy = 1e-10", "ewald_accuracy = 1e-300"),
            "ewald_accuracy = 1e-300",
            "loosen ewald_accuracy",
        ),
        (
            ("cutoff = 1.95", 'cutoff = 1.95\nelectrostatics = "p3m"'),
            "params.electrostatics",
            "expected one of: ewald, pme",
        ),
        (
            ("cutoff = 1.95", "cutoff = 1.95\npme_mesh = [8, 8]"),
            "params.pme_mesh",
            "three whole numbers",
        ),
        (("cutoff = 1.95", "cutoff = 1.95\npme_order = 2.5"), "params.pme_order", "whole number"),
    ],
)
def test_bad_electrostatics_configs_name_the_key(tmp_path, capsys, replace, key, words):
    config = write(tmp_path)
    text = config.read_text()
    assert replace[0] in text
    config.write_text(text.replace(replace[0], replace[1]))
    out = tmp_path / "out.h5"
    code, err = cli(["run", str(config), "-o", str(out)], capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(config) in lines[0] and key in lines[0] and words in lines[0], (
        err
    )
    assert not out.exists()


def test_electrostatics_options_may_sit_in_params_as_the_cutoff_does(tmp_path, capsys):
    config = write(tmp_path)
    text = (
        config.read_text()
        .replace('electrostatics = "ewald"\n', "")
        .replace("cutoff = 1.95", 'cutoff = 1.95\nelectrostatics = "ewald"\newald_kmax = [9, 9, 9]')
    )
    config.write_text(text.replace("steps = 20", "steps = 10"))
    out = tmp_path / "out.h5"
    code, err = cli(["run", str(config), "-o", str(out), "--quiet"], capsys)
    assert code == 0, err
    with h5py.File(out) as f:
        resolved = f.attrs["config"]
    assert 'electrostatics = "ewald"' in resolved and "ewald_kmax = [\n    9," in resolved


def test_the_command_refuses_an_unknown_method_in_one_line(tmp_path):
    config = write(tmp_path)
    config.write_text(
        config.read_text().replace('electrostatics = "ewald"', 'electrostatics = "pppm"')
    )
    out = tmp_path / "out.h5"
    sim = Path(sys.executable).with_name("sim")
    done = subprocess.run(
        [str(sim), "run", str(config), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "model.electrostatics" in lines[0] and "'pppm'" in lines[0], (
        done.stderr
    )
    assert "Traceback" not in done.stderr and not out.exists()


@pytest.mark.slow  # (compiles the reverse pass of a run: 40 s on a loaded machine)
def test_gradients_through_a_trajectory_match_finite_differences():
    # 10 velocity Verlet steps of a hot rock-salt crystal with PME, differentiated with
    # respect to the charge magnitude q (charges [q, -q]: neutral for every q) and epsilon
    system = md.thermalize(md.lattice("rocksalt", 2, 0.8442), jax.random.key(1), 0.5)
    model = md.LennardJonesCoulomb(cutoff=2.0, electrostatics="pme")
    t = jnp.linspace(0.0, 0.05, 3)

    @jax.jit
    def loss(q, epsilon):
        params = {"epsilon": epsilon, "sigma": jnp.asarray(1.0), "charges": jnp.stack([q, -q])}
        traj = sim.simulate(model, params, t, initial=system)
        return jnp.mean(traj.observables["potential_energy"][1:]) + jnp.mean(
            traj.observables["pressure"][1:]
        )

    q, epsilon = jnp.asarray(0.8), jnp.asarray(1.0)
    grad = jax.jit(jax.grad(loss, argnums=(0, 1)))(q, epsilon)
    h = 1e-5
    numeric = (
        (loss(q + h, epsilon) - loss(q - h, epsilon)) / (2 * h),
        (loss(q, epsilon + h) - loss(q, epsilon - h)) / (2 * h),
    )
    for value, expected in zip(grad, numeric, strict=False):
        assert float(value) == pytest.approx(float(expected), rel=1e-5)
