"""The public core of `sim`: what `inference`, the command line and the model families
build on besides `sim.run` and friends.

Errors a user can act on; a run's identity (its resolved config and the files it reads);
the one store of unfinished work (checkpoints, resume, stale files); the exclusive lock of
an output; progress bars; interrupts and their safe points; devices, batch sharding and the
Dask cluster; checks of input and output files; `Result`, the interface of every result,
and its HDF5 storage; seeds; memory limits; the models by name; and the MD family's `[rdf]`
section, which a fit of g(r) reads.

The names are loaded from their modules when first used, as `solvers` does, so that
`import sim.core` imports nothing beyond `sim` itself."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# name -> (module, name in the module)
_NAMES: dict[str, tuple[str, str]] = {
    # errors, and the warning of work that runs in float32 without asking
    "DataError": ("._errors", "DataError"),
    "warn_if_float32": ("._jax_config", "warn_if_float32"),
    "InputError": ("._errors", "InputError"),
    # configs: seeds, the model they name
    "SEED_MAX": ("._config", "SEED_MAX"),
    "seed_problem": ("._config", "seed_problem"),
    "build_model": ("._run", "build_model"),
    "resolved_toml": ("._run", "resolved_toml"),
    "family_of": ("._family", "family_of"),
    "model_class": ("._registry", "model_class"),
    "model_options": ("._registry", "model_options"),
    # run identity
    "InputIdentity": ("._identity", "InputIdentity"),
    "config_inputs": ("._identity", "config_inputs"),
    # unfinished work: checkpoints and resume
    "checkpoint_path": ("._unfinished", "checkpoint_path"),
    "config_difference": ("._unfinished", "config_difference"),
    "read_leaves": ("._unfinished", "read_leaves"),
    "remove_stale": ("._unfinished", "remove_stale"),
    "tree_from_leaves": ("._unfinished", "tree_from_leaves"),
    "write_tree": ("._unfinished", "write_tree"),
    # locks, progress, interrupts
    "exclusive": ("._lock", "exclusive"),
    "Progress": ("._progress", "Progress"),
    "immediate": ("._interrupt", "immediate"),
    "safe_point": ("._interrupt", "safe_point"),
    # devices and Dask
    "batch_sharding": ("._distributed", "batch_sharding"),
    "dask_client": ("._distributed", "dask_client"),
    "device_count": ("._distributed", "device_count"),
    "worker_threads": ("._distributed", "worker_threads"),
    # memory limits
    "memory_problem": ("._limits", "memory_problem"),
    # results and their HDF5 files; checks of input and output files
    "DAMAGED_FILE_ERRORS": ("._store", "DAMAGED_FILE_ERRORS"),
    "Result": ("._store", "Result"),
    "atomic_h5": ("._store", "atomic_h5"),
    "check_output_path": ("._store", "check_output_path"),
    "error_reason": ("._store", "error_reason"),
    "numeric_dataset": ("._store", "numeric_dataset"),
    "write_group": ("._store", "write_group"),
    "write_root_attrs": ("._store", "write_root_attrs"),
    # the MD family's `[rdf]` section
    "RdfSpec": ("._md_rdf", "RdfSpec"),
}


def __getattr__(name: str):
    try:
        module, attribute = _NAMES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __package__), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES})


__all__ = sorted(_NAMES)

if TYPE_CHECKING:
    from ._config import SEED_MAX as SEED_MAX, seed_problem as seed_problem
    from ._distributed import (
        batch_sharding as batch_sharding,
        dask_client as dask_client,
        device_count as device_count,
        worker_threads as worker_threads,
    )
    from ._errors import DataError as DataError, InputError as InputError
    from ._jax_config import warn_if_float32 as warn_if_float32
    from ._family import family_of as family_of
    from ._identity import InputIdentity as InputIdentity, config_inputs as config_inputs
    from ._interrupt import immediate as immediate, safe_point as safe_point
    from ._limits import memory_problem as memory_problem
    from ._lock import exclusive as exclusive
    from ._md_rdf import RdfSpec as RdfSpec
    from ._progress import Progress as Progress
    from ._registry import model_class as model_class, model_options as model_options
    from ._run import build_model as build_model, resolved_toml as resolved_toml
    from ._store import (
        DAMAGED_FILE_ERRORS as DAMAGED_FILE_ERRORS,
        Result as Result,
        atomic_h5 as atomic_h5,
        check_output_path as check_output_path,
        error_reason as error_reason,
        numeric_dataset as numeric_dataset,
        write_group as write_group,
        write_root_attrs as write_root_attrs,
    )
    from ._unfinished import (
        checkpoint_path as checkpoint_path,
        config_difference as config_difference,
        read_leaves as read_leaves,
        remove_stale as remove_stale,
        tree_from_leaves as tree_from_leaves,
        write_tree as write_tree,
    )
