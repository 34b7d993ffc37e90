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
        observable_names: the names of `observables` in the model's order (its states
            as declared, then its derived observables), which figures follow; `sim.simulate`
            records them, as a dict of arrays that passes through a compiled program comes
            out ordered by name. Empty: the order of `observables`.
    """

    time: Float[Array, " T"]
    observables: dict[str, Array]
    final_state: PyTree
    stats: dict[str, Int[Array, "..."]]
    observable_names: tuple[str, ...] = eqx.field(static=True, default=())

    def ordered_observables(self) -> dict[str, Array]:
        """`observables` in the model's order (`observable_names`, then any others)."""
        names = [n for n in self.observable_names if n in self.observables]
        names += [n for n in self.observables if n not in names]
        return {name: self.observables[name] for name in names}

    @property
    def ok(self) -> Array:
        """True where the solve succeeded (a bool array under vmap)."""
        return self.stats["result"] == 0

    def _repr_html_(self) -> str:
        """The compact summary Jupyter shows (`sim._html.summary_html`)."""
        from ._html import summary_html

        return summary_html(self)
