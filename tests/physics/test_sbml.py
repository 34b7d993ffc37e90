"""SBML models read with python-libsbml.

The SBML Test Suite (sbmlteam/sbml-test-suite, `cases/semantic`; LGPL 2.1, see
tests/data/sbml/LICENSE.txt) gives, per case, a model (`-sbml-l3v2.xml`), the times,
variables and tolerances of a run (`-settings.txt`) and the expected values
(`-results.csv`). Each case runs through `sim run` from a config naming the file; a case
whose tags lie within what the importer supports must match the expected values within
the case's own tolerances, and every other case must be refused in one line with exit
code 2 and nothing written. The default run takes the sample of cases shipped under
tests/data/sbml/cases; `-m slow` with `SBML_TEST_SUITE=/path/to/cases/semantic` runs the
whole suite and prints the count of passes by tag.
"""

import csv
import os
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import sim
from physics.ode import sbml_model
from solvers import OdeSolver
from tests.helpers import cli, cli_out

DATA = Path(__file__).resolve().parents[1] / "data" / "sbml"
SAMPLE = DATA / "cases"

# Tags of what the importer does not support (component tags and test tags of the
# suite's `-model.m` headers): a case with one of them must be refused.
UNSUPPORTED_COMPONENTS = ("EventWithDelay", "AlgebraicRule", "CSymbolDelay", "CSymbolRateOf")
UNSUPPORTED_TESTS = ("FastReaction", "MultipleFastReactions", "RandomEventExecution")
# Limits the tags do not tell apart: a case with supported tags may stop on one of these,
# in one line and with nothing written, and counts as a "limit" (never as a pass). The
# importer refuses (exit 2) priorities that change during the run and triggers that root
# finding cannot locate (eq, neq); a run stops (exit 1) after more events than
# solver.max_events or at a cascade of simultaneous events deeper than the solver follows.
LIMITS = (
    (2, "only constant priorities are supported"),
    (2, "cannot be located by root finding"),
    (1, "more events fired than [solver] max_events allows"),
    (1, "a cascade of simultaneous events deeper than the solver follows"),
)


def tags(folder: Path) -> tuple[list[str], list[str], str]:
    """(component tags, test tags, test type) of a suite case."""
    header = (folder / f"{folder.name}-model.m").read_text(errors="replace")

    def field(key: str) -> str:
        return re.search(rf"{key}:\s*(.*)", header).group(1).strip()

    split = lambda text: [t for t in text.replace(" ", "").split(",") if t]
    return split(field("componentTags")), split(field("testTags")), field("testType")


def supported(components: list[str], tests: list[str]) -> bool:
    """Whether a case's tags lie within what the importer supports (no SBML package:
    `comp:`, `fbc:` tags)."""
    package = lambda t: t.partition(":")[0] in ("comp", "fbc")
    return not any(t in UNSUPPORTED_COMPONENTS or package(t) for t in components) and not any(
        t in UNSUPPORTED_TESTS or package(t) for t in tests
    )


def settings(folder: Path) -> dict[str, str]:
    out = {}
    for line in (folder / f"{folder.name}-settings.txt").read_text().splitlines():
        key, colon, value = line.partition(":")
        if colon:
            out[key.strip()] = value.strip()
    return out


def expected(folder: Path) -> tuple[list[str], np.ndarray]:
    with open(folder / f"{folder.name}-results.csv") as f:
        rows = [r for r in csv.reader(f) if r]
    return [h.strip() for h in rows[0]], np.array([[float(x) for x in r] for r in rows[1:]])


def case_file(folder: Path) -> Path:
    """The case's SBML file of the newest level and version the suite gives (a few
    cases exist only in Level 2: constructs Level 3 dropped)."""
    files = sorted(
        folder.glob(f"{folder.name}-sbml-l*v*.xml"), key=lambda p: p.stem.rpartition("-")[2]
    )
    return files[-1]


def run_case(
    folder: Path, capsys, method: str = "tsit5", rtol: float = 1e-10, atol: float = 1e-14
) -> tuple[int, str]:
    """`sim run` of a suite case from a config: (exit code, stderr)."""
    s = settings(folder)
    start, duration, steps = float(s["start"]), float(s["duration"]), int(s["steps"])
    config = Path(f"{folder.name}.toml")
    config.write_text(
        f'[model]\nsbml = "{case_file(folder)}"\n'
        f"[time]\nt0 = {start!r}\nt1 = {start + duration!r}\nsave = {steps + 1}\n"
        f'[solver]\nmethod = "{method}"\nrtol = {rtol!r}\natol = {atol!r}\nmax_steps = 100000\n'
    )
    return cli(["run", str(config), "-o", f"{folder.name}.h5", "--quiet"], capsys)


