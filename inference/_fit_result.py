"""A finished config fit and its file: the `FitResult` (estimates, standard errors, the
loss history, the fitted curves, every start's end of a multistart fit, each
experiment's curves and data), written in the fit layout, and the resolved config it
records, with the fitted values in `[params]` and `[initial]`."""

from __future__ import annotations

import dataclasses

import h5py
import numpy as np
from jaxtyping import Array

from sim import Config
from sim.core import Result, optional_module, resolved_toml, write_group, write_root_attrs

from ._data import Observations, jsonable
from ._fit_estimates import fit_warnings
from ._fit_problem import Experiments, Problem
from ._fit_section import FitSection
from ._multistart import SAME_OPTIMUM, few_reached, starts_at_best
from ._result_text import number, short_repr


@dataclasses.dataclass
class FitResult(Result):
    """A finished calibration.

    Attributes:
        names: the free quantities, in config order.
        estimate: name -> fitted value (natural units).
        stderr: name -> standard error from the Gauss-Newton covariance.
        covariance: [p, p] covariance of the estimates (order of `names`).
        loss_history: loss (half the sum of squared whitened residuals) per iteration.
        converged, message: how the optimiser ended.
        time, prediction: the fitted model on a fine grid over the simulated span.
        observations: the data that was fitted.
        warnings: lines telling what makes the estimates or their errors doubtful
            (`fit_warnings`, and a multistart's best reached by too few starts), each with
            what to try.
        reached_best: with several starts, how many ended within `SAME_OPTIMUM` of the
            best negative log-likelihood (`inference._multistart.starts_at_best`; None
            without a likelihood, as an mse fit).
    """

    model: str
    config: str
    names: list[str]
    estimate: dict[str, float]
    stderr: dict[str, float]
    covariance: np.ndarray
    loss_history: np.ndarray
    converged: bool
    message: str
    time: np.ndarray
    prediction: dict[str, np.ndarray]
    observations: Observations
    seed: int | None = None
    objective: float = float("nan")
    starts_objective: np.ndarray | None = None
    starts_estimate: dict[str, np.ndarray] | None = None
    starts_converged: np.ndarray | None = None
    # name -> (time, prediction, observations) of each experiment ([[experiments]])
    experiments: dict[str, tuple[np.ndarray, dict[str, np.ndarray], Observations]] | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)
    # the digests of the files the fit read (`sim._identity`, JSON); "" when unknown
    inputs: str = ""
    reached_best: int | None = None

    @property
    def starts_summary(self) -> str:
        """How many of a multistart fit's starts reached the best objective, as a line
        ("" for a fit of one start, or without a likelihood)."""
        if self.starts_objective is None or self.reached_best is None:
            return ""
        return (
            f"{self.reached_best} of {len(self.starts_objective)} starts reached the best "
            f"objective (within {SAME_OPTIMUM})"
        )

    def __repr__(self) -> str:
        starts = [] if self.starts_objective is None else [f"starts={len(self.starts_objective)}"]
        if starts and self.reached_best is not None:
            starts.append(f"reached_best={self.reached_best}/{len(self.starts_objective)}")
        loss = number(self.loss_history[-1]) if len(self.loss_history) else "nan"
        return short_repr(
            "FitResult",
            [f"model={self.model!r}"],
            {n: number(self.estimate[n]) for n in self.names},
            [f"loss={loss}", f"converged={bool(self.converged)}", *starts],
        )

    def to_xarray(self):
        """An `xarray.Dataset`: `estimate`, `stderr` and `covariance` over `parameter`
        (and `parameter_2`), the fitted model's `prediction_<name>` over `time`, the fitted
        data `data_<name>` over `data_time` (model time), `loss_history` over `iteration`.

        Raises:
            MissingExtra: xarray is not installed (an `ImportError`).
        """
        xr = optional_module("xarray", "xarray", "xarray Datasets")

        def trailing(name: str, value: np.ndarray) -> list[str]:
            return [f"{name}_axis_{i}" for i in range(value.ndim - 1)]

        data: dict[str, tuple] = {
            "estimate": ("parameter", np.array([self.estimate[n] for n in self.names])),
            "stderr": ("parameter", np.array([self.stderr[n] for n in self.names])),
            "covariance": (("parameter", "parameter_2"), np.asarray(self.covariance)),
            "loss_history": ("iteration", np.asarray(self.loss_history)),
        }
        for name, value in self.prediction.items():
            value = np.asarray(value)
            data[f"prediction_{name}"] = (["time", *trailing(name, value)], value)
        for name, value in self.observations.values.items():
            value = np.asarray(value)
            data[f"data_{name}"] = (["data_time", *trailing(name, value)], value)
        coords = {
            "parameter": list(self.names),
            "parameter_2": list(self.names),
            "time": np.asarray(self.time),
            "data_time": np.asarray(self.observations.time),
        }
        attrs = {
            "model": self.model,
            "config": self.config,
            "converged": int(self.converged),
            "message": self.message,
        }
        return xr.Dataset(
            data,
            coords=coords,
            attrs={**attrs, **({"seed": self.seed} if self.seed is not None else {})},
        )

    def write(self, f: h5py.File) -> None:
        """The fit layout (docs/architecture.md, File layouts) in `f`."""
        write_root_attrs(
            f, format="simjax.fit", model=self.model, config=self.config, seed=self.seed
        )
        if self.inputs:
            f.attrs["inputs"] = self.inputs
        write_group(f, "estimate", self.estimate)
        write_group(f, "stderr", self.stderr)
        f.create_dataset("loss_history", data=self.loss_history)
        f.create_dataset("time", data=self.time)
        write_group(f, "prediction", self.prediction)
        f["objective"] = self.objective
        for name, (t, prediction, obs) in (self.experiments or {}).items():
            group = f.require_group(f"experiments/{name}")
            group.create_dataset("time", data=t)
            write_group(group, "prediction", prediction)
            group.create_dataset("data/time", data=obs.time)
            write_group(group["data"], "observables", obs.values)
        if self.starts_objective is not None:
            write_group(
                f,
                "starts",
                {
                    "objective": self.starts_objective,
                    "converged": np.asarray(self.starts_converged, dtype=np.int8),
                },
            )
            write_group(f["starts"], "estimate", self.starts_estimate)
            if self.reached_best is not None:
                f.attrs["reached_best"] = int(self.reached_best)
                f.attrs["reached_best_within"] = SAME_OPTIMUM
        cov = f.create_dataset("covariance", data=self.covariance)
        cov.attrs["names"] = self.names
        data = f.create_group("data")
        data.create_dataset("time", data=self.observations.time)
        write_group(data, "observables", self.observations.values)
        f.attrs["converged"] = self.converged
        f.attrs["message"] = self.message

    def table(self) -> list[tuple[str, float, float]]:
        """(name, estimate, standard error) rows."""
        return [(n, self.estimate[n], self.stderr[n]) for n in self.names]


