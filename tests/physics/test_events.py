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


@pytest.mark.slow  # (reverse mode through the scan of solves: about 10 s to compile; the dosing test checks a gradient by default)
def test_gradients_flow_through_event_times(tmp_cwd):
    """d x(2)/d restitution and d x(2)/d x(0) against central finite differences: x(2)
    lies after three bounces, so both depend on the located event times."""
    config = sim.load_config(_write("ball.toml", BALL))
    s = sim.setup(config)
    solver = OdeSolver(rtol=1e-11, atol=1e-13)
    t = jnp.linspace(0.0, 2.0, 3)

    def height(e, h):
        return sim.simulate(s.model, {**s.params, "restitution": e}, t, initial={"x": h, "v": 0.0}, solver=solver).observables["x"][-1]

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
        c = sim.simulate(s.model, {**s.params, "k": k}, s.t, initial=s.initial, solver=s.solver).observables["c"]
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
    terminal = BALL.replace('set = { x = "0", v = "-restitution * v" }', 'set = { v = "0" }\nterminal = true')
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
        np.testing.assert_allclose(swept[i], [ball_height(float(t), e=e) for t in np.linspace(0.0, 3.0, 31)], atol=1e-9)


@pytest.mark.slow  # (as the terminal event)
def test_more_events_than_allowed_is_a_failure_not_a_result(tmp_cwd, capsys):
    """The ball bounces six times in 3 s: with max_events = 3 the run stops with exit 1
    and no file (a bouncing ball with restitution below 1 bounces without end before it
    comes to rest; max_events is what stops such a run)."""
    Path("zeno.toml").write_text(BALL.replace("max_events = 16", "max_events = 3"))
    code, err = cli(["run", "zeno.toml", "-o", "zeno.h5"], capsys)
    assert code == 1 and "more events fired than [solver] max_events allows" in err, err
    assert not Path("zeno.h5").exists()


@pytest.mark.parametrize(
    "events, key",
    [
        ('[[events]]\nwhen = "x < 0 and v < 0"\nset = { v = "0" }', "events.0.when"),
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
    assert code == 2 and len(err.strip().splitlines()) == 1 and key in err and "Traceback" not in err, err
    assert not Path("out.h5").exists()


def test_events_are_for_ode_models(tmp_cwd, capsys):
    Path("heat.toml").write_text('[model]\nname = "heat"\n[grid]\npoints = [16]\n[time]\nt1 = 1.0\nsave = 3\ndt = 0.1\n[[events]]\nat = [0.5]\nterminal = true\n')
    code, err = cli(["run", "heat.toml", "-o", "out.h5"], capsys)
    assert code == 2 and "events: events are for ODE models" in err, err


def _write(path: str, text: str) -> Path:
    Path(path).write_text(text)
    return Path(path)
