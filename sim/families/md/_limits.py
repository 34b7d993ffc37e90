"""The `[checks]` bounds of an MD run (energy drift, temperature, image counters),
measured at saved frames into a blow-up's first frame and its one-line reason."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from ..._run import Setup
from ._h5md import IMAGE_LIMIT


@dataclasses.dataclass(frozen=True)
class MdLimits:
    """The `[checks]` bounds of an MD run, checked at saved frames (`sim run` stops, a
    sweep flags the run). Each measure is taken over its limit, so that a value above 1
    (or NaN) is a blow-up:

    - energy drift (verlet: total energy; nose_hoover and barostats: the conserved
      energy including the thermostat's and barostat's; none for langevin without a
      barostat): |E(t) - E(0)| / (scale * energy_drift) with
      scale = max(|E(0)|, K(0)), K the kinetic energy;
    - temperature: T(t) / (max_temperature_factor * T_ref) with T_ref = max(thermostat
      temperature, 2 scale / (degrees of freedom k_B)), which is at least T(0);
    - image counters (periodic boxes): the box lengths a particle is away from the box,
      over `IMAGE_LIMIT`.

    The neighbour list needs no check of its own: it is checked at every step (rebuilt
    whenever a particle moved more than half the skin since the last build), so it never
    misses a pair, however far a step goes.
    """

    energy: str | None  # the observable whose drift is checked
    energy_drift: float
    temperature_factor: float
    target: float  # the thermostat's temperature; 0 for NVE
    dof: int
    edges: np.ndarray | None
    boltzmann: float = 1.0  # k_B of the run's units (the temperature of an energy scale)
    cutoff: float | None = (
        None  # a barostat's run: its forces are NaN in a box shorter than twice this
    )

    @classmethod
    def of(cls, s: Setup) -> MdLimits:
        bounds = s.resolved["checks"]
        integrator = s.solver.integrator
        energy = None
        if "energy_drift" in bounds:
            energy = "conserved_energy" if integrator.has_conserved_energy else "total_energy"
        system = s.initial
        return cls(
            energy=energy,
            energy_drift=float(bounds.get("energy_drift", math.inf)),
            temperature_factor=float(bounds["max_temperature_factor"]),
            target=float(s.resolved["solver"].get("temperature", 0.0)),
            dof=int(integrator.degrees_of_freedom(system.n, system.dim)),
            boltzmann=s.model.unit_system.boltzmann,
            edges=np.asarray(system.space.box, dtype=float) if system.space.periodic else None,
            cutoff=float(s.model.cutoff) if integrator.changes_box else None,
        )

    @property
    def reference_names(self) -> tuple[str, ...]:
        """The observables of frame 0 that `reference` takes."""
        return (
            ("kinetic_energy", "total_energy")
            if self.energy is None
            else ("kinetic_energy", self.energy)
        )

    def reference(self, first: dict, xp=np) -> dict:
        """E(0), K(0), the energy scale and the reference temperature, from frame 0's
        observables."""
        k0 = first["kinetic_energy"]
        e0 = first[self.energy or "total_energy"]
        scale = xp.maximum(xp.maximum(xp.abs(e0), k0), 1e-30)
        return {
            "e0": e0,
            "k0": k0,
            "scale": scale,
            "t_ref": xp.maximum(2.0 * scale / (self.dof * self.boltzmann), self.target),
        }

    def excess(self, obs: dict, ref: dict, xp=np) -> dict:
        """Per saved frame [T], each measure over its limit (> 1 or NaN: blown up)."""
        out = {}
        if self.energy is not None:
            out["drift"] = xp.abs(obs[self.energy] - ref["e0"]) / (ref["scale"] * self.energy_drift)
        out["temperature"] = obs["temperature"] / (ref["t_ref"] * self.temperature_factor)
        if self.edges is not None:
            position = obs["position"]
            # a barostat's box changes: each frame's own ("box" [..., dim])
            edges = (
                obs["box"][..., None, :]
                if "box" in obs
                else xp.asarray(self.edges, dtype=position.dtype)
            )
            images = xp.floor(position / edges)
            out["image"] = xp.max(xp.abs(images), axis=(-2, -1)) / IMAGE_LIMIT
        return out

    def within(self, obs: dict) -> jax.Array:
        """Whether a whole run (observables [T, ...], frame 0 first) stayed within the
        bounds (traceable: a sweep's per-run test)."""
        ref = self.reference({name: obs[name][0] for name in self.reference_names}, jnp)
        ok = jnp.asarray(True)
        for value in self.excess(obs, ref, jnp).values():
            ok = ok & jnp.all(value <= 1)
        return ok

    def first_failure(self, rows: dict[str, np.ndarray], ref: dict) -> tuple[int, str] | None:
        """The first frame of `rows` beyond a bound and what went wrong, or None."""
        rows = {name: np.asarray(v) for name, v in rows.items()}
        frames = len(rows["temperature"])
        failed = {}
        for name in ("total_energy", "temperature", "position"):
            finite = np.all(np.isfinite(rows[name].reshape(frames, -1)), axis=1)
            failed[f"finite:{name}"] = ~finite
        with np.errstate(all="ignore"):
            excess = self.excess(rows, ref)
        failed.update({name: ~(value <= 1) for name, value in excess.items()})
        bad = np.any(np.stack(list(failed.values())), axis=0)
        if not np.any(bad):
            return None
        i = int(np.argmax(bad))
        check = next(name for name, flags in failed.items() if flags[i])
        return i, self._describe(check, rows, i, ref, excess)

    def _describe(self, check: str, rows: dict, i: int, ref: dict, excess: dict) -> str:
        if check.startswith("finite:"):
            name = check.partition(":")[2]
            # (a barostat's run gone non-finite keeps the box it had then)
            shortest = float(np.min(rows["box"][i])) if self.cutoff is not None else math.inf
            if shortest < 2 * (self.cutoff or 0.0):
                return (
                    f"{name} became non-finite: the barostat shrank the box to an edge of "
                    f"{shortest:.4g}, shorter than twice "
                    f"the cutoff ({2 * self.cutoff:g}); use more particles (a larger box) or a "
                    "shorter cutoff"
                )
            return (
                f"{name} became non-finite (the run diverged); lower time.dt or start from a "
                "relaxed configuration"
            )
        if check == "drift":
            label = "conserved energy" if self.energy == "conserved_energy" else "total energy"
            drift = abs(float(rows[self.energy][i]) - float(ref["e0"])) / float(ref["scale"])
            return (
                f"{label} drifted by {_percent(drift)} of its initial scale max(|E0|, K0) = "
                f"{float(ref['scale']):.4g} "
                f"(limit checks.energy_drift = {_percent(self.energy_drift)}); lower time.dt or "
                "loosen the bound"
            )
        if check == "temperature":
            t = float(rows["temperature"][i])
            return (
                f"temperature reached {t:.3g}, {t / float(ref['t_ref']):.3g} times the reference "
                f"{float(ref['t_ref']):.3g} "
                f"(limit checks.max_temperature_factor = {self.temperature_factor:g}); lower "
                "time.dt or loosen the bound"
            )
        far = float(excess["image"][i]) * IMAGE_LIMIT
        return (
            f"a particle is {far:.3g} box lengths from the box, beyond the int32 image counters of "
            "the output "
            f"(limit {IMAGE_LIMIT}); lower time.dt"
        )


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.3g}%"
