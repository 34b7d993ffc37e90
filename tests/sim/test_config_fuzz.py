"""Property tests of the config parser: whatever TOML document or `--set` text a user
hands in, `sim.load_config` returns a config or raises a `sim.InputError` (a one-line
error naming the key), and so does validating it into a run (`sim.setup`, which builds
everything a run needs but does not simulate); nothing else escapes."""

import contextlib
import math
import tempfile
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings, strategies as st

import sim
import sim._limits

SECTIONS = (
    "model",
    "params",
    "initial",
    "grid",
    "system",
    "time",
    "solver",
    "output",
    "sweep",
    "data",
    "fit",
    "infer",
    "bogus",
)
KEYS = (
    "name",
    "alpha",
    "beta",
    "prey",
    "predator",
    "sigma",
    "rho",
    "diffusivity",
    "viscosity",
    "points",
    "domain",
    "kind",
    "t0",
    "t1",
    "save",
    "save_at",
    "dt",
    "steps",
    "save_every",
    "method",
    "rtol",
    "atol",
    "max_steps",
    "adjoint",
    "dtype",
    "file",
    "dataset",
    "chunk",
    "checkpoint_every",
    "lattice",
    "cells",
    "density",
    "temperature",
    "mode",
    "samples",
    "params",
    "linspace",
    "values",
    "uniform",
    "chains",
    "priors",
    "dist",
    "loc",
    "scale",
    "observables",
    "free",
    "x",
    "\u00e9",
    "\u202e",
    "\U0001f600",
    "a.b",
    "",
)
MODELS = (
    "lotka_volterra",
    "lorenz",
    "robertson",
    "heat",
    "burgers",
    "heat_fd",
    "lennard_jones",
    "no_such_model",
    "",
)

scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(
        min_value=-(10**40), max_value=10**40
    ),  # beyond 64 bits: Python's tomllib reads them
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(MODELS),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)
    ),
    max_leaves=8,
)
sections = st.one_of(
    st.dictionaries(st.sampled_from(KEYS), values, max_size=5),
    scalars,
    st.lists(scalars, max_size=2),
)
documents = st.dictionaries(st.sampled_from(SECTIONS), sections, max_size=6)


def with_model(doc: dict, name: str | None) -> dict:
    # Most documents name a model, so validation goes past the first check.
    if name is not None:
        doc = dict(doc)
        model = dict(doc.get("model", {})) if isinstance(doc.get("model"), dict) else {}
        model["name"] = name
        doc["model"] = model
    return doc


