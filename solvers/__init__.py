"""Numerics, model-agnostic: they act on plain callables, arrays and pytrees."""

from ._ode import (
    ADJOINTS as ADJOINTS,
    OdeSolution as OdeSolution,
    OdeSolver as OdeSolver,
    SensitivitySolution as SensitivitySolution,
    did_you_mean as did_you_mean,
)
from ._results import Result as Result, from_diffrax as from_diffrax, result_message as result_message
from ._batched_ode import BATCHED_METHODS as BATCHED_METHODS, solve_batch as solve_batch, supports as batched_ode_supports
from ._events import OdeEvent as OdeEvent, solve_with_events as solve_with_events
from ._ode_loop import OdeLoop as OdeLoop, OdeLoopState as OdeLoopState, result_code as result_code
from ._frame_loops import (
    EtdrkLoop as EtdrkLoop,
    EtdrkLoopState as EtdrkLoopState,
    integrate_frames as integrate_frames,
)
from ._fd import FdGrid as FdGrid, FdSolution as FdSolution, MethodOfLines as MethodOfLines, stencil_weights as stencil_weights
from ._rollout import advance as advance, rollout as rollout
from ._sde import NOISE_KINDS as NOISE_KINDS, SdeSolution as SdeSolution, SdeSolver as SdeSolver
from ._sde_loop import SdeEnsemble as SdeEnsemble, SdeLoop as SdeLoop, SdeLoopState as SdeLoopState
from ._spectral import (
    NONFINITE as NONFINITE,
    Etdrk as Etdrk,
    EtdrkCoefficients as EtdrkCoefficients,
    FourierGrid as FourierGrid,
    SpectralSolution as SpectralSolution,
)
from ._particle_run import (
    ALL_PAIRS as ALL_PAIRS,
    FIXED_FACTOR as FIXED_FACTOR,
    ParticleProblem as ParticleProblem,
    ParticleFrames as ParticleFrames,
    ParticleRun as ParticleRun,
    concrete as concrete,
    fixed_capacity as fixed_capacity,
    neighbour_list as neighbour_list,
    larger_capacity as larger_capacity,
    largest_divisor_at_most as largest_divisor_at_most,
    redo_overflowed as redo_overflowed,
)
from ._neighbours import Neighbours as Neighbours, NeighbourList as NeighbourList, minimum_image as minimum_image
from ._particles import (
    ChainState as ChainState,
    Fire as Fire,
    FireState as FireState,
    LangevinBaoab as LangevinBaoab,
    NoseHooverChain as NoseHooverChain,
    ParticleIntegrator as ParticleIntegrator,
    ParticleSolver as ParticleSolver,
    ParticleState as ParticleState,
    VelocityVerlet as VelocityVerlet,
    integrate as integrate,
    kinetic_energy as kinetic_energy,
)
