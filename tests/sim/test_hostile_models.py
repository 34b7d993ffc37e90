"""Hostile model and config input that reached a solver (or Python) before anyone judged
it: errors inside a user's Python model, values no solver can use (boundary values,
grids, sweep ranges), names the expression language cannot read, interrupts raised by
code, and output names that break a one-line message. Each is one line on stderr naming
the file and line or the key, exit 2, nothing written."""

import keyword
import os
import signal
import subprocess
import textwrap
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import sim
from physics import md
from physics.ode import ode_model
from physics.pde import pde_model
from sim import _sources
from tests.sim.test_hostile import HEAT, check, cli, folder  # noqa: F401 - (fixture)

# A user's model file: two decaying states, `vector_field` returning BODY. The lines of
# the file are counted from 1 as Python counts them.
MODEL = textwrap.dedent(
    """\
    from typing import ClassVar

    import jax.numpy as jnp

    from physics import Parameter
    from physics.ode import OdeModel


    class Decay(OdeModel):
        name: ClassVar[str] = "decay_pair"
        description: ClassVar[str] = "two decays"
        parameters: ClassVar[tuple] = (Parameter("k", 0.5, "1/s", "rate", "positive"),)
        state_names: ClassVar[tuple] = ("a", "b")
        initial_defaults: ClassVar[dict] = {"a": 1.0, "b": 2.0}

        def vector_field(self, t, y, params):
            rate = params["k"]
            return BODY
    """
)
RETURN_LINE = MODEL.splitlines().index("        return BODY") + 1

MODEL_RUN = '[model]\nsource = "model.py:Decay"\n[time]\nt1 = 1.0\nsave = 3\n'


def write_model(body: str, extra: str = "") -> None:
    Path("model.py").write_text(
        MODEL.replace("BODY", body) + textwrap.indent(textwrap.dedent(extra), "    ")
    )
    Path("m.toml").write_text(MODEL_RUN)


@pytest.mark.parametrize(
    "body, says",
    [
        (
            "jnp.stack([-rate * y[0], -rate * y[1], y[0]])",
            "vector_field returned shape (3,) for a state of shape (2,)",
        ),
        ("jnp.zeros((2, 3))", "vector_field returned shape (2, 3) for a state of shape (2,)"),
        (
            "[-rate * y[0], -rate * y[1]]",
            "vector_field returned a list of 2 values; expected one array of shape (2,)",
        ),
        ("jnp.asarray(y, dtype=jnp.complex128)", "vector_field returned complex values"),
        ("undefined_name * y", "NameError: name 'undefined_name' is not defined"),
        ("jnp.stack([float(y[0]), y[1]])", "float() of a traced value"),
    ],
)
def test_an_error_in_a_model_files_vector_field_names_its_line(body, says, folder, capsys):
    write_model(body)
    line = check(
        folder, ["run", "m.toml", "-o", "new.h5"], capsys, f"model.py: line {RETURN_LINE}: "
    )
    assert line.startswith("error: m.toml: model.source: model.py:"), line
    assert says in line, line


def test_an_error_in_other_code_of_a_model_file_names_its_line(folder, capsys):
    """Code the front door does not trace in a check of its own (here the observables,
    asked for while the config is read) fails inside JAX or Python: the line is still
    the file's."""
    write_model(
        "-rate * y",
        "\ndef extra_observables(self, t, y, params):\n    return {'total': y[0] + missing}\n",
    )
    line = MODEL.replace("BODY", "").count("\n") + 2 + 1
    check(
        folder,
        ["run", "m.toml", "-o", "new.h5"],
        capsys,
        f"model.py: line {line}: NameError: name 'missing' is not defined",
    )


def test_a_sweep_of_a_broken_model_file_is_refused_before_any_run(folder, capsys):
    write_model("jnp.zeros(3)")
    Path("m.toml").write_text(MODEL_RUN + "[sweep.params]\nk = { values = [0.1, 0.2] }\n")
    check(
        folder,
        ["sweep", "m.toml", "-o", "new.h5"],
        capsys,
        f"model.py: line {RETURN_LINE}: vector_field returned shape (3,)",
    )


