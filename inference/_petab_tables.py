"""The tables of a PEtab problem read against its model: the parameter table, the
conditions, the measurements grouped into simulations, and the observables with their
placeholders, each value an index into the objective's values (`_Sources`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ._petab_files import PetabError
from ._petab_formulas import _compile
from ._petab_problem import (
    DISTRIBUTIONS,
    SCALES,
    TRANSFORMATIONS,
    PetabParameter,
    _missing,
    _Observable,
    _prior_of,
    _Sources,
)


def parameter_table(path: Path, table) -> list[PetabParameter]:
    """The rows of the parameter table, in its order."""
    return [_parameter(path, pid, row) for pid, row in table.iterrows()]


def _parameter(path: Path, pid, row) -> PetabParameter:
    where = f"{path.name}: parameter table, row {pid!r}"
    scale = str(row.get("parameterScale", "lin"))
    if scale not in SCALES:
        raise PetabError(
            f"{where}, column parameterScale: expected one of {', '.join(SCALES)}, got {scale!r}"
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
    return PetabParameter(
        str(pid),
        scale,
        values["lowerBound"],
        values["upperBound"],
        values["nominalValue"],
        estimate,
        prior,
        prior_parameters,
    )


class Conditions:
    """The condition table read against the model: what each condition sets (a model
    parameter or a species' initial value), as indices of `sources`."""

    def __init__(self, path: Path, table, model, sources: _Sources):
        self.name, self.table, self.sources = path.name, table, sources
        self.model_params = list(model.parameter_names)
        states = list(model.state_names)
        self.targets = [c for c in table.columns if c != "conditionName"]
        for column in self.targets:
            if (
                column not in self.model_params
                and column not in states
                and column not in model.species_compartments
            ):
                raise PetabError(
                    f"{path.name}: condition table, column {column!r}: no parameter, compartment "
                    f"or species of the model {model.name!r}"
                )
            if column not in self.model_params and column not in states:
                # (a species the model computes from others at the start: setting it would
                # change nothing, silently)
                raise PetabError(
                    f"{path.name}: condition table, column {column!r}: the model {model.name!r} "
                    "computes this species from other values and keeps it constant; a condition "
                    "cannot set it"
                )

    def of(self, cid: str, role: str, row_where: str) -> tuple[dict[str, int], dict[str, int]]:
        """(model parameter -> source, species -> source) of one condition."""
        conditions = self.table
        if cid not in conditions.index:
            raise PetabError(
                f"{row_where}, column {role}: no condition {cid!r} in the condition table"
            )
        params, initial = {}, {}
        for column in self.targets:
            value = conditions.loc[cid, column]
            if _missing(value):
                continue
            where = f"{self.name}: condition table, row {cid!r}, column {column!r}"
            target = params if column in self.model_params else initial
            target[column] = self.sources.of(value, where)
        return params, initial

    def settings(
        self,
        role_conditions: list[str],
        role: str,
        table_params: dict[str, int],
        defaults: dict[str, float],
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Per simulation (one condition each, in `role`): the source of each model
        parameter [G, n_params] (the condition's, else the parameter table's, else the
        model's default) and of each species it sets (species -> [G], -1 where not set)."""
        groups = len(role_conditions)
        params = np.zeros((groups, len(self.model_params)), dtype=int)
        initial = {}
        for g, cid in enumerate(role_conditions):
            row_where = f"{self.name}: measurement table, simulation {g + 1}"
            overrides, species = self.of(cid, role, row_where)
            for j, pid in enumerate(self.model_params):
                if pid in overrides:
                    params[g, j] = overrides[pid]
                elif pid in table_params:
                    params[g, j] = table_params[pid]
                else:
                    params[g, j] = self.sources.of(defaults[pid], "")
            for sid, index in species.items():
                initial.setdefault(sid, np.full(groups, -1, dtype=int))[g] = index
        return params, initial


class Measurements(NamedTuple):
    """The measurement table grouped into simulations.

    Attributes:
        table: the table, its rows numbered from 0.
        keys: (preequilibration condition or '', simulation condition) of each simulation.
        group_of_row, times, measured: per row, its simulation, time and value.
    """

    table: Any
    keys: list[tuple[str, str]]
    group_of_row: np.ndarray
    times: np.ndarray
    measured: np.ndarray


def measurements(path: Path, problem) -> Measurements:
    """The measurement table of a PEtab problem (`petab.Problem`), checked row by row."""
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
    return Measurements(m, keys, group_of_row, times, measured)


def save_times(m: Measurements) -> tuple[np.ndarray, np.ndarray]:
    """The save times of every simulation [G, T] (from 0, padded with their last time)
    and, per measurement row, the index of its time among its simulation's."""
    groups = len(m.keys)
    save = [np.unique(m.times[m.group_of_row == g]) for g in range(groups)]
    length = max(2, max(len(t) + (t[0] > 0) for t in save))
    ts = np.zeros((groups, length))
    time_index = np.zeros(len(m.table), dtype=int)
    for g, t in enumerate(save):
        t = t if t[0] == 0 else np.concatenate([[0.0], t])
        ts[g, : len(t)] = t
        ts[g, len(t) :] = t[-1]  # (padding: the last time again)
        rows = np.flatnonzero(m.group_of_row == g)
        time_index[rows] = np.searchsorted(t, m.times[rows])
    if np.any(ts[:, -1] == 0):
        ts[ts[:, -1] == 0, -1] = 1e-9  # (a simulation measured at t = 0 only)
    return ts, time_index


class _Reading(NamedTuple):
    """What the observable table is read against: the YAML file's name (for messages),
    the measurements, the sources of values, the parameter table and the model's ids."""

    name: str
    measurements: Measurements
    sources: _Sources
    parameters: list[PetabParameter]
    model_ids: set[str]


def observables(
    path: Path,
    problem,
    m: Measurements,
    sources: _Sources,
    parameters: list[PetabParameter],
    model_ids: set[str],
) -> list[_Observable]:
    """The observables that some measurement names, in the observable table's order."""
    reading = _Reading(path.name, m, sources, parameters, model_ids)
    out = []
    obs_df = problem.observable_df
    for oid in obs_df.index:
        rows = np.flatnonzero(m.table["observableId"].astype(str).to_numpy() == str(oid))
        if rows.size == 0:
            continue
        out.append(_observable(reading, obs_df.loc[oid], oid, rows))
    return out


def _observable(reading: _Reading, row, oid, rows: np.ndarray) -> _Observable:
    """One row of the observable table, measured in the measurement table's `rows`."""
    where = f"{reading.name}: observable table, row {oid!r}"
    transformation, distribution = _noise_model(row, where)
    fns = {}
    placeholders: dict[str, np.ndarray] = {}
    for column, prefix, table_column in (
        ("observableFormula", "observableParameter", "observableParameters"),
        ("noiseFormula", "noiseParameter", "noiseParameters"),
    ):
        cell = f"{where}, column {column}"
        fns[column], expr, wanted = _formula(reading, row[column], oid, cell, prefix)
        for name in wanted:
            placeholders[name] = np.zeros(rows.size, dtype=int)
        _placeholder_sources(
            reading, oid, rows, table_column, prefix, wanted, str(expr), placeholders
        )
    observable = _Observable(
        str(oid),
        fns["observableFormula"],
        fns["noiseFormula"],
        transformation,
        distribution,
        rows,
        placeholders,
    )
    measured = reading.measurements.measured
    if transformation != "lin" and np.any(measured[rows] <= 0):
        i = rows[np.argmax(measured[rows] <= 0)]
        raise PetabError(
            f"{reading.name}: measurement table, row {i + 1}, column measurement: a "
            f"{transformation}-transformed observable needs a positive measurement, got "
            f"{measured[i]!r}"
        )
    return observable


def _noise_model(row, where: str) -> tuple[str, str]:
    """The transformation and the noise distribution of an observable-table row."""
    transformation = str(row.get("observableTransformation", "lin"))
    transformation = "lin" if _missing(row.get("observableTransformation")) else transformation
    distribution = (
        "normal" if _missing(row.get("noiseDistribution")) else str(row["noiseDistribution"])
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
    return transformation, distribution


def _formula(reading: _Reading, text, oid, where: str, prefix: str):
    """(compiled function, sympy expression, its placeholders `prefix..._<oid>` in
    order) of an observable or noise formula (`where` names its cell); every other name
    it reads must be an id of the model or of the parameter table."""
    import sympy as sp
    from petab.v1.math import sympify_petab

    try:
        expr = sympify_petab(text) if isinstance(text, str) else sp.Float(float(text))
    except Exception as e:
        raise PetabError(
            f"{where}: cannot be read: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        ) from None
    if (
        prefix == "noiseParameter"
        and expr.is_number
        and not (expr.is_real and math.isfinite(float(expr)) and float(expr) > 0)
    ):
        raise PetabError(
            f"{where}: a sigma that is a number must be a positive finite standard deviation, "
            f"got {text!r}"
        )
    fn, names = _compile(expr, where)
    sources = reading.sources
    wanted = sorted(n for n in names if n.startswith(prefix) and n.endswith(f"_{oid}"))
    sources.used.update(n for n in names if n in sources.index)
    for name in names:
        if name not in reading.model_ids and name not in sources.index and name not in wanted:
            raise PetabError(
                f"{where}: {name!r} is no id of the model, parameter of the parameter table or "
                f"{prefix} of {oid!r}"
            )
    return fn, expr, wanted


def _placeholder_sources(
    reading: _Reading,
    oid,
    rows: np.ndarray,
    table_column: str,
    prefix: str,
    wanted: list[str],
    formula: str,
    placeholders: dict[str, np.ndarray],
) -> None:
    """The source of each placeholder in `wanted` for each measurement row of the
    observable, from the row's `table_column` (values separated by ';'), into
    `placeholders`; `formula` is the formula's text."""
    m, sources, parameters = reading.measurements.table, reading.sources, reading.parameters
    for k, i in enumerate(rows):
        cell = m.loc[i, table_column] if table_column in m.columns else math.nan
        values = [] if _missing(cell) else str(cell).split(";")
        if len(values) != len(wanted):
            raise PetabError(
                f"{reading.name}: measurement table, row {i + 1}, column {table_column}: "
                f"observable {oid!r} needs {len(wanted)} value(s) "
                f"({', '.join(wanted) or 'none'}), got {len(values)}"
            )
        for name, value in zip(wanted, values, strict=False):
            cell_where = f"{reading.name}: measurement table, row {i + 1}, column {table_column}"
            placeholders[name][k] = sources.of(value, cell_where)
            # (a number that is the whole noise formula is sigma itself; within a
            # formula such as `noiseParameter1 + noiseParameter2 * y` a 0 is fine)
            sigma_itself = formula == name
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


def check_used(path: Path, model, parameters: list[PetabParameter], sources: _Sources) -> None:
    """Refuse a parameter-table row that is no model parameter and that nothing uses."""
    model_params = list(model.parameter_names)
    for p in parameters:
        if p.id not in model_params and p.id not in sources.used:
            raise PetabError(
                f"{path.name}: parameter table, row {p.id!r}: no parameter of the model "
                f"{model.name!r}, and no condition, formula or measurement uses it"
            )
