"""`sim.movie` and `sim plot --movie`: animations of PDE fields and MD particles, decoded
with pillow (frame count, size, which frames differ and where), and bad input: one line
on stderr, exit code 2, no movie written and an existing file untouched."""

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from PIL import Image, ImageSequence

import sim
from sim._movie import frame_indices
from tests.helpers import cli

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
KS = ["grid.points=[16]", "time.t1=2.0", "time.save=5"]  # as in test_xdmf.py: one compiled program


def frames_of(path):
    """The decoded frames of a GIF as RGB arrays."""
    with Image.open(path) as image:
        assert image.format == "GIF"
        return [
            np.asarray(frame.convert("RGB"), dtype=int) for frame in ImageSequence.Iterator(image)
        ]


def below_title(frame, rows=40):
    """The frame without its title (which names the time of every frame)."""
    return frame[rows:]


def changed(a, b):
    """Pixels that differ between two frames beyond the GIF palette's rounding (each frame
    has its own palette, which moves colours by a few levels)."""
    return int(np.count_nonzero(np.abs(a - b).sum(axis=-1) > 60))


def run_file(path, times, fields, grid):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "simjax.run"
        f.attrs["model"] = "hand_made"
        f["time"] = np.asarray(times, dtype=float)
        for axis, values in grid.items():
            f[f"grid/{axis}"] = values
        for name, values in fields.items():
            f[f"observables/{name}"] = values


def test_gif_of_a_pde_run(tmp_cwd, capsys):
    sim.run(sim.load_config(EXPERIMENTS / "kuramoto_sivashinsky.toml", KS), output="ks.h5")
    code, err = cli(["plot", "ks.h5", "--movie", "ks.gif"], capsys)
    assert code == 0 and err.strip() == "wrote ks.gif", err
    assert not Path("ks.png").exists()  # the movie only
    frames = frames_of("ks.gif")
    assert len(frames) == 5  # every saved frame
    height, width, _ = frames[0].shape
    assert width % 2 == 0 and height % 2 == 0 and width >= 400
    # the field changes from frame to frame: so does every picture of it
    assert all(
        changed(below_title(a), below_title(b)) > 100
        for a, b in zip(frames, frames[1:], strict=False)
    )
    # at most --frames frames, spread over the run
    code, err = cli(["plot", "ks.h5", "-o", "few.gif", "--frames", "3", "-q"], capsys)
    assert code == 0 and err == "", err
    assert len(frames_of("few.gif")) == 3


def test_only_frames_whose_field_changes_differ(tmp_cwd):
    # 1D: the field holds still for the first three frames, then moves; the drawn line
    # must do the same (the value axis is fixed over the movie).
    x = np.linspace(0.0, 1.0, 40)
    u = np.array(
        [np.sin(2 * np.pi * x)] * 3 + [np.sin(2 * np.pi * (x - 0.2)), 0.5 * np.sin(2 * np.pi * x)]
    )
    run_file("still.h5", np.arange(5.0), {"u": u}, {"x": x})
    frames = [below_title(f) for f in frames_of(sim.movie("still.h5", "still.gif"))]
    assert changed(frames[0], frames[1]) == changed(frames[1], frames[2]) == 0
    assert changed(frames[2], frames[3]) > 100 and changed(frames[3], frames[4]) > 100


