"""Model families: what the front door knows about one kind of model, in one object.

A family (ODE, PDE, MD, ...) is a package of `sim.families` whose `Family` subclass is
registered once with `register_family`. `simulate`, `run`, the streaming writer,
`sweep`, fits and `plot` find the family of a model with `family_of(model)` and call its
methods; they hold no family's keys and test no model's class. Every family sets up,
simulates and plans runs (`Family`'s abstract methods); what only some can do is a
capability, an abstract class the family also derives from and generic code asks for
with `isinstance`: `TextModels`, `Events`, `Driven`, `Sweepable`, `Fittable`, `Drawable`.
See docs/architecture.md ("Families"; the recipe: "Where to add a model, a solver, a family
or a command").
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, ClassVar

import pydantic

from physics import Model
from solvers import did_you_mean

if TYPE_CHECKING:
    from ._config import Config
    from ._errors import ConfigError
    from ._run import Setup
    from ._stream import RunPlan
    from ._trajectory import Trajectory


# The `[solver]` keys of adaptive step control, one meaning for every family that declares
# them (`Family.solver_keys`).
STEP_CONTROL_KEYS: dict[str, tuple[Any, Any]] = {
    "rtol": (
        float | None,
        pydantic.Field(default=None, gt=0, description="relative tolerance (default 1e-6)"),
    ),
    "atol": (
        float | None,
        pydantic.Field(default=None, gt=0, description="absolute tolerance (default 1e-8)"),
    ),
    "max_steps": (
        int | None,
        pydantic.Field(
            default=None,
            ge=1,
            description="the step budget of a run (ODE 4096, SDE 16384, finite-difference PDE "
            "65536 by default)",
        ),
    ),
    "adjoint": (
        str | None,
        pydantic.Field(
            default=None,
            description="how gradients flow: recursive_checkpoint (default), backsolve, "
            "forward, direct",
        ),
    ),
}


class Family(abc.ABC):
    """One kind of model and how the front door runs it: its configs, `simulate`'s
    body and the plan of a run from a config.

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
        solver_keys: typed keys the family adds to the shared `[solver]` section (which
            has `method` and `dtype`), name -> (type, pydantic `Field`); a key two
            families declare has one meaning. A family reads untyped keys of its own as
            the section's extras, and refuses every other with `check_solver_keys`.
        checks: the family's `[checks]` bounds, name -> (default, meaning).
        traced_solver_floats: `simulate` from Python: whether the Python floats among
            the solver's fields (ODE: rtol, atol, dt0) are arguments of its compiled
            call, so that a new value does not recompile (the family's solver takes
            them as traced values).
        devices_key: the config key that splits one run over several local devices
            (`sim run --devices N` sets it), or None when one run stays on one device.
    """

    name: ClassVar[str]
    model_base: ClassVar[type[Model]]
    describes: ClassVar[str]
    sections: ClassVar[dict[str, Any]] = {}
    traced_solver_floats: ClassVar[bool] = False
    time_keys: ClassVar[dict[str, tuple[Any, Any]]] = {}
    solver_keys: ClassVar[dict[str, tuple[Any, Any]]] = {}
    checks: ClassVar[dict[str, tuple[float, str]]] = {}
    devices_key: ClassVar[str | None] = None

    @abc.abstractmethod
    def simulate(self, model, params, t, initial, solver, key) -> Trajectory:
        """The traced body of `sim.simulate` for a model of this family.

        Arguments:
            model: a model of the family.
            params: its parameters, complete (name -> value).
            t: the save times, an array [T].
            initial: the initial values as the family takes them (arrays).
            solver: the family's solver.
            key: a PRNG key, or None for a deterministic family.

        Returns:
            The `Trajectory` at the save times.
        """

    @abc.abstractmethod
    def setup(self, model, config: Config) -> Setup:
        """Validate a config against the model and build the arguments of `simulate`.

        Raises `ConfigError` naming the key of the first problem."""

    @abc.abstractmethod
    def plan(self, model, config: Config) -> RunPlan:
        """The validated run of a config (engine, file layout, result) for `sim run`."""

    # -------------------------------------------------------------- configs
    def solver_notes(self, model, config: Config) -> tuple[str, ...]:
        """Lines a command prints once it has run a config, telling what the family
        chose that the config does not say (the ODE family: the implicit method of a
        stiff model); none by default."""
        return ()

    def model_options(self, config: Config) -> dict[str, tuple[str, Any]]:
        """Model options given by the family's own sections (PDE: `[grid]`), option ->
        (config key, value); checked and passed to the model's constructor."""
        return {}

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

    def check_solver_keys(
        self, config: Config, keys: tuple[str, ...], what: str | None = None
    ) -> None:
        """Refuse a `[solver]` key that is not one of `keys`, those the run's solver
        takes (one line naming it and listing them)."""
        for key in config.spec.solver.given():
            if key not in keys:
                raise config.error(
                    f"solver.{key}",
                    f"unknown key for {what or self.name.upper()} solvers (expected one of: "
                    f"{', '.join(keys)}).{did_you_mean(key, keys)}",
                )

    def refuse_events(self, config: Config) -> ConfigError:
        """The error of a config with `[[events]]` for a family that takes none."""
        takers = " and ".join(f.describes for f in _FAMILIES if isinstance(f, Events))
        return config.error("events", f"events are for {takers}; {self._ours(config)}")

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

    def observable_shapes(self, model) -> dict[str, tuple[int, ...]]:
        """The shape of each observable at one time (data files give [T, *shape])."""
        return {name: () for name in model.observable_names}