@contextlib.contextmanager
def small_machine():
    """Size checks against a fixed 4 GiB, so no example allocates much on any machine."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(sim._limits, "physical_memory", lambda: 4 * 2**30)
        yield


def one_line(e: Exception, path=None) -> None:
    text = str(e).strip()
    assert "\n" not in text and "\r" not in text, text
    if path is not None:
        assert str(path) in text, text


FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(doc=documents, name=st.one_of(st.none(), st.sampled_from(MODELS)))
def test_any_toml_document_loads_or_fails_with_an_input_error(doc, name):
    doc = with_model(doc, name)
    with tempfile.TemporaryDirectory() as folder, small_machine():
        path = Path(folder) / "c.toml"
        path.write_text(tomli_w.dumps(doc))
        try:
            config = sim.load_config(path)
        except sim.ConfigError as e:
            one_line(e, path)
            return
        try:
            sim.setup(config)
        except sim.InputError as e:
            one_line(e)


@FUZZ
@given(raw=st.binary(max_size=200))
def test_any_bytes_load_or_fail_with_an_input_error(raw):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.toml"
        path.write_bytes(raw)
        try:
            sim.load_config(path)
        except sim.ConfigError as e:
            one_line(e, path)


BASE = """
[model]
name = "lotka_volterra"
[time]
t1 = 1.0
save = 3
"""


@FUZZ
@given(
    key=st.one_of(
        st.sampled_from([f"{s}.{k}" for s in SECTIONS for k in KEYS[:12]]), st.text(max_size=20)
    ),
    value=st.one_of(
        st.text(max_size=20),
        values.map(
            lambda v: (
                tomli_w.dumps({"v": v})[4:].strip()
                if not isinstance(v, float) or math.isfinite(v)
                else str(v)
            )
        ),
    ),
    separator=st.sampled_from(["=", "", "==", " = ", "\n"]),
)
def test_any_set_override_applies_or_fails_with_an_input_error(key, value, separator):
    with tempfile.TemporaryDirectory() as folder, small_machine():
        path = Path(folder) / "c.toml"
        path.write_text(BASE)
        try:
            config = sim.load_config(path, [f"{key}{separator}{value}"])
        except sim.ConfigError as e:
            one_line(e)
            return
        try:
            sim.setup(config)
        except sim.InputError as e:
            one_line(e)


@FUZZ
@given(item=st.text(max_size=60))
def test_any_set_text_applies_or_fails_with_an_input_error(item):
    with tempfile.TemporaryDirectory() as folder, small_machine():
        path = Path(folder) / "c.toml"
        path.write_text(BASE)
        try:
            sim.setup(sim.load_config(path, [item]))
        except sim.InputError as e:
            one_line(e)


numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-5, max_value=10**6),
    st.floats(min_value=1e-3, max_value=50.0),
)
positive = st.floats(min_value=1e-3, max_value=50.0)
anything = st.one_of(numbers, st.text(max_size=6), st.booleans(), st.lists(numbers, max_size=3))
near_valid = st.fixed_dictionaries(
    {
        "model": st.fixed_dictionaries(
            {
                "name": st.sampled_from(
                    [
                        "lotka_volterra",
                        "lorenz",
                        "robertson",
                        "heat",
                        "burgers",
                        "heat_fd",
                        "kdv",
                        "lennard_jones",
                    ]
                )
            }
        ),
        "time": st.fixed_dictionaries(
            # Mostly sensible times, so that validation reaches the model, grid and solver.
            {"t1": st.one_of(positive, positive, positive, numbers)},
            optional={
                "t0": numbers,
                "save": st.one_of(
                    st.integers(min_value=2, max_value=50),
                    st.integers(min_value=-2, max_value=10**5),
                ),
                "dt": st.one_of(positive, numbers),
            },
        ),
    },
    optional={
        "params": st.dictionaries(
            st.sampled_from(
                [
                    "alpha",
                    "beta",
                    "gamma",
                    "delta",
                    "sigma",
                    "rho",
                    "diffusivity",
                    "viscosity",
                    "k1",
                    "x",
                ]
            ),
            anything,
            max_size=3,
        ),
        "initial": st.one_of(
            st.dictionaries(
                st.sampled_from(["prey", "predator", "x", "y", "z", "kind"]), anything, max_size=3
            ),
            st.fixed_dictionaries(
                {
                    "kind": st.one_of(
                        st.sampled_from(["sine", "gaussian", "random", "nope"]), st.text(max_size=5)
                    )
                }
            ),
        ),
        "solver": st.fixed_dictionaries(
            {},
            optional={
                "method": st.one_of(
                    st.sampled_from(["tsit5", "kvaerno5", "etdrk4", "etdrk2", "dopri8", "euler"]),
                    st.text(max_size=5),
                ),
                "rtol": numbers,
                "atol": numbers,
                "max_steps": st.integers(min_value=-3, max_value=10**12),
                "dtype": st.sampled_from(["float32", "float64", "float16"]),
                "order": anything,
            },
        ),
        "grid": st.fixed_dictionaries(
            {},
            optional={
                # Small grids, and now and then sizes no machine holds (refused before allocating).
                "points": st.lists(
                    st.one_of(
                        st.integers(min_value=-2, max_value=2**10), st.sampled_from([10**9, 2**40])
                    ),
                    max_size=3,
                ),
                "domain": st.lists(st.lists(numbers, max_size=3), max_size=3),
            },
        ),
        "system": st.fixed_dictionaries(
            {},
            optional={
                "lattice": st.sampled_from(["fcc", "bcc", "sc", "random", "hcp"]),
                "cells": st.one_of(
                    st.integers(min_value=-1, max_value=4),
                    st.sampled_from([10**5, [2, 2, 3], [1, 10**6, 1], 2.5]),
                ),
                "particles": st.one_of(st.integers(min_value=-1, max_value=64), st.just(10**12)),
                "density": st.one_of(positive, numbers),
                "temperature": numbers,
                "seed": st.integers(min_value=-1, max_value=2**70),
                "file": st.text(max_size=5),
            },
        ),
    },
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=near_valid)
def test_near_valid_configs_set_up_or_fail_with_an_input_error(doc):
    with tempfile.TemporaryDirectory() as folder, small_machine():
        path = Path(folder) / "c.toml"
        path.write_text(tomli_w.dumps(doc))
        try:
            sim.setup(sim.load_config(path))
        except sim.InputError as e:
            one_line(e, path)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=st.one_of(near_valid, documents.map(lambda d: with_model(d, "heat"))))
def test_many_more_configs_set_up_or_fail_with_an_input_error(doc):
    test_near_valid_configs_set_up_or_fail_with_an_input_error.hypothesis.inner_test(doc)
