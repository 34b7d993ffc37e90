"""Figures against stored references: each gallery figure drawn by `sim.plot` from a
small stored file (tests/data/plots/<kind>.h5) must look like its reference PNG
(tests/data/plots/<kind>.png) by structural similarity; a deliberately altered figure must
not. No simulation runs here: the files were written once by
`python tests/data/plots/make_plot_data.py`, and after a deliberate change of a figure
`python tests/data/plots/make_plot_data.py --figures` redraws the references (look at
each before committing them).

Drawn on matplotlib's Agg canvas at a fixed dpi, with matplotlib's own DejaVu Sans and its
default style, so the pixels do not depend on the machine's fonts or matplotlib settings.
"""

from __future__ import annotations

import io
from pathlib import Path

import h5py
import numpy as np
import pytest

import sim

DATA = Path(__file__).resolve().parents[1] / "data" / "plots"
KINDS = sorted(p.stem for p in DATA.glob("*.h5"))
DPI = 40
# Mean structural similarity a redrawn figure keeps with its reference. The same code on
# this machine gives 1.0. Measured for material changes: a population 5% larger 0.968,
# potential energies 30% lower 0.931, Gray-Scott's v snapshots in reverse order
# 0.993 (small images in much white space).
SIMILAR = 0.995
# ... and the similarity every 24 x 24 pixel region of it keeps (the mean alone misses a
# change confined to a small part of a figure: Gray-Scott's v snapshots reversed leave
# the mean at 0.997, their worst region at 0.73; the same code gives 1.0 everywhere).
LOCAL = 0.95


def figure_pixels(figure) -> np.ndarray:
    """The RGB pixels [height, width, 3] (uint8) of the figure of `figure` (a path or a
    `sim.Record`), drawn under fixed settings."""
    import matplotlib
    from PIL import Image

    from sim._plot import savefig

    with matplotlib.rc_context(rc=matplotlib.rcParamsDefault):
        with matplotlib.rc_context({"font.family": "DejaVu Sans"}):
            fig = sim.plot(figure)
            buffer = io.BytesIO()
            # (as `fig.savefig(buffer, format="png", dpi=DPI)` writes it, laid out once;
            # uncompressed: the PNG is only read back, here)
            savefig(fig, buffer, "png", dpi=DPI, pil_kwargs={"compress_level": 0})
    buffer.seek(0)
    with Image.open(buffer) as image:
        return np.asarray(image.convert("RGB"))


def reference_pixels(kind: str) -> np.ndarray:
    from PIL import Image

    with Image.open(DATA / f"{kind}.png") as image:
        return np.asarray(image.convert("RGB"))


