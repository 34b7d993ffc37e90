"""`simulate`: pair a model with the solver of its family. Pure and traceable.

Called from Python (no trace under way), `simulate` keeps one compiled program per
model structure, solver settings that shape the program, and parameter names
(`_compiled_call`); a call flattens its inputs once and passes the arrays to that
program. Inside a `jax.jit`, `jax.vmap` or `jax.grad` it traces the family's
`simulate` through `eqx.filter_jit`, as does a call the compiled path declines
(anything unusual: the general path then says what is wrong). A run-time check that fails
raises `eqx.EquinoxRuntimeError` with its message on either path, and the run is not
repeated."""

from __future__ import annotations

import dataclasses
import logging

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import find_top_trace
from jaxtyping import Array, PyTree

from physics import Model
from solvers import did_you_mean

from ._family import Driven, Family, family_of
from ._jax_config import warn_if_float32
from ._trajectory import Trajectory


def complete_params(model: Model, params: PyTree | None) -> dict:
    """`params` with every missing declared parameter filled by its default.

    Arguments:
        model: the model whose declared parameters are filled in.
        params: parameter name -> value, a subset of the model's parameters; None for all
            defaults.

    Returns:
        A new dict of every declared parameter: the given values as they are, the others
        their defaults (float arrays; a parameter whose default is a description, such
        as network weights, as `model.default_params()` builds it).

    Raises:
        ValueError: a key that the model does not declare (at trace time).
    """
    names = model.parameter_names
    if params is None:
        return model.default_params()
    for key in params:
        if key not in names:
            raise ValueError(
                f"model {model.name!r} has no parameter {key!r} "
                f"(parameters: {', '.join(names)}).{did_you_mean(key, names)}"
            )
    full = dict(params)
    for p in model.parameters:
        if p.name not in full:
            # A str default describes a pytree (network weights) that only the model builds.
            full[p.name] = (
                model.default_params()[p.name]
                if isinstance(p.default, str)
                else jnp.asarray(p.default, dtype=float)
            )
    return full


def _as_array(x):
    """Arrays pass through; Python numbers become (strongly typed) float arrays."""
    return x if isinstance(x, (jax.Array, np.ndarray)) else jnp.asarray(x, dtype=float)


def _in_model_order(traj, model):
    """`traj` with the names of its observables in the model's order recorded
    (`Trajectory.observable_names`): its dict of arrays, once through a compiled program,
    is ordered by name. (Evaluated when a program is traced, not at each call.)"""
    if not isinstance(traj, Trajectory):
        return traj
    declared = [n for n in model.observable_names if n in traj.observables]
    names = (*declared, *(n for n in traj.observables if n not in declared))
    return dataclasses.replace(traj, observable_names=names)


@eqx.filter_jit
def _simulate_jit(model, params, t, initial, solver, key):
    return _in_model_order(family_of(model).simulate(model, params, t, initial, solver, key), model)


def _simulate_driver(model, params, t, initial, solver, key) -> Trajectory:
    """How `simulate` runs a model: as its family drives it (MD compiles chunks and
    regrows its neighbour lists), else one compiled call."""
    family = family_of(model)
    if isinstance(family, Driven):
        return _in_model_order(family.drive(model, params, t, initial, solver, key), model)
    return _simulate_jit(model, params, t, initial, solver, key)


# ----------------------------------------------------------------------------- the call from Python

with jax.ensure_compile_time_eval():
    _EVAL_TRACE = type(find_top_trace(None))  # the trace of eager evaluation
_ARRAYS = (jax.Array, np.ndarray, np.generic)  # what eqx.filter_jit passes as arguments
_NUMBERS = (bool, int, float, complex, np.generic)  # parameter values that become arrays
_Tracer = jax.core.Tracer
_CONCRETE: set[type] = {np.ndarray}  # array types met that are no tracers
_DYNAMIC = object()  # marks an argument among the static leaves
_UNUSUAL = object()  # the layout of inputs that no remembered call takes
_PROGRAMS: dict = {}  # (tree structures, static leaves) -> jitted program
_FILLS: dict = {}  # (model class, its declarations, given names) -> (declarations, defaults to add)
_CALLS: dict = {}  # (model, solver, argument layout) -> _Call
_MAX_PROGRAMS, _MAX_CALLS = 256, 32
_CALLBACK_LOG = logging.getLogger("jax._src.callback")


