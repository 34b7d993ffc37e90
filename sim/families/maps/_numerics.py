"""The numerics of the family of maps: iterating a map to its save times (`simulate`),
the set-up of a config and the run of `sim run`, resumable save time by save time."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from physics import float_array
from physics.maps import MapModel

from ..._config import Config
from ..._run import (
    LoopEngine,
    RunPlan,
    Setup,
    check_finite,
    frames_per_chunk,
    named_initial,
    resolve_params,
    run_plan,
    save_times,
)
from ..._trajectory import Trajectory
from . import MAP


def _iterate(model: MapModel, params, y, start, stop):
    """The iterate at `stop` from `y` at `start` (whole numbers, traced)."""
    return jax.lax.fori_loop(start, stop, lambda n, v: model.step(n, v, params), y)


class MapState(eqx.Module):
    """Where a run of a map is: the next frame to save, the iteration it is at, the iterate."""

    frame: jax.Array
    n: jax.Array
    y: jax.Array


class MapProblem(eqx.Module):
    """A run of a map for `LoopEngine`: the iterates at the save times, a chunk of save
    times at a time."""

    model: MapModel
    params: Any
    counts: jax.Array  # the save times as iteration counts [T]
    y0: jax.Array

    def init(self) -> MapState:
        return MapState(frame=jnp.int32(0), n=self.counts[0], y=self.y0)

    def advance(self, state: MapState, frames, capacity: int):
        def save(s: MapState, i):
            live = i < frames
            target = self.counts[jnp.clip(s.frame, 0, self.counts.shape[0] - 1)]
            y = _iterate(self.model, self.params, s.y, s.n, jnp.where(live, target, s.n))
            moved = MapState(
                frame=s.frame + live.astype(jnp.int32), n=jnp.where(live, target, s.n), y=y
            )
            return moved, self.model.observables(target.astype(float), y, self.params)

        new, saved = jax.lax.scan(save, state, jnp.arange(capacity, dtype=jnp.int32))
        return new, saved, jnp.int32(0)

    def num_steps(self, state: MapState):
        return state.n - self.counts[0]


def _counts(t) -> jax.Array:
    return jnp.round(jnp.asarray(t)).astype(jnp.int64)


def simulate(model: MapModel, params, t, initial) -> Trajectory:
    """The iterates at the save times `t` (iteration counts), from the initial values at
    the first one."""
    y0 = model.initial_state(initial, params)
    counts = _counts(t)

    def save(carry, target):
        n, y = carry
        y = _iterate(model, params, y, n, target)
        return (target, y), y

    (_, final), ys = jax.lax.scan(save, (counts[0], y0), counts)
    observables = jax.vmap(lambda n, y: model.observables(n.astype(float), y, params))(counts, ys)
    stats = {"num_steps": counts[-1] - counts[0], "result": jnp.int32(0)}
    return Trajectory(time=t, observables=observables, final_state=final, stats=stats)


def setup(model: MapModel, config: Config) -> Setup:
    """A config's parameters, initial values and save times (whole numbers: iteration
    counts)."""
    MAP.resolve_checks(config, what="map runs (they only check that values stay finite)")
    MAP.check_solver_keys(config, ())
    t = save_times(config)
    if not np.all(t == np.round(t)) or not np.all(np.abs(t) < 2**53):
        key = "time.save_at" if config.spec.time.save_at is not None else "time.save"
        raise config.error(
            key,
            "the save times of a map are iteration counts: expected whole numbers, got "
            f"{', '.join(f'{v:g}' for v in t[:3])}{', ...' if len(t) > 3 else ''}",
        )
    params = resolve_params(config, model)
    initial = named_initial(config, model)
    return Setup(
        model=model,
        params=params,
        initial=initial,
        t=float_array(t),
        solver=None,
        key=None,
        resolved={"params": params, "initial": initial},
    )


def plan(model: MapModel, config: Config) -> RunPlan:
    """The run of a config: its iterates at the save times, in the ODE run layout."""
    s = setup(model, config)
    y0 = model.initial_state(s.initial, s.params)
    frames = len(s.t) - 1
    problem = MapProblem(model=model, params=s.params, counts=_counts(s.t), y0=jnp.asarray(y0))
    engine = LoopEngine(
        problem,
        np.asarray(s.t),
        frames_per_chunk(config, int(np.size(y0)), frames),
        lambda code: f"{config.source}: the map run failed (result {code})",
    )
    return run_plan(config, model, s, engine, check_finite(config, ""))
