"""Bad observation files and fit sections: one clear line, exit code 2, nothing written."""

import os

import h5py
import numpy as np
import pytest

from sim.cli import main

YEARS = np.arange(0.0, 11.0)
PREY = 30.0 + YEARS
PREDATOR = 5.0 + 0.5 * YEARS

CONFIG = """
[model]
name = "lotka_volterra"
[time]
t0 = 0.0
{time_extra}
[data]
file = "obs.h5"
time = "/t"
[data.observables]
prey = "/prey"
predator = "/predator"
{data_extra}
[fit]
free = ["alpha", "initial.prey"]
{fit_extra}
"""


def write_obs(path, **datasets):
    values = {"t": YEARS, "prey": PREY, "predator": PREDATOR}
    values.update(datasets)
    with h5py.File(path, "w") as f:
        for key, value in values.items():
            if value is None:
                continue
            if isinstance(value, dict):
                f.create_group(key)
            else:
                f[key] = value


def unsorted():
    t = YEARS.copy()
    t[4], t[5] = t[5], t[4]
    return t


CASES = {
    # name: (datasets to change, time_extra, data_extra, fit_extra, fragment)
    "missing_dataset": ({"predator": None}, "", "", "", "/predator: no such dataset"),
    "dataset_is_group": ({"predator": {}}, "", "", "", "is a group"),
    "shape_mismatch": ({"prey": PREY[:-2]}, "", "", "", "does not match the 11 observation times"),
    "unsorted_times": ({"t": unsorted()}, "", "", "", "unsorted"),
    "duplicate_times": ({"t": np.r_[YEARS[:5], YEARS[4], YEARS[6:]]}, "", "", "", "duplicate time"),
    "non_finite_times": (
        {"t": np.r_[YEARS[:3], np.nan, YEARS[4:]]},
        "",
        "",
        "",
        "expected finite times",
    ),
    "infinite_values": ({"prey": np.r_[PREY[:3], np.inf, PREY[4:]]}, "", "", "", "infinity"),
    # (a value whose square overflows: the fit's loss was infinite, exit 0 with mse)
    "huge_values": (
        {"prey": np.r_[PREY[:3], 1e308, PREY[4:]]},
        "",
        "",
        "",
        "magnitude at most 1e150",
    ),
    "times_after_span": ({}, "t1 = 5.0", "", "", "after the simulated end"),
    "times_before_span": ({}, "", "time_offset = 2.0", "", "before the simulated start"),
    "text_dataset": ({"prey": np.array([b"a"] * 11)}, "", "", "", "expected numbers"),
    "two_dim_times": ({"t": np.ones((11, 2))}, "", "", "", "1-D array of times"),
    "nonpositive_lognormal": (
        {"prey": np.r_[PREY[:3], -1.0, PREY[4:]]},
        "",
        "",
        'loss = "lognormal"',
        "positive observations",
    ),
    "all_missing": (
        {"prey": np.full(11, np.nan), "predator": np.full(11, np.nan)},
        "",
        "",
        "",
        "every observation is missing",
    ),
    "bad_sigma": (
        {"sp": np.zeros(11)},
        "",
        '[data.sigma]\nprey = "/sp"',
        "",
        "positive standard deviations",
    ),
    "unknown_observable": ({}, "", "", "", None),
    "unknown_free": ({}, "", "", "", None),
    "unknown_loss": ({}, "", "", 'loss = "cauchy"', "fit.loss"),
    "unknown_optimizer": ({}, "", "", 'optimizer = "newton"', "fit.optimizer"),
    "bad_bounds": ({}, "", "", "bounds = { alpha = [1.0, 0.5] }", "fit.bounds.alpha"),
    "unknown_fit_key": ({}, "", "", "fre = 1", "fit.fre"),
    "bad_weight": ({}, "", "", "weights = { prey = -1.0 }", "fit.weights.prey"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_data_and_fit_sections(case, tmp_cwd, capsys):
    datasets, time_extra, data_extra, fit_extra, fragment = CASES[case]
    write_obs(tmp_cwd / "obs.h5", **datasets)
    text = CONFIG.format(time_extra=time_extra, data_extra=data_extra, fit_extra=fit_extra)
    if case == "unknown_observable":
        text = text.replace('predator = "/predator"', 'predatr = "/predator"')
        fragment = "Perhaps you meant 'predator'"
    if case == "unknown_free":
        text = text.replace(
            'free = ["alpha", "initial.prey"]\n',
            'free = ["alpha", "initial.prey", "initial.pray"]\n',
            1,
        )
        fragment = "Perhaps you meant 'prey'"
    if case == "times_before_span":
        text = text.replace('time = "/t"', 'time = "/t"\ntime_offset = 2.0').replace(
            "time_offset = 2.0\n[fit]", "[fit]"
        )
    (tmp_cwd / "fit.toml").write_text(text)
    (tmp_cwd / "keep.h5").write_bytes(b"precious")
    before = sorted(os.listdir(tmp_cwd))
    with pytest.raises(SystemExit) as info:
        main(["fit", "fit.toml", "-o", "keep.h5", "--quiet"])
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert fragment in lines[0], lines[0]
    assert ("obs.h5" in lines[0]) or ("fit.toml" in lines[0])
    assert sorted(os.listdir(tmp_cwd)) == before
    assert (tmp_cwd / "keep.h5").read_bytes() == b"precious"


def test_times_that_the_time_offset_makes_equal_are_refused(tmp_cwd, capsys):
    # 5 and 5 + 1e-15 are distinct, but both are -999995.0 after subtracting 1e6: the
    # observations were fitted as if taken at one time.
    write_obs(tmp_cwd / "obs.h5", t=np.r_[5.0, 5.0 + 1e-15, 6.0 + YEARS[2:]])
    text = (
        CONFIG.format(time_extra="", data_extra="", fit_extra="")
        .replace('time = "/t"', 'time = "/t"\ntime_offset = 1e6')
        .replace("t0 = 0.0", "t0 = -999995.0")
    )
    (tmp_cwd / "fit.toml").write_text(text)
    with pytest.raises(SystemExit) as info:
        main(["fit", "fit.toml", "-o", "out.h5", "--quiet"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert "obs.h5" in err and "/t" in err and "same time" in err and "time_offset" in err, err
    assert not (tmp_cwd / "out.h5").exists()


def test_missing_data_file_and_folder(tmp_cwd, capsys):
    (tmp_cwd / "fit.toml").write_text(CONFIG.format(time_extra="", data_extra="", fit_extra=""))
    with pytest.raises(SystemExit) as info:
        main(["fit", "fit.toml", "--quiet"])
    assert info.value.code == 2 and "obs.h5: no such file" in capsys.readouterr().err
    (tmp_cwd / "obs.h5").mkdir()
    with pytest.raises(SystemExit) as info:
        main(["fit", "fit.toml", "--quiet"])
    assert info.value.code == 2 and "is a folder" in capsys.readouterr().err
    (tmp_cwd / "junk.h5").write_bytes(b"not hdf5 at all")
    with pytest.raises(SystemExit) as info:
        main(["fit", "fit.toml", "--data", "junk.h5", "--quiet"])
    assert info.value.code == 2 and "not a readable HDF5 file" in capsys.readouterr().err
