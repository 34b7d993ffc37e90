"""simjax front door: simulate, run configs, store results, the command line.

Importing `sim` enables float64 in JAX (`jax_enable_x64`): ODEs, calibration and
inference run in double precision; PDE and MD configs may ask for float32. It also turns
on the persistent compilation cache (`sim._cache`): a program compiled by one process is
loaded by the next, in the user's cache folder (`SIMJAX_CACHE_DIR` moves it, an empty
value turns it off). And it asks XLA to compile small loops (a small ODE solve's) into
one function each (`sim._xla_flags`), which makes them several times faster on a CPU,
and, when XLA_FLAGS asks for several CPU devices, for enough threads that their LAPACK
calls cannot wait on each other for ever (NPROC); both hold when nothing in the process
has started JAX before `import sim`.
"""

from ._xla_flags import small_loops_whole as _small_loops_whole, threads_for_devices as _threads_for_devices

_small_loops_whole()  # (before JAX starts its backend, which reads XLA_FLAGS once)
_threads_for_devices()  # (NPROC, read at the same time)

import jax as _jax  # noqa: E402

_jax.config.update("jax_enable_x64", True)

from . import _cache  # noqa: E402

_cache.enable()

from ._errors import (  # noqa: E402
    ConfigError as ConfigError,
    DataError as DataError,
    InputError as InputError,
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
# The model families, one registration each (their models are registered with them), in
# the order messages list the families and their keys. Each family is declared here and
# its numerics imported by its first work (`sim._family.deferred`).
from . import _ode_family as _ode_family  # noqa: E402,F401
from . import _pde_family as _pde_family  # noqa: E402,F401
from . import _md_family as _md_family  # noqa: E402,F401
from . import _sde_family as _sde_family  # noqa: E402,F401
from ._plot import plot as plot  # noqa: E402  (matplotlib is imported when a figure is drawn)
from ._movie import movie as movie  # noqa: E402  (matplotlib likewise, when a movie is made)
from ._xdmf import write_xdmf as write_xdmf  # noqa: E402

# Imported when first used: sweeps, and the PDE family's stepper.
_DEFERRED = {
    "SpectralStepper": "._pde",
    "spectral_stepper": "._pde",
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
