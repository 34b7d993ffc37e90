"""The public core of `sim`: what `inference`, the command line and the model families
build on besides `sim.run` and friends.

Errors a user can act on, and the import of an optional dependency that names the
extra installing it; a run's identity (its resolved config and the files it reads);
the one store of unfinished work (checkpoints, resume, stale files); the exclusive lock of
an output; progress bars; interrupts and their safe points; devices, batch sharding and the
Dask cluster; checks of input and output files; `Result`, the interface of every result,
and its HDF5 storage; seeds; memory limits; the models by name; the model families and
their capabilities; and the MD family's `[rdf]` section, which a fit of g(r) reads.

The names are loaded from their modules when first used, as `solvers` does, so that
`import sim.core` imports nothing beyond `sim` itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from physics import lazy_names

# name -> (module, name in the module), loaded by physics.lazy_names
_NAMES: dict[str, tuple[str, str]] = {
    # errors, and the warning of work that runs in float32 without asking
    "DataError": ("sim._errors", "DataError"),
    "warn_if_float32": ("sim._jax_config", "warn_if_float32"),
    "InputError": ("sim._errors", "InputError"),
    # optional dependencies (the extras sbml, petab, dask, plot)
    "MissingExtra": ("sim._errors", "MissingExtra"),
    "optional_module": ("sim._errors", "optional_module"),
    # configs: seeds, the model they name
    "SEED_MAX": ("sim._config", "SEED_MAX"),
    "seed_problem": ("sim._config", "seed_problem"),
    "build_model": ("sim._run", "build_model"),
    "resolved_toml": ("sim._run", "resolved_toml"),
    # model families and their capabilities
    "family_of": ("sim._family", "family_of"),
    "families": ("sim._family", "families"),
    "register_family": ("sim._family", "register_family"),
    "Family": ("sim._family", "Family"),
    "Drawable": ("sim._family", "Drawable"),
    "Driven": ("sim._family", "Driven"),
    "Events": ("sim._family", "Events"),
    "Fittable": ("sim._family", "Fittable"),
    "Sweepable": ("sim._family", "Sweepable"),
    "TextModels": ("sim._family", "TextModels"),
    "model_class": ("sim._registry", "model_class"),
    "model_options": ("sim._registry", "model_options"),
    # run identity
    "InputIdentity": ("sim._identity", "InputIdentity"),
    "config_inputs": ("sim._identity", "config_inputs"),
    # unfinished work: checkpoints and resume
    "checkpoint_path": ("sim._unfinished", "checkpoint_path"),
    "config_difference": ("sim._unfinished", "config_difference"),
    "read_leaves": ("sim._unfinished", "read_leaves"),
    "remove_stale": ("sim._unfinished", "remove_stale"),
    "tree_from_leaves": ("sim._unfinished", "tree_from_leaves"),
    "write_tree": ("sim._unfinished", "write_tree"),
    # locks, progress, interrupts
    "exclusive": ("sim._lock", "exclusive"),
    "Progress": ("sim._progress", "Progress"),
    "immediate": ("sim._interrupt", "immediate"),
    "safe_point": ("sim._interrupt", "safe_point"),
    # devices and Dask
    "batch_sharding": ("sim._distributed", "batch_sharding"),
    "dask_client": ("sim._distributed", "dask_client"),
    "needs_dask": ("sim._distributed", "needs_dask"),
    "device_count": ("sim._distributed", "device_count"),
    # several processes, one program (--distributed)
    "process_count": ("sim._processes", "count"),
    "fetch": ("sim._processes", "fetch"),
    "worker_threads": ("sim._distributed", "worker_threads"),
    # memory limits
    "memory_problem": ("sim._limits", "memory_problem"),
    # results and their HDF5 files; checks of input and output files
    "DAMAGED_FILE_ERRORS": ("sim._store", "DAMAGED_FILE_ERRORS"),
    "Result": ("sim._store", "Result"),
    "atomic_h5": ("sim._store", "atomic_h5"),
    "check_output_path": ("sim._store", "check_output_path"),
    "error_reason": ("sim._store", "error_reason"),
    "numeric_dataset": ("sim._store", "numeric_dataset"),
    "open_hdf5": ("sim._store", "open_hdf5"),
    "write_group": ("sim._store", "write_group"),
    "write_root_attrs": ("sim._store", "write_root_attrs"),
    # the MD family's `[rdf]` section
    "RdfSpec": ("sim.families.md._rdf", "RdfSpec"),
}


__getattr__, __dir__ = lazy_names(__name__, _NAMES, globals())


if TYPE_CHECKING:
    from ._config import SEED_MAX as SEED_MAX, seed_problem as seed_problem
    from ._distributed import (
        batch_sharding as batch_sharding,
        dask_client as dask_client,
        device_count as device_count,
        needs_dask as needs_dask,
        worker_threads as worker_threads,
    )
    from ._errors import (
        DataError as DataError,
        InputError as InputError,
        MissingExtra as MissingExtra,
        optional_module as optional_module,
    )
    from ._family import (
        Drawable as Drawable,
        Driven as Driven,
        Events as Events,
        Family as Family,
        Fittable as Fittable,
        Sweepable as Sweepable,
        TextModels as TextModels,
        families as families,
        family_of as family_of,
        register_family as register_family,
    )
    from ._identity import InputIdentity as InputIdentity, config_inputs as config_inputs
    from ._interrupt import immediate as immediate, safe_point as safe_point
    from ._jax_config import warn_if_float32 as warn_if_float32
    from ._limits import memory_problem as memory_problem
    from ._lock import exclusive as exclusive
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
        open_hdf5 as open_hdf5,
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
    from .families.md._rdf import RdfSpec as RdfSpec
