"""The built-in SDE models as `sim models` shows them, written by
`python -m sim._catalogue` from the models themselves (do not edit;
tests/sim/test_catalogue.py checks it)."""

MODELS = {
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
}
