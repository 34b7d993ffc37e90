"""`sim models` answers from a table written from the models: the table must equal what the
models declare, the [system] defaults it shows must be the MD family's, and the commands
that only print must not import JAX."""

import os
import subprocess
import sys

import pytest

import sim
from sim import _catalogue
from sim._model_table import MODELS
from sim.families.md import _config as _md_config
from tests.helpers import cli_out as cli


def test_table_equals_what_the_models_declare():
    # Regenerate with `python -m sim._catalogue` when a model changes.
    assert MODELS == _catalogue.built_in()


def test_system_keys_are_the_md_familys():
    assert set(k for k, *_ in _catalogue.SYSTEM_KEYS) == set(_md_config._SYSTEM_KEYS)


def test_system_defaults_are_what_a_config_without_them_gets(tmp_path):
    # Written out (lattice fcc, cells 4, seed 0) or left to their defaults: the same system.
    base = (
        '[model]\nname = "lennard_jones"\n[time]\ndt = 0.005\nsteps = 2\n[system]\ndensity = '
        "0.8\ntemperature = 1.0\n"
    )
    defaults = {k: v for k, v, *_ in _catalogue.SYSTEM_KEYS if k in ("lattice", "cells", "seed")}
    explicit = (
        base + f'lattice = "{defaults["lattice"]}"\ncells = {defaults["cells"]}\nseed = '
        f"{defaults['seed']}\n"
    )
    systems = []
    for i, text in enumerate((base, explicit)):
        (tmp_path / f"c{i}.toml").write_text(text)
        system, seed = _md_config._md_system(sim.load_config(tmp_path / f"c{i}.toml"), float)
        systems.append(
            (
                system.position.shape,
                float(system.position.sum()),
                float(system.velocity.sum()),
                seed,
            )
        )
    assert systems[0] == systems[1]
    assert systems[0][0] == (4 * 4**3, 3)  # fcc: 4 particles a cell, 4 cells per axis


def test_models_name_shows_parameters_options_and_system(capsys):
    code, out, _ = cli(["models", "lennard_jones"], capsys)
    assert code == 0
    for word in (
        "epsilon",
        "sigma",
        "cutoff",
        "2.5",
        "shift",
        "tail_correction",
        "[system]",
        "density",
        "lattice",
        "fcc",
        "reduced",
    ):
        assert word in out, word
    code, out, _ = cli(["models", "heat"], capsys)
    assert (
        code == 0
        and "points" in out
        and "[64]" in out
        and "[grid]" in out
        and "length^2/time" in out
    )
    code, out, _ = cli(["models", "lotka_volterra"], capsys)
    assert code == 0 and "[initial]" in out and "prey" in out and "30" in out


LIGHT = ["--help", "run --help", "models", "models lennard_jones"]


@pytest.mark.parametrize("command", LIGHT + ["info"])
def test_printing_commands_import_no_numerics(command):
    script = (
        "import sys, _sim_entry\n"
        f"sys.argv = ['sim', *{command.split()!r}]\n"
        "try:\n    _sim_entry.main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    loaded = set(proc.stdout.split("\n")[-2].split())
    allowed_heavy = {"jax", "jaxlib", "numpy", "h5py"} if command == "info" else set()
    assert (
        not (
            {
                "jax",
                "jaxlib",
                "diffrax",
                "equinox",
                "numpyro",
                "physics",
                "solvers",
                "inference",
                "h5py",
                "numpy",
                "matplotlib",
            }
            - allowed_heavy
        )
        & loaded
    )
    assert "diffrax" not in loaded and "physics" not in loaded


def test_a_command_that_computes_starts_the_package(tmp_path):
    # From the command line, `sim run` runs the package's __init__ and sets JAX up
    # (`sim.configure_jax`: float64 on).
    (tmp_path / "c.toml").write_text(
        '[model]\nname = "lotka_volterra"\n[time]\nt1 = 1.0\nsave = 3\n'
    )
    script = (
        "import sys, _sim_entry\n"
        "sys.argv = ['sim', 'run', 'c.toml', '-o', 'o.h5', '--quiet']\n"
        "try:\n    _sim_entry.main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "import jax, sim\nassert jax.config.jax_enable_x64 and hasattr(sim, 'simulate') and not "
        "hasattr(sim, 'start_package')\n"
        # LAPACK runs on one thread (OpenBLAS's threads spin against XLA's on shared
        # cores) unless the user set a thread count, which stands.
        "import scipy.linalg, threadpoolctl\n"
        "print(sorted({p['num_threads'] for p in threadpoolctl.threadpool_info() if "
        "p['internal_api'] == 'openblas'}))\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
    }
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert sim.read(tmp_path / "o.h5").observables["prey"].shape == (3,)
    assert proc.stdout.strip().splitlines()[-1] == "[1]"
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**env, "OPENBLAS_NUM_THREADS": "2"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[2]"