def compare(folder: Path) -> str | None:
    """Why the run of a case misses the suite's values (None when it matches): each
    variable within `absolute + relative * |expected|` at every time."""
    s = settings(folder)
    absolute, relative = float(s["absolute"]), float(s["relative"])
    amounts = {v.strip() for v in s.get("amount", "").split(",") if v.strip()}
    concentrations = {v.strip() for v in s.get("concentration", "").split(",") if v.strip()}
    header, values = expected(folder)
    record = sim.read(f"{folder.name}.h5")
    model = sbml_model(case_file(folder))
    np.testing.assert_allclose(
        record.time, values[:, 0], rtol=1e-6, atol=1e-9
    )  # (the suite's times are rounded to 7 digits)
    for j, name in enumerate(header[1:], start=1):
        if name not in record.observables:
            return f"no observable {name}"
        got = np.asarray(record.observables[name])
        if name in model.species_compartments:  # the suite asks for an amount or a concentration
            size = np.asarray(record.observables[model.species_compartments[name]])
            if name in amounts and name not in model.amount_species:
                got = got * size
            elif name in concentrations and name in model.amount_species:
                got = got / size
        want = values[:, j]
        with np.errstate(invalid="ignore"):  # (inf - inf: an infinite value expected and found)
            close = (
                (np.abs(got - want) <= absolute + relative * np.abs(want))
                | (np.isnan(got) & np.isnan(want))
                | (got == want)
            )
        if not close.all():
            i = int(np.argmin(close))
            return f"{name} at t = {values[i, 0]:g}: {got[i]!r}, expected {want[i]!r}"
    return None


def check_case(folder: Path, capsys) -> str:
    """Run one case as the suite asks: 'pass', 'refused', 'limit' (one of `LIMITS`),
    'other' (not a time course: flux balance cases), or raise AssertionError."""
    components, tests, kind = tags(folder)
    if kind != "TimeCourse":
        return "other"
    code, err = run_case(folder, capsys)
    limit = (
        len(err.strip().splitlines()) == 1
        and "Traceback" not in err
        and any(code == c and text in err for c, text in LIMITS)
    )
    if limit:
        assert not Path(f"{folder.name}.h5").exists()
        return "limit"
    if supported(components, tests):
        # What a user does when a run stops at its step budget: an implicit method for a
        # stiff model, then a looser tolerance for a right-hand side with jumps (a rate
        # with floor or ceiling, which an error control at 1e-10 cannot step across).
        for retry in ({"method": "kvaerno5"}, {"rtol": 1e-6, "atol": 1e-10}):
            if code == 0 and compare(folder) is None or code != 0 and "max_steps" not in err:
                break
            Path(f"{folder.name}.h5").unlink(missing_ok=True)
            code, err = run_case(folder, capsys, **retry)
        assert code == 0, (folder.name, err)
        why = compare(folder)
        assert why is None, (folder.name, why)
        return "pass"
    if code == 0:
        # A tag the importer does not support, in a form the specification makes
        # harmless (case 01241: a delay without math, which SBML ignores): it runs, and
        # must then give the suite's values.
        why = compare(folder)
        assert why is None, (folder.name, why)
        return "pass"
    assert (
        code == 2
        and len(err.strip().splitlines()) == 1
        and "model.sbml" in err
        and "Traceback" not in err
    ), (folder.name, code, err)
    assert not Path(f"{folder.name}.h5").exists()
    return "refused"


SAMPLE_CASES = sorted(p.name for p in SAMPLE.iterdir()) if SAMPLE.exists() else []
# The cases of the default run (every construct once, and refusals); the rest of the
# sample runs with `-m slow`. 00743: an event assigns a species' concentration in a
# compartment of 0.1 litres (the suite's values are of the amount that concentration
# times the size makes); 00948: a trigger `S1 > 2.1` (a rising crossing) resizes the
# compartment; 01504: rate rules of a species and of its compartment, both reset by an
# event; 00928: an event whose trigger is true at t = 0 with initialValue false, so it
# fires there (EventT0Firing).
DEFAULT_CASES = (
    "00743",
    "00926",
    "00928",
    "00948",
    "00935",
    "01168",
    "01219",
    "01504",
    "01635",
    "01667",
    "01811",
)


@pytest.mark.parametrize("case", [c for c in SAMPLE_CASES if c in DEFAULT_CASES])
def test_sbml_test_suite_sample(case, tmp_cwd, capsys):
    check_case(SAMPLE / case, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in SAMPLE_CASES if c not in DEFAULT_CASES])
def test_sbml_test_suite_sample_slow(case, tmp_cwd, capsys):
    check_case(SAMPLE / case, capsys)


def test_the_sample_covers_what_the_importer_supports_and_refuses():
    covered = Counter()
    outcomes = Counter()
    for case in SAMPLE_CASES:
        components, tests, _ = tags(SAMPLE / case)
        covered.update(components + tests)
        outcomes[supported(components, tests)] += 1
    for tag in (
        "AssignmentRule",
        "RateRule",
        "InitialAssignment",
        "FunctionDefinition",
        "LocalParameters",
        "NonUnityStoichiometry",
        "BoundaryCondition",
        "ConstantSpecies",
        "ConversionFactors",
        "HasOnlySubstanceUnits",
        "NonConstantCompartment",
        "0D-Compartment",
        "SpeciesReferenceInMath",
        "CSymbolTime",
        "CSymbolAvogadro",
        "L3v2MathML",
        "NoMathML",
        "EventNoDelay",
        "AlgebraicRule",
        "CSymbolDelay",
        "CSymbolRateOf",
    ):
        assert covered[tag] >= 1, tag
    # Events with what they assign: species (by amount and by concentration, in
    # compartments not of unit size), parameters and compartments, next to rules and
    # initial assignments.
    events = Counter()
    for case in SAMPLE_CASES:
        components, tests, _ = tags(SAMPLE / case)
        if "EventNoDelay" in components and supported(components, tests):
            events.update(
                t
                for t in components + tests
                if t
                in (
                    "AssignmentRule",
                    "RateRule",
                    "InitialAssignment",
                    "NonUnityCompartment",
                    "Concentration",
                    "Amount",
                )
            )
    assert all(
        events[t] >= 2
        for t in (
            "AssignmentRule",
            "RateRule",
            "InitialAssignment",
            "NonUnityCompartment",
            "Concentration",
            "Amount",
        )
    ), events
    assert outcomes[True] >= 30 and outcomes[False] >= 6, outcomes


