"""HDF5 files: atomic writes, the common root attributes, `read`, and `Result`, the
interface every result (run, MD run, sweep, fit, posterior) shares."""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import io
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ._errors import DataError, InputError

FORMAT_VERSION = "1.0"
# What h5py raises on a damaged file: besides OSError, a broken B-tree, heap or object
# header surfaces as RuntimeError, KeyError, TypeError or a ValueError (undecodable text).
DAMAGED_FILE_ERRORS = (OSError, RuntimeError, KeyError, TypeError, ValueError)
_VERSIONED = (
    "simjax",
    "jax",
    "jaxlib",
    "equinox",
    "diffrax",
    "numpy",
    "h5py",
    "numpyro",
    "optimistix",
    "optax",
)


@functools.cache
def _versions() -> dict[str, str]:
    out = {}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def package_versions() -> dict[str, str]:
    """Versions of simjax and the numerical packages it runs on."""
    return dict(_versions())


# Longest file name most file systems take (bytes); longer companion names are shortened.
NAME_MAX = 255


def companion_path(path: str | Path, tag: str) -> Path:
    """A hidden file beside `path` that belongs to it: `.<name>.<tag>` (the unfinished
    output, its checkpoint, its lock). When that name would be too long for the file
    system, the name is cut and a digest of the whole name keeps it unique; the result
    depends only on `path` and `tag`, so a resumed command finds what the first wrote."""
    path = Path(path)
    name = f".{path.name}.{tag}"
    if len(os.fsencode(name)) <= NAME_MAX - 16:  # room for a temporary suffix
        return path.with_name(name)
    digest = hashlib.sha256(os.fsencode(path.name)).hexdigest()[:16]
    head = os.fsencode(path.name)[:120].decode(errors="ignore")
    return path.with_name(f".{head}~{digest}.{tag}")


COMPANION_TAGS = ("partial", "checkpoint", "lock")


def is_companion(path: str | Path) -> bool:
    """Whether `path` is named as a working file of some output (`companion_path`, or
    the temporary name of `atomic_h5`): writing it would replace another command's
    unfinished run, checkpoint or lock."""
    name = Path(path).name
    return name.startswith(".") and (
        name.endswith(tuple(f".{tag}" for tag in COMPANION_TAGS)) or name.endswith(".tmp")
    )


