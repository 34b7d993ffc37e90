"""Where sweep results go: the HDF5 sweep layout written chunk by chunk (crash-safe,
resumable), or arrays in memory; and `SweepResult`, the sweep read back.

The layout (docs/architecture.md, File layouts): `/time` [T]; `/params/<name>` [B] for every scalar
parameter and `/initial/<name>` [B] for every named initial value (swept or not); per-run results
`/observables/<name>` [B, T, ...] (save = "full"), [B, ...] (save = "final"), or for
save = "summary" a group `/observables/<name>/{min,max,mean,final}` (min, max and mean
over all save times and every axis of the observable, so [B]; final [B, ...]);
`/stats/{num_steps,result}` [B]; `/status` [B] (0 pending, 1 ok, 2 diverged or failed).
A failed run keeps its params, and its observables are NaN.

While it runs, a sweep lives in `.<name>.partial` beside the target: every dataset is
created at full size first (contiguous, allocated and filled at once), so finishing a
chunk only writes raw values (observables, then stats, then `/status`) and flushes. A
kill at any point leaves the file's structure intact, and a chunk whose `/status` was not
written is simply computed again by `--resume`. Complete, the file is renamed to the
target, so the target only ever appears whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ._errors import DataError, InputError, optional_module
from ._identity import InputIdentity
from ._store import DAMAGED_FILE_ERRORS, Result, error_reason, write_root_attrs
from ._unfinished import config_difference, partial_path

FORMAT = "simjax.sweep"
PENDING, OK, FAILED = 0, 1, 2


@dataclasses.dataclass(frozen=True)
class Layout:
    """What a sweep file holds.

    Attributes:
        runs: B.
        fixed: datasets known before any run (time, params, initial), path -> array.
        rows: per-run datasets, path -> (shape of one run's value, dtype).
        attrs: root attributes (format, model, config, ...).
        inputs: the files the sweep reads and the package versions: with the config,
            its identity (`sim._identity`), stored in the file and compared on resume.
    """

    runs: int
    fixed: dict[str, np.ndarray]
    rows: dict[str, tuple[tuple[int, ...], np.dtype]]
    attrs: dict[str, Any]
    inputs: InputIdentity = dataclasses.field(default_factory=lambda: InputIdentity.of({}))


def _fill(dtype: np.dtype):
    return np.nan if np.issubdtype(dtype, np.floating) else 0


class FileSink:
    """The sweep layout on disk, written chunk by chunk under the partial name."""

    def __init__(self, path: Path, file: h5py.File):
        self.path = path
        self.partial = partial_path(path)
        self._file = file
        self.status = file["status"][()]
        self.result_codes = file["stats/result"][()]
        self._datasets: dict[str, h5py.Dataset] = {}

    @staticmethod
    def check_start(
        path: str | Path, config: str, resume: bool, inputs: InputIdentity | None = None
    ) -> None:
        """Before any work: an unfinished sweep of `path` may only be resumed, and only
        with the config it was started from, the same input files (`inputs`) and the same
        package versions.

        Raises:
            InputError: naming the unfinished file.
        """
        partial = partial_path(path)
        if not partial.exists():
            if resume and Path(path).exists():
                raise InputError(
                    path,
                    "",
                    "is a finished sweep; there is nothing to resume (run without --resume to "
                    "overwrite it)",
                )
            return
        if not resume:
            raise InputError(
                partial,
                "",
                "an unfinished sweep is here; pass --resume to continue it, or delete it to start "
                "over",
            )
        try:
            with h5py.File(partial, "r") as f:
                stored = f.attrs.get("config", b"")
                fmt = f.attrs.get("format")
                attrs = dict(f.attrs)
        except DAMAGED_FILE_ERRORS as e:
            raise DataError(
                partial, "", f"cannot be read ({error_reason(e)}); delete it to start over"
            ) from None
        stored = stored.decode() if isinstance(stored, bytes) else str(stored)
        if fmt != FORMAT:
            raise DataError(
                partial, "", "is not an unfinished simjax sweep; delete it to start over"
            )
        # [checks] are part of a sweep's work: they decide the status recorded for each run
        difference = config_difference(stored, config)
        if difference:
            raise InputError(
                partial,
                "config",
                f"the unfinished sweep was started from a different config ({difference}); "
                "resume with the same config and --set values, or delete it to start over",
            )
        (inputs if inputs is not None else InputIdentity.of({})).check(attrs, partial, "sweep")

    @classmethod
    def create(cls, path: str | Path, layout: Layout) -> FileSink:
        """Create the partial file with every dataset at full size.

        Raises:
            InputError: an unfinished sweep already exists under the partial name.
        """
        path = Path(path)
        partial = partial_path(path)
        if partial.exists():
            raise InputError(
                partial,
                "",
                "an unfinished sweep is here; pass --resume to continue it, or delete it to start "
                "over",
            )
        tmp = partial.with_name(partial.name + ".new")
        try:
            with h5py.File(tmp, "w") as f:
                attrs = dict(layout.attrs)
                write_root_attrs(
                    f,
                    format=FORMAT,
                    model=attrs.pop("model"),
                    config=attrs.pop("config"),
                    seed=attrs.pop("seed"),
                )
                for key, value in attrs.items():
                    f.attrs[key] = value
                layout.inputs.write(f.attrs)
                for name, value in layout.fixed.items():
                    f.create_dataset(name, data=value)
                for name, (shape, dtype) in layout.rows.items():
                    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
                    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
                    f.create_dataset(
                        name,
                        shape=(layout.runs, *shape),
                        dtype=dtype,
                        fillvalue=_fill(dtype),
                        dcpl=dcpl,
                    )
            os.replace(tmp, partial)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        return cls(path, h5py.File(partial, "r+"))

    @classmethod
    def resume(cls, path: str | Path, layout: Layout) -> FileSink:
        """Open the unfinished sweep for `path` (which must exist) and check that it was
        started from the same resolved config.

        Raises:
            InputError: a different config, or a damaged or foreign file.
        """
        FileSink.check_start(path, layout.attrs["config"], resume=True, inputs=layout.inputs)
        partial = partial_path(path)
        try:
            f = h5py.File(partial, "r+")
        except DAMAGED_FILE_ERRORS as e:
            raise DataError(
                partial, "", f"cannot be read ({error_reason(e)}); delete it to start over"
            ) from None
        try:
            for name, (shape, dtype) in layout.rows.items():
                try:
                    found = f.get(name)
                    kind = (found.shape, found.dtype) if isinstance(found, h5py.Dataset) else None
                except DAMAGED_FILE_ERRORS as e:
                    raise DataError(
                        partial,
                        name,
                        f"cannot be read ({error_reason(e)}); delete the file to start over",
                    ) from None
                if kind != ((layout.runs, *shape), np.dtype(dtype)):
                    raise DataError(
                        partial,
                        name,
                        "is missing or has another shape or type; delete the file to start over",
                    )
            try:
                return cls(Path(path), f)
            except DAMAGED_FILE_ERRORS as e:
                raise DataError(
                    partial,
                    "status",
                    f"cannot be read ({error_reason(e)}); delete the file to start over",
                ) from None
        except BaseException:
            f.close()
            raise

    def write(self, lo: int, hi: int, values: dict[str, np.ndarray]) -> None:
        """Write runs [lo, hi): results first, `/status` last, then flush."""
        for name, value in values.items():
            if name != "status":
                self._dataset(name)[lo:hi] = value
        self._dataset("status")[lo:hi] = values["status"]
        self._file.flush()
        self.status[lo:hi] = values["status"]
        self.result_codes[lo:hi] = values["stats/result"]

    def _dataset(self, name: str) -> h5py.Dataset:
        """The open dataset `name` (looked up once: a path lookup per write is slow)."""
        if name not in self._datasets:
            self._datasets[name] = self._file[name]
        return self._datasets[name]

    def finish(self) -> Path:
        """Close the file and give it its final name."""
        self._file.close()
        os.replace(self.partial, self.path)
        return self.path

    def abandon(self, keep: bool) -> None:
        """Close after a failure; keep the partial file (for --resume) or remove it."""
        self._file.close()
        if not keep:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.partial)


class StatusSink:
    """What the other processes of a distributed sweep keep of its results: each run's
    status and result code (the lead, process 0, writes the file: `sim._processes`)."""

    def __init__(self, layout: Layout):
        self.status = np.zeros(layout.runs, dtype=layout.rows["status"][1])
        self.result_codes = np.zeros(layout.runs, dtype=layout.rows["stats/result"][1])

    def write(self, lo: int, hi: int, values: dict[str, np.ndarray]) -> None:
        self.status[lo:hi] = values["status"]
        self.result_codes[lo:hi] = values["stats/result"]

    def abandon(self, keep: bool) -> None:
        pass


class MemorySink:
    """The same layout as numpy arrays (for `sim.sweep(config)` without a file)."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self.arrays = {
            name: np.full((layout.runs, *shape), _fill(dtype), dtype=dtype)
            for name, (shape, dtype) in layout.rows.items()
        }
        self.status = self.arrays["status"]
        self.result_codes = self.arrays["stats/result"]

    def write(self, lo: int, hi: int, values: dict[str, np.ndarray]) -> None:
        for name, value in values.items():
            self.arrays[name][lo:hi] = value

    def abandon(self, keep: bool) -> None:
        pass

    def result(self) -> SweepResult:
        return SweepResult.from_tree(
            dict(self.layout.attrs), _nest({**self.layout.fixed, **self.arrays})
        )


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path, value in flat.items():
        node = tree
        *parents, leaf = path.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


