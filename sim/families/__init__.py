"""The model families the front door runs, one package each, and their registration.

A family's package declares its `Family` (name, sections, keys, checks) and its built-in
models by name in its `__init__`, which imports no numerics; its numerics (models,
solvers, diffrax, ...) live in the package's private modules, imported by its first work.
A new family is a package here and one line below.
"""

from .._family import register_family
from .maps import MAP
from .md import MD
from .ode import ODE
from .pde import PDE
from .sde import SDE

for _family in (ODE, PDE, MD, SDE, MAP):
    register_family(_family)
