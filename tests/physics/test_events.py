"""Events of ODE models: triggers located by root finding, assignments, terminal and timed
events, in one compiled solve; checked against exact solutions (a bouncing ball, a dosing
schedule of one-compartment kinetics) and gradients against finite differences."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from solvers import OdeSolver
from tests.helpers import cli

G, E, H = 9.81, 0.8, 1.0

BALL = """
[model]
name = "ball"
[model.states]
x = "v"
v = "-g"
[model.parameters]
g = 9.81
restitution = 0.8
[initial]
x = 1.0
v = 0.0
[time]
t1 = 3.0
save = 31
[solver]
rtol = 1e-10
atol = 1e-12
max_events = 16

[[events]]
when = "x < 0"
set = { x = "0", v = "-restitution * v" }
"""


def ball_height(t: float, h: float = H, e: float = E) -> float:
    """Height of a ball dropped from h at rest, bouncing with restitution e (exact)."""
    first = np.sqrt(2 * h / G)
    if t < first:
        return h - 0.5 * G * t * t
    start, speed = first, e * G * first
    while t >= start + 2 * speed / G:
        start, speed = start + 2 * speed / G, e * speed
    s = t - start
    return speed * s - 0.5 * G * s * s


def test_a_bouncing_ball_from_its_config_follows_the_exact_flight(tmp_cwd, capsys):
    Path("ball.toml").write_text(BALL)
    code, err = cli(["run", "ball.toml", "-o", "ball.h5", "--quiet"], capsys)
    assert code == 0, err
    record = sim.read("ball.h5")
    exact = [ball_height(float(t)) for t in record.time]
    # Measured: 5e-14; the event times are found to 1e-12 by Newton's method.
    np.testing.assert_allclose(record.observables["x"], exact, rtol=0, atol=1e-9)


# (reverse mode through the scan of solves: about 10 s to compile; the dosing test checks a gradient
# by default)
@pytest.mark.slow
def test_gradients_flow_through_event_times(tmp_cwd):
    """d x(2)/d restitution and d x(2)/d x(0) against central finite differences: x(2)
    lies after three bounces, so both depend on the located event times."""
    config = sim.load_config(_write("ball.toml", BALL))
    s = sim.setup(config)
    solver = OdeSolver(rtol=1e-11, atol=1e-13)
    t = jnp.linspace(0.0, 2.0, 3)

    def height(e, h):
        return sim.simulate(
            s.model, {**s.params, "restitution": e}, t, initial={"x": h, "v": 0.0}, solver=solver
        ).observables["x"][-1]

    np.testing.assert_allclose(height(E, H), ball_height(2.0), rtol=1e-10)
    de, dh = jax.grad(height, argnums=(0, 1))(E, H)
    step = 1e-6
    fd_e = (height(E + step, H) - height(E - step, H)) / (2 * step)
    fd_h = (height(E, H + step) - height(E, H - step)) / (2 * step)
    exact_e = (ball_height(2.0, e=E + step) - ball_height(2.0, e=E - step)) / (2 * step)
    np.testing.assert_allclose(de, fd_e, rtol=1e-6)
    np.testing.assert_allclose(de, exact_e, rtol=1e-6)
    np.testing.assert_allclose(dh, fd_h, rtol=1e-6)


DOSING = """
[model]
name = "pk"
[model.states]
c = "-k * c"
[model.parameters]
k = 0.7
dose = 2.0
[initial]
c = 0.0
[time]
t1 = 4.0
save = 41
[solver]
rtol = 1e-11
atol = 1e-13
max_events = 8

