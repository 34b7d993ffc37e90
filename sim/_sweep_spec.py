"""The `[sweep]` section of a config: validated with pydantic, checked against the model,
and turned into the sample points of every run.

```toml
[sweep]
mode = "grid"          # grid | zip | random | sobol | latin_hypercube
samples = 1024         # random / sobol / latin_hypercube only: the number of runs
seed = 0               # random / sobol / latin_hypercube: the sample points are seeded
chunk = 256            # runs per vmapped batch
save = "full"          # full | final | summary
[sweep.params]
alpha = { linspace = [0.3, 0.8, 32] }      # grid / zip: linspace, logspace, values
beta = { logspace = [-3, -1, 32] }         #   (logspace: exponents of 10, as numpy)
gamma = { values = [0.7, 0.8, 0.9] }         #   a plain list is the values form:
eps = [0.1, 0.2, 0.3]                      #   eps = { values = [0.1, 0.2, 0.3] }
delta = { uniform = [0.01, 0.05] }         # random / sobol / latin_hypercube: uniform,
"initial.prey" = { loguniform = [1, 100] } #   loguniform; initial values by dotted key
```

Grid runs are ordered as `itertools.product` over the keys in the order written (the
last key varies fastest); zip pairs equal-length lists; the random modes draw from the
unit hypercube (numpy's PCG64, or scipy.stats.qmc's scrambled Sobol and Latin hypercube
engines, seeded by `seed`) and map each column onto its range.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import jax
import numpy as np
import pydantic
from pydantic import BaseModel, ConfigDict, Field

from solvers import did_you_mean

from ._config import SEED_MAX, Config
from ._errors import ConfigError
from ._limits import memory_problem

MODES = ("grid", "zip", "random", "sobol", "latin_hypercube")
SAVES = ("full", "final", "summary")
KINDS = ("linspace", "logspace", "values", "uniform", "loguniform")
_TINY = float(np.finfo(float).tiny)  # the smallest normal float64
_LISTED = ("linspace", "logspace", "values")
_RANGES = ("uniform", "loguniform")
_SAMPLED = ("random", "sobol", "latin_hypercube")
SUMMARY_STATS = ("min", "max", "mean", "final")
# Every form a swept quantity may take, named in each refusal of one.
FORMS = (
    "a list of values such as [0.1, 0.2, 0.3], or a table with one of values = [...], "
    "linspace = [start, stop, count], logspace = [start_exponent, stop_exponent, count] "
    "(grid and zip modes), uniform = [low, high], loguniform = [low, high] (random, sobol and "
    "latin_hypercube modes)"
)


class _SpecError(ValueError):
    """Raised inside validators to name the offending key within `[sweep]`."""

    def __init__(self, key: str, message: str):
        self.key = key
        self.message = message
        super().__init__(message)


class ParamSpec(BaseModel):
    """One swept quantity: exactly one of `linspace = [start, stop, count]`,
    `logspace = [start_exponent, stop_exponent, count]`, `values = [...]`,
    `uniform = [low, high]`, `loguniform = [low, high]`."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)
    linspace: list[float] | None = None
    """grid, zip: [start, stop, count], evenly spaced, both ends included"""
    logspace: list[float] | None = None
    """grid, zip: [start_exponent, stop_exponent, count], powers of 10 evenly spaced in the
    exponent"""
    values: list[float] | None = None
    """grid, zip: the values themselves"""
    uniform: list[float] | None = None
    """random, sobol, latin_hypercube: [low, high], uniform"""
    loguniform: list[float] | None = None
    """random, sobol, latin_hypercube: [low, high] with 0 < low, uniform in the logarithm"""

    @property
    def kind(self) -> str:
        return next(k for k in KINDS if getattr(self, k) is not None)

    @property
    def spec(self) -> list[float]:
        return getattr(self, self.kind)

    def check(self) -> None:
        given = [k for k in KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise _SpecError(
                "",
                f"expected exactly one of {', '.join(KINDS)}, got {', '.join(given) or 'none'} "
                f"(accepted forms: {FORMS})",
            )
        kind, spec = given[0], getattr(self, given[0])
        if not all(math.isfinite(v) for v in spec):
            raise _SpecError(kind, f"expected finite numbers, got {spec}")
        # (as [params] refuses such a value: stored as written, computed as 0 where
        # compiled code flushes subnormal numbers; logspace gives exponents)
        subnormal = (
            next((v for v in spec if v != 0 and abs(v) < _TINY), None)
            if kind != "logspace"
            else None
        )
        if subnormal is not None:
            raise _SpecError(
                kind,
                f"{subnormal!r} is below the smallest normal float ({_TINY!r}); expected 0 or a "
                "magnitude of at least that",
            )
        if kind in ("linspace", "logspace"):
            if len(spec) != 3 or spec[2] != int(spec[2]):
                raise _SpecError(
                    kind, f"expected [start, stop, count] with a whole count, got {spec}"
                )
            if spec[2] < 1:
                raise _SpecError(kind, f"empty range: expected a count >= 1, got {spec}")
        elif kind == "values":
            if not spec:
                raise _SpecError(kind, "empty range: expected at least one value")
        else:
            if len(spec) != 2:
                raise _SpecError(kind, f"expected [low, high], got {spec}")
            if not spec[0] < spec[1]:
                raise _SpecError(kind, f"empty range: expected low < high, got {spec}")
            if kind == "loguniform" and spec[0] <= 0:
                raise _SpecError(kind, f"expected 0 < low < high, got {spec}")

    def size(self) -> int:
        return len(self.values) if self.kind == "values" else int(self.spec[2])

    def points(self) -> np.ndarray:
        """The listed points (linspace, logspace, values)."""
        spec = self.spec
        if self.kind == "linspace":
            return np.linspace(spec[0], spec[1], int(spec[2]))
        if self.kind == "logspace":
            with np.errstate(
                over="ignore"
            ):  # (points beyond the float range are refused by the caller)
                return np.logspace(spec[0], spec[1], int(spec[2]))
        return np.asarray(spec, dtype=float)

    def scale(self, u: np.ndarray) -> np.ndarray:
        """Map unit-interval draws onto the range (uniform, loguniform)."""
        low, high = self.spec
        if self.kind == "uniform":
            return low + u * (high - low)
        return np.exp(np.log(low) + u * (np.log(high) - np.log(low)))


class SweepSection(BaseModel):
    """`[sweep]`: mode, size, chunking, what to save, and the swept quantities."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)
    mode: str = "grid"
    """how the runs' values are laid out: grid, zip, random, sobol, latin_hypercube"""
    samples: int | None = Field(default=None, ge=1)
    """random, sobol, latin_hypercube: the number of runs (required there)"""
    seed: int = Field(default=0, ge=0, le=SEED_MAX)
    """random, sobol, latin_hypercube: seed of the sample points"""
    chunk: int = Field(default=256, ge=1)
    """runs per batched (vmapped) call, and per write"""
    save: str = "full"
    """full (every save time), final (the last), summary (min, max, mean and final of
    each observable)"""
    params: dict[str, ParamSpec]
    """swept quantity (a parameter, or `initial.<state>`) = one range table"""

    @pydantic.field_validator("params", mode="before")
    @classmethod
    def _flatten_initial(cls, value: Any) -> Any:
        """Accept `[sweep.params.initial] prey = {...}` as `"initial.prey" = {...}` (and
        any other table of tables by dotted key, so that a key the model does not take,
        such as `system.density`, is refused by its name), and a plain list of numbers as
        the values form."""
        if not isinstance(value, dict):
            return value
        out = {}
        for key, spec in value.items():
            nested = isinstance(spec, dict) and spec and not any(k in KINDS for k in spec)
            if nested and (
                key == "initial" or all(isinstance(v, (dict, list)) for v in spec.values())
            ):
                out.update({f"{key}.{k}": _entry(f"{key}.{k}", v) for k, v in spec.items()})
            else:
                out[key] = _entry(key, spec)
        return out

    @pydantic.model_validator(mode="after")
    def _consistent(self):
        for key, choices in (("mode", MODES), ("save", SAVES)):
            value = getattr(self, key)
            if value not in choices:
                raise _SpecError(
                    key,
                    f"expected one of {', '.join(choices)}, got "
                    f"{value!r}.{did_you_mean(value, choices)}",
                )
        if not self.params:
            raise _SpecError(
                "params",
                "expected at least one quantity to sweep, e.g. alpha = { linspace = [0.3, 0.8, 32] "
                "}",
            )
        for name, spec in self.params.items():
            try:
                spec.check()
            except _SpecError as e:
                raise _SpecError(
                    f"params.{name}" + (f".{e.key}" if e.key else ""), e.message
                ) from None
        sampled = self.mode in _SAMPLED
        if sampled and self.samples is None:
            raise _SpecError("samples", f"required for mode {self.mode!r} (the number of runs)")
        if not sampled and self.samples is not None:
            raise _SpecError(
                "samples",
                f"is for modes {', '.join(_SAMPLED)}; mode {self.mode!r} takes its size from "
                "sweep.params",
            )
        allowed = _RANGES if sampled else _LISTED
        for name, spec in self.params.items():
            if spec.kind not in allowed:
                if not sampled:
                    expects = f"{' or '.join(allowed)} (or a plain list of values)"
                    hint = " (uniform and loguniform are for random, sobol and latin_hypercube)"
                else:
                    expects = " or ".join(allowed)
                    hint = (
                        " (a plain list is the values form; a range is { uniform = [low, high] })"
                        if spec.kind == "values"
                        else ""
                    )
                raise _SpecError(
                    f"params.{name}", f"mode {self.mode!r} expects {expects}, got {spec.kind}{hint}"
                )
        if self.mode == "zip":
            names = list(self.params)
            first = self.params[names[0]].size()
            for name in names[1:]:
                if self.params[name].size() != first:
                    raise _SpecError(
                        f"params.{name}",
                        f"has {self.params[name].size()} points but params.{names[0]} has {first}; "
                        "zip mode needs equal lengths",
                    )
        return self

    def resolved(self) -> dict[str, Any]:
        """The section with every default filled in (for the stored config)."""
        out: dict[str, Any] = {"mode": self.mode, "chunk": self.chunk, "save": self.save}
        if self.mode in _SAMPLED:
            out.update(samples=self.samples, seed=self.seed)
        out["params"] = {name: {spec.kind: _plain(spec)} for name, spec in self.params.items()}
        return out


def _entry(key: str, spec: Any) -> Any:
    """One swept quantity as written: a table is left to `ParamSpec`; a list of numbers is
    the values form; anything else is refused naming every accepted form."""
    if isinstance(spec, dict):
        return spec
    if not isinstance(spec, list):
        raise _SpecError(key, f"expected {FORMS}; got {spec!r}")
    if not spec:
        raise _SpecError(key, f"empty list: expected at least one value ({FORMS})")
    for v in spec:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _SpecError(key, f"expected a list of numbers, got {v!r} in {spec!r} ({FORMS})")
        if not math.isfinite(v):
            raise _SpecError(key, f"expected finite numbers, got {v!r} in {spec!r} ({FORMS})")
        if v != 0 and abs(v) < _TINY:
            raise _SpecError(
                key,
                f"{v!r} is below the smallest normal float ({_TINY!r}); expected 0 or a "
                "magnitude of at least that",
            )
    return {"values": spec}


def _plain(spec: ParamSpec) -> list[float | int]:
    values: list[float | int] = list(spec.spec)
    if spec.kind in ("linspace", "logspace"):
        values[2] = int(values[2])
    return values


@dataclasses.dataclass(frozen=True)
class SweepPlan:
    """The validated sweep: every run's values and how to batch and save them.

    Attributes:
        section: the validated `[sweep]` section.
        params: parameter name -> values [B] (the swept parameters only).
        initial: state name -> values [B] (the swept initial values only).
        grid_shape: the axis lengths of a grid sweep (in key order), else None.
    """

    section: SweepSection
    params: dict[str, np.ndarray]
    initial: dict[str, np.ndarray]
    grid_shape: tuple[int, ...] | None

    @property
    def runs(self) -> int:
        return len(next(iter({**self.params, **self.initial}.values())))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.params) + tuple(f"initial.{k}" for k in self.initial)

    @property
    def seed(self) -> int | None:
        return self.section.seed if self.section.mode in _SAMPLED else None