@pytest.mark.slow
@pytest.mark.skipif(
    "SBML_TEST_SUITE" not in os.environ,
    reason="set SBML_TEST_SUITE to the suite's cases/semantic folder",
)
def test_the_whole_sbml_test_suite(tmp_path, monkeypatch, capsys):
    """Every time-course case (its newest SBML level); prints the passes and refusals by
    tag (the closing numbers of the importer)."""
    suite = Path(os.environ["SBML_TEST_SUITE"])
    monkeypatch.chdir(tmp_path)
    by_tag: dict[str, Counter] = {}
    failures = []
    for folder in sorted(p for p in suite.iterdir() if p.name.isdigit()):
        components, tests, kind = tags(folder)
        if kind != "TimeCourse":
            continue
        try:
            outcome = check_case(folder, capsys)
        except AssertionError as e:
            outcome = "failed"
            failures.append(f"{folder.name}: {str(e).splitlines()[0][:200]}")
        for tag in components + tests or ["(none)"]:
            by_tag.setdefault(tag, Counter())[outcome] += 1
        by_tag.setdefault("(all)", Counter())[outcome] += 1
    with capsys.disabled():
        print()
        for tag, counts in sorted(by_tag.items(), key=lambda kv: -sum(kv[1].values())):
            print(
                f"{tag:32s} pass {counts['pass']:5d}  refused {counts['refused']:5d}  limit "
                f"{counts['limit']:5d}  failed {counts['failed']:5d}"
            )
        for line in failures:
            print("failed", line)
    assert not failures, f"{len(failures)} cases failed; first: {failures[0]}"


def _decay_sbml(
    path: Path,
    *,
    event: str | None = None,
    algebraic: bool = False,
    unknown: str | None = None,
    fast: bool = False,
) -> Path:
    """A small SBML Level 3 model written by libsbml: S1 -> S2 at rate k1 * S1 * cell
    (in substance per time: first-order decay of the amount), with one of the constructs
    under test (a fast reaction in Level 3 Version 1, which still has them). The event
    ("plain", or "delay" with a delay of 1) resets the concentration of S1 to 1 when it
    falls below 0.1."""
    import libsbml

    document = libsbml.SBMLDocument(3, 1 if fast else 2)
    model = document.createModel()
    model.setId("decay")
    cell = model.createCompartment()
    cell.setId("cell"), cell.setSize(2.0), cell.setConstant(True), cell.setSpatialDimensions(3)
    for sid, amount in (("S1", 1.0), ("S2", 0.0)):
        s = model.createSpecies()
        (
            s.setId(sid),
            s.setCompartment("cell"),
            s.setInitialAmount(amount),
            s.setHasOnlySubstanceUnits(False),
        )
        s.setBoundaryCondition(False), s.setConstant(False)
    k1 = model.createParameter()
    k1.setId("k1"), k1.setValue(0.7), k1.setConstant(True)
    reaction = model.createReaction()
    reaction.setId("decay_of_S1"), reaction.setReversible(False)
    if fast:
        reaction.setFast(True)
    reactant, product = reaction.createReactant(), reaction.createProduct()
    reactant.setSpecies("S1"), reactant.setStoichiometry(1.0), reactant.setConstant(True)
    product.setSpecies("S2"), product.setStoichiometry(1.0), product.setConstant(True)
    reaction.createKineticLaw().setMath(
        libsbml.parseL3Formula(f"k1 * S1 * cell{' * ' + unknown if unknown else ''}")
    )
    if event:
        e = model.createEvent()
        e.setId("reset"), e.setUseValuesFromTriggerTime(True)
        if event == "delay":
            e.createDelay().setMath(libsbml.parseL3Formula("1"))
        trigger = e.createTrigger()
        (
            trigger.setMath(libsbml.parseL3Formula("S1 < 0.1")),
            trigger.setInitialValue(False),
            trigger.setPersistent(True),
        )
        assignment = e.createEventAssignment()
        assignment.setVariable("S1"), assignment.setMath(libsbml.parseL3Formula("1"))
    if algebraic:
        p = model.createParameter()
        p.setId("x"), p.setConstant(False), p.setValue(1.0)
        model.createAlgebraicRule().setMath(libsbml.parseL3Formula("x - S1"))
    libsbml.writeSBMLToFile(document, str(path))
    return path


DECAY = """
[model]
sbml = "decay.xml"
[time]
t1 = 2.0
save = 5
[solver]
rtol = 1e-11
atol = 1e-13
"""


