"""Trajectories of every state component at shared save times, in memory
(`Trajectories`) and in HDF5 files (what `load_trajectories` reads, what
`save_trajectories` writes):
    /time                  [T] save times, finite and strictly increasing
    /observables/<name>    [B, T] (B trajectories) or [T] (one), one per state component

This is the layout of a `sim run` file (one trajectory) and of a full-save sweep over
initial states (B trajectories).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import h5py
import numpy as np
from jaxtyping import Float

from sim import DataError
from sim.core import atomic_h5, open_hdf5, write_root_attrs
from solvers import did_you_mean

TRAJECTORIES_FORMAT = "simjax.trajectories"

Values = Float[np.ndarray, "B n T"]


@dataclasses.dataclass(frozen=True)
class Trajectories:
    """Observed trajectories of every state component at shared save times.

    Attributes:
        path: the file they came from (None when built in memory).
        names: state component names, in the order of `values`' second axis.
        time: save times [T], strictly increasing.
        values: the observed states [B, n, T] (B trajectories, n components).
    """

    path: Path | None
    names: tuple[str, ...]
    time: np.ndarray
    values: np.ndarray

    def __post_init__(self):
        b_n_t = np.shape(self.values)
        if len(b_n_t) != 3 or b_n_t[1] != len(self.names) or b_n_t[2] != len(self.time):
            raise ValueError(
                f"values must have shape [B, {len(self.names)}, {len(self.time)}] "
                f"(trajectories, components {', '.join(self.names)}, times); got {b_n_t}"
            )

    @property
    def count(self) -> int:
        """Number of trajectories B."""
        return int(self.values.shape[0])

    def initial(self) -> np.ndarray:
        """The first observed state of every trajectory [B, n]."""
        return self.values[:, :, 0]

    def subset(self, trajectories=None, times=None) -> Trajectories:
        """Some of the trajectories and/or save times (numpy indices, slices or masks)."""
        values, time = self.values, self.time
        if trajectories is not None:
            values = values[np.arange(self.count)[trajectories]]
        if times is not None:
            index = np.arange(len(time))[times]
            values, time = values[:, :, index], time[index]
        return Trajectories(self.path, self.names, np.asarray(time), np.asarray(values))


def load_trajectories(
    path: str | Path,
    names: Sequence[str],
    *,
    time: str = "/time",
    group: str = "/observables",
) -> Trajectories:
    """Read trajectories of the state components `names` from an HDF5 file.

    Arguments:
        path: the file (layout in this module's docstring).
        names: the state component names (`model.state_names`); each must be a dataset
            `<group>/<name>`.
        time: dataset of the save times [T].
        group: group holding one dataset per component, [B, T] or [T].

    Returns:
        `Trajectories` with values [B, n, T] as float64.

    Raises:
        DataError: a missing file or dataset, non-finite or unsorted times, a dataset
            whose shape does not match the times or the other components, or non-finite
            values; it names the file and the dataset.

    Example:
        >>> data = load_trajectories("spiral.h5", ("y1", "y2"))
        >>> data.values.shape        # [B, 2, T]
    """
    path = Path(path)
    names = tuple(names)
    with open_hdf5(path, "an HDF5 file of trajectories") as f:
        t = _read(f, path, time)
        if t.ndim != 1 or t.shape[0] < 2:
            raise DataError(
                path, time, f"expected save times of shape [T] with T >= 2, got shape {t.shape}"
            )
        if not np.all(np.isfinite(t)):
            raise DataError(
                path,
                time,
                f"save times must be finite; entry {int(np.argmin(np.isfinite(t)))} is "
                f"{t[~np.isfinite(t)][0]}",
            )
        if not np.all(np.diff(t) > 0):
            i = int(np.argmin(np.diff(t) > 0))
            raise DataError(
                path,
                time,
                f"save times must be strictly increasing; entries {i} and {i + 1} are {t[i]} and "
                f"{t[i + 1]}",
            )
        columns = []
        batch = None
        for name in names:
            key = f"{group.rstrip('/')}/{name}"
            v = _read(f, path, key)
            if v.ndim == 1:
                v = v[None, :]
            if v.ndim != 2 or v.shape[1] != t.shape[0]:
                raise DataError(
                    path,
                    key,
                    f"expected shape [B, {t.shape[0]}] or [{t.shape[0]}] (one value per save time "
                    f"in {time}), got {v.shape[-2:] if v.ndim > 2 else v.shape}",
                )
            if batch is not None and v.shape[0] != batch[1]:
                raise DataError(
                    path, key, f"has {v.shape[0]} trajectories but {batch[0]} has {batch[1]}"
                )
            if not np.all(np.isfinite(v)):
                b, j = np.argwhere(~np.isfinite(v))[0]
                raise DataError(
                    path,
                    key,
                    "values must be finite (every state is needed to start a window); trajectory "
                    f"{b}, time index {j} is {v[b, j]}",
                )
            batch = batch or (key, v.shape[0])
            columns.append(v)
    return Trajectories(path, names, t, np.stack(columns, axis=1))


def _read(f: h5py.File, path: Path, key: str) -> np.ndarray:
    item = f.get(key)
    if not isinstance(item, h5py.Dataset):
        here = f.get(key.rsplit("/", 1)[0] or "/")
        listed = sorted(here.keys()) if isinstance(here, h5py.Group) else []
        hint = f" (found: {', '.join(listed)})" if listed else ""
        raise DataError(
            path,
            key,
            f"no such dataset{hint}.{did_you_mean(key.rsplit('/', 1)[-1], listed)}".rstrip("."),
        )
    value = item[()]
    if not np.issubdtype(np.asarray(value).dtype, np.number):
        raise DataError(path, key, f"expected numbers, got {np.asarray(value).dtype}")
    return np.asarray(value, dtype=np.float64)


def save_trajectories(path: str | Path, data: Trajectories, *, model: str = "") -> Path:
    """Write trajectories in the layout `load_trajectories` reads (atomically).

    Arguments:
        path: the HDF5 file to write (replaced if it exists).
        data: the trajectories: `/time` [T] and one `/observables/<name>` [B, T] per
            component.
        model: the model's name, written as the root attribute `model`.

    Returns:
        `path` as a `Path`.

    Example:
        >>> save_trajectories("spiral.h5", Trajectories(None, ("y1", "y2"), t, values))
    """
    path = Path(path)
    with atomic_h5(path) as f:
        write_root_attrs(f, format=TRAJECTORIES_FORMAT, model=model, config="")
        f.create_dataset("time", data=np.asarray(data.time))
        group = f.create_group("observables")
        for i, name in enumerate(data.names):
            group.create_dataset(name, data=np.asarray(data.values[:, i, :]))
    return path
