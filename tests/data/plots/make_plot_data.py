"""Write the small run files of the figure regression test (tests/sim/test_plot_images.py)
and, with --figures, their reference PNGs.

    python tests/data/plots/make_plot_data.py             # the HDF5 files (about a minute)
    python tests/data/plots/make_plot_data.py --figures   # only the reference PNGs, from them

Each file comes from an example config of experiments/, shrunk (fewer saves, points,
particles, runs, draws) so that the files stay small; the figures are drawn from the
files by `sim.plot` under `tests.sim.test_plot_images.figure_pixels`. Regenerate the PNGs
after a deliberate change of a figure, look at each, and commit them with the change.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
EXPERIMENTS = REPO / "experiments"

# name -> (command, config, extra arguments): one file per gallery figure (or its kind).
RUNS: dict[str, tuple[str, str, list[str]]] = {
    "ode_phase": ("run", "lotka_volterra", ["--set", "time.save=81"]),
    "ode_log_time": (
        "run",
        "robertson",
        [
            "--set",
            "time.t1=40000.0",
            "--set",
            "time.save_at=[0.0, 0.0004, 0.004, 0.04, 0.4, 4.0, 40.0, 400.0, 4000.0, 40000.0]",
            "--set",
            "solver.max_steps=100000",
        ],
    ),
    "pde_1d": ("run", "kuramoto_sivashinsky", ["--set", "time.save=31"]),
    "pde_2d": (
        "run",
        "gray_scott",
        ["--set", "grid.points=[32, 32]", "--set", "time.t1=1200.0", "--set", "time.save=4"],
    ),
    # (a check of the drawing, small: on 48 points the seed fades, where the gallery's 128
    # points grow spots)
    "pde_2d_text": (
        "run",
        "gray_scott_text",
        ["--set", "grid.points=[48, 48]", "--set", "time.t1=400.0", "--set", "time.save=5"],
    ),
    "md": (
        "run",
        "lj_fluid",
        ["--set", "time.steps=2000"],
    ),  # the gallery's run, trimmed (see `trim_md`)
    "sweep_grid": (
        "sweep",
        "lotka_volterra_sweep",
        [
            "--set",
            "sweep.params.alpha={linspace = [0.3, 0.8, 6]}",
            "--set",
            "sweep.params.beta={logspace = [-2.0, -1.3, 5]}",
            "--set",
            "time.save=21",
        ],
    ),
    "sweep_lines": (
        "sweep",
        "sir_boarding_school",
        ["--set", "sweep.params.beta={linspace = [1.0, 3.0, 5]}", "--set", "time.save=15"],
    ),
    "sweep_summary": ("sweep", "lotka_volterra_sobol", ["--set", "sweep.samples=64"]),
    "fit": ("fit", "lynx_hare", []),
    "fit_field": ("fit", "heat_diffusivity_fit", []),
    "posterior": ("infer", "lynx_hare", ["--chains", "2", "--warmup", "100", "--samples", "60"]),
    # the other gallery figures, by their gallery names
    "lorenz": ("run", "lorenz", ["--set", "time.save=301"]),
    "bouncing_ball": ("run", "bouncing_ball", []),
    "predation": ("run", "predation", []),
    "kdv_soliton": ("run", "kdv_soliton", ["--set", "time.save=11"]),
    "burgers_shock": ("run", "burgers_shock", ["--set", "time.save=11"]),
    "heat_dirichlet": ("run", "heat_dirichlet", []),
    "kolmogorov_flow": (
        "run",
        "kolmogorov_flow",
        ["--set", "grid.points=[32, 32]", "--set", "time.save=5"],
    ),
    "lj_sweep": ("sweep", "lj_sweep", ["--set", "time.save_every=250"]),
    "sir_boarding_school": ("fit", "sir_boarding_school", []),
    "lj_calibration": ("fit", "lj_calibration", []),
    "lj_rdf_fit": ("fit", "lj_rdf_fit", ["--set", "time.steps=2000"]),
}

# gallery figure -> the kind above that draws it from a smaller run of the same config
# (every other gallery figure has a file of its own name)
COVERS = {
    "lotka_volterra": "ode_phase",
    "robertson": "ode_log_time",
    "lj_fluid": "md",
    "gray_scott": "pde_2d",
    "gray_scott_text": "pde_2d_text",
    "kuramoto_sivashinsky": "pde_1d",
    "lotka_volterra_sweep": "sweep_grid",
    "sir_boarding_school_sweep": "sweep_lines",
    "lotka_volterra_sobol": "sweep_summary",
    "lynx_hare": "fit",
    "heat_diffusivity_fit": "fit_field",
    "lynx_hare_posterior": "posterior",
}


def make_data(names) -> None:
    from sim.cli import main

    for name in names:
        command, config, extra = RUNS[name]
        out = HERE / f"{name}.h5"
        out.unlink(missing_ok=True)
        try:
            main([command, str(EXPERIMENTS / f"{config}.toml"), "-o", str(out), "--quiet", *extra])
        except SystemExit as e:
            if e.code:
                raise
        if name == "md":
            trim_md(out)
        print(f"{out.relative_to(REPO)}: {out.stat().st_size / 1000:.0f} kB", flush=True)


def trim_md(path: Path, frames: int = 3) -> None:
    """Keep of an H5MD run the observables, the box, masses, species and the last `frames`
    frames of the positions (what the figure's g(r) reads), so that a 500-particle run stays
    small."""
    import h5py

    with h5py.File(path, "r+") as f:
        position = f["particles/all/position"]
        for key in ("value", "step", "time"):
            kept = position[key][-frames:]
            del position[key]
            position[key] = kept
        for key in ("velocity", "image", "force"):  # (not drawn)
            if key in f["particles/all"]:
                del f[f"particles/all/{key}"]
    packed = path.with_suffix(".packed")
    with h5py.File(path) as src, h5py.File(packed, "w") as dst:  # (h5py frees no space in place)
        dst.attrs.update(src.attrs)
        for key in src:
            src.copy(src[key], dst, name=key)
    packed.replace(path)


def make_figures(names) -> None:
    from PIL import Image

    sys.path.insert(0, str(REPO))
    from tests.sim.test_plot_images import figure_pixels

    for name in names:
        pixels = figure_pixels(HERE / f"{name}.h5")
        path = HERE / f"{name}.png"
        with tempfile.NamedTemporaryFile(dir=HERE, suffix=".png", delete=False) as tmp:
            Image.fromarray(pixels).save(tmp.name, optimize=True)
        Path(tmp.name).replace(path)
        print(f"{path.relative_to(REPO)}: {path.stat().st_size / 1000:.0f} kB", flush=True)


if __name__ == "__main__":
    figures_only = "--figures" in sys.argv[1:]
    names = [n for n in sys.argv[1:] if not n.startswith("--")] or list(RUNS)
    if not figures_only:
        make_data(names)
    make_figures(names)