def test_an_sbml_model_is_differentiated_and_addressed_by_its_ids(tmp_cwd, capsys):
    """The amount of S1 decays as exp(-k1 t), its concentration (1 mole in 2 litres) as
    0.5 exp(-k1 t): the gradient of S1(t) with respect to k1 is -t S1(t)."""
    model = sbml_model(_decay_sbml(Path("decay.xml")))
    assert model.parameter_names == ("k1", "cell") and model.state_names == ("S1", "S2")
    assert model.observable_names == ("S1", "S2", "cell", "k1", "decay_of_S1")
    t = jnp.linspace(0.0, 2.0, 5)
    params = model.default_params()
    tight = OdeSolver(rtol=1e-11, atol=1e-13)
    run = lambda k: sim.simulate(model, {**params, "k1": k}, t, solver=tight).observables
    # (one compiled program: the run's observables and the derivative of S1)
    observables, gradient = jax.jit(lambda k: (run(k), jax.jacrev(lambda k: run(k)["S1"])(k)))(
        params["k1"]
    )
    exact = 0.5 * np.exp(-0.7 * np.asarray(t))
    np.testing.assert_allclose(observables["S1"], exact, rtol=1e-9)
    np.testing.assert_allclose(gradient, -np.asarray(t) * exact, rtol=1e-7, atol=1e-12)
    # The amount of S2 (a species observable is a concentration) and the reaction's rate.
    np.testing.assert_allclose(observables["S2"] * 2.0 + observables["S1"] * 2.0, 1.0, rtol=1e-10)
    np.testing.assert_allclose(
        observables["decay_of_S1"], 0.7 * observables["S1"] * 2.0, rtol=1e-12
    )


@pytest.mark.slow  # (a sweep compiles the model once more, batched)
def test_a_sweep_addresses_sbml_parameters_by_id(tmp_cwd, capsys):
    _decay_sbml(Path("decay.xml"))
    t = np.linspace(0.0, 2.0, 5)
    Path("decay.toml").write_text(DECAY + "[sweep.params]\nk1 = { values = [0.2, 0.7, 1.5] }\n")
    code, err = cli(["sweep", "decay.toml", "-o", "sweep.h5", "--quiet"], capsys)
    assert code == 0, err
    swept = sim.read("sweep.h5")
    for i, k in enumerate((0.2, 0.7, 1.5)):
        np.testing.assert_allclose(
            np.asarray(swept.observables["S1"])[i], 0.5 * np.exp(-k * t), rtol=1e-8
        )


# (gradients through event times are checked by default on a dosing schedule in
# tests/physics/test_events.py, and SBML events fire in the sample's default cases)
@pytest.mark.slow
def test_an_sbml_event_time_is_differentiated(tmp_cwd):
    """S1 (concentration 0.5 exp(-k t)) falls to 0.1 at t* = ln(5) / k, where the event
    resets it to 1; at t = 4 it is exp(-k (4 - t*)) = 5 exp(-4 k), whose derivative in k
    is -20 exp(-4 k): through the event time, found by root finding."""
    import jax

    model = sbml_model(_decay_sbml(Path("decay.xml"), event="plain"))
    assert len(model.events()) == 1
    tight = OdeSolver(rtol=1e-11, atol=1e-13, max_events=4)
    t = jnp.asarray([0.0, 2.0, 4.0])
    s1 = lambda k: sim.simulate(
        model, {**model.default_params(), "k1": k}, t, solver=tight
    ).observables["S1"][-1]
    k = 0.7
    np.testing.assert_allclose(s1(k), 5 * np.exp(-4 * k), rtol=1e-9)
    gradient = jax.grad(s1)(k)
    np.testing.assert_allclose(gradient, -20 * np.exp(-4 * k), rtol=1e-7)
    np.testing.assert_allclose(gradient, (s1(k + 1e-6) - s1(k - 1e-6)) / 2e-6, rtol=1e-6)


@pytest.mark.parametrize(
    "construct, says",
    [
        (
            {"event": "delay"},
            "model.sbml: decay.xml: event 'reset': events with a delay are not supported",
        ),
        ({"algebraic": True}, "algebraic rule 1: algebraic rules are not supported"),
        ({"fast": True}, "reaction 'decay_of_S1': fast reactions are not supported"),
        ({"unknown": "kk"}, "kinetic law of 'decay_of_S1' reads 'kk', which is no id of the model"),
    ],
    ids=["delayed-event", "algebraic", "fast", "unknown-id"],
)
def test_what_the_importer_does_not_support_is_one_line_naming_it(construct, says, tmp_cwd, capsys):
    _decay_sbml(Path("decay.xml"), **construct)
    Path("decay.toml").write_text(DECAY)
    code, err = cli(["run", "decay.toml", "-o", "out.h5"], capsys)
    assert (
        code == 2 and len(err.strip().splitlines()) == 1 and says in err and "Traceback" not in err
    ), err
    assert not Path("out.h5").exists()


@pytest.mark.parametrize(
    "content, says",
    [
        ("", "not valid SBML (line 1: Badly formed XML)"),
        ("[model]\nname = 'sir'\n", "not valid SBML"),
        ('<?xml version="1.0"?>\n<notes>hello</notes>\n', "not valid SBML"),
        (None, "no such file"),
    ],
    ids=["empty", "toml", "other-xml", "missing"],
)
def test_a_file_that_is_not_sbml_is_one_line(content, says, tmp_cwd, capsys):
    if content is not None:
        Path("decay.xml").write_text(content)
    Path("decay.toml").write_text(DECAY)
    code, err = cli(["run", "decay.toml", "-o", "out.h5"], capsys)
    assert (
        code == 2
        and len(err.strip().splitlines()) == 1
        and says in err
        and "decay.toml: model.sbml" in err
    ), err
    assert not Path("out.h5").exists()