def _kind(mode: int) -> str | None:
    """What a non-regular file is ('a FIFO', ...), or None for a regular file."""
    for test, what in (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return what
    return None


def check_output_path(
    path: str | Path, source: str = "-o", key: str = "", inputs: Iterable[str | Path] = ()
) -> Path:
    """Check before any work that `path` can be written: its folder exists and is writable,
    it is neither a folder nor a device, FIFO or socket (which a rename would replace),
    it is none of the command's `inputs` (compared as files, not as spellings), and it is
    not a symbolic link: the result, written under a temporary name and renamed, would
    replace the link, and its lock would not be the lock of the file the link names (a
    second writer naming that file would not be stopped). Nor may it be a working file
    of another output (its unfinished run, checkpoint, lock or temporary file), and an
    existing file there must be writable.

    Arguments:
        path: the output file to be written.
        source: what named the path in an error (the option or config file).
        key: the config key that holds the path ('' for an option).
        inputs: the paths of the command's input files.

    Returns:
        `path` as a `Path`.

    Raises:
        InputError: naming `source` (the option or config file) and `key`.
    """
    path = Path(path)
    what = f"{key} = {str(path)!r}" if key else str(path)
    if path.is_dir():
        raise InputError(
            source, key or str(path), f"{what} is a folder; expected a file path ending in .h5"
        )
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = None
    kind = None if mode is None else _kind(mode)
    if kind is not None:
        raise InputError(
            source,
            key or str(path),
            f"{what} is {kind}; expected a regular file path (outputs are written under a "
            "temporary name and renamed)",
        )
    for given in inputs:
        # (the real path too: a symlink to an input that does not exist yet would be
        # written through)
        if same_file(path, given) or os.path.realpath(path) == os.path.realpath(given):
            raise InputError(
                source,
                key or str(path),
                f"{what} is the input file {str(given)!r} of this command; choose another output "
                "path",
            )
    if path.is_symlink():
        raise InputError(
            source,
            key or str(path),
            f"{what} is a symbolic link (to {os.readlink(path)!r}); give the path of the file "
            "itself, or another output path",
        )
    if is_companion(path):
        raise InputError(
            source,
            key or str(path),
            f"{what} is a working file of another output (its unfinished run, checkpoint, lock or "
            "temporary file); choose another output path",
        )
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(source, key or str(path), f"folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(source, key or str(path), f"folder {str(folder)!r} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(source, key or str(path), f"{str(path)!r} exists and is not writable")
    return path


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name the same existing file (by device and inode, so links and
    other spellings of one file match)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def atomic_file(path: str | Path, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary path beside `path` (ending in `suffix`, for writers that choose the
    format by the name) to write in the block; renamed to `path` only when the block
    completes. On any error the temporary file is removed and an existing `path` is left
    untouched."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(
        prefix=companion_path(path, "").name,
        suffix=suffix,
        dir=path.parent if str(path.parent) else ".",
    )
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; results are not
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_h5(path: str | Path) -> Iterator[h5py.File]:
    """Open a new HDF5 file under a temporary name beside `path`; rename it to `path`
    only when the block completes. On any error the temporary file is removed and an
    existing `path` is left untouched. On the processes of a distributed run other than
    the lead the file is one in memory, never on disk (`sim._processes.h5_file`)."""
    from . import _processes

    if not _processes.lead():
        with _processes.h5_file(path, "w") as f:
            yield f
        return
    with atomic_file(path) as tmp, h5py.File(tmp, "w") as f:
        yield f


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_root_attrs(
    f: h5py.File, *, format: str, model: str, config: str, seed: int | None = None
) -> None:
    """The root attributes every simjax file carries (docs/architecture.md, File layouts):
    the four below, and `format_version`, `created` (UTC, ISO 8601 to the second) and
    `versions` (the package versions as JSON).

    Arguments:
        f: the file open for writing.
        format: the kind of file (attribute `format`).
        model: the model's name (attribute `model`).
        config: the config text (attribute `config`).
        seed: the random seed (attribute `seed`, an int), or None to write none.
    """
    f.attrs["format"] = format
    f.attrs["format_version"] = FORMAT_VERSION
    f.attrs["model"] = model
    f.attrs["config"] = config
    f.attrs["created"] = datetime.datetime.now(
        datetime.timezone.utc  # noqa: UP017 (datetime.UTC is Python 3.11+)
    ).isoformat(timespec="seconds")
    f.attrs["versions"] = json.dumps(package_versions())
    if seed is not None:
        f.attrs["seed"] = int(seed)


def write_group(f: h5py.File | h5py.Group, name: str, values: Mapping[str, Any]) -> None:
    """Write `values` (name -> array) as datasets of group `name`.

    Arguments:
        f: the open file or group to write in.
        name: the group's path, created if missing (an existing group is reused).
        values: dataset name -> array-like, each written as `np.asarray(value)`, in
            this order (a new group tracks the order its datasets were created in, which
            `read` keeps).
    """
    group = f.require_group(name) if name in f else f.create_group(name, track_order=True)
    for key, value in values.items():
        group.create_dataset(key, data=np.asarray(value))


# The xarray view of each kind of file, by format ("h5md" for an H5MD file), registered
# with `xarray_view` by the modules of the results (`sim._result`, imported with `sim`).
_XARRAY_VIEWS: dict[str, Callable[[Record], Any]] = {}


def xarray_view(kind: str) -> Callable:
    """Register the decorated function as what `Record.to_xarray` gives for a file of
    format `kind` (`"h5md"`: an H5MD file)."""

    def register(view: Callable[[Record], Any]) -> Callable[[Record], Any]:
        _XARRAY_VIEWS[kind] = view
        return view

    return register


class Record(Mapping):
    """The content of a simjax HDF5 file: root `attrs` and nested groups of numpy arrays.

    Index by path (`record["observables/prey"]`) or by top-level name as an attribute
    (`record.time`, `record.observables["prey"]`).
    """

    def __init__(self, path: Path, attrs: dict[str, Any], tree: dict[str, Any]):
        self.path = path
        self.attrs = attrs
        self._tree = tree

    def __getitem__(self, key: str) -> Any:
        node: Any = self._tree
        for part in key.strip("/").split("/"):
            node = node[part]
        return node

    def __iter__(self):
        return iter(self._tree)

    def __len__(self) -> int:
        return len(self._tree)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._tree[name]
        except KeyError:
            raise AttributeError(
                f"{self.path} has no top-level {name!r} (has {', '.join(self._tree)})"
            ) from None

    @property
    def format(self) -> str:
        return str(self.attrs.get("format", ""))

    def to_xarray(self):
        """The file as an `xarray.Dataset` with named dimensions: a run (ODE, SDE, PDE:
        observables over `time` and the grid; MD: as `MdRunResult.to_xarray`) or a sweep
        (as `SweepResult.to_xarray`).

        Raises:
            DataError: another kind of file, or a run file missing its datasets.
            MissingExtra: xarray is not installed (an `ImportError`).
        """
        view = _XARRAY_VIEWS.get("h5md" if "h5md" in self else self.format)
        if view is None:
            raise DataError(
                self.path,
                "format",
                f"{self.format or 'no simjax format'!r}: to_xarray reads run and sweep files (a "
                "fit has FitResult.to_xarray, a posterior to_arviz)",
            )
        return view(self)

    def __repr__(self) -> str:
        return f"Record({str(self.path)!r}, format={self.format!r}, groups={list(self._tree)})"


def _load(node: h5py.Group) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in node.items():
        if isinstance(item, h5py.Group):
            out[key] = _load(item)
        else:
            value = item[()]
            out[key] = value.decode() if isinstance(value, bytes) else value
    return out


def _attr(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.generic):
        return value.item()
    return value


class Result:
    """What every simjax result has: its file layout written into an open HDF5 file
    (`write`, each result's own), written to a path atomically (`save`; `save_to` for a
    sweep, whose `save` is its save mode), and read back in memory as the `Record`
    `sim.read` gives for the file (`to_record`: what `sim.plot` draws, no file written)."""

    def write(self, f: h5py.File) -> None:
        raise NotImplementedError

    def save(self, path: str | Path) -> Path:
        """Write the result's layout (docs/architecture.md, File layouts) to `path`
        atomically; returns the path."""
        return self.save_to(path)

    def save_to(self, path: str | Path) -> Path:
        path = Path(path)
        with atomic_h5(path) as f:
            self.write(f)
        return path

    def _repr_html_(self) -> str:
        """The compact summary Jupyter shows (`sim._html.summary_html`)."""
        from ._html import summary_html

        return summary_html(self)

    def to_record(self) -> Record:
        """The result as `sim.read` would give it back from its file, built in memory."""
        with h5py.File(io.BytesIO(), "w") as f:
            self.write(f)
            attrs = {k: _attr(v) for k, v in f.attrs.items()}
            tree = _load(f)
        return Record(Path(type(self).__name__), attrs, tree)


def open_hdf5(path: str | Path, expected: str = "an HDF5 file") -> h5py.File:
    """An input HDF5 file opened for reading, or the one-line error of why it cannot be.

    Arguments:
        path: the file.
        expected: what the file should be, for the messages ("an HDF5 file of
            observations").

    Returns:
        The open `h5py.File` (use it in a `with` block).

    Raises:
        DataError: the path is a folder, does not exist, or is not a readable HDF5 file
            (naming the reason).
    """
    path = Path(path)
    if path.is_dir():
        raise DataError(path, "", f"is a folder; expected {expected}")
    if not path.exists():
        raise DataError(path, "", f"no such file; expected {expected}")
    try:
        return h5py.File(path, "r")
    except DAMAGED_FILE_ERRORS as e:
        raise DataError(path, "", f"not a readable HDF5 file ({error_reason(e)})") from None


def read(path: str | Path) -> Record:
    """Load a simjax HDF5 file (run, sweep, fit or posterior) into memory.

    Raises:
        DataError: the path is missing, a folder, or not a readable HDF5 file.

    Example:
        >>> record = read("lv.h5")
        >>> record.observables["prey"].shape
    """
    path = Path(path)
    try:
        with open_hdf5(path) as f:
            attrs = {k: _attr(v) for k, v in f.attrs.items()}
            _check_declared_size(path, f)
            tree = _load(f)
    except DataError:
        raise
    except DAMAGED_FILE_ERRORS as e:
        raise DataError(path, "", f"not a readable HDF5 file ({error_reason(e)})") from None
    return Record(path, attrs, tree)


def _check_declared_size(path: Path, f: h5py.File) -> None:
    """Refuse, before reading, a file whose datasets declare more values than this
    machine's memory holds (a dataset may declare 1e11 values and store none), naming
    the largest."""
    from ._limits import memory_problem

    sizes: dict[str, tuple[int, int]] = {}
    f.visititems(
        lambda name, item: (
            sizes.__setitem__(name, (item.size or 0, item.dtype.itemsize))
            if isinstance(item, h5py.Dataset)
            else None
        )
    )
    if not sizes:
        return
    total = sum(n * itemsize for n, itemsize in sizes.values())
    largest = max(sizes, key=lambda name: sizes[name][0] * sizes[name][1])
    problem = memory_problem(total, f"reading its {sum(n for n, _ in sizes.values()):,} values")
    if problem:
        raise DataError(path, f"/{largest}", f"declares {sizes[largest][0]:,} values; {problem}")


def numeric_dataset(f: h5py.File, path: str | Path, name: str, key: str) -> np.ndarray:
    """The dataset `name` of an open file handed in, as a float array.

    Arguments:
        f: the open HDF5 file.
        path: the file's path, named in errors.
        name: the dataset's path inside the file.
        key: the config key that names the dataset, named in errors.

    Returns:
        The dataset's values as a float64 array of the dataset's shape.

    Raises:
        DataError: naming the file and the dataset (and the config `key` that names it):
            no such dataset, a group, values that are not real numbers (text, compound
            records, complex values), more values than this machine's memory holds
            (checked before reading), or a damaged file.
    """
    try:
        item = f.get(name)
    except DAMAGED_FILE_ERRORS as e:
        raise DataError(
            path, name, f"cannot be read ({error_reason(e)}); the file is damaged"
        ) from None
    if item is None:
        raise DataError(path, name, f"no such dataset (named by {key})")
    if not isinstance(item, h5py.Dataset):
        raise DataError(path, name, f"is a group; expected a dataset (named by {key})")
    try:
        dtype, shape, size = item.dtype, item.shape, item.size or 0
    except DAMAGED_FILE_ERRORS as e:
        raise DataError(
            path, name, f"cannot be read ({error_reason(e)}); the file is damaged"
        ) from None
    if dtype.kind == "c":
        raise DataError(
            path, name, f"expected real numbers, got complex values (dtype {dtype}; named by {key})"
        )
    if dtype.kind not in "biuf":
        raise DataError(path, name, f"expected numbers, got dtype {dtype} (named by {key})")
    # The declared size, before reading: a dataset may declare a trillion values without
    # storing any. It is read in its own type, then converted to float64.
    from ._limits import memory_problem

    problem = memory_problem(
        (8 + dtype.itemsize) * size, f"reading its {size:,} values (shape {shape})"
    )
    if problem:
        raise DataError(path, name, f"{problem} (named by {key})")
    # (imported here: the printing commands import no numerics)
    from physics import unstored

    try:
        missing = unstored(item)
    except DAMAGED_FILE_ERRORS as e:
        raise DataError(
            path, name, f"cannot be read ({error_reason(e)}); the file is damaged"
        ) from None
    if missing:
        raise DataError(path, name, f"{missing} (named by {key})")
    try:
        return np.asarray(item[()], dtype=float)
    except DAMAGED_FILE_ERRORS as e:
        raise DataError(
            path, name, f"cannot be read ({error_reason(e)}); the file is damaged"
        ) from None


def error_reason(e: BaseException) -> str:
    """One line about an exception (h5py and HDF5 errors often span several): the first
    non-empty line of its message, or its type when it has none. A KeyError's message
    is taken without the quotes its `str` adds."""
    if isinstance(e, KeyError) and len(e.args) == 1 and isinstance(e.args[0], str):
        text = e.args[0]
    else:
        text = str(e)
    for line in text.splitlines():
        line = line.strip()
        if len(line) >= 2 and line[0] == line[-1] and line[0] in "'\"":
            line = line[1:-1].strip()
        if line:
            return line
    return type(e).__name__
