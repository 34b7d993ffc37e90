"""`sim.run(config)`: build the model, parameters, initial state and solver a config names,
simulate, and return a result that saves itself. One runner per model family."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from physics import Model, NamedStateModel, float_array
from solvers import did_you_mean

from . import _processes
from ._config import Config
from ._errors import ConfigError, InputError, SimulationError, optional_module
from ._family import Events, TextModels, families, family_of
from ._identity import config_inputs
from ._jax_config import warn_if_float32
from ._limits import memory_problem
from ._lock import exclusive
from ._progress import Progress
from ._registry import model_class, model_names, model_options
from ._result import RunResult, RunSink
from ._shards import first_rows
from ._sources import SourceError, source_class
from ._store import check_output_path
from ._stream import RunPlan, chunk_frames, collect, stream
from ._xdmf import check_request, settle

DEFAULT_SAVE = 101


_TEXT_MODEL_KEYS = ("states", "noise", "fields", "parameters", "observables")


def _text_model(config: Config) -> Model:
    """The model a config writes as text in its `[model]` tables: the family whose tables
    they are builds it (`TextModels.text_model`)."""
    spec = config.spec.model
    options = spec.options
    text_families = [family for family in families() if isinstance(family, TextModels)]
    flags = list(dict.fromkeys(f for family in text_families for f in family.text_flags))
    for key in options:
        if key not in _TEXT_MODEL_KEYS and key not in flags:
            raise config.error(
                f"model.{key}",
                "is not a key of a model written in its config (keys: name, "
                f"{', '.join([*_TEXT_MODEL_KEYS, *flags])})",
            )
    for key in _TEXT_MODEL_KEYS:
        if key in options and not isinstance(options[key], dict):
            raise config.error(
                f"model.{key}", f"expected a table, like [model.{key}], got {options[key]!r}"
            )
    try:
        for family in text_families:
            model = family.text_model(config)
            if model is None:
                continue
            for key in options:
                if key in flags and key not in family.text_flags:
                    takes = [f.describes for f in text_families if key in f.text_flags]
                    raise config.error(
                        f"model.{key}",
                        f"is not a key of {family.describes} written in their config ({key} is "
                        f"for {', '.join(takes)})",
                    )
            return model
    except ConfigError:
        raise
    except ValueError as e:
        where, _, why = str(e).partition(": ")
        raise config.error(f"model.{where}", why) from None
    raise config.error(
        "model",
        "a model written in its config needs [model.states] (an ODE or SDE) or [model.fields] (a "
        "PDE)",
    )


def _sbml_model(config: Config) -> Model:
    """The ODE model of the SBML file a config's `[model] sbml` names."""
    options = dict(config.spec.model.options)
    source = options.pop("sbml")
    for key in options:
        raise config.error(
            f"model.{key}", "is not a key of an SBML model's [model] (keys: name, sbml)"
        )
    if not isinstance(source, str) or not source:
        raise config.error("model.sbml", f'expected an SBML file like "model.xml", got {source!r}')
    optional_module("libsbml", "sbml", "SBML models", config.source, "model.sbml")
    from physics.ode import SbmlError, sbml_model  # (the SBML importer: for SBML configs only)

    try:
        return sbml_model(config.resolve_path(source))
    except SbmlError as e:
        raise config.error("model.sbml", str(e)) from None


def _model_class(config: Config) -> tuple[type[Model], dict[str, Any]]:
    """The model class a config's `[model]` names (by `name`, or a Python file by
    `source`) and the options it gives that class."""
    spec = config.spec.model
    options = dict(spec.options)
    if "source" in options:
        source = options.pop("source")
        if not isinstance(source, str):
            raise config.error(
                "model.source", f'expected a file like "my_models.py:ClassName", got {source!r}'
            )
        try:
            return source_class(source, config.base_dir), options
        except SourceError as e:
            raise config.error("model.source", str(e)) from None
    try:
        return model_class(spec.name), options
    except SourceError as e:
        raise config.error("model.name", str(e)) from None
    except ValueError:
        raise config.error(
            "model.name",
            f"unknown model {spec.name!r}; `sim models` lists "
            f"them.{did_you_mean(spec.name, model_names())}",
        ) from None


def build_model(config: Config) -> Model:
    """The model a config's `[model]` section names, with its options: a built-in or
    plugin model by `name`, a Python file's model by `source`, or a model written in the
    config's `[model.states]`; with the `[[events]]` the config writes."""
    model = _build_model(config)
    if config.spec.events:
        try:
            family = family_of(model)
        except TypeError:
            raise config.error(
                "events", f"model {config.spec.model.name!r} belongs to no family that takes events"
            ) from None
        if not isinstance(family, Events):
            raise family.refuse_events(config)
        model = family.with_events(model, config)
    return model