def test_the_sbml_file_is_an_input_no_command_writes_over(tmp_cwd, capsys):
    _decay_sbml(Path("decay.xml"))
    before = Path("decay.xml").read_bytes()
    Path("decay.toml").write_text(DECAY)
    code, err = cli(["run", "decay.toml", "-o", "decay.xml"], capsys)
    assert code == 2 and "decay.xml" in err, err
    assert Path("decay.xml").read_bytes() == before
    Path("decay.toml").write_text(
        DECAY.replace('sbml = "decay.xml"', 'sbml = "decay.xml"\npoints = 3')
    )
    code, err = cli(["run", "decay.toml", "-o", "out.h5"], capsys)
    assert (
        code == 2
        and "model.points: is not a key of an SBML model's [model] (keys: name, sbml)" in err
    ), err


def _initial_assignment_sbml(path: Path) -> Path:
    """The decay model of `_decay_sbml` whose start the parameters determine: S1 (by
    concentration) starts at 2 k1, S2 at a quarter of S1, and the rate constant is a
    parameter k2 = k1 / 2 that an initial assignment sets."""
    import libsbml

    _decay_sbml(path)
    document = libsbml.readSBMLFromFile(str(path))
    model = document.getModel()
    model.getReaction(0).getKineticLaw().setMath(libsbml.parseL3Formula("k2 * S1 * cell"))
    k2 = model.createParameter()
    k2.setId("k2"), k2.setValue(99.0), k2.setConstant(True)
    for symbol, formula in (("S1", "2 * k1"), ("S2", "S1 / 4"), ("k2", "k1 / 2")):
        assignment = model.createInitialAssignment()
        assignment.setSymbol(symbol), assignment.setMath(libsbml.parseL3Formula(formula))
    libsbml.writeSBMLToFile(document, str(path))
    return path


def test_initial_assignments_follow_the_parameters_of_each_run(tmp_cwd, capsys):
    """S1's concentration is 2 k1 exp(-k1 t / 2): a run with another k1 starts from its
    own initial assignments (not from those of the default k1), k2 follows k1, and the
    derivative in k1 includes the start's: exp(-k1 t / 2) (2 - k1 t)."""
    model = sbml_model(_initial_assignment_sbml(Path("decay.xml")))
    # (k2 is computed, not set: no parameter of the model)
    assert model.parameter_names == ("k1", "cell") and model.parameter_dependent_initial == {
        "S1",
        "S2",
    }
    t = jnp.linspace(0.0, 2.0, 5)
    tight = OdeSolver(rtol=1e-11, atol=1e-13)
    s1 = lambda k: sim.simulate(
        model, {**model.default_params(), "k1": k}, t, solver=tight
    ).observables["S1"]
    k = 1.3
    exact = 2 * k * np.exp(-k * np.asarray(t) / 2)
    value, gradient = jax.jit(lambda k: (s1(k), jax.jacrev(s1)(k)))(
        jnp.asarray(k)
    )  # (one compiled program)
    np.testing.assert_allclose(value, exact, rtol=1e-9)
    np.testing.assert_allclose(
        gradient, np.exp(-k * np.asarray(t) / 2) * (2 - k * np.asarray(t)), rtol=1e-7
    )
    # A given initial value replaces the computed one, and what is computed from it
    # follows (S2 = S1 / 4 by concentration; the state holds amounts in 2 litres).
    np.testing.assert_allclose(
        model.initial_state({"S1": jnp.asarray(3.0)}, model.default_params()),
        [3.0, 0.75],
        rtol=1e-15,
    )
    np.testing.assert_allclose(model.initial_state(), [2.8, 0.7], rtol=1e-15)
    # The command line: a run of another k1 starts where that k1 puts it.
    Path("decay.toml").write_text(DECAY + "[params]\nk1 = 1.3\n")
    code, err = cli(["run", "decay.toml", "-o", "run.h5", "--quiet"], capsys)
    assert code == 0, err
    np.testing.assert_allclose(np.asarray(sim.read("run.h5").observables["S1"]), exact, rtol=1e-8)


@pytest.mark.slow  # (a sweep and a fit compile the model twice more)
def test_sweeps_and_fits_start_each_run_from_its_own_parameters(tmp_cwd, capsys):
    _initial_assignment_sbml(Path("decay.xml"))
    t = np.linspace(0.0, 2.0, 5)
    Path("decay.toml").write_text(DECAY + "[sweep.params]\nk1 = { values = [0.2, 0.7, 1.5] }\n")
    code, err = cli(["sweep", "decay.toml", "-o", "sweep.h5", "--quiet"], capsys)
    assert code == 0, err
    swept = sim.read("sweep.h5")
    for i, k in enumerate((0.2, 0.7, 1.5)):
        np.testing.assert_allclose(
            np.asarray(swept.observables["S1"])[i], 2 * k * np.exp(-k * t / 2), rtol=1e-8
        )
    # Fitting k1 to data made with k1 = 1.1 from the default 0.7: only a start that
    # moves with k1 fits the data exactly.
    import h5py

    with h5py.File("data.h5", "w") as f:
        f["t"] = t
        f["S1"] = 2 * 1.1 * np.exp(-1.1 * t / 2)
    Path("fit.toml").write_text(
        DECAY + '[data]\nfile = "data.h5"\ntime = "t"\nobservables = { S1 = "S1" }\n[fit]\nfree = '
        '["k1"]\n'
    )
    code, err = cli(["fit", "fit.toml", "-o", "fit.h5"], capsys)
    assert code == 0, err
    assert err.count(STIFF_NOTE) == 1, err  # (no [solver] method: the stiff default, said once)
    with h5py.File("fit.h5") as f:
        np.testing.assert_allclose(f["estimate/k1"][()], 1.1, rtol=1e-6)


PETAB = Path(__file__).resolve().parents[1] / "data" / "petab"


