"""The built-in molecular dynamics (MD) models as `sim models` shows them, written by
`python -m sim._catalogue` from the models themselves (do not edit;
tests/sim/test_catalogue.py checks it)."""

MODELS = {
    "bead_spring": {
        "family": "md",
        "kind": "PairModel",
        "description": "bead-spring polymer chains: WCA beads and harmonic bonds",
        "summary": "Bead-spring polymers: WCA between all beads plus harmonic bonds (1/2) bond_k "
        "(r "
        "- bond_length)^2 between the bonded pairs of `System.bonds` (a "
        "Kremer-Grest-like chain model with harmonic instead of FENE springs).",
        "parameters": [
            ["epsilon", "1", "reduced", "positive", "depth of the potential well"],
            ["sigma", "1", "reduced", "positive", "particle diameter (where phi = 0)"],
            ["bond_k", "100", "reduced", "positive", "spring constant of a bond"],
            ["bond_length", "1", "reduced", "positive", "rest length of a bond"],
        ],
        "options": [
            [
                "cutoff",
                "1.5",
                "float",
                "neighbour-list range; at least 2^(1/6) times the largest sigma.",
            ],
            ["n_species", "1", "int", "number of species."],
            [
                "units",
                "reduced",
                "str",
                'the unit system, "reduced" or "real" (a keyword of every particle model; a '
                "config sets it with [system] units).",
            ],
        ],
        "observables": [
            "potential_energy",
            "kinetic_energy",
            "total_energy",
            "temperature",
            "pressure",
            "volume",
            "density",
        ],
    },
    "lennard_jones": {
        "family": "md",
        "kind": "PairModel",
        "description": "Lennard-Jones 12-6 particles, truncated (and shifted) at a cutoff",
        "summary": "Lennard-Jones 12-6 fluid: phi(r) = 4 epsilon [(sigma/r)^12 - (sigma/r)^6], "
        "truncated at `cutoff` (absolute length) and optionally shifted to zero there.",
        "parameters": [
            ["epsilon", "1", "reduced", "positive", "depth of the potential well"],
            ["sigma", "1", "reduced", "positive", "particle diameter (where phi = 0)"],
        ],
        "options": [
            ["cutoff", "2.5", "float", "truncation distance (neighbour-list range)."],
            [
                "n_species",
                "1",
                "int",
                "number of particle species; epsilon and sigma may then be [n_species, "
                "n_species] matrices.",
            ],
            [
                "units",
                "reduced",
                "str",
                'the unit system, "reduced" or "real" (a keyword of every particle model; a '
                "config sets it with [system] units).",
            ],
            ["shift", "false", "bool", "subtract phi(cutoff) so the energy is continuous."],
            [
                "force_shift",
                "false",
                "bool",
                "also subtract (r - cutoff) phi'(cutoff), so that energy and force are both "
                "continuous at the cutoff (the linear force-shifted potential of Toxvaerd & "
                "Dyre, J. Chem. Phys. 134, 081102 (2011)); trajectories are then smooth in "
                "the parameters, which gradients through long runs need.",
            ],
            [
                "tail_correction",
                "false",
                "bool",
                "add the long-range corrections (3-D periodic systems).",
            ],
        ],
        "observables": [
            "potential_energy",
            "kinetic_energy",
            "total_energy",
            "temperature",
            "pressure",
            "volume",
            "density",
        ],
    },
    "lj_coulomb": {
        "family": "md",
        "kind": "PairModel",
        "description": "Lennard-Jones plus point charges per species, Coulomb by Ewald or "
        "particle-mesh Ewald",
        "summary": "Lennard-Jones particles with point charges per species, the Coulomb sum by "
        "Ewald "
        "summation or smooth particle-mesh Ewald (3-D periodic boxes, neutral systems).",
        "parameters": [
            [
                "epsilon",
                "1",
                "reduced",
                "nonnegative",
                "depth of the Lennard-Jones well (0: charges only)",
            ],
            [
                "sigma",
                "1",
                "reduced",
                "positive",
                "particle diameter (where the Lennard-Jones phi = 0)",
            ],
            [
                "charges",
                "[1, -1]",
                "reduced",
                "real",
                "charge of each species, q / sqrt(4 pi eps0 sigma epsilon) (n_species values)",
            ],
        ],
        "options": [
            [
                "cutoff",
                "2.5",
                "float",
                "the Lennard-Jones and real-space cutoff (at most half the box).",
            ],
            ["n_species", "2", "int", "number of species; charges has one entry per species."],
            [
                "units",
                "reduced",
                "str",
                'the unit system, "reduced" or "real" (a keyword of every particle model; a '
                "config sets it with [system] units).",
            ],
            [
                "shift",
                "false",
                "bool",
                "subtract the Lennard-Jones phi(cutoff) (the Coulomb term is not shifted).",
            ],
            [
                "tail_correction",
                "false",
                "bool",
                "add the Lennard-Jones long-range corrections to energy and pressure (as "
                "`LennardJones`).",
            ],
            ["electrostatics", "pme", "str", '"ewald" or "pme".'],
            [
                "ewald_accuracy",
                "1e-05",
                "float",
                "the relative accuracy that chooses what is not given below (alpha from the "
                "cutoff, then k-vectors or mesh from the box).",
            ],
            [
                "ewald_alpha",
                "0",
                "float",
                "the splitting parameter alpha (0: sqrt(-ln accuracy) / cutoff).",
            ],
            [
                "ewald_kmax",
                "[]",
                "list of int",
                "largest |n| of the k-vectors per axis (ewald; (): from the accuracy).",
            ],
            ["pme_mesh", "[]", "list of int", "mesh points per axis (pme; (): from the accuracy)."],
            [
                "pme_order",
                "5",
                "int",
                "B-spline order p of the charge spreading (3 to 8; 5 as LAMMPS).",
            ],
        ],
        "observables": [
            "potential_energy",
            "kinetic_energy",
            "total_energy",
            "temperature",
            "pressure",
            "volume",
            "density",
        ],
    },
    "morse": {
        "family": "md",
        "kind": "PairModel",
        "description": "Morse pair potential, truncated (and shifted) at a cutoff",
        "summary": "Morse potential phi(r) = epsilon [(1 - exp(-alpha (r - r0)))^2 - 1], truncated "
        "at "
        "`cutoff` (and shifted to zero there with `shift`).",
        "parameters": [
            ["epsilon", "1", "reduced", "positive", "well depth"],
            ["alpha", "5", "1/length", "positive", "inverse width of the well"],
            ["r0", "1", "reduced", "positive", "distance of the minimum"],
        ],
        "options": [
            ["cutoff", "2.5", "float", "truncation distance."],
            [
                "n_species",
                "1",
                "int",
                "number of species (per-pair epsilon, alpha and r0 as matrices).",
            ],
            [
                "units",
                "reduced",
                "str",
                'the unit system, "reduced" or "real" (a keyword of every particle model; a config '
                "sets it with [system] units).",
            ],
            ["shift", "false", "bool", "subtract phi(cutoff)."],
        ],
        "observables": [
            "potential_energy",
            "kinetic_energy",
            "total_energy",
            "temperature",
            "pressure",
            "volume",
            "density",
        ],
    },
    "soft_sphere": {
        "family": "md",
        "kind": "PairModel",
        "description": "soft repulsive spheres, epsilon/alpha (1 - r/sigma)^alpha",
        "summary": "Soft spheres: phi(r) = epsilon / alpha (1 - r / sigma)^alpha for r < sigma, "
        "else 0 (harmonic contact for alpha = 2; foams, jamming).",
        "parameters": [
            ["epsilon", "1", "reduced", "positive", "depth of the potential well"],
            ["sigma", "1", "reduced", "positive", "contact diameter"],
            ["alpha", "2", "1", "positive", "exponent (2: harmonic contact)"],
        ],
        "options": [
            ["cutoff", "1.5", "float", "neighbour-list range; must be at least the largest sigma."],
            [
                "n_species",
                "1",
                "int",
                "number of species (per-pair epsilon and sigma as matrices).",
            ],
            [
                "units",
                "reduced",
                "str",
                'the unit system, "reduced" or "real" (a keyword of every particle model; a '
                "config sets it with [system] units).",
            ],
        ],
        "observables": [
            "potential_energy",
            "kinetic_energy",
            "total_energy",
            "temperature",
            "pressure",
            "volume",
            "density",
        ],
    },
    "wca": {
        "family": "md",
        "kind": "PairModel",
        "description": "Weeks-Chandler-Andersen purely repulsive Lennard-Jones",
        "summary": "Weeks-Chandler-Andersen: the repulsive part of Lennard-Jones, truncated at its "
        "minimum "
        "2^(1/6) sigma and shifted up by epsilon (purely repulsive, smooth to first order).",
        "parameters": [
            ["epsilon", "1", "reduced", "positive", "depth of the potential well"],
            ["sigma", "1", "reduced", "positive", "particle diameter (where phi = 0)"],
        ],
        "options": [
            [
                "cutoff",
                "1.5",
                "float",
                "neighbour-list range; must be at least 2^(1/6) times the largest sigma.",
            ],
            [
                "n_species",
                "1",
                "int",
                "number of species (per-pair epsilon and sigma as matrices).",
            ],
            [
                "units",
                "reduced",
                "str",
                'the unit system, "reduced" or "real" (a keyword of every particle model; a config '
                "sets it with [system] units).",
            ],
        ],
        "observables": [
            "potential_energy",
            "kinetic_energy",
            "total_energy",
            "temperature",
            "pressure",
            "volume",
            "density",
        ],
    },
}