class _QuietFailedCallback(logging.Filter):
    """Drops JAX's log line of a run-time check that failed in the compiled path (the
    caller gets the check's own error instead, as from eqx.filter_jit)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.name == "jax._src.callback" and record.getMessage() == "jax.pure_callback failed"
        )


_QUIET = _QuietFailedCallback()


def _concrete(x) -> bool:
    """Whether `x` is an array and no tracer."""
    if type(x) in _CONCRETE:
        return True
    if isinstance(x, jax.Array) and not isinstance(x, _Tracer):
        _CONCRETE.add(type(x))
        return True
    return False


def _completed(model: Model, params) -> tuple[dict, dict | None] | None:
    """`complete_params` for a call from Python, and the defaults it added when they may
    be kept (per declaration of the parameters and given names); None for an unknown
    name (the general path raises)."""
    if params is None:
        full = model.default_params()
        plain = type(model).default_params is Model.default_params
        return full, (
            full
            if plain and not any(isinstance(p.default, str) for p in model.parameters)
            else None
        )
    if type(params) is not dict:
        return None
    # (per declaration of the parameters: a class's, or a text model's own; the
    # declaration is kept with the fill, so that its id names no other while it is)
    declared = model.parameters
    key = (type(model), id(declared), tuple(params), jax.config.jax_enable_x64)
    kept = _FILLS.get(key)
    fill = kept[1] if kept is not None and kept[0] is declared else None
    if fill is None:
        if any(name not in model.parameter_names for name in params):
            return None
        full = complete_params(model, params)
        fill = {name: full[name] for name in full if name not in params}
        if any(isinstance(model.parameter(name).default, str) for name in fill):
            return full, None  # (defaults the model instance builds: not kept)
        if len(_FILLS) >= _MAX_PROGRAMS:
            _FILLS.clear()
        _FILLS[key] = (declared, fill)
    return ({**params, **fill} if fill else params), fill


def _split(leaves, dynamic: list, traced_floats: bool = False) -> tuple | None:
    """Static leaves, with `_DYNAMIC` where a leaf is an argument (appended to
    `dynamic`); None when a leaf is a tracer."""
    static = []
    for leaf in leaves:
        if isinstance(leaf, _ARRAYS):
            if isinstance(leaf, _Tracer):
                return None
            dynamic.append(leaf)
            static.append(_DYNAMIC)
        elif traced_floats and type(leaf) is float:
            dynamic.append(jnp.asarray(leaf))  # (weakly typed, as the float would be traced)
            static.append(_DYNAMIC)
        else:
            static.append(leaf)
    return tuple(static)


def _program(family: Family, params_tree, trees: tuple, statics: tuple):
    """The compiled `simulate` of one structure. Its arguments: the parameter leaves, the
    save times, then the arguments among the leaves of the model, the initial values,
    the key and the solver (`trees` and `statics`, in that order)."""
    count = params_tree.num_leaves

    def _simulate_jit(*dynamic):
        params = jax.tree.unflatten(params_tree, dynamic[:count])
        t = dynamic[count]
        it = iter(dynamic[count + 1 :])
        model, initial, key, solver = (
            jax.tree.unflatten(tree, [next(it) if s is _DYNAMIC else s for s in static])
            for tree, static in zip(trees, statics, strict=False)
        )
        traj = _in_model_order(family.simulate(model, params, t, initial, solver, key), model)
        if isinstance(traj, Trajectory) and traj.time is t:
            # The save times as they came in are handed back by the caller (`_compiled_call`):
            # as an output of the program they are a copy that XLA runs beside the solve,
            # which cost about 40 us a call (a quarter of a short solve).
            traj = eqx.tree_at(lambda tr: tr.time, traj, None, is_leaf=lambda x: x is None)
        return traj

    return jax.jit(_simulate_jit)


class _Call:
    """A call from Python whose model and solver are given again (the same objects) with
    parameters, initial values and key of the same layout, all arrays: its program and
    how to lay out its arguments, without validating and flattening the inputs again."""

    __slots__ = (
        "model",
        "solver",
        "program",
        "names",
        "fills",
        "initial_names",
        "model_args",
        "solver_args",
    )

    def arguments(self, params, t, initial, key) -> list | None:
        """The program's arguments; None when a value is not an array."""
        args = []
        for name, fill in zip(self.names, self.fills, strict=False):
            value = params[name] if fill is None else fill
            if fill is None and not _concrete(value):
                return None
            args.append(value)
        args.append(t)
        args += self.model_args
        if self.initial_names is not None:
            for name in self.initial_names:
                if not _concrete(initial[name]):
                    return None
                args.append(initial[name])
        elif initial is not None:
            if not _concrete(initial):
                return None
            args.append(initial)
        if key is not None:
            if not _concrete(key):
                return None
            args.append(key)
        args += self.solver_args
        return args


