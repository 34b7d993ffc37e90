"""Draw the gallery of experiments/README.md: run every example config (full size where it
takes seconds, smaller where noted) and write experiments/gallery/<name>.png.

    python experiments/make_gallery.py            # every figure (a few minutes on 2 cores)
    python experiments/make_gallery.py lorenz     # only the configs whose name contains "lorenz"
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import sim
from sim.cli import main

HERE = Path(__file__).resolve().parent
GALLERY = HERE / "gallery"

# config -> (command, extra arguments): the gallery's runs.
RUNS = {
    "lotka_volterra": ("run", []),
    "lorenz": ("run", []),
    "robertson": ("run", ["--set", "time.t1=40000.0", "--set", "time.save_at=[0.0, 0.0004, 0.004, 0.04, 0.4, 4.0, 40.0, 400.0, 4000.0, 40000.0]", "--set", "solver.max_steps=100000"]),
    "lj_fluid": ("run", ["--set", "time.steps=2000"]),
    "gray_scott": ("run", []),
    "kuramoto_sivashinsky": ("run", []),
    "kolmogorov_flow": ("run", []),
    "kdv_soliton": ("run", []),
    "burgers_shock": ("run", []),
    "heat_dirichlet": ("run", []),
    "lotka_volterra_sweep": ("sweep", []),
    "lotka_volterra_sobol": ("sweep", ["--set", "sweep.samples=1024"]),
    "lynx_hare": ("fit", []),
    "lynx_hare_posterior": ("infer", ["--chains", "2", "--warmup", "300", "--samples", "300"]),
    "heat_diffusivity_fit": ("fit", []),
}


def draw(name: str, command: str, extra: list[str], folder: Path) -> Path:
    config = HERE / f"{name.removesuffix('_posterior')}.toml"
    out = folder / f"{name}.h5"
    try:
        main([command, str(config), "-o", str(out), "--quiet", *extra])
    except SystemExit as e:
        if e.code:
            raise
    figure = GALLERY / f"{name}.png"
    fig = sim.plot(out)
    fig.set_dpi(80)
    sim._plot.save_figure(fig, figure)
    return figure


def main_(patterns: list[str]) -> None:
    GALLERY.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        for name, (command, extra) in RUNS.items():
            if patterns and not any(p in name for p in patterns):
                continue
            figure = draw(name, command, extra, Path(folder))
            print(f"{figure.relative_to(HERE)}: {figure.stat().st_size / 1024:.0f} kB", flush=True)


if __name__ == "__main__":
    main_(sys.argv[1:])
