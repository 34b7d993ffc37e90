"""Constant steps that also end on the save times.

diffrax's `ConstantStepSize` steps on the grid t0 + k (t1 - t0) / n, n = ceil((t1 - t0) /
dt0), and `SaveAt(ts=...)` fills a save time between two grid points from the method's
dense output. Where that output is of a lower order than the method (`OdeMethod.
steps_to_save_times`: Dopri8's is of order 5), the saved values lose the method's order:
Dopri8 at dt 0.2, 0.1, 0.05 on the harmonic oscillator, saved between grid points,
converged as h^6 (1.8e-10, 2.4e-12, 4.5e-14). `GridThroughSaveTimes` takes the same grid
and adds the save times to it: a step ends at the next grid point or the next save time,
whichever comes first, so every saved value is the end of a step and carries the
method's global error.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
from diffrax import RESULTS, AbstractStepSizeController
from jaxtyping import Array, Real

# A grid point or save time closer than this fraction of the grid's spacing to the end of
# a step counts as reached there, so that rounding between the two does not leave a
# sliver of a step (the save time is filled from the dense output, this close to a step's
# end).
_SNAP = 1e-9

_State = tuple[Array, Array, Array, Array]  # (grid points passed k, n, t0, t1)


class GridThroughSaveTimes(AbstractStepSizeController[_State, Array]):
    """Steps to the next point of `ConstantStepSize`'s grid or the next of `ts`,
    whichever comes first (module docstring). `ts`: increasing save times, within the
    solve's interval; a solve runs forward."""

    ts: Real[Array, " times"] = eqx.field(converter=jnp.asarray)

    def wrap(self, direction):
        return self

    def _next_save(self, t):
        """The first save time after t (t itself where none is)."""
        index = jnp.searchsorted(self.ts, t, side="right")
        return jnp.where(
            index < self.ts.shape[0], self.ts[jnp.minimum(index, self.ts.shape[0] - 1)], t
        )

    def _step_end(self, t, k, n, t0, t1):
        """From t, having passed grid point k: the end of the next step and the grid
        points passed then."""
        dtype = jnp.result_type(t0, t1)
        spacing = (t1 - t0) / n.astype(dtype)
        grid = lambda j: jnp.where(j >= n, t1, t0 + (t1 - t0) * (j.astype(dtype) / n.astype(dtype)))
        # (the next grid point may be t itself, or just past it, where t is a save time)
        k = jnp.where(grid(k + 1) <= t + _SNAP * spacing, k + 1, k)
        # (a save time just past t, within rounding, is filled from the next step)
        save = self._next_save(t + _SNAP * spacing)
        on_grid = grid(k + 1)
        to_save = (save > t + _SNAP * spacing) & (save < on_grid - _SNAP * spacing)
        return jnp.where(to_save, save, on_grid), k

    def init(
        self, terms, t0, t1, y0, dt0, args, func: Callable, error_order
    ) -> tuple[Array, _State]:
        del terms, y0, args, func, error_order
        if dt0 is None:
            raise ValueError("constant steps need dt0")
        dtype = jnp.result_type(t0, t1, dt0, float)
        t0, t1 = jnp.asarray(t0, dtype), jnp.asarray(t1, dtype)
        n = jnp.maximum(
            jnp.astype(
                jnp.ceil((t1 - t0) / jnp.nextafter(jnp.asarray(dt0, dtype), jnp.inf)), jnp.int32
            ),
            1,
        )
        end, k = self._step_end(t0, jnp.asarray(0, jnp.int32), n, t0, t1)
        return end, (k, n, t0, t1)

    def adapt_step_size(
        self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
    ):
        del t0, y0, y1_candidate, args, y_error, error_order
        k, n, start, end = controller_state
        t_next, k = self._step_end(t1, k, n, start, end)
        return True, t1, t_next, False, (k, n, start, end), RESULTS.successful
