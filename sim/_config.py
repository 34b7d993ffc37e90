"""TOML configs: parsed, overridden by dotted `--set KEY=VALUE`, validated with pydantic.

Structure is checked here (sections, key names, types, ranges). What depends on the model
(parameter names, state names, solver methods of its family) is checked when the config
is resolved against the model, in `sim.run`.
"""

from __future__ import annotations

import math
import os
import stat
import sys
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from solvers import did_you_mean

from ._errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import tomli_w


class _Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, allow_inf_nan=False, use_attribute_docstrings=True
    )


def split_source(source: str) -> tuple[str, str | None]:
    """A model source `"file.py:Class"` as ("file.py", "Class"); `"file.py"` as
    ("file.py", None)."""
    file, colon, name = source.rpartition(":")
    return (file, name) if colon and file and name.isidentifier() else (source, None)


class ModelSection(BaseModel):
    """`[model]`: the registry name, plus the model's own options (checked against it).
    With `source` (a Python file's model) or `sbml` (an SBML file), `name` is a label that
    defaults to the class name or the file's stem."""

    model_config = ConfigDict(extra="allow", strict=True, use_attribute_docstrings=True)
    name: str = ""
    """the model: a registered name (`sim models`), or a label of a model the config
    defines or names by file"""

    @pydantic.model_validator(mode="after")
    def _label(self):
        if self.name:
            return self
        extra = self.model_extra or {}
        for key in ("source", "sbml"):
            value = extra.get(key)
            if isinstance(value, str) and value:
                file, cls = split_source(value) if key == "source" else (value, None)
                self.name = cls or Path(file).stem
                return self
        raise _KeyedError(
            "name",
            'required key is missing (a model\'s name, or source = "file.py:Class" or sbml = '
            '"model.xml")',
        )

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def _subnormal(value: float | None) -> str | None:
    """Why a time, step or tolerance is unusable: nonzero but below the smallest normal float."""
    tiny = sys.float_info.min
    if value is not None and value != 0 and abs(value) < tiny:
        return (
            f"{value!r} is below the smallest normal float ({tiny!r}); expected 0 or a "
            "magnitude of at least that"
        )
    return None


class TimeSection(_Section):
    """`[time]`: the span, the save points and, for fixed-step families, the step
    (families may add keys: `Family.time_keys`)."""

    t0: float = Field(default=0.0, json_schema_extra={"unit": "time"})
    """the start time"""
    t1: float | None = Field(default=None, json_schema_extra={"unit": "time"})
    """the end time (MD: `steps` instead)"""
    save: int | None = Field(default=None, ge=2)
    """equally spaced save times from t0 to t1, both included"""
    save_at: list[float] | None = Field(default=None, json_schema_extra={"unit": "time"})
    """the save times, increasing, within [t0, t1] (instead of `save`)"""
    dt: float | None = Field(default=None, gt=0, json_schema_extra={"unit": "time"})
    """a fixed step (ODE: fixed steps instead of adaptive ones; PDE spectral and MD: the
    step, MD default 0.005; SDE: `[solver] dt`)"""

    @pydantic.model_validator(mode="after")
    def _consistent(self):
        # Subnormal times and steps lose their precision (and become 0 where the
        # hardware flushes them): a step of 1e-320 is no step.
        for key in ("t0", "t1", "dt"):
            problem = _subnormal(getattr(self, key))
            if problem:
                raise _KeyedError(key, problem)
        for value in self.save_at or ():
            problem = _subnormal(value)
            if problem:
                raise _KeyedError("save_at", problem)
        if self.t1 is not None and not self.t1 > self.t0:
            raise _KeyedError("t1", f"expected a time greater than t0 = {self.t0}, got {self.t1}")
        if self.t1 is not None and not math.isfinite(self.t1 - self.t0):
            raise _KeyedError(
                "t1",
                f"the span t1 - t0 = {self.t1!r} - ({self.t0!r}) overflows to infinity; expected a "
                f"span below {sys.float_info.max:.4g}",
            )
        if self.save is not None and self.save_at is not None:
            raise _KeyedError("save_at", "give either save or save_at, not both")
        if self.save_at is not None:
            if len(self.save_at) < 2:
                raise _KeyedError("save_at", "expected at least 2 save times")
            if any(b <= a for a, b in zip(self.save_at, self.save_at[1:], strict=False)):
                raise _KeyedError("save_at", "expected strictly increasing times")
            if not math.isfinite(self.save_at[-1] - self.save_at[0]):
                raise _KeyedError(
                    "save_at",
                    f"the span {self.save_at[-1]!r} - ({self.save_at[0]!r}) overflows to infinity; "
                    f"expected a span below {sys.float_info.max:.4g}",
                )
            if self.save_at[0] < self.t0 or (self.t1 is not None and self.save_at[-1] > self.t1):
                raise _KeyedError(
                    "save_at", f"expected times within [t0, t1] = [{self.t0}, {self.t1}]"
                )
        return self