def sweep_section(config: Config) -> SweepSection:
    """The config's `[sweep]`, validated (structure only, not yet against the model).

    Raises:
        ConfigError: naming `sweep.<key>` and what was expected.
    """
    raw = config.raw.get("sweep")
    if raw is None:
        raise config.error("sweep", "a sweep config needs a [sweep] section with [sweep.params]")
    try:
        return SweepSection.model_validate(raw)
    except pydantic.ValidationError as e:
        raise _to_config_error(e, config.source) from None


def unit_samples(section: SweepSection, d: int) -> np.ndarray:
    """Seeded draws in the unit hypercube [samples, d] for the random modes."""
    n = int(section.samples)
    rng = np.random.default_rng(section.seed)
    if section.mode == "random":
        return rng.random((n, d))
    if section.mode == "sobol":
        from scipy.stats import qmc

        with warnings.catch_warnings():  # balance is best at powers of 2; any count is valid
            warnings.simplefilter("ignore", UserWarning)
            return qmc.Sobol(d, scramble=True, rng=rng).random(n)
    from scipy.stats import qmc

    return qmc.LatinHypercube(d, rng=rng).random(n)


def plan_sweep(
    config: Config, section: SweepSection, params: dict[str, Any], initial: Any, model
) -> SweepPlan:
    """Check the swept names and values against the model and draw every run's values.

    Arguments:
        params, initial: the resolved `params` and `initial` of the config's `Setup`.

    Raises:
        ConfigError: `sweep.params.<name>`: an unknown parameter or state component, or
            values that break the parameter's constraint.
    """
    specs = section.params
    sampled = section.mode in _SAMPLED
    sizes = {} if sampled else {name: spec.size() for name, spec in specs.items()}
    runs = (
        int(section.samples)
        if sampled
        else (math.prod(sizes.values()) if section.mode == "grid" else max(sizes.values()))
    )
    # The design itself: one value per run and quantity (grid meshes and columns: x4).
    problem = memory_problem(4 * 8 * runs * len(specs), f"a sweep of {runs:,} runs")
    if problem:
        raise config.error(
            "sweep.samples" if sampled else f"sweep.params.{max(sizes, key=sizes.get)}", problem
        )
    if section.mode == "grid":
        axes = [spec.points() for spec in specs.values()]
        mesh = np.meshgrid(*axes, indexing="ij")
        columns = {name: m.reshape(-1) for name, m in zip(specs, mesh, strict=False)}
        grid_shape = tuple(len(a) for a in axes)
    elif section.mode == "zip":
        columns = {name: spec.points() for name, spec in specs.items()}
        grid_shape = None
    else:
        u = unit_samples(section, len(specs))
        columns = {name: spec.scale(u[:, i]) for i, (name, spec) in enumerate(specs.items())}
        grid_shape = None

    swept_params: dict[str, np.ndarray] = {}
    swept_initial: dict[str, np.ndarray] = {}
    for name, values in columns.items():
        key = f"sweep.params.{name}"
        where = f"{specs[name].kind} = {specs[name].spec}"
        # (the values a range gives, judged as the range's own numbers are)
        subnormal = values[(values != 0) & (np.abs(values) < _TINY)]
        if subnormal.size:
            raise config.error(
                key,
                f"{where} gives {float(subnormal[0])!r}, below the smallest normal float "
                f"({_TINY!r}); expected values of 0 or a magnitude of at least that",
            )
        head, _, rest = name.partition(".")
        if rest:
            if head != "initial":
                raise config.error(
                    key, f"expected a parameter name or initial.<state>, got {name!r}"
                )
            if not isinstance(initial, dict) or not all(is_scalar(v) for v in initial.values()):
                raise config.error(
                    key,
                    "initial values can be swept for models whose initial state has named values "
                    f"(ODE models); {model.name!r} has none",
                )
            if rest not in initial:
                names = list(initial)
                raise config.error(
                    key,
                    f"model {model.name!r} has no state component {rest!r} (state: "
                    f"{', '.join(names)}).{did_you_mean(rest, names)}",
                )
            swept_initial[rest] = values
            continue
        if name not in params:
            names = list(params)
            raise config.error(
                key,
                f"model {model.name!r} has no parameter {name!r} (parameters: "
                f"{', '.join(names)}).{did_you_mean(name, names)}",
            )
        if not is_scalar(params[name]):
            raise config.error(key, f"parameter {name!r} is not a scalar and cannot be swept")
        declared = model.parameter(name)
        problem = declared.violation(values)
        if problem is not None:
            raise config.error(
                key,
                f"expected {problem} ({declared.doc}), got values from {values.min():g} to "
                f"{values.max():g} ({where})",
            )
        swept_params[name] = values
    return SweepPlan(
        section=section, params=swept_params, initial=swept_initial, grid_shape=grid_shape
    )


