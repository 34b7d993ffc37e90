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
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import sim
from physics.ode import SbmlError, sbml_model
from sim._errors import InputError
from sim._store import Result, write_group, write_root_attrs
from solvers import OdeSolver

SCALES = ("lin", "log", "log10")
DISTRIBUTIONS = ("normal", "laplace")
TRANSFORMATIONS = ("lin", "log", "log10")


class PetabError(InputError):
    """A PEtab problem that cannot be read or is not supported; the message names the
    file, the table, the row and the column (one line; the command line exits with 2)."""

    def __init__(self, message: str):
        source, _, rest = message.partition(": ")
        super().__init__(source, "", rest)


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


def to_linear(x, scale: str):
    """A value on a PEtab parameter scale in linear scale."""
    return x if scale == "lin" else (jnp.exp(x) if scale == "log" else jnp.power(10.0, x))


def to_scale(x, scale: str):
    """A linear value on a PEtab parameter scale."""
    return x if scale == "lin" else (jnp.log(x) if scale == "log" else jnp.log10(x))


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or (isinstance(value, str) and not value.strip())


class _Sources:
    """Where the values of the objective come from: the parameter table's values (linear
    scale) followed by the problem's numeric constants, one index each."""

    def __init__(self, parameters: list[PetabParameter]):
        self.index = {p.id: i for i, p in enumerate(parameters)}
        self.constants: list[float] = []

    def of(self, value, where: str) -> int:
        """The index of a number or a parameter id."""
        if isinstance(value, str):
            text = value.strip()
            try:
                value = float(text)
            except ValueError:
                if text not in self.index:
                    raise PetabError(f"{where}: {text!r} is neither a number nor a parameter of the parameter table") from None
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
    """

    def __init__(self, path: Path, model, parameters: list[PetabParameter], solver: OdeSolver):
        self.path = path
        self.model = model
        self.parameters = parameters
        self.estimated = [p.id for p in parameters if p.estimate]
        self.solver = solver

    def nominal(self) -> np.ndarray:
        """The nominal values of the estimated parameters on their scales."""
        return np.array([float(to_scale(np.float64(p.nominal), p.scale)) for p in self.parameters if p.estimate])

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of the estimated parameters on their scales."""
        est = [p for p in self.parameters if p.estimate]
        return (np.array([float(to_scale(np.float64(p.lower), p.scale)) for p in est]),
                np.array([float(to_scale(np.float64(p.upper), p.scale)) for p in est]))

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

    def objective(self, x) -> jax.Array:
        """The negative log-likelihood (all normalising constants, priors excluded)."""
        return jnp.sum(self.residual_terms(x))

    # (set by `load_petab`)
    residual_terms: Callable[[Any], jax.Array]
    simulations: list[tuple[str, str]]


