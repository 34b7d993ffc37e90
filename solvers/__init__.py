"""Numerics, model-agnostic: they act on plain callables, arrays and pytrees.

The names below are loaded from their modules when first used (`from solvers import
OdeSolver` loads `solvers._ode` alone), so that a program that solves ODEs does not
import the particle integrators or the spectral steppers."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# name -> (module, name in the module)
_NAMES: dict[str, tuple[str, str]] = {
    "ADJOINTS": ("._ode", "ADJOINTS"),
    "IMPLICIT_METHODS": ("._ode", "IMPLICIT_METHODS"),
    "ONE_FIELD_METHODS": ("._ode", "ONE_FIELD_METHODS"),
    "ODE_METHODS": ("._ode", "METHODS"),
    "OdeMethod": ("._ode", "OdeMethod"),
    "OdeSolution": ("._ode", "OdeSolution"),
    "OdeSolver": ("._ode", "OdeSolver"),
    "SensitivitySolution": ("._ode", "SensitivitySolution"),
    "did_you_mean": ("._words", "did_you_mean"),
    "Result": ("._results", "Result"),
    "checks_as_nan": ("._checks", "checks_as_nan"),
    "SlabRun": ("._slab_run", "SlabRun"),
    "SlabRunState": ("._slab_run", "SlabRunState"),
    "Slabs": ("._domains", "Slabs"),
    "slab_devices": ("._domains", "slab_devices"),
    "cannot_split_by_slabs": ("._domains", "cannot_split"),
    "from_diffrax": ("._results", "from_diffrax"),
    "result_message": ("._results", "result_message"),
    "BATCHED_METHODS": ("._batched_ode", "BATCHED_METHODS"),
    "solve_batch": ("._batched_ode", "solve_batch"),
    "batched_ode_supports": ("._batched_ode", "supports"),
    "local_structures": ("._batch_shards", "local_structures"),
    "on_batch_shards": ("._batch_shards", "on_batch_shards"),
    "OdeEvent": ("._events", "OdeEvent"),
    "solve_with_events": ("._events", "solve_with_events"),
    "OdeLoop": ("._ode_loop", "OdeLoop"),
    "OdeLoopState": ("._ode_loop", "OdeLoopState"),
    "result_code": ("._ode_loop", "result_code"),
    "EtdrkLoop": ("._frame_loops", "EtdrkLoop"),
    "EtdrkLoopState": ("._frame_loops", "EtdrkLoopState"),
    "integrate_frames": ("._frame_loops", "integrate_frames"),
    "FdGrid": ("._fd", "FdGrid"),
    "FdSolution": ("._fd", "FdSolution"),
    "MethodOfLines": ("._fd", "MethodOfLines"),
    "stencil_weights": ("._fd", "stencil_weights"),
    "SsaPaths": ("._gillespie", "SsaPaths"),
    "gillespie": ("._gillespie", "gillespie"),
    "HaloGrid": ("._halo", "HaloGrid"),
    "check_halo": ("._halo", "check_halo"),
    "advance": ("._rollout", "advance"),
    "rollout": ("._rollout", "rollout"),
    "NOISE_KINDS": ("._sde", "NOISE_KINDS"),
    "SdeSolution": ("._sde", "SdeSolution"),
    "SdeSolver": ("._sde", "SdeSolver"),
    "SdeEnsemble": ("._sde_loop", "SdeEnsemble"),
    "SdeLoop": ("._sde_loop", "SdeLoop"),
    "SdeLoopState": ("._sde_loop", "SdeLoopState"),
    "NONFINITE": ("._spectral", "NONFINITE"),
    "Etdrk": ("._spectral", "Etdrk"),
    "EtdrkCoefficients": ("._spectral", "EtdrkCoefficients"),
    "FourierGrid": ("._spectral", "FourierGrid"),
    "SpectralSolution": ("._spectral", "SpectralSolution"),
    "SLAB_AXIS": ("._spectral_sharded", "SLAB_AXIS"),
    "EtdrkSlabLoop": ("._spectral_sharded", "EtdrkSlabLoop"),
    "EtdrkSlabLoopState": ("._spectral_sharded", "EtdrkSlabLoopState"),
    "SlabGrid": ("._spectral_sharded", "SlabGrid"),
    "check_slabs": ("._spectral_sharded", "check_slabs"),
    "slab_coefficients": ("._spectral_sharded", "slab_coefficients"),
    "slab_irfft": ("._spectral_sharded", "slab_irfft"),
    "slab_mesh": ("._spectral_sharded", "slab_mesh"),
    "slab_rfft": ("._spectral_sharded", "slab_rfft"),
    "solve_slabs": ("._spectral_sharded", "solve_slabs"),
    "unpadded": ("._spectral_sharded", "unpadded"),
    "ALL_PAIRS": ("._particle_run", "ALL_PAIRS"),
    "FIXED_FACTOR": ("._particle_run", "FIXED_FACTOR"),
    "ParticleProblem": ("._particle_run", "ParticleProblem"),
    "ParticleFrames": ("._particle_run", "ParticleFrames"),
    "ParticleRun": ("._particle_run", "ParticleRun"),
    "concrete": ("._particle_run", "concrete"),
    "fixed_capacity": ("._particle_run", "fixed_capacity"),
    "neighbour_list": ("._particle_run", "neighbour_list"),
    "larger_capacity": ("._particle_run", "larger_capacity"),
    "largest_divisor_at_most": ("._particle_run", "largest_divisor_at_most"),
    "redo_overflowed": ("._particle_run", "redo_overflowed"),
    "PARTICLES_PER_SHARD": ("._particle_run", "PARTICLES_PER_SHARD"),
    "ORDERED_FROM": ("._particle_run", "ORDERED_FROM"),
    "shards_for": ("._particle_run", "shards_for"),
    "SHARD_AXIS": ("._neighbours", "SHARD_AXIS"),
    "Neighbours": ("._neighbours", "Neighbours"),
    "NeighbourList": ("._neighbours", "NeighbourList"),
    "minimum_image": ("._neighbours", "minimum_image"),
    "BarostatState": ("._barostat", "BarostatState"),
    "COUPLINGS": ("._barostat", "COUPLINGS"),
    "StochasticCellRescaling": ("._barostat", "StochasticCellRescaling"),
    "Constraints": ("._constraints", "Constraints"),
    "constraints_of": ("._constraints", "constraints_of"),
    "settle": ("._constraints", "settle"),
    "shake": ("._constraints", "shake"),
    "ChainState": ("._particles", "ChainState"),
    "Fire": ("._particles", "Fire"),
    "FireState": ("._particles", "FireState"),
    "LangevinBaoab": ("._particles", "LangevinBaoab"),
    "NoseHooverChain": ("._particles", "NoseHooverChain"),
    "ParticleIntegrator": ("._particles", "ParticleIntegrator"),
    "ParticleSolver": ("._particles", "ParticleSolver"),
    "ParticleState": ("._particles", "ParticleState"),
    "VelocityVerlet": ("._particles", "VelocityVerlet"),
    "integrate": ("._particles", "integrate"),
    "kinetic_energy": ("._particles", "kinetic_energy"),
}


def __getattr__(name: str):
    try:
        module, attribute = _NAMES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES})


__all__ = sorted(_NAMES)

if TYPE_CHECKING:
    from ._gillespie import (
        SsaPaths as SsaPaths,
        gillespie as gillespie,
    )
    from ._ode import (
        ADJOINTS as ADJOINTS,
        IMPLICIT_METHODS as IMPLICIT_METHODS,
        METHODS as ODE_METHODS,  # noqa: F401
        ONE_FIELD_METHODS as ONE_FIELD_METHODS,
        OdeMethod as OdeMethod,
        OdeSolution as OdeSolution,
        OdeSolver as OdeSolver,
        SensitivitySolution as SensitivitySolution,
    )
    from ._words import did_you_mean as did_you_mean
    from ._checks import checks_as_nan as checks_as_nan
    from ._domains import (
        Slabs as Slabs,
        cannot_split as cannot_split_by_slabs,  # noqa: F401 (a lazy name, see _NAMES)
        slab_devices as slab_devices,
    )
    from ._slab_run import SlabRun as SlabRun, SlabRunState as SlabRunState
    from ._results import (
        Result as Result,
        from_diffrax as from_diffrax,
        result_message as result_message,
    )
    from ._batched_ode import (
        BATCHED_METHODS as BATCHED_METHODS,
        solve_batch as solve_batch,
        supports as batched_ode_supports,  # noqa: F401 (a lazy name, see _NAMES)
    )
    from ._batch_shards import (
        local_structures as local_structures,
        on_batch_shards as on_batch_shards,
    )
    from ._events import OdeEvent as OdeEvent, solve_with_events as solve_with_events
    from ._ode_loop import (
        OdeLoop as OdeLoop,
        OdeLoopState as OdeLoopState,
        result_code as result_code,
    )
    from ._frame_loops import (
        EtdrkLoop as EtdrkLoop,
        EtdrkLoopState as EtdrkLoopState,
        integrate_frames as integrate_frames,
    )
    from ._fd import (
        FdGrid as FdGrid,
        FdSolution as FdSolution,
        MethodOfLines as MethodOfLines,
        stencil_weights as stencil_weights,
    )
    from ._halo import HaloGrid as HaloGrid, check_halo as check_halo
    from ._rollout import advance as advance, rollout as rollout
    from ._sde import NOISE_KINDS as NOISE_KINDS, SdeSolution as SdeSolution, SdeSolver as SdeSolver
    from ._sde_loop import (
        SdeEnsemble as SdeEnsemble,
        SdeLoop as SdeLoop,
        SdeLoopState as SdeLoopState,
    )
    from ._spectral import (
        NONFINITE as NONFINITE,
        Etdrk as Etdrk,
        EtdrkCoefficients as EtdrkCoefficients,
        FourierGrid as FourierGrid,
        SpectralSolution as SpectralSolution,
    )
    from ._spectral_sharded import (
        SLAB_AXIS as SLAB_AXIS,
        EtdrkSlabLoop as EtdrkSlabLoop,
        EtdrkSlabLoopState as EtdrkSlabLoopState,
        SlabGrid as SlabGrid,
        check_slabs as check_slabs,
        slab_coefficients as slab_coefficients,
        slab_irfft as slab_irfft,
        slab_mesh as slab_mesh,
        slab_rfft as slab_rfft,
        solve_slabs as solve_slabs,
        unpadded as unpadded,
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
        ORDERED_FROM as ORDERED_FROM,
        PARTICLES_PER_SHARD as PARTICLES_PER_SHARD,
        shards_for as shards_for,
    )
    from ._neighbours import SHARD_AXIS as SHARD_AXIS
    from ._neighbours import (
        Neighbours as Neighbours,
        NeighbourList as NeighbourList,
        minimum_image as minimum_image,
    )
    from ._barostat import (
        BarostatState as BarostatState,
        COUPLINGS as COUPLINGS,
        StochasticCellRescaling as StochasticCellRescaling,
    )
    from ._constraints import (
        Constraints as Constraints,
        constraints_of as constraints_of,
        settle as settle,
        shake as shake,
    )
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