SDE_MODEL = textwrap.dedent(
    """\
    from typing import ClassVar

    import jax.numpy as jnp

    from physics import Parameter
    from physics.sde import SdeModel


    class Noisy(SdeModel):
        name: ClassVar[str] = "noisy_pair"
        description: ClassVar[str] = "two noisy decays"
        parameters: ClassVar[tuple] = (Parameter("k", 0.5, "1/s", "rate", "positive"),)
        state_names: ClassVar[tuple] = ("a", "b")
        initial_defaults: ClassVar[dict] = {"a": 1.0, "b": 2.0}
        noise: ClassVar[str] = "diagonal"

        def drift(self, t, y, params):
            return -params["k"] * y

        def diffusion(self, t, y, params):
            return 0.1 * y[0]
    """
)


def test_an_sde_diffusion_of_the_wrong_shape_names_its_line(folder, capsys):
    Path("noisy.py").write_text(SDE_MODEL)
    Path("n.toml").write_text(
        '[model]\nsource = "noisy.py:Noisy"\n[time]\nt1 = 1.0\nsave = 3\n[solver]\ndt = 0.1\n'
    )
    line = SDE_MODEL.splitlines().index("        return 0.1 * y[0]") + 1
    check(
        folder,
        ["run", "n.toml", "-o", "new.h5"],
        capsys,
        f"noisy.py: line {line}: diffusion returned shape () for a state of shape (2,) (diagonal "
        "noise)",
    )


# ------------------------------------------------------------------------ interrupts raised by code


def test_a_model_file_raising_keyboard_interrupt_when_run_is_its_own_error(folder, capsys):
    """With the command's signals deferred Ctrl-C never raises KeyboardInterrupt: one
    raised while the file runs is the file's code, reported at its line (exit 2), where
    the command ended with 130 and not a word."""
    Path("model.py").write_text("import math\nraise KeyboardInterrupt\n")
    Path("m.toml").write_text(MODEL_RUN)
    check(
        folder,
        ["run", "m.toml", "-o", "new.h5"],
        capsys,
        "model.py: line 2: the file raised KeyboardInterrupt when run",
    )


def test_a_model_raising_keyboard_interrupt_while_traced_is_its_own_error(folder, capsys):
    write_model(
        "-rate * y", "\ndef extra_observables(self, t, y, params):\n    raise KeyboardInterrupt\n"
    )
    line = MODEL.replace("BODY", "").count("\n") + 2 + 1
    check(
        folder,
        ["run", "m.toml", "-o", "new.h5"],
        capsys,
        f"model.py: line {line}: KeyboardInterrupt raised by the file's code",
    )


