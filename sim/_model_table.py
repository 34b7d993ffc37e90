"""The built-in models as `sim models` shows them, written by `python -m sim._catalogue`
from the models themselves (do not edit; tests/sim/test_catalogue.py checks it)."""

MODELS = {
    "advection_diffusion": {
        "family": "pde",
        "kind": "SpectralPdeModel",
        "description": "advection-diffusion at constant velocity on a periodic box, Fourier "
        "spectral",
        "summary": "u_t + velocity * (direction . grad u) = D Laplacian(u) on a periodic box.",
        "parameters": [
            ["velocity", "1", "length/time", "real", "transport speed along `direction`"],
            ["diffusivity", "0.01", "length^2/time", "nonnegative", "diffusion coefficient D"],
        ],
        "options": [
            ["points", "[64]", "list of int", "nodes per axis (even)."],
            [
                "domain",
                "[[0, 6.28319]]",
                "[low, high] per axis",
                "(low, high) per axis; default [0, 2 pi].",
            ],
            [
                "direction",
                "none",
                "list of float",
                "the unit direction of transport (normalised here); default the first "
                "axis. The speed is the parameter `velocity`.",
            ],
        ],
        "observables": ["u", "mass"],
        "initial_field": "gaussian (width = 0.5)",
    },
    "allen_cahn": {
        "family": "pde",
        "kind": "SpectralPdeModel",
        "description": "Allen-Cahn phase separation on a periodic box, Fourier spectral",
        "summary": "Allen-Cahn phase separation u_t = D Laplacian(u) + r (u - u^3) on a periodic "
        "box "
        "(Allen and Cahn, Acta Metall. 27, 1979).",
        "parameters": [
            [
                "diffusivity",
                "0.01",
                "length^2/time",
                "positive",
                "interface energy coefficient D (epsilon^2)",
            ],
            ["rate", "1", "1/time", "positive", "reaction rate r"],
        ],
        "options": [
            ["points", "[128]", "list of int", "nodes per axis (even); 1 to 3 axes."],
            [
                "domain",
                "[[0, 6.28319]]",
                "[low, high] per axis",
                "(low, high) per axis; default [0, 2 pi].",
            ],
        ],
        "observables": ["u", "free_energy"],
        "initial_field": "random (amplitude = 0.5, max_mode = 8)",
    },
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
    "burgers": {
        "family": "pde",
        "kind": "SpectralPdeModel",
        "description": "viscous Burgers (1D scalar, 2D vector) on a periodic box, Fourier spectral",
        "summary": "Viscous Burgers on a periodic box: u_t + (u . grad) u = nu Laplacian(u).",
        "parameters": [
            ["viscosity", "0.01", "length^2/time", "nonnegative", "kinematic viscosity nu"]
        ],
        "options": [
            ["points", "[128]", "list of int", "nodes per axis (even); 1 or 2 axes."],
            [
                "domain",
                "[[0, 6.28319]]",
                "[low, high] per axis",
                "(low, high) per axis; default [0, 2 pi].",
            ],
        ],
        "observables": ["u", "mass", "energy"],
        "initial_field": "sine",
    },
    "damped_pendulum": {
        "family": "ode",
        "kind": "OdeModel",
        "description": "nonlinear pendulum with linear damping",
        "summary": "Pendulum with linear damping: theta'' = -(g / length) sin(theta) - damping "
        "theta'.",
        "parameters": [
            ["g", "9.81", "m/s^2", "positive", "gravitational acceleration"],
            ["length", "1", "m", "positive", "pendulum length"],
            ["damping", "0.1", "1/s", "nonnegative", "damping rate"],
        ],
        "options": [],
        "observables": ["theta", "omega", "energy"],
        "state": [["theta", "1"], ["omega", "0"]],
    },
    "fisher_kpp": {
        "family": "pde",
        "kind": "GridPdeModel",
        "description": "Fisher-KPP travelling fronts on a bounded box, finite differences",
        "summary": "Fisher-KPP invasion u_t = D Laplacian(u) + r u (1 - u) on a box, by finite "
        "differences (Fisher 1937; Kolmogorov, Petrovsky and Piskunov 1937).",
        "parameters": [
            ["diffusivity", "0.001", "length^2/time", "positive", "diffusion coefficient D"],
            ["rate", "1", "1/time", "positive", "growth rate r"],
        ],
        "options": [
            [
                "points",
                "[201]",
                "list of int",
                "nodes per axis (both ends included on bounded axes); default (201,).",
            ],
            ["domain", "[[0, 1]]", "[low, high] per axis", "(low, high) per axis; default [0, 1]."],
            [
                "boundary",
                "neumann",
                "value",
                'kinds as for `heat_fd`; default "neumann" (no flux).',
            ],
            [
                "boundary_value",
                "0",
                "value",
                "Dirichlet values or Neumann outward derivatives; default 0.",
            ],
        ],
        "observables": ["u", "mass"],
        "initial_field": "tanh_front (position = 0.1, width = 0.02)",
    },
    "fitzhugh_nagumo": {
        "family": "ode",
        "kind": "OdeModel",
        "description": "FitzHugh (1961) - Nagumo (1962) excitable neuron",
        "summary": "FitzHugh-Nagumo neuron: v' = v - v^3/3 - w + current, w' = (v + a - b w) / "
        "tau.",
        "parameters": [
            ["a", "0.7", "1", "real", "recovery offset"],
            ["b", "0.8", "1", "nonnegative", "recovery coupling"],
            ["tau", "12.5", "1", "positive", "recovery time scale"],
            ["current", "0.5", "1", "real", "external stimulus current"],
        ],
        "options": [],
        "observables": ["v", "w"],
        "state": [["v", "-1"], ["w", "1"]],
    },
    "geometric_brownian_motion": {
        "family": "sde",
        "kind": "SdeModel",
        "description": "geometric Brownian motion (Black & Scholes 1973)",
        "summary": "Exponential growth with proportional noise: dx = mu x dt + sigma x dW.",
        "parameters": [
            ["mu", "0.05", "1/year", "real", "drift rate (expected growth rate)"],
            ["sigma", "0.2", "1/sqrt(year)", "nonnegative", "volatility"],
        ],
        "options": [],
        "observables": ["x"],
        "state": [["x", "1"]],
    },
    "gray_scott": {
        "family": "pde",
        "kind": "SpectralPdeModel",
        "description": "Gray-Scott reaction-diffusion patterns (Pearson 1993), Fourier spectral",
        "summary": "Gray-Scott reaction-diffusion (Gray and Scott 1984; Pearson, Science 261, "
        "1993):",
        "parameters": [
            ["feed", "0.035", "1/time", "nonnegative", "feed rate F of u"],
            ["kill", "0.065", "1/time", "nonnegative", "removal rate k of v"],
            ["diffusivity_u", "2e-05", "length^2/time", "positive", "diffusion coefficient D_u"],
            ["diffusivity_v", "1e-05", "length^2/time", "positive", "diffusion coefficient D_v"],
        ],
        "options": [
            [
                "points",
                "[128, 128]",
                "list of int",
                "nodes per axis (even); 1 to 3 axes (2 is the classic).",
            ],
            [
                "domain",
                "[[0, 2.5], [0, 2.5]]",
                "[low, high] per axis",
                "(low, high) per axis; default [0, 2.5].",
            ],
        ],
        "observables": ["u", "v"],
        "initial_field": "pearson",
    },
    "heat": {
        "family": "pde",
        "kind": "SpectralPdeModel",
        "description": "diffusion (heat equation) on a periodic box, Fourier spectral",
        "summary": "Diffusion u_t = D Laplacian(u) on a periodic box (1 to 3 dimensions).",
        "parameters": [
            ["diffusivity", "0.1", "length^2/time", "positive", "diffusion coefficient D"]
        ],
        "options": [
            ["points", "[64]", "list of int", "nodes per axis (even), e.g. (64,) or (64, 64)."],
            [
                "domain",
                "[[0, 6.28319]]",
                "[low, high] per axis",
                "(low, high) per axis; default [0, 2 pi] on every axis.",
            ],
        ],
        "observables": ["u", "mass"],
        "initial_field": "sine",
    },
    "heat_fd": {
        "family": "pde",
        "kind": "GridPdeModel",
        "description": "diffusion on a bounded box (Dirichlet/Neumann/periodic), finite "
        "differences",
        "summary": "Diffusion u_t = D Laplacian(u) on a box with Dirichlet, Neumann or periodic "
        "sides, "
        "by finite differences (1 or 2 dimensions).",
        "parameters": [
            ["diffusivity", "0.1", "length^2/time", "positive", "diffusion coefficient D"]
        ],
        "options": [
            [
                "points",
                "[65]",
                "list of int",
                "nodes per axis, both ends included on bounded axes; default (65,).",
            ],
            ["domain", "[[0, 1]]", "[low, high] per axis", "(low, high) per axis; default [0, 1]."],
            [
                "boundary",
                "dirichlet",
                "value",
                '"dirichlet" (default), "neumann" or "periodic" for every side, or per axis a kind '
                "or [low, high] kinds.",
            ],
            [
                "boundary_value",
                "0",
                "value",
                "Dirichlet value or Neumann outward derivative, for every side or per axis (a "
                "number or a [low, high] pair); default 0.",
            ],
        ],
        "observables": ["u", "mass"],
        "initial_field": "sine (modes = 0.5)",
    },
    "hybrid_lotka_volterra": {
        "family": "ode",
        "kind": "OdeModel",
        "description": "Lotka-Volterra, known growth and death, learned interaction",
        "summary": "Lotka-Volterra with a learned interaction: known growth and death, "
        "unknown coupling.",
        "parameters": [
            ["alpha", "0.55", "1/year", "positive", "prey birth rate"],
            ["gamma", "0.8", "1/year", "positive", "predator death rate"],
            [
                "net",
                "random (from the model's seed)",
                "1",
                "real",
                "weights of the interaction network",
            ],
        ],
        "options": [
            ["width", "32", "int", "the network (see `Mlp`)."],
            ["depth", "2", "int", "the network (see `Mlp`)."],
            ["activation", "tanh", "str", "the network (see `Mlp`)."],
            [
                "scale",
                "20",
                "float",
                "typical population size (thousand): the network sees and returns "
                "populations in units of `scale`.",
            ],
            [
                "seed",
                "0",
                "int",
                "seed of the random initial weights; the last layer starts 100 times "
                "smaller than usual, so an untrained model is close to its known "
                "part.",
            ],
        ],
        "observables": ["prey", "predator"],
        "state": [["prey", "30"], ["predator", "4"]],
    },
    "kdv": {
        "family": "pde",
        "kind": "SpectralPdeModel",
        "description": "Korteweg-de Vries solitary waves on a periodic interval, Fourier spectral",
        "summary": "u_t + a u u_x + b u_xxx = 0 on a periodic interval (Korteweg and de Vries, "
        "1895).",
        "parameters": [
            ["nonlinearity", "6", "1", "real", "coefficient a of u u_x"],
            ["dispersion", "1", "length^3/time", "positive", "coefficient b of u_xxx"],
        ],
        "options": [
            ["points", "[256]", "list of int", "nodes (even), one axis."],
            ["domain", "[[-20, 20]]", "[low, high] per axis", "(low, high); default [-20, 20]."],
        ],
        "observables": ["u", "mass", "momentum", "energy"],
        "initial_field": "soliton",
    },
    "kuramoto_sivashinsky": {
        "family": "pde",
        "kind": "SpectralPdeModel",
        "description": "Kuramoto-Sivashinsky spatio-temporal chaos on a periodic interval, "
        "Fourier spectral",
        "summary": "u_t + (a / 2) (u^2)_x + p u_xx + q u_xxxx = 0 on a periodic interval, "
        "conservative form (Kuramoto 1978, Sivashinsky 1977); chaotic for long "
        "intervals (L > about 60).",
        "parameters": [
            ["nonlinearity", "1", "1", "real", "coefficient a of (u^2)_x / 2"],
            [
                "anti_diffusivity",
                "1",
                "length^2/time",
                "real",
                "coefficient p of u_xx (destabilising)",
            ],
            [
                "hyper_diffusivity",
                "1",
                "length^4/time",
                "positive",
                "coefficient q of u_xxxx (stabilising)",
            ],
        ],
        "options": [
            ["points", "[128]", "list of int", "nodes (even), one axis."],
            [
                "domain",
                "[[0, 100.531]]",
                "[low, high] per axis",
                "(low, high); default [0, 32 pi].",
            ],
        ],
        "observables": ["u", "mass", "energy"],
        "initial_field": "kassam_trefethen",
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
    "lorenz": {
        "family": "ode",
        "kind": "OdeModel",
        "description": "Lorenz (1963) chaotic convection",
        "summary": "The Lorenz (1963) convection model with its classic chaotic parameters.",
        "parameters": [
            ["sigma", "10", "1", "positive", "Prandtl number"],
            ["rho", "28", "1", "positive", "Rayleigh number ratio"],
            ["beta", "2.66667", "1", "positive", "aspect-ratio factor"],
        ],
        "options": [],
        "observables": ["x", "y", "z"],
        "state": [["x", "1"], ["y", "1"], ["z", "1"]],
    },
    "lotka_volterra": {
        "family": "ode",
        "kind": "OdeModel",
        "description": "predator-prey populations (Lotka 1925, Volterra 1926)",
        "summary": "Predator-prey dynamics: dx/dt = alpha x - beta x y, dy/dt = delta x y - "
        "gamma y.",
        "parameters": [
            ["alpha", "0.55", "1/year", "positive", "prey birth rate"],
            ["beta", "0.028", "1/(year*thousand)", "positive", "predation rate"],
            ["gamma", "0.8", "1/year", "positive", "predator death rate"],
            ["delta", "0.024", "1/(year*thousand)", "positive", "predator growth per prey eaten"],
        ],
        "options": [],
        "observables": ["prey", "predator"],
        "state": [["prey", "30"], ["predator", "4"]],
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
    "navier_stokes_2d": {
        "family": "pde",
        "kind": "SpectralPdeModel",
        "description": "2D incompressible Navier-Stokes (vorticity), Kolmogorov forcing, drag; "
        "Fourier spectral",
        "summary": "w_t + (u . grad) w = nu Laplacian(w) - mu w + f, with velocity (u, v) = "
        "(psi_y, -psi_x) and streamfunction Laplacian(psi) = -w, on a periodic box.",
        "parameters": [
            ["viscosity", "0.001", "length^2/time", "nonnegative", "kinematic viscosity nu"],
            ["drag", "0", "1/time", "nonnegative", "linear drag mu"],
            ["forcing", "0", "length/time^2", "real", "amplitude A of the Kolmogorov body force"],
        ],
        "options": [
            ["points", "[64, 64]", "list of int", "nodes per axis (even), two axes."],
            [
                "domain",
                "[[0, 6.28319], [0, 6.28319]]",
                "[low, high] per axis",
                "(low, high) per axis; default [0, 2 pi]^2.",
            ],
            [
                "forcing_mode",
                "4",
                "int",
                "n, the wavenumber (in periods of the box) of the forcing.",
            ],
        ],
        "observables": ["vorticity", "energy", "enstrophy"],
        "initial_field": "taylor_green",
    },
    "neural_ode": {
        "family": "ode",
        "kind": "OdeModel",
        "description": "dy/dt = MLP(features(y)), Chen et al. (2018)",
        "summary": "A neural ODE: dy/dt = MLP(features(y)), the network's weights in "
        '`params["net"]`.',
        "parameters": [
            [
                "net",
                "random (from the model's seed)",
                "1",
                "real",
                "weights of the vector-field network",
            ]
        ],
        "options": [
            [
                "state_names",
                "[y1, y2]",
                "list of str",
                "names of the state components (their number is the network's input and output "
                "size).",
            ],
            ["width", "64", "int", "the network (see `Mlp`)."],
            ["depth", "2", "int", "the network (see `Mlp`)."],
            ["activation", "tanh", "str", "the network (see `Mlp`)."],
            [
                "features",
                "identity",
                "str",
                "what the network sees: `identity` (y) or `cubic` (y**3, the input of the "
                "spiral example of Chen et al. 2018).",
            ],
            [
                "initial",
                "none",
                "list of float",
                "default initial value of each state component (zeros if omitted).",
            ],
            [
                "seed",
                "0",
                "int",
                "seed of the random initial weights that `default_params` returns.",
            ],
        ],
        "observables": ["y1", "y2"],
        "state": [["y1", "0"], ["y2", "0"]],
    },
    "ornstein_uhlenbeck": {
        "family": "sde",
        "kind": "SdeModel",
        "description": "Ornstein-Uhlenbeck mean-reverting process (Uhlenbeck & Ornstein 1930)",
        "summary": "Mean-reverting noise: dx = theta (mu - x) dt + sigma dW.",
        "parameters": [
            ["theta", "1", "1/s", "positive", "rate of reversion to the mean"],
            ["mu", "0", "1", "real", "long-term mean"],
            ["sigma", "0.5", "1/sqrt(s)", "nonnegative", "noise amplitude"],
        ],
        "options": [],
        "observables": ["x"],
        "state": [["x", "1"]],
    },
    "robertson": {
        "family": "ode",
        "kind": "OdeModel",
        "description": "Robertson (1966) stiff chemical kinetics",
        "summary": "Robertson (1966) stiff chemical kinetics, the classic stiff test problem.",
        "parameters": [
            ["k1", "0.04", "1/s", "positive", "rate of A -> B"],
            ["k2", "3e+07", "1/s", "positive", "rate of 2B -> B + C"],
            ["k3", "10000", "1/s", "positive", "rate of B + C -> A + C"],
        ],
        "options": [],
        "observables": ["y1", "y2", "y3"],
        "state": [["y1", "1"], ["y2", "0"], ["y3", "0"]],
    },
    "sir": {
        "family": "ode",
        "kind": "OdeModel",
        "description": "SIR epidemic, Kermack-McKendrick (1927)",
        "summary": "SIR epidemic (Kermack-McKendrick 1927): S' = -beta S I / N, I' = beta S I / N "
        "- gamma "
        "I.",
        "parameters": [
            ["beta", "0.3", "1/day", "positive", "transmission rate"],
            ["gamma", "0.1", "1/day", "positive", "recovery rate"],
        ],
        "options": [],
        "observables": ["susceptible", "infected", "recovered", "reproduction_number"],
        "state": [["susceptible", "0.99"], ["infected", "0.01"], ["recovered", "0"]],
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
    "stochastic_lotka_volterra": {
        "family": "sde",
        "kind": "SdeModel",
        "description": "predator-prey populations with environmental noise",
        "summary": "Predator-prey dynamics with environmental noise on both per-capita rates.",
        "parameters": [
            ["alpha", "0.55", "1/year", "positive", "prey birth rate"],
            ["beta", "0.028", "1/(year*thousand)", "positive", "predation rate"],
            ["gamma", "0.8", "1/year", "positive", "predator death rate"],
            ["delta", "0.024", "1/(year*thousand)", "positive", "predator growth per prey eaten"],
            [
                "sigma_prey",
                "0.1",
                "1/sqrt(year)",
                "nonnegative",
                "noise amplitude of the prey growth rate",
            ],
            [
                "sigma_predator",
                "0.1",
                "1/sqrt(year)",
                "nonnegative",
                "noise amplitude of the predator growth rate",
            ],
        ],
        "options": [],
        "observables": ["prey", "predator"],
        "state": [["prey", "30"], ["predator", "4"]],
    },
    "van_der_pol": {
        "family": "ode",
        "kind": "OdeModel",
        "description": "Van der Pol relaxation oscillator (stiff for large mu)",
        "summary": "Van der Pol oscillator x'' - mu (1 - x^2) x' + x = 0 as a first-order system.",
        "parameters": [["mu", "1", "1", "nonnegative", "nonlinear damping strength"]],
        "options": [],
        "observables": ["x", "v"],
        "state": [["x", "2"], ["v", "0"]],
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
