"""Pair parameters fitted to a target radial distribution function by ensemble
reweighting (the classic use of differentiable MD: a potential from a measured g(r)).

The loss is half the sum over bins (and species pairs) of the squared difference
between the time-averaged smooth g(r) of a thermostatted run and the target. Its
gradient is not taken through the trajectory, whose tangents grow exponentially in a
chaotic liquid, but through the average: the frames x_i of a run at parameters
theta_k are an NVT sample, and at nearby theta the average is
sum_i w_i(theta) g(x_i) with the Boltzmann weights
w_i = softmax(-(U_theta(x_i) - U_theta_k(x_i)) / kT) (Zwanzig; the DiffTRe scheme of
Thaler and Zavadlav, Nat. Commun. 12, 6884 (2021)). Its derivative at theta_k is
-Cov(g, dU/dtheta) / kT, exact for the sample. Each run gives one step of the residuals
with that Jacobian in the free quantities' unconstrained values (the logarithms of
positive parameters, logits of bounded ones; for a nonnegative parameter, softplus, and
a real one, none, the radius and the damping are in the parameter's own units): the
Gauss-Newton step if no value moves more than a trust radius (`MAX_LOG_STEP` at most),
else the Levenberg step (J^T J + lambda I) s = -J^T r with the damping that keeps it
within. The identity, not
Marquardt's diagonal of J^T J: a step held back by Marquardt's damping leans towards
the parameter the residuals are least sensitive to (from a sigma 12% off, epsilon moved
and sigma hardly did, and the fit crept along a curved valley of the loss: 10 runs,
and more than 20 with the damping carried from run to run; held back by the identity,
it turns towards the gradient, which the sharp sigma dominates, and ends in five or
six). Only a step that must be held back is
damped, so near the optimum the steps are Gauss-Newton's and the identity costs
nothing there.

A run's loss and step carry the noise of its average, and the fit compares them within
that noise, estimated by the jackknife over blocks of frames (one block per replica, or
contiguous pieces of a run: at least `BLOCKS`). The next run, at the step's end, becomes
the base of the next step unless its loss is worse than the base's by more than
`SIGNIFICANT` standard errors of the difference; then the step is taken again from the
base within a quarter of its length (a run significantly better than its base doubles
the radius, up to `MAX_LOG_STEP`). (Keeping only the lowest loss can pin the fit to a
run that was lucky in its noise, and shrink every later step.) The fit ends when the
Gauss-Newton step from the base changes no parameter by more than `fit.rtol`
(relative) or by more than `SIGNIFICANT` of its own standard errors: when the average
cannot tell which way to go. The estimate is the mean, over the runs whose loss is
within the noise of the lowest (or within `SETTLED` times it), of the points their
steps lead to (points no run has been at: the last of them is where the next run would
be).

    [rdf]
    r_max = 3.0
    bins = 60
    start = 4.0
    [data]
    file = "target.h5"                 # e.g. the file of a `sim run` with the same rdf
    rdf = "/observables/rdf/value"      # (the default) g [bins] or [pairs, bins], or
    r = "/observables/rdf/r"            #   the run element [T, ...] (its last row)
    [fit]
    free = ["epsilon", "sigma"]
    replicas = 4                        # independent runs per step, pooled (default 1)

With `replicas = N` each step runs N independent copies of the system (copy 0 is the
config's run, copy r > 0 starts from velocities drawn at the thermostat's temperature
with its own random key). Their frames are pooled, so the
average, its weights and their derivative come from N times the frames: the noise of a
step's g(r), which makes epsilon's error, falls as 1 / sqrt(N).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pydantic
from jaxtyping import Array

import sim
from sim import Config
from sim.core import (
    Progress,
    RdfSpec,
    Result,
    check_output_path,
    exclusive,
    immediate,
    resolved_toml,
    write_group,
    write_root_attrs,
)

from ._fit_problem import _TRANSFORMS, Free
from ._fit_section import fit_section
from ._rdf_reweighting import Ensemble, _BlockSums, _energies, _residuals
from ._rdf_target import _read_target
from ._result_text import number, short_repr

MAX_REPLICAS = 256  # (a larger batch is a typo more likely than a wish)

DEFAULT_STEPS = 20
DEFAULT_RTOL = 1e-3


class RdfFitTable(pydantic.BaseModel):
    """`[fit]` of a g(r) fit: the keys it takes (the others of `[fit]` do not apply)."""

    free: list[str] = pydantic.Field(
        description="the pair parameters fitted", json_schema_extra={"required": True}
    )
    max_steps: int = pydantic.Field(DEFAULT_STEPS, description="the most fit steps")
    rtol: float = pydantic.Field(
        DEFAULT_RTOL, description="relative change of the loss that stops the fit"
    )
    replicas: int = pydantic.Field(
        1, description=f"independent runs per step, their frames pooled (1 to {MAX_REPLICAS})"
    )


FIT_KEYS = tuple(RdfFitTable.model_fields)
SETTLED = 1.5  # runs with a loss within this factor of the lowest make the estimate
SIGNIFICANT = 2.0  # standard errors that make a difference of losses or a step real
BLOCKS = 8  # the fewest blocks of frames the jackknife estimates the noise from
MAX_LOG_STEP = 0.1  # the largest change of a parameter's logarithm in one step (about 10%)


def is_rdf_fit(config: Config) -> bool:
    """Whether a config fits g(r): an `[rdf]` section and a `[data]` without `time`."""
    data = config.raw.get("data")
    return isinstance(data, dict) and "time" not in data and isinstance(config.raw.get("rdf"), dict)


@dataclasses.dataclass
class RdfFitResult(Result):
    """A finished g(r) fit.

    Attributes:
        names: the free quantities; estimate: their fitted values, the mean (of the
            unconstrained values) of `aim` over the runs that became the base of their
            step and whose loss is within the noise of the lowest (`SIGNIFICANT`
            standard errors of the difference) or `SETTLED` times it (not itself run:
            `fitted` is the g of the best run); stderr: NaN (the
            bins of a g(r) are correlated, and so are the frames: no covariance is
            claimed).
        loss_history: the loss of each run's own average (the reweighted loss is not
            kept), at the parameters of `path`.
        path: name -> the parameters each run used [iterations].
        aim: name -> where the step taken after each run leads [iterations] (the
            next run's parameters, and for the last run where a next one would be;
            NaN after a run whose g(r) or energies were not finite).
        loss_stderr: the standard error of each run's loss (jackknife over blocks of
            its frames).
        ess: the effective sample size of the frames of the step taken after each
            run, reweighted to the step's end.
        r, target: the bin centres and the target g [pairs, bins]; start, fitted: the
            average g of the first run and of the run with the lowest loss.
        converged, message: how it ended; frames: frames averaged per step (all
            replicas).
    """

    model: str
    config: str
    names: list[str]
    estimate: dict[str, float]
    stderr: dict[str, float]
    loss_history: np.ndarray
    loss_stderr: np.ndarray
    path: dict[str, np.ndarray]
    aim: dict[str, np.ndarray]
    ess: np.ndarray
    r: np.ndarray
    target: np.ndarray
    start: np.ndarray
    fitted: np.ndarray
    converged: bool
    message: str
    frames: int
    warnings: list[str] = dataclasses.field(default_factory=list)

    def __repr__(self) -> str:
        loss = number(self.loss_history[-1]) if len(self.loss_history) else "nan"
        return short_repr(
            "RdfFitResult",
            [f"model={self.model!r}"],
            {n: number(self.estimate[n]) for n in self.names},
            [f"loss={loss}", f"converged={bool(self.converged)}"],
        )

    def write(self, f: h5py.File) -> None:
        """The fit layout with the g(r) of the target, the start and the fit."""
        write_root_attrs(f, format="simjax.fit", model=self.model, config=self.config)
        write_group(f, "estimate", self.estimate)
        write_group(f, "stderr", self.stderr)
        f.create_dataset("loss_history", data=self.loss_history)
        f["objective"] = float(self.loss_history[-1])
        write_group(f, "path", self.path)
        write_group(f, "aim", self.aim)
        f.create_dataset("path/ess", data=self.ess)
        f.create_dataset("path/loss_stderr", data=self.loss_stderr)
        write_group(
            f,
            "rdf",
            {"r": self.r, "target": self.target, "start": self.start, "fitted": self.fitted},
        )
        f.attrs["method"] = "reweighting"
        f.attrs["frames"] = self.frames
        f.attrs["converged"] = self.converged
        f.attrs["message"] = self.message

    def table(self) -> list[tuple[str, float, float]]:
        """(name, estimate, standard error) rows."""
        return [(n, self.estimate[n], self.stderr[n]) for n in self.names]


def _free(config: Config, section, model, params) -> tuple[tuple[Free, ...], np.ndarray]:
    free, start = [], []
    for name in section.free:
        if name in [f.name for f in free]:
            raise config.error("fit.free", f"{name!r} is listed twice")
        if name not in params or name not in model.parameter_names:
            names = [n for n in params if n in model.parameter_names]
            raise config.error(
                "fit.free",
                f"{name!r}: a g(r) fit varies the model's parameters ({', '.join(names)})",
            )
        value = np.asarray(params[name])
        if value.ndim:
            raise config.error(
                "fit.free", f"{name!r} has one value per species; a g(r) fit varies single numbers"
            )
        parameter = model.parameter(name)
        transform, low, high = _TRANSFORMS[parameter.constraint], 0.0, 1.0
        if parameter.bounds is not None:
            (low, high), transform = parameter.bounds, "logistic"
        f = Free(
            name=name,
            kind="params",
            key=name,
            transform=transform,
            low=float(low),
            high=float(high),
        )
        free.append(f)
        start.append(float(f.to_unconstrained(jnp.asarray(float(value)))))
    return tuple(free), np.asarray(start)


@dataclasses.dataclass(frozen=True)
class RdfProblem:
    """A g(r) fit, checked: the set-up of the config's runs, its `[rdf]`, the target,
    the free quantities and their start (unconstrained), kT, and the frames averaged.
    `run(u)` runs the model at `u` and gives the `Ensemble` of its frames."""

    setup: sim.Setup
    spec: RdfSpec
    path: Path
    target: np.ndarray
    free: tuple[Free, ...]
    start: np.ndarray
    kt: float
    first: int
    steps: int
    rtol: float
    replicas: int = 1

    def run(self, u: np.ndarray) -> Ensemble:
        s = self.setup
        params = {
            **s.params,
            **{f.key: f.to_natural(jnp.asarray(u[k])) for k, f in enumerate(self.free)},
        }
        # [replicas, T, n, dim] -> the frames of every copy, pooled
        positions = self.replica_positions(params)[:, self.first :].reshape(
            -1, *s.initial.position.shape
        )
        box = np.broadcast_to(np.asarray(s.initial.space.box), (len(positions), s.initial.dim))
        g = self.spec.frames(positions, box, np.asarray(s.initial.species))
        ensemble = Ensemble(
            s.model,
            s.initial,
            params,
            jnp.asarray(positions),
            jnp.asarray(g),
            jnp.zeros(len(positions)),
            jnp.asarray(self.kt),
            self.free,
        )
        return dataclasses.replace(ensemble, energy=_energies(ensemble, params))

    def blocks(self) -> np.ndarray:
        """The jackknife block of each pooled frame [F]: one per replica, each cut into
        contiguous pieces when there are fewer than `BLOCKS` replicas."""
        frames = len(self.setup.t) - self.first
        pieces = -(-BLOCKS // self.replicas)
        within = np.concatenate(
            [
                np.full(len(part), k)
                for k, part in enumerate(np.array_split(np.arange(frames), pieces))
            ]
        )
        return (np.arange(self.replicas)[:, None] * pieces + within[None, :]).ravel()

    def replica_starts(self) -> tuple[Array, Array]:
        """The velocities [replicas, n, dim] and random keys [replicas] of the copies:
        copy 0 the config's own, copy r > 0 velocities drawn at the thermostat's
        temperature (`physics.md.thermalize`) and an independent key."""
        from physics.md import thermalize

        s = self.setup
        keys = [s.key] + [jax.random.fold_in(s.key, 1000 + r) for r in range(1, self.replicas)]
        velocities = [s.initial.velocity] + [
            thermalize(s.initial, jax.random.fold_in(k, 1), self.kt).velocity for k in keys[1:]
        ]
        return jnp.stack(velocities).astype(s.initial.position.dtype), jnp.stack(keys)

    def replica_positions(self, params: dict) -> np.ndarray:
        """The positions [replicas, T, n, dim] of the copies at `params`, each run as
        `sim.simulate` runs the config (one compiled program serves them all). They run
        one after another: vmapped as one batch they cost 5.6 times the CPU time (3
        copies of 256 particles, 1,000 steps: 26.8 s against 4.8 s), as a batched
        neighbour-list test turns the list's conditional rebuild into one every step."""
        s = self.setup
        velocities, keys = self.replica_starts()
        runs = []
        for velocity, key in zip(velocities, keys, strict=False):
            traj = sim.simulate(
                s.model,
                params,
                s.t,
                initial=s.initial.at(s.initial.position, velocity),
                solver=s.solver,
                key=key,
            )
            runs.append(np.asarray(traj.observables["position"]))
        return np.stack(runs)


