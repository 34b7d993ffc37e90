"""PDE models: periodic Fourier-spectral (`SpectralPdeModel`) and bounded finite-difference
(`GridPdeModel`) families, and named initial fields.

Its names are loaded from their modules when first used, so that importing one
model family (or the base class of this one) does not import every model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

# name -> (module, name in the module)
_NAMES: dict[str, tuple[str, str]] = {
    "FisherKpp": ("._bounded", "FisherKpp"),
    "HeatFd": ("._bounded", "HeatFd"),
    "NavierStokes2d": ("._fluids", "NavierStokes2d"),
    "NavierStokes3d": ("._fluids", "NavierStokes3d"),
    "GENERATORS": ("._initial", "GENERATORS"),
    "AllenCahn": ("._reaction", "AllenCahn"),
    "GrayScott": ("._reaction", "GrayScott"),
    "AdvectionDiffusion": ("._transport", "AdvectionDiffusion"),
    "Burgers": ("._transport", "Burgers"),
    "Heat": ("._transport", "Heat"),
    "KortewegDeVries": ("._waves", "KortewegDeVries"),
    "KuramotoSivashinsky": ("._waves", "KuramotoSivashinsky"),
    "BOUNDARY_KINDS": (".base", "BOUNDARY_KINDS"),
    "GridPdeModel": (".base", "GridPdeModel"),
    "PdeModel": (".base", "PdeModel"),
    "SpectralPdeModel": (".base", "SpectralPdeModel"),
    "TextSpectralModel": ("._text", "TextSpectralModel"),
    "pde_model": ("._text", "pde_model"),
    "TextGridModel": ("._text_grid", "TextGridModel"),
}


__getattr__, __dir__ = lazy_names(__name__, _NAMES, globals())


__all__ = sorted(_NAMES)

if TYPE_CHECKING:
    from ._bounded import FisherKpp as FisherKpp, HeatFd as HeatFd
    from ._fluids import NavierStokes2d as NavierStokes2d, NavierStokes3d as NavierStokes3d
    from ._initial import GENERATORS as GENERATORS
    from ._reaction import AllenCahn as AllenCahn, GrayScott as GrayScott
    from ._transport import (
        AdvectionDiffusion as AdvectionDiffusion,
        Burgers as Burgers,
        Heat as Heat,
    )
    from ._waves import (
        KortewegDeVries as KortewegDeVries,
        KuramotoSivashinsky as KuramotoSivashinsky,
    )
    from .base import (
        BOUNDARY_KINDS as BOUNDARY_KINDS,
        GridPdeModel as GridPdeModel,
        PdeModel as PdeModel,
        SpectralPdeModel as SpectralPdeModel,
    )
    from ._text import TextSpectralModel as TextSpectralModel, pde_model as pde_model
    from ._text_grid import TextGridModel as TextGridModel