[[events]]
at = [0.5, 1.25, 2.0, 3.1]
set = { c = "c + dose" }
"""


def dosing_exact(t, k=0.7, dose=2.0, times=(0.5, 1.25, 2.0, 3.1)):
    return sum(dose * np.exp(-k * (t - s)) * (t >= s) for s in times)


def test_a_dosing_schedule_is_the_sum_of_its_doses_and_differentiates(tmp_cwd):
    # The run the config describes (the solve `sim run` makes of it, with the config's
    # solver; the command's file of a run with events is checked on the bouncing ball
    # above) and its gradient with respect to the elimination rate, through the doses:
    # one compiled program gives the saved values, the gradient and the values the
    # differences take.
    s = sim.setup(sim.load_config(_write("pk.toml", DOSING)))

    def c_end(k):
        c = sim.simulate(
            s.model, {**s.params, "k": k}, s.t, initial=s.initial, solver=s.solver
        ).observables["c"]
        return c[-1], c

    value_and_grad = jax.jit(jax.value_and_grad(c_end, has_aux=True))
    (_, c), gradient = value_and_grad(jnp.asarray(0.7))
    t = np.asarray(s.t)
    assert t.shape == (41,) and t[-1] == 4.0
    np.testing.assert_allclose(c, dosing_exact(t), rtol=1e-9, atol=1e-12)
    exact = sum(-(4.0 - d) * 2.0 * np.exp(-0.7 * (4.0 - d)) for d in (0.5, 1.25, 2.0, 3.1))
    np.testing.assert_allclose(gradient, exact, rtol=1e-8)
    shifted = [value_and_grad(jnp.asarray(0.7 + h))[0][0] for h in (1e-6, -1e-6)]
    np.testing.assert_allclose(gradient, (shifted[0] - shifted[1]) / 2e-6, rtol=1e-6)


@pytest.mark.slow  # (each run with events compiles its own scan of solves)
def test_a_terminal_event_ends_the_run(tmp_cwd, capsys):
    terminal = BALL.replace(
        'set = { x = "0", v = "-restitution * v" }', 'set = { v = "0" }\nterminal = true'
    )
    Path("stop.toml").write_text(terminal)
    code, err = cli(["run", "stop.toml", "-o", "stop.h5", "--quiet"], capsys)
    assert code == 0, err
    record = sim.read("stop.h5")
    landing = np.sqrt(2 * H / G)
    after = np.asarray(record.time) >= landing
    np.testing.assert_allclose(np.asarray(record.observables["x"])[after], 0.0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(record.observables["v"])[after], 0.0, atol=0)


@pytest.mark.slow  # (a second compilation of the solve with events, batched)
def test_a_sweep_runs_events(tmp_cwd, capsys):
    Path("sweep.toml").write_text(BALL + "[sweep.params]\nrestitution = { values = [0.8, 0.85] }\n")
    code, err = cli(["sweep", "sweep.toml", "-o", "sweep.h5", "--quiet"], capsys)
    assert code == 0, err
    swept = np.asarray(sim.read("sweep.h5").observables["x"])
    for i, e in enumerate((0.8, 0.85)):
        np.testing.assert_allclose(
            swept[i], [ball_height(float(t), e=e) for t in np.linspace(0.0, 3.0, 31)], atol=1e-9
        )


@pytest.mark.slow  # (as the terminal event)
def test_more_events_than_allowed_is_a_failure_not_a_result(tmp_cwd, capsys):
    """The ball bounces six times in 3 s: with max_events = 3 the run stops with exit 1
    and no file (a bouncing ball with restitution below 1 bounces without end before it
    comes to rest; max_events is what stops such a run)."""
    Path("zeno.toml").write_text(BALL.replace("max_events = 16", "max_events = 3"))
    code, err = cli(["run", "zeno.toml", "-o", "zeno.h5"], capsys)
    assert code == 1 and "more events fired than [solver] max_events allows" in err, err
    assert not Path("zeno.h5").exists()


FALL = """
[model]
name = "fall"
[model.states]
x = "-rate"
hit = "0"
[model.parameters]
rate = 0.5
[initial]
x = 1.0
hit = -1.0
[time]
t1 = 2.0
save = 5
[solver]
rtol = 1e-10
atol = 1e-12

