"""Starting states of the particle models against their docstrings and their geometry.

Lattices are checked by what a crystal is (the density, the box as cells times the
lattice constant, the coordination number at the nearest-neighbour distance of each
kind), random packings and chains by the distances they promise (computed here with
NumPy and the minimum image), Maxwell-Boltzmann velocities by zero momentum and the
exact kinetic temperature in 2-D and 3-D, and H5MD start files by writing the layouts
the H5MD specification allows (a cube as one edge, a full box matrix, time series,
masses, species, connectivity, open boundaries) and reading them back.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from physics import md


def pair_distances(position, edges=None) -> np.ndarray:
    """All distances |r_i - r_j| [n, n] (minimum image in a periodic box), inf on the diagonal."""
    r = np.asarray(position, dtype=float)
    d = r[:, None, :] - r[None, :, :]
    if edges is not None:
        edges = np.asarray(edges, dtype=float)
        d -= edges * np.round(d / edges)
    out = np.sqrt((d * d).sum(-1))
    np.fill_diagonal(out, np.inf)
    return out


# ---------------------------------------------------------------- lattices

# (particles per cell, nearest-neighbour distance / a, coordination number)
CRYSTALS = {"fcc": (4, 1 / math.sqrt(2), 12), "bcc": (2, math.sqrt(3) / 2, 8), "sc": (1, 1.0, 6)}


@pytest.mark.parametrize("kind", list(CRYSTALS))
def test_lattice_is_a_crystal_in_a_box_of_whole_cells(kind):
    per_cell, nearest, coordination = CRYSTALS[kind]
    cells, density = (3, 4, 5), 0.7
    system = md.lattice(kind, cells, density)
    a = (per_cell / density) ** (1 / 3)  # the cubic cell holds per_cell particles
    edges = np.asarray(system.space.box)
    assert system.n == per_cell * 60
    np.testing.assert_allclose(edges, np.asarray(cells) * a, rtol=1e-14)
    assert system.n / float(system.space.volume()) == pytest.approx(density, rel=1e-14)
    r = np.asarray(system.position)
    assert np.all(r >= -1e-12) and np.all(
        r < edges - 1e-9
    )  # inside the box, no particle on its far face
    d = pair_distances(r, edges)
    # every particle has the coordination number of its crystal at the nearest distance
    assert d.min() == pytest.approx(nearest * a, rel=1e-12)
    np.testing.assert_array_equal(np.sum(np.abs(d - nearest * a) < 1e-9, axis=1), coordination)
    # at rest, unit masses, one species
    np.testing.assert_array_equal(np.asarray(system.velocity), 0.0)
    np.testing.assert_array_equal(np.asarray(system.mass), 1.0)
    np.testing.assert_array_equal(np.asarray(system.species), 0)
    assert system.bonds is None and system.space.periodic


@pytest.mark.parametrize(
    "args, match",
    [
        (("fcc", 0, 0.8), "cells must be"),
        (("fcc", (2, 0, 2), 0.8), "cells must be"),
        (("sc", 3, 0.0), "density must be"),
        (("sc", 3, -1.0), "density must be"),
        (("sc", 3, math.nan), "density must be"),
        (("hcp", 3, 0.8), "expected one of"),
    ],
)
def test_lattice_refuses_what_is_not_a_lattice(args, match):
    with pytest.raises(ValueError, match=match):
        md.lattice(*args)


# ---------------------------------------------------------------- random packings and chains


def test_random_packing_in_two_dimensions_has_the_density_and_the_distance():
    n, density, d_min = 150, 0.4, 0.9
    system = md.random_packing(jax.random.key(7), n, density, min_distance=d_min, dim=2)
    edges = np.asarray(system.space.box)
    np.testing.assert_allclose(edges, math.sqrt(n / density), rtol=1e-14)
    r = np.asarray(system.position)
    assert r.shape == (n, 2) and np.all(r >= 0) and np.all(r < edges)
    d = pair_distances(r, edges)
    # random sequential addition leaves many contacts just beyond min_distance (the
    # contact value of its pair distribution is above 1), so the closest pair of 150 at
    # an area fraction of 0.25 lies within a few percent of it (measured: 0.9%)
    assert d_min <= d.min() < 1.05 * d_min
    # a seed gives one packing; another seed another
    again = md.random_packing(jax.random.key(7), n, density, min_distance=d_min, dim=2)
    np.testing.assert_array_equal(np.asarray(again.position), r)
    other = md.random_packing(jax.random.key(8), n, density, min_distance=d_min, dim=2)
    assert np.max(np.abs(np.asarray(other.position) - r)) > 1.0


@pytest.mark.parametrize("dim, density", [(3, 2.0), (2, 1.5)])
def test_random_packing_too_dense_reports_the_covered_fraction(dim, density):
    # The fraction of the box covered by spheres (discs) of diameter min_distance around
    # the particles: density times the volume of one, 4/3 pi (d/2)^3 (pi (d/2)^2 in 2-D).
    # Both exceed the densest packing (0.74, 0.91), so no placement can succeed.
    d = 0.9
    ball = 4 / 3 * math.pi * (d / 2) ** 3 if dim == 3 else math.pi * (d / 2) ** 2
    fraction = density * ball
    with pytest.raises(ValueError, match=rf"covered fraction {fraction:.2f}\); lower the density"):
        md.random_packing(jax.random.key(0), 60, density, min_distance=d, dim=dim, tries=4)


def test_chains_are_random_walks_of_bond_length_steps():
    n_chains, length, density, bond, d_min = 5, 8, 0.3, 0.95, 0.85
    system = md.chains(
        jax.random.key(3), n_chains, length, density, bond_length=bond, min_distance=d_min
    )
    n = n_chains * length
    edges = np.asarray(system.space.box)
    assert system.n == n
    assert n / float(system.space.volume()) == pytest.approx(density, rel=1e-14)
    # bonds join consecutive beads of each chain, and nothing else
    expected = {
        (c * length + k, c * length + k + 1) for c in range(n_chains) for k in range(length - 1)
    }
    bonds = np.asarray(system.bonds)
    assert (
        bonds.shape == (n_chains * (length - 1), 2)
        and {tuple(b) for b in bonds.tolist()} == expected
    )
    d = pair_distances(system.position, edges)
    # every bonded pair is one step of the walk apart; no two beads closer than min_distance
    np.testing.assert_allclose(d[bonds[:, 0], bonds[:, 1]], bond, rtol=1e-12)
    assert d.min() >= d_min
    # the chains start anywhere: the first bead of a chain is not a step from the last
    # bead of the chain before (a chance of zero for a continuous distribution)
    starts = np.arange(1, n_chains) * length
    assert np.all(np.abs(d[starts, starts - 1] - bond) > 1e-6)
    np.testing.assert_array_equal(np.asarray(system.velocity), 0.0)


def test_chains_refuse_empty_chains():
    with pytest.raises(ValueError, match="n_chains >= 1 and length >= 1"):
        md.chains(jax.random.key(0), 2, 0, 0.3)


# ---------------------------------------------------------------- Maxwell-Boltzmann velocities


@pytest.mark.parametrize("dim", [2, 3])
def test_maxwell_boltzmann_velocities_at_an_exact_temperature(dim):
    n, kt = 64, 0.5
    mass = jnp.asarray(np.random.default_rng(dim).uniform(0.5, 4.0, n))
    v = np.asarray(md.maxwell_boltzmann(jax.random.key(dim), mass, kt, dim=dim))
    m = np.asarray(mass)
    assert v.shape == (n, dim)
    np.testing.assert_allclose((m[:, None] * v).sum(axis=0), 0.0, atol=1e-13)
    # zero total momentum leaves dim (n - 1) degrees of freedom: 2K / (dim (n - 1)) = kT
    assert (m[:, None] * v**2).sum() / (dim * (n - 1)) == pytest.approx(kt, rel=1e-13)
    # a key gives one draw
    np.testing.assert_array_equal(
        np.asarray(md.maxwell_boltzmann(jax.random.key(dim), mass, kt, dim=dim)), v
    )


def test_maxwell_boltzmann_at_zero_temperature_is_at_rest():
    v = md.maxwell_boltzmann(jax.random.key(0), jnp.ones(10), 0.0)
    np.testing.assert_array_equal(np.asarray(v), 0.0)


def test_maxwell_boltzmann_equipartition_between_masses():
    # Without the rescaling, each velocity component of a particle of mass m has variance
    # kT / m: light and heavy particles carry the same m <v_x^2> = kT. 3 x 10000 samples
    # per mass: statistical error 0.8% (std), measured 2.6% and 0.4%; bound 4% (a lost
    # 1/m or square root is a factor 4 or more).
    mass = jnp.asarray(np.repeat([0.25, 9.0], 10000))
    v = np.asarray(md.maxwell_boltzmann(jax.random.key(5), mass, 1.3, exact=False))
    m = np.asarray(mass)[:, None]
    assert float(np.mean((m * v * v)[:10000])) == pytest.approx(1.3, rel=0.04)
    assert float(np.mean((m * v * v)[10000:])) == pytest.approx(1.3, rel=0.04)
    assert float(np.std(v[:10000])) == pytest.approx(
        6 * float(np.std(v[10000:])), rel=0.04
    )  # sqrt(9 / 0.25)


def test_thermalize_keeps_the_positions():
    system = md.lattice("bcc", 3, 0.9)
    hot = md.thermalize(system, jax.random.key(1), 2.0)
    np.testing.assert_array_equal(np.asarray(hot.position), np.asarray(system.position))
    v = np.asarray(hot.velocity)
    assert (v**2).sum() / (3 * (system.n - 1)) == pytest.approx(2.0, rel=1e-13)


# ---------------------------------------------------------------- H5MD start files


def write_h5md(
    path,
    position,
    *,
    edges=None,
    boundary="periodic",
    velocity=None,
    mass=None,
    species=None,
    bonds=None,
):
    """An H5MD file with one particle group `all`: `position` [T, n, dim] as a time
    series, `edges` as given (a number, a vector, a matrix, or a dict holding a time
    series under "value"), the rest as fixed datasets."""
    import h5py

    position = np.asarray(position, dtype=float)
    dim = position.shape[-1]
    with h5py.File(path, "w") as f:
        g = f.create_group("particles/all")
        g["position/value"] = position
        g["position/step"] = np.arange(position.shape[0])
        box = g.create_group("box")
        box.attrs["dimension"] = dim
        box.attrs["boundary"] = np.array([boundary.encode()] * dim)
        if isinstance(edges, dict):
            box["edges/value"] = np.asarray(edges["value"], dtype=float)
        elif edges is not None:
            box["edges"] = np.asarray(edges, dtype=float)
        for name, value in (("velocity", velocity), ("mass", mass), ("species", species)):
            if value is not None:
                g[name] = value
        if bonds is not None:
            f["connectivity/all"] = np.asarray(bonds, dtype=np.int32)
    return path


def frames(n=5, dim=3, t=2, scale=1.0, seed=0):
    return np.random.default_rng(seed).uniform(0, scale, (t, n, dim))


def test_h5md_cube_given_as_one_edge(tmp_path):
    # H5MD allows a cubic box as a single edge length
    path = write_h5md(tmp_path / "cube.h5", frames(scale=4.0), edges=4.0)
    system = md.read_h5md(path)
    assert isinstance(system.space, md.Periodic)
    np.testing.assert_array_equal(np.asarray(system.space.box), [4.0, 4.0, 4.0])


def test_h5md_small_boxes_masses_species_and_bonds(tmp_path):
    # lengths and masses below 1 are as valid as any other positive value
    edges = [0.8, 0.5, 0.9]
    x = frames(n=4, scale=0.4)
    mass = np.array([0.5, 0.25, 2.0, 1.0])
    species = np.array([0, 1, 1, 0])
    bonds = [[0, 1], [2, 3]]
    path = write_h5md(
        tmp_path / "small.h5", x, edges=edges, mass=mass, species=species, bonds=bonds
    )
    system = md.read_h5md(path)
    np.testing.assert_array_equal(np.asarray(system.space.box), edges)
    np.testing.assert_array_equal(np.asarray(system.mass), mass)
    np.testing.assert_array_equal(np.asarray(system.species), species)
    np.testing.assert_array_equal(np.asarray(system.bonds), bonds)
    np.testing.assert_array_equal(np.asarray(system.position), x[-1])  # the last frame by default
    np.testing.assert_array_equal(np.asarray(system.velocity), 0.0)  # no velocities: at rest


def test_h5md_frames_box_matrix_and_time_dependent_edges(tmp_path):
    x = frames(n=3, t=3, scale=2.0)
    matrix = np.diag([2.0, 3.0, 4.0])
    first = md.read_h5md(write_h5md(tmp_path / "matrix.h5", x, edges=matrix), frame=0)
    np.testing.assert_array_equal(np.asarray(first.position), x[0])
    np.testing.assert_array_equal(np.asarray(first.space.box), [2.0, 3.0, 4.0])
    series = {"value": [[2.0, 2.0, 2.0], [2.5, 2.5, 2.5], [3.0, 3.0, 3.0]]}
    middle = md.read_h5md(write_h5md(tmp_path / "series.h5", x, edges=series), frame=1)
    np.testing.assert_array_equal(np.asarray(middle.position), x[1])
    np.testing.assert_array_equal(np.asarray(middle.space.box), [2.5, 2.5, 2.5])


def test_h5md_open_boundaries_give_free_space(tmp_path):
    x = frames(n=4, dim=2, scale=30.0)
    system = md.read_h5md(write_h5md(tmp_path / "free.h5", x, boundary="none"))
    assert isinstance(system.space, md.Free) and system.space.dim == 2
    np.testing.assert_array_equal(np.asarray(system.position), x[-1])


def test_h5md_unwrapped_positions_up_to_a_million_boxes(tmp_path):
    # Unwrapped coordinates may lie many boxes away: 2e6 is about 670 000 boxes of 3.
    x = frames(n=3, scale=3.0)
    x[-1, 0, 0] = 2.0e6
    system = md.read_h5md(write_h5md(tmp_path / "far.h5", x, edges=3.0))
    assert float(system.position[0, 0]) == 2.0e6
    x[-1, 0, 0] = 4.0e6  # 1.3 million boxes
    with pytest.raises(ValueError, match="more than a million box lengths"):
        md.read_h5md(write_h5md(tmp_path / "too_far.h5", x, edges=3.0))


@pytest.mark.parametrize(
    "edges, match",
    [
        ([2.0, 0.0, 2.0], "positive lengths"),
        ([2.0, -1.0, 2.0], "positive lengths"),
        ([2.0, 2.0], "positive lengths"),
        ([[2.0, 0.1, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]], "triclinic"),
    ],
)
def test_h5md_refuses_boxes_that_are_not_orthorhombic_boxes(tmp_path, edges, match):
    with pytest.raises(ValueError, match=match):
        md.read_h5md(write_h5md(tmp_path / "bad.h5", frames(), edges=edges))


@pytest.mark.parametrize(
    "extra, match",
    [
        ({"mass": np.array([1.0, 0.0, 1.0, 1.0, 1.0])}, "masses <= 0"),
        ({"mass": np.ones(4)}, "does not fit 5 particles"),
        ({"species": np.array([0.0, 1.0, 0.0, 0.0, 0.0])}, "expected integers"),
        ({"velocity": np.full((5, 3), np.nan)}, "NaN or infinity"),
    ],
)
def test_h5md_refuses_particle_data_that_does_not_fit(tmp_path, extra, match):
    with pytest.raises(ValueError, match=match):
        md.read_h5md(write_h5md(tmp_path / "bad.h5", frames(), edges=2.0, **extra))


def test_h5md_missing_group_names_what_is_there(tmp_path):
    path = write_h5md(tmp_path / "start.h5", frames(), edges=2.0)
    with pytest.raises(ValueError, match=r"/particles/solvent is missing \(found: all\)"):
        md.read_h5md(path, group="solvent")
