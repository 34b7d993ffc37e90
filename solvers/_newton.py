"""Newton's method for the stage equations of implicit and IMEX Runge-Kutta methods.

diffrax's implicit methods solve their stage equations with a chord method by default
(the Jacobian taken once per step), and optimistix's Newton ends its iterations by one of
two tests: the correction and the residual both below the tolerances (its "Cauchy" test,
the residual compared with `atol` alone), or the rate of contraction predicting the
remaining error below `kappa` times the tolerances (Hairer and Wanner's test). Each
fails on its own kind of model, and a failed iteration rejects the step: the solver then
shrinks it again and again.

- The chord method on Fujita_SciSignal2010 (PEtab benchmark collection, 6 conditions,
  rtol 1e-8): 124,477 steps; at rtol 1e-12 more than 200,000, a failed solve.
- The residual test on Weber_BMC2015, whose states reach 1e8: the residual cannot fall
  below atol = 1e-10 in floating point, 19,175 steps where the chord method takes 3,837.
- The rate test on Fujita: the corrections stall at rounding level above kappa times a
  small state's tolerance, 80,608 steps.

`StageNewton` stops at whichever test is met first, and at a contraction rate above 2
(divergence) as soon as the rate test would: Fujita 1,762 steps, Weber 692
(experiments/benchmarks/RESULTS.md, "Newton's method in the stages").

It reads the iteration state of optimistix's Newton (`step`, `diffsize`,
`diffsize_prev`, `result`), which optimistix does not document;
tests/solvers/test_newton.py pins it against the installed version.
"""

from __future__ import annotations

import diffrax
import jax.numpy as jnp
import optimistix as optx


class StageNewton(optx.Newton):
    """optimistix's Newton with its residual test (`cauchy_termination=True`) and the
    contraction-rate test of `kappa` both able to end the iterations."""

    def terminate(self, fn, y, args, options, state, tags):
        done, result = super().terminate(fn, y, args, options, state, tags)
        at_least_two = state.step >= 2
        rate = state.diffsize / state.diffsize_prev
        factor = state.diffsize * rate / (1 - rate)
        resolution = 10 ** (2 - jnp.finfo(state.diffsize.dtype).precision)
        converged = at_least_two & ((state.diffsize < resolution) | ((factor > 0) & (factor < self.kappa)))
        diverged = at_least_two & jnp.invert(done | converged) & (jnp.invert(jnp.isfinite(rate)) | (rate > 2))
        result = optx.RESULTS.where(diverged & (result == optx.RESULTS.successful), optx.RESULTS.nonlinear_divergence, result)
        return done | converged | diverged, result


def stage_newton() -> optx.AbstractRootFinder:
    """A `StageNewton` that takes the step-size controller's rtol, atol and norm."""
    return diffrax.with_stepsize_controller_tols(StageNewton)()
