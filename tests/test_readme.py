"""Every command in README.md and in the guide (the pages of docs/) runs.

The shell commands of the documents' ```bash, ```sh and ```console blocks (after a `$ `
prompt) run in order (README.md, then the guide's pages in the order of mkdocs.yml; a
command written on several pages runs once), in one folder holding a copy of experiments/
(as from the repository root): `sim ...` in-process through the command line's entry
point, example scripts with runpy. Long ones get small-size options appended (the table
below, keyed by the command as written); a command missing from the table fails the test,
so a new command cannot go untested. The set-up commands (venv, pip) are checked against
.ci/run and pyproject.toml rather than run. README.md's ```python block is executed here
(the guide's, page by page, in tests/test_docs.py), and every complete ```toml config (one
with a [model]) of every document is validated. The figure of every `sim plot` is checked
(a PNG, not uniform), and experiments/README.md is checked against
experiments/make_gallery.py (a line, the command and a figure per example).
"""

import re
import runpy
import shlex
import shutil
import signal
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib
from pathlib import Path

import numpy as np
import pytest

import sim
from sim import _stream
from sim._sweep_store import FileSink
from sim._unfinished import partial_path
from sim.cli import main

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def guide_pages() -> list[str]:
    """The guide's pages (paths under docs/) in the order of mkdocs.yml's nav, but for the
    generated reference and the page on how the code is built (whose blocks are code
    layouts, not commands)."""
    nav = re.findall(r"^\s*- (?:[^:\n]+: )?(\S+\.md)$", (REPO / "mkdocs.yml").read_text(), re.M)
    return [page for page in nav if not page.startswith("reference/") and page != "architecture.md"]


# Document (README.md, docs/PAGE) -> its text, in the order the commands run.
DOCUMENTS: dict[str, str] = {
    "README.md": README,
    **{f"docs/{page}": (REPO / "docs" / page).read_text() for page in guide_pages()},
}
ALL = "\n".join(DOCUMENTS.values())

