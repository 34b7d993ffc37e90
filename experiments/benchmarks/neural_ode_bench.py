"""Neural ODE training: simjax against torchdiffeq on the spiral of Chen et al. (2018),
time per step and time to a trained model.

The task of torchdiffeq's `examples/ode_demo.py`: data from dy/dt = (y^3) A,
A = [[-0.1, 2], [-2, -0.1]], y0 = (2, 0), 1000 save points on [0, 25]; a network
Linear(2, 50) - tanh - Linear(50, 2) on y^3; minibatches of 20 windows of 10 save
points; dopri5 at rtol 1e-7, atol 1e-9; Adam at 1e-2; mean squared error. Both sides
start from the same weights and run in float64. Two pairs, both reported:
  - discretise-then-differentiate: simjax `recursive_checkpoint` (backpropagation
    through the solver's operations) against torchdiffeq `odeint` (autograd through
    the steps);
  - continuous adjoint: simjax `backsolve` against torchdiffeq `odeint_adjoint`.

A training step is: draw a minibatch, solve, loss, gradient, Adam update. simjax runs
both ways of solving a minibatch (`Trainer(batch=...)`): "system", the windows stacked
into one system with shared steps and one error norm over the batch, which is how
torchdiffeq solves it (the same work: the headline ratio), and "windows", each window
vmapped with its own steps (each window meets the tolerances on its own, at the cost of
the hardest window's number of steps for the whole batch).

Time to a trained model: each side starts fresh in this process (simjax: a new
`Trainer`, so its step is traced and compiled, with the persistent compilation cache
off; torch: a new module and optimiser) and trains `--train-steps` steps (default 2,000,
`ode_demo.py`'s number of iterations); the wall time
includes everything from building the trainer to the last step's result. simjax's
first step (trace + compile + one step) is printed separately. Both trained models are
then scored the same way: MSE of torchdiffeq `odeint` solves (no gradient) from the
observed state at 99 fixed window starts over 10 save points, against the data.
One measurement per side and pair (a fresh compilation cannot be repeated cheaply).

Time per step: after that, each side trains `--steps` steps per round from the same
starting weights, in `--rounds` interleaved rounds; reported: the median time per step
over the rounds with the min-max spread, and the ratio of the medians. Torch runs on
one thread (see `TorchSide`). Vector-field evaluations per step are reported beside the
time, since adaptive solvers do data-dependent work.

Usage: python experiments/benchmarks/neural_ode_bench.py [--steps 30] [--rounds 5]
           [--train-steps 2000] [--no-adjoint]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("SIMJAX_CACHE_DIR", "")  # compile times are measured, not cache loads

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import sim  # noqa: E402

sim.configure_jax()  # float64, the compilation cache, XLA's options (as the `sim` command)
from inference import Trainer, Trajectories, simulate_states  # noqa: E402
from physics.ode import NeuralOde  # noqa: E402
from solvers import OdeSolver  # noqa: E402

A = np.array([[-0.1, 2.0], [-2.0, -0.1]])
RTOL, ATOL = 1e-7, 1e-9
WIDTH, BATCH, WINDOW, LR = 50, 20, 10, 1e-2
BATCHES = ("system", "windows")  # simjax's two ways of solving a minibatch (Trainer)
EVAL_STARTS = np.arange(0, 990, 10)  # 99 fixed windows for scoring a trained model


def spiral_data() -> Trajectories:
    truth = NeuralOde(features="cubic", depth=0, initial=(2.0, 0.0))
    params = {"net": ({"weight": jnp.asarray(A.T), "bias": jnp.zeros(2)},)}
    t = jnp.linspace(0.0, 25.0, 1000)
    ys = simulate_states(
        truth, params, t, jnp.array([[2.0, 0.0]]), OdeSolver(method="dopri5", rtol=RTOL, atol=ATOL)
    )
    return Trajectories(None, ("y1", "y2"), np.asarray(t), np.asarray(ys))


def torch_weights(params) -> list[np.ndarray]:
    """The network's weights in torch.nn.Linear's order and layout."""
    return [np.asarray(w) for layer in params["net"] for w in (layer["weight"], layer["bias"])]


class JaxSide:
    """simjax's `Trainer`. Building one builds a new optimiser, so its first step is
    traced and compiled afresh."""

    def __init__(self, data: Trajectories, params, adjoint: str, max_steps: int, batch: str):
        self.model = NeuralOde(features="cubic", width=WIDTH, depth=1)
        solver = OdeSolver(
            method="dopri5",
            rtol=jnp.asarray(RTOL),
            atol=jnp.asarray(ATOL),
            adjoint=adjoint,
            max_steps=max_steps,
        )
        self.trainer = Trainer(
            self.model, optax.adam(LR), solver=solver, window=WINDOW, batch_size=BATCH, batch=batch
        )
        self.batch = batch
        self.time = jnp.asarray(data.time)
        self.values = jnp.asarray(data.values)
        self.params = params
        self.seed = 0
        self._nfe = None

    def train(self, steps: int) -> dict:
        """Train from the starting weights: first step (trace + compile + step) and the
        whole run timed; the trained parameters and the last losses."""
        start = time.perf_counter()
        state = self.trainer.init(self.params, jax.random.key(0))
        state, loss = self.trainer.step(state, self.time, self.values)
        jax.block_until_ready(state)
        first = time.perf_counter() - start
        losses = [loss]
        for _ in range(steps - 1):
            state, loss = self.trainer.step(state, self.time, self.values)
            losses.append(loss)
        jax.block_until_ready(state)
        total = time.perf_counter() - start
        return {
            "total": total,
            "first": first,
            "params": state.params,
            "last_loss": float(np.mean(losses[-10:])),
        }

    def run(self, steps: int) -> tuple[float, float, float]:
        """Train `steps` steps from the starting weights; seconds per step, last loss,
        vector-field evaluations per step (dopri5: 6 per step taken, plus 1)."""
        self.seed += 1
        state = self.trainer.init(self.params, jax.random.key(self.seed))
        jax.block_until_ready(state)
        start = time.perf_counter()
        for _ in range(steps):
            state, loss = self.trainer.step(state, self.time, self.values)
        jax.block_until_ready(state)
        seconds = (time.perf_counter() - start) / steps
        if self._nfe is None:
            count = _system_evaluations if self.batch == "system" else _steps_per_minibatch
            self._nfe = jax.jit(
                lambda p, key: count(self.trainer, self.model, p, self.time, self.values, key)
            )
        nfe = [float(self._nfe(state.params, jax.random.key(1000 + i))) for i in range(5)]
        return seconds, float(loss), float(np.mean(nfe))


def _steps_per_minibatch(trainer, model, params, time, values, key):
    """dopri5 evaluations of the slowest window of a minibatch (vmapped windows advance
    in lockstep, so the slowest one sets the work), forward pass only."""
    n_traj, _, n_time = values.shape
    starts = jax.random.randint(key, (BATCH,), 0, n_time - WINDOW + 1)

    def one(s):
        ts = jax.lax.dynamic_slice_in_dim(time, s, WINDOW)
        y0 = values[0, :, s]
        return sim.simulate(model, params, ts, initial=y0, solver=trainer.solver).stats["num_steps"]

    return 6 * jnp.max(jax.vmap(one)(starts)) + 1


def _system_evaluations(trainer, model, params, time, values, key):
    """dopri5 evaluations of a minibatch solved as one system, forward pass only."""
    starts = jax.random.randint(key, (BATCH,), 0, values.shape[2] - WINDOW + 1)
    sol, _ = trainer.solve_system(params, time, values, jnp.zeros(BATCH, int), starts)
    return 6 * sol.num_steps + 1


class TorchSide:
    def __init__(self, data: Trajectories, params, adjoint: bool):
        import torch
        import torchdiffeq

        torch.set_default_dtype(torch.float64)
        # One thread: the tensors are tiny ([20, 50]), and spare threads only spin and
        # contend on a loaded machine (JAX runs these small kernels on one thread too).
        torch.set_num_threads(1)
        self.torch = torch
        self.odeint = torchdiffeq.odeint_adjoint if adjoint else torchdiffeq.odeint
        self.t = torch.tensor(data.time)
        self.y = torch.tensor(data.values[0].T)  # [T, 2]
        self.weights = torch_weights(params)
        self.rng = np.random.default_rng(0)

        class Func(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Sequential(
                    torch.nn.Linear(2, WIDTH), torch.nn.Tanh(), torch.nn.Linear(WIDTH, 2)
                )
                self.nfe = 0

            def forward(self, t, y):
                self.nfe += 1
                return self.net(y**3)

        self.func = Func()
        self.reset()

    def reset(self, weights=None):
        with self.torch.no_grad():
            for p, w in zip(
                self.func.parameters(), self.weights if weights is None else weights, strict=False
            ):
                p.copy_(self.torch.tensor(w))
        self.optimizer = self.torch.optim.Adam(self.func.parameters(), lr=LR)

    def step(self) -> float:
        torch = self.torch
        self.optimizer.zero_grad()
        s = torch.from_numpy(self.rng.integers(0, len(self.t) - WINDOW + 1, BATCH))
        y0 = self.y[s]
        target = torch.stack([self.y[s + i] for i in range(WINDOW)], dim=0)
        # autonomous: every window runs over the same relative times (as ode_demo.py does)
        pred = self.odeint(self.func, y0, self.t[:WINDOW], rtol=RTOL, atol=ATOL, method="dopri5")
        loss = torch.mean((pred - target) ** 2)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def run(self, steps: int) -> tuple[float, float, float]:
        self.reset()
        self.step()  # warm-up, not timed
        self.reset()
        self.func.nfe = 0
        start = time.perf_counter()
        for _ in range(steps):
            loss = self.step()
        seconds = (time.perf_counter() - start) / steps
        return seconds, loss, self.func.nfe / steps

    def score(self, weights) -> float:
        """MSE of `odeint` solves with these weights from the observed states at the
        fixed window starts (one batched solve, no gradient)."""
        torch = self.torch
        self.reset(weights)
        s = torch.from_numpy(EVAL_STARTS)
        target = torch.stack([self.y[s + i] for i in range(WINDOW)], dim=0)
        with torch.no_grad():
            pred = self.odeint(
                self.func, self.y[s], self.t[:WINDOW], rtol=RTOL, atol=ATOL, method="dopri5"
            )
        return float(torch.mean((pred - target) ** 2))


def torch_train(data: Trajectories, params, adjoint: bool, steps: int) -> dict:
    """Fresh torch side trained `steps` steps, timed from building it."""
    start = time.perf_counter()
    side = TorchSide(data, params, adjoint)
    losses = [side.step() for _ in range(steps)]
    total = time.perf_counter() - start
    weights = [p.detach().numpy().copy() for p in side.func.parameters()]
    return {"total": total, "weights": weights, "last_loss": float(np.mean(losses[-10:]))}


def spread(samples) -> str:
    """median (min-max), in ms."""
    s = np.asarray(samples) * 1e3
    return f"{np.median(s):8.2f} ms/step ({s.min():.2f}-{s.max():.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="training steps per timed round")
    parser.add_argument(
        "--rounds", type=int, default=5, help="interleaved rounds (median and spread reported)"
    )
    parser.add_argument(
        "--train-steps",
        type=int,
        default=2000,
        help="steps of the time-to-a-trained-model runs (ode_demo.py: 2000)",
    )
    parser.add_argument("--max-steps", type=int, default=4096, help="simjax solver max_steps")
    parser.add_argument(
        "--no-adjoint", action="store_true", help="skip the continuous-adjoint pair"
    )
    args = parser.parse_args()

    import torch
    import torchdiffeq

    data = spiral_data()
    params = NeuralOde(features="cubic", width=WIDTH, depth=1).default_params()
    pairs = [("discretise-then-differentiate", "recursive_checkpoint", False)]
    if not args.no_adjoint:
        pairs.append(("continuous adjoint", "backsolve", True))
    print(
        f"jax {jax.__version__}, torch {torch.__version__}, torchdiffeq {torchdiffeq.__version__}, "
        "float64; "
        f"{os.cpu_count()} cores; time per step: {args.rounds} interleaved rounds of {args.steps} "
        "steps; "
        f"time to a trained model: {args.train_steps} steps",
        flush=True,
    )
    for label, adjoint, torch_adjoint in pairs:
        load_before = os.getloadavg()
        torch_name = "odeint_adjoint" if torch_adjoint else "odeint"
        # time to a trained model, each side from a fresh start
        sides = {batch: JaxSide(data, params, adjoint, args.max_steps, batch) for batch in BATCHES}
        trained = {batch: side.train(args.train_steps) for batch, side in sides.items()}
        tt = torch_train(data, params, torch_adjoint, args.train_steps)
        t = TorchSide(data, params, torch_adjoint)
        scores = {batch: t.score(torch_weights(jt["params"])) for batch, jt in trained.items()}
        t_score = t.score(tt["weights"])
        start_score = t.score(torch_weights(params))
        # time per step, interleaved rounds
        rounds = {batch: [] for batch in BATCHES}
        rt = []
        for _ in range(args.rounds):
            for batch, side in sides.items():
                rounds[batch].append(side.run(args.steps))
            rt.append(t.run(args.steps))
        load_after = os.getloadavg()
        mt = np.median([r[0] for r in rt])
        print(
            f"\n{label}: simjax {adjoint} vs torchdiffeq {torch_name}; load average before "
            f"{load_before[0]:.2f}, "
            f"after {load_after[0]:.2f}"
        )
        print(
            f"  per step     torchdiffeq {spread([r[0] for r in rt])}  "
            f"({np.mean([r[2] for r in rt]):.0f} "
            f"evaluations per step, forward and backward; the batch as one system)"
        )
        for batch in BATCHES:
            rj, jt = rounds[batch], trained[batch]
            mj = np.median([r[0] for r in rj])
            what = "the batch as one system" if batch == "system" else "the slowest window"
            print(f"  batch = {batch!r}:")
            print(
                f"    per step   simjax      {spread([r[0] for r in rj])}  "
                f"(~{np.mean([r[2] for r in rj]):.0f} "
                f"evaluations per forward solve, {what})"
            )
            ratio = mt / mj
            print(
                f"               simjax {ratio:.1f}x faster per step"
                if ratio >= 1
                else f"               simjax {1 / ratio:.1f}x slower per step"
            )
            print(
                f"    simjax first step (trace + compile + one step) {jt['first']:.1f} s; compile "
                "about "
                f"{jt['first'] - mj:.1f} s (first step minus a median step)"
            )
            steady = mj * (args.train_steps - 1)
            print(
                f"    time to a trained model ({args.train_steps} steps from a fresh start): "
                f"simjax {jt['total']:.1f} s "
                f"(of which first step {jt['first']:.1f} s, the other steps "
                f"{jt['total'] - jt['first']:.1f} s; "
                f"{steady:.1f} s at the median step time), torchdiffeq {tt['total']:.1f} s; "
                + (
                    f"simjax {tt['total'] / jt['total']:.1f}x faster"
                    if tt["total"] >= jt["total"]
                    else f"simjax {jt['total'] / tt['total']:.1f}x slower"
                )
            )
            breakeven = (jt["first"] - mj) / max(mt - mj, 1e-12) if mt > mj else float("inf")
            print(
                f"    break-even: simjax's compile is paid back after about {breakeven:.0f} steps"
            )
            print(
                "    trained models' MSE on 99 fixed windows (torchdiffeq odeint solves): simjax "
                f"{scores[batch]:.2e}, "
                f"torchdiffeq {t_score:.2e} (starting weights {start_score:.2e}); mean minibatch "
                "loss of the last "
                f"10 steps: simjax {jt['last_loss']:.2e}, torchdiffeq {tt['last_loss']:.2e}",
                flush=True,
            )


if __name__ == "__main__":
    main()
