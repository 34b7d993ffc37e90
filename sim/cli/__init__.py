"""The `sim` command: models, run, info (and the commands that build on them).

Exit codes: 0 success; 2 bad input (one line on stderr naming the file and key);
1 anything else. A command that fails leaves no output file behind.
"""

# (What computes is imported inside the commands, after `engine()`: `sim --help`,
# `sim models` and `sim info` load typer and the model table, not JAX.)
from ._app import app as app
from ._engine import engine as engine
from ._outputs import (
    nothing_to_resume as nothing_to_resume,
    output_path as output_path,
    resumable as resumable,
    resume_command as resume_command,
    unasked as unasked,
    writing as writing,
)

# The commands, registered with `app` in the order `sim --help` lists them.
from . import _model_commands as _model_commands  # noqa: F401
from . import _methods_command as _methods_command  # noqa: F401
from . import _run_commands as _run_commands  # noqa: F401
from . import _inference_commands as _inference_commands  # noqa: F401
from . import _plot_info as _plot_info  # noqa: F401
from ._main import check_platform as check_platform, main as main