def _both_paths_agree(path: Path) -> int:
    """The observables, the right-hand side and its Jacobians by the state and the
    parameters of the model imported both ways, at its initial state and at a random
    state, agree to 1e-12 relative, or 1e-20 absolute; the rates to 1e-13 of the size of
    the terms they sum, the Jacobians to 1e-13 of their largest entry. A rate that is
    what is left of terms that cancel keeps only their rounding, which depends on the
    order of the sums and on how the compiler contracts them (at Bachmann's start a
    species' rate is 2e-16; at Boehm's, rates of 1e-12 and 1e-19 differed by 30% and
    more between XLA's two CPU code generators). Returns the number of grouped
    reactions."""
    single, vector = sbml_model(path, vectorise=False), sbml_model(path, vectorise=True)
    params = single.default_params()
    y0 = np.asarray(single.initial_state(None, params))
    rng = np.random.default_rng(0)
    t = jnp.asarray(0.7)

    def program(m):
        """The observables, the Jacobians by the state and by the parameters, and the
        right-hand side of `m`: one compiled program per import, for both states."""
        return jax.jit(
            lambda t, y, p: (
                m.observables(t, y, p),
                jax.jacfwd(m.vector_field, argnums=1)(t, y, p),
                jax.jacfwd(m.vector_field, argnums=2)(t, y, p),
                m.vector_field(t, y, p),
            )
        )

    def same(a, b, scale=0.0):
        """Values of the two imports, compared; the single one's."""
        if scale is None:  # (a Jacobian: the size of its largest entry)
            scale = max(
                float(np.max(np.abs(np.asarray(u)), initial=0.0)) for u in jax.tree.leaves(a)
            )
        for u, w in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=False):
            u, w = np.asarray(u), np.asarray(w)
            bound = 1e-12 * np.abs(u) + np.maximum(1e-20, 1e-13 * scale)
            assert np.all(np.abs(w - u) <= bound), (path.name, u, w, bound)
        return a

    of_single, of_vector = program(single), program(vector)
    for y in (y0, np.abs(y0) * rng.uniform(0.5, 1.5, y0.shape) + rng.uniform(0.1, 1.0, y0.shape)):
        y = jnp.asarray(y)
        a, b = of_single(t, y, params), of_vector(t, y, params)
        same(a[0], b[0])
        by_state = np.asarray(same(a[1], b[1], None))
        by_param = same(a[2], b[2], None)
        # About the size of the terms the rates sum: the largest |df/dy| |y| + |df/dp| |p|
        # over the species (a term that is a product of powers of states and parameters,
        # times its order; over all species, since a species whose terms cancel exactly,
        # as a conserved total's, has a Jacobian row that cancels too).
        terms = np.abs(by_state) @ np.abs(np.asarray(y)) + sum(
            np.abs(np.asarray(by_param[k])) * np.abs(np.asarray(params[k])) for k in by_param
        )
        same(a[3], b[3], float(np.max(terms)))
    return 0 if vector.program.vector is None else len(vector.program.vector.grouped)


def _grouped_sbml(path: Path) -> Path:
    """A model whose kinetic laws fall into groups of one form, with what the grouping
    must respect: a rule reading reaction rates (r1, r4), a computed stoichiometry (r6's
    product), a conversion factor (G), an amount-valued species (E), a compartment whose
    size a rate rule changes (nuc), a boundary species (F) and an event."""
    import libsbml

    document = libsbml.SBMLDocument(3, 2)
    model = document.createModel()
    model.setId("grouped")
    for cid, size, constant in (("cell", 2.0, True), ("nuc", 0.5, False)):
        c = model.createCompartment()
        c.setId(cid), c.setSize(size), c.setConstant(constant), c.setSpatialDimensions(3)
    for sid, cid, value, amount_only, boundary in (
        ("A", "cell", 1.0, False, False),
        ("B", "cell", 2.0, False, False),
        ("C", "cell", 0.5, False, False),
        ("D", "nuc", 0.3, False, False),
        ("E", "cell", 4.0, True, False),
        ("F", "cell", 0.8, False, True),
        ("G", "cell", 0.1, False, False),
    ):
        sp = model.createSpecies()
        (
            sp.setId(sid),
            sp.setCompartment(cid),
            sp.setInitialConcentration(value),
            sp.setHasOnlySubstanceUnits(amount_only),
        )
        sp.setBoundaryCondition(boundary), sp.setConstant(False)
    model.getSpecies("G").setConversionFactor("cf")
    for pid, value, constant in (
        ("k1", 0.7, True),
        ("k2", 0.4, True),
        ("k3", 0.2, True),
        ("k4", 0.3, True),
        ("k5", 0.9, True),
        ("V", 1.2, True),
        ("Km", 0.6, True),
        ("cf", 2.0, True),
        ("total", 0.0, False),
        ("growth", 0.05, True),
    ):
        q = model.createParameter()
        q.setId(pid), q.setValue(value), q.setConstant(constant)

    def reaction(rid, reactants, products, law, product_id=None):
        r = model.createReaction()
        r.setId(rid), r.setReversible(False)
        for sid, n in reactants:
            ref = r.createReactant()
            ref.setSpecies(sid), ref.setStoichiometry(n), ref.setConstant(True)
        for sid, n in products:
            ref = r.createProduct()
            ref.setSpecies(sid), ref.setStoichiometry(n), ref.setConstant(product_id is None)
            if product_id:
                ref.setId(product_id)
        r.createKineticLaw().setMath(libsbml.parseL3Formula(law))

    reaction("r1", [("A", 1), ("B", 1)], [("C", 1)], "cell * k1 * A * B")
    reaction("r2", [("C", 1), ("D", 1)], [("A", 1)], "cell * k2 * C * D")
    reaction("r3", [("B", 1), ("E", 1)], [("G", 1)], "cell * k3 * B * E")
    reaction("r4", [("C", 1)], [("B", 1)], "k4 * C")
    reaction("r5", [("A", 1)], [("D", 1)], "k5 * A")
    reaction("r6", [("F", 1)], [("A", 1)], "V * F / (Km + F)", product_id="s6")
    reaction("r7", [("G", 2)], [("E", 1)], "V * G / (Km + G)")
    for target, formula in (("total", "r1 + r4"), ("s6", "1 + 0.5 * time")):
        rule = model.createAssignmentRule()
        rule.setVariable(target), rule.setMath(libsbml.parseL3Formula(formula))
    rule = model.createRateRule()
    rule.setVariable("nuc"), rule.setMath(libsbml.parseL3Formula("growth * nuc"))
    e = model.createEvent()
    e.setId("pulse"), e.setUseValuesFromTriggerTime(True)
    trigger = e.createTrigger()
    (
        trigger.setMath(libsbml.parseL3Formula("time > 0.5")),
        trigger.setInitialValue(False),
        trigger.setPersistent(True),
    )
    assignment = e.createEventAssignment()
    assignment.setVariable("A"), assignment.setMath(libsbml.parseL3Formula("A + 1.5"))
    libsbml.writeSBMLToFile(document, str(path))
    return path


