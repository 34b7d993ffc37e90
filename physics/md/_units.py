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


# Units an H5MD file may give its lengths, times and masses in (H5MD 1.1, units module:
# a unit and powers, "nm ps-1"), as multiples of the real system's nm, ps and u.
LENGTH_UNITS = {
    "nm": 1.0,
    "Angstrom": 0.1,
    "angstrom": 0.1,
    "A": 0.1,
    "\u00c5": 0.1,
    "pm": 1e-3,
    "um": 1e3,
    "m": 1e9,
}
TIME_UNITS = {"ps": 1.0, "fs": 1e-3, "ns": 1e3, "s": 1e12}
MASS_UNITS = {"u": 1.0, "amu": 1.0, "Da": 1.0, "g mol-1": 1.0}


def unit_factor(units: Units, quantity: str, unit: str) -> float:
    """The factor that turns a `quantity` ("length", "velocity" or "mass") given in
    `unit` (an H5MD unit string) into `units`' own.

    Raises:
        ValueError: a unit this does not know for the quantity, or any unit at all in
            reduced units (whose numbers carry none).
    """
    if not units.labels:
        raise ValueError(
            f"is in {unit!r}, but the run is in reduced units, which carry no units (set [system] "
            'units = "real" for a file in nm)'
        )
    unit = " ".join(unit.split())
    factor = None
    if quantity == "length":
        factor = LENGTH_UNITS.get(unit)
    elif quantity == "mass":
        factor = MASS_UNITS.get(unit)
    elif quantity == "velocity":  # "nm ps-1" or "nm/ps"
        if "/" in unit:
            length, _, time = unit.partition("/")
        else:
            length, _, time = unit.rpartition(" ")
            time = time[:-2] if time.endswith("-1") else ""
        if length in LENGTH_UNITS and time in TIME_UNITS:
            factor = LENGTH_UNITS[length] / TIME_UNITS[time]
    if factor is None:
        known = {
            "length": LENGTH_UNITS,
            "mass": MASS_UNITS,
            "velocity": {"nm ps-1": 1, "Angstrom fs-1": 1, "nm/ps": 1},
        }[quantity]
        raise ValueError(
            f"is in {unit!r}, which is not a {quantity} unit this reads (for example: "
            f"{', '.join(known)})"
        )
    return factor


def unit_system(name: object) -> Units:
    """The unit system called `name`.

    Raises:
        ValueError: an unknown name (naming the known ones).
    """
    try:
        return UNITS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown unit system {name!r}; expected one of: {', '.join(UNITS)}"
        ) from None
