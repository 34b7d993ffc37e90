"""Training ODE models (neural, hybrid or classic) on trajectories
(`inference._trajectories`).

Training is calibration of a pytree of parameters: minibatches of trajectory segments
(random windows of `window` consecutive save points, each started from its observed
first state), a mean squared error between `sim.simulate` and the data, gradients through
the solver, an optax optimiser, one compiled training step. A trained model is written
by `save_trained` (`inference._trained`).
"""

from __future__ import annotations

import dataclasses
import json
import time as _time
from collections.abc import Sequence
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

import sim
from physics.ode import OdeModel
from sim.core import Progress, batch_sharding, warn_if_float32
from solvers import OdeSolver, did_you_mean

from ._checkpoint import Checkpointer, fingerprint
from ._result_text import number
from ._trained import _options, load_trained as load_trained, save_trained
from ._trajectories import (
    Trajectories,
    load_trajectories as load_trajectories,
    save_trajectories as save_trajectories,
)


def simulate_states(
    model: OdeModel,
    params: PyTree,
    t: Float[Array, " T"],
    y0: Float[Array, "B n"],
    solver: OdeSolver | None = None,
) -> Float[Array, "B n T"]:
    """The model's state trajectories [B, n, T] from initial states y0 [B, n], saved at t.

    Pure and traceable; the B solves are batched with `jax.vmap`.

    Arguments:
        model: the ODE model.
        params: its parameters (missing ones take their defaults).
        t: the save times [T], increasing; the first is the initial time.
        y0: the initial states [B, n], n the model's state components in the order of
            `model.state_names`.
        solver: the ODE solver; None for `sim.simulate`'s default.

    Returns:
        The states [B, n, T], components in the order of `model.state_names`.
    """

    def one(y):
        traj = sim.simulate(model, params, t, initial=y, solver=solver)
        return jnp.stack([traj.observables[name] for name in model.state_names])

    return jax.vmap(one)(jnp.asarray(y0, dtype=float))


def trajectory_mse(
    model: OdeModel, params: PyTree, data: Trajectories, solver: OdeSolver | None = None
) -> float:
    """Mean squared error of whole trajectories, each solved from its first observed state
    over all of `data.time` (a held-out score: no window restarts from the data).

    Arguments:
        model: the ODE model.
        params: its parameters (missing ones take their defaults).
        data: the observed trajectories, with the model's state components in the order
            of `model.state_names`.
        solver: the ODE solver; None for `sim.simulate`'s default.

    Returns:
        The mean of the squared differences over every trajectory, component and save
        time (square of the state's units), a Python float.

    Raises:
        ValueError: the data's components are not the model's state, in its order.
    """
    _check_names(model, data)
    pred = simulate_states(
        model, params, jnp.asarray(data.time), jnp.asarray(data.initial()), solver
    )
    return float(jnp.mean((pred - jnp.asarray(data.values)) ** 2))


def _check_names(model: OdeModel, data: Trajectories) -> None:
    if tuple(data.names) != tuple(model.state_names):
        raise ValueError(
            f"the data's components {data.names} are not the state of model {model.name!r} "
            f"{tuple(model.state_names)}; load them with load_trajectories(path, model.state_names)"
        )


BATCHES = ("windows", "system")


def evenly_spaced(time: Array) -> Array:
    """Whether save times are evenly spaced, to 1e-9 of their span (traceable)."""
    gaps = jnp.diff(time)
    return jnp.all(jnp.abs(gaps - gaps[0]) <= 1e-9 * jnp.abs(time[-1] - time[0]))


class TrainState(eqx.Module):
    """What changes from one training step to the next.

    Attributes:
        params: all model parameters (free and fixed).
        opt_state: the optimiser's state for the free parameters.
        key: PRNG key for the next minibatch.
        step: steps taken.
    """

    params: PyTree
    opt_state: PyTree
    key: PRNGKeyArray
    step: Int[Array, ""]


