"""Real units (nm, ps, kJ/mol, amu, e; K, bar) beside reduced ones: the conversion
factors against CODATA constants, runs in real units equal to the same runs in reduced
units with converted targets, H5MD unit attributes that MDAnalysis converts, refusals."""

import h5py
import jax
import numpy as np
import pytest
import scipy.constants as si

import sim
from physics import md
from sim.cli import main

CONFIG = """
[model]
name = "lennard_jones"
[params]
epsilon = 0.99774
sigma = 0.3405
cutoff = 0.7
shift = true
[system]
{units}
lattice = "fcc"
cells = 3
density = 21.0
temperature = {temperature}
seed = 1
[time]
dt = 0.002
steps = 40
save_every = 10
[solver]
method = "nose_hoover"
temperature = {temperature}
tau = 0.2
barostat = {{ pressure = {pressure}, tau = 0.5, compressibility = {compressibility} }}
"""

T_KELVIN = 90.0
P_BAR = 300.0
BETA_PER_BAR = 1e-4


def write(tmp_path, name, **values):
    path = tmp_path / f"{name}.toml"
    path.write_text(CONFIG.format(**values))
    return path


def test_factors_of_the_real_units_follow_from_the_si_constants():
    real = md.unit_system("real")
    assert real.boltzmann == pytest.approx(si.k * si.N_A / 1e3, rel=1e-14)  # kJ/mol/K
    assert real.boltzmann == pytest.approx(0.0083144626, rel=1e-8)
    coulomb = si.e**2 / (4 * np.pi * si.epsilon_0) * si.N_A / 1e3 * 1e9  # kJ/mol nm / e^2
    assert real.coulomb == pytest.approx(coulomb, rel=1e-8)
    assert real.pressure == pytest.approx(si.bar * 1e-27 * si.N_A / 1e3, rel=1e-14)  # kJ/mol/nm^3
    assert real.pressure == pytest.approx(0.0602214076, rel=1e-12)
    grams_per_cm3 = si.atomic_mass * 1e3 / 1e-21  # one amu per nm^3
    assert 1.0 / real.mass_density == pytest.approx(
        grams_per_cm3, rel=1e-8
    )  # (CODATA 2018 and 2022 differ by 1.4e-9)
    # the time unit nm sqrt(amu / (kJ/mol)) is one picosecond
    assert 1e-9 * np.sqrt(si.atomic_mass / (1e3 / si.N_A)) == pytest.approx(1e-12, rel=1e-9)
    reduced = md.unit_system("reduced")
    assert (reduced.boltzmann, reduced.coulomb, reduced.pressure, reduced.labels) == (
        1.0,
        1.0,
        1.0,
        {},
    )