def _one_output(traj: Trajectory):
    """An array the program computed (not the save times it may hand back)."""
    for leaf in jax.tree.leaves(traj.stats):
        return leaf
    return jax.tree.leaves(traj)


def _layout(x):
    """How a call's parameters or initial values are keyed among the remembered calls."""
    if x is None:
        return None
    if type(x) is dict:
        return tuple(x)
    return _DYNAMIC if _concrete(x) else _UNUSUAL


def _compiled_call(model, params, t, initial, solver, key) -> Trajectory | None:
    """`simulate` called from Python with arrays: the inputs flattened once and passed to
    the program compiled for their structure (`eqx.filter_jit`'s static/dynamic split,
    with the solver's Python floats as arguments where the family traces them anyway).
    None when a trace may be under way or the inputs are unusual: the general path then
    runs (and raises what is wrong with them). A run that fails raises here, once."""
    if type(find_top_trace(None)) is not _EVAL_TRACE or jax.config.jax_disable_jit:
        return None
    if isinstance(t, np.ndarray):
        t = t.astype(float)
    elif isinstance(t, jax.Array) and not isinstance(t, _Tracer):
        if t.dtype != np.float64 or t.weak_type:
            t = jnp.asarray(t, dtype=float)
    else:
        return None
    if t.ndim != 1 or t.shape[0] < 2:
        return None
    layout = (
        id(model),
        id(solver),
        _layout(params),
        _layout(initial),
        key is None,
        jax.config.jax_enable_x64,
    )
    call = _CALLS.get(layout)
    args = None
    if call is not None and call.model is model and call.solver is solver:
        program = call.program
        args = call.arguments(params, t, initial, key)
    if args is None:
        found = _general_call(model, params, t, initial, solver, key, layout)
        if found is None:
            return None
        program, args = found
    _CALLBACK_LOG.addFilter(_QUIET)
    try:
        traj = program(*args)
        # Run-time checks raise here, as in eqx.filter_jit's call: every output of the
        # program is ready, or carries its error, at the same time. (An output made for
        # the purpose, as eqx.filter_jit makes, is a constant XLA writes beside the solve:
        # about 40 us a call.)
        jax.block_until_ready(_one_output(traj))
    except jax.errors.JaxRuntimeError as error:
        raise _check_failed(error) from None
    finally:
        _CALLBACK_LOG.removeFilter(_QUIET)
    if traj.time is None:  # (the save times, which the program did not copy: see `_program`)
        # `traj` is the program's new output, which no one else holds: its field is set
        # in place (eqx.tree_at would take longer than the copy it saves).
        object.__setattr__(traj, "time", t if isinstance(t, jax.Array) else jax.device_put(t))
    return traj