class TextModels(Family):
    """A family whose models a config may write as text in its `[model]` tables.

    `text_flags` are the keys of `[model]` other than its tables that the family's text
    models take (ODE: `stiff`); a config that gives another family's flag is refused."""

    text_flags: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def text_model(self, config: Config) -> Model | None:
        """The model a config writes as text in its `[model]` tables, when those tables
        are this family's (ODE: `states`; SDE: `states` and `noise`; PDE: `fields`);
        None otherwise. Raises ValueError naming the entry (`states.S`, ...)."""


class Events(Family):
    """A family whose solvers locate events: its configs may have `[[events]]`."""

    @abc.abstractmethod
    def with_events(self, model: Model, config: Config) -> Model:
        """`model` with the config's `[[events]]`."""


class Driven(Family):
    """A family that runs a simulation from Python itself rather than as one compiled
    call of `simulate` (MD: its neighbour lists may have to grow during a run, so it
    compiles chunks and grows them between)."""

    @abc.abstractmethod
    def drive(self, model, params, t, initial, solver, key) -> Trajectory:
        """`sim.simulate` outside jit, with `simulate`'s arguments; the trajectory."""


class Sweepable(Family):
    """A family whose runs `sim sweep` batches: one run of a sweep is an engine problem
    (`sweep_problem`), or a chunk of runs one batched function (`batched`)."""

    @abc.abstractmethod
    def sweep_problem(self, s: Setup, params: dict, initial: Any, key):
        """One run of a sweep (`params` and `initial` complete, `key` folded for the run)
        as an engine problem: `init()`, `advance(state, frames, capacity)` and
        `num_steps(state)`, as `sim._run.LoopEngine` drives them, traceable in `params`,
        `initial` and `key`. A sweep chunk advances its runs a few saved frames at a
        time, checkpointed and interruptible between calls (`sim._sweep_frames`)."""

    def sweep_setup(self, config: Config, s: Setup) -> Setup:
        """The set-up as a sweep runs it (failures reported in the result code instead
        of raised; batch-friendly settings); the family may refuse swept keys here."""
        return s

    def run_bounds(self, s: Setup):
        """The traceable `[checks]` test of one run's observables (True when within
        bounds), or None when the family has no bounds beyond finite values."""
        return None

    def batched(self, s: Setup, save: str):
        """A chunk function that computes a batch of runs at once, faster than
        advancing `sweep_problem`s (ODE: `solvers.solve_batch`), or None when this
        set-up has none."""
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

    def sweep_values(self, value, save: str, label: str):
        """What a sweep figure shows of one observable of every run, from what the file
        holds ([runs, T, ...] for save = "full", [runs, ...] for "final") and its label;
        by default what is stored."""
        return value, label


class Fittable(Family):
    """A family whose runs `sim fit`, `sim infer` and `sim profile` calibrate."""

    #: Whether a run's solver, initial state and save times are compile-time constants
    #: (MD: the system and its neighbour list shape the program).
    static_runs: ClassVar[bool] = False
    #: Why initial values cannot be free (None: they can).
    no_free_initial: ClassVar[str | None] = None

    def fit_solver(self, s: Setup, gradient: str) -> tuple[Any, bool]:
        """The solver of a compiled fit's runs, and whether the fit's reverse-mode
        gradients come from forward sensitivities (`sensitivities`).

        Arguments:
            s: the set-up of the fit's config.
            gradient: how the fit differentiates its runs: "reverse", "forward" (forward
                mode, for Jacobians) or "forward_sensitivity" (forward mode inside,
                usable by reverse-mode callers).

        Returns:
            (solver, forward_sensitivity); by default the set-up's solver and False.
        """
        return s.solver, False

    def sensitivities(self, model, solver) -> bool:
        """Whether `solver` integrates the sensitivity equations of `model` along its
        solve (`solve_sensitivities`), which forward-sensitivity gradients use; without
        them forward mode differentiates the solve."""
        return False

    def forward_mode(self, solver):
        """`solver` set to be differentiated in forward mode (Jacobians of residuals)."""
        return solver

    def primal_solver(self, solver):
        """The solver of a prediction whose derivatives come from sensitivities, so that
        the value alone is computed (no derivative is taken of it)."""
        return solver

    def dense_saves(self, solver) -> bool:
        """Whether one run saved at the union of two sets of times gives each value as
        a run saved at its own times would (to rounding), so that a fit's end computes
        the predictions at the data and on a fine grid in one run."""
        return False

    def chains_spread(self, solver) -> bool:
        """Whether NUTS chains whose log density runs `solver` can be laid over several
        devices."""
        return True

    def preequilibrates(self, model, solver) -> bool:
        """Whether runs of `model` by `solver` can start from a steady state (a PEtab
        preequilibration)."""
        return False


class Drawable(Family):
    """A family with its own figure of a run file (without it, `sim plot` draws the
    observables over time)."""

    @abc.abstractmethod
    def draw_run(self, source):
        """The figure of a run file of this family (`sim.plot`, `sim plot`; `source` is a
        `sim._figure.Source`)."""

    def recognises(self, record) -> bool:
        """Whether a run file whose model is not registered (an H5MD file of another
        program) has this family's layout, so that `draw_run` can draw it."""
        return False


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
