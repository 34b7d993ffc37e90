"""The time-averaged radial distribution function of an MD run: the `[rdf]` section of
a config and the `/observables/rdf` element the run file gets.

    [rdf]
    r_max = 2.5        # default: half the shortest box edge (the most minimum image allows)
    bins = 100
    width = 0.0125     # the Gaussian kernel's standard deviation; default half a bin, 0: none
    start = 5.0        # frames from this time on are averaged; default: all

g(r) is computed from the frames the run wrote (so that a resumed run gives the same
file), with `physics.md.radial_distribution_frames`: minimum image in each frame's box,
the ideal gas's N_a N_b / V normalisation, one row per species pair, each pair spread
over the bins by a Gaussian of standard deviation `width` (differentiable in the
positions). Row k of `/observables/rdf/value` is the average over the frames from
`start` to frame k (NaN before `start`), so the last row is the run's average and
the rows show how it settles; `/observables/rdf/r` holds the bin centres. A bin that
reaches beyond half the shortest edge of a frame's box (a barostat's box that shrank
below 2 r_max) is left out of that frame's average, since minimum images miss pairs
that far apart; a bin no frame could measure is NaN."""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np
import pydantic

from physics.md import radial_distribution_frames, rdf_pairs
from solvers import did_you_mean

from ..._config import Config
from ..._run import number


class RdfTable(pydantic.BaseModel):
    """`[rdf]`: each MD run also writes its time-averaged g(r)."""

    r_max: float | None = pydantic.Field(
        None,
        description="the largest distance (at most half the shortest box edge)",
        json_schema_extra={"unit": "length", "default": "half the shortest box edge"},
    )
    bins: int = pydantic.Field(100, description="bins of width r_max / bins")
    width: float | None = pydantic.Field(
        None,
        description="standard deviation of the Gaussian kernel (0: a plain histogram)",
        json_schema_extra={"unit": "length", "default": "half a bin"},
    )
    start: float | None = pydantic.Field(
        None,
        description="frames from this time on are averaged",
        json_schema_extra={"unit": "time", "default": "the first saved frame"},
    )


RDF_KEYS = tuple(RdfTable.model_fields)
_MAX_BINS = 100_000
_MAX_SMOOTHING = 10.0  # kernel widths beyond this many bins: the bins would mean nothing
_FRAMES_PER_CALL = 16  # frames of one compiled call (the last call padded)


@dataclasses.dataclass(frozen=True)
class RdfSpec:
    """What `[rdf]` asks for, checked against the run's box and times.

    Attributes:
        r_max: the largest distance (at most half the shortest box edge).
        bins: number of bins of width r_max / bins.
        width: standard deviation of the Gaussian kernel (length; 0: a plain histogram).
        start: the time from which frames are averaged.
        n_species: number of species (one g per pair of them).
    """

    r_max: float
    bins: int
    width: float
    start: float
    n_species: int = 1

    @property
    def smoothing(self) -> float:
        """The kernel width in bin widths (`physics.md.radial_distribution_frames`)."""
        return self.width / (self.r_max / self.bins)

    def centres(self) -> np.ndarray:
        """The bin centres [bins]."""
        return (np.arange(self.bins) + 0.5) * (self.r_max / self.bins)

    @property
    def pairs(self) -> tuple[tuple[int, int], ...]:
        return rdf_pairs(self.n_species)

    def resolved(self) -> dict:
        return {"r_max": self.r_max, "bins": self.bins, "width": self.width, "start": self.start}

    def frames(self, positions, edges, species) -> np.ndarray:
        """g(r) of each frame [T, pairs, bins] (frames [T, n, dim], boxes [T, dim])."""
        out = []
        for k in range(0, len(positions), _FRAMES_PER_CALL):
            chunk = np.asarray(positions[k : k + _FRAMES_PER_CALL])
            box = np.asarray(edges[k : k + _FRAMES_PER_CALL])
            count = len(chunk)
            pad = _FRAMES_PER_CALL - count
            if pad:  # one program for every call
                chunk = np.concatenate([chunk, np.repeat(chunk[-1:], pad, axis=0)])
                box = np.concatenate([box, np.repeat(box[-1:], pad, axis=0)])
            g = _frames_program(self.r_max, self.bins, self.smoothing, self.n_species)(
                chunk, box, np.asarray(species)
            )
            out.append(np.asarray(g)[:count])
        return np.concatenate(out)