class SolverSection(BaseModel):
    """`[solver]`: the method, the dtype and the keys the families declare
    (`Family.solver_keys`, typed here); other keys are extras, which the family of the
    run reads, and each family refuses the keys it does not take
    (`Family.check_solver_keys`)."""

    model_config = ConfigDict(
        extra="allow", strict=True, allow_inf_nan=False, use_attribute_docstrings=True
    )
    method: str | None = None
    """the integrator (ODE: tsit5 ... `sim methods`; SDE: euler, milstein, heun, sra1, shark;
    PDE: etdrk1-4 on a periodic box, an ODE method on a bounded one; MD: verlet, langevin,
    nose_hoover)"""
    dtype: Literal["float32", "float64"] | None = None
    """the precision of the run (float64 by default; PDE and MD may take float32)"""

    @pydantic.model_validator(mode="after")
    def _normal(self):
        # A tolerance or first step of 1e-320 is 0 where the hardware flushes subnormals.
        for key in type(self).model_fields:
            value = getattr(self, key)
            problem = _subnormal(value) if isinstance(value, float) else None
            if problem:
                raise _KeyedError(key, problem)
        return self

    @property
    def extras(self) -> dict[str, Any]:
        """The keys given that no family declares, key -> value."""
        return dict(self.model_extra or {})

    def given(self) -> list[str]:
        """Every key the section gives, declared or extra."""
        declared = [key for key in type(self).model_fields if getattr(self, key) is not None]
        return declared + list(self.extras)


class OutputSection(_Section):
    """`[output]`: where `sim run` writes (relative to the config's folder), how many
    saved frames it holds in memory per chunk at most, and how often it checkpoints (and
    a sweep within a chunk advanced frame by frame): every `checkpoint_every` saved
    frames, every `checkpoint_seconds` of wall time, or both (at the first chunk end after
    either is due); with neither, every 5 minutes. `xdmf = true` (PDE runs) also writes
    an XDMF sidecar beside the file once it is complete (`sim._xdmf`), for ParaView.
    None of these changes the numbers a run computes: a run may be resumed with others."""

    file: str | None = None
    """the output file, relative to the config's folder (`-o` replaces it); none: the
    config's name with .h5 in the working folder"""
    chunk: int | None = Field(default=None, ge=1)
    """the most saved frames held in memory and written at once (none: 16 MiB of them)"""
    checkpoint_every: int | None = Field(default=None, ge=1)
    """checkpoint every this many saved frames"""
    checkpoint_seconds: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, json_schema_extra={"unit": "s"}
    )
    """checkpoint every this many seconds of wall time (with neither key: every 300 s)"""
    xdmf: bool = False
    """PDE runs: also write an XDMF file beside the output, for ParaView and VisIt"""


