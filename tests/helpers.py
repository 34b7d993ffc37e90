"""Shared test helpers: the `sim` command run in-process, tree comparison and fitted
convergence orders."""

import jax
import numpy as np
import pytest

from sim.cli import main


def cli(argv, capsys):
    """Run `sim ARGV` in this process: (exit code, what it wrote to stderr)."""
    code, _, err = cli_out(argv, capsys)
    return code, err


def cli_out(argv, capsys):
    """Run `sim ARGV` in this process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(argv)
        raise SystemExit(0)
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def tree_allclose(a, b, *, rtol=1e-10, atol=0.0) -> bool:
    """True when two pytrees have the same structure and close leaves."""
    leaves_a, tree_a = jax.tree.flatten(a)
    leaves_b, tree_b = jax.tree.flatten(b)
    if tree_a != tree_b:
        return False
    return all(np.allclose(x, y, rtol=rtol, atol=atol) for x, y in zip(leaves_a, leaves_b))


def fitted_order(step_sizes, errors) -> float:
    """Slope of log(error) against log(step size): the observed order of accuracy."""
    slope, _ = np.polyfit(np.log(np.asarray(step_sizes)), np.log(np.asarray(errors)), 1)
    return float(slope)
