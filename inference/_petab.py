"""PEtab problems (format version 1): an SBML model, conditions, measurements,
observables with their noise models, and a parameter table, read with the `petab`
library and turned into one differentiable objective.

The objective is the negative log-likelihood of every measurement with all normalising
constants (the PEtab convention; priors excluded), as a function of the estimated
parameters on their PEtab scale (lin, log or log10). Every simulation condition (a
simulation condition with its preequilibration condition, if any) is one run of the
imported model; the runs are padded to a common number of save times and solved
together under `jax.vmap`, so one compiled program evaluates the whole problem.
Observable and noise formulas are read by PEtab's own parser (`sympify_petab`) and the
resulting syntax tree is compiled to `jax.numpy` closures (`_compile`), never evaluated
as text.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import sim
from physics.ode import SbmlError, sbml_model
from sim.core import (
    DataError,
    InputError,
    Result,
    check_output_path,
    dask_client,
    exclusive,
    memory_problem,
    safe_point,
    warn_if_float32,
    write_group,
    write_root_attrs,
)
from solvers import OdeSolver, checks_as_nan

from ._checkpoint import Checkpointer, checkpoint_path, fingerprint
from ._multistart import block_size, blocks, in_order, padded, spread, spread_check
from ._observation import negative_log_likelihood
from ._petab_files import (
    PetabError as PetabError,
    check_headers,
    confined,
    lint,
    named_files,
    read_spec,
)

SCALES = ("lin", "log", "log10")
# Gradients by forward-mode sensitivities up to this many estimated parameters (Boehm, 9
# parameters: 105 ms forward against 228 ms reverse per value and gradient).
FORWARD_MODE_UP_TO = 16
DISTRIBUTIONS = ("normal", "laplace")
TRANSFORMATIONS = ("lin", "log", "log10")


# ----------------------------------------------------------------------------- formulas


def _compile(expr, where: str) -> tuple[Callable[[dict], Any], set[str]]:
    """A function of a dict of values computing the sympy expression `expr`, and the
    names it reads."""
    import sympy as sp

    names: set[str] = set()
    functions = _functions(sp)

    def build(e) -> Callable[[dict], Any]:
        if e is sp.true or e is sp.false:
            flag = bool(e)
            return lambda v: flag
        if e.is_Number or e in (sp.pi, sp.E):
            value = float(e)
            return lambda v: value
        if e.is_Symbol:
            name = e.name
            names.add(name)
            return lambda v: v[name]
        if isinstance(e, sp.Piecewise):
            pieces = [(build(pair.args[0]), build(pair.args[1])) for pair in e.args]

            def piecewise(v):
                out = jnp.nan
                for value, condition in reversed(pieces):
                    out = jnp.where(condition(v), value(v), out)
                return out

            return piecewise
        args = [build(a) for a in e.args]
        if isinstance(e, sp.Add):
            return lambda v: _fold(jnp.add, [a(v) for a in args])
        if isinstance(e, sp.Mul):
            return lambda v: _fold(jnp.multiply, [a(v) for a in args])
        if isinstance(e, sp.Pow):
            base, power = args
            return lambda v: jnp.power(base(v), power(v))
        for kind, fn in functions.items():
            if isinstance(e, kind):
                return lambda v, _f=fn: _f(*(a(v) for a in args))
        raise PetabError(f"{where}: uses {type(e).__name__}, which is not supported")

    return build(expr), names


def _functions(sp) -> dict:
    return {
        sp.exp: jnp.exp,
        sp.log: jnp.log,
        sp.sin: jnp.sin,
        sp.cos: jnp.cos,
        sp.tan: jnp.tan,
        sp.sinh: jnp.sinh,
        sp.cosh: jnp.cosh,
        sp.tanh: jnp.tanh,
        sp.asin: jnp.arcsin,
        sp.acos: jnp.arccos,
        sp.atan: jnp.arctan,
        sp.Abs: jnp.abs,
        sp.sign: jnp.sign,
        sp.floor: jnp.floor,
        sp.ceiling: jnp.ceil,
        sp.Min: lambda *a: _fold(jnp.minimum, list(a)),
        sp.Max: lambda *a: _fold(jnp.maximum, list(a)),
        sp.StrictLessThan: jnp.less,
        sp.LessThan: jnp.less_equal,
        sp.StrictGreaterThan: jnp.greater,
        sp.GreaterThan: jnp.greater_equal,
        sp.Equality: jnp.equal,
        sp.Unequality: jnp.not_equal,
        sp.And: lambda *a: _fold(jnp.logical_and, list(a)),
        sp.Or: lambda *a: _fold(jnp.logical_or, list(a)),
        sp.Not: jnp.logical_not,
    }


def _fold(fn, values):
    out = values[0]
    for x in values[1:]:
        out = fn(out, x)
    return out


# ----------------------------------------------------------------------------- the problem


@dataclasses.dataclass(frozen=True)
class PetabParameter:
    """One row of the parameter table (bounds and nominal value in linear scale)."""

    id: str
    scale: str
    lower: float
    upper: float
    nominal: float
    estimate: bool
    prior: str = ""  # objectivePriorType ('' = none)
    prior_parameters: tuple[float, ...] = ()


PRIORS = (
    "uniform",
    "normal",
    "laplace",
    "logNormal",
    "logLaplace",
    "parameterScaleUniform",
    "parameterScaleNormal",
    "parameterScaleLaplace",
)


def _negative_log_prior(x, p: PetabParameter):
    """-log density of PEtab's objective prior of one parameter at `x` (its scale)."""
    kind, (a, b) = p.prior, p.prior_parameters
    if kind.startswith("parameterScale"):
        v, kind = x, kind[len("parameterScale") :].lower()
    elif kind.startswith("log"):
        # (a density of the linear value, in log space: lognormal/loglaplace)
        v, kind = to_linear(x, p.scale), kind[3:].lower()
        return _negative_log_prior_of(jnp.log(v), kind, a, b) + jnp.log(v)
    else:
        v = to_linear(x, p.scale)
    return _negative_log_prior_of(v, kind, a, b)


def _negative_log_prior_of(v, kind: str, a, b):
    if kind == "uniform":
        return jnp.where((v >= a) & (v <= b), jnp.log(b - a), jnp.inf)
    if kind == "normal":
        return 0.5 * jnp.log(2 * math.pi * b**2) + 0.5 * ((v - a) / b) ** 2
    return jnp.log(2 * b) + jnp.abs(v - a) / b  # laplace


def to_linear(x, scale: str):
    """A value on a PEtab parameter scale in linear scale."""
    return x if scale == "lin" else (jnp.exp(x) if scale == "log" else jnp.power(10.0, x))


def to_scale(x, scale: str):
    """A linear value on a PEtab parameter scale."""
    return x if scale == "lin" else (jnp.log(x) if scale == "log" else jnp.log10(x))


def _missing(value) -> bool:
    return (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or (isinstance(value, str) and not value.strip())
    )


class _Sources:
    """Where the values of the objective come from: the parameter table's values (linear
    scale) followed by the problem's numeric constants, one index each."""

    def __init__(self, parameters: list[PetabParameter]):
        self.index = {p.id: i for i, p in enumerate(parameters)}
        self.constants: list[float] = []
        self.used: set[str] = set()  # the ids of the table that something reads

    def of(self, value, where: str) -> int:
        """The index of a number or a parameter id."""
        if isinstance(value, str):
            text = value.strip()
            try:
                value = float(text)
            except ValueError:
                if text not in self.index:
                    raise PetabError(
                        f"{where}: {text!r} is neither a number nor a parameter of the parameter "
                        "table"
                    ) from None
                self.used.add(text)
                return self.index[text]
        self.constants.append(float(value))
        return len(self.index) + len(self.constants) - 1


