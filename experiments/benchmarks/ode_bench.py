"""ODE benchmark: simjax against jitted diffrax and scipy on the same problem.

The problem: Lotka-Volterra at the lynx-hare parameters, t in [0, 20] with 201 save
points, rtol = 1e-6 and atol = 1e-8 for every solver (tsit5 for simjax and diffrax).

The sides, each called the way its users call it:
  - diffrax: `jax.jit` of a function calling `diffrax.diffeqsolve`, with the term,
    solver, step-size controller and save times built once and the function compiled
    before timing (what a diffrax user writes); also the same with the save times
    passed in as an argument, as `sim.simulate` takes them;
  - simjax from Python: `sim.simulate(model, params, t, ...)`, its public entry (one
    call of the program compiled for the model, solver and argument layout);
  - simjax inside the caller's `jax.jit` (the same diffrax program: compare with the
    first row);
  - scipy: `solve_ivp` LSODA and RK45, and `odeint` (Fortran LSODA), from Python.
The scipy ratios are against simjax called from Python (`sim.simulate`), not against
simjax inside a caller's jit. Also: gradient / forward time (reverse mode, and the
forward sensitivity equations), and the first call's trace + compile time (the
persistent compilation cache is off in this script, so that is a real compilation).

Timing: every function is called once to compile, then `--repeats` rounds in which the
functions take turns (interleaved, so a change in machine load hits all of them alike);
each round times a batch of calls of each function. Reported: the median time per call
over the rounds, with the min-max spread; ratios are of the medians. For the JAX sides
also the CPU time per call (of the process, all threads), which another job's load
on a shared machine disturbs less than wall time.

Run: python experiments/benchmarks/ode_bench.py [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

os.environ.setdefault("SIMJAX_CACHE_DIR", "")  # compile times measured, not cache loads

import diffrax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.integrate import odeint, solve_ivp  # noqa: E402

import sim  # noqa: E402

sim.configure_jax()  # float64, the compilation cache, XLA's options (as the `sim` command)
from solvers import OdeSolver  # noqa: E402

RTOL, ATOL = 1e-6, 1e-8


def interleaved(
    fns: dict, repeats: int, inner: dict, cpu: dict | None = None
) -> dict[str, np.ndarray]:
    """Seconds per call of each function in each of `repeats` rounds; in a round the
    functions take turns, each timed over `inner[name]` calls. With `cpu`, the CPU
    seconds per call (of the whole process: the calling thread and XLA's) go there."""
    for fn in fns.values():
        jax.block_until_ready(fn())
    samples = {name: [] for name in fns}
    cpu_samples = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            n = inner[name]
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(n):
                out = fn()
            jax.block_until_ready(out)
            samples[name].append((time.perf_counter() - start) / n)
            cpu_samples[name].append((time.process_time() - start_cpu) / n)
    if cpu is not None:
        cpu.update({name: np.asarray(s) for name, s in cpu_samples.items()})
    return {name: np.asarray(s) for name, s in samples.items()}


def show(s: np.ndarray, scale: float = 1e6) -> str:
    """median (min-max), in microseconds by default."""
    return f"{np.median(s) * scale:9.1f} ({s.min() * scale:.1f}-{s.max() * scale:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40, help="interleaved rounds")
    args = parser.parse_args()
    load_before = os.getloadavg()

    model = sim.get_model("lotka_volterra")
    params = model.default_params()
    initial = model.default_initial()
    t = jnp.linspace(0.0, 20.0, 201)
    solver = OdeSolver(method="tsit5", rtol=RTOL, atol=ATOL)
    y0 = model.initial_state(initial)

    # --- simjax's first call from Python: trace + compile + run
    start = time.perf_counter()
    jax.block_until_ready(sim.simulate(model, params, t, initial=initial, solver=solver))
    compile_s = time.perf_counter() - start

    def lv(t, y, p):
        x, z = y[0], y[1]
        return jnp.stack([p["alpha"] * x - p["beta"] * x * z, p["delta"] * x * z - p["gamma"] * z])

    # diffrax as its users write it: everything built once, one jitted call.
    term, tsit5 = diffrax.ODETerm(lv), diffrax.Tsit5()
    controller = diffrax.PIDController(rtol=RTOL, atol=ATOL)
    saveat = diffrax.SaveAt(ts=t)

    @jax.jit
    def diffrax_jit(p, y0):
        return diffrax.diffeqsolve(
            term,
            tsit5,
            t[0],
            t[-1],
            None,
            y0,
            p,
            saveat=saveat,
            stepsize_controller=controller,
            max_steps=4096,
        ).ys

    @jax.jit
    def diffrax_jit_t(p, y0, ts):
        """The same with the save times passed in (as `sim.simulate` takes them)."""
        return diffrax.diffeqsolve(
            term,
            tsit5,
            ts[0],
            ts[-1],
            None,
            y0,
            p,
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=controller,
            max_steps=4096,
        ).ys

    def ours(p):
        return sim.simulate(model, p, t, initial=initial, solver=solver).observables

    ours_jit = jax.jit(ours)
    # both compiled before timing (interleaved() also calls each once first)
    jax.block_until_ready(diffrax_jit(params, y0))
    jax.block_until_ready(diffrax_jit_t(params, y0, t))
    jax.block_until_ready(ours_jit(params))

    # scipy on the same problem and tolerances.
    p = {k: float(v) for k, v in params.items()}

    def lv_np(t, y):
        return [
            p["alpha"] * y[0] - p["beta"] * y[0] * y[1],
            p["delta"] * y[0] * y[1] - p["gamma"] * y[1],
        ]

    def lv_odeint(y, t):
        return lv_np(t, y)

    t_np, y0_np = np.asarray(t), np.asarray(y0)
    fns = {
        "diffrax": lambda: diffrax_jit(params, y0),
        "diffrax_t": lambda: diffrax_jit_t(params, y0, t),
        "simjax": lambda: ours(params),
        "simjax_jit": lambda: ours_jit(params),
        "LSODA": lambda: solve_ivp(
            lv_np, (0.0, 20.0), y0_np, method="LSODA", t_eval=t_np, rtol=RTOL, atol=ATOL
        ),
        "RK45": lambda: solve_ivp(
            lv_np, (0.0, 20.0), y0_np, method="RK45", t_eval=t_np, rtol=RTOL, atol=ATOL
        ),
        "odeint": lambda: odeint(lv_odeint, y0_np, t_np, rtol=RTOL, atol=ATOL),
    }
    inner = {
        "diffrax": 50,
        "diffrax_t": 50,
        "simjax": 50,
        "simjax_jit": 50,
        "LSODA": 5,
        "RK45": 5,
        "odeint": 20,
    }
    cpu: dict[str, np.ndarray] = {}
    s = interleaved(fns, args.repeats, inner, cpu)
    med = {k: float(np.median(v)) for k, v in s.items()}

    ref = solve_ivp(
        lv_np, (0.0, 20.0), y0_np, method="DOP853", t_eval=t_np, rtol=1e-12, atol=1e-12
    ).y
    prey = np.asarray(ours(params)["prey"])
    err = float(np.max(np.abs(prey - ref[0]) / np.abs(ref[0])))
    raw_vs_ours = float(np.max(np.abs(np.asarray(diffrax_jit(params, y0))[:, 0] - prey)))
    errs = {
        "LSODA": fns["LSODA"]().y[0],
        "RK45": fns["RK45"]().y[0],
        "odeint": fns["odeint"]()[:, 0],
    }
    errs = {k: float(np.max(np.abs(v - ref[0]) / np.abs(ref[0]))) for k, v in errs.items()}

    # Gradient / forward.
    def loss(p):
        obs = sim.simulate(model, p, t, initial=initial, solver=solver).observables
        return jnp.sum(obs["prey"] ** 2 + obs["predator"] ** 2)

    forward = jax.jit(loss)
    backward = jax.jit(jax.grad(loss))

    # The same gradient by the forward sensitivity equations (what `sim fit` with a
    # gradient optimiser and `sim infer` use for a few free quantities).
    names = list(params)

    def field(t, y, theta):
        return model.vector_field(t, y, dict(zip(names, theta, strict=False)))

    theta0 = jnp.stack([params[n] for n in names])
    sens0 = jnp.zeros((2, len(names)))

    @jax.jit
    def sensitivity_grad(theta):
        sol = solver.solve_sensitivities(field, t, y0, theta, sens0)
        cot = 2.0 * sol.ys  # d loss / d ys for loss = sum(ys ** 2)
        return jnp.einsum("tn,tnp->p", cot, sol.sensitivities)

    np.testing.assert_allclose(
        sensitivity_grad(theta0), jnp.stack([backward(params)[n] for n in names]), rtol=1e-4
    )
    g = interleaved(
        {
            "forward": lambda: forward(params),
            "reverse": lambda: backward(params),
            "sens": lambda: sensitivity_grad(theta0),
        },
        args.repeats,
        {"forward": 50, "reverse": 10, "sens": 20},
    )
    gmed = {k: float(np.median(v)) for k, v in g.items()}
    load_after = os.getloadavg()

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__} on "
        f"{jax.default_backend()}, "
        f"diffrax {diffrax.__version__}; load average before {load_before[0]:.2f}, after "
        f"{load_after[0]:.2f}"
    )
    print(
        "problem: Lotka-Volterra, t in [0, 20], 201 saves, tsit5, rtol 1e-6, atol 1e-8; "
        f"max relative error vs DOP853 at 1e-12: simjax {err:.1e}, "
        + ", ".join(f"{k} {v:.1e}" for k, v in errs.items())
        + f"; max |simjax - jitted diffrax| {raw_vs_ours:.1e}"
    )
    print(f"{args.repeats} interleaved rounds; per solve, median (min-max) in us")
    d = med["diffrax"]
    print(f"{'diffrax, jax.jit, from Python':36} {show(s['diffrax'])}   1.000")
    print(
        f"{'  the same, save times passed in':36} {show(s['diffrax_t'])}   "
        f"{med['diffrax_t'] / d:.3f}"
    )
    print(
        f"{'simjax sim.simulate, from Python':36} {show(s['simjax'])}   {med['simjax'] / d:.3f} of "
        "jitted diffrax's time"
    )
    print(
        f"{'simjax inside the caller jax.jit':36} {show(s['simjax_jit'])}   "
        f"{med['simjax_jit'] / d:.3f} of jitted diffrax's time"
    )
    cmed = {k: float(np.median(v)) for k, v in cpu.items()}
    print("CPU time per solve (the process's, all threads), median (min-max) in us:")
    for name, label in (
        ("diffrax", "diffrax, jax.jit, from Python"),
        ("diffrax_t", "  the same, save times passed in"),
        ("simjax", "simjax sim.simulate, from Python"),
        ("simjax_jit", "simjax inside the caller jax.jit"),
    ):
        print(f"{label:36} {show(cpu[name])}   {cmed[name] / cmed['diffrax']:.3f}")
    for name, label in (
        ("LSODA", "scipy solve_ivp LSODA"),
        ("RK45", "scipy solve_ivp RK45"),
        ("odeint", "scipy odeint (LSODA)"),
    ):
        print(
            f"{label:36} {show(s[name])}   simjax from Python {med[name] / med['simjax']:.2f}x "
            "faster "
            f"(inside jit {med[name] / med['simjax_jit']:.2f}x)"
        )
    print(f"{'forward (jitted loss)':36} {show(g['forward'])}")
    print(
        f"{'gradient, reverse mode':36} {show(g['reverse'])}   / forward = "
        f"{gmed['reverse'] / gmed['forward']:.2f}"
    )
    print(
        f"{'gradient, forward sensitivities':36} {show(g['sens'])}   / forward = "
        f"{gmed['sens'] / gmed['forward']:.2f}"
    )
    print(f"{'first call (trace + compile + run)':36} {compile_s:9.2f} s")


if __name__ == "__main__":
    main()
