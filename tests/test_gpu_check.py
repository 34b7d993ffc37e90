"""experiments/benchmarks/gpu_check.py at its quick sizes, in a subprocess: every check
passes, the table has a row per case with positive finite numbers, and a check planted to
fail (a wrong exact decay) makes it exit 1."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "benchmarks" / "gpu_check.py"
CHECKS = 9  # heat 1, Taylor-Green 3, Lotka-Volterra 1, LJ 1, devices 3
ROWS = (  # the quick sizes' rows
    "spectral 2-D NS float64",
    "spectral 2-D NS float32",
    "spectral 3-D NS float64",
    "spectral 3-D NS float32",
    "MD LJ float32 108",
    "MD LJ float32 256",
    "MD LJ float32 500",
    "sweep Lotka-Volterra (batched tsit5)",
    "neural ODE training (spiral, dopri5)",
    "NUTS lynx-hare (inference.infer)",
)


def run(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--budget", "3600", *args],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=850,
        check=False,
    )


def verdicts(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(("PASS ", "FAIL "))]


def table(report: str, title: str) -> dict[str, list[str]]:
    """The rows of the report's table under `title`, by their first cell."""
    lines = report.split(f"## {title}", 1)[1].split("\n\n", 2)[1].splitlines()
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[2:]]
    return {r[0]: r for r in rows}


def number(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.mark.slow
def test_quick_run_passes_and_reports_every_case(tmp_path):
    done = run(tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = verdicts(done.stdout)
    assert len(lines) == CHECKS and all(v.startswith("PASS ") for v in lines), lines
    report = (tmp_path / "gpu_check.md").read_text()
    assert report in done.stdout  # the same Markdown on stdout and in the file
    assert "device: " in report and "JAX " in report
    checks = table(report, "Correctness")
    assert len(checks) == CHECKS and all(r[-1] == "PASS" for r in checks.values())
    rows = table(report, "Throughput")
    assert set(rows) == set(ROWS), sorted(set(rows) ^ set(ROWS))
    for name, (_, unit, size, rate, cpu_size, cpu_rate, ratio, compile_s) in rows.items():
        for value in (rate, cpu_rate, ratio):
            assert math.isfinite(number(value)) and number(value) > 0, (name, value)
        assert all(math.isfinite(float(c)) and float(c) >= 0 for c in compile_s.split(" / "))
        assert size and cpu_size and unit.endswith("/s"), (name, size, cpu_size, unit)


@pytest.mark.slow
def test_a_check_planted_to_fail_exits_1(tmp_path):
    done = run(tmp_path, "--only", "checks", "--plant-failure", "--out", "checks.md")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    lines = verdicts(done.stdout)
    failed = [v for v in lines if v.startswith("FAIL ")]
    assert len(lines) == CHECKS and len(failed) == 1, lines
    assert failed[0].startswith("FAIL heat 3-D 16^3 exact modal decay"), failed
    assert "| FAIL |" in (tmp_path / "checks.md").read_text()


def test_an_unknown_case_is_refused(tmp_path):
    done = run(tmp_path, "--only", "md,lattice_boltzmann")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "unknown case 'lattice_boltzmann'" in done.stderr