def rdf_problem(config: Config, data: str | Path | None = None) -> RdfProblem:
    """The g(r) fit a config describes (`fit_rdf`), every input checked before any run.

    Raises:
        ConfigError, DataError: naming the file and the key.
    """
    for key in config.raw.get("fit", {}):
        if key not in FIT_KEYS:
            raise config.error(
                f"fit.{key}", f"does not apply to a g(r) fit (its keys: {', '.join(FIT_KEYS)})"
            )
    replicas = config.raw.get("fit", {}).get("replicas", 1)
    if (
        isinstance(replicas, bool)
        or not isinstance(replicas, int)
        or not 1 <= replicas <= MAX_REPLICAS
    ):
        raise config.error(
            "fit.replicas",
            f"expected a whole number from 1 to {MAX_REPLICAS} (copies of the system run per "
            f"step), got {replicas!r}",
        )
    section = fit_section(config, without=("replicas",))
    s = sim.setup(config)
    solver = s.resolved["solver"]
    if solver["method"] not in ("langevin", "nose_hoover") or "barostat" in solver:
        key = "solver.barostat" if "barostat" in solver else "solver.method"
        raise config.error(
            key,
            'a g(r) fit reweights frames of the canonical ensemble: use method = "langevin" or '
            '"nose_hoover" without a barostat',
        )
    spec = RdfSpec(**s.resolved["rdf"], n_species=s.model.n_species)
    path, target = _read_target(config, data, spec)
    free, u = _free(config, section, s.model, s.params)
    times = np.asarray(s.t)
    return RdfProblem(
        setup=s,
        spec=spec,
        path=path,
        target=target,
        free=free,
        start=u,
        kt=float(solver["temperature"]) * s.model.unit_system.boltzmann,
        first=int(np.searchsorted(times, spec.start - 1e-9 * max(1.0, abs(spec.start)))),
        steps=section.max_steps or DEFAULT_STEPS,
        rtol=section.rtol if "rtol" in config.raw["fit"] else DEFAULT_RTOL,
        replicas=replicas,
    )


