"""What a figure knows of the model behind a file: units of time and of the observables,
the real-world time origin, the data's own names, and a title that says what was run.

Everything comes from the file itself (its `model` attribute and the resolved config it
stores) and from the model registry by that name; a file of another program, or of a model
that cannot be found, gets plain labels.
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from typing import Any

import numpy as np

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# Tables of `[model]` that define the model in the config itself (no registry lookup).
_TEXT_TABLES = ("states", "noise", "fields")
# A unit's factors: names, optionally under sqrt(...) or raised to a power.
_FACTOR = re.compile(r"[A-Za-z_]+")
# Units that say nothing on a label.
SILENT = ("", "1", "reduced", "none", "dimensionless")
# Parameters a run's title names at most.
_TITLE_PARAMETERS = 6
# Reduced Lennard-Jones units (k_B = 1) and the molecular "real" units (nm, ps, kJ/mol,
# K, bar), per quantity.
MD_UNITS = {
    "reduced": {
        "energy": "ε",
        "time": "τ",
        "temperature": "ε/$k_B$",
        "pressure": "ε/σ³",
        "length": "σ",
        "volume": "σ³",
        "density": "σ⁻³",
        "mass_density": "m/σ³",
    },
    "real": {
        "energy": "kJ/mol",
        "time": "ps",
        "temperature": "K",
        "pressure": "bar",
        "length": "nm",
        "volume": "nm³",
        "density": "nm⁻³",
        "mass_density": "g/cm³",
    },
}


def with_unit(label: str, unit: str) -> str:
    """`prey`, `thousand` -> `prey (thousand)`; no parentheses for a silent unit."""
    return label if unit.strip() in SILENT else f"{label} ({unit.replace('*', '·')})"


def time_unit_of(units: list[str]) -> str:
    """The unit of time behind a model's parameter units: the name most often found in
    a denominator (`1/year`, `1/(year*thousand)`, `1/sqrt(year)`, `length^2/time`);
    "" when no parameter is a rate."""
    found: Counter = Counter()
    for unit in units:
        if "/" not in unit:
            continue
        denominator = unit.split("/", 1)[1]
        for name in _FACTOR.findall(denominator):
            if name != "sqrt":
                found[name] += 1
    if not found:
        return ""
    best = max(found.values())
    # (ties: the name of the first parameter that names one)
    order = [
        n for u in units if "/" in u for n in _FACTOR.findall(u.split("/", 1)[1]) if n != "sqrt"
    ]
    return next(n for n in order if found[n] == best)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _fmt(value: float) -> str:
    return f"{value:.4g}"


class Meta:
    """Labels of one record, read once: `Source.meta`."""

    def __init__(self, record):
        attrs = record.attrs
        self.model = str(attrs.get("model", "") or "")
        try:
            self.config = tomllib.loads(str(attrs.get("config", "") or ""))
        except (tomllib.TOMLDecodeError, TypeError, ValueError):
            self.config = {}
        section = self.config.get("model", {})
        self.model_table = section if isinstance(section, dict) else {}
        self.cls = self._model_class()
        # name -> (default, unit, one-line meaning)
        self.parameters: dict[str, tuple[Any, str, str]] = {}
        if self.cls is not None:
            for p in getattr(self.cls, "parameters", ()):
                self.parameters[p.name] = (p.default, p.unit, p.doc)
        else:
            table = self.model_table.get("parameters", {})
            for name, spec in table.items() if isinstance(table, dict) else ():
                if isinstance(spec, dict):
                    self.parameters[name] = (
                        spec.get("value"),
                        str(spec.get("unit", "")),
                        str(spec.get("doc", "")),
                    )
                else:
                    self.parameters[name] = (spec, "", "")
        self.time_unit = time_unit_of([unit for _, unit, _ in self.parameters.values()])
        self.state_unit = (
            str(getattr(self.cls, "initial_units", "") or "") if self.cls is not None else ""
        )
        self.state_names = (
            tuple(getattr(self.cls, "state_names", ()) or ())
            if self.cls is not None
            else tuple(self._table("states"))
        )
        system = self.config.get("system", {})
        self.md_system = system if isinstance(system, dict) else {}
        self.md_units = None
        if (
            self.cls is not None
            and any(unit == "reduced" for _, unit, _ in self.parameters.values())
            or "h5md" in record
        ):
            wanted = str(self.md_system.get("units", "reduced"))
            self.md_units = MD_UNITS.get(wanted, MD_UNITS["reduced"]) | {"name": wanted}
            self.time_unit = self.md_units["time"]
        data = self.config.get("data", {})
        data = data if isinstance(data, dict) else {}
        self.time_offset = _number(data.get("time_offset")) or 0.0
        observed = data.get("observables", {})
        # model observable -> the data's name for it (the dataset's last path component)
        self.data_names = {
            str(k): str(v).rstrip("/").rsplit("/", 1)[-1]
            for k, v in (observed.items() if isinstance(observed, dict) else ())
            if str(v).strip("/")
        }
        self.data_file = str(data.get("file", "")).rsplit("/", 1)[-1]

    def _table(self, name: str) -> dict:
        table = self.model_table.get(name, {})
        return table if isinstance(table, dict) else {}

    def _model_class(self):
        if not self.model or any(k in self.model_table for k in (*_TEXT_TABLES, "source", "sbml")):
            return None
        from ._registry import model_class

        try:
            return model_class(self.model)
        except Exception:  # an unknown name or a plugin that does not load: plain labels
            return None

    # ------------------------------------------------------------------ labels

    def time_label(self, offset: float | None = None) -> str:
        """The time axis: `year` when the times are years from an offset, else
        `time (unit)`."""
        offset = self.time_offset if offset is None else offset
        if offset and self.time_unit and self.time_unit != "time":
            return self.time_unit
        if self.time_unit and self.time_unit != "time":
            return f"time ({self.time_unit})"
        return "time"

    def unit_of(self, observable: str) -> str:
        if self.md_units is not None:
            if observable.endswith("energy"):
                return self.md_units["energy"]
            return self.md_units.get(observable, "")
        if observable in self.state_names:
            return self.state_unit
        return ""

    def label(self, observable: str, *, data_name: bool = False) -> str:
        """An observable's axis label: its name (the data's name where the config maps it
        to a data column and `data_name`) with its unit."""
        name = self.data_names.get(observable, observable) if data_name else observable
        return with_unit(name.replace("_", " "), self.unit_of(observable))

    def parameter_unit(self, name: str) -> str:
        """The unit of a parameter or of `initial.<state>` ("" when unknown or silent)."""
        head, _, rest = name.partition(".")
        unit = (
            self.unit_of(rest)
            if head == "initial" and rest
            else self.parameters.get(name, (None, "", ""))[1]
        )
        return "" if unit.strip() in SILENT else unit

    def parameter_label(self, name: str) -> str:
        """A parameter (or `initial.<state>`) with its unit, for sweep and posterior axes."""
        head, _, rest = name.partition(".")
        return with_unit(
            f"initial {rest}" if head == "initial" and rest else name.replace("_", " "),
            self.parameter_unit(name),
        )

    def particle_count(self, record) -> int | None:
        """The number of particles of an MD file or sweep: from its positions, else from
        the config's `[system]` lattice (basis times cells)."""
        n = _particles(record)
        if n or self.md_units is None:
            return n
        kind, cells = self.md_system.get("lattice"), self.md_system.get("cells")
        try:
            from physics.md import LATTICE_BASIS

            counts = (int(cells),) * 3 if isinstance(cells, int) else tuple(int(c) for c in cells)
            return len(LATTICE_BASIS[kind]) * int(np.prod(counts))
        except (KeyError, TypeError, ValueError, ImportError):
            return None

    # ------------------------------------------------------------------ titles

    def changed_parameters(self, exclude=()) -> list[str]:
        """`name = value` for the config's parameters that differ from the model's
        defaults (all of them when the defaults are unknown)."""
        params = self.config.get("params", {})
        out = []
        for name, value in params.items() if isinstance(params, dict) else ():
            if name in exclude:
                continue
            value = _number(value)
            default = _number(self.parameters.get(name, (None,))[0])
            if value is None or (
                default is not None and math.isclose(value, default, rel_tol=1e-9, abs_tol=0.0)
            ):
                continue
            out.append(f"{name} = {_fmt(value)}")
        return out

    def run_parameters(self) -> list[str]:
        """What a run's title says of its parameters: `name = value` for each the config
        sets when there are at most `_TITLE_PARAMETERS` (equal to the defaults or not: the
        file's config is resolved, so which the user wrote is not known), else those that
        differ from the model's defaults, the first `_TITLE_PARAMETERS` of them and how
        many more."""
        params = self.config.get("params", {})
        given = [
            f"{name} = {_fmt(_number(value))}"
            for name, value in (params.items() if isinstance(params, dict) else ())
            if _number(value) is not None
        ]
        if len(given) <= _TITLE_PARAMETERS:
            return given
        changed = self.changed_parameters()
        if len(changed) <= _TITLE_PARAMETERS:
            return changed
        return [*changed[:_TITLE_PARAMETERS], f"and {len(changed) - _TITLE_PARAMETERS} more"]

    def title(self, kind: str, record) -> str:
        """What was run: the model, what was done, and the parameters that differ."""
        model = self.model or "model"
        solver = self.config.get("solver", {})
        solver = solver if isinstance(solver, dict) else {}
        fit = self.config.get("fit", {})
        fit = fit if isinstance(fit, dict) else {}
        if kind == "run":
            head = f"{model} run"
            extra = []
            if self.md_units is not None:
                extra.append(f"{self.md_units['name']} units")
                n = self.particle_count(record)
                if n:
                    extra.append(f"{n} particles")
                for key in ("temperature", "density"):
                    if _number(self.md_system.get(key)) is not None:
                        extra.append(f"{key} {_fmt(float(self.md_system[key]))}")
                if solver.get("method"):
                    extra.append(str(solver["method"]))
            shown = self.run_parameters()
            text = head + (": " + ", ".join(shown) if shown else "")
            return text + ("\n" + ", ".join(extra) if extra else "")
        if kind == "sweep":
            swept = _swept(record)
            runs = _runs(record)
            mode = (
                self.config.get("sweep", {}).get("mode", "grid")
                if isinstance(self.config.get("sweep"), dict)
                else "grid"
            )
            shape = _grid_shape(record)
            design = (
                " × ".join(map(str, shape)) + " grid"
                if mode == "grid" and len(shape) > 1
                else f"{mode} design"
            )
            changed = self.changed_parameters(exclude=swept)
            text = f"{model} sweep over {', '.join(swept)}: {runs} runs, {design}"
            return text + ("\n" + ", ".join(changed) if changed else "")
        if kind == "fit":
            what = ", ".join(
                x
                for x in (
                    f"{fit['loss']} loss" if fit.get("loss") else "",
                    str(fit.get("optimizer", "")),
                )
                if x
            )
            data = f" to {self.data_file}" if self.data_file else ""
            return f"{model} fitted{data}" + (f" ({what})" if what else "")
        if kind == "posterior":
            shape = _draw_shape(record)
            draws = f", {shape[0]} chains × {shape[1]} draws" if shape else ""
            data = f" given {self.data_file}" if self.data_file else ""
            return f"{model} posterior{data} (NUTS{draws})"
        if kind == "profile":
            return f"{model} profile likelihoods"
        return model


def _particles(record) -> int | None:
    try:
        return int(np.shape(record["particles/all/position/value"])[1])
    except (KeyError, TypeError, IndexError, ValueError):
        return None


def _swept(record) -> list[str]:
    import json

    try:
        return [str(s) for s in json.loads(record.attrs["swept"])]
    except (KeyError, TypeError, ValueError):
        return []


def _runs(record) -> int:
    try:
        return int(np.shape(record["status"])[0])
    except (KeyError, TypeError, IndexError, ValueError):
        return 0


def _draw_shape(record) -> tuple[int, int] | None:
    try:
        node = record["posterior"]
        first = next(iter(node.values()))
        shape = np.shape(first)
        return (int(shape[0]), int(shape[1])) if len(shape) >= 2 else None
    except (KeyError, TypeError, StopIteration, AttributeError, ValueError):
        return None


def _grid_shape(record) -> list[int]:
    import json

    try:
        return [int(n) for n in json.loads(record.attrs["grid_shape"]) or ()]
    except (KeyError, TypeError, ValueError):
        return []