[[events]]
when = "sqrt(0.7 - x) > 0.1"
set = { hit = "t" }
"""


def test_a_condition_undefined_before_it_becomes_true_fires_at_its_exact_time(tmp_cwd, capsys):
    """x = 1 - t / 2 falls through 0.7, where sqrt(0.7 - x) becomes defined, and the
    condition sqrt(0.7 - x) > 0.1 becomes true at x = 0.69, t = 0.62 (exact): a NaN side
    makes the comparison false, as it does in the condition itself, so the event fires
    there (it never fired when the trigger was NaN before it crossed)."""
    Path("fall.toml").write_text(FALL)
    code, err = cli(["run", "fall.toml", "-o", "fall.h5", "--quiet"], capsys)
    assert code == 0, err
    hit = np.asarray(sim.read("fall.h5").observables["hit"])
    # Measured: 4e-16.
    np.testing.assert_allclose(hit, [-1.0, -1.0, 0.62, 0.62, 0.62], rtol=0, atol=1e-9)


# Conditions with a side that is undefined (NaN) for part of the run, x = 1 - rate * t
# falling from 1, and the exact time each becomes true (rate = 0.5). Each stays true once
# it is (a condition true for less than one step of the solver may be missed, as any
# detection by sign changes between steps may miss it).
UNDEFINED = {
    "sqrt(0.7 - x) > 0.1": 0.62,  # NaN, then false, then true at x = 0.69
    "sqrt(0.7 - x) > -1": 0.6,  # NaN, then true at once where x = 0.7 (a jump)
    "not (sqrt(x - 0.7) >= 0.1)": 0.58,  # true at x = 0.71, and where NaN
    "log(0.7 - x) > -3 or x < 0.2": 2 * (0.3 + np.exp(-3.0)),  # NaN or false, then the log side
    "x <= 0.5 and sqrt(0.9 - x) > 0.6": 1.0,  # NaN and false, false, then true at x = 0.5
    # true at the start, false from x = 0.94 (then NaN), true again at t = 1.5
    "t > 1.5 or sqrt(x - 0.9) > 0.2": 1.5,
}


@pytest.mark.slow  # (one compilation of a solve with six events: about 40 s)
def test_conditions_with_undefined_sides_fire_at_their_exact_times(tmp_cwd):
    """Each condition of UNDEFINED records the time it fires in a state of its own: `and`,
    `or` and `not` of relations with a NaN side judge that relation false, as the
    condition itself does; the times against the exact ones."""
    states = "".join(f'h{i} = "0"\n' for i in range(len(UNDEFINED)))
    initial = "".join(f"h{i} = -1.0\n" for i in range(len(UNDEFINED)))
    events = "".join(
        f'[[events]]\nwhen = "{w}"\nset = {{ h{i} = "t" }}\n' for i, w in enumerate(UNDEFINED)
    )
    text = (
        FALL.split("[[events]]")[0].replace('hit = "0"\n', states).replace("hit = -1.0\n", initial)
        + events
    )
    s = sim.setup(
        sim.load_config(
            _write("fall.toml", text.replace("atol = 1e-12\n", "atol = 1e-12\nmax_events = 8\n"))
        )
    )
    observables = sim.simulate(
        s.model, s.params, jnp.linspace(0.0, 2.0, 3), initial=s.initial, solver=s.solver
    ).observables
    # Measured: 1e-16 where the condition is finite; 6e-13 at the jump (bisected to the tolerance).
    np.testing.assert_allclose(
        [observables[f"h{i}"][-1] for i in range(len(UNDEFINED))],
        list(UNDEFINED.values()),
        rtol=0,
        atol=1e-9,
    )


@pytest.mark.slow  # (reverse mode through the scan of solves: about 15 s to compile)
def test_an_event_time_next_to_an_undefined_side_differentiates(tmp_cwd):
    """The time sqrt(0.7 - x) > 0.1 fires, 0.31 / rate, and its derivative -0.31 / rate^2
    (by the implicit function theorem at the root, where the condition is finite: no NaN
    of the undefined side leaks into it), against the exact values and central finite
    differences."""
    s = sim.setup(sim.load_config(_write("fall.toml", FALL)))

    def fired(rate):
        return sim.simulate(
            s.model,
            {**s.params, "rate": rate},
            jnp.linspace(0.0, 2.0, 3),
            initial=s.initial,
            solver=s.solver,
        ).observables["hit"][-1]

    value_and_grad = jax.jit(jax.value_and_grad(fired))
    value, gradient = value_and_grad(jnp.asarray(0.5))
    np.testing.assert_allclose(value, 0.62, rtol=1e-12)
    np.testing.assert_allclose(gradient, -0.31 / 0.25, rtol=1e-9)
    shifted = [value_and_grad(jnp.asarray(0.5 + h))[0] for h in (1e-6, -1e-6)]
    np.testing.assert_allclose(gradient, (shifted[0] - shifted[1]) / 2e-6, rtol=1e-6)


@pytest.mark.parametrize(
    "events, key",
    [
        ('[[events]]\nwhen = "x == 0"\nset = { v = "0" }', "events.0.when"),
        ('[[events]]\nwhen = "x < 0 or v"\nset = { v = "0" }', "events.0.when"),
        ('[[events]]\nwhen = "x < 0"\nset = { w = "0" }', "events.0.set.w"),
        ('[[events]]\nwhen = "x < 0"\nset = { v = "-restitutio * v" }', "events.0.set.v"),
        ('[[events]]\nat = [2.0, 1.0]\nset = { v = "0" }', "events.at"),
        ('[[events]]\nwhen = "x < 0"\nat = [1.0]\nset = { v = "0" }', "events.when"),
        ('[[events]]\nwhen = "x < 0"', "events.set"),
    ],
)
def test_bad_events_are_one_line_errors(events, key, tmp_cwd, capsys):
    Path("ball.toml").write_text(BALL.split("[[events]]")[0] + events + "\n")
    code, err = cli(["run", "ball.toml", "-o", "out.h5"], capsys)
    assert (
        code == 2 and len(err.strip().splitlines()) == 1 and key in err and "Traceback" not in err
    ), err
    assert not Path("out.h5").exists()


def test_events_are_for_ode_models(tmp_cwd, capsys):
    Path("heat.toml").write_text(
        '[model]\nname = "heat"\n[grid]\npoints = [16]\n[time]\nt1 = 1.0\nsave = 3\ndt = '
        "0.1\n[[events]]\nat = [0.5]\nterminal = true\n"
    )
    code, err = cli(["run", "heat.toml", "-o", "out.h5"], capsys)
    assert code == 2 and "events: events are for ODE models" in err, err


def _write(path: str, text: str) -> Path:
    Path(path).write_text(text)
    return Path(path)