class ChecksSection(_Section):
    """`[checks]`: the bounds beyond which a run counts as blown up (`sim run` stops with
    exit code 1 naming the step, time and quantity, keeping the last good checkpoint; a
    sweep flags the run failed). Checked at saved frames. Each family declares its own
    (`Family.checks`: key, default and meaning; `sim models NAME` lists them); a key of
    another family is an error when the config is resolved against its model. Loosening
    a bound and resuming is allowed: `[checks]` is not part of what a resumed run must
    share with its start."""


Scalar = bool | int | float | str
Value = Scalar | list[Any] | dict[str, Any]


class EventSection(_Section):
    """One `[[events]]` entry of an ODE config: a trigger condition (`when`, such as
    "x < 0", fired when it becomes true) or timed (`at`, increasing times after the start),
    the assignments made at the event (`set`: state or parameter = expression or number),
    and whether the run ends there (`terminal`)."""

    when: str | None = None
    """a condition (`x < 0`, comparisons joined by and, or, not): the event fires when it
    becomes true"""
    at: list[float] | None = Field(default=None, json_schema_extra={"unit": "time"})
    """increasing times at which the event fires (instead of `when`)"""
    set: dict[str, str | float | int] = {}
    """state or parameter = expression or number, evaluated just before the event"""
    terminal: bool = False
    """whether the run ends at the event"""

    @pydantic.model_validator(mode="after")
    def _one_trigger(self):
        if (self.when is None) == (self.at is None):
            raise _KeyedError(
                "when", 'expected either when = "condition" or at = [times], not both or neither'
            )
        if self.at is not None:
            if not self.at:
                raise _KeyedError("at", "expected at least one time")
            if any(b <= a for a, b in zip(self.at, self.at[1:], strict=False)):
                raise _KeyedError("at", f"expected increasing times, got {self.at}")
        if not self.set and not self.terminal:
            raise _KeyedError(
                "set",
                "an event that sets nothing and does not end the run does nothing: give set = { "
                "... } or terminal = true",
            )
        return self


class ConfigSpec(_Section):
    """The sections every config may have; `spec_class` adds the families' own."""

    model: ModelSection
    """the model and its options"""
    params: dict[str, Value] = {}
    """parameter values by name (`sim models NAME` lists them); missing ones take the
    model's defaults, unknown ones are an error"""
    initial: dict[str, Value] = {}
    """the initial state: a value per state (ODE, SDE); a field's `kind` and its options,
    an expression per field, or `file` and `dataset` (PDE)"""
    time: TimeSection = TimeSection()
    """the span, the save times and the step"""
    solver: SolverSection = SolverSection()
    """the method and its settings"""
    data: dict[str, Value] | None = None
    """the observations a fit, profile or posterior is computed from"""
    fit: dict[str, Value] | None = None
    """the free quantities, the loss and the optimiser"""
    infer: dict[str, Value] | None = None
    """priors, noise model and NUTS settings"""
    sweep: dict[str, Value] | None = None
    """the swept quantities and how their values are laid out"""
    events: list[EventSection] | None = None
    """events of an ODE run, one `[[events]]` table each"""
    experiments: list[dict[str, Value]] | None = None
    """several experiments fitted together, one `[[experiments]]` table each (instead of
    `[data]`)"""
    output: OutputSection = OutputSection()
    """where a run is written, its chunks and checkpoints"""
    checks: ChecksSection = ChecksSection()
    """the bounds beyond which a run counts as blown up"""


_SPEC_CLASSES: dict[tuple[int, ...], type[ConfigSpec]] = {}


