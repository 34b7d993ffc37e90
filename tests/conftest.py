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
