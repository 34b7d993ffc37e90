"""Neural ODE training data-parallel over several devices (`Trainer(devices=N)`,
`train(..., devices=N)`), on simulated CPU devices: each device solves its share of a
minibatch's windows and their gradient, and training takes the steps it takes on one
device (to rounding); the compiled step reduces the gradients across devices and
gathers no windows. One process of 4 devices runs both."""

import os
import subprocess

import numpy as np
import pytest

from inference import Trainer
from physics.ode import NeuralOde
from tests.helpers import host_devices, script_command

CASES = r"""
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np

import sim
from inference import Trajectories, simulate_states, train
from solvers import OdeSolver

sim.configure_jax()
assert len(jax.devices()) == 4, jax.devices()
# Lotka-Volterra trajectories as data, trained from parameters 20% off
solver = OdeSolver(method="tsit5", rtol=jnp.asarray(1e-8), atol=jnp.asarray(1e-10))
model = sim.get_model("lotka_volterra")
truth = {"alpha": 1.0, "beta": 0.1, "gamma": 1.5, "delta": 0.075}
t = jnp.linspace(0.0, 15.0, 120)
ys = simulate_states(model, truth, t, jnp.array([[10.0, 5.0], [20.0, 4.0]]), solver)
data = Trajectories(None, model.state_names, np.asarray(t), np.asarray(ys))
start = {k: 1.2 * v for k, v in truth.items()}
saved = {"truth": np.asarray(list(truth.values())), "start": np.asarray(list(start.values()))}
for devices in (1, 4):
    result = train(model, start, data, steps=8, window=10, batch_size=8, solver=solver,
                   seed=3, devices=devices)
    saved[f"loss_{devices}"] = result.loss_history
    saved[f"params_{devices}"] = np.asarray([result.params[k] for k in truth])
# the compiled step on 4 devices: gradients reduced, no minibatch gathered
from inference import Trainer
trainer = Trainer(model, window=10, batch_size=8, solver=solver, devices=4)
state = trainer.init(start, jax.random.key(0))
step = jax.jit(lambda s, time, values: trainer.step(s, time, values))
text = step.lower(state, jnp.asarray(t), jnp.asarray(ys)).compile().as_text()
saved["all_reduce"] = np.asarray("all-reduce" in text)
gathers = re.findall(r"= \w+\[([\d,]*)\]\{[^}]*\} all-gather", text)
saved["gathers"] = np.asarray(len([g for g in gathers if g and int(g.split(",")[0]) >= 8]))
np.savez(sys.argv[1], **saved)
"""


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    out = tmp_path_factory.mktemp("train_devices") / "cases.npz"
    env = {**os.environ, "XLA_FLAGS": host_devices(4)}
    env.pop("NPROC", None)
    done = subprocess.run(
        script_command(CASES, str(out)),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    with np.load(out) as f:
        return dict(f)


def test_training_on_four_devices_takes_the_steps_of_one(cases):
    one, four = cases["loss_1"], cases["loss_4"]
    assert one.shape == (8,) and np.all(np.isfinite(one))
    # (it learns: the parameters move towards those that made the data)
    distance = lambda p: np.abs(p / cases["truth"] - 1).sum()  # noqa: E731
    assert distance(cases["params_1"]) < distance(cases["start"]) - 0.05
    np.testing.assert_allclose(four, one, rtol=1e-9)
    np.testing.assert_allclose(cases["params_4"], cases["params_1"], rtol=1e-9)


def test_the_split_step_reduces_gradients_and_gathers_no_windows(cases):
    assert bool(cases["all_reduce"])
    assert int(cases["gathers"]) == 0


@pytest.mark.parametrize(
    "options, message",
    [
        ({"batch_size": 6, "devices": 4}, "must divide batch_size = 6"),
        ({"batch": "system", "devices": 2}, "use batch = 'windows'"),
        ({"devices": 0}, "devices must be a positive integer"),
        ({"batch_size": 64, "devices": 64}, "only"),
    ],
)
def test_a_split_that_cannot_be_is_refused(options, message):
    with pytest.raises(ValueError, match=message):
        Trainer(NeuralOde(features="cubic", depth=0), **{"batch_size": 8, **options})