def is_scalar(value: Any) -> bool:
    """A single number (a 0-d array or a Python number), not an array or a pytree."""
    return (
        isinstance(value, (int, float, np.ndarray, np.generic, jax.Array)) and np.ndim(value) == 0
    )


_EXPECTED = {
    "int_type": "expected a whole number",
    "float_type": "expected a number",
    "string_type": "expected a string",
    "list_type": "expected an array",
    "dict_type": "expected a table",
    "model_type": "expected a table",
    "model_attributes_type": "expected a table",
}


_SECTION_KEYS = list(SweepSection.model_fields)


def _to_config_error(exc: pydantic.ValidationError, source: str) -> ConfigError:
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    inner = (err.get("ctx") or {}).get("error")
    if isinstance(inner, _SpecError):
        key = ".".join(["sweep", *loc, inner.key]) if inner.key else ".".join(["sweep", *loc])
        return ConfigError(source, key, inner.message)
    key = ".".join(["sweep", *loc])
    kind = err["type"]
    if kind == "extra_forbidden":
        allowed = (
            list(ParamSpec.model_fields) if len(loc) == 3 and loc[0] == "params" else _SECTION_KEYS
        )
        forms = f" Accepted forms: {FORMS}." if allowed is not _SECTION_KEYS else ""
        return ConfigError(
            source,
            key,
            f"unknown key (expected one of: {', '.join(allowed)}).{did_you_mean(loc[-1], allowed)}"
            + forms,
        )
    if kind == "missing":
        hint = (
            " (the quantities to sweep, e.g. alpha = { linspace = [0.3, 0.8, 32] })"
            if loc == ["params"]
            else ""
        )
        return ConfigError(source, key, f"required key is missing{hint}")
    ctx = err.get("ctx") or {}
    if kind == "greater_than_equal":
        expected = f"expected a whole number >= {ctx['ge']}"
    else:
        expected = _EXPECTED.get(kind) or (err["msg"][0].lower() + err["msg"][1:])
    return ConfigError(source, key, f"{expected}, got {err.get('input')!r}")
