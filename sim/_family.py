"""Model families: what the front door knows about one kind of model, in one object.

A family (ODE, PDE, MD, ...) is a `Family` subclass registered once with
`register_family`. `simulate`, `run`, the streaming writer, `sweep`, fits and `plot` find the family
of a model with `family_of(model)` and call its methods; they hold no family's keys and
test no model's class. A family overrides what it supports; the defaults say what a
family without it cannot do. See docs/architecture.md ("Families") for the recipe.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, ClassVar

from physics import Model
from solvers import did_you_mean

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
        describes: what its configs are, for messages ("ODE runs").
        sections: top-level config sections the family owns, name -> the type the
            section validates to (a pydantic model, or `dict` for a table the family
            checks itself). A section of another family in a config is an error.
        time_keys: keys the family adds to the shared `[time]` section, name ->
            (type, pydantic `Field`).
        checks: the family's `[checks]` bounds, name -> (default, meaning).
    """

    name: ClassVar[str]
    model_base: ClassVar[type[Model]]
    describes: ClassVar[str]
    sections: ClassVar[dict[str, Any]] = {}
    #: Fits: whether a run's solver, initial state and save times are compile-time
    #: constants (MD: the system and its neighbour list shape the program).
    static_runs: ClassVar[bool] = False
    #: Fits: why initial values cannot be free (None: they can).
    no_free_initial: ClassVar[str | None] = None
    #: `simulate` from Python: whether the Python floats among the solver's fields
    #: (ODE: rtol, atol, dt0) are arguments of its compiled call, so that a new value
    #: does not recompile (the family's solver takes them as traced values).
    traced_solver_floats: ClassVar[bool] = False
    time_keys: ClassVar[dict[str, tuple[Any, Any]]] = {}
    checks: ClassVar[dict[str, tuple[float, str]]] = {}

    # -------------------------------------------------------------- configs
    def model_options(self, config: Config) -> dict[str, tuple[str, Any]]:
        """Model options given by the family's own sections (PDE: `[grid]`), option ->
        (config key, value); checked and passed to the model's constructor."""
        return {}

    def text_model(self, config: Config) -> Model | None:
        """The model a config writes as text in its `[model]` tables, when those tables
        are this family's (ODE: `states`; SDE: `states` and `noise`; PDE: `fields`);
        None otherwise. Raises ValueError naming the entry (`states.S`, ...)."""
        return None

    def with_events(self, model: Model, config: Config) -> Model:
        """`model` with the config's `[[events]]`; only families whose solvers locate
        events take them."""
        raise config.error("events", f"events are for ODE models; {self._ours(config)}")

    def refuse_foreign(self, config: Config) -> None:
        """Refuse what belongs to another family: its sections, `[time]` keys and
        `[checks]` (one line naming the key and whose it is)."""
        for other in _FAMILIES:
            if other is self:
                continue
            for section in other.sections:
                if section not in self.sections and config.raw.get(section) is not None:
                    raise config.error(section, f"is for {other.describes}; {self._ours(config)}")
            for key in other.time_keys:
                if (
                    key not in self.time_keys
                    and (config.raw.get("time") or {}).get(key) is not None
                ):
                    raise config.error(
                        f"time.{key}", f"is for {other.describes}; {self._ours(config)}"
                    )

    def _ours(self, config: Config) -> str:
        return f"model {config.spec.model.name!r} is one of the {self.describes}"

    def resolve_checks(
        self, config: Config, keys: tuple[str, ...] | None = None, what: str | None = None
    ) -> dict[str, float]:
        """The `[checks]` bounds of a run, defaults filled in. `keys` (default: all of
        the family's) are the checks this run has; any other given key is an error."""
        keys = tuple(self.checks) if keys is None else keys
        given = {k: v for k, v in config.spec.checks.model_dump().items() if v is not None}
        for key in given:
            if key not in keys:
                listed = f"keys: {', '.join(keys)}" if keys else "no keys"
                raise config.error(
                    f"checks.{key}",
                    f"is not a check of {what or self.describes} "
                    f"({listed}).{did_you_mean(key, keys)}",
                )
        return {key: given.get(key, self.checks[key][0]) for key in keys}

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

    # -------------------------------------------------------------- fits
    def fit_solver(self, s: Setup):
        """The solver of a compiled fit's runs (MD: a neighbour list sized up front,
        as it cannot grow inside the compiled loss)."""
        return s.solver

    def observable_shapes(self, model) -> dict[str, tuple[int, ...]]:
        """The shape of each observable at one time (data files give [T, *shape])."""
        return {name: () for name in model.observable_names}

    # -------------------------------------------------------------- sweeps
    def sweep_setup(self, config: Config, s: Setup) -> Setup:
        """The set-up as a sweep runs it (failures reported in the result code instead
        of raised; batch-friendly settings); the family may refuse swept keys here."""
        return s

    def run_bounds(self, s: Setup):
        """The traceable `[checks]` test of one run's observables (True when within
        bounds), or None when the family has no bounds beyond finite values."""
        return None

    def sweep_problem(self, s: Setup, params: dict, initial: Any, key):
        """One run of a sweep (`params` and `initial` complete, `key` folded for the run)
        as an engine problem: `init()`, `advance(state, frames, capacity)` and
        `num_steps(state)`, as `sim._run.LoopEngine` drives them, traceable in `params`,
        `initial` and `key`. A sweep chunk advances its runs a few saved frames at a
        time, checkpointed and interruptible between calls (`sim._sweep_frames`). A
        family that can be swept overrides this or `batched`."""
        return None

    def batched(self, s: Setup, save: str):
        """A chunk function that computes a batch of runs at once, faster than
        advancing `sweep_problem`s (ODE: `solvers.solve_batch`), or None."""
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

    # -------------------------------------------------------------- figures
    def draw_run(self, source):
        """The figure of a run file of this family (`sim.plot`, `sim plot`; `source` is a
        `sim._plot.Source`). By default the observables over time."""
        from ._plot_run import ode

        return ode(source)

    def sweep_values(self, value, save: str, label: str):
        """What a sweep figure shows of one observable of every run, from what the file
        holds ([runs, T, ...] for save = "full", [runs, ...] for "final") and its label;
        by default what is stored."""
        return value, label

    def recognises(self, record) -> bool:
        """Whether a run file whose model is not registered (an H5MD file of another
        program) has this family's layout, so that `draw_run` can draw it."""
        return False


