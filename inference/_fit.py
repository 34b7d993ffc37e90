"""Calibration by gradients through the time stepping: free quantities (parameters and
initial values) fitted to observations by Levenberg-Marquardt, BFGS or Adam, with
standard errors from the Gauss-Newton (Laplace) covariance.

`fit` is the entry point (what `sim fit` does): the problem built (`inference._fit_build`),
the optimiser run from one start or many (`inference._fit_loops`,
`inference._fit_multistart`), checkpointed beside its output; at the optimiser's end the
polish, the likelihood and the covariance (`inference._fit_estimates`) and the result
(`inference._fit_result`)."""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

import sim
from sim import Config
from sim.core import (
    Progress,
    Result,
    check_output_path,
    config_inputs,
    dask_client,
    exclusive,
    family_of,
    memory_problem,
    warn_if_float32,
)
from solvers import checks_as_nan

from ._checkpoint import Checkpointer, checkpoint_path
from ._data import Observations
from ._fit_build import (
    build_problem,
    experiment_problems as experiment_problems,
    make_problem as make_problem,
)
from ._fit_estimates import gauss_newton_polish, negative_log_likelihood, standard_errors
from ._fit_loops import _adam, _optimistix
from ._fit_multistart import _data_identity, _fit_starts, _latin_hypercube_starts
from ._fit_problem import Experiments, Problem, observation_models as observation_models
from ._fit_result import FitResult, fit_result
from ._fit_section import FitSection
from ._multistart import spread_check


@checks_as_nan()
def fit(
    config: Config,
    data: str | Path | None = None,
    *,
    progress: bool = False,
    output: str | Path | None = None,
    resume: bool = False,
    devices: int | None = None,
    scheduler: str | None = None,
) -> FitResult | Result:
    """Fit a config's free quantities to its observations (what `sim fit` does).

    Arguments:
        config: with `[data]` (observations) and `[fit]` (free quantities, loss, optimizer).
        data: an HDF5 file that replaces `data.file`.
        progress: show the loss per iteration on the terminal.
        output: write the fit file here when done; meanwhile the optimiser's iteration,
            parameters and state are checkpointed beside it (every `fit.checkpoint_every`
            iterations, default at most every 30 s) in `.<name>.checkpoint`, and a stop
            after the optimiser has ended (in the polish, the standard errors or the
            fitted curves) keeps its end there.
        resume: continue the unfinished fit of `output` from its checkpoint; it ends
            with the estimates of an uninterrupted fit.
        devices: with `fit.starts` > 1, the starts run as one batch split over the
            first N local devices (default: all).
        scheduler: with `fit.starts` > 1, a Dask scheduler address, or `local:N` for a
            local cluster of N worker processes: the starts run in blocks, one task per
            worker thread (`_fit_starts`).

    Returns:
        A `FitResult` with estimates, standard errors, the loss history and the fitted
        prediction; `.save(path)` writes the fit layout. (A config with `[rdf]` and a
        `[data]` without `time` is a fit to a target g(r): `inference._fit_rdf`, whose
        `RdfFitResult` has the same `table`, `loss_history` and `warnings`.)

    Raises:
        ConfigError, DataError: bad config or data (naming the file and key).
        InputError: a checkpoint is there and `resume` is False; `resume` and no
            checkpoint, or one of another config or data (files left as they were); a
            bad `devices` or `scheduler`, or either for a fit of one start.

    Example:
        >>> estimate = fit(sim.load_config("experiments/lynx_hare.toml"))
        >>> estimate.table()
    """
    warn_if_float32("inference.fit")
    from ._fit_rdf import fit_rdf, is_rdf_fit

    if is_rdf_fit(config):  # (a target g(r), fitted by reweighting: `inference._fit_rdf`)
        return fit_rdf(config, data, progress=progress, output=output)
    problem, start, obs, section = build_problem(config, data)
    _check_starts_memory(config, section, len(problem.free), obs)
    for p in problem.problems if isinstance(problem, Experiments) else (problem,):
        if p.observation is not None and any(
            o.sigma_formula is not None for o in p.observation.observed
        ):
            p.observation.check_sigma(config, p.values(start), p.observed, "at the start values")
    n_devices = spread_check(section.starts, devices, scheduler)
    u0 = problem.unconstrained(start)
    # Every start point is drawn up front, so a resumed fit starts where the first did.
    starts = [u0, *_latin_hypercube_starts(problem, u0, section.starts - 1, section.seed)]
    identity = _data_identity(obs)
    if output is None:
        with dask_client(scheduler) as client:
            return _fit(
                config,
                problem,
                start,
                obs,
                section,
                starts,
                identity,
                progress,
                None,
                resume,
                devices=n_devices,
                client=client,
                data=data,
            )
    output = check_output_path(output)
    with exclusive(output), dask_client(scheduler) as client:
        return _fit(
            config,
            problem,
            start,
            obs,
            section,
            starts,
            identity,
            progress,
            output,
            resume,
            devices=n_devices,
            client=client,
            data=data,
        )