def test_2d_fields_share_one_colour_scale_across_frames(tmp_cwd):
    # v = c(t) * pattern: with one scale for the movie, a frame at half the amplitude
    # looks different; an image scaled frame by frame would look the same.
    x, y = np.linspace(0, 2, 20), np.linspace(0, 1, 12)
    pattern = np.exp(-((x[:, None] - 1.0) ** 2 + (y[None, :] - 0.5) ** 2) * 8)
    v = np.array([pattern, 0.5 * pattern, pattern])
    run_file("two.h5", [0.0, 1.0, 2.0], {"v": v, "w": np.array([pattern] * 3)}, {"x": x, "y": y})
    frames = [below_title(f) for f in frames_of(sim.movie("two.h5", "two.gif"))]
    assert len(frames) == 3
    image_of_v = slice(0, frames[0].shape[1] * 35 // 100)  # v's panel, left of its colour bar
    assert changed(frames[0][:, image_of_v], frames[1][:, image_of_v]) > 100  # v halved
    assert changed(frames[0], frames[2]) == 0  # v back as it was, w never changed
    # the two fields are drawn side by side, so the figure is wider than high
    assert frames[0].shape[1] > frames[0].shape[0]


def test_md_movie(tmp_cwd, capsys):
    sets = [
        "system.cells=2",
        "params.cutoff=1.5",
        "time.steps=40",
        "time.save_every=10",
        "solver.neighbour_list=false",  # (forces from every pair: compiled in less time)
    ]
    sim.run(sim.load_config(EXPERIMENTS / "lj_fluid.toml", sets), output="lj.h5")
    code, err = cli(["plot", "lj.h5", "--movie", "lj.gif", "-o", "lj.png", "-q"], capsys)
    assert code == 0 and err == "", err
    assert Path("lj.png").exists()  # the figure too, when -o names one
    frames = frames_of("lj.gif")
    assert len(frames) == 5
    assert all(
        changed(below_title(a), below_title(b)) > 20
        for a, b in zip(frames, frames[1:], strict=False)
    )  # the particles move


def h5md_file(path, position, species, edges):
    with h5py.File(path, "w") as f:
        f.create_group("h5md").attrs["version"] = np.array([1, 1], dtype=np.int32)
        frames = len(position)
        for name, value in (
            ("position", position),
            ("box/edges", np.broadcast_to(edges, (frames, len(edges)))),
        ):
            group = f.create_group(f"particles/all/{name}")
            group["value"] = value
            group["time"] = np.arange(frames, dtype=float)
            group["step"] = np.arange(frames)
        f["particles/all/species"] = np.asarray(species, dtype=np.int32)


def test_md_particles_coloured_by_species_in_their_box(tmp_cwd):
    # Particles of two species at rest in a 4 x 4 periodic box: the first frame and the
    # second are the same picture; the third, where one particle moved, differs.
    position = np.array(
        [[[1.0, 1.0], [3.0, 3.0], [1.0, 3.0]]] * 2 + [[[1.0, 1.0], [3.0, 3.0], [2.0, 2.0]]]
    )
    h5md_file("md.h5", position, [0, 1, 1], np.array([4.0, 4.0]))
    frames = [below_title(f) for f in frames_of(sim.movie("md.h5", "md.gif"))]
    assert changed(frames[0], frames[1]) == 0 and changed(frames[1], frames[2]) > 20
    colours = {
        tuple(c) for c in frames[0].reshape(-1, 3) if max(c) - min(c) > 60
    }  # saturated: the markers
    hues = {int(np.argmax(c)) for c in colours}
    assert len(hues) >= 2, colours  # tab10 blue and orange


def test_frame_indices_spread_evenly():
    assert frame_indices(5, 200) == [0, 1, 2, 3, 4]
    picked = frame_indices(1001, 200)
    assert len(picked) == 200 and picked[0] == 0 and picked[-1] == 1000
    assert max(np.diff(picked)) - min(np.diff(picked)) <= 1
    assert frame_indices(7, 1) == [0]


def one_line_exit_2(argv, capsys, expect):
    code, err = cli(argv, capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert expect in err, err


@pytest.fixture
def files(tmp_cwd):
    x = np.linspace(0, 1, 8)
    run_file("pde.h5", [0.0, 1.0], {"u": np.array([x, x**2])}, {"x": x})
    with h5py.File("ode.h5", "w") as f:
        f.attrs["format"] = "simjax.run"
        f["time"] = np.arange(3.0)
        f["observables/prey"] = np.arange(3.0)
    with h5py.File("sweep.h5", "w") as f:
        f.attrs["format"] = "simjax.sweep"
    run_file("nan.h5", [0.0, 1.0], {"u": np.full((2, 8), np.nan)}, {"x": x})
    run_file("huge.h5", [0.0, 1.0], {"u": np.array([x, -1.7e308 * x])}, {"x": x})
    h5md_file("far.h5", np.array([[[1.0, 1.0], [2.0, 2.0]]]), [0, 0], np.array([1e308, 1.0]))
    Path("old.gif").write_bytes(b"GIF89a an old movie")
    return tmp_cwd


@pytest.mark.parametrize(
    "argv, expect",
    [
        (
            ["ode.h5", "--movie", "out.gif"],
            "ode.h5: /grid: missing: this run has no fields on a grid or particle frames to "
            "animate",
        ),
        (["sweep.h5", "--movie", "out.gif"], "sweep.h5: format: a sweep file: a movie shows"),
        (["nan.h5", "--movie", "out.gif"], "/observables/u: has no finite values"),
        (["missing.h5", "--movie", "out.gif"], "missing.h5: no such file"),
        (
            ["huge.h5", "--movie", "out.gif"],
            "/observables/u: has values of magnitude 1.7e+308, beyond what can be drawn",
        ),
        (
            ["far.h5", "--movie", "out.gif"],
            "/particles/all/box/edges: has values of magnitude 1e+308",
        ),
        (["pde.h5", "--movie", "out.avi"], "--movie: out.avi: unknown movie type '.avi'"),
        (["pde.h5", "--movie", "pde.h5"], "unknown movie type '.h5'"),
        (["pde.h5", "--movie", "nowhere/out.gif"], "folder 'nowhere' does not exist"),
        (
            ["pde.h5", "--movie", "out.gif", "-o", "out.gif"],
            "-o: out.gif: unknown figure type '.gif'",
        ),
        (["pde.h5", "--movie", "out.gif", "--frames", "0"], "--frames"),
        (["ode.h5", "--movie", "old.gif"], "/grid: missing"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(argv, expect, files, capsys):
    before = sorted(p.name for p in files.iterdir())
    one_line_exit_2(["plot", *argv], capsys, expect)
    assert sorted(p.name for p in files.iterdir()) == before
    assert Path("old.gif").read_bytes() == b"GIF89a an old movie"


def test_output_pointing_at_the_input(files, capsys):
    shutil.copy("pde.h5", "run.gif")  # a run file with a movie's name
    before = Path("run.gif").read_bytes()
    one_line_exit_2(["plot", "run.gif", "--movie", "run.gif"], capsys, "is the input file")
    Path("link.gif").symlink_to("run.gif")
    one_line_exit_2(["plot", "run.gif", "-o", "link.gif"], capsys, "is the input file")
    assert Path("run.gif").read_bytes() == before


def test_mp4_needs_ffmpeg(files, capsys):
    if shutil.which("ffmpeg") is None:
        one_line_exit_2(
            ["plot", "pde.h5", "--movie", "out.mp4"], capsys, "needs the ffmpeg program"
        )
        assert not Path("out.mp4").exists()
    else:
        code, err = cli(["plot", "pde.h5", "--movie", "out.mp4", "-q"], capsys)
        assert code == 0, err
        assert Path("out.mp4").read_bytes()[4:8] == b"ftyp"  # an MP4 container