def test_in_a_python_session_keyboard_interrupt_in_a_model_file_stops_as_ctrl_c(tmp_cwd):
    """Outside the command line no signal is deferred: the interrupt is the user's."""
    Path("stop.py").write_text("raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        _sources.run_file(Path("stop.py"))


# ----------------------------------------------------------------------------- names and keys


@pytest.mark.parametrize("word", keyword.kwlist)
def test_a_python_keyword_is_refused_where_it_is_declared(word):
    """`if` as a state was taken, and then no expression could read it."""
    for states, parameters, observables, where in [
        ({word: "-1.0"}, None, None, f"states.{word}"),
        ({"x": "-k * x"}, {"k": 1.0, word: 2.0}, None, f"parameters.{word}"),
        ({"x": "-x"}, None, {word: "2 * x"}, f"observables.{word}"),
    ]:
        with pytest.raises(ValueError, match=rf"^{where}: is a Python keyword"):
            ode_model("kw", states, parameters, observables)
    with pytest.raises(ValueError, match=rf"^fields.{word}: is a Python keyword"):
        pde_model("kw", {word: "-1.0"}, points=(8,))


@pytest.mark.parametrize("word", keyword.softkwlist)
def test_a_soft_keyword_is_a_name_an_expression_can_read(word):
    """`match`, `case`, `type` and `_` are keywords only where Python's statements need
    them: as names they read as any other, through the state and its rate."""
    model = ode_model("soft", {word: f"-k * {word}"}, {"k": 2.0})
    y0 = model.initial_state({word: jnp.asarray(3.0)})
    np.testing.assert_allclose(model.vector_field(0.0, y0, model.default_params()), [-6.0])


def test_a_keyword_state_in_a_config_is_one_line(folder, capsys):
    Path("kw.toml").write_text(
        '[model]\nname = "kw"\n[model.states]\n"if" = "-1.0"\n[time]\nt1 = 1.0\nsave = 3\n'
    )
    check(
        folder,
        ["run", "kw.toml", "-o", "new.h5"],
        capsys,
        "kw.toml: model.states.if: is a Python keyword",
    )


TEXT_HEAT = """
[model]
name = "heat_periodic"
[model.fields]
u = "D * laplace(u)"
[model.parameters]
D = 0.5
[grid]
points = [16]
domain = [[0.0, 6.283185307179586]]
[initial]
u = "sin(x)"
[time]
t1 = 0.1
save = 3
dt = 0.05
"""

TEXT_WALLS = """
[model]
name = "heat_walls"
[model.fields]
u = "D * laplace(u)"
[model.parameters]
D = 0.5
[grid]
points = [9]
domain = [[0.0, 1.0]]
boundary = "dirichlet"
boundary_value = 0.0
[initial]
u = "sin(3.141592653589793 * x)"
[time]
t1 = 0.1
save = 3
"""


@pytest.mark.parametrize("text", [TEXT_HEAT, TEXT_WALLS], ids=["periodic", "walls"])
def test_grid_points_of_a_text_pde_are_named_grid_points(text, folder, capsys):
    """The grid's check named the key "model.model 'heat_periodic': points[0]"."""
    Path("p.toml").write_text(text)
    line = check(
        folder,
        ["run", "p.toml", "-o", "new.h5", "--set", "grid.points=[0]"],
        capsys,
        "p.toml: grid.points: ",
    )
    assert "points[0] = 0: expected" in line and "model.model" not in line, line


@pytest.mark.parametrize(
    "text", [TEXT_HEAT, TEXT_WALLS, HEAT], ids=["periodic", "walls", "built-in"]
)
@pytest.mark.parametrize(
    "domain",
    ["[[-0.0, 1e-320]]", "[[0, 1e308]]", "[[-1e308, 1e308]]", "[[0.0, 1e-160]]", "[[0.0, 1e160]]"],
)
def test_a_domain_whose_spacing_squared_leaves_the_floats_is_refused(text, domain, folder, capsys):
    """A width of 1e-320 (subnormal: computed as 0) or 1e308 (its points overflow) ran
    into "maximum solver steps" or a blow-up; the differences divide by the spacing
    squared, so that square must be a normal float."""
    Path("p.toml").write_text(text)
    line = check(
        folder,
        ["run", "p.toml", "-o", "new.h5", "--set", f"grid.domain={domain}"],
        capsys,
        "p.toml: grid.domain: ",
    )
    assert "squared is outside the range of normal floats" in line, line


def test_the_widest_and_narrowest_domains_the_check_allows_still_run(folder, capsys):
    """The bounds are the float range's, not a taste: a heat equation on a width of
    1e-150 or 1e150 (spacing squared about 1e-302 or 1e298) is solved, and scaling x
    by L scales the decay rate of sin(2 pi x / L) by 1 / L^2: the field stays finite."""
    for width in ("1e-150", "1e150"):
        Path("w.toml").write_text(
            TEXT_WALLS.replace("[[0.0, 1.0]]", f"[[0.0, {width}]]").replace(
                "sin(3.141592653589793 * x)", f"sin(3.141592653589793 * x / {width})"
            )
        )
        code, err = cli(
            [
                "run",
                "w.toml",
                "-o",
                f"w{width}.h5",
                "--quiet",
                "--set",
                f"model.parameters.D={float(width) ** 2 * 0.5!r}",
            ],
            capsys,
        )
        assert code == 0, err
        # u = sin(pi x / L) exp(-D pi^2 t / L^2) = ... exp(-pi^2 t / 2); 9 points: the
        # discrete Laplacian's eigenvalue is 1.3% below pi^2 / L^2
        u = sim.read(f"w{width}.h5").observables["u"]
        np.testing.assert_allclose(u[-1][4], np.exp(-0.5 * np.pi**2 * 0.1), rtol=2e-2)


@pytest.mark.parametrize(
    "sets, key, says",
    [
        (
            ['grid.boundary_value="log(-1)"'],
            "grid.boundary_value[0].low",
            "'log(-1)' is nan at t = 0, x = 0",
        ),
        (
            ['grid.boundary_value="1/t"'],
            "grid.boundary_value[0].low",
            "'1/t' is inf at t = 0, x = 0",
        ),
        (
            ['grid.boundary_value="1e308*(1+x)*10"'],
            "grid.boundary_value[0].low",
            "is inf at t = 0, x = 0",
        ),
        # finite until t = 0.05: the save time t = 0.1 sees it
        (
            ['grid.boundary_value=[0.0, "sqrt(0.05 - t)"]'],
            "grid.boundary_value[0].high",
            "is nan at t = 0.1, x = 1",
        ),
        (
            [
                'grid.boundary=["dirichlet", "robin"]',
                'grid.boundary_value=[0.0, { coefficient = "log(x - 2)", value = 0.0 }]',
            ],
            "grid.boundary_value[0].high.coefficient",
            "is nan at t = 0, x = 1",
        ),
        # finite in float64, not in the float32 a run asks for
        (
            ['grid.boundary_value="1e300"', 'solver.dtype="float32"'],
            "grid.boundary_value[0].low",
            "expected a finite number (float32)",
        ),
    ],
)
def test_a_boundary_value_that_is_no_number_names_its_side(sets, key, says, folder, capsys):
    """These ran into "maximum solver steps": the solver cannot step past a wall value
    of NaN or infinity. Each side's data is evaluated at the save times first."""
    Path("p.toml").write_text(TEXT_WALLS)
    argv = ["run", "p.toml", "-o", "new.h5"] + [a for s in sets for a in ("--set", s)]
    line = check(folder, argv, capsys, f"p.toml: {key}: ")
    assert says in line, line


# ----------------------------------------------------------------------------- sweep ranges


@pytest.mark.parametrize(
    "spec, key, says",
    [
        (
            "linspace = [1e-320, 0.5, 2]",
            "sweep.params.alpha.linspace",
            "1e-320 is below the smallest normal float",
        ),
        (
            "values = [0.5, -1e-310]",
            "sweep.params.alpha.values",
            "-1e-310 is below the smallest normal float",
        ),
        (
            "uniform = [1e-320, 1.0]",
            "sweep.params.alpha.uniform",
            "1e-320 is below the smallest normal float",
        ),
        # ranges of normal numbers whose points are not
        (
            "linspace = [0.0, 1e-305, 1001]",
            "sweep.params.alpha",
            "gives 1e-308, below the smallest normal float",
        ),
        (
            "logspace = [-320, -1, 3]",
            "sweep.params.alpha",
            "gives 1e-320, below the smallest normal float",
        ),
    ],
)
def test_a_sweep_value_below_the_normal_floats_is_refused_as_a_run_refuses_it(
    spec, key, says, folder, capsys
):
    """A sweep from 1e-320 recorded 1e-320 in its file and computed with 0; `sim run
    --set params.alpha=1e-320` refuses that value."""
    mode = '[sweep]\nmode = "random"\nsamples = 4\n' if spec.startswith("uniform") else ""
    Path("s.toml").write_text(
        '[model]\nname = "lotka_volterra"\n[time]\nt1 = 5.0\nsave = '
        f"6\n{mode}[sweep.params]\nalpha = {{ {spec} }}\n"
    )
    line = check(folder, ["sweep", "s.toml", "-o", "new.h5"], capsys, f"s.toml: {key}: ")
    assert says in line, line
    run = check(
        folder,
        ["run", "s.toml", "-o", "new.h5", "--set", "params.alpha=1e-320"],
        capsys,
        "s.toml: params.alpha: ",
    )
    assert "below the smallest normal float" in run, run


# ----------------------------------------------------------------------------- what a stop says


def test_a_second_signal_before_the_safe_point_names_the_checkpoint_it_kept(
    folder, capsys, monkeypatch
):
    """Two SIGINTs close together: the second stops the run at once, before a safe
    point; the checkpoint written at an earlier chunk is kept, and the line said
    "nothing was saved yet". The signals are sent from inside the run, after its second
    chunk (the first one's checkpoint on disk), as Ctrl-C twice would."""
    from sim import _stream

    chunks = []
    took = _stream.ChunkSizer.took

    def twice(self, n, seconds):
        took(self, n, seconds)
        chunks.append(n)
        if len(chunks) == 2:
            assert _stream.checkpoint_path(Path("lv_out.h5")).exists()
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(_stream.ChunkSizer, "took", twice)
    monkeypatch.setattr(_stream.ChunkSizer, "next", lambda self, remaining: min(2, remaining))
    code, err = cli(
        ["run", "lv.toml", "-o", "lv_out.h5", "--set", "output.checkpoint_every=1"], capsys
    )
    assert code == 130, err
    line = err.strip().splitlines()[-1]
    assert "nothing was saved" not in line, line
    assert "kept in .lv_out.h5.partial" in line and "--resume" in line, line
    assert (
        Path(".lv_out.h5.partial").exists() and _stream.checkpoint_path(Path("lv_out.h5")).exists()
    )


@pytest.mark.parametrize("name", ["new\nline.h5", "tab\tand 'quote'.h5", "plain.h5"])
def test_an_output_name_that_breaks_a_line_is_printed_as_a_shell_reads_it(name, folder, capsys):
    """`-o $'new\\nline.h5'` printed "wrote new" and "line.h5: ..." on two lines. The
    name is printed as $'...' (or quoted), and a shell reading that word gets the name
    back (checked by bash itself)."""
    code, err = cli(["run", "lv.toml", "-o", name], capsys)
    assert code == 0, err
    lines = [
        line for line in err.strip().splitlines() if not line.startswith("lotka_volterra: ")
    ]  # (progress)
    assert len(lines) == 1 and lines[0].startswith("wrote "), err
    word = lines[0].removeprefix("wrote ").split(": lotka_volterra")[0]
    assert "\n" not in word and "\t" not in word
    back = subprocess.run(
        ["bash", "-c", f"printf %s {word}"], capture_output=True, text=True, check=True
    ).stdout
    assert back == name and Path(name).is_file()


def test_a_resume_command_with_a_line_break_in_an_argument_is_one_line(folder, capsys, monkeypatch):
    from sim import _stream

    def stop(self, n, seconds):
        os.kill(os.getpid(), signal.SIGINT)  # a request: honoured at the chunk's safe point

    monkeypatch.setattr(_stream.ChunkSizer, "took", stop)
    monkeypatch.setattr(_stream.ChunkSizer, "next", lambda self, remaining: min(2, remaining))
    code, err = cli(["run", "lv.toml", "-o", "a\nb.h5", "--quiet"], capsys)
    lines = err.strip().splitlines()
    assert code == 130 and len(lines) == 1, err
    command = lines[0].split("resume with: ")[1]
    args = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {command}"], capture_output=True, text=True, check=True
    ).stdout.split("\0")[:-1]
    assert args == ["sim", "run", "lv.toml", "-o", "a\nb.h5", "--quiet", "--resume"]
    assert "$'.a\\nb.h5.checkpoint'" in lines[0], lines[0]


