"""Calibration and Bayesian inference over simjax simulators (built on `sim`)."""

from ._data import Observations as Observations, load_observations as load_observations
from ._fit import FitResult as FitResult, Problem as Problem, build_problem as build_problem, fit as fit