def spec_class() -> type[ConfigSpec]:
    """The schema of a config: the shared sections with what the registered families
    add (their own sections, `[time]` and `[solver]` keys and `[checks]`)."""
    from ._family import families

    known = families()
    signature = tuple(id(f) for f in known)
    if signature not in _SPEC_CLASSES:
        time_keys = {k: v for f in known for k, v in f.time_keys.items()}
        checks = {k: (float | None, Field(default=None, gt=0)) for f in known for k in f.checks}
        sections = {name: (kind | None, None) for f in known for name, kind in f.sections.items()}
        solver_keys = {k: v for f in known for k, v in f.solver_keys.items()}
        time = pydantic.create_model("TimeSection", __base__=TimeSection, **time_keys)
        solver = pydantic.create_model("SolverSection", __base__=SolverSection, **solver_keys)
        checks_section = pydantic.create_model("ChecksSection", __base__=ChecksSection, **checks)
        _SPEC_CLASSES[signature] = pydantic.create_model(
            "ConfigSpec",
            __base__=ConfigSpec,
            time=(time, time()),
            solver=(solver, solver()),
            checks=(checks_section, checks_section()),
            **sections,
        )
    return _SPEC_CLASSES[signature]


# The seeds a config or option may give: what `jax.random.key` takes (a signed 64-bit
# integer, and simjax files store it as one); negative ones are refused.
SEED_MAX = 2**63 - 1