# ----------------------------------------------------------------------------- constraints


COLLINEAR = """
[model]
name = "lj_coulomb"
[params]
cutoff = 0.45
shift = true
charges = [0.0, 0.0]
sigma = 0.15
epsilon = 0.5
[system]
units = "real"
molecule = {{ species = [0, 1, 1], mass = [16.0, 1.0, 1.0], sites = [[0, 0, 0], [0.1, 0, 0], [0.2, 0, 0]], constraints = {constraints} }}
molecules = 27
density = 0.5
temperature = 300.0
seed = 2
[time]
dt = 0.002
steps = 4
save_every = 2
[solver]
method = "verlet"
"""


def test_three_collinear_sites_constrained_as_a_triangle_are_refused(folder, capsys):
    """The third side of a straight molecule follows from the other two: SETTLE's
    triangle is degenerate, and the run "blew up at step 0"."""
    Path("c.toml").write_text(COLLINEAR.format(constraints="[[0, 1], [1, 2], [0, 2]]"))
    line = check(
        folder, ["run", "c.toml", "-o", "new.h5"], capsys, "c.toml: system.molecule.constraints: "
    )
    assert "sites 0, 1 and 2 lie on a line" in line, line


def test_dependent_constraints_are_told_from_independent_ones():
    """Exercised directly: the rank of the constraints' gradients decides, so that a
    rigid tetrahedron (6 = 3 * 4 - 6 constraints) and a bent triangle pass, a straight
    chain of four closed end to end does not, and a straight molecule of two bonds (CO2,
    held by SHAKE) does."""
    line = [[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.2, 0.0, 0.0], [0.3, 0.0, 0.0]]
    tetrahedron = [[1.0, 1.0, 1.0], [1.0, -1.0, -1.0], [-1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]]
    every_pair = [[i, j] for i in range(4) for j in range(i + 1, 4)]
    assert md.dependent_constraints(tetrahedron, every_pair) is None
    assert md.dependent_constraints(line[:3], [[0, 1], [1, 2]]) is None
    bent = [[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.2, 1e-4, 0.0]]  # 0.06 degrees off the line
    assert md.dependent_constraints(bent, [[0, 1], [1, 2], [0, 2]]) is None
    assert "lie on a line" in md.dependent_constraints(line[:3], [[0, 1], [1, 2], [0, 2]])
    assert "not independent" in md.dependent_constraints(line, [[0, 1], [1, 2], [2, 3], [0, 3]])