def _check_starts_memory(
    config: Config, section: FitSection, free: int, obs: Observations | list[Observations]
) -> None:
    """Refuse, before any start is drawn, `[fit] starts` whose arrays cannot fit in
    memory: per start at least its point, its optimiser's state and its end (3 values
    per free quantity) and its lane of the residuals (one per observed value), float64.

    Raises:
        ConfigError: naming fit.starts (what --starts sets).
    """
    values = sum(
        int(np.size(v))
        for o in (obs if isinstance(obs, list) else [obs])
        for v in o.values.values()
    )
    problem = memory_problem(
        8 * section.starts * (3 * free + values),
        f"{section.starts:,} starts of {free} free quantities and {values:,} observed values",
    )
    if problem:
        raise config.error("fit.starts", f"{problem}; expected fewer starts")


def _fit(
    config: Config,
    problem: Problem | Experiments,
    start,
    obs: Observations | list[Observations],
    section: FitSection,
    starts: list,
    identity: str,
    progress: bool,
    output: Path | None,
    resume: bool,
    *,
    devices: int = 1,
    client=None,
    data: str | Path | None = None,
) -> FitResult:
    """`fit` from its problem and start points on, writing `output` (held locked); the
    starts of a multistart fit batched on `devices` local devices or in blocks on the
    Dask cluster of `client` (`_fit_starts`)."""
    ck = Checkpointer(
        None if output is None else checkpoint_path(output),
        identity,
        config=config.to_toml(),
        resume=resume,
        every=section.checkpoint_every,
        inputs=None if output is None else config_inputs(config, {"--data": data}),
    )
    best = None
    if ck.saved is not None:
        best = ck.restore_best(starts[0])
    # (a checkpoint as of every start: written after the optimiser had ended)
    if best is None or ck.first_start() < section.starts:
        remote = None if client is None else (client, config, data, identity)
        model = (problem.problems[0] if isinstance(problem, Experiments) else problem).model
        notes = family_of(model).solver_notes(model, config)
        best = _optimised(problem, starts, section, progress, ck, best, devices, remote, notes)
    u, history, ok, message, ends = best

    def safe() -> None:
        # What follows the optimiser (the polish, the likelihoods, the standard errors,
        # the fitted curves) compiles programs of its own, which take long for a model
        # with events; a stop between them keeps the optimiser's end (as if every start
        # were done), and a resume goes on from it.
        ck.safe_point(section.starts, 0, None, [], best)

    safe()
    x = problem.natural(u)
    if ok and section.optimizer == "levenberg_marquardt" and problem.least_squares:
        x = gauss_newton_polish(problem, x)
        safe()
    several = isinstance(problem, Experiments)
    problems, observations = (problem.problems, obs) if several else ((problem,), [obs])
    sigma_known = all(name in o.sigma for o in observations for name in o.values)
    curves = _fitted_curves(problems, x, safe)
    predicted = [a for _, (a, _) in curves]
    objective = _likelihood(problems, observations, x, predicted)
    safe()
    no_likelihood = (
        problems[0].observation is None and problems[0].loss == "mse"
    )  # (its objective is NaN)
    _check_end(config, problems, x, predicted, objective, no_likelihood, safe)
    starts_objective, starts_converged = _starts_ends(
        problems, observations, ends, section, no_likelihood
    )
    safe()
    cov = standard_errors(problem, x, sigma_known)
    safe()
    result = fit_result(
        config,
        section,
        problem,
        observations,
        x,
        best,
        objective=objective,
        starts_objective=starts_objective,
        starts_converged=starts_converged,
        curves=[(t, at_t) for t, (_, at_t) in curves],
        covariance=cov,
        inputs="" if ck.inputs is None else ck.inputs.inputs_json(),
    )
    if output is not None:
        result.save(output)
        ck.finish()
    return result