def fit_rdf(
    config: Config,
    data: str | Path | None = None,
    *,
    progress: bool = False,
    output: str | Path | None = None,
) -> RdfFitResult:
    """Fit a config's free pair parameters to the target g(r) of its `[data]` (what
    `sim fit` does for such a config; see the module docstring).

    Raises:
        ConfigError, DataError: a bad config or target (naming the file and key), before
            any run.
    """
    problem = rdf_problem(config, data)
    if output is not None:
        output = check_output_path(output)
    frames = (len(problem.setup.t) - problem.first) * problem.replicas
    if progress:
        copies = f" ({problem.replicas} runs pooled)" if problem.replicas > 1 else ""
        print(
            f"g(r) fit of {', '.join(f.name for f in problem.free)}: each step's {frames} "
            f"frames{copies} reweighted "
            "(Boltzmann weights at trial parameters) for the gradient, not differentiated through "
            "the trajectory",
            file=sys.stderr,
        )
    began = time.perf_counter()
    # (no checkpoint: a signal ends the fit at once, with nothing written)
    with immediate("fitting g(r)"), Progress(enabled=progress, description="fit g(r)") as bar:
        bar.start(total=problem.steps)
        runs = _runs(problem, bar)
    result = _rdf_result(config, problem, runs, frames)
    if progress:
        print(
            f"g(r) fit: {len(runs.history)} runs in {time.perf_counter() - began:.1f} s",
            file=sys.stderr,
        )
    if output is not None:
        with exclusive(output):
            result.save(output)
    return result