class Trainer(eqx.Module):
    """A training strategy: which windows, which loss, which optimiser (`init`, `step`).

    Each step draws `batch_size` windows of `window` consecutive save points (a random
    trajectory and start), solves the model from each window's first observed state
    (vmapped), and takes one optimiser step on the mean squared error over the window's
    states, with gradients through the solver (its `adjoint`).

    The windows of a minibatch are solved each on its own (`batch = "windows"`: vmapped,
    each with its own step sizes, so that every window meets the tolerances), or as one
    system (`batch = "system"`: the windows stacked into one state on the grid they
    share, with the steps and the error norm of the whole batch, as torchdiffeq solves a
    batch). One system takes as many steps as the batch needs on average where separate
    windows take as many as the hardest needs; it requires save times evenly spaced
    (every window then has the same grid) and a model without events.

    Arguments:
        model: an `OdeModel` (neural, hybrid or classic).
        optimizer: an optax transformation (default `optax.adam(1e-2)`).
        solver: the `OdeSolver` (default tsit5, rtol 1e-6, atol 1e-8).
        window: save points per window (>= 2).
        batch_size: windows per step.
        free: top-level parameter names to train (default: all); the others stay fixed.
        batch: "windows" (default) or "system", how a minibatch is solved (above).
        devices: split each minibatch's windows over the first `devices` local devices
            (data-parallel: each device solves batch_size / devices windows and their
            gradient, the parameters replicated; it must divide batch_size, with
            `batch = "windows"`). The steps are those of one device, to rounding: a
            window's draw does not depend on the split.

    Example:
        >>> trainer = Trainer(model, optax.adam(1e-2), window=10, batch_size=16)
        >>> state = trainer.init(params, jax.random.key(0))
        >>> state, loss = trainer.step(state, time, values)
    """

    model: OdeModel
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    solver: OdeSolver
    window: int = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)
    free: tuple[str, ...] | None = eqx.field(static=True)
    batch: str = eqx.field(static=True)
    devices: int = eqx.field(static=True)

    def __init__(
        self,
        model: OdeModel,
        optimizer: optax.GradientTransformation | None = None,
        *,
        solver: OdeSolver | None = None,
        window: int = 10,
        batch_size: int = 16,
        free: Sequence[str] | None = None,
        batch: str = "windows",
        devices: int = 1,
    ):
        if not isinstance(model, OdeModel):
            raise TypeError(f"training needs an OdeModel, got {type(model).__name__}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 2:
            raise ValueError(
                f"window must be an integer >= 2 (save points per segment), got {window!r}"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if free is not None:
            free = tuple(free)
            for name in free:
                if name not in model.parameter_names:
                    raise ValueError(
                        f"free: model {model.name!r} has no parameter {name!r} "
                        "(parameters: "
                        f"{', '.join(model.parameter_names)})."
                        f"{did_you_mean(name, model.parameter_names)}"
                    )
            if not free:
                raise ValueError("free is empty: name at least one parameter to train")
        if batch not in BATCHES:
            raise ValueError(
                f"batch must be one of {', '.join(map(repr, BATCHES))} (how a minibatch of windows "
                f"is solved), got {batch!r}"
            )
        if batch == "system" and model.events():
            raise ValueError(
                "batch = 'system' solves the windows with shared steps, which events of model "
                f"{model.name!r} would break; use batch = 'windows'"
            )
        if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
            raise ValueError(f"devices must be a positive integer, got {devices!r}")
        if devices > 1:
            if batch != "windows":
                raise ValueError(
                    f"devices = {devices} splits the windows of a minibatch, which batch = "
                    f"{batch!r} solves as one system; use batch = 'windows'"
                )
            if batch_size % devices:
                raise ValueError(
                    f"devices = {devices} must divide batch_size = {batch_size} (each device "
                    "solves an equal share of the windows)"
                )
            if devices > len(jax.devices()):
                raise ValueError(
                    f"devices = {devices}: only {len(jax.devices())} local devices (on a CPU, "
                    "XLA_FLAGS=--xla_force_host_platform_device_count=N before JAX starts)"
                )
        self.devices = devices
        self.model = model
        self.batch = batch
        self.optimizer = optax.adam(1e-2) if optimizer is None else optimizer
        self.solver = OdeSolver() if solver is None else solver
        self.window = window
        self.batch_size = batch_size
        self.free = free

    def _split(self, params: dict) -> tuple[dict, dict]:
        names = self.free if self.free is not None else tuple(params)
        return {k: params[k] for k in names}, {k: v for k, v in params.items() if k not in names}

    def init(self, params: PyTree | None, key: PRNGKeyArray) -> TrainState:
        """The state before the first step (missing parameters take the model's defaults)."""
        params = jax.tree.map(
            lambda x: jnp.asarray(x, dtype=float), sim.complete_params(self.model, params)
        )
        free, _ = self._split(params)
        with jax.numpy_dtype_promotion("standard"):
            opt_state = self.optimizer.init(free)
        return TrainState(params, opt_state, key, jnp.zeros((), dtype=int))

    def loss(
        self,
        params: PyTree,
        time: Float[Array, " T"],
        values: Float[Array, "B n T"],
        key: PRNGKeyArray,
    ) -> Float[Array, ""]:
        """Mean squared error over one random minibatch of windows."""
        n_traj, _, n_time = values.shape
        if n_time < self.window:
            raise ValueError(f"window = {self.window} save points but the data have only {n_time}")
        k_traj, k_start = jax.random.split(key)
        which = jax.random.randint(k_traj, (self.batch_size,), 0, n_traj)
        starts = jax.random.randint(k_start, (self.batch_size,), 0, n_time - self.window + 1)

        if self.batch == "system":
            return self._system_loss(params, time, values, which, starts)

        def one(b, s):
            ts = jax.lax.dynamic_slice_in_dim(time, s, self.window)
            target = jax.lax.dynamic_slice_in_dim(values[b], s, self.window, axis=1)
            traj = sim.simulate(self.model, params, ts, initial=target[:, 0], solver=self.solver)
            pred = jnp.stack([traj.observables[name] for name in self.model.state_names])
            return jnp.mean((pred - target) ** 2)

        if self.devices > 1:  # each device its block of windows (and of their gradients)
            split, _ = batch_sharding(self.devices)
            which, starts = (jax.lax.with_sharding_constraint(a, split) for a in (which, starts))
        return jnp.mean(jax.vmap(one)(which, starts))

    def solve_system(self, params, time, values, which, starts):
        """The windows of trajectories `which` [B] starting at save points `starts` [B]
        solved as one system: the state [B, n] on the first window's grid, relative to
        its start; window b's vector field at its own times (its start plus the
        relative time). Returns the solution (`ys` [W, B * n]) and the windows' data
        [B, n, W]."""
        targets = jax.vmap(
            lambda b, s: jax.lax.dynamic_slice_in_dim(values[b], s, self.window, axis=1)
        )(which, starts)
        grid = time[: self.window] - time[0]
        shape = targets.shape[:2]

        def field(tau, y, args):  # (flat, as the lean core takes one flat state)
            p, start = args  # (passed, not closed over: adjoints differentiate their args)
            rows = jax.vmap(lambda s, row: self.model.vector_field(s + tau, row, p))(
                start, y.reshape(shape)
            )
            return rows.ravel()

        return self.solver.solve(
            field, grid, targets[:, :, 0].ravel(), (params, time[starts])
        ), targets

    def _system_loss(self, params, time, values, which, starts) -> Array:
        """The loss with the minibatch solved as one system (`solve_system`); NaN when
        the save times are not evenly spaced (the windows' grids would differ)."""
        sol, targets = self.solve_system(params, time, values, which, starts)
        pred = jnp.moveaxis(sol.ys.reshape(-1, *targets.shape[:2]), 0, -1)  # [W, B, n] -> [B, n, W]
        return jnp.where(evenly_spaced(time), jnp.mean((pred - targets) ** 2), jnp.nan)

    @eqx.filter_jit
    def step(
        self,
        state: TrainState,
        time: Float[Array, " T"],
        values: Float[Array, "B n T"],
    ) -> tuple[TrainState, Float[Array, ""]]:
        """One optimiser step on a fresh minibatch; returns the new state and the loss
        of the minibatch at the parameters before the step."""
        key, sub = jax.random.split(state.key)
        free, fixed = self._split(state.params)

        def loss(f):
            return self.loss({**fixed, **f}, time, values, sub)

        value, grads = jax.value_and_grad(loss)(free)
        # optax mixes Python scalars with int32 step counts: it needs standard promotion.
        with jax.numpy_dtype_promotion("standard"):
            updates, opt_state = self.optimizer.update(grads, state.opt_state, free)
            free = optax.apply_updates(free, updates)
        return TrainState({**fixed, **free}, opt_state, key, state.step + 1), value


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What `train` returns.

    Attributes:
        model: the trained model (its static description).
        params: the trained parameters.
        loss_history: minibatch loss at each step [steps].
        seconds: wall time of the training loop (including the first compilation).
    """

    model: OdeModel
    params: PyTree
    loss_history: np.ndarray
    seconds: float

    def __repr__(self) -> str:
        # (the model and its parameters are whole networks: their size, not their weights)
        size = sum(int(np.size(leaf)) for leaf in jax.tree.leaves(self.params))
        loss = number(self.loss_history[-1]) if len(self.loss_history) else "nan"
        return (
            f"TrainResult(model={self.model.name!r}, parameters={size}, "
            f"steps={len(self.loss_history)}, loss={loss}, seconds={self.seconds:.3g})"
        )

    def save(self, path: str | Path) -> Path:
        """Write the trained model (`save_trained`)."""
        return save_trained(path, self.model, self.params, loss_history=self.loss_history)


def train(
    model: OdeModel,
    params: PyTree | None,
    data: Trajectories,
    *,
    steps: int = 500,
    optimizer: optax.GradientTransformation | None = None,
    solver: OdeSolver | None = None,
    window: int = 10,
    batch_size: int = 16,
    free: Sequence[str] | None = None,
    batch: str = "windows",
    devices: int = 1,
    seed: int = 0,
    progress: bool = False,
    checkpoint: str | Path | None = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
) -> TrainResult:
    """Fit `model`'s parameters to trajectories with minibatches of windows.

    Arguments:
        model: an `OdeModel`; `data` must hold every state component.
        params: initial parameters (None or missing ones: the model's defaults, for a
            neural model random weights).
        data: trajectories (`load_trajectories(path, model.state_names)`).
        steps: optimiser steps.
        optimizer, solver, window, batch_size, free, batch, devices: see `Trainer`.
        seed: seed of the minibatch draws.
        progress: show a progress bar on a terminal.
        checkpoint: a file for checkpoints of the training (parameters, optimiser state,
            PRNG key, step and losses, serialised with equinox), written atomically
            every `checkpoint_every` steps (default: at most every 30 s) and removed
            when training completes.
        checkpoint_every: steps between checkpoints.
        resume: continue from `checkpoint`; training then ends with the parameters of
            an uninterrupted run (same arguments and optimiser required: the model,
            data, steps, window, batch size, seed, free names and initial parameters
            are checked).

    Returns:
        A `TrainResult` (trained params and the loss per step).

    Raises:
        ValueError: data whose components are not the model's state, too few save
            points for a window, an unknown free parameter, `batch = "system"` with
            save times not evenly spaced.
        sim.InputError: a checkpoint file exists and `resume` is False; `resume` without
            a checkpoint, or with one of another training.
        sim.DataError: a damaged checkpoint.

    Example:
        >>> model = NeuralOde(features="cubic")
        >>> model = NeuralOde(features="cubic")
        >>> data = load_trajectories("spiral.h5", model.state_names)
        >>> result = train(model, None, data, steps=500, window=10, batch_size=20)
        >>> result.save("spiral_trained.h5")
    """
    warn_if_float32("inference.train")
    trainer = _trainer(
        model,
        data,
        steps,
        optimizer,
        solver=solver,
        window=window,
        batch_size=batch_size,
        free=free,
        batch=batch,
        devices=devices,
    )
    state = trainer.init(params, jax.random.key(seed))
    time = jnp.asarray(data.time, dtype=float)
    values = jnp.asarray(data.values, dtype=float)
    ck = Checkpointer(
        None if checkpoint is None else Path(checkpoint),
        _identity(trainer, data, state, steps, window, batch_size, seed, free, batch),
        resume=resume,
        every=checkpoint_every,
    )
    first, state, losses = _restored(ck, state)
    start = _time.perf_counter()
    with Progress(enabled=progress, description="train") as bar:
        bar.start(steps)
        bar.advance(first)
        for i in range(first, steps):
            state, loss = trainer.step(state, time, values)
            losses.append(loss)
            bar.advance()
            if i + 1 < steps and ck.due(i + 1):
                ck.write(0, i + 1, _storable(state), [float(v) for v in losses])
    history = np.asarray(jnp.stack(losses)) if losses else np.zeros(0)
    jax.block_until_ready(state.params)
    ck.finish()
    return TrainResult(model, state.params, history, _time.perf_counter() - start)


def _trainer(
    model: OdeModel,
    data: Trajectories,
    steps: int,
    optimizer: optax.GradientTransformation | None,
    *,
    solver: OdeSolver | None,
    window: int,
    batch_size: int,
    free: Sequence[str] | None,
    batch: str,
    devices: int = 1,
) -> Trainer:
    """The `Trainer` of a `train` call, its arguments checked against the data."""
    _check_names(model, data)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
    if len(data.time) < window:
        raise ValueError(f"window = {window} save points but the data have only {len(data.time)}")
    trainer = Trainer(
        model,
        optimizer,
        solver=solver,
        window=window,
        batch_size=batch_size,
        free=free,
        batch=batch,
        devices=devices,
    )
    if (
        batch == "system"
        and len(data.time) > 1
        and not bool(evenly_spaced(jnp.asarray(data.time, dtype=float)))
    ):
        raise ValueError(
            "batch = 'system' needs evenly spaced save times (every window on the same grid); "
            "these are not: use batch = 'windows'"
        )
    return trainer


def _identity(
    trainer: Trainer,
    data: Trajectories,
    state: TrainState,
    steps: int,
    window: int,
    batch_size: int,
    seed: int,
    free: Sequence[str] | None,
    batch: str,
) -> str:
    """The digest of what a training depends on besides its optimiser: the model and its
    options, the data, the arguments, the solver and the initial parameters."""
    model = trainer.model
    return fingerprint(
        model.name,
        json.dumps(_options(model), sort_keys=True, default=str),
        data.time,
        data.values,
        steps,
        window,
        batch_size,
        seed,
        free,
        *(() if batch == "windows" else (batch,)),
        repr(trainer.solver),
        [np.asarray(x) for x in jax.tree.leaves(state.params)],
    )


def _restored(ck: Checkpointer, state: TrainState) -> tuple[int, TrainState, list]:
    """(steps done, state, minibatch losses) from the checkpoint, or (0, `state`, [])
    when there is none."""
    losses = []
    first = 0
    restored = ck.restore(0, _storable(state))
    if restored is not None:
        first, saved, history = restored
        state = eqx.tree_at(lambda s: s.key, saved, jax.random.wrap_key_data(saved.key))
        losses = [jnp.asarray(v, dtype=float) for v in history]
    return first, state, losses


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage of a training curriculum (see `train_stages`).

    Attributes:
        steps: optimiser steps in this stage.
        window: save points per window; None: the whole trajectory (every window
            starts at the first save time and runs to the last).
        batch_size: windows per step.
        optimizer: an optax transformation, started afresh at this stage (default
            `optax.adam(1e-2)`).
        batch: how a minibatch is solved, "windows" or "system" (see `Trainer`).
    """

    steps: int
    window: int | None = 10
    batch_size: int = 16
    optimizer: optax.GradientTransformation | None = None
    batch: str = "windows"


def train_stages(
    model: OdeModel,
    params: PyTree | None,
    data: Trajectories,
    stages: Sequence[Stage],
    *,
    solver: OdeSolver | None = None,
    free: Sequence[str] | None = None,
    seed: int = 0,
    progress: bool = False,
) -> TrainResult:
    """Train through a curriculum of growing windows: each stage is a `train` run that
    starts from the parameters the previous stage ended with (and a fresh optimiser).

    Short windows, each started from an observed state, learn the vector field locally
    and are cheap; long ones (up to whole trajectories from their first state) then
    correct the slow drift that short windows cannot see, which is what decides how well
    a trajectory is predicted from its initial state alone. Starting on long windows
    straight away rarely works: the loss over a long horizon of an untrained model is
    full of poor local minima.

    Arguments:
        model, params, data, solver, free, progress: as for `train`.
        stages: the curriculum, in order (`Stage`).
        seed: stage i draws its minibatches from seed + i.

    Returns:
        A `TrainResult`: the final parameters, the minibatch losses of all stages one
        after the other, the total wall time.

    Example:
        >>> stages = [Stage(250, window=10, batch_size=64, optimizer=optax.adam(3e-2)),
        ...           Stage(250, window=None, batch_size=1, optimizer=optax.adam(1e-3))]
        >>> result = train_stages(model, None, data, stages)
    """
    stages = list(stages)
    if not stages:
        raise ValueError("stages is empty: give at least one Stage")
    for i, stage in enumerate(stages):
        if not isinstance(stage, Stage):
            raise TypeError(f"stages[{i}] must be a Stage, got {type(stage).__name__}")
    _check_names(model, data)
    results = []
    for i, stage in enumerate(stages):
        window = len(data.time) if stage.window is None else stage.window
        result = train(
            model,
            params,
            data,
            steps=stage.steps,
            optimizer=stage.optimizer,
            solver=solver,
            window=window,
            batch_size=stage.batch_size,
            batch=stage.batch,
            free=free,
            seed=seed + i,
            progress=progress,
        )
        params = result.params
        results.append(result)
    return TrainResult(
        model,
        params,
        np.concatenate([r.loss_history for r in results]),
        float(sum(r.seconds for r in results)),
    )


def _storable(state: TrainState) -> TrainState:
    """`state` with its PRNG key as raw key data (what equinox serialises)."""
    return eqx.tree_at(lambda s: s.key, state, jax.random.key_data(state.key))
