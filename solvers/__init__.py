"""Numerics, model-agnostic: they act on plain callables, arrays and pytrees."""

from ._ode import (
    ADJOINTS as ADJOINTS,
    OdeSolution as OdeSolution,
    OdeSolver as OdeSolver,
    did_you_mean as did_you_mean,
    result_message as result_message,
)
from ._rollout import advance as advance, rollout as rollout
from ._spectral import (
    NONFINITE as NONFINITE,
    Etdrk as Etdrk,
    EtdrkCoefficients as EtdrkCoefficients,
    FourierGrid as FourierGrid,
    SpectralSolution as SpectralSolution,
)