def deferred(module: str, implementation: str, method: str):
    """A method of a family's declaration that calls `method` of its implementation class
    (`implementation` in `module`, a subclass of the declaration), importing the module
    at the first call: a family's name, sections, keys and checks are known as soon as
    `sim` is imported, its numerics (and their models and solvers) are imported by the
    first work of that family."""

    def call(self, *args, **kwargs):
        return getattr(getattr(importlib.import_module(module), implementation), method)(
            self, *args, **kwargs
        )

    call.__name__ = call.__qualname__ = method
    call.__doc__ = f"`{implementation}.{method}` of `{module}`."
    call.deferred_to = (module, implementation)
    return call


_FAMILIES: list[Family] = []
_OF_CLASS: dict[type, Family] = {}  # family_of's answers, per class


def register_family(family: Family) -> Family:
    """Make a family known to `family_of` (once per family)."""
    if any(type(f) is type(family) or f.name == family.name for f in _FAMILIES):
        raise ValueError(f"a family named {family.name!r} is already registered")
    _FAMILIES.append(family)
    _OF_CLASS.clear()
    return family


def family_of(model: Any) -> Family:
    """The registered family of `model` (or of a model class): the one with the most
    specific base class; TypeError when none fits."""
    cls = model if isinstance(model, type) else type(model)
    found = _OF_CLASS.get(cls)
    if found is not None:
        return found
    matches = [f for f in _FAMILIES if issubclass(cls, f.model_base)]
    if not matches:
        raise TypeError(f"no model family runs a {cls.__name__}")
    found = _OF_CLASS[cls] = max(matches, key=lambda f: len(f.model_base.__mro__))
    return found


def families() -> tuple[Family, ...]:
    """The registered families, in the order of registration."""
    return tuple(_FAMILIES)