def fit_result(
    config: Config,
    section: FitSection,
    problem: Problem | Experiments,
    observations: list[Observations],
    x: dict[str, Array],
    best: tuple,
    *,
    objective: float,
    starts_objective: np.ndarray | None,
    starts_converged: np.ndarray | None,
    curves: list[tuple[np.ndarray, dict]],
    covariance: np.ndarray,
    inputs: str,
) -> FitResult:
    """The `FitResult` of a fit that ended at natural values `x`: `best` the optimiser's
    (u, loss history, ok, message, every start's end), `curves` the fitted curves of each
    problem (its times and the observables there), `covariance` that of the estimates,
    `inputs` the digests of the files the fit read."""
    _, history, ok, message, ends = best
    several = isinstance(problem, Experiments)
    cov = covariance
    names = [f.name for f in problem.free]
    stderr = {
        n: float(np.sqrt(cov[i, i])) if cov[i, i] >= 0 else float("nan")
        for i, n in enumerate(names)
    }

    reached = None if starts_objective is None else starts_at_best(starts_objective)
    runs = [(t, {k: np.asarray(v) for k, v in curve.items()}) for t, curve in curves]
    t_fine, prediction = runs[0]
    estimate = {n: float(x[n]) for n in names}
    return FitResult(
        model=problem.model.name,
        config=_fitted_config(config, section, problem, estimate),
        names=names,
        estimate=estimate,
        stderr=stderr,
        covariance=cov,
        loss_history=np.asarray(history),
        converged=ok,
        message=message,
        time=np.asarray(t_fine),
        prediction=prediction,
        observations=observations[0],
        seed=section.seed if section.starts > 1 else None,
        objective=objective,
        starts_objective=starts_objective,
        starts_estimate={n: np.array([e[2][n] for e in ends]) for n in names}
        if starts_objective is not None
        else None,
        starts_converged=starts_converged,
        experiments={
            name: (t, pred, o)
            for name, (t, pred), o in zip(problem.names, runs, observations, strict=False)
        }
        if several
        else None,
        warnings=[
            *fit_warnings(list(problem.free), estimate, cov),
            *few_reached(reached, section.starts),
        ],
        inputs=inputs,
        reached_best=reached,
    )


def _fitted_config(
    config: Config,
    section: FitSection,
    problem: Problem | Experiments,
    estimate: dict[str, float],
) -> str:
    """The resolved config of a fit: its `[params]` and `[initial]` with the fitted
    values, its `[fit]` with every setting."""
    several = isinstance(problem, Experiments)
    problem_0 = problem.problems[0] if several else problem
    fitted_params = {f.key: estimate[f.name] for f in problem.free if f.kind == "params"}
    fitted_initial = {f.key: estimate[f.name] for f in problem.free if f.kind == "initial"}
    fit_resolved = section.model_dump(exclude_defaults=False)
    fit_resolved = {k: v for k, v in fit_resolved.items() if v not in ({}, None)}
    # (with experiments, the shared values: each experiment's own stay in [[experiments]])
    params = config.raw.get("params") or {} if several else problem_0.params
    initial = (
        (config.raw.get("initial") or {} if several else problem_0.initial)
        if isinstance(problem_0.initial, dict)
        else None
    )
    return resolved_toml(
        config,
        params={**{k: jsonable(v) for k, v in params.items()}, **fitted_params},
        **(
            {"initial": {**{k: jsonable(v) for k, v in initial.items()}, **fitted_initial}}
            if initial is not None
            else {}
        ),
        fit=fit_resolved,
    )