def load_petab(path: str | Path, solver: OdeSolver | None = None) -> PetabProblem:
    """Read a PEtab problem (format version 1) from its YAML file.

    Raises:
        PetabError: the problem cannot be read or uses what is not supported (one line
            naming the table, the row and the column).
    """
    import petab.v1 as petab
    import sympy as sp
    from petab.v1.math import sympify_petab

    path = Path(path)
    if not path.is_file():
        raise PetabError(f"{path}: no such file; expected a PEtab problem (YAML)")
    try:
        with warnings.catch_warnings():  # (the library's own deprecation warnings)
            warnings.simplefilter("ignore")
            problem = petab.Problem.from_yaml(str(path))
            spec = petab.yaml.load_yaml(str(path))
    except Exception as e:  # (the library reports a broken table in many ways)
        raise PetabError(f"{path}: not a readable PEtab problem: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    if str(spec.get("format_version", "1")).split(".")[0] != "1":
        raise PetabError(f"{path}: format_version {spec.get('format_version')!r}: only PEtab format version 1 is supported")
    sbml_files = spec["problems"][0].get("sbml_files") or []
    if len(sbml_files) != 1:
        raise PetabError(f"{path}: problems.sbml_files: expected one SBML file, got {len(sbml_files)}")
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
            raise PetabError(f"{where}, column parameterScale: expected one of {', '.join(SCALES)}, got {scale!r}")
        values = {}
        for column in ("lowerBound", "upperBound", "nominalValue"):
            try:
                values[column] = float(row.get(column, math.nan))
            except (TypeError, ValueError):
                raise PetabError(f"{where}, column {column}: expected a number, got {row.get(column)!r}") from None
        estimate = bool(int(row.get("estimate", 1)))
        if not math.isfinite(values["nominalValue"]) and not estimate:
            raise PetabError(f"{where}, column nominalValue: a fixed parameter needs a finite nominal value")
        parameters.append(PetabParameter(str(pid), scale, values["lowerBound"], values["upperBound"], values["nominalValue"], estimate))
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
        if column not in model_params and column not in states and column not in model.species_compartments:
            raise PetabError(f"{path.name}: condition table, column {column!r}: no parameter, compartment or species of the model {model.name!r}")

    def condition(cid: str, role: str, row_where: str) -> tuple[dict[str, int], dict[str, int]]:
        """(model parameter -> source, species -> source) of one condition."""
        if cid not in conditions.index:
            raise PetabError(f"{row_where}, column {role}: no condition {cid!r} in the condition table")
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
    has_pre = "preequilibrationConditionId" in m.columns
    keys: list[tuple[str, str]] = []
    group_of_row = np.zeros(len(m), dtype=int)
    times = np.zeros(len(m))
    measured = np.zeros(len(m))
    for i, row in m.iterrows():
        where = f"{path.name}: measurement table, row {i + 1}"
        pre = row["preequilibrationConditionId"] if has_pre and not _missing(row["preequilibrationConditionId"]) else ""
        key = (str(pre), str(row["simulationConditionId"]))
        if key not in keys:
            keys.append(key)
        group_of_row[i] = keys.index(key)
        for column, target in (("time", times), ("measurement", measured)):
            try:
                target[i] = float(row[column])
            except (TypeError, ValueError):
                raise PetabError(f"{where}, column {column}: expected a number, got {row[column]!r}") from None
            if not math.isfinite(target[i]):
                what = "steady-state measurements (time inf) are not supported" if column == "time" else "expected a finite number"
                raise PetabError(f"{where}, column {column}: {what}, got {row[column]!r}")
        if times[i] < 0:
            raise PetabError(f"{where}, column time: expected a time >= 0 (simulations start at 0), got {times[i]!r}")
        if str(row["observableId"]) not in problem.observable_df.index:
            raise PetabError(f"{where}, column observableId: no observable {row['observableId']!r} in the observable table")

    groups = len(keys)
    save_times = [np.unique(times[group_of_row == g]) for g in range(groups)]
    length = max(2, max(len(t) + (t[0] > 0) for t in save_times))
    ts = np.zeros((groups, length))
    time_index = np.zeros(len(m), dtype=int)
    for g, t in enumerate(save_times):
        t = t if t[0] == 0 else np.concatenate([[0.0], t])
        ts[g, : len(t)] = t
        ts[g, len(t):] = t[-1]  # (padding: the last time again)
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
        transformation = "lin" if _missing(obs_df.loc[oid].get("observableTransformation")) else transformation
        distribution = "normal" if _missing(obs_df.loc[oid].get("noiseDistribution")) else str(obs_df.loc[oid]["noiseDistribution"])
        if transformation not in TRANSFORMATIONS:
            raise PetabError(f"{where}, column observableTransformation: expected one of {', '.join(TRANSFORMATIONS)}, got {transformation!r}")
        if distribution not in DISTRIBUTIONS:
            raise PetabError(f"{where}, column noiseDistribution: expected one of {', '.join(DISTRIBUTIONS)}, got {distribution!r}")
        fns = {}
        placeholders: dict[str, np.ndarray] = {}
        for column, prefix, table_column in (("observableFormula", "observableParameter", "observableParameters"), ("noiseFormula", "noiseParameter", "noiseParameters")):
            text = obs_df.loc[oid][column]
            try:
                expr = sympify_petab(text) if isinstance(text, str) else sp.Float(float(text))
            except Exception as e:
                raise PetabError(f"{where}, column {column}: cannot be read: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
            fn, names = _compile(expr, f"{where}, column {column}")
            fns[column] = fn
            wanted = sorted(n for n in names if n.startswith(prefix) and n.endswith(f"_{oid}"))
            for name in names:
                if name not in model_ids and name not in sources.index and name not in wanted:
                    raise PetabError(f"{where}, column {column}: {name!r} is no id of the model, parameter of the parameter table or {prefix} of {oid!r}")
            for name in wanted:
                placeholders[name] = np.zeros(rows.size, dtype=int)
            for k, i in enumerate(rows):
                cell = m.loc[i, table_column] if table_column in m.columns else math.nan
                values = [] if _missing(cell) else str(cell).split(";")
                if len(values) != len(wanted):
                    raise PetabError(
                        f"{path.name}: measurement table, row {i + 1}, column {table_column}: observable {oid!r} needs {len(wanted)} value(s) ({', '.join(wanted) or 'none'}), got {len(values)}"
                    )
                for name, value in zip(wanted, values):
                    cell_where = f"{path.name}: measurement table, row {i + 1}, column {table_column}"
                    placeholders[name][k] = sources.of(value, cell_where)
                    if prefix == "noiseParameter" and placeholders[name][k] >= len(sources.index) and not sources.constants[placeholders[name][k] - len(sources.index)] > 0:
                        raise PetabError(f"{cell_where}: a noise parameter must be positive, got {value!r}")
        observables.append(_Observable(str(oid), fns["observableFormula"], fns["noiseFormula"], transformation, distribution, rows, placeholders))
        if transformation != "lin" and np.any(measured[rows] <= 0):
            i = rows[np.argmax(measured[rows] <= 0)]
            raise PetabError(f"{path.name}: measurement table, row {i + 1}, column measurement: a {transformation}-transformed observable needs a positive measurement, got {measured[i]!r}")

    solver = solver or OdeSolver(method="kvaerno5", rtol=1e-8, atol=1e-10, max_steps=100_000)
    out = PetabProblem(path, model, parameters, solver)
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

    def run_all(theta):
        ext = jnp.concatenate([theta, jnp.asarray(constants)])

        def group_params(index):  # [G, n_params] -> dict of [G]
            return {pid: ext[jnp.asarray(index[:, j])] for pid, j in param_position.items()}

        def group_initial(initial, g_rows):  # species -> [G] (NaN where not given)
            return {sid: jnp.where(jnp.asarray(idx[g_rows]) >= 0, ext[jnp.asarray(np.maximum(idx[g_rows], 0))], jnp.nan) for sid, idx in initial.items()}

        params = group_params(sim_params)
        given = group_initial(sim_initial, np.arange(groups))

        def start(p, g_over):
            # (a species a condition leaves out (NaN) keeps the model's value)
            base = model.initial_state(None, p)
            filled = {s: jnp.where(jnp.isnan(v), jnp.nan, v) for s, v in g_over.items()}
            y = initial_state(p, {s: jnp.nan_to_num(v) for s, v in filled.items()}, base)
            mask = jnp.stack([~jnp.isnan(filled[n]) if n in filled else jnp.asarray(False) for n in states]) if states else jnp.zeros((0,), bool)
            return jnp.where(mask, y, base)

        y0 = jax.vmap(start)(params, given)
        if pre_groups.size:
            pp = {k: v[pre_groups] for k, v in group_params(pre_params).items()}
            pg = {k: v[pre_groups] for k, v in group_initial(pre_initial, np.arange(groups)).items()}
            y_pre = jax.vmap(start)(pp, pg)
            y_ss = jax.vmap(lambda p, y: _steady_state(model, solver, p, y))(pp, y_pre)

            # The simulation condition's species replace the steady state's.
            def after(y, p, g_over):
                filled = {s: v for s, v in g_over.items()}
                y_new = initial_state(p, {s: jnp.nan_to_num(v) for s, v in filled.items()}, y)
                mask = jnp.stack([~jnp.isnan(filled[n]) if n in filled else jnp.asarray(False) for n in states])
                return jnp.where(mask, y_new, y)

            sub = {k: v[pre_groups] for k, v in given.items()}
            sp_ = {k: v[pre_groups] for k, v in params.items()}
            y0 = y0.at[pre_groups].set(jax.vmap(after)(y_ss, sp_, sub))

        def one(p, y, t):
            return sim.simulate(model, p, t, initial=y, solver=solver).observables

        traj = jax.vmap(one)(params, y0, ts_j)  # id -> [G, T]
        return traj, ext

    def terms(x):
        theta = out.theta(x)
        traj, ext = run_all(theta)
        parts = []
        for o in observables:
            g, k = group_of_row[o.rows], time_index[o.rows]
            values = {name: traj[name][g, k] for name in traj}
            values.update({pid: theta[i] for i, pid in enumerate(table_ids) if pid not in values})
            values.update({name: gather(ext, index) for name, index in o.placeholders.items()})
            h = jnp.broadcast_to(o.value(values), o.rows.shape)
            sigma = jnp.broadcast_to(o.sigma(values), o.rows.shape)
            y = jnp.asarray(measured[o.rows])
            parts.append(_negative_log_likelihood(y, h, sigma, o.transformation, o.distribution))
        return jnp.concatenate(parts)

    out.residual_terms = terms
    out.observables = observables
    return out


def _negative_log_likelihood(y, h, sigma, transformation: str, distribution: str):
    """-log p(y | h, sigma) per measurement, PEtab's noise models: the transformation
    applies to data and model value, and the density is of the untransformed data (the
    Jacobian of the transformation included)."""
    if transformation == "lin":
        ty, th, jac = y, h, 0.0
    elif transformation == "log":
        ty, th, jac = jnp.log(y), jnp.log(h), jnp.log(y)
    else:
        ty, th, jac = jnp.log10(y), jnp.log10(h), jnp.log(y * math.log(10.0))
    if distribution == "normal":
        return 0.5 * jnp.log(2 * math.pi * sigma**2) + 0.5 * ((ty - th) / sigma) ** 2 + jac
    return jnp.log(2 * sigma) + jnp.abs(ty - th) / sigma + jac


def _steady_state(model, solver: OdeSolver, params, y0):
    """The steady state reached from y0 (preequilibration): integrated until the
    time derivative is negligible (diffrax's steady-state event), differentiated by the
    implicit function theorem."""
    import diffrax

    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(model.vector_field),
        solver.diffrax_solver(),
        t0=0.0,
        t1=jnp.inf,
        dt0=None,
        y0=y0,
        args=params,
        saveat=diffrax.SaveAt(t1=True),
        stepsize_controller=diffrax.PIDController(rtol=solver.rtol, atol=solver.atol),
        event=diffrax.Event(diffrax.steady_state_event()),
        adjoint=diffrax.ImplicitAdjoint(),
        max_steps=solver.max_steps,
        throw=False,
    )
    # (the event ends the solve; running out of steps first is a failure: NaN)
    return jnp.where(sol.result == diffrax.RESULTS.event_occurred, sol.ys[-1], jnp.nan)


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
        write_root_attrs(f, format="fit", model=self.model, config=self.problem)
        f.attrs["converged"] = int(bool(self.converged.size and self.converged[int(np.nanargmin(self.starts_objective))]))
        f.attrs["message"] = self.message
        write_group(f, "estimate", self.estimate)
        f["objective"] = self.objective
        if self.starts_objective.size:
            write_group(f, "starts", {"objective": self.starts_objective, "converged": self.converged.astype(np.int8)})
            write_group(f["starts"], "estimate", self.starts_estimate)


def fit_petab(problem: PetabProblem, *, starts: int = 1, seed: int = 0, evaluate: bool = False, max_steps: int = 1000, on_start=None) -> PetabFit:
    """Evaluate the objective at the nominal parameters, or minimise it within the
    parameter table's bounds (on the parameters' scales) from `starts` points: the first
    the nominal values (where finite and within the bounds), the others drawn by Latin
    hypercube sampling within the bounds. Each start runs L-BFGS-B (scipy) on the
    objective and its gradient through the solver."""
    from scipy.optimize import minimize
    from scipy.stats import qmc

    names = problem.estimated
    linear = lambda x: {n: float(to_linear(np.float64(v), problem.parameters[[q.id for q in problem.parameters].index(n)].scale)) for n, v in zip(names, x)}  # noqa: E731
    value = jax.jit(problem.objective)
    if evaluate:
        x = problem.nominal()
        return PetabFit(str(problem.path), problem.model.name, names, linear(x), float(value(x)), np.zeros(0), {n: np.zeros(0) for n in names}, np.zeros(0, bool), "evaluated at the nominal parameters")
    lower, upper = problem.bounds()
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
        bad = names[int(np.argmax(~(np.isfinite(lower) & np.isfinite(upper))))]
        raise PetabError(f"{problem.path.name}: parameter table, row {bad!r}: an estimated parameter needs finite bounds (on its scale) to be fitted")
    points = qmc.scale(qmc.LatinHypercube(d=len(names), seed=seed).random(max(starts, 1)), lower, upper)
    nominal = problem.nominal()
    if np.all(np.isfinite(nominal)) and np.all((nominal >= lower) & (nominal <= upper)):
        points[0] = nominal
    grad = jax.jit(jax.value_and_grad(problem.objective))

    def fun(x):
        f, g = grad(jnp.asarray(x))
        f, g = float(f), np.asarray(g, dtype=float)
        if not np.isfinite(f) or not np.all(np.isfinite(g)):
            return 1e300, np.zeros_like(g)  # (a failed simulation: the optimiser steps back)
        return f, g

    objectives, ends, converged = [], [], []
    for k, x0 in enumerate(points):
        result = minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=list(zip(lower, upper)), options={"maxiter": max_steps})
        f = float(value(jnp.asarray(result.x)))
        objectives.append(f if np.isfinite(f) else np.inf)
        ends.append(result.x)
        converged.append(bool(result.success))
        if on_start is not None:
            on_start(k + 1, f)
    objectives = np.asarray(objectives)
    best = int(np.argmin(objectives))
    estimates = {n: np.array([linear(x)[n] for x in ends]) for n in names}
    message = f"best of {len(points)} start(s): {'converged' if converged[best] else 'stopped before convergence'}"
    return PetabFit(str(problem.path), problem.model.name, names, linear(ends[best]), float(objectives[best]), objectives, estimates, np.asarray(converged), message)


def problem_files(path: str | Path) -> list[Path]:
    """The YAML file of a PEtab problem and every table and model it names (inputs an
    output must not overwrite)."""
    import yaml

    path = Path(path)
    files = [path]
    try:
        spec = yaml.safe_load(path.read_text())
        names = [spec.get("parameter_file")] if isinstance(spec.get("parameter_file"), str) else list(spec.get("parameter_file") or [])
        for part in spec.get("problems") or []:
            for key in ("sbml_files", "condition_files", "measurement_files", "observable_files", "visualization_files"):
                names.extend(part.get(key) or [])
    except Exception:  # (an unreadable problem is reported when it is loaded)
        return files
    return files + [path.parent / n for n in names if isinstance(n, str)]
