"""Event conditions of text ODE models with each comparison (<, <=, >, >=), crossed
rising and falling: an event fires where its condition becomes true, never where it
becomes false. Checked against the sign of the comparison itself (the trigger's root
function, over generated values) and against exact event times of solves whose values
are known in closed form (x = t, y = 1 - t, cos t)."""

from pathlib import Path
from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import sim
from physics.ode._events import text_events

OPS = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}


@settings(deadline=None, max_examples=60)
@given(
    op=st.sampled_from(sorted(OPS)),
    x=st.floats(-10, 10),
    c=st.floats(-10, 10),
    swapped=st.booleans(),
)
def test_the_trigger_of_each_comparison_is_positive_exactly_where_the_comparison_holds(
    op, x, c, swapped
):
    # The root function of `x OP c` (or `c OP x`) against NumPy's comparison of the same
    # numbers: positive where it holds, negative where it does not. A sign taken the
    # wrong way for one operator (e.g. `>` as `<`) makes the event fire where the
    # condition becomes false.
    model = SimpleNamespace(state_names=("x",), parameter_names=("c",))
    text = f"c {op} x" if swapped else f"x {op} c"
    (event,) = text_events(model, [{"when": text, "set": {"c": "0"}}])
    g = float(event.trigger(0.0, jnp.asarray([x]), {"c": jnp.asarray(c)}))
    holds = OPS[op](c, x) if swapped else OPS[op](x, c)
    if x == c:
        assert g == 0.0
    else:
        assert (g > 0) == bool(holds), (text, x, c, g)
        assert abs(g) == pytest.approx(
            abs(x - c), rel=1e-12
        )  # (the difference itself: what root finding locates)


@settings(deadline=None, max_examples=60)
@given(
    x=st.floats(-10, 10),
    c=st.floats(-10, 10),
    d=st.floats(-10, 10),
    op=st.sampled_from(sorted(OPS)),
)
def test_and_or_not_of_comparisons_are_positive_exactly_where_they_hold(x, c, d, op):
    # Joined conditions against Python's own `and`, `or`, `not` of the same comparisons
    # (a sign taken the wrong way for a join makes an event fire where it becomes false).
    model = SimpleNamespace(state_names=("x",), parameter_names=("c", "d"))
    values = {"x": x, "c": c, "d": d}
    for text in (
        f"not (x {op} c)",
        f"x {op} c and x < d",
        f"x {op} c or x > d",
        f"not (x {op} c or x > d)",
    ):
        (event,) = text_events(model, [{"when": text, "set": {"c": "0"}}])
        g = float(event.trigger(0.0, jnp.asarray([x]), {"c": jnp.asarray(c), "d": jnp.asarray(d)}))
        holds = eval(text, {}, values)  # (the same text as Python evaluates it)
        if g != 0.0:  # (0: on the boundary of one of the relations)
            assert (g > 0) == holds, (text, values, g)


# Conditions and the exact time each first becomes true on x = t, y = 1 - t (x' = 1 from
# 0, y' = -1 from 1) and cos t, over 0 <= t <= 6; None: the condition never becomes true
# (it holds at the start, which does not fire an event, and later becomes false: a
# crossing in the wrong direction for it).
DEFAULT = {
    "x > 0.3": 0.3,  # > rising: fires
    "y > 0.4": None,  # > falling: must not fire
    "y < 0.4": 0.6,  # < falling: fires
    "x <= 0.3": None,  # <= rising: must not fire
    "cos(t) >= 0.5": 5 * np.pi / 3,  # >= falling at pi/3 (no), rising at 5 pi/3 (fires)
    "cos(t) < 0.5": np.pi / 3,  # < falling at pi/3 (fires), rising at 5 pi/3 (no)
}
MORE = {
    "x >= 0.3": 0.3,
    "x < 0.3": None,
    "y <= 0.4": 0.6,
    "y >= 0.4": None,
    "0.5 < x": 0.5,  # the state on the right-hand side
    "0.5 > y": 0.5,
    "0.5 <= y": None,
    "0.5 >= x": None,
    "cos(t) > 0.5": 5 * np.pi / 3,
    "cos(t) <= 0.5": np.pi / 3,
}


def _fired(conditions: dict, tmp: Path) -> list[float]:
    """The time each condition's event fired (-1 where it never did), each recorded in a
    state of its own, from one compiled solve."""
    states = 'x = "1"\ny = "-1"\n' + "".join(f'h{i} = "0"\n' for i in range(len(conditions)))
    initial = "x = 0.0\ny = 1.0\n" + "".join(f"h{i} = -1.0\n" for i in range(len(conditions)))
    events = "".join(
        f'[[events]]\nwhen = "{w}"\nset = {{ h{i} = "t" }}\n' for i, w in enumerate(conditions)
    )
    config = tmp / "compare.toml"
    config.write_text(
        f'[model]\nname = "compare"\n[model.states]\n{states}[initial]\n{initial}'
        "[time]\nt1 = 6.0\nsave = 2\n[solver]\nrtol = 1e-10\natol = 1e-12\nmax_events = "
        f"16\n{events}"
    )
    s = sim.setup(sim.load_config(config))
    observables = sim.simulate(
        s.model, s.params, jnp.linspace(0.0, 6.0, 2), initial=s.initial, solver=s.solver
    ).observables
    return [float(observables[f"h{i}"][-1]) for i in range(len(conditions))]


def _check(conditions: dict, tmp: Path) -> None:
    want = [-1.0 if t is None else t for t in conditions.values()]
    got = _fired(conditions, tmp)
    # Measured: 2e-16 (the times are located by Newton's method to well below 1e-9).
    for text, g, w in zip(conditions, got, want, strict=False):
        assert abs(g - w) <= 1e-9, f"{text!r} fired at {g!r}, expected {w!r} (-1: never)"


def test_each_comparison_fires_where_it_becomes_true_and_not_where_it_becomes_false(tmp_path):
    _check(DEFAULT, tmp_path)


@pytest.mark.slow  # (a solve with ten events: about 20 s to compile)
def test_every_comparison_with_either_side_fires_at_its_exact_time(tmp_path):
    _check(MORE, tmp_path)
