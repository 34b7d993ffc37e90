"""The built-in MAP models as `sim models` shows them, written by
`python -m sim._catalogue` from the models themselves (do not edit;
tests/sim/test_catalogue.py checks it)."""

MODELS = {
    "henon_map": {
        "family": "map",
        "kind": "MapModel",
        "description": "Henon (1976) two-dimensional map with a strange attractor",
        "summary": "The Henon map (Henon 1976), x_{n+1} = 1 - a x_n^2 + y_n, y_{n+1} = b x_n: a "
        "strange attractor at the classic a = 1.4, b = 0.3.",
        "parameters": [
            ["a", "1.4", "1", "real", "nonlinearity"],
            ["b", "0.3", "1", "real", "contraction (the Jacobian's determinant is -b)"],
        ],
        "options": [],
        "observables": ["x", "y"],
        "state": [["x", "0"], ["y", "0"]],
    },
    "logistic_map": {
        "family": "map",
        "kind": "MapModel",
        "description": "May (1976) logistic map of population growth",
        "summary": "The logistic map (May 1976), x_{n+1} = r x_n (1 - x_n): a fixed point for r < "
        "3, period doubling up to r = 3.5699..., chaos beyond.",
        "parameters": [["r", "3.7", "1", "nonnegative, in [0, 4]", "growth rate"]],
        "options": [],
        "observables": ["x"],
        "state": [["x", "0.2"]],
    },
}
