"""The family of discrete maps: iterates against exact solutions and a plain loop, runs
from configs (whole, in chunks), and what the family refuses."""

from __future__ import annotations

import h5py
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from tests.helpers import cli_out as cli


def henon_loop(a, b, x, y, n):
    """The Henon map iterated n times by a plain Python loop."""
    for _ in range(n):
        x, y = 1.0 - a * x * x + y, b * x
    return x, y


@pytest.mark.parametrize("x0", [0.05, 0.3, 0.9])
def test_the_logistic_map_at_r_2_follows_its_closed_form(x0):
    # At r = 2, 1 - 2 x_{n+1} = (1 - 2 x_n)^2, so x_n = (1 - (1 - 2 x0)^(2^n)) / 2.
    n = np.arange(0, 12)
    traj = sim.simulate(
        sim.get_model("logistic_map"), {"r": 2.0}, jnp.asarray(n, float), initial={"x": x0}
    )
    exact = (1.0 - (1.0 - 2.0 * x0) ** (2.0**n)) / 2.0
    np.testing.assert_allclose(traj.observables["x"], exact, rtol=0, atol=1e-15)
    assert int(traj.stats["num_steps"]) == 11


def test_the_henon_map_is_iterated_to_each_save_time():
    counts = [3, 10, 50, 200]
    traj = sim.simulate(
        sim.get_model("henon_map"),
        {"a": 1.4, "b": 0.3},
        jnp.asarray(counts, float),
        initial={"x": 0.1, "y": 0.0},
    )
    for k, n in enumerate(counts):
        # (from the initial values at the first save time; chaotic: a difference grows
        # by about e^0.42 a step, so the two agree to rounding times 1.5^47 at most)
        x, y = henon_loop(1.4, 0.3, 0.1, 0.0, n - counts[0])
        if n - counts[0] <= 50:
            assert traj.observables["x"][k] == pytest.approx(x, abs=1e-6)
            assert traj.observables["y"][k] == pytest.approx(y, abs=1e-6)


@pytest.mark.parametrize("chunk", [None, 2])
def test_a_run_writes_the_iterates_whole_or_in_chunks(chunk, tmp_cwd, capsys):
    text = '[model]\nname = "henon_map"\n[time]\nt0 = 0\nt1 = 40\nsave = 11\n'
    if chunk:
        text += f"[output]\nchunk = {chunk}\n"
    (tmp_cwd / "h.toml").write_text(text)
    code, _, err = cli(["run", "h.toml", "-o", "h.h5", "-q"], capsys)
    assert code == 0, err
    with h5py.File(tmp_cwd / "h.h5") as f:
        assert f.attrs["format"] == "simjax.run"
        np.testing.assert_array_equal(f["time"][:], np.arange(0, 41, 4))
        xs = f["observables/x"][:]
    want = [henon_loop(1.4, 0.3, 0.0, 0.0, n)[0] for n in range(0, 41, 4)]
    np.testing.assert_allclose(xs, want, rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    "extra, key",
    [
        ("[time]\nt0 = 0\nt1 = 10\nsave = 4\n", "time.save: the save times of a map"),
        ("[time]\nt0 = 0\nt1 = 10\nsave = 11\n[solver]\nrtol = 1e-6\n", "solver.rtol"),
        ("[time]\nt0 = 0\nt1 = 10\nsave = 11\n[checks]\nmax_growth = 2.0\n", "checks.max_growth"),
    ],
)
def test_bad_map_configs_are_refused_in_one_line(extra, key, tmp_cwd, capsys):
    (tmp_cwd / "h.toml").write_text('[model]\nname = "logistic_map"\n' + extra)
    code, _, err = cli(["run", "h.toml", "-o", "h.h5"], capsys)
    assert code == 2 and key in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_cwd / "h.h5").exists()


def test_what_a_map_cannot_do_is_refused(tmp_cwd, capsys):
    # Maps have no sweeps and no events: neither capability is declared.
    base = '[model]\nname = "logistic_map"\n[time]\nt0 = 0\nt1 = 10\nsave = 11\n'
    (tmp_cwd / "s.toml").write_text(base + "[sweep.params]\nr = { values = [2.0, 3.0] }\n")
    code, _, err = cli(["sweep", "s.toml", "-o", "s.h5"], capsys)
    assert code == 2 and "cannot be swept" in err, err
    (tmp_cwd / "e.toml").write_text(base + "[[events]]\nat = [5.0]\nset = { x = 0.5 }\n")
    code, _, err = cli(["run", "e.toml", "-o", "e.h5"], capsys)
    assert code == 2 and "events are for ODE models" in err, err


def test_a_map_run_is_drawn_as_points_joined_by_thin_lines_over_the_step(tmp_cwd, capsys):
    (tmp_cwd / "h.toml").write_text(
        '[model]\nname = "henon_map"\n[time]\nt0 = 0\nt1 = 60\nsave = 61\n'
    )
    assert cli(["run", "h.toml", "-o", "h.h5", "-q"], capsys)[0] == 0
    from sim._plot import draw

    record = sim.read(tmp_cwd / "h.h5")
    fig = draw(record)
    assert fig.axes[1].get_xlabel() == "step" and fig.axes[2].get_title() == "phase portrait"
    for ax, name in zip(fig.axes[:2], ["x", "y"], strict=True):
        (line,) = ax.get_lines()  # every iterate a point, joined by a thin line
        assert line.get_marker() == "o" and line.get_linestyle() == "-" and line.get_lw() <= 0.5
        np.testing.assert_array_equal(line.get_ydata(), record["observables"][name])
        np.testing.assert_array_equal(line.get_xdata(), np.arange(61.0))
    # the phase portrait: the iterates alone (no path between them)
    iterates = fig.axes[2].get_lines()[0]
    assert iterates.get_linestyle() == "None" and iterates.get_marker() == "o"
