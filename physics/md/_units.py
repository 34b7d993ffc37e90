"""Unit systems of particle models: reduced Lennard-Jones units and the molecular
"real" units (nm, ps, kJ/mol, amu, elementary charge; temperature in K, pressure in bar).

A model computes in its energy, length, mass and charge units; a unit system says what
temperature, pressure and Coulomb's law are in them. The factors of the real units come
from the exact SI constants (CODATA 2018: e, k_B and N_A exact, eps0 measured):

    k_B      = 1.380649e-23 J/K * N_A                     = 0.00831446261815324 kJ/mol/K
    1/(4 pi eps0) e^2 N_A                                  = 138.935458 kJ/mol nm / e^2
    1 bar    = 1e5 J/m^3 * 1e-27 m^3/nm^3 * N_A            = 0.0602214076 kJ/mol/nm^3
    1 amu/nm^3 = 1.66053906660e-27 kg / 1e-24 cm^3 * 1e3 g/kg = 1.66053906660e-3 g/cm^3

and the time unit nm sqrt(amu / (kJ/mol)) is exactly 1 ps, so velocities are nm/ps.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Units:
    """What a model's numbers mean.

    Attributes:
        name: "reduced" or "real".
        boltzmann: k_B, energy per temperature unit (kT = boltzmann * T).
        coulomb: 1 / (4 pi eps0), energy * length / charge^2 (U = coulomb q_i q_j / r).
        pressure: the pressure unit in energy / length^3 (P_internal = pressure * P).
        mass_density: the mass density unit in mass / length^3 (None: no such observable).
        labels: the H5MD unit string of each quantity (empty in reduced units, which
            carry no unit attributes).
    """

    name: str
    boltzmann: float
    coulomb: float
    pressure: float
    mass_density: float | None
    labels: dict[str, str]


REDUCED = Units("reduced", 1.0, 1.0, 1.0, None, {})

REAL = Units(
    "real",
    boltzmann=1.380649e-23 * 6.02214076e23 / 1e3,
    coulomb=138.935458,
    pressure=1e5 * 1e-27 * 6.02214076e23 / 1e3,
    mass_density=1.0 / 1.66053906660e-3,
    labels={
        "length": "nm",
        "time": "ps",
        "velocity": "nm ps-1",
        "energy": "kJ mol-1",
        "temperature": "K",
        "pressure": "bar",
        "volume": "nm+3",
        "density": "nm-3",
        "mass_density": "g cm-3",
        "mass": "u",
    },
)

UNITS = {"reduced": REDUCED, "real": REAL}


def unit_system(name: object) -> Units:
    """The unit system called `name`.

    Raises:
        ValueError: an unknown name (naming the known ones).
    """
    try:
        return UNITS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown unit system {name!r}; expected one of: {', '.join(UNITS)}") from None