def _build_model(config: Config) -> Model:
    spec = config.spec.model
    if "states" in spec.options or "fields" in spec.options:
        return _text_model(config)
    if "sbml" in spec.options:
        return _sbml_model(config)
    cls, options = _model_class(config)
    label = (
        repr(spec.name)
        if "source" not in spec.options
        else f"{cls.__name__} of {spec.options['source']!r}"
    )
    allowed = model_options(cls)
    for key in options:
        if key not in allowed:
            listed = ", ".join(allowed) if allowed else "none"
            raise config.error(
                f"model.{key}",
                f"model {label} has no option {key!r} (options: "
                f"{listed}).{did_you_mean(key, allowed)}",
            )
    try:
        family = family_of(cls)
    except TypeError:  # a model of no family: only `simulate` can run it, not a config
        family = None
    where = {key: f"model.{key}" for key in options}
    if family is not None:
        family.refuse_foreign(config)
        for key, (at, value) in family.model_options(config).items():
            if key not in allowed:
                raise config.error(
                    at, f"model {label} takes no option {key!r}.{did_you_mean(key, allowed)}"
                )
            options[key], where[key] = value, at
    try:
        return cls(**options)
    except (TypeError, ValueError) as e:
        message = str(e).splitlines()[0]
        # The model names the offending option first ("model 'heat': domain = ...").
        found = [(message.find(f" {k}"), k) for k in options if f" {k}" in message]
        raise config.error(where[min(found)[1]] if found else "model", message) from None


def number(config: Config, key: str, value: Any) -> float:
    """A config value that must be a finite real number, 0 or of at least the smallest
    normal float64 magnitude (`numpy.finfo(float).tiny`): a subnormal value has lost its
    precision, and compiled code may flush it to 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise config.error(key, f"expected a number, got {value!r}")
    try:
        v = float(value)
    except OverflowError:  # an integer beyond the float range
        raise config.error(
            key,
            f"expected a finite number, got an integer of {value.bit_length()} bits, beyond the "
            "float range",
        ) from None
    if not math.isfinite(v):
        raise config.error(key, f"expected a finite number, got {value!r}")
    tiny = float(np.finfo(float).tiny)
    if v != 0 and abs(v) < tiny:
        raise config.error(
            key,
            f"{value!r} is below the smallest normal float ({tiny!r}); expected 0 or a magnitude "
            "of at least that",
        )
    return v


def resolve_params(config: Config, model: Model) -> dict[str, jax.Array]:
    """Every declared parameter: the config's value (checked against the declaration)
    or the default."""
    params = model.default_params()
    for key, value in config.spec.params.items():
        if key not in params:
            raise config.error(
                f"params.{key}",
                f"model {model.name!r} has no parameter {key!r} (parameters: "
                f"{', '.join(params)}).{did_you_mean(key, params)}",
            )
        declared = model.parameter(key)
        v = number(config, f"params.{key}", value)
        problem = declared.violation(v)
        if problem is not None:
            raise config.error(
                f"params.{key}", f"expected {problem} ({declared.doc}), got {value!r}"
            )
        params[key] = float_array(v)
    return params


def named_initial(config: Config, model: NamedStateModel) -> dict[str, jax.Array]:
    """Initial values per state component of a named-state model (ODE, SDE): the
    config's `[initial]`, or the model's defaults. (Defaults that the parameters
    determine are left out: each run computes them from its own parameters.)"""
    initial = {
        n: v
        for n, v in model.default_initial().items()
        if n not in model.parameter_dependent_initial
    }
    for key, value in config.spec.initial.items():
        if key not in model.state_names:
            raise config.error(
                f"initial.{key}",
                f"model {model.name!r} has no state component {key!r} (state: "
                f"{', '.join(model.state_names)}).{did_you_mean(key, model.state_names)}",
            )
        initial[key] = float_array(number(config, f"initial.{key}", value))
    return initial


def initial_vector(model: NamedStateModel, initial, params=None) -> jax.Array:
    """The initial state vector [n] of a named-state model from what `simulate` was
    given: None, a dict of values per component (missing ones take defaults, computed
    from `params` where the model's defaults depend on them), or [n]."""
    if initial is None or isinstance(initial, dict):
        for name in initial or {}:
            if name not in model.state_names:
                raise ValueError(
                    f"model {model.name!r} has no state component {name!r} "
                    "(state: "
                    f"{', '.join(model.state_names)}).{did_you_mean(name, model.state_names)}"
                )
        return model.initial_state(initial, params)
    y0 = jnp.asarray(initial, dtype=float)
    if y0.shape != (len(model.state_names),):
        raise ValueError(
            f"initial state of {model.name!r} must have shape ({len(model.state_names)},), got "
            f"{y0.shape}"
        )
    return y0


def save_times(config: Config) -> np.ndarray:
    """Save times from `[time]`: `save` equally spaced points over [t0, t1], or `save_at`."""
    time = config.spec.time
    if time.save_at is not None:
        t = np.asarray(time.save_at, dtype=float)
        key = "time.save_at"
    else:
        if time.t1 is None:
            raise config.error("time.t1", "required key is missing (the end time)")
        n = time.save if time.save is not None else DEFAULT_SAVE
        # The save times and at least a value per save time, with copies.
        problem = memory_problem(4 * 8 * n, f"{n:,} save times")
        if problem:
            raise config.error("time.save", problem)
        with np.errstate(all="ignore"):
            t = np.linspace(time.t0, time.t1, n)
        key = "time.save" if time.save is not None else "time.t1"
    with np.errstate(all="ignore"):
        spacing = np.diff(t)
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(spacing))):
        raise config.error(
            "time.t1" if time.save_at is None else key,
            f"the save times from t0 = {time.t0!r} to t1 = {time.t1!r} span a range beyond the "
            "float range; expected a finite span",
        )
    # Save times float64 cannot tell apart (or spaced by less than the smallest normal
    # float) would give a run with repeated or flushed-to-zero intervals.
    tiny = float(np.finfo(float).tiny)
    if spacing.size and not np.min(spacing) >= tiny:
        i = int(np.argmin(spacing))
        raise config.error(
            key,
            f"save times {t[i]!r} and {t[i + 1]!r} are not distinct in float64 (spacing "
            f"{spacing[i]!r}); expected fewer save times or a wider span",
        )
    return t


