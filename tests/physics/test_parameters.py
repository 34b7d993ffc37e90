"""What each parameter constraint accepts and refuses (physics.Parameter.violation): the
rule behind every "must be a positive number" of configs, simulate and fits."""

import numpy as np
import pytest

from physics import Parameter

TINY = (
    2.2250738585072014e-308  # the smallest normal float64 (XLA on CPU flushes subnormals to zero)
)


@pytest.mark.parametrize(
    "constraint, accepted, refused, reason",
    [
        ("real", [-1e308, -1.0, 0.0, 2.5, 1e308], [], ""),
        (
            "positive",
            [TINY, 1.0, 1e308, [1.0, 2.0]],
            [0.0, -0.0, -TINY, -1.0, [1.0, 0.0]],
            "a positive number",
        ),
        (
            "nonnegative",
            [0.0, -0.0, TINY, 3.0, [0.0, 1.0]],
            [-TINY, -1.0, [1.0, -1.0]],
            "a number >= 0",
        ),
        (
            "unit_interval",
            [0.0, 0.5, 1.0, [0.0, 1.0]],
            [-TINY, np.nextafter(1.0, 2.0), 2.0, [0.5, 1.5]],
            "a number in [0, 1]",
        ),
    ],
)
def test_each_constraint_accepts_and_refuses_exactly_its_values(
    constraint, accepted, refused, reason
):
    p = Parameter("k", 1.0, "1", "a rate", constraint)
    for value in accepted:
        assert p.violation(value) is None, (constraint, value)
    for value in refused:
        assert p.violation(value) == reason, (constraint, value)
    for value in (np.nan, np.inf, -np.inf, [1.0, np.nan]):
        assert p.violation(value) == "a finite number", (constraint, value)


def test_an_unknown_constraint_is_refused():
    with pytest.raises(ValueError, match="constraint 'positve' is not one of"):
        Parameter("k", 1.0, "1", "a rate", "positve")


def test_a_model_finds_each_of_its_parameters_by_name():
    import sim

    model = sim.get_model("lotka_volterra")
    assert len(model.parameters) > 1
    for p in model.parameters:
        assert model.parameter(p.name) is p
    with pytest.raises(KeyError):
        model.parameter("not_a_parameter")