@dataclasses.dataclass
class _Observable:
    id: str
    value: Callable[[dict], Any]
    sigma: Callable[[dict], Any]
    transformation: str
    distribution: str
    rows: np.ndarray  # measurement rows of this observable
    placeholders: dict[str, np.ndarray]  # placeholder name -> source index per row


class PetabProblem:
    """A PEtab problem ready to evaluate: `objective(x)` is the negative log-likelihood
    for the estimated parameters `x` [p] on their PEtab scales (order of
    `estimated`); `nominal()` gives the table's nominal values on those scales.

    Attributes:
        path: the problem's YAML file.
        model: the imported SBML model.
        parameters: the parameter table, in its order.
        estimated: ids of the estimated parameters.
        solver: the ODE solver of every simulation.
        allow_outside: whether its files may lie outside the YAML file's folder (as
            loaded: `load_petab`); the fit's digests and workers read them alike.
    """

    def __init__(
        self,
        path: Path,
        model,
        parameters: list[PetabParameter],
        solver: OdeSolver,
        allow_outside: bool = False,
    ):
        self.path = path
        self.allow_outside = allow_outside
        self.model = model
        self.parameters = parameters
        self.estimated = [p.id for p in parameters if p.estimate]
        self.solver = solver
        self._functions: dict[tuple, Callable] = {}

    def nominal(self) -> np.ndarray:
        """The nominal values of the estimated parameters on their scales."""
        return np.array(
            [float(to_scale(np.float64(p.nominal), p.scale)) for p in self.parameters if p.estimate]
        )

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of the estimated parameters on their scales."""
        est = [p for p in self.parameters if p.estimate]
        return (
            np.array([float(to_scale(np.float64(p.lower), p.scale)) for p in est]),
            np.array([float(to_scale(np.float64(p.upper), p.scale)) for p in est]),
        )

    def theta(self, x) -> jax.Array:
        """All parameter-table values in linear scale, the estimated ones from `x`."""
        out, k = [], 0
        for p in self.parameters:
            if p.estimate:
                out.append(to_linear(x[k], p.scale))
                k += 1
            else:
                out.append(jnp.asarray(p.nominal, dtype=float))
        return jnp.stack(out) if out else jnp.zeros((0,))

    def objective(self, x, solver: OdeSolver | None = None) -> jax.Array:
        """The negative log-likelihood (all normalising constants, priors excluded);
        `solver` replaces the problem's for this evaluation."""
        return jnp.sum(self.residual_terms(x, solver))

    def value_and_grad(
        self, with_priors: bool = False
    ) -> Callable[[Any], tuple[jax.Array, jax.Array]]:
        """A function of x giving the objective (plus the priors) and its gradient:
        forward-mode sensitivities through the solver for up to `FORWARD_MODE_UP_TO`
        estimated parameters (cheaper for few parameters: no checkpointed reverse
        pass), reverse mode beyond. The same function for the same arguments and solver,
        so that the fits of one problem share their compiled batches (`_batched`)."""
        key = (with_priors, self.solver)
        if key not in self._functions:
            self._functions[key] = self._value_and_grad(with_priors)
        return self._functions[key]

    def _value_and_grad(self, with_priors: bool) -> Callable[[Any], tuple[jax.Array, jax.Array]]:
        prior = self.prior if with_priors else (lambda x: 0.0)
        if len(self.estimated) <= FORWARD_MODE_UP_TO:
            forward = dataclasses.replace(self.solver, adjoint="forward")

            def fun(x):
                f = lambda x: self.objective(x, forward) + prior(x)  # noqa: E731
                return f(x), jax.jacfwd(f)(x)

            return fun
        return jax.value_and_grad(lambda x: self.objective(x) + prior(x))

    def prior(self, x) -> jax.Array:
        """-log of the objective priors of the parameter table at `x` (0 where none is
        given)."""
        est = [p for p in self.parameters if p.estimate]
        terms = [_negative_log_prior(x[k], p) for k, p in enumerate(est) if p.prior]
        return jnp.sum(jnp.stack(terms)) if terms else jnp.zeros((), dtype=jnp.result_type(float))

    @property
    def has_priors(self) -> bool:
        return any(p.prior for p in self.parameters if p.estimate)

    # (set by `load_petab`)
    residual_terms: Callable[[Any], jax.Array]
    simulations: list[tuple[str, str]]
    observables: list[_Observable]


def _prior_of(row, where: str, scale: str) -> tuple[str, tuple[float, ...]]:
    """The objective prior of a parameter-table row: its type and two parameters."""
    kind = row.get("objectivePriorType")
    if _missing(kind):
        return "", ()
    kind = str(kind).strip()
    if kind not in PRIORS:
        raise PetabError(
            f"{where}, column objectivePriorType: expected one of {', '.join(PRIORS)}, got {kind!r}"
        )
    text = row.get("objectivePriorParameters")
    try:
        a, b = (float(v) for v in str(text).split(";"))
    except (TypeError, ValueError):
        raise PetabError(
            f"{where}, column objectivePriorParameters: expected two numbers separated by ';', got "
            f"{text!r}"
        ) from None
    if kind != "uniform" and kind != "parameterScaleUniform" and not b > 0:
        raise PetabError(
            f"{where}, column objectivePriorParameters: the scale of a {kind} prior must be "
            f"positive, got {b!r}"
        )
    if kind.endswith("niform") and not b > a:
        raise PetabError(
            f"{where}, column objectivePriorParameters: a uniform prior needs lower < upper, got "
            f"{text!r}"
        )
    return kind, (a, b)


# Models of this many states or more simulate their conditions one after the other
# (see `each_condition` in `load_petab`).
LOOPED_FROM = 200