def _hashable(value) -> bool:
    """Whether `value` can key a dict (static leaves key the compiled programs)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


_EQX_CHECK = "EquinoxRuntimeError: "  # how a failed `eqx.error_if` names itself in XLA's error


def _check_failed(error: Exception) -> Exception:
    """What a failed run of the compiled program raises: for a run-time check
    (`eqx.error_if`: the solver's step limit, a blow-up), the `eqx.EquinoxRuntimeError`
    of its message, as `eqx.filter_jit` raises it; any other error as it came."""
    text = str(error)
    at = text.rfind(_EQX_CHECK)
    if at < 0:
        return error
    message = text[at + len(_EQX_CHECK) :].split("\n\n\n", 1)[0].strip()
    return eqx.EquinoxRuntimeError(message)


def _general_call(model, params, t, initial, solver, key, layout):
    """The program of a call and its arguments, from the inputs flattened and checked
    (and the call remembered when a call like it may skip this); None when the general
    path must run."""
    family = family_of(model)
    if isinstance(family, Driven):
        return None
    completed = _completed(model, params)
    if completed is None:
        return None
    params, fill = completed
    p_leaves, p_tree = jax.tree.flatten(params)
    for i, leaf in enumerate(p_leaves):
        if isinstance(leaf, _NUMBERS):
            p_leaves[i] = jnp.asarray(leaf, dtype=float)
        elif not isinstance(leaf, (jax.Array, np.ndarray)) or isinstance(leaf, _Tracer):
            return None  # (a value that is no number: the general path says what it is)
    if isinstance(initial, dict):
        initial = {k: _as_array(v) for k, v in initial.items()}
    args = [*p_leaves, t]
    trees, statics, counts = [], [], []
    for part, traced_floats in (
        (model, False),
        (initial, False),
        (key, False),
        (solver, family.traced_solver_floats),
    ):
        leaves, tree = jax.tree.flatten(part)
        before = len(args)
        static = _split(leaves, args, traced_floats)
        if static is None:
            return None
        trees.append(tree)
        statics.append(static)
        counts.append((before, len(args)))
    signature = (p_tree, *trees, *statics)
    if not _hashable(signature):
        return None  # (a static leaf that eqx.filter_jit refuses, and says why)
    program = _PROGRAMS.get(signature)
    if program is None:
        if len(_PROGRAMS) >= _MAX_PROGRAMS:
            del _PROGRAMS[next(iter(_PROGRAMS))]
        program = _PROGRAMS[signature] = _program(family, p_tree, tuple(trees), tuple(statics))
    # Remember the call when its parameters, initial values and key are arrays, one per
    # name (its layout says which names; its model and solver are kept with it).
    one_each = fill is not None and p_tree.num_leaves == len(params)
    if type(initial) is dict:
        one_each = one_each and len(statics[1]) == len(initial)
    one_each = (
        one_each and all(s is _DYNAMIC for s in statics[1]) and (key is None or _concrete(key))
    )
    if one_each and _UNUSUAL not in layout:
        given = layout[2] or ()
        call = _Call()
        call.model, call.solver, call.program = model, solver, program
        call.names = tuple(sorted(params))
        call.fills = tuple(None if name in given else fill[name] for name in call.names)
        call.initial_names = tuple(sorted(initial)) if type(initial) is dict else None
        call.model_args = args[counts[0][0] : counts[0][1]]
        call.solver_args = args[counts[3][0] : counts[3][1]]
        if len(_CALLS) >= _MAX_CALLS:
            del _CALLS[next(iter(_CALLS))]
        _CALLS[layout] = call
    return program, args


def simulate(
    model: Model,
    params: PyTree | None,
    t: Array | np.ndarray,
    *,
    initial: PyTree | None = None,
    solver: eqx.Module | None = None,
    key: Array | None = None,
) -> Trajectory:
    """Simulate `model` with `params`, saving at the times `t`.

    Pure and traceable: `jax.jit`, `jax.vmap` over params and `jax.grad` with respect to
    params and initial state all compose with it. Changing a parameter value, a
    tolerance or the save times (same length) does not recompile.

    Arguments:
        model: a model of any family (`sim.get_model(name)`).
        params: dict of parameter values (missing ones take the model's defaults).
        t: increasing save times [T], T >= 2; the first is the initial time.
        initial: initial state: for ODEs a dict of values per state component (missing
            ones take defaults) or an array [n]; family-specific otherwise.
        solver: the family's solver strategy (default: `OdeSolver()` for ODEs,
            tsit5 with rtol 1e-6 and atol 1e-8).
        key: PRNG key for stochastic families (Langevin dynamics, random initial states).

    Returns:
        A `Trajectory` with `time`, `observables` (name -> [T, ...]), `final_state` and
        `stats`.

    Raises:
        ValueError: an unknown parameter or state name, or a badly shaped initial state.

    Example:
        >>> import jax.numpy as jnp, sim
        >>> sim.configure_jax()  # (float64: once, after the import)
        >>> model = sim.get_model("lotka_volterra")
        >>> traj = sim.simulate(model, model.default_params(), jnp.linspace(0.0, 20.0, 201))
        >>> traj.observables["prey"].shape
        (201,)
    """
    warn_if_float32("sim.simulate")
    traj = _compiled_call(model, params, t, initial, solver, key)
    if traj is not None:
        return traj
    # A numpy array stays one: a constant even under jax.jit, as families that fix their
    # number of steps before compiling (MD) need.
    t = t.astype(float) if isinstance(t, np.ndarray) else jnp.asarray(t, dtype=float)
    if t.ndim != 1 or t.shape[0] < 2:
        raise ValueError(
            f"save times t must be a 1-D array of at least 2 times, got shape {t.shape}"
        )
    # Python numbers become arrays so that a new value never recompiles.
    params = jax.tree.map(_as_array, complete_params(model, params))
    if isinstance(initial, dict):
        initial = {k: _as_array(v) for k, v in initial.items()}
    return _simulate_driver(model, params, t, initial, solver, key)