def test_the_vectorised_right_hand_side_is_the_per_reaction_one(tmp_path):
    """Kinetic laws grouped by form and the species' rates as one sum over the
    stoichiometry give the per-reaction right-hand side, Jacobian, observables and
    solution (through the event), and the reactions a rule reads stay single."""
    path = _grouped_sbml(tmp_path / "grouped.xml")
    grouped = _both_paths_agree(path)
    vector = sbml_model(path, vectorise=True).program.vector
    # (r5 has r4's form, left alone once r4 is read by the rule)
    assert sorted(vector.single) == ["r1", "r4", "r5"] and sorted(vector.grouped) == [
        "r2",
        "r3",
        "r6",
        "r7",
    ], (vector.single, vector.grouped)
    assert grouped == 4 and len(vector.variable_terms) == 1 and vector.factors
    t = jnp.linspace(0.0, 1.0, 6)
    solver = OdeSolver(method="tsit5", rtol=1e-12, atol=1e-14)
    a = sim.simulate(sbml_model(path, vectorise=False), None, t, solver=solver).observables
    b = sim.simulate(sbml_model(path, vectorise=True), None, t, solver=solver).observables
    for name in a:
        np.testing.assert_allclose(
            np.asarray(b[name]), np.asarray(a[name]), rtol=1e-12, atol=1e-14, err_msg=name
        )
    assert (
        abs(float(a["A"][-1]) - float(a["A"][2])) > 1.0
    )  # (the event fired between t = 0.4 and 0.6)


@pytest.mark.parametrize(
    "name",
    [
        "Boehm_JProteomeRes2014",
        *(
            pytest.param(n, marks=pytest.mark.slow)
            for n in (
                "Bachmann_MSB2011",
                "Crauste_CellSystems2017",
                "Fujita_SciSignal2010",
                "Weber_BMC2015",
                "Schwen_PONE2014",
            )
        ),
    ],
)
def test_the_vectorised_right_hand_side_is_the_per_reaction_one_on_petab_models(name):
    grouped = _both_paths_agree(PETAB / name / f"model_{name}.xml")
    assert grouped >= 8, grouped


# ------------------------------------------------------- what `sim models FILE.xml` shows

ROOT = Path(__file__).resolve().parents[2]
SBML_FILES = sorted(
    str(p.relative_to(ROOT)) for p in [*PETAB.glob("*/*.xml"), *SAMPLE.glob("*/*-sbml-l3v2.xml")]
)


def _declared_by_xml(path: Path) -> dict:
    """What the file declares, read with the standard library's XML parser (not libsbml)."""
    import xml.etree.ElementTree as ET

    model = next(e for e in ET.parse(path).getroot() if e.tag.endswith("}model"))
    ns = model.tag.partition("}")[0] + "}"

    def listed(of: str, tag: str, under=model) -> list:
        return [e for lst in under.iter(f"{ns}listOf{of}") for e in lst if e.tag == ns + tag]

    rules = [e for lst in model.iter(f"{ns}listOfRules") for e in lst]
    laws = [e for r in listed("Reactions", "reaction") for e in r if e.tag == ns + "kineticLaw"]
    return {
        "species": [
            (e.get("id"), e.get("substanceUnits") or "") for e in listed("Species", "species")
        ],
        "compartments": [
            (e.get("id"), e.get("units") or "") for e in listed("Compartments", "compartment")
        ],
        "parameters": [
            (e.get("id"), e.get("units") or "")
            for e in model.find(f"{ns}listOfParameters") or []
            if e.tag == ns + "parameter"
        ],
        "local": sum(
            len(listed("Parameters", "parameter", law))
            + len(listed("LocalParameters", "localParameter", law))
            for law in laws
        ),
        "reactions": len(listed("Reactions", "reaction")),
        "assignment": sum(e.tag == ns + "assignmentRule" for e in rules),
        "rate": sum(e.tag == ns + "rateRule" for e in rules),
        "events": len(listed("Events", "event")),
        "units": sorted(e.get("id") for e in listed("UnitDefinitions", "unitDefinition")),
    }


