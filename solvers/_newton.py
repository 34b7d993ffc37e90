"""The root finder of the stage equations of implicit and IMEX Runge-Kutta methods.

diffrax's implicit methods solve their stage equations with a chord method by default
(the Jacobian taken once per step) ended by the contraction rate of its iterations
(Hairer and Wanner's test: the predicted remaining error below `kappa` times the
tolerances); optimistix's Newton can also end by its "Cauchy" test (the correction and
the residual below the tolerances, the residual against `atol` alone). Each test fails
on its own kind of model, and a failed iteration rejects the step: the solver then
shrinks it again and again.

- The rate test stalls when the corrections reach rounding above kappa times a small
  state's tolerance. Kvaerno5 on Fujita_SciSignal2010 (PEtab benchmark collection, 6
  conditions, rtol 1e-8): 124,477 steps with the chord method, 80,608 with Newton; at
  rtol 1e-12 more than 200,000, a failed solve.
- The residual test never holds on Weber_BMC2015, whose states reach 1e8: the residual
  cannot fall below atol = 1e-10 in floating point. Newton with it alone: 19,175 steps,
  where the chord method takes 3,837.

`StageNewton` (Newton's method, the Jacobian at every iterate) ends at whichever of the
two tests holds first: Fujita 1,762 steps, Weber 692, 13.4x fewer steps than the chord
method over thirteen problems of the collection (experiments/benchmarks/RESULTS.md,
"Newton's method in the stages"). A Jacobian and an LU per iteration cost more than the
rejected steps they save on large systems (Chen_MSB2009, 500 species: a Newton step 0.44 s
against 19 ms for a chord step), so `StageRootFinder` takes Newton for states of up to
`NEWTON_MAX_STATES` numbers and otherwise `StageChord`: diffrax's chord method that also
ends once a correction is below kappa times the tolerances (Fujita with it: 1,856 steps).

Both read the iteration state of optimistix's and diffrax's root finders (`step`,
`diffsize`, `diffsize_prev`, `result`), which neither documents;
tests/solvers/test_newton.py pins them against the installed versions.

`StageKrylov` is `StageNewton` without a Jacobian: each Newton correction is solved by
lineax's GMRES on Jacobian-vector products of the stage equation (`jax.linearize`, as
optimistix's Newton linearises it), to `forcing` times the Newton tolerances. It is the
stage solver of a field split over devices, whose dense Jacobian cannot be split (nor
held: N^2 numbers for N unknowns); every inner product and norm of GMRES is one
reduction over the devices. Unpreconditioned, GMRES takes O(sqrt(1 + gamma h rho))
iterations on a diffusion stage (rho the spectral radius of the Laplacian term), and at
least two restart cycles a solve (lineax ends on a small change between cycles too).
"""

from __future__ import annotations

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx
from jaxtyping import PyTree, Scalar, ScalarLike

#: The largest state (in numbers) whose stages are solved by Newton's method; Bachmann_MSB2011
#: (25 species) is solved 2.8x faster by Newton than by the chord method, Chen_MSB2009 (500)
#: would be about 20x slower.
NEWTON_MAX_STATES = 64


class StageNewton(optx.Newton):
    """optimistix's Newton with its residual test (`cauchy_termination=True`) and the
    contraction-rate test of `kappa` both able to end the iterations."""

    # (diffrax fills the tolerances in from the step controller's, which are traced
    # when a compiled simulation takes them as arguments)
    rtol: ScalarLike
    atol: ScalarLike

    def terminate(self, fn, y, args, options, state, tags):
        done, result = super().terminate(fn, y, args, options, state, tags)
        at_least_two = state.step >= 2
        rate = state.diffsize / state.diffsize_prev
        factor = state.diffsize * rate / (1 - rate)
        resolution = 10 ** (2 - jnp.finfo(state.diffsize.dtype).precision)
        converged = at_least_two & (
            (state.diffsize < resolution) | ((factor > 0) & (factor < self.kappa))
        )
        diverged = (
            at_least_two
            & jnp.invert(done | converged)
            & (jnp.invert(jnp.isfinite(rate)) | (rate > 2))
        )
        result = optx.RESULTS.where(
            diverged & (result == optx.RESULTS.successful),
            optx.RESULTS.nonlinear_divergence,
            result,
        )
        return done | converged | diverged, result