# Commands as written in the README -> options appended in the test (small sizes).
SMALL: dict[str, list[str]] = {
    "sim run experiments/lotka_volterra.toml -o lv.h5": [],
    "sim run experiments/robertson.toml -o robertson.h5": [],
    "python experiments/quickstart.py": [],
    "sim models lotka_volterra": [],
    "sim models gray_scott": [],
    "sim methods": [],
    "sim info": [],
    "sim run experiments/lorenz.toml -o lorenz.h5 --set params.rho=24.0 --set time.t1=10": [],
    "sim plot lorenz.h5 -o lorenz.png": [],
    "sim run experiments/gray_scott.toml -o gray_scott.h5": [
        "--set",
        "grid.points=[32, 32]",
        "--set",
        "time.t1=40.0",
        "--set",
        "time.save=3",
    ],
    "sim plot gray_scott.h5": [],
    "sim run experiments/lj_fluid.toml -o lj.h5": [
        "--set",
        "system.cells=3",
        "--set",
        "params.cutoff=2.5",
        "--set",
        "params.tail_correction=false",
        "--set",
        "time.steps=40",
        "--set",
        "time.save_every=4",
        "--set",
        "output.chunk=2",
    ],
    "sim plot lj.h5": [],
    "sim run experiments/lj_fluid.toml -o lj.h5 --resume": "same as the run",
    "sim sweep experiments/lotka_volterra_sweep.toml -o lv_sweep.h5": [
        "--set",
        "sweep.params.alpha={ linspace = [0.3, 0.8, 4] }",
        "--set",
        "sweep.params.beta={ logspace = [-2.0, -1.3, 3] }",
    ],
    "sim sweep experiments/lotka_volterra_sweep.toml -o lv_sweep.h5 --resume": "same as the sweep",
    "sim sweep experiments/lotka_volterra_sobol.toml --scheduler local:2": [
        "--set",
        "sweep.samples=32",
        "--set",
        "sweep.chunk=16",
    ],
    "sim plot lv_sweep.h5 -o lv_sweep.png": [],
    "sim fit experiments/lynx_hare.toml -o lynx_hare_fit.h5": [],
    "sim plot lynx_hare_fit.h5": [],
    "sim fit experiments/heat_diffusivity_fit.toml -o heat_fit.h5": [],
    "sim infer experiments/lynx_hare.toml -o lynx_hare_posterior.h5": [
        "--chains",
        "1",
        "--warmup",
        "30",
        "--samples",
        "30",
    ],
    "sim infer experiments/lynx_hare.toml --chains 2 --warmup 300 --samples 300": [
        "--chains",
        "1",
        "--warmup",
        "30",
        "--samples",
        "30",
    ],
    "sim plot lynx_hare_posterior.h5": [],
    "sim run experiments/sir_boarding_school.toml -o sir.h5": [],
    "sim sweep experiments/sir_boarding_school.toml -o sir_sweep.h5": [],
    "sim plot sir_sweep.h5": [],
    "sim fit experiments/sir_boarding_school.toml -o sir_fit.h5": [],
    "sim models experiments/predation.py": [],
    "sim run experiments/predation.toml -o predation.h5": [],
    "sim profile experiments/sir_boarding_school.toml -o sir_profile.h5": [],
    "sim plot sir_profile.h5": [],
    "sim fit experiments/petab/Boehm_JProteomeRes2014/Boehm_JProteomeRes2014.yaml --evaluate -o "
    "boehm_eval.h5": [],
    "sim fit experiments/petab/Boehm_JProteomeRes2014/Boehm_JProteomeRes2014.yaml --starts 20 -o "
    "boehm_fit.h5": [
        "--starts",
        "2",
    ],
    "sim plot boehm_fit.h5": [],
    "sim profile experiments/petab/Boehm_JProteomeRes2014/Boehm_JProteomeRes2014.yaml --param "
    "k_phos -o boehm_profile.h5": [],
    "sim infer experiments/petab/Boehm_JProteomeRes2014/Boehm_JProteomeRes2014.yaml --chains 2 "
    "--warmup 300 --samples 300 -o boehm_posterior.h5": [
        "--chains",
        "1",
        "--warmup",
        "20",
        "--samples",
        "20",
    ],
}
# Run only with `-m slow` (each repeats what a default command covers: a Dask cluster
# start and a second NUTS compilation).
SLOW = {
    "sim sweep experiments/lotka_volterra_sobol.toml --scheduler local:2",
    "sim infer experiments/lynx_hare.toml --chains 2 --warmup 300 --samples 300",
    # The same `sim infer` and `sim plot` of its posterior run with `-m slow` in
    # tests/inference/test_bayes.py; by default that test runs `sim infer` (two chains)
    # and `sim plot` of the posterior on a heat-equation config.
    "sim infer experiments/lynx_hare.toml -o lynx_hare_posterior.h5",
    "sim plot lynx_hare_posterior.h5",
    # The same fit (and the plot of its fit file) runs by default in
    # tests/sim/test_examples.py.
    "sim fit experiments/heat_diffusivity_fit.toml -o heat_fit.h5",
    # The same SIR fit runs (and is checked against SciPy's least squares and the table
    # above) with `-m slow` in tests/sim/test_examples.py.
    "sim fit experiments/sir_boarding_school.toml -o sir_fit.h5",
    # By default in tests/sim/test_examples.py (and checked against Hairer and Wanner's
    # values there).
    "sim run experiments/robertson.toml -o robertson.h5",
    # By default in tests/sim/test_model_sources.py (against SciPy's solve_ivp).
    "sim run experiments/predation.toml -o predation.h5",
    # The same config's sweep (and its figure) runs by default.
    "sim run experiments/sir_boarding_school.toml -o sir.h5",
    # Profiles of a config (and their figure) run by default in
    # tests/inference/test_profile.py.
    "sim profile experiments/sir_boarding_school.toml -o sir_profile.h5",
    "sim plot sir_profile.h5",
    # The PEtab commands on the problem the README names: by default
    # tests/inference/test_petab.py evaluates the same problem through `sim fit
    # --evaluate` and checks the gradient of its objective; `sim infer` and `sim profile`
    # of PEtab problems run with `-m slow` there and in tests/inference/test_profile.py.
    "sim fit experiments/petab/Boehm_JProteomeRes2014/Boehm_JProteomeRes2014.yaml --evaluate -o "
    "boehm_eval.h5",
    "sim fit experiments/petab/Boehm_JProteomeRes2014/Boehm_JProteomeRes2014.yaml --starts 20 -o "
    "boehm_fit.h5",
    "sim plot boehm_fit.h5",
    "sim profile experiments/petab/Boehm_JProteomeRes2014/Boehm_JProteomeRes2014.yaml --param "
    "k_phos -o boehm_profile.h5",
    "sim infer experiments/petab/Boehm_JProteomeRes2014/Boehm_JProteomeRes2014.yaml --chains 2 "
    "--warmup 300 --samples 300 -o boehm_posterior.h5",
}
# The quick start's set-up: checked, not run.
SETUP = {
    "python3 -m venv .venv",
    '.venv/bin/pip install "uv>=0.5"',
    '.venv/bin/uv pip install -p .venv -e ".[all]"',
    '.venv/bin/uv pip install -p .venv -e ".[dev]"',
    '.venv/bin/uv pip install -p .venv -e ".[cuda12]"',
}
TEST_COMMAND = ".venv/bin/python -m pytest"


