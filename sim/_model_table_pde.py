"""The built-in PDE models as `sim models` shows them, written by
`python -m sim._catalogue` from the models themselves (do not edit;
tests/sim/test_catalogue.py checks it)."""

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
    "navier_stokes_3d": {
        "family": "pde",
        "kind": "SpectralPdeModel",
        "description": "3D incompressible Navier-Stokes (velocity, projected), rotational or "
        "advective form; Fourier spectral",
        "summary": "u_t = P[N(u)] + nu Laplacian(u), div u = 0: incompressible Navier-Stokes "
        "for the velocity (u, v, w) on a periodic box, the pressure removed by the "
        "projection P onto divergence-free fields (P = I - k k^T / |k|^2 per "
        "Fourier mode).",
        "parameters": [
            ["viscosity", "0.01", "length^2/time", "nonnegative", "kinematic viscosity nu"]
        ],
        "options": [
            ["points", "[32, 32, 32]", "list of int", "nodes per axis (even), three axes."],
            [
                "domain",
                "[[0, 6.28319], [0, 6.28319], [0, 6.28319]]",
                "[low, high] per axis",
                "(low, high) per axis; default [0, 2 pi]^3.",
            ],
            ["form", "rotational", "str", '"rotational" or "advective".'],
        ],
        "observables": ["u", "v", "w", "energy", "enstrophy"],
        "initial_field": "taylor_green",
    },
}