@pytest.mark.slow  # two NPT runs compiled; the unit factors themselves are checked by default
def test_a_real_units_run_is_the_reduced_run_with_converted_targets(tmp_path):
    """Temperatures in K and pressures in bar become kT and kJ/mol/nm^3: the same numbers
    in reduced units give the same trajectory, and the observables differ by k_B and
    the bar."""
    real = md.unit_system("real")
    a = sim.run(
        sim.load_config(
            write(
                tmp_path,
                "real",
                units='units = "real"',
                temperature=T_KELVIN,
                pressure=P_BAR,
                compressibility=BETA_PER_BAR,
            )
        )
    )
    b = sim.run(
        sim.load_config(
            write(
                tmp_path,
                "reduced",
                units="",
                temperature=repr(real.boltzmann * T_KELVIN),
                pressure=repr(P_BAR * real.pressure),
                compressibility=repr(BETA_PER_BAR / real.pressure),
            )
        )
    )
    np.testing.assert_allclose(
        a.observables["position"], b.observables["position"], rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(a.observables["box"], b.observables["box"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        a.observables["temperature"] * real.boltzmann, b.observables["temperature"], rtol=1e-12
    )
    np.testing.assert_allclose(
        a.observables["pressure"] * real.pressure, b.observables["pressure"], rtol=1e-10
    )
    assert a.observables["temperature"][0] == pytest.approx(
        T_KELVIN, rel=1e-12
    )  # Maxwell-Boltzmann at 90 K
    mass = np.sum(np.asarray(a.system.mass)) * si.atomic_mass * 1e3  # grams
    np.testing.assert_allclose(
        a.observables["mass_density"], mass / (a.observables["volume"] * 1e-21), rtol=1e-8
    )
    assert "mass_density" not in b.observables


def test_h5md_unit_attributes_let_mdanalysis_convert(tmp_path):
    from MDAnalysis.coordinates.H5MD import H5MDReader

    config = write(
        tmp_path,
        "real",
        units='units = "real"',
        temperature=T_KELVIN,
        pressure=P_BAR,
        compressibility=BETA_PER_BAR,
    )
    out = tmp_path / "real.h5"
    assert main(["run", str(config), "-o", str(out), "--quiet"]) in (0, None)
    with h5py.File(out) as f:
        units = {
            name: f[f"observables/{name}/value"].attrs["unit"]
            for name in ("temperature", "pressure", "total_energy", "mass_density")
        }
        assert units == {
            "temperature": "K",
            "pressure": "bar",
            "total_energy": "kJ mol-1",
            "mass_density": "g cm-3",
        }
        assert f["particles/all/position/value"].attrs["unit"] == "nm"
        assert f["particles/all/velocity/value"].attrs["unit"] == "nm ps-1"
        assert f["particles/all/box/edges/value"].attrs["unit"] == "nm"
        assert f["particles/all/position/time"].attrs["unit"] == "ps"
        position = f["particles/all/position/value"][2]
        velocity = f["particles/all/velocity/value"][2]
        edges = f["particles/all/box/edges/value"][2]
        time = f["particles/all/position/time"][2]
    reader = H5MDReader(str(out))  # convert_units=True: to Angstrom and ps
    assert reader.units == {"time": "ps", "length": "nm", "velocity": "nm/ps", "force": None}
    ts = reader[2]
    np.testing.assert_allclose(ts.positions, 10.0 * position, rtol=1e-6)
    np.testing.assert_allclose(ts.velocities, 10.0 * velocity, rtol=1e-6)
    np.testing.assert_allclose(ts.dimensions[:3], 10.0 * edges, rtol=1e-6)
    assert ts.time == pytest.approx(time)


def test_reduced_units_stay_the_default_without_unit_attributes(tmp_path):
    config = write(
        tmp_path, "reduced", units="", temperature=0.75, pressure=0.1, compressibility=0.1
    )
    out = sim.run(sim.load_config(config)).save(tmp_path / "reduced.h5")
    with h5py.File(out) as f:
        assert "unit" not in f["particles/all/position/value"].attrs
        assert "unit" not in f["observables/temperature/value"].attrs
        assert "mass_density" not in f["observables"]
        assert 'units = "reduced"' in f.attrs["config"]


def test_coulomb_energy_carries_the_coulomb_constant_in_real_units():
    system = md.lattice("rocksalt", 2, 0.5)
    reduced = md.LennardJonesCoulomb(cutoff=1.5, electrostatics="ewald").for_system(system)
    real = md.LennardJonesCoulomb(cutoff=1.5, electrostatics="ewald", units="real").for_system(
        system
    )
    params = reduced.default_params() | {"epsilon": np.asarray(0.0)}
    energies = jax.jit(lambda s: (real.energy(s, params), reduced.energy(s, params)))(
        system
    )  # (compiled: op by op took longer)
    ratio = float(energies[0]) / float(energies[1])
    assert ratio == pytest.approx(138.935458, rel=1e-12)


@pytest.mark.parametrize("units", ['"si"', '"Real"', "3"])
def test_an_unknown_unit_system_is_refused_in_one_line(tmp_path, capsys, units):
    config = write(
        tmp_path,
        "bad",
        units=f"units = {units}",
        temperature=T_KELVIN,
        pressure=P_BAR,
        compressibility=BETA_PER_BAR,
    )
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "-o", str(tmp_path / "bad.h5"), "--quiet"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert (
        len(err.splitlines()) == 1
        and "system.units" in err
        and "reduced, real" in err
        and str(config) in err
    )
    assert not (tmp_path / "bad.h5").exists()