SHELLS = ("bash", "sh", "shell", "console")


# An HTML comment on the line before a block marks one that is not meant to run (a sketch).
NOT_RUN = "<!-- not run -->"


def code_blocks(language: str, text: str = ALL) -> list[str]:
    """The blocks of one language, in order, but for those marked `NOT_RUN`."""
    return [
        m.group(2)
        for m in re.finditer(
            rf"(^{re.escape(NOT_RUN)}\n)?```{language}\n(.*?)```", text, re.S | re.M
        )
        if not m.group(1)
    ]


def shell_lines(text: str = ALL) -> list[str]:
    """The command lines of the shell blocks (```bash, ```sh, ```shell; in ```console
    blocks the lines after a `$ ` prompt), in the order they appear."""
    lines = []
    for match in re.finditer(r"```(\w+)\n(.*?)```", text, re.S):
        language, block = match.groups()
        if language not in SHELLS:
            continue
        for line in block.splitlines():
            if language == "console":
                if not line.startswith("$ "):
                    continue  # output
                line = line[2:]
            lines.append(line)
    return lines


def shell_commands(text: str = ALL) -> list[str]:
    """The documents' shell commands in order, each once: comments dropped, `&&` chains
    split."""
    out = []
    for line in shell_lines(text):
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith("#"):
            out.extend(part.strip() for part in line.split("&&"))
    return list(dict.fromkeys(out))


def plotted_outputs(commands: list[str]) -> dict[str, str]:
    """FILE -> figure of each `sim plot FILE [-o FIGURE]` (default: FILE's name with .png)."""
    out = {}
    for command in commands:
        words = shlex.split(command)
        if words[:2] == ["sim", "plot"]:
            out[words[2]] = (
                words[words.index("-o") + 1]
                if "-o" in words
                else Path(words[2]).with_suffix(".png").name
            )
    return out


def runnable(command: str) -> str:
    return command.removeprefix(".venv/bin/")


def test_set_up_commands_are_what_ci_runs():
    commands = shell_commands()
    ci = (REPO / ".ci" / "run").read_text()
    # The README's test command line is the one .ci/run runs.
    test_line = next(line for line in shell_lines() if TEST_COMMAND in line)
    assert test_line.strip() in ci.splitlines(), test_line
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for command in commands:
        if command in SETUP:
            for extra in re.findall(r"\.\[(\w+)\]", command):
                assert extra in extras, command


def test_every_readme_command_has_an_entry():
    commands = {runnable(c) for c in shell_commands() if c not in SETUP and c != TEST_COMMAND}
    assert commands == set(SMALL), (
        f"new: {sorted(commands - set(SMALL))}; gone: {sorted(set(SMALL) - commands)}"
    )


