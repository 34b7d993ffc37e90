"""The built-in models as `sim models` shows them, by name: the entries of each family's
module, written by `python -m sim._catalogue` from the models themselves (do not edit;
tests/sim/test_catalogue.py checks it)."""

from ._model_table_map import MODELS as _MAP
from ._model_table_md import MODELS as _MD
from ._model_table_ode import MODELS as _ODE
from ._model_table_pde import MODELS as _PDE
from ._model_table_sde import MODELS as _SDE

MODELS = dict(sorted({**_MAP, **_MD, **_ODE, **_PDE, **_SDE}.items()))