@functools.lru_cache(maxsize=8)
def _frames_program(r_max: float, bins: int, smoothing: float, n_species: int):
    def frames(positions, edges, species):
        return radial_distribution_frames(
            positions,
            edges,
            r_max=r_max,
            bins=bins,
            smoothing=smoothing,
            species=species,
            n_species=n_species,
        )[1]

    return jax.jit(frames)


def rdf_spec(
    config: Config, edges: np.ndarray | None, n_species: int, times: np.ndarray
) -> RdfSpec | None:
    """The `[rdf]` section of an MD config, checked against the starting box `edges`
    (None: free space) and the save times; None when the config has none.

    Raises:
        ConfigError: an unknown key, a bad value, r_max beyond half the box, a start
            after the last save, a box that is not periodic.
    """
    table = config.raw.get("rdf")
    if table is None:
        return None
    for key in table:
        if key not in RDF_KEYS:
            raise config.error(
                f"rdf.{key}",
                "unknown key (expected one of: "
                f"{', '.join(RDF_KEYS)}).{did_you_mean(key, RDF_KEYS)}",
            )
    if edges is None:
        raise config.error(
            "rdf",
            "g(r) needs a periodic box (the density must be defined); the system is in free space",
        )
    half = 0.5 * float(np.min(edges))
    r_max = number(config, "rdf.r_max", table["r_max"]) if "r_max" in table else half
    if not 0 < r_max <= half * (1 + 1e-12):
        raise config.error(
            "rdf.r_max",
            f"expected a distance in (0, {half:.6g}], at most half the shortest box edge (minimum "
            f"image), got {table['r_max']!r}",
        )
    bins = table.get("bins", 100)
    if isinstance(bins, bool) or not isinstance(bins, int) or not 2 <= bins <= _MAX_BINS:
        raise config.error(
            "rdf.bins", f"expected a whole number of bins in [2, {_MAX_BINS}], got {bins!r}"
        )
    spacing = r_max / bins
    width = number(config, "rdf.width", table["width"]) if "width" in table else 0.5 * spacing
    if not 0 <= width <= _MAX_SMOOTHING * spacing:
        raise config.error(
            "rdf.width",
            f"expected a kernel width in [0, {_MAX_SMOOTHING:g} bin widths = "
            f"{_MAX_SMOOTHING * spacing:.6g}] (0: a plain histogram), got {table['width']!r}",
        )
    first, last = float(times[0]), float(times[-1])
    start = number(config, "rdf.start", table["start"]) if "start" in table else first
    if not first <= start <= last:
        raise config.error(
            "rdf.start",
            f"expected a time from the first save time {first:g} to the last save time {last:g} "
            f"(frames from it are averaged), got {table['start']!r}",
        )
    return RdfSpec(
        r_max=float(r_max),
        bins=int(bins),
        width=float(width),
        start=float(start),
        n_species=int(n_species),
    )


def write_rdf(f, spec: RdfSpec, species: np.ndarray) -> None:
    """`/observables/rdf/{step,time,value,r}` of the H5MD run file `f` from the frames it
    holds (the running average from `spec.start`; see the module docstring)."""
    particles = f["particles/all"]
    positions = particles["position/value"]
    time = np.asarray(particles["position/time"])
    step = np.asarray(particles["position/step"])
    edges = np.asarray(particles["box/edges/value"])
    first = int(np.searchsorted(time, spec.start - 1e-9 * max(1.0, abs(spec.start))))
    g = spec.frames(positions[first:], edges[first:], species)
    # the bins each frame's box measures whole: up to half its shortest edge
    upper = (np.arange(1, spec.bins + 1) * (spec.r_max / spec.bins))[None, :]
    measured = upper <= 0.5 * np.min(edges[first:], axis=1)[:, None] * (1 + 1e-12)  # [T, bins]
    sums = np.cumsum(np.where(measured[:, None, :], g, 0.0), axis=0)
    with np.errstate(invalid="ignore"):
        running = sums / np.cumsum(measured, axis=0)[:, None, :]
    value = np.full((len(time), *running.shape[1:]), np.nan)
    value[first:] = running
    if spec.n_species == 1:
        value = value[:, 0]
    group = f.require_group("observables").create_group("rdf")
    group.create_dataset("step", data=step)
    group.create_dataset("time", data=time)
    dataset = group.create_dataset("value", data=value)
    dataset.attrs["start"] = spec.start
    dataset.attrs["width"] = spec.width
    if spec.n_species > 1:
        dataset.attrs["pairs"] = np.asarray(spec.pairs, dtype=np.int32)
    group.create_dataset("r", data=spec.centres())
