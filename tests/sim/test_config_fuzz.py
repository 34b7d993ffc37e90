"""Property tests of the config parser: whatever TOML document or `--set` text a user
hands in, `sim.load_config` returns a config or raises a `sim.InputError` (a one-line
error naming the key), and so does validating it into a run (`sim.setup`); nothing else
escapes."""

import math
import tempfile
from pathlib import Path

import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim

SECTIONS = ("model", "params", "initial", "grid", "time", "solver", "output", "sweep", "data", "fit", "infer", "bogus")
KEYS = (
    "name", "alpha", "beta", "prey", "predator", "sigma", "rho", "diffusivity", "viscosity", "points", "domain",
    "kind", "t0", "t1", "save", "save_at", "dt", "steps", "save_every", "method", "rtol", "atol", "max_steps",
    "adjoint", "dtype", "file", "chunk", "checkpoint_every", "x", "é", "",
)
MODELS = ("lotka_volterra", "lorenz", "robertson", "heat", "burgers", "heat_fd", "no_such_model", "")

scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(MODELS),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)),
    max_leaves=8,
)
sections = st.dictionaries(st.sampled_from(KEYS), values, max_size=5)
documents = st.dictionaries(st.sampled_from(SECTIONS), sections, max_size=6).map(
    # Most documents name a model, so validation goes past the first check.
    lambda d: d
)


def with_model(doc: dict, name: str | None) -> dict:
    if name is not None:
        doc = dict(doc)
        model = dict(doc.get("model", {})) if isinstance(doc.get("model"), dict) else {}
        model["name"] = name
        doc["model"] = model
    return doc


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(doc=documents, name=st.one_of(st.none(), st.sampled_from(MODELS)))
def test_any_toml_document_loads_or_fails_with_an_input_error(doc, name):
    doc = with_model(doc, name)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.toml"
        path.write_text(tomli_w.dumps(doc))
        try:
            config = sim.load_config(path)
        except sim.InputError as e:
            assert "\n" not in str(e).strip() and str(path) in str(e)
            return
        try:
            sim.setup(config)
        except sim.InputError as e:
            assert "\n" not in str(e).strip()


@FUZZ
@given(raw=st.binary(max_size=200))
def test_any_bytes_load_or_fail_with_an_input_error(raw):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.toml"
        path.write_bytes(raw)
        try:
            sim.load_config(path)
        except sim.InputError as e:
            assert "\n" not in str(e).strip()


BASE = """
[model]
name = "lotka_volterra"
[time]
t1 = 1.0
save = 3
"""


@FUZZ
@given(
    key=st.one_of(st.sampled_from([f"{s}.{k}" for s in SECTIONS for k in KEYS[:12]]), st.text(max_size=20)),
    value=st.one_of(st.text(max_size=20), values.map(lambda v: tomli_w.dumps({"v": v})[4:].strip() if not isinstance(v, float) or math.isfinite(v) else str(v))),
    separator=st.sampled_from(["=", "", "==", " = "]),
)
def test_any_set_override_applies_or_fails_with_an_input_error(key, value, separator):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.toml"
        path.write_text(BASE)
        try:
            config = sim.load_config(path, [f"{key}{separator}{value}"])
        except sim.InputError as e:
            assert "\n" not in str(e).strip()
            return
        try:
            sim.setup(config)
        except sim.InputError as e:
            assert "\n" not in str(e).strip()


numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-5, max_value=10**6), st.floats(min_value=1e-3, max_value=50.0)
)
positive = st.floats(min_value=1e-3, max_value=50.0)
anything = st.one_of(numbers, st.text(max_size=6), st.booleans(), st.lists(numbers, max_size=3))
near_valid = st.fixed_dictionaries(
    {
        "model": st.fixed_dictionaries({"name": st.sampled_from(["lotka_volterra", "lorenz", "robertson", "heat", "burgers", "heat_fd", "kdv"])}),
        "time": st.fixed_dictionaries(
            # Mostly sensible times, so that validation reaches the model, grid and solver.
            {"t1": st.one_of(positive, positive, positive, numbers)},
            optional={"t0": numbers, "save": st.one_of(st.integers(min_value=2, max_value=50), st.integers(min_value=-2, max_value=10**5)), "dt": st.one_of(positive, numbers)},
        ),
    },
    optional={
        "params": st.dictionaries(st.sampled_from(["alpha", "beta", "gamma", "delta", "sigma", "rho", "diffusivity", "viscosity", "k1", "x"]), anything, max_size=3),
        "initial": st.one_of(
            st.dictionaries(st.sampled_from(["prey", "predator", "x", "y", "z", "kind"]), anything, max_size=3),
            st.fixed_dictionaries({"kind": st.one_of(st.sampled_from(["sine", "gaussian", "random", "nope"]), st.text(max_size=5))}),
        ),
        "solver": st.fixed_dictionaries(
            {},
            optional={
                "method": st.one_of(st.sampled_from(["tsit5", "kvaerno5", "etdrk4", "etdrk2", "dopri8", "euler"]), st.text(max_size=5)),
                "rtol": numbers, "atol": numbers, "max_steps": st.integers(min_value=-3, max_value=10**12), "dtype": st.sampled_from(["float32", "float64", "float16"]),
                "order": anything,
            },
        ),
        "grid": st.fixed_dictionaries(
            {}, optional={"points": st.lists(st.integers(min_value=-2, max_value=2**21), max_size=3), "domain": st.lists(st.lists(numbers, max_size=3), max_size=3)}
        ),
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=near_valid)
def test_near_valid_configs_set_up_or_fail_with_an_input_error(doc):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.toml"
        path.write_text(tomli_w.dumps(doc))
        try:
            sim.setup(sim.load_config(path))
        except sim.InputError as e:
            assert "\n" not in str(e).strip() and str(path) in str(e)
