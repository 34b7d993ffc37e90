"""Without -o, no command replaces a file: each writes its result to the one default place
(the working folder, named after its input; a config's `[output] file` relative to the
config), and where a file is there already it refuses in one line, exit 2, before any
work, the earlier result left byte for byte. With -o, the user asked: it is replaced."""

from pathlib import Path

import h5py
import numpy as np
import pytest

from tests.sim.test_hostile import check, cli, folder  # noqa: F401  (folder: a fixture)

# command line -> the file it writes without -o (the folder's configs: tests/sim/test_hostile.py)
DEFAULTS = {
    "run": (["run", "lv.toml", "-q"], "lv.h5"),
    "sweep": (["sweep", "sweep.toml", "-q"], "sweep.h5"),
    "fit": (["fit", "lv_fit.toml", "-q"], "lv_fit_fit.h5"),
    "infer": (["infer", "lv_fit.toml", "-q"], "lv_fit_posterior.h5"),
    "profile": (["profile", "lv_fit.toml", "-q"], "lv_fit_profile.h5"),
    "plot": (["plot", "earlier.h5", "-q"], "earlier.png"),
}


@pytest.mark.parametrize("command", list(DEFAULTS))
def test_without_o_an_existing_result_is_never_replaced(command, folder, capsys):
    argv, default = DEFAULTS[command]
    with h5py.File("earlier.h5", "w") as f:  # (what `sim plot` is given: a run it can draw)
        f.attrs["format"] = "simjax.run"
        f["time"] = np.linspace(0.0, 1.0, 5)
        f["observables/x"] = np.linspace(1.0, 2.0, 5)
    Path(default).write_bytes(b"the result of an earlier run with other settings")
    line = check(folder, argv, capsys, default)
    assert "exists already" in line and f"-o {default}" in line, line


def test_output_file_of_a_config_is_not_replaced_either(folder, capsys):
    Path("named.toml").write_text(Path("lv.toml").read_text() + '[output]\nfile = "kept.h5"\n')
    Path("kept.h5").write_bytes(b"an earlier result")
    line = check(folder, ["run", "named.toml", "-q"], capsys, "kept.h5")
    assert "named by named.toml: output.file" in line, line


def test_a_second_run_without_o_refuses_and_with_o_replaces(tmp_cwd, capsys):
    Path("lv.toml").write_text('[model]\nname = "lotka_volterra"\n[time]\nt1 = 5.0\nsave = 6\n')
    code, err = cli(["run", "lv.toml", "-q"], capsys)
    assert code == 0 and Path("lv.h5").is_file(), err
    first = Path("lv.h5").read_bytes()
    code, err = cli(["run", "lv.toml", "-q", "--set", "params.alpha=0.6"], capsys)
    assert code == 2 and "lv.h5: exists already" in err and Path("lv.h5").read_bytes() == first, err
    code, err = cli(["run", "lv.toml", "-q", "-o", "lv.h5", "--set", "params.alpha=0.6"], capsys)
    assert code == 0 and Path("lv.h5").read_bytes() != first, err