def _box_mean(a: np.ndarray, size: int) -> np.ndarray:
    """Means over every `size` x `size` window (valid part), by summed-area tables."""
    s = np.pad(a, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    return (s[size:, size:] - s[:-size, size:] - s[size:, :-size] + s[:-size, :-size]) / size**2


def _ssim_map(a: np.ndarray, b: np.ndarray, size: int = 7) -> np.ndarray:
    """The structural similarity (Wang et al., IEEE TIP 13, 600, 2004) of two RGB images
    of one size on their luminance, over every `size` x `size` window."""
    weights = np.array([0.299, 0.587, 0.114])
    x, y = (np.asarray(im, dtype=float) @ weights / 255.0 for im in (a, b))
    c1, c2 = 0.01**2, 0.03**2
    mx, my = _box_mean(x, size), _box_mean(y, size)
    vx = _box_mean(x * x, size) - mx**2
    vy = _box_mean(y * y, size) - my**2
    cov = _box_mean(x * y, size) - mx * my
    return ((2 * mx * my + c1) * (2 * cov + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))


def scores(a: np.ndarray, b: np.ndarray, block: int = 24) -> tuple[float, float]:
    """The mean structural similarity of two RGB images over 7 x 7 windows, and the
    lowest mean over the `block` x `block` regions tiling them (both from one map of
    the windows); 0 and 0 for images of different sizes (a figure whose layout changed)."""
    if a.shape != b.shape:
        return 0.0, 0.0
    m = _ssim_map(a, b)
    h, w = (m.shape[0] // block) * block, (m.shape[1] // block) * block
    return float(m.mean()), float(
        m[:h, :w].reshape(h // block, block, w // block, block).mean(axis=(1, 3)).min()
    )


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Mean structural similarity of two RGB images over 7 x 7 windows; 0 for images of
    different sizes."""
    return scores(a, b)[0]


def worst_region(a: np.ndarray, b: np.ndarray, block: int = 24) -> float:
    """The lowest mean structural similarity over the `block` x `block` regions tiling
    the images; 0 for images of different sizes."""
    return scores(a, b, block)[1]


def alike(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether a redrawn figure looks like its reference: on the whole and everywhere."""
    score, local = scores(a, b)
    return score >= SIMILAR and local >= LOCAL


def test_every_gallery_figure_has_a_stored_file_and_reference():
    import runpy

    from tests.data.plots.make_plot_data import COVERS, RUNS

    assert KINDS == sorted(RUNS)
    assert all((DATA / f"{kind}.png").exists() for kind in KINDS)
    # each figure of the gallery is drawn here from a smaller run of its own config
    gallery = runpy.run_path(str(DATA.parents[2] / "experiments" / "make_gallery.py"))["RUNS"]
    for name, (command, config, _) in gallery.items():
        kind = COVERS.get(name, name)
        assert kind in RUNS, f"gallery figure {name!r} has no stored run file in tests/data/plots"
        assert RUNS[kind][:2] == (command, config), (name, RUNS[kind][:2], (command, config))


@pytest.mark.parametrize("kind", KINDS)
def test_figure_looks_like_its_reference(kind):
    drawn, reference = figure_pixels(DATA / f"{kind}.h5"), reference_pixels(kind)
    assert drawn.shape == reference.shape, (
        f"{kind}: size {drawn.shape} against {reference.shape}; `python "
        "tests/data/plots/make_plot_data.py --figures` redraws the references"
    )
    score, local = scores(drawn, reference)
    assert score >= SIMILAR and local >= LOCAL, (
        f"{kind}: structural similarity {score:.4f} (at least {SIMILAR}), worst region {local:.4f} "
        f"(at least {LOCAL})"
    )


def _altered(kind: str, change, tmp_path) -> Path:
    path = tmp_path / f"{kind}.h5"
    path.write_bytes((DATA / f"{kind}.h5").read_bytes())
    with h5py.File(path, "r+") as f:
        change(f)
    return path


def _scale(key: str, factor: float):
    def change(f):
        f[key][...] = f[key][()] * factor

    return change


def _reversed(key: str):
    def change(f):
        f[key][...] = f[key][()][::-1]

    return change


# A material change of a run, an MD run, a fit and a 2-D field: a population or prediction
# 40% larger, energies 30% lower, Gray-Scott's v snapshots in reverse order.
ALTERED = {
    "ode_phase": _scale("observables/prey", 1.4),
    "md": _scale("observables/potential_energy/value", 0.7),
    "fit": _scale("prediction/prey", 1.4),
    "pde_2d": _reversed("observables/v"),
}


@pytest.mark.parametrize("kind", sorted(ALTERED))
def test_an_altered_figure_fails_the_comparison(kind, tmp_path):
    drawn = figure_pixels(_altered(kind, ALTERED[kind], tmp_path))
    reference = reference_pixels(kind)
    assert not alike(drawn, reference)


def test_similarity_is_one_for_the_same_image_and_falls_with_noise():
    # The index's own properties: 1 for identical images, symmetric, lower for noise.
    rng = np.random.default_rng(0)
    image = reference_pixels(KINDS[0])
    assert similarity(image, image) == pytest.approx(1.0)
    noisy = np.clip(image + rng.normal(0, 40, image.shape), 0, 255).astype(np.uint8)
    assert similarity(image, noisy) == pytest.approx(similarity(noisy, image))
    assert similarity(image, noisy) < 0.9
    assert similarity(image, image[:-1]) == 0.0
    assert worst_region(image, image) == pytest.approx(1.0) and alike(image, image)
    # a change confined to one corner: the mean hardly moves, the worst region does
    spot = image.copy()
    spot[:24, :24] = 255 - spot[:24, :24]
    assert similarity(image, spot) > 0.9 and worst_region(image, spot) < LOCAL
