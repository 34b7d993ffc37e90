"""`[rdf]` of an MD run: the time-averaged g(r) in the H5MD file against
MDAnalysis's InterRDF on the same trajectory, its figure, and one-line refusals."""

import h5py
import numpy as np
import pytest

import sim

from ..helpers import cli

# A Lennard-Jones liquid near the triple point (T* = 0.75, rho* = 0.84; the triple point
# is at T* = 0.694, rho_liquid = 0.845): 108 particles melted from fcc by hot velocities.
LIQUID = """
[model]
name = "lennard_jones"
[params]
cutoff = 2.5
shift = true
[system]
lattice = "fcc"
cells = 3
density = 0.84
temperature = 2.0
seed = 4
[time]
dt = 0.005
steps = 1200
save_every = 20
[solver]
method = "langevin"
temperature = 0.75
friction = 2.0
[rdf]
{rdf}
"""


@pytest.fixture(scope="module")
def liquid(tmp_path_factory):
    """A plain-histogram and a smooth g(r) of the same run, and the run file."""
    folder = tmp_path_factory.mktemp("rdf")
    config = folder / "liquid.toml"
    config.write_text(LIQUID.format(rdf="r_max = 2.5\nbins = 50\nwidth = 0.0\nstart = 2.0"))
    result = sim.run(sim.load_config(config))
    out = result.save(folder / "liquid.h5")
    smooth = sim.run(sim.load_config(config, ["rdf.width=0.025"]))
    return out, result, smooth.save(folder / "smooth.h5")


def test_the_run_file_holds_the_time_averaged_g_as_inter_rdf_computes_it(liquid):
    import MDAnalysis as mda
    from MDAnalysis.analysis.rdf import InterRDF

    out, result, _ = liquid
    with h5py.File(out) as f:
        group = f["observables/rdf"]
        r, value, time = group["r"][()], group["value"][()], group["time"][()]
        np.testing.assert_array_equal(group["step"][()], f["observables/temperature/step"][()])
    assert value.shape == (61, 50)
    np.testing.assert_allclose(r, (np.arange(50) + 0.5) * 0.05, rtol=1e-14)
    first = int(np.searchsorted(time, 2.0))
    assert np.all(np.isnan(value[:first])) and np.all(np.isfinite(value[first:]))
    # MDAnalysis on the same file: every ordered pair i != j (the diagonal excluded by
    # exclusion_block), normalised by N_a N_b / V, frames from t = 2 on.
    u = mda.Universe.empty(108, trajectory=True)
    u.load_new(str(out), format="H5MD", convert_units=False)
    rdf = InterRDF(u.atoms, u.atoms, nbins=50, range=(0.0, 2.5), exclusion_block=(1, 1)).run(
        start=first
    )
    np.testing.assert_allclose(rdf.results.bins, r, rtol=1e-6)
    # (MDAnalysis measures in float32: a pair within 1e-6 of a bin edge may fall on the
    # other side; measured: 1.6e-4 apart at most)
    np.testing.assert_allclose(value[-1], rdf.results.rdf, rtol=0, atol=1e-3)
    assert float(np.max(value[-1])) > 2.5  # a liquid's first peak, not a gas
    # the running average: row k is the mean over frames first .. k
    half = InterRDF(u.atoms, u.atoms, nbins=50, range=(0.0, 2.5), exclusion_block=(1, 1)).run(
        start=first, stop=first + 10
    )
    np.testing.assert_allclose(value[first + 9], half.results.rdf, rtol=0, atol=1e-3)


def test_the_smooth_g_keeps_the_first_peak(liquid):
    # A kernel of half a bin keeps the first peak in the histogram's bin (checked above
    # against InterRDF), its height within a few per cent (measured: 2.81 against 2.85
    # at r = 1.125), and the number of neighbours in the first shell.
    out, _, smooth = liquid
    with h5py.File(out) as f, h5py.File(smooth) as g:
        plain, soft, r = (
            f["observables/rdf/value"][-1],
            g["observables/rdf/value"][-1],
            f["observables/rdf/r"][()],
        )
    assert abs(r[np.argmax(soft)] - r[np.argmax(plain)]) <= 0.05 + 1e-12
    assert 1.05 <= r[np.argmax(soft)] <= 1.15  # about 2^(1/6) sigma, the potential's minimum
    assert np.max(soft) == pytest.approx(np.max(plain), rel=0.03)
    assert np.max(soft) < np.max(plain)  # a kernel lowers a peak
    # the kernel moves weight between bins but keeps it: the same number of neighbours
    shells = 4 / 3 * np.pi * np.diff(np.linspace(0.0, 2.5, 51) ** 3)
    rho = 0.84
    inside = r < 1.5  # the first shell, to its minimum
    assert np.sum(rho * soft * shells * inside) == pytest.approx(
        np.sum(rho * plain * shells * inside), rel=0.01
    )