@dataclasses.dataclass
class _Runs:
    """What the runs of a g(r) fit leave: for each run its loss, the loss's standard
    error, its parameters (natural), where the step taken after it leads (unconstrained),
    that step's effective sample size and whether the run became the base of its step;
    the average g of the first run and the (loss, g) of the lowest; how the fit ended."""

    history: list = dataclasses.field(default_factory=list)
    noise: list = dataclasses.field(default_factory=list)
    trail: list = dataclasses.field(default_factory=list)
    aims: list = dataclasses.field(default_factory=list)
    ess: list = dataclasses.field(default_factory=list)
    own: list = dataclasses.field(default_factory=list)
    start_g: Any = None
    lowest: Any = None
    converged: bool = False
    message: str = ""

    def record(self, u: np.ndarray, loss: float, loss_se: float, g: np.ndarray, free) -> None:
        """A run at `u` with its loss, the loss's standard error and its average g."""
        self.start_g = g if self.start_g is None else self.start_g
        self.history.append(loss)
        self.noise.append(loss_se)
        self.trail.append([float(f.to_natural(jnp.asarray(u[i]))) for i, f in enumerate(free)])
        if self.lowest is None or loss < self.lowest[0]:
            self.lowest = (loss, g)


def _runs(problem: RdfProblem, bar: Progress) -> _Runs:
    """The runs of a g(r) fit, each stepping from its base run (see the module
    docstring), until the step from the base is within `fit.rtol` or the noise, a run
    is not finite, or `fit.max_steps` runs are done."""
    free, steps, rtol = problem.free, problem.steps, problem.rtol
    u = problem.start
    target_j = jnp.asarray(problem.target)
    runs = _Runs(message=f"stopped after fit.max_steps = {steps} runs")
    base = (
        None  # (u, loss, its standard error, block sums, ensemble) of the run the steps start from
    )
    radius = MAX_LOG_STEP  # the longest step (in every unconstrained value) the next may take
    for k in range(steps):
        ensemble = problem.run(u)
        sums = _BlockSums.of(ensemble, u, target_j, problem.blocks(), problem.kt)
        loss, loss_se = sums.loss()
        runs.record(u, loss, loss_se, np.asarray(jnp.mean(ensemble.g, axis=0)), free)
        worse = False
        if base is not None:
            difference, se = loss - base[1], float(np.hypot(loss_se, base[2]))
            worse = difference > SIGNIFICANT * se
            if worse:  # a shorter step from the base
                radius = float(np.max(np.abs(u - base[0]))) / 4
            elif difference < -SIGNIFICANT * se:
                radius = min(MAX_LOG_STEP, 2 * radius)
        if not worse:
            base = (u, loss, loss_se, sums, ensemble)
        runs.own.append(not worse)
        step, newton, newton_se = base[3].step(radius)
        if not (np.all(np.isfinite(step)) and np.all(np.isfinite(newton))):
            runs.aims.append(np.full(len(u), np.nan))
            runs.ess.append(float("nan"))
            bar.advance()
            runs.message = (
                f"stopped at run {k + 1}: its g(r) or its energies are not finite; the "
                "estimate is from the runs before it"
            )
            break
        runs.aims.append(np.asarray(base[0] + step, dtype=float))
        runs.ess.append(float(_residuals(base[4], jnp.asarray(base[0] + step), target_j)[1]))
        change = float(np.max(np.abs(newton)))
        bar.advance()
        bar.describe(
            f"fit g(r): run {k + 1}, loss {loss:.6g} +- {loss_se:.2g}, step "
            f"{float(np.max(np.abs(step))):.3g}"
        )
        if change <= rtol:
            runs.converged, runs.message = (
                True,
                "converged: the Gauss-Newton step from the base run changes no parameter by "
                f"more than {rtol:g} (relative)",
            )
            break
        if np.all(np.abs(newton) <= SIGNIFICANT * newton_se):
            runs.converged, runs.message = (
                True,
                f"converged: the Gauss-Newton step from the base run is within {SIGNIFICANT:g} "
                "standard errors of its noise for every parameter",
            )
            break
        u = base[0] + step
    return runs