def seed_problem(seed: object) -> str | None:
    """Why `seed` cannot seed a run (a PRNG key, a sampler), or None."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        return f"expected a whole number from 0 to 2**63 - 1, got {seed!r}"
    if not 0 <= seed <= SEED_MAX:
        shown = f"{seed}" if seed.bit_length() <= 256 else f"an integer of {seed.bit_length()} bits"
        return (
            f"expected a whole number from 0 to 2**63 - 1 = {SEED_MAX} (what the PRNG takes), "
            f"got {shown}"
        )
    return None


class _KeyedError(ValueError):
    """Raised inside validators to name the offending key within the section."""

    def __init__(self, key: str, message: str):
        self.key = key
        self.message = message
        super().__init__(message)


class Config:
    """A validated config: `spec` (the sections), `raw` (the merged TOML dict) and origin.

    Arguments:
        raw: the TOML content as a dict (after overrides).
        path: the file it came from (None for a config built in Python); relative paths
            inside it resolve against its folder.

    Raises:
        ConfigError: naming the file, the key path and what was expected.
    """

    def __init__(self, raw: dict[str, Any], path: str | Path | None = None):
        self.raw = raw
        self.path = Path(path) if path is not None else None
        self.source = str(path) if path is not None else "<config>"
        self.spec = _validate(raw, self.source)

    @property
    def base_dir(self) -> Path:
        return self.path.parent if self.path is not None else Path.cwd()

    def resolve_path(self, value: str | Path) -> Path:
        """A path named inside the config, relative to the config's folder."""
        p = Path(value)
        return p if p.is_absolute() else self.base_dir / p

    def input_files(self) -> list[Path]:
        """Every file this config reads: itself and `named_inputs`. A command's output may
        be none of them."""
        return ([] if self.path is None else [self.path]) + list(self.named_inputs().values())

    def named_inputs(self) -> dict[str, Path]:
        """The files this config names for its run to read, by the key that names each:
        the `file` of every section but `[output]` (`initial.file`, `data.file`, a
        family's start file such as `system.file`), each experiment's
        (`experiments.1.file`) and the model's own file (`model.source` or
        `model.sbml`). With the resolved config they are the run's identity
        (`sim._identity`)."""
        files: dict[str, Path] = {}
        for section, value in self.raw.items():
            if (
                section != "output"
                and isinstance(value, dict)
                and isinstance(value.get("file"), str)
            ):
                files[f"{section}.file"] = self.resolve_path(value["file"])
        for i, experiment in enumerate(self.raw.get("experiments") or []):
            if isinstance(experiment, dict) and isinstance(experiment.get("file"), str):
                files[f"experiments.{i}.file"] = self.resolve_path(experiment["file"])
        model = self.raw.get("model")
        if isinstance(model, dict):  # the model's own file: a Python file or an SBML file
            if isinstance(model.get("source"), str):
                files["model.source"] = self.resolve_path(split_source(model["source"])[0])
            if isinstance(model.get("sbml"), str):
                files["model.sbml"] = self.resolve_path(model["sbml"])
        return files

    def error(self, key: str, message: str) -> ConfigError:
        """A `ConfigError` about `key` of this config."""
        return ConfigError(self.source, key, message)

    def with_overrides(self, overrides: list[str]) -> Config:
        """A new config with `KEY=VALUE` overrides applied by dotted path."""
        raw = _deep_copy(self.raw)
        for item in overrides:
            apply_override(raw, item)
        return Config(raw, self.path)

    def to_toml(self) -> str:
        """The config as TOML text."""
        return tomli_w.dumps(_drop_none(self.raw))

    def __repr__(self) -> str:
        return f"Config({self.source!r}, model={self.spec.model.name!r})"


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Read and validate a TOML config, applying `KEY=VALUE` overrides by dotted path.

    Arguments:
        path: the TOML file.
        overrides: strings like `"params.alpha=0.6"`; the value is read as a TOML value
            (a bare word that is not valid TOML is taken as a string).

    Returns:
        A `Config`.

    Raises:
        ConfigError: missing or unreadable file, malformed TOML, an unknown section or
            key, a wrong type or range; the message names the file and key path.

    Example:
        >>> config = load_config("experiments/lotka_volterra.toml", ["params.alpha=0.6"])
    """
    path = Path(path)
    if path.is_dir():
        raise ConfigError(path, "", "is a folder; expected a TOML config file")
    # Only a regular file is read: opening a FIFO blocks until a writer comes, and a
    # device (/dev/zero, /dev/urandom) reads without end.
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ConfigError(path, "", "no such file; expected a TOML config file") from None
    except (OSError, ValueError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else _unreadable(e)
        raise ConfigError(path, "", f"cannot be read ({e.__class__.__name__}: {reason})") from None
    if not stat.S_ISREG(mode):
        raise ConfigError(
            path, "", f"is {_file_kind(mode)}, not a regular file; expected a TOML config file"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(path, "", "no such file; expected a TOML config file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(
            path, "", f"cannot be read as UTF-8 text ({e.__class__.__name__})"
        ) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(path, "", f"malformed TOML: {e}") from None
    except RecursionError:
        raise ConfigError(path, "", "malformed TOML: arrays or tables nested too deeply") from None
    except ValueError as e:  # an integer of more than 4300 digits (Python's limit)
        raise ConfigError(path, "", f"malformed TOML: {_unreadable(e)}") from None
    for item in overrides:
        try:
            apply_override(raw, item)
        except ConfigError:
            raise
        except ValueError as e:  # as above, in a --set value
            key = str(item).partition("=")[0].strip()[:80]
            raise ConfigError("--set", key, f"the value cannot be read: {_unreadable(e)}") from None
    return Config(raw, path)


def _unreadable(e: Exception) -> str:
    """Why TOML text that parses cannot become values (one line)."""
    text = str(e)
    if "digits" in text and "integer" in text:
        limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
        return f"an integer with more than {limit} digits"
    return text.splitlines()[0] if text.strip() else type(e).__name__


def _file_kind(mode: int) -> str:
    """What a file that is not a regular file is."""
    for test, what in (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return what
    return "a special file"


def parse_value(text: str) -> Any:
    """A `--set` value: TOML syntax (numbers, booleans, arrays, quoted strings) or a bare string."""
    try:
        parsed = tomllib.loads(f"v = {text}")
    except tomllib.TOMLDecodeError:
        return text
    except RecursionError:
        raise ConfigError(
            "--set", text[:40], "the value nests arrays or tables too deeply"
        ) from None
    # One value: text that goes on to more keys or tables ("1\n[time]...") is a string.
    return parsed["v"] if list(parsed) == ["v"] else text


def apply_override(raw: dict[str, Any], item: str) -> None:
    """Set `KEY=VALUE` into `raw` in place, creating tables along the dotted path."""
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(
            "--set", item, "expected KEY=VALUE with a dotted key, e.g. params.alpha=0.6"
        )
    parts = key.split(".")
    if any(not p for p in parts):
        raise ConfigError("--set", key, "expected a dotted key path like params.alpha")
    sections = tuple(spec_class().model_fields)
    if parts[0] not in sections:
        raise ConfigError(
            "--set",
            key,
            f"unknown section {parts[0]!r} (sections: "
            f"{', '.join(sections)}).{did_you_mean(parts[0], sections)}",
        )
    node = raw
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(
                "--set",
                ".".join(parts[: i + 1]),
                "is a value, not a table; cannot set a key inside it",
            )
        node = child
    node[parts[-1]] = parse_value(value.strip())


def _validate(raw: dict[str, Any], source: str) -> ConfigSpec:
    try:
        return spec_class().model_validate(raw)
    except pydantic.ValidationError as e:
        raise _to_config_error(e, raw, source) from None
    except RecursionError:
        raise ConfigError(source, "", "arrays or tables nested too deeply") from None


def _to_config_error(exc: pydantic.ValidationError, raw: dict, source: str) -> ConfigError:
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"] if not _is_union_tag(p)]
    key = ".".join(loc)
    ctx = err.get("ctx") or {}
    inner = ctx.get("error")
    if isinstance(inner, _KeyedError):
        section = loc[0] if loc else ""
        return ConfigError(
            source, f"{section}.{inner.key}" if section else inner.key, inner.message
        )
    kind = err["type"]
    if kind == "extra_forbidden":
        parent = loc[:-1]
        allowed = _allowed_keys(parent)
        name = loc[-1]
        where = "section" if not parent else "key"
        hint = did_you_mean(name, allowed)
        return ConfigError(
            source, key, f"unknown {where} (expected one of: {', '.join(allowed)}).{hint}"
        )
    if kind == "missing":
        return ConfigError(source, key, "required key is missing")
    value = err.get("input")
    if isinstance(value, float) and not math.isfinite(value):
        # A union of types reports its first member (a boolean); NaN and inf are numbers.
        return ConfigError(source, key, f"expected a finite number, got {value!r}")
    expected = _EXPECTED.get(kind)
    if kind == "greater_than":
        expected = f"expected a number > {ctx['gt']}"
    elif kind == "greater_than_equal":
        expected = f"expected a number >= {ctx['ge']}"
    elif expected is None:
        expected = err["msg"][0].lower() + err["msg"][1:]
    return ConfigError(source, key, f"{expected}, got {value!r}")


_EXPECTED = {
    "float_type": "expected a number",
    "int_type": "expected a whole number",
    "string_type": "expected a string",
    "bool_type": "expected true or false",
    "list_type": "expected an array",
    "dict_type": "expected a table",
    "model_type": "expected a table",
    "model_attributes_type": "expected a table",
    "literal_error": "expected one of float32, float64",
}


def _is_union_tag(part) -> bool:
    return isinstance(part, str) and (part in ("float", "bool", "str", "int") or "[" in part)


def _allowed_keys(parent: list[str]) -> list[str]:
    model: type[BaseModel] = spec_class()
    for part in parent:
        field = model.model_fields.get(part)
        if (
            field is None
            or not isinstance(field.annotation, type)
            or not issubclass(field.annotation, BaseModel)
        ):
            return []
        model = field.annotation
    return list(model.model_fields)


def _deep_copy(raw: Any) -> Any:
    if isinstance(raw, dict):
        return {k: _deep_copy(v) for k, v in raw.items()}
    if isinstance(raw, list):
        return [_deep_copy(v) for v in raw]
    return raw


def _drop_none(raw: Any) -> Any:
    if isinstance(raw, dict):
        return {k: _drop_none(v) for k, v in raw.items() if v is not None}
    if isinstance(raw, list):
        return [_drop_none(v) for v in raw]
    return raw