def load_petab(
    path: str | Path, solver: OdeSolver | None = None, *, allow_outside: bool = False
) -> PetabProblem:
    """Read a PEtab problem (format version 1) from its YAML file.

    The YAML file and the header of every table are checked first
    (`inference._petab_files`); every file it names must lie inside its folder (after
    resolving links) unless `allow_outside`, and one that does not is never opened.

    Raises:
        PetabError: the problem cannot be read or uses what is not supported (one line
            naming the file, the table, the row and the column, or the YAML key).
    """
    warn_if_float32("inference.load_petab")
    import petab.v1 as petab
    import sympy as sp
    from petab.v1.math import sympify_petab

    path = Path(path)
    if not path.is_file():
        raise PetabError(f"{path}: no such file; expected a PEtab problem (YAML)")
    spec = read_spec(path)
    files = confined(path, spec, allow_outside)
    check_headers(path, files)
    try:
        with warnings.catch_warnings():  # (the library's own deprecation warnings)
            warnings.simplefilter("ignore")
            # (the spec already read and checked, so that the files read are those checked)
            problem = petab.Problem.from_yaml(spec, base_path=str(path.parent))
    except Exception as e:  # (the library reports a broken table in many ways)
        reason = (
            f"the key {e.args[0]!r} is missing"
            if isinstance(e, KeyError) and e.args
            else (str(e).splitlines()[0] if str(e) else type(e).__name__)
        )
        raise PetabError(f"{path}: not a readable PEtab problem: {reason}") from None
    sbml_files = spec["problems"][0]["sbml_files"]
    try:
        model = sbml_model(path.parent / sbml_files[0])
    except SbmlError as e:
        raise PetabError(f"{path}: {e}") from None

    # --- the parameter table
    parameters = []
    table = problem.parameter_df
    for pid, row in table.iterrows():
        where = f"{path.name}: parameter table, row {pid!r}"
        scale = str(row.get("parameterScale", "lin"))
        if scale not in SCALES:
            raise PetabError(
                f"{where}, column parameterScale: expected one of {', '.join(SCALES)}, got "
                f"{scale!r}"
            )
        values = {}
        for column in ("lowerBound", "upperBound", "nominalValue"):
            try:
                values[column] = float(row.get(column, math.nan))
            except (TypeError, ValueError):
                raise PetabError(
                    f"{where}, column {column}: expected a number, got {row.get(column)!r}"
                ) from None
        estimate = bool(int(row.get("estimate", 1)))
        if not math.isfinite(values["nominalValue"]) and not estimate:
            raise PetabError(
                f"{where}, column nominalValue: a fixed parameter needs a finite nominal value"
            )
        prior, prior_parameters = _prior_of(row, where, scale)
        parameters.append(
            PetabParameter(
                str(pid),
                scale,
                values["lowerBound"],
                values["upperBound"],
                values["nominalValue"],
                estimate,
                prior,
                prior_parameters,
            )
        )
    sources = _Sources(parameters)

    # --- what the model is: its parameters, species (initial values), observables
    model_params = list(model.parameter_names)
    defaults = {k: float(v) for k, v in model.default_params().items()}
    states = list(model.state_names)
    model_ids = set(model.observable_names)

    # --- conditions
    conditions = problem.condition_df
    condition_targets = [c for c in conditions.columns if c != "conditionName"]
    for column in condition_targets:
        if (
            column not in model_params
            and column not in states
            and column not in model.species_compartments
        ):
            raise PetabError(
                f"{path.name}: condition table, column {column!r}: no parameter, compartment or "
                f"species of the model {model.name!r}"
            )
        if column not in model_params and column not in states:
            # (a species the model computes from others at the start: setting it would
            # change nothing, silently)
            raise PetabError(
                f"{path.name}: condition table, column {column!r}: the model {model.name!r} "
                "computes this species from other values and keeps it constant; a condition "
                "cannot set it"
            )

    def condition(cid: str, role: str, row_where: str) -> tuple[dict[str, int], dict[str, int]]:
        """(model parameter -> source, species -> source) of one condition."""
        if cid not in conditions.index:
            raise PetabError(
                f"{row_where}, column {role}: no condition {cid!r} in the condition table"
            )
        params, initial = {}, {}
        for column in condition_targets:
            value = conditions.loc[cid, column]
            if _missing(value):
                continue
            where = f"{path.name}: condition table, row {cid!r}, column {column!r}"
            (params if column in model_params else initial)[column] = sources.of(value, where)
        return params, initial

    # The parameter table's model parameters hold for every condition.
    table_params = {p.id: sources.index[p.id] for p in parameters if p.id in model_params}

    # --- measurements, grouped into simulations
    m = problem.measurement_df.reset_index(drop=True)
    if len(m) == 0:
        raise PetabError(
            f"{path.name}: measurement table: no measurements; expected at least one row"
        )
    has_pre = "preequilibrationConditionId" in m.columns
    keys: list[tuple[str, str]] = []
    group_of_row = np.zeros(len(m), dtype=int)
    times = np.zeros(len(m))
    measured = np.zeros(len(m))
    for i, row in m.iterrows():
        where = f"{path.name}: measurement table, row {i + 1}"
        pre = (
            row["preequilibrationConditionId"]
            if has_pre and not _missing(row["preequilibrationConditionId"])
            else ""
        )
        key = (str(pre), str(row["simulationConditionId"]))
        if key not in keys:
            keys.append(key)
        group_of_row[i] = keys.index(key)
        for column, target in (("time", times), ("measurement", measured)):
            try:
                target[i] = float(row[column])
            except (TypeError, ValueError):
                raise PetabError(
                    f"{where}, column {column}: expected a number, got {row[column]!r}"
                ) from None
            if not math.isfinite(target[i]):
                what = (
                    "steady-state measurements (time inf) are not supported"
                    if column == "time"
                    else "expected a finite number"
                )
                raise PetabError(f"{where}, column {column}: {what}, got {row[column]!r}")
        if times[i] < 0:
            raise PetabError(
                f"{where}, column time: expected a time >= 0 (simulations start at 0), got "
                f"{times[i]!r}"
            )
        if str(row["observableId"]) not in problem.observable_df.index:
            raise PetabError(
                f"{where}, column observableId: no observable {row['observableId']!r} in the "
                "observable table"
            )

    groups = len(keys)
    save_times = [np.unique(times[group_of_row == g]) for g in range(groups)]
    length = max(2, max(len(t) + (t[0] > 0) for t in save_times))
    ts = np.zeros((groups, length))
    time_index = np.zeros(len(m), dtype=int)
    for g, t in enumerate(save_times):
        t = t if t[0] == 0 else np.concatenate([[0.0], t])
        ts[g, : len(t)] = t
        ts[g, len(t) :] = t[-1]  # (padding: the last time again)
        rows = np.flatnonzero(group_of_row == g)
        time_index[rows] = np.searchsorted(t, times[rows])
    if np.any(ts[:, -1] == 0):
        ts[ts[:, -1] == 0, -1] = 1e-9  # (a simulation measured at t = 0 only)

    # Per simulation: its model parameters and initial values, from the table and its
    # condition (and those of its preequilibration).
    def settings(role_conditions: list[str], role: str):
        params = np.zeros((groups, len(model_params)), dtype=int)
        initial = {}
        for g, cid in enumerate(role_conditions):
            row_where = f"{path.name}: measurement table, simulation {g + 1}"
            overrides, species = condition(cid, role, row_where)
            for j, pid in enumerate(model_params):
                if pid in overrides:
                    params[g, j] = overrides[pid]
                elif pid in table_params:
                    params[g, j] = table_params[pid]
                else:
                    params[g, j] = sources.of(defaults[pid], "")
            for sid, index in species.items():
                initial.setdefault(sid, np.full(groups, -1, dtype=int))[g] = index
        return params, initial

    sim_params, sim_initial = settings([k[1] for k in keys], "simulationConditionId")
    pre_groups = np.array([g for g, k in enumerate(keys) if k[0]], dtype=int)
    pre_params, pre_initial = settings([k[0] or k[1] for k in keys], "preequilibrationConditionId")

    # --- observables
    observables = []
    obs_df = problem.observable_df
    for oid in obs_df.index:
        rows = np.flatnonzero(m["observableId"].astype(str).to_numpy() == str(oid))
        if rows.size == 0:
            continue
        where = f"{path.name}: observable table, row {oid!r}"
        transformation = str(obs_df.loc[oid].get("observableTransformation", "lin"))
        transformation = (
            "lin" if _missing(obs_df.loc[oid].get("observableTransformation")) else transformation
        )
        distribution = (
            "normal"
            if _missing(obs_df.loc[oid].get("noiseDistribution"))
            else str(obs_df.loc[oid]["noiseDistribution"])
        )
        if transformation not in TRANSFORMATIONS:
            raise PetabError(
                f"{where}, column observableTransformation: expected one of "
                f"{', '.join(TRANSFORMATIONS)}, got {transformation!r}"
            )
        if distribution not in DISTRIBUTIONS:
            raise PetabError(
                f"{where}, column noiseDistribution: expected one of {', '.join(DISTRIBUTIONS)}, "
                f"got {distribution!r}"
            )
        fns = {}
        placeholders: dict[str, np.ndarray] = {}
        for column, prefix, table_column in (
            ("observableFormula", "observableParameter", "observableParameters"),
            ("noiseFormula", "noiseParameter", "noiseParameters"),
        ):
            text = obs_df.loc[oid][column]
            try:
                expr = sympify_petab(text) if isinstance(text, str) else sp.Float(float(text))
            except Exception as e:
                raise PetabError(
                    f"{where}, column {column}: cannot be read: "
                    f"{str(e).splitlines()[0] if str(e) else type(e).__name__}"
                ) from None
            if (
                column == "noiseFormula"
                and expr.is_number
                and not (expr.is_real and math.isfinite(float(expr)) and float(expr) > 0)
            ):
                raise PetabError(
                    f"{where}, column noiseFormula: a sigma that is a number must be a positive "
                    f"finite standard deviation, got {text!r}"
                )
            fn, names = _compile(expr, f"{where}, column {column}")
            fns[column] = fn
            wanted = sorted(n for n in names if n.startswith(prefix) and n.endswith(f"_{oid}"))
            sources.used.update(n for n in names if n in sources.index)
            for name in names:
                if name not in model_ids and name not in sources.index and name not in wanted:
                    raise PetabError(
                        f"{where}, column {column}: {name!r} is no id of the model, parameter of "
                        f"the parameter table or {prefix} of {oid!r}"
                    )
            for name in wanted:
                placeholders[name] = np.zeros(rows.size, dtype=int)
            for k, i in enumerate(rows):
                cell = m.loc[i, table_column] if table_column in m.columns else math.nan
                values = [] if _missing(cell) else str(cell).split(";")
                if len(values) != len(wanted):
                    raise PetabError(
                        f"{path.name}: measurement table, row {i + 1}, column {table_column}: "
                        f"observable {oid!r} needs {len(wanted)} value(s) "
                        f"({', '.join(wanted) or 'none'}), got {len(values)}"
                    )
                for name, value in zip(wanted, values, strict=False):
                    cell_where = (
                        f"{path.name}: measurement table, row {i + 1}, column {table_column}"
                    )
                    placeholders[name][k] = sources.of(value, cell_where)
                    # (a number that is the whole noise formula is sigma itself; within a
                    # formula such as `noiseParameter1 + noiseParameter2 * y` a 0 is fine)
                    sigma_itself = str(expr) == name
                    if (
                        prefix == "noiseParameter"
                        and sigma_itself
                        and placeholders[name][k] >= len(sources.index)
                        and not sources.constants[placeholders[name][k] - len(sources.index)] > 0
                    ):
                        raise PetabError(
                            f"{cell_where}: a noise parameter that is sigma itself must be "
                            f"positive, got {value!r}"
                        )
                    fixed = (
                        parameters[placeholders[name][k]]
                        if placeholders[name][k] < len(parameters)
                        else None
                    )
                    if (
                        prefix == "noiseParameter"
                        and sigma_itself
                        and fixed is not None
                        and not fixed.estimate
                        and not fixed.nominal > 0
                    ):
                        raise PetabError(
                            f"{cell_where}: a noise parameter that is sigma itself must be "
                            f"positive; the fixed parameter {fixed.id!r} has the nominal value "
                            f"{fixed.nominal!r}"
                        )
        observables.append(
            _Observable(
                str(oid),
                fns["observableFormula"],
                fns["noiseFormula"],
                transformation,
                distribution,
                rows,
                placeholders,
            )
        )
        if transformation != "lin" and np.any(measured[rows] <= 0):
            i = rows[np.argmax(measured[rows] <= 0)]
            raise PetabError(
                f"{path.name}: measurement table, row {i + 1}, column measurement: a "
                f"{transformation}-transformed observable needs a positive measurement, got "
                f"{measured[i]!r}"
            )

    for p in parameters:
        if p.id not in model_params and p.id not in sources.used:
            raise PetabError(
                f"{path.name}: parameter table, row {p.id!r}: no parameter of the model "
                f"{model.name!r}, and no condition, formula or measurement uses it"
            )
    lint(path, problem, files)  # (the library's own checks, after ours: they name rows and columns)

    # (a failed solve gives NaN, an infinite objective, never an exception mid-fit)
    solver = solver or OdeSolver(
        method="kvaerno5", rtol=1e-8, atol=1e-10, max_steps=100_000, throw=False
    )
    out = PetabProblem(path, model, parameters, solver, allow_outside)
    out.simulations = keys
    constants = np.asarray(sources.constants, dtype=float)
    compartments = model.species_compartments
    amount_species = model.amount_species
    param_position = {pid: j for j, pid in enumerate(model_params)}
    table_ids = list(sources.index)
    ts_j = jnp.asarray(ts)

    def initial_state(params: dict, overrides: dict, base=None):
        """The state vector of one simulation: species given by a condition (as the SBML
        symbol: a concentration unless amount-valued) replace the model's (or `base`)."""
        amounts = {}
        for sid, value in overrides.items():
            if sid in compartments and sid not in amount_species:
                cid = compartments[sid]
                size = params[cid] if cid in params else jnp.asarray(defaults.get(cid, 1.0))
                value = value * size
            amounts[sid] = value
        if base is None:
            return model.initial_state({k: v for k, v in amounts.items() if k in states}, params)
        return jnp.stack([amounts.get(n, base[i]) for i, n in enumerate(states)])

    def gather(ext, index):
        return ext[jnp.asarray(index)]

    def each_condition(fn, *args):
        """fn over the leading axis of `args`: batched (vmap) for models of fewer than
        `LOOPED_FROM` states, in a loop (lax.map) from there on. A batched implicit solve
        steps every condition until the slowest ends and factorises a batch of matrices
        at once, which XLA does more slowly than one at a time (an LU of 500 states: 20
        ms per matrix in a batch of 8, 11 ms in a loop); for a large model that is most
        of the work."""
        if len(states) >= LOOPED_FROM:
            return jax.lax.map(lambda a: fn(*a), args)
        return jax.vmap(fn)(*args)

    def run_all(theta, solver):
        ext = jnp.concatenate([theta, jnp.asarray(constants)])

        def group_params(index):  # [G, n_params] -> dict of [G]
            return {pid: ext[jnp.asarray(index[:, j])] for pid, j in param_position.items()}

        def group_initial(initial, g_rows):  # species -> [G] (NaN where not given)
            return {
                sid: jnp.where(
                    jnp.asarray(idx[g_rows]) >= 0,
                    ext[jnp.asarray(np.maximum(idx[g_rows], 0))],
                    jnp.nan,
                )
                for sid, idx in initial.items()
            }

        params = group_params(sim_params)
        given = group_initial(sim_initial, np.arange(groups))

        def start(p, g_over):
            # (a species a condition leaves out (NaN) keeps the model's value)
            base = model.initial_state(None, p)
            filled = {s: jnp.where(jnp.isnan(v), jnp.nan, v) for s, v in g_over.items()}
            y = initial_state(p, {s: jnp.nan_to_num(v) for s, v in filled.items()}, base)
            mask = (
                jnp.stack(
                    [~jnp.isnan(filled[n]) if n in filled else jnp.asarray(False) for n in states]
                )
                if states
                else jnp.zeros((0,), bool)
            )
            return jnp.where(mask, y, base)

        y0 = jax.vmap(start)(params, given)
        if pre_groups.size:
            pp = {k: v[pre_groups] for k, v in group_params(pre_params).items()}
            pg = {
                k: v[pre_groups] for k, v in group_initial(pre_initial, np.arange(groups)).items()
            }
            y_pre = jax.vmap(start)(pp, pg)
            y_ss = each_condition(
                lambda p, y: solver.steady_state(model.vector_field, y, p), pp, y_pre
            )

            # The simulation condition's species replace the steady state's.
            def after(y, p, g_over):
                filled = {s: v for s, v in g_over.items()}
                y_new = initial_state(p, {s: jnp.nan_to_num(v) for s, v in filled.items()}, y)
                mask = jnp.stack(
                    [~jnp.isnan(filled[n]) if n in filled else jnp.asarray(False) for n in states]
                )
                return jnp.where(mask, y_new, y)

            sub = {k: v[pre_groups] for k, v in given.items()}
            sp_ = {k: v[pre_groups] for k, v in params.items()}
            y0 = y0.at[pre_groups].set(jax.vmap(after)(y_ss, sp_, sub))

        def one(p, y, t):
            return sim.simulate(model, p, t, initial=y, solver=solver).observables

        traj = each_condition(one, params, y0, ts_j)  # id -> [G, T]
        return traj, ext

    def terms(x, solver=None):
        theta = out.theta(x)
        traj, ext = run_all(theta, solver or out.solver)
        parts = []
        for o in observables:
            g, k = group_of_row[o.rows], time_index[o.rows]
            values = {name: traj[name][g, k] for name in traj}
            values.update({pid: theta[i] for i, pid in enumerate(table_ids) if pid not in values})
            values.update({name: gather(ext, index) for name, index in o.placeholders.items()})
            h = jnp.broadcast_to(o.value(values), o.rows.shape)
            sigma = jnp.broadcast_to(o.sigma(values), o.rows.shape)
            y = jnp.asarray(measured[o.rows])
            parts.append(negative_log_likelihood(y, h, sigma, o.transformation, o.distribution))
        return jnp.concatenate(parts)

    out.residual_terms = terms
    out.observables = observables
    return out


