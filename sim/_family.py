"""Model families: what the front door knows about one kind of model, in one object.

A family (ODE, PDE, MD, ...) is a `Family` subclass registered once with
`register_family`. `simulate`, `run`, the streaming writer and `sweep` find the family
of a model with `family_of(model)` and call its methods; they hold no family's keys and
test no model's class. A family overrides what it supports; the defaults say what a
family without it cannot do. See docs/architecture.md ("Families") for the recipe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from physics import Model

if TYPE_CHECKING:
    from ._config import Config
    from ._run import Setup
    from ._stream import RunPlan
    from ._trajectory import Trajectory


class Family:
    """One kind of model and how the front door runs it.

    Class attributes:
        name: short name ("ode", "pde", "md"), used in messages.
        model_base: the abstract model class of the family; a model belongs to the
            registered family with the most specific base it is an instance of.
    """

    name: ClassVar[str]
    model_base: ClassVar[type[Model]]

    # -------------------------------------------------------------- simulate
    def simulate(self, model, params, t, initial, solver, key) -> Trajectory:
        """The traced body of `sim.simulate` for a model of this family (params complete,
        times and initial values already arrays)."""
        raise TypeError(f"simulate does not know how to run a {type(model).__name__}")

    def drive(self, model, params, t, initial, solver, key) -> Trajectory | None:
        """How `simulate` runs a model outside jit: None for one compiled call of
        `simulate` (the default); a family whose buffers may have to grow during a run
        (MD neighbour lists) compiles chunks itself and returns the trajectory."""
        return None

    # -------------------------------------------------------------- configs and runs
    def setup(self, model, config: Config) -> Setup:
        """Validate a config against the model and build the arguments of `simulate`."""
        raise config.error("model.name", f"model {model.name!r} cannot be set up from a config")

    def plan(self, model, config: Config) -> RunPlan:
        """The validated run of a config (engine, file layout, result)."""
        raise config.error("model.name", f"model {model.name!r} cannot be run from a config")

    # -------------------------------------------------------------- sweeps
    def sweep_setup(self, config: Config, s: Setup) -> Setup:
        """The set-up as a sweep runs it (failures reported in the result code instead
        of raised; batch-friendly settings); the family may refuse swept keys here."""
        return s

    def run_bounds(self, s: Setup):
        """The traceable `[checks]` test of one run's observables (True when within
        bounds), or None when the family has no bounds beyond finite values."""
        return None

    def batched(self, s: Setup, save: str):
        """A chunk function faster than `jax.vmap` of single runs, or None."""
        return None

    def resized(self, s: Setup, size: int) -> Setup:
        """The set-up with a family-specific buffer size for a rerun of a chunk (MD: the
        neighbour-list capacity); `settle` asks for it through `rerun(size)`."""
        return s

    def settle(self, s: Setup, values: dict, rerun) -> dict:
        """A chunk's results after the family fixed what a vmapped batch could not:
        `rerun(size)` computes the chunk again with `resized(s, size)` (MD: runs whose
        neighbour list overflowed, rerun with larger lists)."""
        return values


_FAMILIES: list[Family] = []


def register_family(family: Family) -> Family:
    """Make a family known to `family_of` (once per family)."""
    if any(type(f) is type(family) or f.name == family.name for f in _FAMILIES):
        raise ValueError(f"a family named {family.name!r} is already registered")
    _FAMILIES.append(family)
    return family


def family_of(model: Any) -> Family:
    """The registered family of `model` (or of a model class): the one with the most
    specific base class; TypeError when none fits."""
    cls = model if isinstance(model, type) else type(model)
    matches = [f for f in _FAMILIES if issubclass(cls, f.model_base)]
    if not matches:
        raise TypeError(f"no model family runs a {cls.__name__}")
    return max(matches, key=lambda f: len(f.model_base.__mro__))


def families() -> tuple[Family, ...]:
    return tuple(_FAMILIES)