def resolved_toml(config: Config, **sections: dict[str, Any]) -> str:
    """The config's TOML with the given sections' defaults filled in.

    Arguments:
        config: the loaded `Config`.
        sections: section name -> {key: value}: the resolved values of that section,
            written over the config's own (arrays and numpy numbers as TOML lists and
            numbers); the config's other keys are kept.

    Returns:
        The TOML text of the config with those sections merged in.
    """
    raw = {
        key: dict(value) if isinstance(value, dict) else value for key, value in config.raw.items()
    }
    for name, values in sections.items():
        merged = dict(raw.get(name, {}))
        merged.update({k: _plain(v) for k, v in values.items()})
        raw[name] = merged
    return Config(raw, config.path).to_toml()


def _plain(value: Any) -> Any:
    if isinstance(value, (jax.Array, np.ndarray, np.generic)):
        arr = np.asarray(value)
        return arr.item() if arr.ndim == 0 else arr.tolist()
    return value


@dataclasses.dataclass(frozen=True)
class Setup:
    """Everything `simulate` needs for the run a config describes, validated.

    Sweeps batch `simulate(setup.model, params, setup.t, initial=..., solver=setup.solver,
    key=setup.key)` over changed `params` and `initial` values, so every family that
    sets up runs provides `Family.setup`.

    Attributes:
        model, params, initial, t, solver, key: the arguments of `simulate`.
        resolved: config sections with every default filled in (for the resolved TOML).
    """

    model: Model
    params: dict[str, Any]
    initial: Any
    t: jax.Array
    solver: Any
    key: jax.Array | None = None
    resolved: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


def setup(config: Config) -> Setup:
    """The validated `simulate` arguments of a config (model included)."""
    warn_if_float32("sim.setup")
    model = build_model(config)
    return family_of(model).setup(model, config)


def plan_run(config: Config) -> RunPlan:
    """The validated, not yet executed run a config describes."""
    model = build_model(config)
    family = family_of(model)
    plan = family.plan(model, config)
    return dataclasses.replace(
        plan, inputs=config_inputs(config), notes=family.solver_notes(model, config)
    )