# ----------------------------------------------------------------------------- fitting


@dataclasses.dataclass
class PetabFit(Result):
    """A PEtab problem evaluated (`--evaluate`: at the nominal parameters) or fitted by
    multistart: the best estimate, its objective and every start's.

    Attributes:
        problem: the YAML file.
        names: the estimated parameters; `estimate` in linear scale.
        objective: negative log-likelihood at the estimate (all constants, no priors).
        starts_objective [S], starts_estimate: name -> [S] (linear scale), every start's
            end (S = 0 for an evaluation).
        converged [S], message: how each start ended.
    """

    problem: str
    model: str
    names: list[str]
    estimate: dict[str, float]
    objective: float
    starts_objective: np.ndarray
    starts_estimate: dict[str, np.ndarray]
    converged: np.ndarray
    message: str

    def write(self, f) -> None:
        write_root_attrs(f, format="simjax.fit", model=self.model, config=self.problem)
        f.attrs["converged"] = int(
            bool(self.converged.size and self.converged[int(np.nanargmin(self.starts_objective))])
        )
        f.attrs["message"] = self.message
        write_group(f, "estimate", self.estimate)
        f["objective"] = self.objective
        if self.starts_objective.size:
            write_group(
                f,
                "starts",
                {"objective": self.starts_objective, "converged": self.converged.astype(np.int8)},
            )
            write_group(f["starts"], "estimate", self.starts_estimate)


