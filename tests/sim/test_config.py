"""Config parsing, overrides and resolution against the model."""

import numpy as np
import pytest

import sim
from sim._config import Config, apply_override, parse_value

EXPERIMENTS = __import__("pathlib").Path(__file__).resolve().parents[2] / "experiments"


def write(tmp_path, text, name="c.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_example_configs_load_and_overrides_apply():
    config = sim.load_config(
        EXPERIMENTS / "lotka_volterra.toml", ["params.alpha=0.6", "time.save=11"]
    )
    assert config.spec.params["alpha"] == 0.6
    assert config.spec.time.save == 11
    result = sim.run(config)
    assert result.time.shape == (11,)
    assert result.params["alpha"] == pytest.approx(0.6)
    # Missing parameters take the model's defaults and the resolved TOML records them.
    assert "alpha = 0.6" in result.config and "gamma = 0.8" in result.config


def test_override_values_are_toml_typed():
    assert parse_value("0.6") == 0.6
    assert parse_value("[1, 2]") == [1, 2]
    assert parse_value("true") is True
    assert parse_value("tsit5") == "tsit5"
    raw = {"model": {"name": "x"}}
    apply_override(raw, "solver.method=dopri5")
    assert raw["solver"] == {"method": "dopri5"}


def test_defaults_fill_params_and_initial(tmp_path):
    path = write(tmp_path, '[model]\nname = "lotka_volterra"\n[time]\nt1 = 5.0\n')
    result = sim.run(sim.load_config(path))
    assert set(result.params) == {"alpha", "beta", "gamma", "delta"}
    assert result.initial["prey"] == 30.0
    assert result.time.shape == (101,)


def test_fixed_step_from_time_dt(tmp_path):
    path = write(
        tmp_path, '[model]\nname = "lotka_volterra"\n[time]\nt1 = 2.0\nsave = 3\ndt = 0.01\n'
    )
    result = sim.run(sim.load_config(path))
    assert result.stats["num_steps"] == 200


def test_relative_paths_resolve_against_config_folder(tmp_path):
    config = Config({"model": {"name": "lorenz"}, "time": {"t1": 1.0}}, tmp_path / "sub" / "c.toml")
    assert config.resolve_path("out.h5") == tmp_path / "sub" / "out.h5"


@pytest.mark.parametrize(
    "text, key, fragment",
    [
        (
            '[model]\nname = "lotka_voltera"\n[time]\nt1 = 1.0\n',
            "model.name",
            "Perhaps you meant 'lotka_volterra'",
        ),
        (
            '[model]\nname = "lorenz"\n[params]\nsgma = 1.0\n[time]\nt1 = 1.0\n',
            "params.sgma",
            "Perhaps you meant 'sigma'",
        ),
        (
            '[model]\nname = "lorenz"\n[params]\nsigma = -1.0\n[time]\nt1 = 1.0\n',
            "params.sigma",
            "positive",
        ),
        (
            '[model]\nname = "lorenz"\n[params]\nsigma = "ten"\n[time]\nt1 = 1.0\n',
            "params.sigma",
            "expected a number",
        ),
        (
            '[model]\nname = "lorenz"\n[initial]\nw = 1.0\n[time]\nt1 = 1.0\n',
            "initial.w",
            "no state component",
        ),
        (
            '[model]\nname = "lorenz"\n[time]\nt1 = 1.0\n[solver]\nmethod = "rk45"\n',
            "solver.method",
            "unknown ODE method",
        ),
        (
            '[model]\nname = "lorenz"\n[time]\nt1 = 1.0\n[solver]\nrtl = 1e-3\n',
            "solver.rtl",
            "Perhaps you meant 'rtol'",
        ),
        ('[model]\nname = "lorenz"\n[time]\nt0 = 1.0\n', "time.t1", "required"),
        (
            '[model]\nname = "lorenz"\ncolour = "red"\n[time]\nt1 = 1.0\n',
            "model.colour",
            "no option",
        ),
    ],
)
def test_resolution_errors_name_the_key(tmp_path, text, key, fragment):
    path = write(tmp_path, text)
    with pytest.raises(sim.ConfigError) as info:
        sim.run(sim.load_config(path))
    assert info.value.key == key
    assert fragment in str(info.value)
    assert str(path) in str(info.value)


def test_run_result_saves_layout(tmp_path):
    result = sim.run(sim.load_config(EXPERIMENTS / "lorenz.toml", ["time.t1=1.0", "time.save=11"]))
    path = result.save(tmp_path / "lorenz.h5")
    record = sim.read(path)
    assert record.format == "simjax.run"
    assert record.attrs["model"] == "lorenz"
    np.testing.assert_array_equal(record.observables["x"], result.observables["x"])
    np.testing.assert_array_equal(record["params/sigma"], 10.0)
    reloaded = sim.load_config(write(tmp_path, record.attrs["config"], "resolved.toml"))
    assert reloaded.spec.solver.method == "dopri8"