def run(
    config: Config,
    *,
    progress: bool = False,
    output: str | Path | None = None,
    resume: bool = False,
) -> Any:
    """Run the simulation a config describes (what `sim run` does).

    In memory (no `output`): the run advances in chunks of saved frames and returns a
    result holding every frame. With `output`, each chunk is appended to the file as it
    completes (only one chunk is in memory; chunks are also kept to a few seconds each),
    the full state is checkpointed (every `[output] checkpoint_every` saved frames and/or
    every `[output] checkpoint_seconds`; default every 5 minutes), and the file appears
    under its name only when complete; `resume=True` continues the unfinished run of
    `output` from its last checkpoint and ends with the same file, bit for bit, as an
    uninterrupted run, whatever chunk size and checkpoint interval either was given.

    Arguments:
        config: from `sim.load_config`.
        progress: show progress on the terminal (stderr).
        output: stream the run to this HDF5 file.
        resume: continue the unfinished run of `output`.

    Returns:
        Without `output`, a result with `.save(path)`: `RunResult` for ODE and PDE models,
        `MdRunResult` for particle models. With `output`, a `Streamed` summary (path,
        frames, the frame resumed from, solver statistics).

    Raises:
        ConfigError: the config does not fit the model (names the key).
        InputError: with `output`: an unfinished run is there (and `resume` is False), or
            nothing fits to resume (no unfinished run, a finished file, another config, a
            missing or damaged checkpoint); the files are left as they were.
        SimulationError: the solver failed (for example max_steps reached) or the run
            blew up; with `output`, the last checkpoint (if any) and the frames up to it
            are kept and the message says where.
        StorageError: the output could not be written; the last checkpoint is kept.

    Example:
        >>> result = run(load_config("experiments/lotka_volterra.toml"))
        >>> result.save("lv.h5")
        >>> run(load_config("experiments/lj_fluid.toml"), output="lj.h5")
    """
    warn_if_float32("sim.run")
    plan = plan_run(config)
    with Progress(enabled=progress, description=plan.description) as bar:
        for line in plan.notes:
            bar.note(line)
        if output is None:
            if resume:
                raise InputError(
                    "argument", "resume", "resuming needs the output file of the unfinished run"
                )
            return collect(plan, bar)
        output = check_output_path(output)
        out = config.spec.output
        check_request(config, plan, output)
        with exclusive(output):
            done = stream(
                plan,
                output,
                resume=resume,
                checkpoint_every=out.checkpoint_every,
                checkpoint_seconds=out.checkpoint_seconds,
                progress=bar,
            )
            settle(output, out.xdmf)  # (the XDMF sidecar, once the file is complete)
        return done


class LoopEngine:
    """ODE and PDE runs chunk by chunk, the same numbers wherever chunks fall.

    A *problem* (an `eqx.Module` holding the model, parameters, solver and save times)
    provides `init()`, the loop state at the first save time, and
    `advance(state, frames, capacity)`, which fills the next `frames` save times and
    returns (new state, saved observables [capacity, ...], result code). Its loop state
    holds everything the next step needs (for adaptive ODE solvers the proposed step,
    the controller's and the solver's state: `solvers.OdeLoop`), so a chunk boundary,
    a checkpoint and a resume change nothing. Both are compiled once per run: the
    number of frames is traced, `capacity` (the most frames of a chunk, plus frame 0) is
    fixed.

    Arguments:
        problem: see above.
        times: the save times [T].
        chunk: the most saved frames per chunk.
        failure: result code -> the message of the `SimulationError`.
        explain: called with the loop state where a chunk failed, before that error: it
            raises an `InputError` when the input explains the failure.
    """

    def __init__(
        self,
        problem: Any,
        times: np.ndarray,
        chunk: int,
        failure: Callable[[int], str],
        explain: Callable[[Any], None] | None = None,
    ):
        self.problem = problem
        self.times = np.asarray(times)
        self.chunk = chunk
        self.failure = failure
        # the loop state of a failed chunk -> raises an InputError when the input is the cause
        self.explain = explain

    def start(self) -> Any:
        return _loop_init(self.problem)

    def advance(self, state: Any, k: int, n: int) -> tuple[Any, dict[str, np.ndarray]]:
        count = n + 1 if k == 0 else n  # frame 0 comes with the first chunk
        if not 1 <= n <= self.chunk:
            raise ValueError(f"a chunk of {n} frames; this engine takes 1 to {self.chunk}")
        # (a numpy scalar: an argument like an int32 array, with no conversion to compile)
        state, saved, code = _loop_advance(self.problem, state, np.int32(count), self.chunk + 1)
        code = int(code)
        if code != 0:
            if self.explain is not None:
                self.explain(state)
            raise SimulationError(self.failure(code))
        # (a field split over devices stays there, to be written block by block)
        return state, {name: first_rows(v, count) for name, v in saved.items()}

    def meta(self) -> dict[str, Any]:
        return {}

    def restore(self, meta: dict[str, Any]) -> Any:
        return jax.eval_shape(lambda: _loop_init(self.problem))

    def stats(self, state: Any) -> dict[str, int]:
        return {"num_steps": int(self.problem.num_steps(state)), "result": 0}


@eqx.filter_jit
def _loop_init(problem):
    return problem.init()