def _optimised(
    problem: Problem | Experiments,
    starts: list,
    section: FitSection,
    progress: bool,
    ck: Checkpointer,
    best,
    devices: int,
    remote,
    notes: tuple[str, ...] = (),
) -> tuple:
    """The optimiser's end: (u, loss history, ok, message) of the best start and every
    start's (final loss, ok, natural values), with a progress bar of its steps (and
    `notes`, `Family.solver_notes`, once it has ended); one start by the single-start
    optimiser, several by `_fit_starts`."""
    run = _adam if section.optimizer == "adam" else _optimistix
    with Progress(enabled=progress, description=f"fit {section.optimizer}") as bar:
        for line in notes:
            bar.note(line)
        bar.start(
            total=(section.max_steps or (1000 if section.optimizer == "adam" else 200))
            * section.starts
        )

        def on_step(i, loss, skipped=0):
            bar.advance(skipped or 1)
            bar.describe(f"fit {section.optimizer}: step {i}, loss {loss:.6g}")

        if section.starts == 1:
            u, history, ok, message = run(problem, starts[0], section, on_step, ck=ck)
            return (
                u,
                history,
                ok,
                message,
                [(history[-1], ok, {n: float(v) for n, v in problem.natural(u).items()})],
            )
        return _fit_starts(problem, starts, section, bar, ck, best, devices, remote)


def _fitted_curves(problems: tuple, x: dict[str, Array], safe) -> list[tuple[np.ndarray, tuple]]:
    """(times, (prediction at the data's times, fitted curves there)) of each problem,
    from one solve: the curves on a fine grid (at the data's times for fixed-step MD
    runs); a safe point after each."""
    fine = [
        np.linspace(float(p.t_sim[0]), float(p.t_sim[-1]), 201)
        if p.fixed_times is None
        else np.asarray(p.fixed_times)
        for p in problems
    ]
    at_estimate = []
    for p, t in zip(problems, fine, strict=False):
        at_estimate.append(p.predict_and_curves(x, t))
        safe()
    return list(zip(fine, at_estimate, strict=False))


def _likelihood(
    problems: tuple, observations: list[Observations], x: dict[str, Array], predicted=None
) -> float:
    """The negative log-likelihood of every problem's observations at natural values `x`
    (`predicted`: each problem's prediction, when already computed)."""
    return sum(
        negative_log_likelihood(p, x, set(o.sigma), pr)
        for p, o, pr in zip(
            problems, observations, predicted or [None] * len(problems), strict=False
        )
    )


def _solved(problems: tuple, x: dict[str, Array], predicted=None) -> bool:
    """Whether every problem's prediction at natural values `x` is finite."""
    return all(
        np.all(np.isfinite(np.asarray(v)))
        for p, pr in zip(problems, predicted or [p.predict(x) for p in problems], strict=False)
        for v in pr.values()
    )


def _check_end(
    config: Config,
    problems: tuple,
    x: dict[str, Array],
    predicted: list,
    objective: float,
    no_likelihood: bool,
    safe,
) -> None:
    """Refuse an end where the model's solve fails or the likelihood is not finite.

    Raises:
        SimulationError: naming where the fit ended; nothing is written.
    """
    # A failed solve gives NaN, which the optimiser saw only as a stand-in residual (from
    # a start where the solve fails it stops there at once); a finite likelihood vouches
    # for the prediction, the mse loss has none to.
    if (no_likelihood or not np.isfinite(objective)) and not _solved(problems, x, predicted):
        at = ", ".join(f"{n} = {float(v):.6g}" for n, v in x.items())
        raise sim.SimulationError(
            f"{config.path}: the model's solve fails where the fit ended ({at}): its prediction at "
            "the observation times is "
            "not finite; start the fit where the model can be solved ([params], [initial]), or "
            "narrow [fit] bounds; nothing written"
        )
    safe()
    if not (no_likelihood or np.isfinite(objective)):
        # (the optimiser only saw a large stand-in residual where the likelihood has none)
        raise sim.SimulationError(
            f"{config.path}: the fit ended where the negative log-likelihood is not finite "
            f"({objective}): a sigma that is not "
            "positive at some observation, or a prediction that its noise model cannot take (a log "
            "of a value <= 0); nothing written"
        )


def _starts_ends(
    problems: tuple,
    observations: list[Observations],
    ends: list,
    section: FitSection,
    no_likelihood: bool,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(negative log-likelihood, converged) of every start's end of a multistart fit;
    (None, None) for a fit of one start."""
    if section.starts <= 1:
        return None, None
    starts_objective = np.array(
        [
            _likelihood(problems, observations, {n: jnp.asarray(v) for n, v in e[2].items()})
            for e in ends
        ]
    )
    # (a start that ended where the solve fails, or where the likelihood is not finite,
    # has not converged, whatever its optimiser said)
    starts_converged = np.array(
        [
            e[1]
            and bool(
                _solved(problems, {n: jnp.asarray(v) for n, v in e[2].items()})
                if no_likelihood
                else np.isfinite(f)
            )
            for e, f in zip(ends, starts_objective, strict=False)
        ]
    )
    return starts_objective, starts_converged