@dataclasses.dataclass
class SweepResult(Result):
    """A sweep's results as arrays (B runs).

    Attributes:
        model: the model's registry name.
        config: the resolved config as TOML text.
        mode, save: the sweep mode and save mode.
        swept: the swept quantities (`alpha`, `initial.prey`, ...), in config order.
        time: save times [T].
        params: every scalar parameter -> [B].
        initial: every named initial value -> [B].
        observables: name -> [B, T, ...] (full), [B, ...] (final), or
            {min, max, mean, final} -> arrays (summary).
        status: [B]: 1 ok, 2 diverged or failed (its observables NaN), 0 not run.
        stats: num_steps and result (the solver's result code) -> [B].
        grid_shape: the axis lengths of a grid sweep (in `swept` order), else None.
        seed: the sampling seed of random, sobol and latin_hypercube sweeps.
    """

    model: str
    config: str
    mode: str
    # the save mode; field() keeps the inherited method Result.save from being taken as its default
    # (this result is written with save_to)
    save: str = dataclasses.field()
    swept: tuple[str, ...]
    time: np.ndarray
    params: dict[str, np.ndarray]
    initial: dict[str, np.ndarray]
    observables: dict[str, Any]
    status: np.ndarray
    stats: dict[str, np.ndarray]
    grid_shape: tuple[int, ...] | None = None
    seed: int | None = None

    @property
    def runs(self) -> int:
        return int(self.status.shape[0])

    @property
    def ok(self) -> np.ndarray:
        """[B] bool: True for the runs that succeeded."""
        return self.status == OK

    def values(self, name: str) -> np.ndarray:
        """The values [B] of a swept quantity (`alpha` or `initial.prey`)."""
        head, _, rest = name.partition(".")
        return self.initial[rest] if head == "initial" and rest else self.params[name]

    @classmethod
    def from_tree(cls, attrs: dict[str, Any], tree: dict[str, Any]) -> SweepResult:
        grid = attrs.get("grid_shape")
        return cls(
            model=str(attrs["model"]),
            config=str(attrs["config"]),
            mode=str(attrs["mode"]),
            save=str(attrs["save"]),
            swept=tuple(json.loads(attrs["swept"])),
            time=tree["time"],
            params=tree.get("params", {}),
            initial=tree.get("initial", {}),
            observables=tree["observables"],
            status=tree["status"],
            stats=tree["stats"],
            grid_shape=tuple(json.loads(grid)) if grid else None,
            seed=attrs.get("seed"),
        )

    @classmethod
    def read(cls, path: str | Path) -> SweepResult:
        """Load a sweep file.

        Raises:
            DataError: the file is missing, unreadable, or not a sweep.
        """
        from ._store import read

        record = read(path)
        if record.format != FORMAT:
            raise DataError(
                path, "", f"is not a sweep file (format {record.format!r}, expected {FORMAT!r})"
            )
        return cls.from_tree(record.attrs, dict(record))

    def to_xarray(self):
        """An `xarray.Dataset` with a `run` dimension (and `time`, `axis_<i>` for further
        axes); swept quantities are coordinates along `run`. Summary statistics become
        variables `<name>_<stat>`. For a grid sweep, `ds.set_index(run=list(result.swept))
        .unstack("run")` gives one dimension per swept quantity.

        Raises:
            MissingExtra: xarray is not installed (an `ImportError`).
        """
        xr = optional_module("xarray", "xarray", "xarray Datasets")

        data = {}
        for name, value in _flat_observables(self.observables).items():
            dims = ["run"]
            if self.save == "full":
                dims.append("time")
            dims += [f"{name}_axis_{i}" for i in range(value.ndim - len(dims))]
            data[name] = (dims, value)
        data["status"] = (["run"], self.status)
        for key, value in self.stats.items():
            data[key] = (["run"], value)
        coords: dict[str, Any] = {"run": np.arange(self.runs)}
        if self.save == "full":
            coords["time"] = self.time
        for name in self.swept:
            coords[name] = ("run", self.values(name))
        attrs = {"model": self.model, "mode": self.mode, "save": self.save, "config": self.config}
        return xr.Dataset(data, coords=coords, attrs=attrs)

    def write(self, f: h5py.File) -> None:
        """The sweep layout in `f` (`save_to` writes it to a path atomically)."""
        write_root_attrs(f, format=FORMAT, model=self.model, config=self.config, seed=self.seed)
        for key, value in root_attrs(
            self.mode, self.save, self.swept, self.grid_shape, self.runs
        ).items():
            f.attrs[key] = value
        f.create_dataset("time", data=self.time)
        flat = {
            **{f"params/{k}": v for k, v in self.params.items()},
            **{f"initial/{k}": v for k, v in self.initial.items()},
            **{f"observables/{k}": v for k, v in _flat_observables(self.observables, "/").items()},
            **{f"stats/{k}": v for k, v in self.stats.items()},
            "status": self.status,
        }
        for name, value in flat.items():
            f.create_dataset(name, data=value)

    def __repr__(self) -> str:
        failed = int(np.sum(self.status == FAILED))
        return (
            f"SweepResult(model={self.model!r}, mode={self.mode!r}, runs={self.runs}, "
            f"failed={failed}, swept={list(self.swept)})"
        )


def _flat_observables(observables: dict[str, Any], sep: str = "_") -> dict[str, np.ndarray]:
    out = {}
    for name, value in observables.items():
        if isinstance(value, dict):
            out.update({f"{name}{sep}{stat}": v for stat, v in value.items()})
        else:
            out[name] = value
    return out


def root_attrs(
    mode: str, save: str, swept: tuple[str, ...], grid_shape, runs: int
) -> dict[str, Any]:
    """The sweep's own root attributes, beside the common ones."""
    attrs = {"mode": mode, "save": save, "swept": json.dumps(list(swept)), "runs": runs}
    if grid_shape is not None:
        attrs["grid_shape"] = json.dumps(list(grid_shape))
    return attrs