def _estimate(runs: _Runs, count: int) -> np.ndarray:
    """The estimate (unconstrained) [p]: the mean over the runs whose loss is within the
    noise of the lowest (or SETTLED times it) of where their steps lead; NaN when no run
    is usable."""
    # The mean (of the unconstrained values) over the runs whose loss is within the
    # noise of the lowest (or SETTLED times it) of where their steps lead, which differ
    # by the noise of a run's average rather than by the approach (Polyak-Ruppert
    # averaging of the last iterates). Where the steps lead, not where the runs were: a
    # fit that ends because its last step is within the noise would otherwise keep up
    # to that step's length of its approach.
    losses, errors, points = np.asarray(runs.history), np.asarray(runs.noise), np.asarray(runs.aims)
    # (a run worse than its base took the base's step, shorter: not its own)
    usable = (
        np.asarray(runs.own)
        & np.isfinite(losses)
        & np.isfinite(errors)
        & np.all(np.isfinite(points), axis=1)
    )
    if not np.any(usable):
        return np.full(count, np.nan)
    low = int(np.argmin(np.where(usable, losses, np.inf)))
    settled = usable & (
        losses
        <= np.maximum(
            SETTLED * losses[low], losses[low] + SIGNIFICANT * np.hypot(errors, errors[low])
        )
    )
    return points[settled].mean(axis=0)


