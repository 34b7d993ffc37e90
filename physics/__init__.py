"""Models: what evolves. Solver-agnostic; families ode, sde, pde and md."""

from . import ode as ode
from . import md as md
from . import pde as pde
from . import sde as sde
from ._base import CONSTRAINTS as CONSTRAINTS, Model as Model, NamedStateModel as NamedStateModel, Parameter as Parameter
