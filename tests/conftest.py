"""Test-wide settings: float64 and strict dtype promotion."""

import jax
import pytest

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")


@pytest.fixture
def tmp_cwd(tmp_path, monkeypatch):
    """Run a test inside a fresh temporary folder."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# The test files that take longest (measured on two cores), run first: pytest-xdist
# splits the collected tests between its workers in order and an idle worker takes
# tests from the end of the other's queue (--dist worksteal); a long file left for last
# would keep one worker running it alone while the other has nothing left to do.
_LONGEST_FIRST = (
    "tests/inference/test_bayes.py",
    "tests/inference/test_train.py",
    "tests/test_readme.py",
    "tests/sim/test_md_simulate.py",
    "tests/sim/test_sweep_md.py",
    "tests/sim/test_run_resume.py",
    "tests/inference/test_fit.py",
    "tests/solvers/test_ode.py",
    "tests/inference/test_fit_md.py",
    "tests/inference/test_fit_pde.py",
    "tests/sim/test_simulate.py",
    "tests/sim/test_md_run.py",
    "tests/sim/test_examples.py",
)


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        path = item.nodeid.split("::")[0]
        return _LONGEST_FIRST.index(path) if path in _LONGEST_FIRST else len(_LONGEST_FIRST)

    items.sort(key=rank)  # stable: tests keep their order within a file
