"""Neural ODE training checkpoints its state and resumes to the parameters of an
uninterrupted run."""

import jax
import numpy as np
import pytest

import sim
from inference import _checkpoint, train

from .test_train import PERTURBED, SHORT, SOLVER, SPIRAL_MODEL, spiral_training_data


class Stop(Exception):
    """Stands for a crash after some checkpoints."""


def run(tmp_path, **kwargs):
    # The training of the short-window stage of tests/inference/test_train.py (the same
    # model, data, solver, windows and optimiser object): in one process the two reuse
    # one compiled training step.
    _, training = spiral_training_data()
    return train(
        SPIRAL_MODEL,
        PERTURBED,
        training,
        steps=24,
        optimizer=SHORT.optimizer,
        solver=SOLVER,
        window=SHORT.window,
        batch_size=SHORT.batch_size,
        seed=3,
        checkpoint=tmp_path / "train.ckpt",
        checkpoint_every=5,
        **kwargs,
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
    for a, b in zip(jax.tree.leaves(resumed.params), jax.tree.leaves(whole.params), strict=False):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_training_checkpoint_refusals(tmp_path):
    with pytest.raises(sim.InputError, match="no checkpoint"):
        run(tmp_path, resume=True)
    (tmp_path / "train.ckpt").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 50)
    with pytest.raises(sim.InputError, match="pass --resume"):
        run(tmp_path)
    with pytest.raises(sim.DataError, match="damaged"):
        run(tmp_path, resume=True)
