"""PEtab problems (format version 1): an SBML model, conditions, measurements,
observables with their noise models, and a parameter table, read with the `petab`
library and turned into one differentiable objective.

The objective is the negative log-likelihood of every measurement with all normalising
constants (the PEtab convention; priors excluded), as a function of the estimated
parameters on their PEtab scale (lin, log or log10). Every simulation condition (a
simulation condition with its preequilibration condition, if any) is one run of the
imported model; the runs are padded to a common number of save times and solved
together under `jax.vmap`, so one compiled program evaluates the whole problem.
Observable and noise formulas are read by PEtab's own parser (`sympify_petab`) and the
resulting syntax tree is compiled to `jax.numpy` closures (`inference._petab_formulas`),
never evaluated as text.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from physics.ode import SbmlError, sbml_model
from sim.core import warn_if_float32
from solvers import OdeSolver

from ._petab_files import (
    PetabError as PetabError,
    check_headers,
    confined,
    lint,
    petab_library,
    read_spec,
)
from ._petab_objective import Layout, residual_terms
from ._petab_problem import PetabProblem, _Sources
from ._petab_tables import (
    Conditions,
    check_used,
    measurements,
    observables,
    parameter_table,
    save_times,
)


def load_petab(
    path: str | Path, solver: OdeSolver | None = None, *, allow_outside: bool = False
) -> PetabProblem:
    """Read a PEtab problem (format version 1) from its YAML file.

    The YAML file and the header of every table are checked first
    (`inference._petab_files`); every file it names must lie inside its folder (after
    resolving links) unless `allow_outside`, and one that does not is never opened.

    Arguments:
        path: the problem's YAML file.
        solver: the ODE solver of its simulations; None for kvaerno5 with rtol 1e-8,
            atol 1e-10 and at most 100,000 steps, a failed solve giving NaN.
        allow_outside: allow the files the YAML names to lie outside its folder.

    Returns:
        A `PetabProblem`: the imported SBML model, the parameter table, the solver, the
        simulations (one per simulation condition with its preequilibration) and the
        objective's terms.

    Raises:
        PetabError: the problem cannot be read or uses what is not supported (one line
            naming the file, the table, the row and the column, or the YAML key).
        MissingExtra: the 'petab' extra is not installed.
    """
    warn_if_float32("inference.load_petab")
    path = Path(path)
    problem, spec, files = _read(path, allow_outside)
    sbml_files = spec["problems"][0]["sbml_files"]
    try:
        model = sbml_model(path.parent / sbml_files[0])
    except SbmlError as e:
        raise PetabError(f"{path}: {e}") from None

    parameters = parameter_table(path, problem.parameter_df)
    sources = _Sources(parameters)
    # (what the model is: its parameters, species (initial values), observables)
    model_params = list(model.parameter_names)
    defaults = {k: float(v) for k, v in model.default_params().items()}
    states = list(model.state_names)
    model_ids = set(model.observable_names)
    conditions = Conditions(path, problem.condition_df, model, sources)
    # The parameter table's model parameters hold for every condition.
    table_params = {p.id: sources.index[p.id] for p in parameters if p.id in model_params}
    m = measurements(path, problem)
    ts, time_index = save_times(m)
    # Per simulation: its model parameters and initial values, from the table and its
    # condition (and those of its preequilibration).
    keys = m.keys
    sim_params, sim_initial = conditions.settings(
        [k[1] for k in keys], "simulationConditionId", table_params, defaults
    )
    pre_groups = np.array([g for g, k in enumerate(keys) if k[0]], dtype=int)
    pre_params, pre_initial = conditions.settings(
        [k[0] or k[1] for k in keys], "preequilibrationConditionId", table_params, defaults
    )
    observed = observables(path, problem, m, sources, parameters, model_ids)
    check_used(path, model, parameters, sources)
    lint(path, problem, files)  # (the library's own checks, after ours: they name rows and columns)

    # (a failed solve gives NaN, an infinite objective, never an exception mid-fit)
    solver = solver or OdeSolver(
        method="kvaerno5", rtol=1e-8, atol=1e-10, max_steps=100_000, throw=False
    )
    out = PetabProblem(path, model, parameters, solver, allow_outside)
    out.simulations = keys
    layout = Layout(
        model=model,
        states=states,
        compartments=model.species_compartments,
        amount_species=model.amount_species,
        defaults=defaults,
        constants=np.asarray(sources.constants, dtype=float),
        param_position={pid: j for j, pid in enumerate(model_params)},
        table_ids=list(sources.index),
        ts=jnp.asarray(ts),
        sim_params=sim_params,
        sim_initial=sim_initial,
        pre_groups=pre_groups,
        pre_params=pre_params,
        pre_initial=pre_initial,
        group_of_row=m.group_of_row,
        time_index=time_index,
        measured=m.measured,
    )
    out.residual_terms = residual_terms(out, layout, observed)
    out.observables = observed
    return out


def _read(path: Path, allow_outside: bool):
    """(the `petab.Problem`, its YAML spec, the files it names) of a PEtab problem, its
    YAML file and the headers of its tables checked first."""
    petab = petab_library(path)
    if not path.is_file():
        raise PetabError(f"{path}: no such file; expected a PEtab problem (YAML)")
    spec = read_spec(path)
    files = confined(path, spec, allow_outside)
    check_headers(path, files)
    try:
        with warnings.catch_warnings():  # (the library's own deprecation warnings)
            warnings.simplefilter("ignore")
            # (the spec already read and checked, so that the files read are those checked)
            problem = petab.Problem.from_yaml(spec, base_path=str(path.parent))
    except Exception as e:  # (the library reports a broken table in many ways)
        reason = (
            f"the key {e.args[0]!r} is missing"
            if isinstance(e, KeyError) and e.args
            else (str(e).splitlines()[0] if str(e) else type(e).__name__)
        )
        raise PetabError(f"{path}: not a readable PEtab problem: {reason}") from None
    return problem, spec, files