def test_a_straight_molecule_from_a_file_keeps_its_two_bonds():
    """A three-site molecule with two bonds from one site is closed into a triangle for
    SETTLE, unless its sites lie on a line: then its two bonds are its constraints."""
    position = np.array(
        [
            [0.0, 0.0, 0.0],
            [0.116, 0.0, 0.0],
            [0.232, 0.0, 0.0],
            [1.0, 1.0, 1.0],
            [1.1, 1.0, 1.0],
            [1.0, 1.1, 1.0],
        ]
    )
    _, topology = md.bonded_molecules(
        position,
        [0, 1, 0, 0, 1, 1],
        [16.0, 12.0, 16.0, 16.0, 1.0, 1.0],
        [[0, 1], [1, 2], [3, 4], [3, 5]],
    )
    held = sorted(map(tuple, np.asarray(topology.constraints).tolist()))
    assert held == [(0, 1), (1, 2), (3, 4), (3, 5), (4, 5)]
    with pytest.raises(ValueError, match="lie on a line"):
        md.bonded_molecules(position[:3], [0, 1, 0], [16.0, 12.0, 16.0], [[0, 1], [1, 2], [0, 2]])


# ----------------------------------------------------------------------------- SBML values


def _decay_sbml(path: Path, law: str) -> None:
    """S1 -> nothing at rate `law` (amount per time, in a compartment of size 1)."""
    import libsbml  # (a core dependency)

    document = libsbml.SBMLDocument(3, 2)
    model = document.createModel()
    model.setId("pw")
    cell = model.createCompartment()
    cell.setId("cell"), cell.setSize(1.0), cell.setConstant(True), cell.setSpatialDimensions(3)
    s = model.createSpecies()
    (
        s.setId("S1"),
        s.setCompartment("cell"),
        s.setInitialAmount(1.0),
        s.setHasOnlySubstanceUnits(False),
        s.setBoundaryCondition(False),
        s.setConstant(False),
    )
    reaction = model.createReaction()
    reaction.setId("decay"), reaction.setReversible(False)
    reactant = reaction.createReactant()
    reactant.setSpecies("S1"), reactant.setStoichiometry(1.0), reactant.setConstant(True)
    reaction.createKineticLaw().setMath(libsbml.parseL3Formula(law))
    libsbml.writeSBMLToFile(document, str(path))


