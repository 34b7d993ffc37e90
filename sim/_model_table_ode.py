"""The built-in ODE models as `sim models` shows them, written by
`python -m sim._catalogue` from the models themselves (do not edit;
tests/sim/test_catalogue.py checks it)."""

MODELS = {
    "brusselator": {
        "family": "ode",
        "kind": "OdeModel",
        "description": "Prigogine-Lefever (1968) autocatalytic chemical oscillator",
        "summary": "The Brusselator (Prigogine & Lefever 1968), an autocatalytic chemical "
        "oscillator: x' = A + x^2 y - (B + 1) x, y' = B x - x^2 y. Its one fixed point "
        "(A, B / A) is stable for B < 1 + A^2; above, the concentrations settle on a "
        "limit cycle (a Hopf bifurcation at B = 1 + A^2).",
        "parameters": [
            ["A", "1", "1", "positive", "feed concentration of the first reactant"],
            ["B", "3", "1", "positive", "feed concentration of the second reactant"],
        ],
        "options": [],
        "observables": ["x", "y"],
        "state": [["x", "1"], ["y", "1"]],
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
}