@checks_as_nan()
def fit_petab(
    problem: PetabProblem,
    *,
    starts: int = 1,
    seed: int = 0,
    evaluate: bool = False,
    max_steps: int = 1000,
    on_start=None,
    devices: int | None = None,
    scheduler: str | None = None,
    output: str | Path | None = None,
    resume: bool = False,
    checkpoint_every: int | None = None,
) -> PetabFit:
    """Evaluate the objective at the nominal parameters, or minimise it (plus the
    objective priors, if the table gives any) within the parameter table's bounds on the
    parameters' scales from `starts` points: the first the nominal values (where finite
    and within the bounds), the others drawn by Latin hypercube sampling within the
    bounds. Every start runs L-BFGS-B (scipy) on the objective and its gradient through
    the solver; the starts run together, one batched evaluation for all of them at each
    round (`minimize_batched`), split over the first `devices` local devices (default:
    all).

    With a Dask `scheduler` (an address, or `local:N` for a local cluster of N worker
    processes), the starts are cut into one block per worker thread; each block's
    batched L-BFGS-B runs on a worker, which loads the problem from its files
    (`fit_block`), and the blocks' ends are gathered in start order. Each start's end
    is the same however the starts were split (to rounding); `on_start(k, objective)`
    reports start k (from 1) as it ends, or as its block comes back.

    With `output`, the result is written there (its lock held meanwhile), and a fit
    keeps its starts in a checkpoint beside it, `.<name>.checkpoint` (`StartLog`: the
    ends of the finished starts, and the evaluations of the others), written every
    `checkpoint_every` rounds of batched evaluations (default: at most every 30 s of
    wall time) and after each block that comes back from a cluster, and at a stop by
    SIGINT or SIGTERM (`sim._interrupt`). `resume` continues from it: on the same
    devices, the starts end bit for bit as in an uninterrupted fit.

    Raises:
        PetabError: an estimated parameter without finite bounds.
        InputError: a bad `devices` or `scheduler`, or either asked to spread a fit of
            one start (`evaluate` included) over more than one device or a cluster; with
            `output`: a checkpoint there and `resume` False, `resume` and no checkpoint
            (a finished fit), or one of another problem (its files), number of starts,
            seed, `max_steps` or solver (the files left as they were); `resume` with
            `evaluate`, which keeps no checkpoint.
        DataError: a damaged checkpoint.
    """
    if not evaluate:
        _check_starts_memory(problem, starts)
    n_devices = spread_check(1 if evaluate else starts, devices, scheduler)
    if output is None:
        return _fit_petab(
            problem, starts, seed, evaluate, max_steps, on_start, n_devices, scheduler, None
        )
    if evaluate and resume:
        raise InputError(
            "--resume",
            "",
            "an evaluation (--evaluate) keeps no checkpoint: there is nothing to resume; run it "
            "without --resume",
        )
    output = check_output_path(output, inputs=problem_files(problem.path))
    with exclusive(output):
        ck = None
        if not evaluate:
            text = _fit_description(problem, starts, seed, max_steps)
            ck = Checkpointer(
                checkpoint_path(output),
                fingerprint(text),
                config=text,
                resume=resume,
                every=checkpoint_every,
                same="problem files, --starts and seed",
            )
        result = _fit_petab(
            problem, starts, seed, evaluate, max_steps, on_start, n_devices, scheduler, ck
        )
        result.save(output)
        if ck is not None:
            ck.finish()
    return result


def _check_starts_memory(problem: PetabProblem, starts: int) -> None:
    """Refuse, before anything is allocated, a number of starts whose arrays cannot fit
    in memory: per start at least its start point, its lane of the batch, its value and
    gradient and its end (4 p + 1 values) and its lane of the objective's terms (one per
    measurement), float64.

    Raises:
        InputError: naming --starts.
    """
    measurements = sum(o.rows.size for o in problem.observables)
    problem_text = memory_problem(
        8 * starts * (4 * len(problem.estimated) + 1 + measurements),
        f"{starts:,} starts of {len(problem.estimated)} parameters and {measurements:,} "
        "measurements",
    )
    if problem_text:
        raise InputError("--starts", "", f"{problem_text}; expected fewer starts")


