"""Run every example config with each command it is written for and record, or check, a
digest of every dataset of every file it writes: shape, dtype, the SHA-256 of its bytes and a
few statistics that say how far two versions differ where the bytes do not agree.

    python experiments/compare_examples.py check experiments/example_digests.json
    python experiments/compare_examples.py record DIGESTS.json   # write the digests
    python experiments/compare_examples.py check DIGESTS.json    # compare with them
    python experiments/compare_examples.py check DIGESTS.json --rtol 1e-9  # allow rounding

Used before and after a change of the code that must not change what the examples compute:
`check` exits with 1 and names each dataset whose bytes differ (and by how much), 0 when every
dataset is as recorded. Sizes are cut where the full run takes minutes, so the whole set
runs in about five minutes on two cores. experiments/example_digests.json holds the digests of
one x86-64 Linux machine (jax and jaxlib 0.10.2, diffrax 0.7.2, equinox 0.13.8, numpyro
0.22.0): the bytes of floating-point results depend on the processor and the library
versions, so on another machine record the digests of the old code first and check the new
code against those. Datasets that measure the run rather than its result (wall-clock times)
are listed in `UNCOMPARED` and skipped. Two runs of the same code agree to the bit (checked:
26 runs, 370 datasets, NUTS chains and multistarts included).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

import sim

sim.configure_jax()  # float64, the compilation cache, XLA's options (as the `sim` command)
from sim.cli import main  # noqa: E402

HERE = Path(__file__).resolve().parent
BOEHM = "petab/Boehm_JProteomeRes2014/Boehm_JProteomeRes2014.yaml"

# name -> (command, input relative to experiments/, extra arguments)
RUNS: dict[str, tuple[str, str, list[str]]] = {
    "lotka_volterra": ("run", "lotka_volterra.toml", []),
    "lorenz": ("run", "lorenz.toml", []),
    "robertson": ("run", "robertson.toml", []),
    "predation": ("run", "predation.toml", []),
    "bouncing_ball": ("run", "bouncing_ball.toml", []),
    "gray_scott": ("run", "gray_scott.toml", ["--set", "time.t1=200.0"]),
    "gray_scott_text": ("run", "gray_scott_text.toml", ["--set", "time.t1=200.0"]),
    "kuramoto_sivashinsky": ("run", "kuramoto_sivashinsky.toml", []),
    "kolmogorov_flow": ("run", "kolmogorov_flow.toml", []),
    "kdv_soliton": ("run", "kdv_soliton.toml", []),
    "burgers_shock": ("run", "burgers_shock.toml", []),
    "heat_dirichlet": ("run", "heat_dirichlet.toml", []),
    "lj_fluid": ("run", "lj_fluid.toml", ["--set", "time.steps=400"]),
    "lotka_volterra_sweep": ("sweep", "lotka_volterra_sweep.toml", []),
    "sir_boarding_school_sweep": ("sweep", "sir_boarding_school.toml", []),
    "lotka_volterra_sobol": ("sweep", "lotka_volterra_sobol.toml", ["--set", "sweep.samples=64"]),
    "lj_sweep": ("sweep", "lj_sweep.toml", ["--set", "time.steps=300"]),
    "lynx_hare_fit": ("fit", "lynx_hare.toml", []),
    "sir_boarding_school_fit": ("fit", "sir_boarding_school.toml", []),
    "heat_diffusivity_fit": ("fit", "heat_diffusivity_fit.toml", []),
    "lj_calibration": ("fit", "lj_calibration.toml", []),
    "lj_rdf_fit": (
        "fit",
        "lj_rdf_fit.toml",
        ["--set", "time.steps=1500", "--set", "fit.replicas=1", "--set", "fit.max_steps=2"],
    ),
    "sir_boarding_school_profile": ("profile", "sir_boarding_school.toml", []),
    "lynx_hare_posterior": (
        "infer",
        "lynx_hare.toml",
        ["--chains", "2", "--warmup", "100", "--samples", "100"],
    ),
    "heat_posterior": (
        "infer",
        "heat_diffusivity_fit.toml",
        ["--chains", "1", "--warmup", "100", "--samples", "100"],
    ),
    "boehm_evaluate": ("fit", BOEHM, ["--evaluate"]),
    "boehm_fit": ("fit", BOEHM, ["--starts", "2", "--set", "fit.max_steps=20"]),
}

# Datasets that describe how the run went on this machine, not what it computed.
UNCOMPARED = ("wall", "seconds", "elapsed", "timing")


def compared(name: str) -> bool:
    last = name.rsplit("/", 1)[-1]
    return not any(word in last for word in UNCOMPARED)


def digest(path: Path) -> dict[str, dict]:
    """Every dataset of the file at `path`: shape, dtype, SHA-256 of its bytes and, for
    numbers, the count of finite values, their minimum, maximum and sum."""
    found: dict[str, dict] = {}

    def visit(name: str, item) -> None:
        if not isinstance(item, h5py.Dataset) or not compared(name):
            return
        value = item[()]
        array = np.asarray(value)
        entry: dict = {"shape": list(array.shape), "dtype": str(array.dtype)}
        if array.dtype.kind in "fciub":
            entry["sha256"] = hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
            finite = array[np.isfinite(array)] if array.dtype.kind in "fc" else array
            if finite.size:
                entry["stats"] = [
                    int(finite.size),
                    float(np.min(finite.real)),
                    float(np.max(finite.real)),
                    float(np.sum(finite.real)),
                ]
        else:
            entry["sha256"] = hashlib.sha256(repr(value).encode()).hexdigest()
        found[name] = entry

    with h5py.File(path, "r") as file:
        file.visititems(visit)
    return found


def run_all(patterns: list[str]) -> dict[str, dict]:
    """Run each chosen example in a fresh folder and digest what it wrote."""
    results: dict[str, dict] = {}
    for name, (command, config, extra) in RUNS.items():
        if patterns and not any(p in name for p in patterns):
            continue
        began = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / f"{name}.h5"
            arguments = [command, str(HERE / config), "-o", str(out), "--quiet", *extra]
            try:
                main(arguments)
            except SystemExit as e:
                if e.code:
                    raise SystemExit(
                        f"{name}: `sim {' '.join(arguments)}` exited {e.code}"
                    ) from None
            results[name] = digest(out)
        print(f"{name}: {len(results[name])} datasets, {time.perf_counter() - began:.0f} s")
    return results


def differences(old: dict[str, dict], new: dict[str, dict], rtol: float) -> list[str]:
    """One line per dataset that is missing, new, or differs from what was recorded."""
    lines = []
    for run in sorted(set(old) | set(new)):
        if run not in new or run not in old:
            lines.append(f"{run}: {'not run now' if run not in new else 'not recorded'}")
            continue
        for name in sorted(set(old[run]) | set(new[run])):
            a, b = old[run].get(name), new[run].get(name)
            if a is None or b is None:
                lines.append(f"{run}:{name}: {'missing now' if b is None else 'new'}")
            elif (a["shape"], a["dtype"]) != (b["shape"], b["dtype"]):
                lines.append(
                    f"{run}:{name}: {a['shape']} {a['dtype']} -> {b['shape']} {b['dtype']}"
                )
            elif a["sha256"] != b["sha256"]:
                sa, sb = a.get("stats"), b.get("stats")
                if sa is not None and sb is not None and sa[0] == sb[0] and rtol > 0:
                    if np.allclose(sa[1:], sb[1:], rtol=rtol, atol=0):
                        continue
                lines.append(f"{run}:{name}: bytes differ; stats {sa} -> {sb}")
    return lines


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", nargs="?", default="check", choices=["record", "check"])
    parser.add_argument(
        "digests",
        nargs="?",
        type=Path,
        default=HERE / "example_digests.json",
        help="the digests file (default: experiments/example_digests.json)",
    )
    parser.add_argument("only", nargs="*", help="run only the examples whose name contains one")
    parser.add_argument(
        "--rtol",
        type=float,
        default=0.0,
        help="with check: accept differing bytes whose statistics agree to this tolerance",
    )
    args = parser.parse_args(argv)
    if args.action == "check":
        old = json.loads(args.digests.read_text())
        new = run_all(args.only)
        if args.only:
            old = {k: v for k, v in old.items() if k in new}
        lines = differences(old, new, args.rtol)
        for line in lines:
            print(line)
        print(f"{len(new)} runs, {sum(map(len, new.values()))} datasets: {len(lines)} differ")
        return 1 if lines else 0
    results = run_all(args.only)
    if args.only and args.digests.exists():
        results = {**json.loads(args.digests.read_text()), **results}
    args.digests.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(results)} runs in {args.digests}")
    return 0


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