SBML_RUN = (
    '[model]\nsbml = "pw.xml"\n[time]\nt1 = 1.0\nsave = 3\n[solver]\nrtol = 1e-10\natol = 1e-12\n'
)


def test_an_sbml_piecewise_with_no_piece_that_applies_names_its_element(folder, capsys):
    """piecewise(S1, time < 0.5) has no value from t = 0.5 (SBML leaves it undefined):
    the run ended in "maximum solver steps"; the line names the kinetic law and the time."""
    _decay_sbml(Path("pw.xml"), "piecewise(S1, time < 0.5)")
    Path("pw.toml").write_text(SBML_RUN)
    line = check(
        folder,
        ["run", "pw.toml", "-o", "new.h5"],
        capsys,
        "pw.toml: model.sbml: pw.xml: kinetic law of 'decay': ",
    )
    assert (
        "a piecewise with no otherwise, and none of its pieces applies from t = 0.5 on" in line
    ), line


def test_an_sbml_piecewise_with_an_otherwise_runs_to_its_exact_value(folder, capsys):
    """The same law with an otherwise of 0: S1 = exp(-t) until t = 0.5, then held."""
    _decay_sbml(Path("pw.xml"), "piecewise(S1, time < 0.5, 0)")
    Path("pw.toml").write_text(SBML_RUN)
    code, err = cli(["run", "pw.toml", "-o", "pw.h5", "--quiet"], capsys)
    assert code == 0, err
    np.testing.assert_allclose(
        sim.read("pw.h5").observables["S1"], [1.0, np.exp(-0.5), np.exp(-0.5)], rtol=1e-6
    )