def _fit_description(problem: PetabProblem, starts: int, seed: int, max_steps: int) -> str:
    """What a PEtab fit computes, as the text its checkpoint keeps (TOML, compared key by
    key on resume: `sim._unfinished.config_difference`): a digest of the problem's
    files, the starts, the seed, the steps and the solver."""
    import tomli_w

    solver = {}
    for field in dataclasses.fields(problem.solver):
        value = getattr(problem.solver, field.name)
        if value is not None:
            solver[field.name] = value if isinstance(value, (bool, int, str)) else float(value)
    return tomli_w.dumps(
        {
            "problem_files": files_digest(problem.path, problem.allow_outside),
            "starts": int(starts),
            "seed": int(seed),
            "max_steps": int(max_steps),
            "solver": solver,
        }
    )


def _fit_petab(
    problem: PetabProblem,
    starts: int,
    seed: int,
    evaluate: bool,
    max_steps: int,
    on_start,
    n_devices: int,
    scheduler,
    ck: Checkpointer | None,
) -> PetabFit:
    """`fit_petab` once its output (if any) is locked, on `n_devices` local devices,
    with its checkpoints `ck`."""
    from scipy.stats import qmc

    names = problem.estimated
    scales = [p.scale for p in problem.parameters if p.estimate]
    linear = lambda x: {
        n: float(to_linear(np.float64(v), sc)) for n, v, sc in zip(names, x, scales, strict=False)
    }  # noqa: E731
    if evaluate:
        x = problem.nominal()
        objective = _finite(
            problem, float(jax.jit(problem.objective)(x)), "at the nominal parameters"
        )
        return PetabFit(
            str(problem.path),
            problem.model.name,
            names,
            linear(x),
            objective,
            np.zeros(0),
            {n: np.zeros(0) for n in names},
            np.zeros(0, bool),
            "evaluated at the nominal parameters",
        )
    lower, upper = problem.bounds()
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
        bad = names[int(np.argmax(~(np.isfinite(lower) & np.isfinite(upper))))]
        raise PetabError(
            f"{problem.path.name}: parameter table, row {bad!r}: an estimated parameter needs "
            "finite bounds (on its scale) to be fitted"
        )
    points = (
        qmc.scale(qmc.LatinHypercube(d=len(names), seed=seed).random(max(starts, 1)), lower, upper)
        if names
        else np.zeros((max(starts, 1), 0))
    )
    nominal = problem.nominal()
    if np.all(np.isfinite(nominal)) and np.all((nominal >= lower) & (nominal <= upper)):
        points[0] = nominal
    log = StartLog(len(points), len(names), ck)
    if scheduler is None:
        report = None if on_start is None else (lambda k, f: on_start(k + 1, f))
        ends, _, success = minimize_batched(
            problem.value_and_grad(with_priors=True),
            points,
            lower,
            upper,
            max_steps=max_steps,
            on_done=report,
            devices=n_devices,
            log=log,
        )
    else:
        with dask_client(scheduler) as client:
            ends, success = _fit_blocks(problem, points, max_steps, client, on_start, log)
    log.safe_point()  # (every start has ended: a stop from here on keeps them all)
    objectives = np.asarray(_batched(problem.objective)(jnp.asarray(ends)), dtype=float)
    objectives = np.where(np.isfinite(objectives), objectives, np.inf)
    best = int(np.argmin(objectives))
    _finite(
        problem, float(objectives[best]), f"at the end of every one of the {len(points)} start(s)"
    )
    estimates = {n: np.array([linear(x)[n] for x in ends]) for n in names}
    reached = int(np.sum(objectives <= objectives[best] + SAME_OPTIMUM))
    message = (
        f"best of {len(points)} start(s) ({reached} within {SAME_OPTIMUM} of it): "
        f"{'converged' if success[best] else 'stopped before convergence'}"
    )
    return PetabFit(
        str(problem.path),
        problem.model.name,
        names,
        linear(ends[best]),
        float(objectives[best]),
        objectives,
        estimates,
        np.asarray(success),
        message,
    )


def _finite(problem: PetabProblem, objective: float, where: str) -> float:
    """The objective, or a `sim.SimulationError` when it is not finite: no file then
    claims a result that is not one."""
    if not math.isfinite(objective):
        raise sim.SimulationError(
            f"{problem.path.name}: the objective is not finite {where} ({objective}): a simulation "
            "failed, a noise formula "
            "is not positive, or a prediction is one its noise model cannot take (a log of a value "
            "<= 0); nothing written"
        )
    return objective


# Two starts whose objectives differ by less than this reached the same optimum (a
# difference in negative log-likelihood far below any statistical threshold).
SAME_OPTIMUM = 0.1


def _fit_blocks(
    problem: PetabProblem, points: np.ndarray, max_steps: int, client, on_start, log: StartLog
) -> tuple[np.ndarray, np.ndarray]:
    """(ends [S, p], success [S]) of `fit_petab`'s starts run block by block on the Dask
    cluster of `client` (`fit_block`), in start order, each block checkpointed as it
    comes back (`log`). A resumed fit keeps the starts its checkpoint has finished up
    to the first unfinished one and runs the others in the blocks the whole fit cut
    (`inference._multistart.blocks`)."""
    path = str(Path(problem.path).resolve())
    digest = files_digest(path, problem.allow_outside)
    first = log.finished_prefix()
    for j in range(first if on_start is not None else 0):
        on_start(j + 1, float(log.values[j]))
    parts = blocks(first, len(points), block_size(len(points), client))
    for k, (block_ends, values, block_success) in in_order(
        client,
        fit_block,
        [
            (
                path,
                digest,
                problem.solver,
                points[b.start : b.stop],
                max_steps,
                problem.allow_outside,
            )
            for b in parts
        ],
    ):
        for j, end, value, ok in zip(parts[k], block_ends, values, block_success, strict=False):
            log.finish(j, end, float(value), bool(ok))
            if on_start is not None:
                on_start(j + 1, float(value))
        log.block_done()
    return log.ends.copy(), log.success.copy()


def files_digest(path: str | Path, allow_outside: bool = False) -> str:
    """A digest of a PEtab problem's files (the YAML file, its tables and its model),
    each named file inside the YAML file's folder unless `allow_outside` (as
    `load_petab`: a file outside is refused before it is read).

    Raises:
        PetabError: a file outside the folder.
    """
    import hashlib

    path = Path(path)
    digest = hashlib.sha256()
    digest.update(path.name.encode())
    digest.update(path.read_bytes() if path.is_file() else b"")
    for _, _, file in confined(path, read_spec(path), allow_outside):
        digest.update(str(file.name).encode())
        digest.update(file.read_bytes() if file.is_file() else b"")
    return digest.hexdigest()


@functools.lru_cache(maxsize=4)
def _worker_problem(
    path: str, digest: str, solver: OdeSolver, allow_outside: bool
) -> tuple[PetabProblem, Callable]:
    """A problem loaded on a worker, with the one function of its objective (with the
    priors) and gradient whose batched form the worker's blocks share (`_batched`)."""
    sim.configure_jax()  # (the worker's JAX as the command's: float64, the cache, XLA's options)
    problem = load_petab(path, solver, allow_outside=allow_outside)
    return problem, problem.value_and_grad(with_priors=True)


