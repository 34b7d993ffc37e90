"""Draw the gallery of experiments/README.md: run every example config (full size where it
takes seconds, smaller where noted) and write experiments/gallery/<name>.png.

    python experiments/make_gallery.py            # every figure (a few minutes on 2 cores)
    python experiments/make_gallery.py lorenz     # only the figures whose name contains "lorenz"

Each figure is drawn by `sim.plot` at 80 dpi and stored as a 256-colour PNG (fewer colours
where a busy figure would pass 150 kB).
`RUNS` holds the command behind each figure; experiments/README.md shows the same commands
(tests/test_readme.py checks that they agree).
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import time
from pathlib import Path

import sim

sim.configure_jax()  # float64, the compilation cache, XLA's options (as the `sim` command)
from sim._plot import save_figure
from sim.cli import main

HERE = Path(__file__).resolve().parent
GALLERY = HERE / "gallery"
DPI = 80
MAX_BYTES = 150_000

_ROBERTSON_TIMES = "[0.0, 0.0004, 0.004, 0.04, 0.4, 4.0, 40.0, 400.0, 4000.0, 40000.0]"

# figure -> (command, config, extra arguments): the gallery's runs, as on the command line.
RUNS: dict[str, tuple[str, str, list[str]]] = {
    "lotka_volterra": ("run", "lotka_volterra", []),
    "lorenz": ("run", "lorenz", []),
    "robertson": (
        "run",
        "robertson",
        [
            "--set",
            "time.t1=40000.0",
            "--set",
            f"time.save_at={_ROBERTSON_TIMES}",
            "--set",
            "solver.max_steps=100000",
        ],
    ),
    "lj_fluid": ("run", "lj_fluid", ["--set", "time.steps=2000"]),
    "gray_scott": ("run", "gray_scott", []),
    "gray_scott_text": ("run", "gray_scott_text", []),
    "kuramoto_sivashinsky": ("run", "kuramoto_sivashinsky", []),
    "kolmogorov_flow": ("run", "kolmogorov_flow", []),
    "kdv_soliton": ("run", "kdv_soliton", []),
    "burgers_shock": ("run", "burgers_shock", []),
    "heat_dirichlet": ("run", "heat_dirichlet", []),
    "predation": ("run", "predation", []),
    "bouncing_ball": ("run", "bouncing_ball", []),
    "lotka_volterra_sweep": ("sweep", "lotka_volterra_sweep", []),
    "sir_boarding_school_sweep": ("sweep", "sir_boarding_school", []),
    "lotka_volterra_sobol": ("sweep", "lotka_volterra_sobol", ["--set", "sweep.samples=1024"]),
    "lj_sweep": ("sweep", "lj_sweep", []),
    "lynx_hare": ("fit", "lynx_hare", []),
    "lynx_hare_posterior": (
        "infer",
        "lynx_hare",
        ["--chains", "2", "--warmup", "300", "--samples", "300"],
    ),
    "sir_boarding_school": ("fit", "sir_boarding_school", []),
    "heat_diffusivity_fit": ("fit", "heat_diffusivity_fit", []),
    "lj_calibration": ("fit", "lj_calibration", []),
    "lj_rdf_fit": ("fit", "lj_rdf_fit", ["--set", "time.steps=6000", "--set", "fit.replicas=1"]),
}


def command_line(name: str) -> str:
    """The shell command (from the repository root) that writes the data of figure `name`,
    followed by the `sim plot` that draws it."""
    command, config, extra = RUNS[name]
    run = shlex.join(["sim", command, f"experiments/{config}.toml", "-o", f"{name}.h5", *extra])
    return f"{run} && sim plot {name}.h5"


def compress_png(path: Path) -> None:
    """Store a PNG with a 256-colour palette (a third of the size, the same look), or
    with 128 or 64 colours where that is what keeps a busy figure under MAX_BYTES."""
    from PIL import Image

    with Image.open(path) as image:
        rgb = image.convert("RGB")
    for colors in (256, 128, 64):
        palette = rgb.quantize(
            colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
        )
        palette.save(path, optimize=True)
        if path.stat().st_size < MAX_BYTES:
            return


def draw(name: str, folder: Path) -> Path:
    command, config, extra = RUNS[name]
    out = folder / f"{name}.h5"
    try:
        main([command, str(HERE / f"{config}.toml"), "-o", str(out), "--quiet", *extra])
    except SystemExit as e:
        if e.code:
            raise
    fig = sim.plot(out)
    fig.set_dpi(DPI)
    figure = save_figure(fig, GALLERY / f"{name}.png")
    compress_png(figure)
    return figure


def main_(patterns: list[str]) -> None:
    GALLERY.mkdir(exist_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for name in RUNS:
            if patterns and not any(p in name for p in patterns):
                continue
            began = time.perf_counter()
            figure = draw(name, Path(folder))
            size = figure.stat().st_size
            warning = f"  (over {MAX_BYTES // 1000} kB)" if size > MAX_BYTES else ""
            print(
                f"{figure.relative_to(HERE)}: {size / 1000:.0f} kB, "
                f"{time.perf_counter() - began:.0f} s{warning}",
                flush=True,
            )
    print(f"done in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main_(sys.argv[1:])