@eqx.filter_jit
def _loop_advance(problem, state, frames, capacity: int):
    return problem.advance(state, frames, capacity)


def check_finite(
    config: Config, hint: str, names: tuple[str, ...] | None = None
) -> Callable[[dict[str, np.ndarray], int], None]:
    """A plan's check: every observable (or each of `names`) finite, else a
    `SimulationError` naming the first save time where one was not."""
    times = np.asarray(save_times_or_none(config))

    def check(rows: dict[str, np.ndarray], k: int) -> None:
        for name, values in rows.items():
            if names is not None and name not in names:
                continue
            if not np.issubdtype(values.dtype, np.inexact):
                continue
            if isinstance(values, jax.Array) and not values.is_fully_addressable:
                # (split over several processes: judged where it lies, one flag a frame
                # brought to every process)
                flags = jnp.all(jnp.isfinite(values.reshape(values.shape[0], -1)), axis=1)
                finite = _processes.fetch(flags)
            else:
                values = np.asarray(values)
                finite = np.all(np.isfinite(values.reshape(values.shape[0], -1)), axis=1)
            if not np.all(finite):
                first = int(np.argmin(finite)) + (k if k == 0 else k + 1)
                when = (
                    f" at t = {times[first]:g}" if times is not None and first < len(times) else ""
                )
                raise SimulationError(
                    f"{config.source}: observable {name!r} became non-finite{when}; the solution "
                    f"diverged{hint}"
                )

    return check


def save_times_or_none(config: Config) -> np.ndarray | None:
    try:
        return save_times(config)
    except InputError:
        return None


def frames_per_chunk(config: Config, state_size: int, frames: int) -> int:
    """`[output] chunk`, or as many saved frames as fit in the in-memory budget (a saved
    frame is taken as four times the state: its fields plus derived observables)."""
    return chunk_frames(8 * 4 * max(state_size, 1), frames, config.spec.output.chunk, config=config)


def check_fixed_steps(config: Config, dt: float, max_steps: int) -> None:
    """Refuse a constant step `[time] dt` that needs more than `max_steps` steps to
    cover the run (known before it starts: a one-line input error, not a failed run)."""
    times = save_times(config)
    with np.errstate(all="ignore"):
        ratio = float(times[-1] - times[0]) / dt
    if not ratio * (1 - 1e-12) <= max_steps:  # (a step count within rounding of max_steps fits)
        steps = f"{math.ceil(ratio * (1 - 1e-12)):,}" if math.isfinite(ratio) else "more than 1e308"
        raise config.error(
            "time.dt",
            f"{dt:g} takes {steps} steps from t0 to t1, beyond solver.max_steps = {max_steps:,}; "
            "take a larger step or raise solver.max_steps",
        )


def run_plan(
    config: Config,
    model: Model,
    s: Setup,
    engine: Any,
    check: Callable,
    seed: int | None = None,
    *,
    initial: dict[str, Any] | None = None,
    groups: dict[str, dict[str, Any]] | None = None,
) -> RunPlan:
    """The plan of a run in the run layout: `engine` advances it, `check` judges each
    chunk, the file holds the resolved config, the save times and the parameters of `s`,
    the initial values (`initial`; by default the named states of `s.initial`), further
    groups (`groups`, such as a PDE's grid) and `seed`."""
    sink = RunSink(
        model=model.name,
        config=resolved_toml(config, **s.resolved),
        time=np.asarray(s.t),
        params={k: np.asarray(v) for k, v in s.params.items()},
        initial=({k: np.asarray(v) for k, v in s.initial.items()} if initial is None else initial),
        groups=groups or {},
        seed=seed,
        order=declared_order(model),
    )
    return RunPlan(
        engine=engine,
        sink=sink,
        config=sink.config,
        check=check,
        result=sink_result(sink),
        description=model.name,
    )


def declared_order(model: Model) -> tuple[str, ...]:
    """The names of a model's states (a PDE's fields) in the order it declares them."""
    names = getattr(model, "state_names", None)
    if names is None:
        names = getattr(model, "field_names", ())
    return tuple(str(n) for n in names or ())


def sink_result(sink: RunSink) -> Callable[[dict[str, np.ndarray], dict[str, int]], RunResult]:
    """The in-memory `RunResult` of a run written by `sink`."""

    def result(rows: dict[str, np.ndarray], stats: dict[str, int]) -> RunResult:
        return RunResult(
            model=sink.model,
            config=sink.config,
            time=sink.time,
            observables=sink.ordered(rows),
            params=sink.params,
            initial=sink.initial,
            groups=sink.groups,
            stats=stats,
            seed=sink.seed,
        )

    return result