def fit_block(
    path: str,
    digest: str,
    solver: OdeSolver,
    points: np.ndarray,
    max_steps: int,
    allow_outside: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One block of a multistart fit, run on a Dask worker: the problem loaded from its
    YAML file (once per worker, version of its files and solver), then L-BFGS-B from
    every row of `points` together, on the worker's local devices.

    Returns:
        ends [b, p], values [b] (with the priors), success [b], as `minimize_batched`.

    Raises:
        PetabError: the problem's files on the worker are not those the fit was started
            with (`digest`: `files_digest`), lie outside its folder (unless
            `allow_outside`, as the fit's problem was loaded), or no longer load.
    """
    if files_digest(path, allow_outside) != digest:
        raise PetabError(
            f"{path}: the problem's files on the Dask worker differ from those the fit was started "
            "with (every worker must see the same files)"
        )
    problem, value_and_grad = _worker_problem(path, digest, solver, allow_outside)
    lower, upper = problem.bounds()
    return minimize_batched(
        value_and_grad, points, lower, upper, max_steps=max_steps, devices=len(jax.devices())
    )


@functools.lru_cache(maxsize=8)
def _batched(fn: Callable) -> Callable:
    """`fn` (a value and gradient, an objective) vmapped and compiled, once per
    function (and batch shape)."""
    return jax.jit(jax.vmap(fn))


def run_batched(
    value_and_grad,
    tasks,
    dim: int,
    on_done=None,
    devices: int = 1,
    between: Callable[[int], None] | None = None,
) -> list:
    """Run every task, each in its own thread, with its evaluations batched: a task is a
    function of `ask`, and `ask(x)` gives the value and gradient of `value_and_grad` (a
    JAX function of one point of size `dim`) at x. The points that the tasks wait for
    are evaluated together, by one `jax.vmap`ed compiled call, and handed back (the
    batch keeps its size, one lane per task: tasks that are done repeat their last
    point; padded to a multiple of `devices` and split over the first `devices` local
    devices). A point whose value or gradient is not finite is given a huge value and a
    zero gradient, so that a line search steps back. `on_done(k, result)` reports task k
    as it ends; `between(rounds)` is called between two rounds, with the rounds
    evaluated so far, when every task has taken its answers and waits for the next (or
    has ended): the place to checkpoint, and a safe point (without it, a stop there
    keeps nothing).

    Returns:
        What each task returned; an exception in a task is raised here.
    """
    import threading

    n = len(tasks)
    batch = _batched(value_and_grad)
    lock = threading.Condition()
    asked: list = [None] * n  # the point task k waits for
    answer: list = [None] * n
    last = np.full((padded(n, devices), dim), np.nan)  # (lanes beyond n: padding)
    done = [False] * n
    outcome: list = [None] * n
    stopped = False  # (set when the rounds end: a task still waiting is stopped, not left)

    def ask(k, x):
        with lock:
            asked[k] = np.array(x, dtype=float)
            lock.notify_all()
            while answer[k] is None and not stopped:
                lock.wait()
            if stopped:
                raise _Stopped
            f, g = answer[k]
            answer[k] = None
        return f, g

    def work(k):
        try:
            outcome[k] = tasks[k](lambda x: ask(k, x))
        except BaseException as e:  # (handed to the caller's thread)
            outcome[k] = e
        with lock:
            done[k] = True
            lock.notify_all()

    threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(n)]
    for thread in threads:
        thread.start()
    try:
        reported = [False] * n
        rounds = 0
        while True:
            with lock:
                while not all(done[k] or asked[k] is not None for k in range(n)):
                    lock.wait()
                waiting = [k for k in range(n) if asked[k] is not None]
                for k in waiting:
                    last[k] = asked[k]
                finished = [k for k in range(n) if done[k] and not reported[k]]
            for k in finished:
                reported[k] = True
                if isinstance(outcome[k], BaseException):
                    raise outcome[k]
                if on_done is not None:
                    on_done(k, outcome[k])
            if not waiting:
                break
            if between is None:
                safe_point()  # (an interrupt stops the work between rounds; nothing is written)
            else:
                between(rounds)
            unset = np.isnan(last).any(axis=1)  # (a lane that never asked: any asked point)
            last[unset] = last[waiting[0]]
            values, grads = batch(spread(jnp.asarray(last), devices))
            values, grads = np.asarray(values, dtype=float), np.asarray(grads, dtype=float)
            rounds += 1
            with lock:
                for k in waiting:
                    ok = np.isfinite(values[k]) and np.all(np.isfinite(grads[k]))
                    answer[k] = (
                        (float(values[k]), grads[k]) if ok else (1e300, np.zeros_like(grads[k]))
                    )
                    asked[k] = None
                lock.notify_all()
    finally:
        # (an exception, an interrupt or a stop at a checkpoint ends the rounds early:
        # every task still waiting is stopped and joined, none left blocked behind)
        with lock:
            stopped = True
            lock.notify_all()
        for thread in threads:
            thread.join()
    return outcome


class _Stopped(BaseException):
    """Raised in a task's `ask` when `run_batched` ends before the task (not an error of
    the task's own, so a BaseException that the optimiser does not catch)."""


def _lbfgsb(
    ask,
    x0,
    lower,
    upper,
    max_steps: int,
    fixed: dict[int, float] | None = None,
    trust: float | None = None,
):
    """L-BFGS-B within [lower, upper] from x0, with the coordinates in `fixed` held at
    their values (the optimiser sees the others only). With `trust`, each run is
    confined to a box of that half-width around its start, re-centred and run again
    while the optimum found lies on the box's face (L-BFGS-B's first steps, scaled by
    the gradient alone, can otherwise leap to a far bound where the model fails)."""
    from scipy.optimize import minimize

    fixed = fixed or {}
    free = np.array([i for i in range(len(x0)) if i not in fixed], dtype=int)
    base = np.array(x0, dtype=float)
    for i, v in fixed.items():
        base[i] = v

    def full(z):
        x = base.copy()
        x[free] = z
        return x

    def fun(z):
        f, g = ask(full(z))
        return f, g[free]

    if free.size == 0:
        f, _ = ask(base)
        return base, f, bool(f < 1e300)
    z, lo, hi = (
        base[free],
        np.asarray(lower, dtype=float)[free],
        np.asarray(upper, dtype=float)[free],
    )
    steps = max_steps
    for _ in range(50 if trust else 1):
        box_lo, box_hi = (
            (np.maximum(lo, z - trust), np.minimum(hi, z + trust)) if trust else (lo, hi)
        )
        result = minimize(
            fun,
            z,
            jac=True,
            method="L-BFGS-B",
            bounds=list(zip(box_lo, box_hi, strict=False)),
            options={"maxiter": steps},
        )
        moved = result.x
        steps -= result.nit
        on_face = trust and (
            np.any((moved <= box_lo + 1e-9) & (box_lo > lo))
            or np.any((moved >= box_hi - 1e-9) & (box_hi < hi))
        )
        z = moved
        if not on_face or steps <= 0 or not result.fun < 1e300:
            break
    return full(z), float(result.fun), bool(result.success) and result.fun < 1e300


def minimize_batched(
    value_and_grad,
    points,
    lower,
    upper,
    *,
    max_steps: int = 1000,
    on_done=None,
    devices: int = 1,
    log: StartLog | None = None,
):
    """Minimise a function, given as `value_and_grad` (a JAX function of one point giving
    the value and the gradient), from every row of `points` within the box [lower,
    upper] by L-BFGS-B (scipy), all starts at once (`run_batched`, on `devices` local
    devices).

    With `log` (a `StartLog` of these starts, perhaps read from a checkpoint), the
    starts it holds as finished are not run again, the others replay their stored
    evaluations, and it is checkpointed between rounds (`StartLog.between`). The batch
    keeps one lane per start, finished or not, so it keeps its size and its compiled
    program; a lane computes from its own point only, so a resumed start's evaluations
    are those of the uninterrupted fit, bit for bit (on the same devices).

    Returns:
        ends [S, p], values [S], success [S] (scipy's convergence flag with a finite
        value).
    """
    points = np.asarray(points, dtype=float)
    log = StartLog(len(points), points.shape[1]) if log is None else log

    def task(k: int) -> Callable:
        if log.done[k]:
            return lambda ask: (log.ends[k].copy(), float(log.values[k]), bool(log.success[k]))
        return lambda ask: _lbfgsb(log.asker(k, ask), points[k], lower, upper, max_steps)

    def done(k: int, out) -> None:
        log.finish(k, *out)
        if on_done is not None:
            on_done(k, out[1])

    outcome = run_batched(
        value_and_grad,
        [task(k) for k in range(len(points))],
        points.shape[1],
        done,
        devices,
        between=log.between,
    )
    ends = np.stack([o[0] for o in outcome]) if outcome else np.zeros((0, points.shape[1]))
    return ends, np.array([o[1] for o in outcome]), np.array([o[2] for o in outcome])


class StartLog:
    """The starts of a PEtab multistart fit as its checkpoint keeps them: each finished
    start's end (point, final value with the priors, success flag) and, for each start
    still running, every evaluation it has been given so far (point, value, gradient),
    in order; with `ck`, read from its checkpoint and written to it (`between`,
    `block_done`, `safe_point`).

    scipy's L-BFGS-B keeps its state (the limited-memory pairs, the line search) where
    it cannot be stored, so a running start is resumed by replay: L-BFGS-B runs again
    from the start's point and is handed the stored value and gradient for each point
    it asks for, which are the points it asked for before (the same floating-point
    operations on the same inputs), until the stored evaluations run out; then it asks
    the batched evaluation as any start does. A checkpoint is written between two
    rounds, when every running start has taken every answer it was given and waits
    for the next, so a resumed start takes the steps of the uninterrupted one. Should a
    replayed point differ from the stored one (another scipy), the start goes on from
    there with live evaluations.

    Attributes:
        done [S], ends [S, p], values [S], success [S]: the finished starts' ends.
        log: per start, its evaluations (x, f, g) since it began (none once finished).
        rounds: rounds of batched evaluations the starts have had (the checkpoint's
            iteration; 0 for blocks run on a cluster).
    """

    def __init__(self, count: int, dim: int, ck: Checkpointer | None = None):
        self.count, self.dim, self.ck = count, dim, ck
        self.done = np.zeros(count, dtype=bool)
        self.ends = np.full((count, dim), np.nan)
        self.values = np.full(count, np.nan)
        self.success = np.zeros(count, dtype=bool)
        self.log: list[list[tuple[np.ndarray, float, np.ndarray]]] = [[] for _ in range(count)]
        self.rounds = 0
        self._first_round = 0
        restored = None if ck is None else ck.restore(0, sized=self._template)
        if restored is not None:
            self._restore(*restored[:2])

    def _template(self, shapes: list[tuple[int, ...]]) -> tuple:
        evaluations = shapes[1][0] if len(shapes) > 1 and len(shapes[1]) == 1 else 0
        e, s, p = evaluations, self.count, self.dim
        return (
            np.zeros((e, p)),
            np.zeros(e),
            np.zeros((e, p)),
            np.zeros(s, np.int64),
            np.zeros(s, bool),
            np.zeros((s, p)),
            np.zeros(s),
            np.zeros(s, bool),
        )

    def state(self) -> tuple:
        """The arrays a checkpoint stores: the running starts' evaluations (x [E, p],
        f [E], g [E, p], counts [S]) and the finished starts' ends (done, ends, values,
        success)."""
        entries = [entry for k in range(self.count) for entry in self.log[k]]
        x = np.array([e[0] for e in entries]).reshape(len(entries), self.dim)
        g = np.array([e[2] for e in entries]).reshape(len(entries), self.dim)
        f = np.array([e[1] for e in entries], dtype=float)
        counts = np.array([len(entries) for entries in self.log], dtype=np.int64)
        return (
            x,
            f,
            g,
            counts,
            self.done.copy(),
            self.ends.copy(),
            self.values.copy(),
            self.success.copy(),
        )

    def _restore(self, rounds: int, state: tuple) -> None:
        x, f, g, counts, done, ends, values, success = (np.asarray(a) for a in state)
        if np.any(counts < 0) or int(counts.sum()) != len(f) or np.any(counts[done] != 0):
            raise DataError(
                self.ck.path,
                "state",
                "holds evaluations that do not add up to its starts'; the checkpoint is damaged: "
                "delete it to start over",
            )
        self.done, self.ends, self.values, self.success = (
            done.copy(),
            ends.copy(),
            values.copy(),
            success.copy(),
        )
        offsets = np.concatenate([[0], np.cumsum(counts)])
        self.log = [
            [(x[i].copy(), float(f[i]), g[i].copy()) for i in range(offsets[k], offsets[k + 1])]
            for k in range(self.count)
        ]
        self.rounds = self._first_round = int(rounds)

    def finished_prefix(self) -> int:
        """The number of finished starts before the first unfinished one."""
        return int(np.argmin(self.done)) if not self.done.all() else self.count

    def finish(self, k: int, end, value: float, success: bool) -> None:
        """Start k has ended: its end is kept, its evaluations are no longer needed."""
        self.done[k], self.ends[k], self.values[k], self.success[k] = (
            True,
            np.asarray(end, dtype=float),
            value,
            success,
        )
        self.log[k] = []

    def asker(self, k: int, ask: Callable) -> Callable:
        """`ask` for start k: the stored evaluations first (replayed), then live ones,
        each logged."""
        log = self.log[k]
        replayed = 0

        def ask_k(x):
            nonlocal replayed
            x = np.array(x, dtype=float)
            if replayed < len(log):
                if np.array_equal(log[replayed][0], x):
                    replayed += 1
                    return log[replayed - 1][1], log[replayed - 1][2].copy()
                del log[replayed:]  # (another path than the stored one: live from here)
            f, g = ask(x)
            log.append((x, float(f), np.array(g, dtype=float)))
            replayed = len(log)
            return f, g

        return ask_k

    def _save(self) -> Path | None:
        return None if self.ck is None else self.ck.save(0, self.rounds, self.state(), [])

    def between(self, rounds: int) -> None:
        """Between two rounds of batched evaluations (`rounds` of them in this run): a
        checkpoint when one is due, then a safe point."""
        self.rounds = self._first_round + rounds
        if self.ck is not None and rounds and self.ck.due(self.rounds):
            self._save()
        self.safe_point()

    def block_done(self) -> None:
        """A block of starts came back from a cluster: a checkpoint, then a safe point."""
        self._save()
        self.safe_point()

    def safe_point(self) -> None:
        """Stop here if SIGINT or SIGTERM asked to, with a checkpoint of the starts as
        they are."""
        safe_point(self._save)


def problem_files(path: str | Path) -> list[Path]:
    """The YAML file of a PEtab problem and every table and model it names (inputs an
    output must not overwrite); none is opened."""
    import yaml

    path = Path(path)
    try:
        spec = yaml.safe_load(path.read_text())
    except Exception:  # (an unreadable problem is reported when it is loaded)
        return [path]
    return [
        path,
        *(file for _, _, file in named_files(path, spec if isinstance(spec, dict) else {})),
    ]