def test_a_box_that_shrinks_below_twice_r_max_leaves_out_the_bins_it_cannot_measure(tmp_path):
    # A barostat's box may shrink below 2 r_max (r_max is checked against the starting
    # box), and minimum images miss pairs farther apart than half the box: such a bin
    # counted the frame as empty, and g fell towards 0 where a gas has 1 (measured in a
    # compressed LJ gas: 0.02 at r = 6.7). Frames of an ideal gas (uniform positions: g
    # is 1 at every r) in a cube shrinking from 12 to 7: each bin is averaged over the
    # frames that measure it, and a bin no frame measures is NaN.
    from sim.families.md._rdf import RdfSpec, write_rdf

    rng = np.random.default_rng(0)
    frames, n = 12, 400
    edge = np.linspace(12.0, 7.0, frames)
    with h5py.File(tmp_path / "gas.h5", "w") as f:
        particles = f.create_group("particles/all")
        particles["position/value"] = rng.uniform(size=(frames, n, 3)) * edge[:, None, None]
        particles["position/time"], particles["position/step"] = (
            np.arange(frames, dtype=float),
            np.arange(frames),
        )
        particles["box/edges/value"] = np.repeat(edge[:, None], 3, axis=1)
        # (averaged from t = 4, where the box's edge is 10.2: bins beyond 5.1 are measured by no
        # frame)
        write_rdf(
            f,
            RdfSpec(r_max=6.0, bins=30, width=0.0, start=4.0, n_species=1),
            np.zeros(n, dtype=np.int32),
        )
        g, r = f["observables/rdf/value"][-1], f["observables/rdf/r"][()]
    upper = r + 0.1
    np.testing.assert_array_equal(np.isnan(g), upper > 0.5 * edge[4] * (1 + 1e-12))
    measured = ~np.isnan(g)
    assert (
        measured.sum() == 25 and np.sum(measured & (upper > 0.5 * edge[-1])) == 8
    )  # (8 bins measured by some frames only)
    assert np.all(np.abs(g[measured & (r > 1.0)] - 1.0) < 0.05), g


def test_sim_plot_draws_the_stored_g(liquid, capsys, tmp_path):
    out, _, _ = liquid
    code, err = cli(["plot", str(out), "-o", str(tmp_path / "run.png")], capsys)
    assert code == 0, err
    assert (tmp_path / "run.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    "rdf, key, expected",
    [
        ("r_max = 3.0", "rdf.r_max", "at most half the shortest box edge"),
        ("r_max = 2.0\nbins = 1", "rdf.bins", "whole number of bins"),
        ("width = -0.1", "rdf.width", "kernel width"),
        ("start = 100.0", "rdf.start", "last save time"),
        ("start = -1.0", "rdf.start", "from the first save time 0"),
        ("bin = 20", "rdf.bin", "Perhaps you meant"),
        ('r_max = "far"', "rdf.r_max", "expected a number"),
    ],
)
def test_bad_rdf_tables_are_one_line_and_exit_2(tmp_path, capsys, rdf, key, expected):
    config = tmp_path / "bad.toml"
    config.write_text(LIQUID.format(rdf=rdf))
    code, err = cli(["run", str(config), "-o", str(tmp_path / "out.h5"), "--quiet"], capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error:") and key in err and expected in err, err
    assert list(tmp_path.iterdir()) == [config]


def test_an_md_sweep_refuses_the_rdf_table(tmp_path, capsys):
    config = tmp_path / "sweep.toml"
    config.write_text(
        LIQUID.format(rdf="r_max = 2.0")
        + '[sweep]\nmode = "grid"\n[sweep.params]\nepsilon = { values = [1.0, 1.1] }\n'
    )
    code, err = cli(["sweep", str(config), "-o", str(tmp_path / "out.h5"), "--quiet"], capsys)
    assert code == 2 and "rdf" in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == [config]
