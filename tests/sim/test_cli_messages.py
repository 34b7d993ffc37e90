"""What the `sim` command says: one error prefix, readable help, progress lines fit for a
log file, and times that separate compiling from the work."""

import io
import re
import shutil
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from sim._progress import Clock, Progress
from tests.helpers import cli_out as cli

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

ERROR_PATHS = [
    ["bogus"],
    ["run"],
    ["run", "x.toml", "--frobnicate"],
    ["infer", "x.toml", "--chains", "0"],
    ["fit", "x.toml", "--starts", "many"],
    ["run", "missing.toml"],
    ["models", "lorentz"],
    ["plot", "missing.h5"],
    ["sweep", "missing.toml"],
]


@pytest.mark.parametrize("argv", ERROR_PATHS, ids=" ".join)
def test_every_error_is_one_line_with_one_prefix(argv, tmp_cwd, capsys):
    code, out, err = cli(argv, capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert not re.search(r"(?i)\berror:.*\berror:", lines[0]), err  # one prefix, not two


def test_help_names_values_plainly_and_whole(capsys):
    code, out, _ = cli(["--help"], capsys)
    assert code == 0
    commands = out.split("Commands:")[1]
    assert "..." not in commands
    assert (
        "Run every point of CONFIG's [sweep], batched and sharded, into one" in commands
    )  # (wrapped, whole)
    for command in ("run", "sweep", "fit", "infer", "profile", "plot", "models"):
        code, out, _ = cli([command, "--help"], capsys)
        assert code == 0
        assert not re.search(r"\{\w+\}|<[\w\[\] ]+>", out), out  # no {config}, <path>, <list[str]>
    assert "Usage: sim models [OPTIONS] [NAME]" in out
    code, out, _ = cli(["run", "--help"], capsys)
    assert (
        "Usage: sim run [OPTIONS] CONFIG" in out
        and "--set KEY=VALUE" in out
        and "-o, --output FILE" in out
    )


def test_progress_off_a_terminal_is_a_line_per_tenth():
    stream = io.StringIO()  # (not a terminal)
    with Progress(enabled=True, description="work", stream=stream) as bar:
        bar.start(1000)
        for _ in range(1000):
            bar.advance()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert [
        int(re.match(r"work: ([\d,]+) of 1,000 \((\d+)%\)", line).group(1).replace(",", ""))
        for line in lines
    ] == list(range(100, 1001, 100))
    assert all(re.search(r", [\d,.]+/s, .+ elapsed, ETA .+$", line) for line in lines[:-1])
    assert lines[-1].endswith("done")
    silent = io.StringIO()
    with Progress(enabled=False, stream=silent) as bar:
        bar.start(10)
        bar.advance(10)
    assert silent.getvalue() == ""


def test_clock_leaves_compiling_out_of_the_loop():
    def f(x):
        return jnp.sin(x) * 3.25 + 1.0  # a program no other test compiles

    with Clock() as clock:
        with Progress(enabled=False) as bar:
            bar.start(2)
            jax.jit(f)(jnp.arange(7.0)).block_until_ready()  # compiles within the loop
            bar.advance()
            time.sleep(0.2)
            bar.advance()
    assert clock.compiling > 0.0
    assert 0.2 <= clock.looping < 0.2 + 0.1  # the sleep, without the compiling before it
    assert clock.compiling + clock.looping <= clock.total
    summary = clock.summary("2 steps")
    assert re.fullmatch(
        r"compiled in [\d.]+ m?s, 2 steps in [\d.]+ ms, [\d.]+ m?s in all", summary
    ), summary


def test_sim_run_log_has_plain_progress_and_split_times(tmp_cwd, capsys):
    shutil.copy(EXPERIMENTS / "lotka_volterra.toml", tmp_cwd)
    code, _, err = cli(["run", "lotka_volterra.toml", "-o", "lv.h5"], capsys)
    assert code == 0, err
    assert "\r" not in err
    lines = err.strip().splitlines()
    assert 1 <= len(lines) - 1 <= 10 and all(
        re.match(r"lotka_volterra: [\d,]+ of 200 \(\d+%\)", line) for line in lines[:-1]
    ), err
    assert lines[-2].startswith("lotka_volterra: 200 of 200 (100%)")
    assert re.fullmatch(
        r"wrote lv.h5: lotka_volterra; compiled in .+, 68 steps \(201 frames written\) in .+, .+ "
        r"in all",
        lines[-1],
    ), err
