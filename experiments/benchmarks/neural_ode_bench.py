"""Neural ODE training step: simjax against torchdiffeq on the spiral of Chen et al. (2018).

The task of torchdiffeq's `examples/ode_demo.py`: data from dy/dt = (y^3) A,
A = [[-0.1, 2], [-2, -0.1]], y0 = (2, 0), 1000 save points on [0, 25]; a network
Linear(2, 50) - tanh - Linear(50, 2) on y^3; minibatches of 20 windows of 10 save
points; dopri5 at rtol 1e-7, atol 1e-9; Adam at 1e-2; mean squared error. Both sides
start from the same weights, run in float64, and backpropagate through the solver's
operations (simjax: recursive checkpointing; torchdiffeq: `odeint`, autograd through
the steps). A second pair uses the continuous adjoint on both sides (simjax
`backsolve`, torchdiffeq `odeint_adjoint`).

A training step is: draw a minibatch, solve, loss, gradient, Adam update. Each side
trains for `--steps` steps per round from the same starting weights; the reported time
per step is the best round of `--rounds` interleaved rounds (the least disturbed by other
load). Torch runs on one thread (see `TorchSide`). Number of vector-field evaluations per step is reported beside the time, since
adaptive solvers do data-dependent work.

Usage: python experiments/benchmarks/neural_ode_bench.py [--steps 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import sim  # noqa: F401  (float64)
from inference import Trainer, Trajectories, simulate_states
from physics.ode import NeuralOde
from solvers import OdeSolver

A = np.array([[-0.1, 2.0], [-2.0, -0.1]])
RTOL, ATOL = 1e-7, 1e-9
WIDTH, BATCH, WINDOW, LR = 50, 20, 10, 1e-2


def spiral_data() -> Trajectories:
    truth = NeuralOde(features="cubic", depth=0, initial=(2.0, 0.0))
    params = {"net": ({"weight": jnp.asarray(A.T), "bias": jnp.zeros(2)},)}
    t = jnp.linspace(0.0, 25.0, 1000)
    ys = simulate_states(truth, params, t, jnp.array([[2.0, 0.0]]), OdeSolver(method="dopri5", rtol=RTOL, atol=ATOL))
    return Trajectories(None, ("y1", "y2"), np.asarray(t), np.asarray(ys))


class JaxSide:
    def __init__(self, data: Trajectories, params, adjoint: str, max_steps: int):
        self.model = NeuralOde(features="cubic", width=WIDTH, depth=1)
        solver = OdeSolver(method="dopri5", rtol=jnp.asarray(RTOL), atol=jnp.asarray(ATOL), adjoint=adjoint, max_steps=max_steps)
        self.trainer = Trainer(self.model, optax.adam(LR), solver=solver, window=WINDOW, batch_size=BATCH)
        self.time = jnp.asarray(data.time)
        self.values = jnp.asarray(data.values)
        self.params = params
        self.seed = 0
        start = time.perf_counter()
        state, loss = self.trainer.step(self.trainer.init(params, jax.random.key(0)), self.time, self.values)
        jax.block_until_ready(state)
        self.compile_seconds = time.perf_counter() - start
        self._nfe = jax.jit(
            lambda p, key: _steps_per_minibatch(self.trainer, self.model, p, self.time, self.values, key)
        )

    def run(self, steps: int) -> tuple[float, float, float]:
        """Train `steps` steps from the starting weights; seconds per step, last loss,
        vector-field evaluations per step (dopri5: 6 per step taken, plus 1)."""
        self.seed += 1
        state = self.trainer.init(self.params, jax.random.key(self.seed))
        jax.block_until_ready(state)
        nfe = []
        start = time.perf_counter()
        for _ in range(steps):
            state, loss = self.trainer.step(state, self.time, self.values)
        jax.block_until_ready(state)
        seconds = (time.perf_counter() - start) / steps
        for i in range(5):
            nfe.append(float(self._nfe(state.params, jax.random.key(1000 + i))))
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
        self.weights = [np.asarray(w) for layer in params["net"] for w in (layer["weight"], layer["bias"])]
        self.rng = np.random.default_rng(0)

        class Func(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Sequential(torch.nn.Linear(2, WIDTH), torch.nn.Tanh(), torch.nn.Linear(WIDTH, 2))
                self.nfe = 0

            def forward(self, t, y):
                self.nfe += 1
                return self.net(y**3)

        self.func = Func()

    def reset(self):
        with self.torch.no_grad():
            for p, w in zip(self.func.parameters(), self.weights):
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="training steps per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (best is reported)")
    parser.add_argument("--max-steps", type=int, default=4096, help="simjax solver max_steps")
    parser.add_argument("--no-adjoint", action="store_true", help="skip the continuous-adjoint pair")
    args = parser.parse_args()

    import torch

    data = spiral_data()
    params = NeuralOde(features="cubic", width=WIDTH, depth=1).default_params()
    pairs = [("discretise-then-differentiate", "recursive_checkpoint", False)]
    if not args.no_adjoint:
        pairs.append(("continuous adjoint", "backsolve", True))
    print(f"jax {jax.__version__}, torch {torch.__version__}, float64, {args.steps} steps x {args.rounds} rounds")
    for label, adjoint, torch_adjoint in pairs:
        j = JaxSide(data, params, adjoint, args.max_steps)
        t = TorchSide(data, params, torch_adjoint)
        best_j = best_t = None
        for _ in range(args.rounds):
            rj = j.run(args.steps)
            rt = t.run(args.steps)
            best_j = rj if best_j is None or rj[0] < best_j[0] else best_j
            best_t = rt if best_t is None or rt[0] < best_t[0] else best_t
        print(f"\n{label}: simjax {adjoint} vs torchdiffeq {'odeint_adjoint' if torch_adjoint else 'odeint'}")
        print(f"  simjax      {best_j[0] * 1e3:8.2f} ms/step  (loss after {args.steps} steps {best_j[1]:.2e}, "
              f"~{best_j[2]:.0f} evaluations per forward solve; compile {j.compile_seconds:.1f} s)")
        print(f"  torchdiffeq {best_t[0] * 1e3:8.2f} ms/step  (loss after {args.steps} steps {best_t[1]:.2e}, "
              f"{best_t[2]:.0f} evaluations per step, forward and backward)")
        print(f"  ratio       {best_t[0] / best_j[0]:8.1f}x faster")


if __name__ == "__main__":
    main()
