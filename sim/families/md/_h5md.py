"""The H5MD 1.1 file of an MD run: the layout written frame by frame (`MdSink`) and the
finished run that writes it whole (`MdRunResult`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from physics.md import System, unit_system

from ..._errors import SimulationError, optional_module
from ..._store import Result, package_versions, write_root_attrs
from ._molecules import written_bonds
from ._rdf import RdfSpec, write_rdf

# H5MD image counters (`/particles/all/image`) are int32: a particle farther than this
# many box lengths from the box cannot be written, and is a blown-up run.
IMAGE_LIMIT = 2**31 - 1


_PARTICLE_ROWS = ("position", "velocity", "box")
"""Rows of a run that H5MD keeps under /particles/all rather than /observables."""
_QUANTITY = {
    "potential_energy": "energy",
    "kinetic_energy": "energy",
    "total_energy": "energy",
    "conserved_energy": "energy",
    "temperature": "temperature",
    "pressure": "pressure",
    "volume": "volume",
    "density": "density",
    "mass_density": "mass_density",
    "position": "length",
    "velocity": "velocity",
    "edges": "length",
}
"""The quantity of each H5MD element, whose unit its `unit` attribute names."""


@dataclasses.dataclass
class MdSink:
    """The H5MD 1.1 layout of an MD run, written frame by frame: /h5md, /particles/all
    (box with time-dependent edges, wrapped position with image, velocity, species,
    mass), /observables/<name>, /parameters/<name>, /stats."""

    model: str
    config: str
    time: np.ndarray
    step: np.ndarray
    system: System
    params: dict[str, np.ndarray]
    seed: int | None = None
    units: str = "reduced"
    rdf: RdfSpec | None = None  # `[rdf]`: written by `finish` from the frames

    def create(self, f, rows: dict[str, np.ndarray]) -> None:
        write_root_attrs(
            f, format="simjax.run", model=self.model, config=self.config, seed=self.seed
        )
        h5md = f.create_group("h5md")
        h5md.attrs["version"] = np.asarray([1, 1], dtype=np.int32)
        h5md.create_group("author").attrs["name"] = "simjax"
        creator = h5md.create_group("creator")
        creator.attrs["name"] = "simjax"
        creator.attrs["version"] = package_versions().get("simjax", "0")
        system = self.system
        dim = system.dim
        frames = len(self.time)
        particles = f.create_group("particles/all")
        box = particles.create_group("box")
        box.attrs["dimension"] = np.int32(dim)
        position = np.asarray(rows["position"])
        if system.space.periodic:
            edges = np.asarray(system.space.box, dtype=float)
            box.attrs["boundary"] = np.array([b"periodic"] * dim)
            # (a barostat's box changes: its edges are written frame by frame from the "box" rows)
            self._element(box, "edges", (dim,), float)[...] = np.broadcast_to(edges, (frames, dim))
            self._element(particles, "image", position.shape[1:], np.int32)
        else:
            box.attrs["boundary"] = np.array([b"none"] * dim)
        self._element(particles, "position", position.shape[1:], position.dtype)
        velocity = np.asarray(rows["velocity"])
        self._element(particles, "velocity", velocity.shape[1:], velocity.dtype)
        particles.create_dataset("species", data=np.asarray(system.species, dtype=np.int32))
        mass = particles.create_dataset("mass", data=np.asarray(system.mass, dtype=float))
        if self._labels:
            mass.attrs["unit"] = self._labels["mass"]
        bonds = written_bonds(system)
        if bonds is not None:  # H5MD 1.1 connectivity: pairs of particle indices of /particles/all
            f.create_dataset("connectivity/all/bonds", data=bonds.astype(np.int32)).attrs[
                "particles_group"
            ] = particles.ref
        if system.topology is not None:
            particles.create_dataset(
                "molecule", data=np.asarray(system.topology.molecule, dtype=np.int32)
            )
        observables = f.require_group("observables")
        for name, values in rows.items():
            if name not in _PARTICLE_ROWS:
                values = np.asarray(values)
                self._element(observables, name, values.shape[1:], values.dtype)
        params = f.create_group("parameters")
        for name, value in self.params.items():
            params.create_dataset(name, data=np.asarray(value))

    @property
    def _labels(self) -> dict[str, str]:
        return unit_system(self.units).labels

    def _element(self, group, name: str, shape: tuple[int, ...], dtype):
        """An H5MD time-dependent element {step, time, value}; returns `value`, allocated.
        Outside reduced units, `time` and `value` carry the H5MD `unit` attribute (H5MD
        1.1, units module: "nm", "ps", "kJ mol-1", ...)."""
        g = group.create_group(name)
        g.create_dataset("step", data=np.asarray(self.step, dtype=np.int64))
        time = g.create_dataset("time", data=np.asarray(self.time, dtype=float))
        fill = np.nan if np.issubdtype(np.dtype(dtype), np.floating) else 0
        value = g.create_dataset(
            "value", shape=(len(self.time), *shape), dtype=dtype, fillvalue=fill
        )
        labels = self._labels
        if labels:
            time.attrs["unit"] = labels["time"]
            if name in _QUANTITY:
                value.attrs["unit"] = labels[_QUANTITY[name]]
        return value

    def write(self, f, k: int, rows: dict[str, np.ndarray]) -> None:
        particles = f["particles/all"]
        position = np.asarray(rows["position"])
        end = k + position.shape[0]
        if self.system.space.periodic:
            if "box" in rows:  # each frame in its own box
                edges = np.asarray(rows["box"], dtype=position.dtype)
                particles["box/edges/value"][k:end] = edges
                edges = edges[:, None, :]
            else:
                edges = np.asarray(self.system.space.box, dtype=position.dtype)
            with np.errstate(invalid="ignore"):
                image = np.floor(position / edges)
            if not np.all(
                np.abs(image) <= IMAGE_LIMIT
            ):  # NaN included: never a wrapped-around counter
                frame = k + int(np.argmin(np.all(np.abs(image) <= IMAGE_LIMIT, axis=(1, 2))))
                raise SimulationError(
                    f"{self.model}: the run blew up at step {int(self.step[frame])} (t = "
                    f"{float(self.time[frame]):g}): "
                    "a particle is beyond the int32 image counters of the output (limit "
                    f"{IMAGE_LIMIT} box lengths)"
                )
            image = image.astype(np.int32)
            particles["position/value"][k:end] = position - image * edges
            particles["image/value"][k:end] = image
        else:
            particles["position/value"][k:end] = position
        particles["velocity/value"][k:end] = np.asarray(rows["velocity"])
        for name, values in rows.items():
            if name not in _PARTICLE_ROWS:
                f["observables"][name]["value"][k:end] = np.asarray(values)

    def finish(self, f, stats: dict[str, Any]) -> None:
        if self.rdf is not None:
            write_rdf(f, self.rdf, np.asarray(self.system.species))
        group = f.require_group("stats")
        for key, value in stats.items():
            group.attrs[key] = value


@dataclasses.dataclass
class MdRunResult(Result):
    """A finished MD run; `save` writes H5MD 1.1 (readable by MDAnalysis, VMD, ...).

    Attributes:
        model: registry name; config: the resolved TOML text.
        time, step: save times and step numbers [T].
        observables: potential_energy, kinetic_energy, total_energy, temperature,
            pressure [T] (conserved_energy with Nose-Hoover), position and velocity
            [T, n, dim] (unwrapped).
        system: the starting system (box, species, masses).
        params: parameter values; seed: the [system] seed; stats: engine statistics.
    """

    model: str
    config: str
    time: np.ndarray
    step: np.ndarray
    observables: dict[str, np.ndarray]
    system: System
    params: dict[str, np.ndarray]
    seed: int | None = None
    stats: dict[str, int] = dataclasses.field(default_factory=dict)
    units: str = "reduced"
    rdf: RdfSpec | None = None

    def sink(self) -> MdSink:
        return MdSink(
            self.model,
            self.config,
            self.time,
            self.step,
            self.system,
            self.params,
            self.seed,
            self.units,
            self.rdf,
        )

    def write(self, f) -> None:
        """The H5MD layout (docs/architecture.md, File layouts) in `f`."""
        sink = self.sink()
        sink.create(f, self.observables)
        sink.write(f, 0, self.observables)
        sink.finish(f, self.stats)

    def to_xarray(self):
        """An `xarray.Dataset`: the scalar observables over `time` (with the MD `step` as
        a second coordinate of it), positions and velocities over `time`, `particle` and
        `spatial` (x, y, z), each particle's `species` and `mass` as coordinates.

        Raises:
            MissingExtra: xarray is not installed (an `ImportError`).
        """
        xr = optional_module("xarray", "xarray", "xarray Datasets")

        n, dim = self.observables["position"].shape[1:]
        data = {}
        for name, value in self.observables.items():
            value = np.asarray(value)
            data[name] = (
                ("time", "spatial")
                if name == "box"
                else ("time", "particle", "spatial")[: value.ndim],
                value,
            )
        coords = {
            "time": np.asarray(self.time),
            "step": ("time", np.asarray(self.step)),
            "particle": np.arange(n),
            "spatial": ["x", "y", "z"][:dim],
            "species": ("particle", np.asarray(self.system.species)),
            "mass": ("particle", np.asarray(self.system.mass)),
        }
        attrs = {
            "model": self.model,
            "config": self.config,
            **({"seed": self.seed} if self.seed is not None else {}),
        }
        return xr.Dataset(data, coords=coords, attrs=attrs)

    def __repr__(self) -> str:
        n = self.observables["position"].shape[1]
        return (
            f"MdRunResult(model={self.model!r}, n={n}, T={len(self.time)}, "
            f"steps={int(self.step[-1])})"
        )


def write_h5md(f, result: MdRunResult) -> None:
    """H5MD 1.1 groups of an MD run into an open h5py file `f`."""
    sink = result.sink()
    sink.create(f, result.observables)
    sink.write(f, 0, result.observables)
    sink.finish(f, result.stats)