@pytest.mark.parametrize("name", SBML_FILES)
def test_the_declarations_are_what_the_file_says(name):
    from physics.ode import sbml_declarations

    d, xml = sbml_declarations(ROOT / name), _declared_by_xml(ROOT / name)
    assert [(s[0], s[3]) for s in d.species] == xml["species"]
    assert [(c[0], c[2]) for c in d.compartments] == xml["compartments"]
    assert [(p[0], p[2]) for p in d.parameters] == xml["parameters"]
    assert (d.local_parameters, d.reactions, d.assignment_rules, d.rate_rules, d.events) == (
        xml["local"],
        xml["reactions"],
        xml["assignment"],
        xml["rate"],
        xml["events"],
    )
    assert sorted(i for i, _ in d.unit_definitions) == xml["units"]


def test_sim_models_shows_what_an_sbml_file_declares(tmp_cwd, capsys):
    boehm = ROOT / "tests/data/petab/Boehm_JProteomeRes2014/model_Boehm_JProteomeRes2014.xml"
    code, out, err = cli_out(["models", str(boehm)], capsys)
    assert code == 0, err
    assert "object at 0x" not in out and "_Program" not in out
    flat = " ".join(out.split())
    assert "SBML Level 2 Version 4" in flat
    assert (
        "declares 8 species, 2 compartments, 9 parameters, 0 local parameters, 9 reactions, "
        "1 assignment rule, 0 rate rules, 2 initial assignments, 0 events" in flat
    )
    # (its one unit definition redefines the time unit as 60 s: minutes)
    assert "unit definitions: time = (60 second)" in flat
    assert " cyt 1.4 none declared 3 " in flat  # compartment, size, unit, dimensions
    assert " k_phos 15766.8 none declared " in flat  # a parameter without a unit claims none
    assert " 1 " not in flat.split("parameters, in [params]:")[1].split("state")[0]

    case = SAMPLE / "00028/00028-sbml-l3v2.xml"  # units on its species and compartment
    code, out, err = cli_out(["models", str(case)], capsys)
    assert code == 0, err
    flat = " ".join(out.split())
    assert "model-wide units: time = time" in flat
    assert " S1 compartment amount 1 substance concentration " in flat
    assert " compartment 1 volume size of compartment compartment " in flat

    bare = SAMPLE / "01197/01197-sbml-l3v2.xml"  # no unit anywhere
    code, out, err = cli_out(["models", str(bare)], capsys)
    assert code == 0, err
    assert "units: none declared" in out


# ------------------------------------------------------------------ the stiff default

BOEHM = PETAB / "Boehm_JProteomeRes2014/model_Boehm_JProteomeRes2014.xml"
STIFF_NOTE = "SBML model: using stiff solver kvaerno5 (set [solver] method to choose)"


def test_an_sbml_model_is_solved_by_a_stiff_method_unless_the_config_names_one(tmp_cwd, capsys):
    """Boehm et al. 2014 over its 240 minutes: tsit5 runs out of steps, the stiff default
    (kvaerno5) matches SciPy's BDF, and the run says once which method it chose."""
    from scipy.integrate import solve_ivp

    shutil.copy(BOEHM, "boehm.xml")
    base = '[model]\nsbml = "boehm.xml"\n[time]\nt1 = 240.0\nsave = 9\n'
    Path("boehm.toml").write_text(base)
    code, err = cli(["run", "boehm.toml", "-o", "boehm.h5"], capsys)
    assert code == 0, err
    assert err.count(STIFF_NOTE) == 1, err
    record = sim.read("boehm.h5")
    assert tomllib.loads(record.attrs["config"])["solver"]["method"] == "kvaerno5"

    model = sbml_model("boehm.xml")
    params = model.default_params()
    # (its Epo input decays in time: the right-hand side reads t)
    field = jax.jit(lambda t, y: model.vector_field(t, y, params))
    jac = jax.jit(jax.jacfwd(lambda t, y: model.vector_field(t, y, params), argnums=1))
    y0 = np.asarray(model.initial_state(None, params))
    ref = solve_ivp(
        lambda t, y: np.asarray(field(jnp.asarray(t), jnp.asarray(y))),
        (0.0, 240.0),
        y0,
        method="BDF",
        t_eval=np.asarray(record.time),
        jac=lambda t, y: np.asarray(jac(jnp.asarray(t), jnp.asarray(y))),
        rtol=1e-10,
        atol=1e-12,
    )
    assert ref.success
    observables = jax.vmap(lambda t, y: model.observables(t, y, params))(ref.t, ref.y.T)
    for name in model.state_names:
        np.testing.assert_allclose(
            record.observables[name], observables[name], rtol=1e-4, atol=1e-6, err_msg=name
        )

    Path("tsit5.toml").write_text(base + '[solver]\nmethod = "tsit5"\nmax_steps = 2000\n')
    code, err = cli(["run", "tsit5.toml", "-o", "tsit5.h5"], capsys)
    assert code == 1 and "the tsit5 solve failed" in err and STIFF_NOTE not in err, err
    # (the Python default is the family's too)
    t = jnp.asarray(record.time)
    traj = sim.simulate(model, params, t)
    assert int(traj.stats["result"]) == 0
    np.testing.assert_allclose(traj.observables["STAT5A"], record.observables["STAT5A"])
