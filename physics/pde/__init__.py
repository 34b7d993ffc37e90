"""PDE models: periodic Fourier-spectral (`SpectralPdeModel`) and bounded finite-difference
(`GridPdeModel`) families, and named initial fields."""

from ._bounded import FisherKpp as FisherKpp, HeatFd as HeatFd
from ._fluids import NavierStokes2d as NavierStokes2d
from ._initial import GENERATORS as GENERATORS
from ._reaction import AllenCahn as AllenCahn, GrayScott as GrayScott
from ._transport import AdvectionDiffusion as AdvectionDiffusion, Burgers as Burgers, Heat as Heat
from ._waves import KortewegDeVries as KortewegDeVries, KuramotoSivashinsky as KuramotoSivashinsky
from .base import (
    BOUNDARY_KINDS as BOUNDARY_KINDS,
    GridPdeModel as GridPdeModel,
    PdeModel as PdeModel,
    SpectralPdeModel as SpectralPdeModel,
)
from ._text import TextSpectralModel as TextSpectralModel, pde_model as pde_model
from ._text_grid import TextGridModel as TextGridModel
