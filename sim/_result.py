"""The result of `sim.run` for ODE and PDE models, and its HDF5 run layout."""

from __future__ import annotations

import dataclasses
from typing import Any

import h5py
import numpy as np

from ._errors import DataError, optional_module
from ._shards import is_split, write_blocks
from ._store import Record, Result, write_group, write_root_attrs, xarray_view


@dataclasses.dataclass
class RunSink:
    """The run layout (docs/architecture.md, File layouts) (ODE and PDE), written frame by frame:
    `/time`, `/observables/<name>` [T, ...], `/params`, `/initial`, further groups (`/grid`),
    `/stats` (attributes)."""

    model: str
    config: str
    time: np.ndarray
    params: dict[str, Any]
    initial: dict[str, Any]
    groups: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    seed: int | None = None
    # The model's declared order of its states (or fields): the observables are written
    # in it, the others after them (empty: the rows' own order).
    order: tuple[str, ...] = ()

    def ordered(self, rows: dict[str, Any]) -> dict[str, Any]:
        """`rows` with the declared names first, in their order (a run's rows arrive
        sorted by name, as JAX flattens a dict), then the others as they came."""
        first = [n for n in self.order if n in rows]
        return {n: rows[n] for n in (*first, *(n for n in rows if n not in first))}

    def create(self, f: h5py.File, rows: dict[str, np.ndarray]) -> None:
        write_root_attrs(
            f, format="simjax.run", model=self.model, config=self.config, seed=self.seed
        )
        f.create_dataset("time", data=np.asarray(self.time))
        # (creation order tracked: a reader iterates the observables in the model's order,
        # not alphabetically, and `sim.read` keeps it)
        group = f.create_group("observables", track_order=True)
        frames = len(self.time)
        for name, values in self.ordered(rows).items():
            values = values if is_split(values) else np.asarray(values)
            group.create_dataset(
                name,
                shape=(frames, *values.shape[1:]),
                dtype=np.dtype(values.dtype),
                fillvalue=_fill(values.dtype),
            )
        write_group(f, "params", self.params)
        write_group(f, "initial", self.initial)
        for name, values in self.groups.items():
            write_group(f, name, values)

    def write(self, f: h5py.File, k: int, rows: dict[str, np.ndarray]) -> None:
        # (a field split over devices is written one device's block at a time)
        for name, values in rows.items():
            write_blocks(f["observables"][name], values, k)

    def finish(self, f: h5py.File, stats: dict[str, Any]) -> None:
        group = f.require_group("stats")
        for key, value in stats.items():
            group.attrs[key] = value


def _fill(dtype: np.dtype):
    return np.nan if np.issubdtype(dtype, np.floating) else 0


@dataclasses.dataclass
class RunResult(Result):
    """A finished run: times, observables, the parameters and initial state it used.

    Attributes:
        model: the registry name of the model.
        config: the resolved config as TOML text (every default filled in).
        time: save times [T].
        observables: name -> array [T, ...].
        params: name -> value.
        initial: state component (or field) name -> value.
        groups: further groups of the file, e.g. {"grid": {"x": ...}} for PDEs.
        stats: solver statistics (num_steps, result).
        seed: the seed used, if any.
    """

    model: str
    config: str
    time: np.ndarray
    observables: dict[str, np.ndarray]
    params: dict[str, Any]
    initial: dict[str, Any]
    groups: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    seed: int | None = None

    @classmethod
    def from_record(cls, record: Record) -> RunResult:
        """The run a `sim.read` record of an ODE, SDE or PDE run file holds.

        Raises:
            DataError: the record is not such a run (naming the missing dataset).
        """
        tree = dict(record)
        for key in ("time", "observables"):
            if key not in tree:
                raise DataError(record.path, f"/{key}", "missing; a run file has this dataset")
        attrs = record.attrs
        seed = attrs.get("seed")
        return cls(
            model=str(attrs.get("model", "")),
            config=str(attrs.get("config", "")),
            time=np.asarray(tree["time"]),
            observables=dict(tree["observables"]),
            params=dict(tree.get("params", {})),
            initial=dict(tree.get("initial", {})),
            groups={"grid": dict(tree["grid"])} if isinstance(tree.get("grid"), dict) else {},
            seed=None if seed is None else int(seed),
        )

    def to_xarray(self):
        """An `xarray.Dataset`: every observable over `time`; trailing axes that match the
        grid of a PDE run are its coordinates (`x`, `y`, ...), other axes `<name>_axis_<i>`
        (the paths of an SDE ensemble, the components of a vector observable). Coordinates
        carry `units` where the model declares them (the unit of time its rate parameters
        use; the grid's where its parameters name one).

        Raises:
            MissingExtra: xarray is not installed (an `ImportError`).
        """
        xr = optional_module("xarray", "xarray", "xarray Datasets")

        grid = {name: np.asarray(value) for name, value in self.groups.get("grid", {}).items()}
        grid_shape = tuple(len(v) for v in grid.values())
        data = {}
        for name, value in self.observables.items():
            value = np.asarray(value)
            rest = value.shape[1:]
            on_grid = (
                bool(grid)
                and len(rest) >= len(grid_shape)
                and rest[len(rest) - len(grid_shape) :] == grid_shape
            )
            other = len(rest) - (len(grid_shape) if on_grid else 0)
            dims = ["time", *(f"{name}_axis_{i}" for i in range(other)), *(grid if on_grid else ())]
            data[name] = (dims, value)
        attrs = {
            "model": self.model,
            "config": self.config,
            **({"seed": self.seed} if self.seed is not None else {}),
        }
        time_unit, length_unit = model_units(self.model, self.config)
        coords = {"time": ("time", np.asarray(self.time), _unit_attrs("time", time_unit))}
        for name, value in grid.items():
            coords[name] = (name, value, _unit_attrs(f"{name} coordinate", length_unit))
        return xr.Dataset(data, coords=coords, attrs=attrs)

    def write(self, f: h5py.File) -> None:
        """The run layout (docs/architecture.md, File layouts) in `f`."""
        sink = RunSink(
            self.model, self.config, self.time, self.params, self.initial, self.groups, self.seed
        )
        sink.create(f, self.observables)
        sink.write(f, 0, self.observables)
        sink.finish(f, self.stats)

    def __repr__(self) -> str:
        names = ", ".join(self.observables)
        return f"RunResult(model={self.model!r}, T={len(self.time)}, observables=[{names}])"


