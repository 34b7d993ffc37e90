"""A sweep's compiled chunk function is kept per process by its config's text and by the
files the config reads: a model file of the same name in another folder, or the same
file changed (within a second, at the same size), is swept from its own content, not
from a function made for another."""

import numpy as np

import sim

from .test_model_sources import CONFIG, PREDATION


def test_a_model_file_of_the_same_name_elsewhere_or_changed_is_swept_from_its_content(tmp_path):
    text = CONFIG.format(model='source = "predation.py:Predation"', a="a")
    faster = PREDATION.replace('"hare": 30.0', '"hare": 45.0')  # (another start)

    def sweep(folder, model):
        folder.mkdir(exist_ok=True)
        (folder / "predation.py").write_text(model)
        (folder / "config.toml").write_text(text)
        out = folder / f"out{len(list(folder.glob('out*.h5')))}.h5"
        sim.sweep(sim.load_config(folder / "config.toml"), out)
        return np.asarray(sim.read(out).observables["hare"])

    first = sweep(tmp_path / "a", PREDATION)
    elsewhere = sweep(tmp_path / "b", faster)  # the same config text, another file
    np.testing.assert_allclose(elsewhere[:, 0], 45.0)
    np.testing.assert_allclose(first[:, 0], 30.0)
    changed = sweep(tmp_path / "a", faster)  # the first folder's file rewritten
    np.testing.assert_array_equal(changed, elsewhere)
