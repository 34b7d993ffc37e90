"""Calibration and Bayesian inference over simjax simulators (built on `sim`)."""

from typing import TYPE_CHECKING

from ._data import Observations as Observations, load_observations as load_observations
from ._fit import (
    FitResult as FitResult,
    Problem as Problem,
    build_problem as build_problem,
    fit as fit,
)
from ._train import (
    Trainer as Trainer,
    TrainResult as TrainResult,
    TrainState as TrainState,
    Trajectories as Trajectories,
    load_trained as load_trained,
    load_trajectories as load_trajectories,
    save_trained as save_trained,
    save_trajectories as save_trajectories,
    simulate_states as simulate_states,
    Stage as Stage,
    train as train,
    train_stages as train_stages,
    trajectory_mse as trajectory_mse,
)
from ._bayes_model import BayesModel as BayesModel, build_bayes_model as build_bayes_model
from ._bayes import PosteriorResult as PosteriorResult, infer as infer
from ._fit import make_problem as make_problem
from ._diagnostics import sampling_warnings as sampling_warnings
from ._checkpoint import checkpoint_path as checkpoint_path

# PEtab problems and their profiles, loaded when first used (`import inference` does not
# import the PEtab modules): name -> (module, name in the module)
from physics import lazy_names  # noqa: E402

_NAMES: dict[str, tuple[str, str]] = {
    "fit_petab": ("._petab_fit", "fit_petab"),
    "load_petab": ("._petab", "load_petab"),
    "problem_files": ("._petab_files", "problem_files"),
    "infer_petab": ("._petab_bayes", "infer_petab"),
    "profile_config": ("._profile", "profile_config"),
    "profile_petab": ("._profile", "profile_petab"),
}


__getattr__, __dir__ = lazy_names(__name__, _NAMES, globals())


# The public names
__all__ = [
    "BayesModel",
    "FitResult",
    "Observations",
    "PosteriorResult",
    "Problem",
    "Stage",
    "TrainResult",
    "TrainState",
    "Trainer",
    "Trajectories",
    "build_bayes_model",
    "build_problem",
    "checkpoint_path",
    "fit",
    "fit_petab",
    "infer",
    "infer_petab",
    "load_observations",
    "load_petab",
    "load_trained",
    "load_trajectories",
    "make_problem",
    "problem_files",
    "profile_config",
    "profile_petab",
    "sampling_warnings",
    "save_trained",
    "save_trajectories",
    "simulate_states",
    "train",
    "train_stages",
    "trajectory_mse",
]

if TYPE_CHECKING:
    from ._petab import load_petab as load_petab
    from ._petab_bayes import infer_petab as infer_petab
    from ._petab_files import problem_files as problem_files
    from ._petab_fit import fit_petab as fit_petab
    from ._profile import profile_config as profile_config, profile_petab as profile_petab