def cli(argv):
    try:
        main(argv)
    except SystemExit as e:
        return e.code or 0
    return 0


def interrupt_after_first_chunk(argv):
    """Start `argv` (a `sim run` or `sim sweep`) and interrupt it as Ctrl-C does (SIGINT)
    once its first chunk is done: it stops at the next safe point with a checkpoint (a
    sweep: its partial file) and exit code 130."""
    owner, name = (_stream.ChunkSizer, "took") if argv[0] == "run" else (FileSink, "write")
    original = getattr(owner, name)
    sent = []

    def done(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if not sent:
            sent.append(True)
            signal.raise_signal(signal.SIGINT)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(owner, name, done)
        with pytest.raises(SystemExit) as info:
            main(argv)
    assert sent and info.value.code == 130


def run_commands(folder: Path, slow: bool, capsys=None, outputs=None) -> list[str]:
    ran = []
    for command in shell_commands():
        if command in SETUP or command == TEST_COMMAND:
            continue
        command = runnable(command)
        if (command in SLOW) != slow or command in ran:
            continue  # (another run's, or one written twice: `.venv/bin/sim ...` and `sim ...`)
        words = shlex.split(command)
        extra = SMALL[command]
        if words[0] == "python":
            runpy.run_path(str(folder / words[1]), run_name="__main__")
            ran.append(command)
            continue
        assert words[0] == "sim", command
        argv = words[1:]
        if isinstance(extra, str):  # a --resume after the same command without it
            base = runnable(command.replace(" --resume", ""))
            extra = SMALL[base]
            output = Path(argv[argv.index("-o") + 1])
            output.unlink(missing_ok=True)
            interrupt_after_first_chunk([a for a in argv if a != "--resume"] + extra + ["--quiet"])
            assert (_stream.checkpoint_path if argv[0] == "run" else partial_path)(output).exists()
        code = cli(
            [
                *argv,
                *extra,
                *(["--quiet"] if argv[0] in ("run", "sweep", "fit", "infer", "plot") else []),
            ]
        )
        assert code == 0, command
        ran.append(command)
        if capsys is not None:
            outputs[command] = capsys.readouterr().out
    return ran


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    shutil.copytree(
        REPO / "experiments",
        tmp_path / "experiments",
        ignore=shutil.ignore_patterns("benchmarks", "gallery"),
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_readme_commands_run(checkout, capsys):
    from .sim.test_plot import check_png

    outputs: dict[str, str] = {}
    ran = run_commands(checkout, slow=False, capsys=capsys, outputs=outputs)
    assert len(ran) == len(SMALL) - len(SLOW)
    # What they wrote: runs, plots, an MD run resumed to completion, a sweep, fits.
    for name in ("lv.h5", "lorenz.h5", "gray_scott.h5", "lj.h5", "lv_sweep.h5", "lynx_hare_fit.h5"):
        assert (checkout / name).exists(), name
    figures = plotted_outputs(ran)
    assert {"lorenz.png", "gray_scott.png", "lj.png", "lv_sweep.png", "lynx_hare_fit.png"} <= set(
        figures.values()
    )
    for figure in figures.values():
        check_png(checkout / figure)
    assert not list(checkout.glob(".*"))  # no partial or checkpoint left behind
    assert "rho = 24.0" in sim.read("lorenz.h5").attrs["config"]

    # The lynx-hare fit: the table the README shows is what `sim fit` prints and writes,
    # and it agrees with Carpenter (2018), "Predator-Prey Population Dynamics: the
    # Lotka-Volterra model in Stan", posterior means theta = (0.55, 0.028, 0.80, 0.024),
    # z_init = (33.9, 5.9): the maximum-likelihood fit with lognormal errors lies within a
    # standard error of each.
    out = outputs["sim fit experiments/lynx_hare.toml -o lynx_hare_fit.h5"]
    record = sim.read("lynx_hare_fit.h5")
    assert record.format == "simjax.fit"
    fitting = DOCUMENTS["docs/fitting.md"]
    table = re.search(r"quantity\s+estimate\s+std\. error\n(.*?)```", fitting, re.S).group(1)
    rows = [line.split() for line in table.strip().splitlines()]
    assert [r[0] for r in rows] == [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "initial.prey",
        "initial.predator",
    ]
    reference = {
        "alpha": 0.55,
        "beta": 0.028,
        "gamma": 0.80,
        "delta": 0.024,
        "initial.prey": 33.9,
        "initial.predator": 5.9,
    }
    for name, estimate, stderr in rows:
        assert f"{record.estimate[name]:.6g}" == estimate and estimate in out, name
        assert f"{record.stderr[name]:.3g}" == stderr and stderr in out, name
        assert abs(record.estimate[name] - reference[name]) < record.stderr[name], name
    # The pelts of the shipped data (thousands; Hudson's Bay Company, 1900-1902).
    np.testing.assert_allclose(record.data["observables"]["prey"][:3], [30.0, 47.2, 70.2])


@pytest.mark.slow
def test_readme_slow_commands_run(checkout):
    from .sim.test_plot import check_png

    ran = run_commands(checkout, slow=True)
    assert set(ran) == SLOW
    for figure in plotted_outputs(ran).values():
        check_png(checkout / figure)


def test_readme_python_blocks_run(checkout):
    (block,) = code_blocks("python", README)
    python: dict = {}
    exec(compile(block, "README.md", "exec"), python)
    assert python["traj"].observables["prey"].shape == (201,)
    assert python["batch"].observables["prey"].shape == (64, 201)
    # The gradient of sum(prey^2) by alpha, against a central difference of the same sum.
    import jax.numpy as jnp

    t, params = python["t"], python["params"]
    h = 1e-5
    up, down = ({**params, "alpha": params["alpha"] + s * h} for s in (1, -1))
    difference = (python["loss"](up) - python["loss"](down)) / (2 * h)
    np.testing.assert_allclose(python["grad"]["alpha"], difference, rtol=1e-4)
    assert t.shape == (201,) and jnp.isfinite(python["grad"]["beta"])


def test_readme_configs_are_valid(tmp_path):
    complete = [block for block in code_blocks("toml") if re.search(r"^\[model\]", block, re.M)]
    assert len(complete) >= 8
    for i, block in enumerate(complete):
        path = tmp_path / f"c{i}.toml"
        path.write_text(block)
        sim.setup(sim.load_config(path))


def test_gallery_page_shows_every_example_with_the_command_behind_its_figure():
    gallery = runpy.run_path(str(REPO / "experiments" / "make_gallery.py"))
    page = (REPO / "experiments" / "README.md").read_text()
    runs = gallery["RUNS"]
    assert {p.stem for p in (REPO / "experiments").glob("*.toml")} <= {
        config for _, config, _ in runs.values()
    }
    for name in runs:
        assert f"`{gallery['command_line'](name)}`" in page, name
        assert f"(gallery/{name}.png)" in page, name
        figure = REPO / "experiments" / "gallery" / f"{name}.png"
        assert figure.exists() and figure.stat().st_size < gallery["MAX_BYTES"], name
    # (A model file that a config names as its `[model] source` is not a script.)
    sources = {
        tomllib.loads(p.read_text()).get("model", {}).get("source", ":").split(":")[0]
        for p in (REPO / "experiments").glob("*.toml")
    }
    scripts = {p.name for p in (REPO / "experiments").glob("*.py")} - {"make_gallery.py"} - sources
    for script in scripts:
        assert f"`python experiments/{script}`" in page, script
    # Every figure a page shows exists (the guide's gallery/NAME.png: experiments/gallery's,
    # which docs/hooks.py puts in the site).
    pages = [(REPO, README), (REPO / "experiments", page)]
    pages += [
        (REPO / "experiments", text) for name, text in DOCUMENTS.items() if name != "README.md"
    ]
    for folder, text in pages:
        for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
            assert (folder / image).exists(), image
