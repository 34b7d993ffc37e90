"""The result of one simulation."""

from __future__ import annotations

import equinox as eqx
from jaxtyping import Array, Float, Int, PyTree


class Trajectory(eqx.Module):
    """What `simulate` returns; a pytree, so it batches under `jax.vmap`.

    Attributes:
        time: save times [T].
        observables: name -> array [T, ...].
        final_state: the model state at the last save time (family-specific pytree).
        stats: solver statistics: `num_steps` (int) and `result` (0 = success, else a
            failure code; see `solvers.result_message`).
    """

    time: Float[Array, " T"]
    observables: dict[str, Array]
    final_state: PyTree
    stats: dict[str, Int[Array, "..."]]

    @property
    def ok(self) -> Array:
        """True where the solve succeeded (a bool array under vmap)."""
        return self.stats["result"] == 0

    def _repr_html_(self) -> str:
        """The compact summary Jupyter shows (`sim._html.summary_html`)."""
        from ._html import summary_html

        return summary_html(self)