def _rdf_result(config: Config, problem: RdfProblem, runs: _Runs, frames: int) -> RdfFitResult:
    """The `RdfFitResult` of the runs of a g(r) fit of `frames` frames per step."""
    s, spec, free = problem.setup, problem.spec, problem.free
    u = _estimate(runs, len(free))
    start_g, fitted_g = runs.start_g, runs.lowest[1]
    names = [f.name for f in free]
    estimate = {f.name: float(f.to_natural(jnp.asarray(u[i]))) for i, f in enumerate(free)}
    text = resolved_toml(
        config,
        params={**{k: _plain(v) for k, v in s.params.items()}, **estimate},
        fit={
            "free": names,
            "max_steps": problem.steps,
            "rtol": problem.rtol,
            "replicas": problem.replicas,
        },
        data={"file": str(problem.path)},
    )
    return RdfFitResult(
        model=s.model.name,
        config=text,
        names=names,
        estimate=estimate,
        stderr={n: float("nan") for n in names},
        loss_history=np.asarray(runs.history),
        loss_stderr=np.asarray(runs.noise),
        path={n: np.asarray([row[i] for row in runs.trail]) for i, n in enumerate(names)},
        aim={
            n: np.asarray([float(f.to_natural(jnp.asarray(a[i]))) for a in runs.aims])
            for i, (n, f) in enumerate(zip(names, free, strict=False))
        },
        ess=np.asarray(runs.ess),
        r=spec.centres(),
        target=problem.target if len(spec.pairs) > 1 else problem.target[0],
        start=start_g if len(spec.pairs) > 1 else start_g[0],
        fitted=fitted_g if len(spec.pairs) > 1 else fitted_g[0],
        converged=runs.converged,
        message=runs.message,
        frames=frames,
        warnings=[]
        if runs.converged
        else [
            f"warning: the g(r) fit {runs.message}; raise fit.max_steps, or run longer for a less "
            "noisy average"
        ],
    )


def _plain(value):
    array = np.asarray(value)
    return array.item() if array.ndim == 0 else array.tolist()