class StageKrylov(StageNewton):
    """`StageNewton` whose corrections are solved by GMRES on Jacobian-vector products
    (matrix-free), each to `forcing` times the Newton tolerances (an inexact Newton
    method: the corrections' own errors stay far below what the iterations end on)."""

    forcing: float = eqx.field(static=True, default=1e-3)
    restart: int = eqx.field(static=True, default=20)
    max_restarts: int = eqx.field(static=True, default=50)

    def step(self, fn, y, args, options, state, tags):
        # (no tighter than rounding allows: a solve to below it stagnates)
        dtype = jnp.result_type(*jax.tree.leaves(y))
        floor = 1000 * jnp.finfo(dtype).eps
        gmres = lx.GMRES(
            rtol=jnp.maximum(self.forcing * self.rtol, floor),
            atol=self.forcing * self.atol,
            norm=self.norm,
            restart=self.restart,
            max_steps=self.max_restarts,
        )
        newton = eqx.tree_at(lambda s: s.linear_solver, self, gmres)
        return optx.Newton.step(newton, fn, y, args, options, state, tags)


class StageChord(diffrax.VeryChord):
    """diffrax's chord method, also ended once a correction is below `kappa` times the
    tolerances (where the rate test stalls at rounding)."""

    rtol: ScalarLike
    atol: ScalarLike

    def terminate(self, fn, y, args, options, state, tags):
        done, result = super().terminate(fn, y, args, options, state, tags)
        small = (
            (state.step >= 1)
            & (state.diffsize < self.kappa)
            & (state.result == optx.RESULTS.successful)
        )
        result = optx.RESULTS.where(small, optx.RESULTS.successful, result)
        return done | small, result


class StageRootFinder(optx.AbstractRootFinder):
    """`StageNewton` for states of up to `max_newton` numbers, `StageChord` above."""

    rtol: ScalarLike
    atol: ScalarLike
    norm: Callable[[PyTree], Scalar] = optx.rms_norm
    kappa: float = 1e-2
    max_newton: int = eqx.field(static=True, default=NEWTON_MAX_STATES)

    def inner(self, y) -> optx.AbstractRootFinder:
        """The root finder of a state like `y` (its size is static)."""
        size = sum(int(np.prod(np.shape(leaf))) for leaf in jax.tree.leaves(y))
        if size <= self.max_newton:
            return StageNewton(rtol=self.rtol, atol=self.atol, norm=self.norm, kappa=self.kappa)
        return StageChord(rtol=self.rtol, atol=self.atol, norm=self.norm, kappa=self.kappa)

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        return self.inner(y).init(fn, y, args, options, f_struct, aux_struct, tags)

    def step(self, fn, y, args, options, state, tags):
        return self.inner(y).step(fn, y, args, options, state, tags)

    def terminate(self, fn, y, args, options, state, tags):
        return self.inner(y).terminate(fn, y, args, options, state, tags)

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        return self.inner(y).postprocess(fn, y, aux, args, options, state, tags, result)


def stage_newton() -> optx.AbstractRootFinder:
    """A `StageNewton` that takes the step-size controller's rtol, atol and norm."""
    return diffrax.with_stepsize_controller_tols(StageNewton)()


def stage_root_finder() -> optx.AbstractRootFinder:
    """A `StageRootFinder` that takes the step-size controller's rtol, atol and norm."""
    return diffrax.with_stepsize_controller_tols(StageRootFinder)()


def stage_krylov() -> optx.AbstractRootFinder:
    """A `StageKrylov` that takes the step-size controller's rtol, atol and norm."""
    return diffrax.with_stepsize_controller_tols(StageKrylov)()
