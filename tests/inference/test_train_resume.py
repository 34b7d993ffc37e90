"""Neural ODE training checkpoints its state and resumes to the parameters of an
uninterrupted run."""

import jax
import numpy as np
import optax
import pytest

import sim
from inference import _checkpoint, train
from physics.ode import NeuralOde

from .test_train import SOLVER, spiral


# One optimiser object for every call: the compiled training step is then reused.
OPTIMIZER = optax.adam(1e-2)


class Stop(Exception):
    """Stands for a crash after some checkpoints."""


def run(tmp_path, **kwargs):
    data = spiral(n=60, t1=5.0)
    model = NeuralOde(features="cubic", width=16, depth=1)
    return train(
        model, None, data, steps=24, optimizer=OPTIMIZER, solver=SOLVER, window=6, batch_size=4, seed=3,
        checkpoint=tmp_path / "train.ckpt", checkpoint_every=5, **kwargs,
    )


def test_interrupted_training_resumes_to_the_same_parameters(tmp_path):
    whole = run(tmp_path)
    assert not (tmp_path / "train.ckpt").exists()  # removed on completion
    original = _checkpoint.Checkpointer.write
    written = []

    def write(self, start, iteration, *args, **kwargs):
        original(self, start, iteration, *args, **kwargs)
        written.append(iteration)
        if len(written) == 3:
            raise Stop()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_checkpoint.Checkpointer, "write", write)
        with pytest.raises(Stop):
            run(tmp_path)
    assert written == [5, 10, 15] and (tmp_path / "train.ckpt").exists()
    resumed = run(tmp_path, resume=True)
    np.testing.assert_array_equal(resumed.loss_history, whole.loss_history)
    for a, b in zip(jax.tree.leaves(resumed.params), jax.tree.leaves(whole.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_training_checkpoint_refusals(tmp_path):
    with pytest.raises(sim.InputError, match="no checkpoint"):
        run(tmp_path, resume=True)
    (tmp_path / "train.ckpt").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 50)
    with pytest.raises(sim.InputError, match="pass --resume"):
        run(tmp_path)
    with pytest.raises(sim.DataError, match="damaged"):
        run(tmp_path, resume=True)