# Names that stand for a dimension, not a unit (`length^2/time`): no `units` attribute.
_PLACEHOLDERS = ("", "time", "length", "1", "reduced")


def _unit_attrs(long_name: str, unit: str) -> dict[str, str]:
    return {"long_name": long_name, **({"units": unit} if unit not in _PLACEHOLDERS else {})}


def model_units(model: str, config: str) -> tuple[str, str]:
    """The units of time and length of a run's model, as its parameters declare them
    (`sim._plot_meta.Meta`: time from the denominators of rate parameters; MD in
    reduced units); length from a parameter per time whose numerator is a power of one
    name (`m^2/s` -> `m`). Empty where the model says nothing."""
    from ._plot_meta import Meta

    meta = Meta(_Attributes({"model": model, "config": config}))
    if meta.md_units is not None:
        return meta.md_units["time"], meta.md_units["length"]
    lengths = []
    for _, unit, _ in meta.parameters.values():
        head, slash, tail = unit.partition("/")
        if slash and meta.time_unit and meta.time_unit in tail:
            name, caret, power = head.strip("() ").partition("^")
            if caret and power.strip() in ("2", "3", "4") and name.isidentifier():
                lengths.append(name)
    return meta.time_unit, (lengths[0] if lengths and len(set(lengths)) == 1 else "")


class _Attributes:
    """A record with these root attributes and no datasets (what `Meta` reads)."""

    def __init__(self, attrs: dict[str, Any]):
        self.attrs = attrs

    def __contains__(self, key: str) -> bool:
        return False


@xarray_view("simjax.run")
def _run_dataset(record: Record):
    """A run file of the ODE, SDE or PDE families as `RunResult.to_xarray` gives it."""
    return RunResult.from_record(record).to_xarray()


@xarray_view("simjax.sweep")
def _sweep_dataset(record: Record):
    """A sweep file as `SweepResult.to_xarray` gives it."""
    from ._sweep_store import SweepResult

    return SweepResult.from_tree(record.attrs, dict(record)).to_xarray()


@xarray_view("h5md")
def _h5md_dataset(record: Record):
    """An H5MD run (simjax's or another program's) as `MdRunResult.to_xarray` gives it:
    positions unwrapped by the image counters where the file has them."""
    xr = optional_module("xarray", "xarray", "xarray Datasets")

    def node(key: str):
        try:
            return record[key]
        except (KeyError, TypeError):
            raise DataError(
                record.path, f"/{key}", "missing; an H5MD run has this dataset"
            ) from None

    position = np.asarray(node("particles/all/position/value"), dtype=float)
    if position.ndim != 3:
        raise DataError(
            record.path,
            "/particles/all/position/value",
            f"expected [time, particle, spatial], found shape {position.shape}",
        )
    frames, n, dim = position.shape
    particles = node("particles/all")
    if "image" in particles:
        edges = np.asarray(node("particles/all/box/edges/value"), dtype=float).reshape(-1, 1, dim)
        position = position + np.asarray(node("particles/all/image/value")) * edges
    time = np.asarray(node("particles/all/position/time"), dtype=float)
    step = node("particles/all/position/step")
    time_unit, length_unit = model_units(
        str(record.attrs.get("model", "")), str(record.attrs.get("config", ""))
    )
    data = {
        "position": (
            ("time", "particle", "spatial"),
            position,
            _unit_attrs("position", length_unit),
        )
    }
    if "velocity" in particles:
        data["velocity"] = (
            ("time", "particle", "spatial"),
            np.asarray(node("particles/all/velocity/value")),
        )
    observables = record.get("observables", {})
    for name, element in observables.items() if isinstance(observables, dict) else ():
        value = np.asarray(element.get("value")) if isinstance(element, dict) else None
        if value is not None and value.shape[:1] == (frames,):
            data[name] = (("time", *(f"{name}_axis_{i}" for i in range(value.ndim - 1))), value)
    coords = {
        "time": ("time", time, _unit_attrs("time", time_unit)),
        "step": ("time", np.asarray(step)),
        "particle": np.arange(n),
        "spatial": ["x", "y", "z"][:dim],
    }
    for name in ("species", "mass"):
        if name in particles:
            coords[name] = ("particle", np.asarray(particles[name]))
    attrs = {k: record.attrs[k] for k in ("model", "config", "seed") if k in record.attrs}
    return xr.Dataset(data, coords=coords, attrs=attrs)
