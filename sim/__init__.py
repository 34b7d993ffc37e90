"""simjax front door: simulate, run configs, store results, the command line.

Importing `sim` changes nothing in the process's JAX: not `jax_enable_x64`, not
XLA_FLAGS, not the compilation cache. `sim.configure_jax()`, called once after the
import and before the first computation, sets JAX up as the `sim` command runs it:
float64 (ODEs, calibration and inference run in double precision; PDE and MD configs may
ask for float32), the persistent compilation cache in the user's cache folder (a program
compiled by one process is loaded by the next), and XLA's small loops compiled whole
(`sim._xla_flags`). Without the call JAX stays in float32, and a simulation says so
(`PrecisionWarning`).
"""

from typing import TYPE_CHECKING

from ._jax_config import PrecisionWarning as PrecisionWarning, configure_jax as configure_jax
from ._errors import (
    ConfigError as ConfigError,
    DataError as DataError,
    InputError as InputError,
    MissingExtra as MissingExtra,
    SimError as SimError,
    SimulationError as SimulationError,
)
from ._registry import (  # noqa: E402
    get_model as get_model,
    model_class as model_class,
    model_names as model_names,
    register_model as register_model,
)
from ._config import Config as Config, load_config as load_config  # noqa: E402
from ._result import RunResult as RunResult  # noqa: E402
from ._run import Setup as Setup, run as run, setup as setup  # noqa: E402
from ._stream import Streamed as Streamed, StorageError as StorageError  # noqa: E402
from ._store import Record as Record, read as read  # noqa: E402
from ._simulate import complete_params as complete_params, simulate as simulate  # noqa: E402
from ._trajectory import Trajectory as Trajectory  # noqa: E402

# The model families (their models are registered with them); each family's numerics are
# imported by its first work.
from . import families as families  # noqa: E402
from ._plot import plot as plot  # noqa: E402  (matplotlib is imported when a figure is drawn)
from ._movie import movie as movie  # noqa: E402  (matplotlib likewise, when a movie is made)
from ._xdmf import write_xdmf as write_xdmf  # noqa: E402

# Imported when first used: sweeps, and the PDE family's stepper.
_DEFERRED = {
    "SpectralStepper": ".families.pde._solve",
    "spectral_stepper": ".families.pde._solve",
    "SweepResult": "._sweep",
    "sweep": "._sweep",
}


def __getattr__(name: str):
    import importlib

    if name not in _DEFERRED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_DEFERRED[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_DEFERRED})


# The public names (`sim.families` and `sim.core`, for the authors of model families, are
# modules of their own)
__all__ = [
    "Config",
    "ConfigError",
    "DataError",
    "InputError",
    "MissingExtra",
    "PrecisionWarning",
    "Record",
    "RunResult",
    "Setup",
    "SimError",
    "SimulationError",
    "SpectralStepper",
    "StorageError",
    "Streamed",
    "SweepResult",
    "Trajectory",
    "complete_params",
    "configure_jax",
    "get_model",
    "load_config",
    "model_class",
    "model_names",
    "movie",
    "plot",
    "read",
    "register_model",
    "run",
    "setup",
    "simulate",
    "spectral_stepper",
    "sweep",
    "write_xdmf",
]

if TYPE_CHECKING:
    from ._sweep import SweepResult as SweepResult, sweep as sweep
    from .families.pde._solve import (
        SpectralStepper as SpectralStepper,
        spectral_stepper as spectral_stepper,
    )
