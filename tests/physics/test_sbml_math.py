"""SBML math (MathML, written in libsbml's Level 3 formula syntax) compiled by the SBML
reader, function by function and operator by operator, against NumPy and the math
module at points inside each function's domain: a wrong entry of the reader's tables
fails the case of its name."""

import math

import jax
import libsbml
import numpy as np
import pytest

from physics.ode._sbml_math import _Compiler

# (formula, point x, the value by an independent formula)
CASES = [
    ("abs(x)", -1.7, 1.7),
    ("exp(x)", 0.7, math.exp(0.7)),
    ("ln(x)", 1.7, math.log(1.7)),
    ("log10(x)", 1.7, math.log10(1.7)),
    ("log(2, x)", 1.7, math.log2(1.7)),
    ("floor(x)", -1.7, -2.0),
    ("ceiling(x)", -1.7, -1.0),
    ("sqrt(x)", 1.7, math.sqrt(1.7)),
    ("root(3, x)", 1.7, 1.7 ** (1 / 3)),
    ("pow(x, 2.5)", 1.7, 1.7**2.5),
    ("x^3", -1.7, -(1.7**3)),
    ("sin(x)", 0.7, math.sin(0.7)),
    ("cos(x)", 0.7, math.cos(0.7)),
    ("tan(x)", 0.7, math.tan(0.7)),
    ("sec(x)", 0.7, 1 / math.cos(0.7)),
    ("csc(x)", 0.7, 1 / math.sin(0.7)),
    ("cot(x)", 0.7, 1 / math.tan(0.7)),
    ("sinh(x)", 0.7, math.sinh(0.7)),
    ("cosh(x)", 0.7, math.cosh(0.7)),
    ("tanh(x)", 0.7, math.tanh(0.7)),
    ("sech(x)", 0.7, 1 / math.cosh(0.7)),
    ("csch(x)", 0.7, 1 / math.sinh(0.7)),
    ("coth(x)", 0.7, 1 / math.tanh(0.7)),
    ("arcsin(x)", 0.4, math.asin(0.4)),
    ("arccos(x)", 0.4, math.acos(0.4)),
    ("arctan(x)", 1.7, math.atan(1.7)),
    ("arcsec(x)", 1.7, math.acos(1 / 1.7)),
    ("arccsc(x)", 1.7, math.asin(1 / 1.7)),
    ("arccot(x)", 1.7, math.atan(1 / 1.7)),
    ("arcsinh(x)", 1.7, math.asinh(1.7)),
    ("arccosh(x)", 1.7, math.acosh(1.7)),
    ("arctanh(x)", 0.4, math.atanh(0.4)),
    ("arcsech(x)", 0.4, math.acosh(1 / 0.4)),
    ("arccsch(x)", 1.7, math.asinh(1 / 1.7)),
    ("arccoth(x)", 1.7, math.atanh(1 / 1.7)),
    ("factorial(x)", 4.0, 24.0),
    ("rem(x, 0.5)", 1.7, math.fmod(1.7, 0.5)),
    ("rem(-x, 0.5)", 1.7, math.fmod(-1.7, 0.5)),
    ("quotient(x, 0.5)", 1.7, 3.0),
    ("quotient(-x, 0.5)", 1.7, -3.0),
    ("max(x, 1, -3)", 1.7, 1.7),
    ("min(x, 1, -3)", 1.7, -3.0),
    ("x - 2 / 4 * 3", 1.7, 1.7 - 1.5),
    ("-x + 1", 1.7, -0.7),
    # relations and logic, with mixed truth values (1 true, 0 false)
    ("x > 1 && x < 1", 1.7, 0.0),
    ("x > 1 || x < 1", 1.7, 1.0),
    ("xor(x > 1, x < 1, x > 0)", 1.7, 0.0),
    ("xor(x > 1, x < 1)", 1.7, 1.0),
    ("implies(x > 1, x < 1)", 1.7, 0.0),
    ("implies(x < 1, x > 5)", 1.7, 1.0),
    ("!(x > 1)", 1.7, 0.0),
    ("lt(1, x, 2)", 1.7, 1.0),
    ("lt(1, x, 1.5)", 1.7, 0.0),
    ("geq(2, x, x)", 1.7, 1.0),
    ("eq(x, 1.7, 1.7)", 1.7, 1.0),
    ("neq(x, 1.7)", 1.7, 0.0),
    ("piecewise(1, x < 1, 2, x < 2, 3)", 1.7, 2.0),
    ("piecewise(1, x < 1, 3)", 1.7, 3.0),
]


@pytest.mark.parametrize("formula, x, expected", CASES, ids=[c[0] for c in CASES])
def test_each_sbml_math_function_evaluates_as_its_definition(formula, x, expected):
    node = libsbml.parseL3Formula(formula)
    assert node is not None, libsbml.getLastParseL3Error()
    compiled = _Compiler(libsbml, {}, "test").compile(node)
    with jax.numpy_dtype_promotion(
        "standard"
    ):  # (relations are booleans, as the reader's values mix them)
        value = float(np.asarray(compiled({"x": np.float64(x)}), dtype=float))
    assert value == pytest.approx(expected, rel=1e-13, abs=1e-15), formula


def test_a_species_nothing_changes_keeps_its_amount_while_its_compartment_grows(tmp_path):
    # SBML semantics: a species no reaction, rule or event changes keeps its amount
    # (concentration x size at the start); in a compartment of size 3 + t (a rate rule)
    # from concentration 2, its concentration is 6 / (3 + t); in a constant one of size 3,
    # it stays 2.
    document = libsbml.SBMLDocument(3, 2)
    model = document.createModel()
    model.setId("held")
    for cid, constant in (("grows", False), ("fixed", True)):
        c = model.createCompartment()
        c.setId(cid), c.setSize(3.0), c.setConstant(constant), c.setSpatialDimensions(3)
    for sid, cid in (("S", "grows"), ("T", "fixed")):
        s = model.createSpecies()
        s.setId(sid), s.setCompartment(cid), s.setInitialConcentration(2.0)
        s.setHasOnlySubstanceUnits(False), s.setBoundaryCondition(False), s.setConstant(False)
    rule = model.createRateRule()
    rule.setVariable("grows"), rule.setMath(libsbml.parseL3Formula("1"))
    t = np.linspace(0.0, 2.0, 5)
    out = _simulated(document, tmp_path, "held", t=tuple(t))
    np.testing.assert_allclose(out["S"], 6.0 / (3.0 + t), rtol=1e-8)
    np.testing.assert_allclose(out["T"], 2.0, rtol=1e-12)


def _document(level: int, version: int):
    document = libsbml.SBMLDocument(level, version)
    model = document.createModel()
    model.setId("m")
    return document, model


def test_rules_that_read_each_other_in_a_loop_are_refused_naming_the_loop(tmp_path):
    from physics.ode._sbml import SbmlError, sbml_model

    document, model = _document(3, 2)
    for pid, formula in (("a", "b + 1"), ("b", "c * 2"), ("c", "a")):
        p = model.createParameter()
        p.setId(pid), p.setConstant(False)
        rule = model.createAssignmentRule()
        rule.setVariable(pid), rule.setMath(libsbml.parseL3Formula(formula))
    path = tmp_path / "loop.xml"
    libsbml.writeSBMLToFile(document, str(path))
    with pytest.raises(
        SbmlError,
        match=r"depend on each other in a loop \((a -> b -> c -> a|b -> c -> a -> b|c -> a -> b -> "
        r"c)\)",
    ):
        sbml_model(path)


def test_a_level_2_compartment_without_a_size_has_size_1(tmp_path):
    # SBML Level 2: a compartment's size defaults to 1. A species of initial amount 3 in
    # it, unchanged, has concentration 3 / 1.
    document, model = _document(2, 4)
    c = model.createCompartment()
    c.setId("cell")
    s = model.createSpecies()
    s.setId("S"), s.setCompartment("cell"), s.setInitialAmount(3.0)
    np.testing.assert_allclose(_simulated(document, tmp_path, "l2")["S"], 3.0, rtol=1e-12)


def _simulated(document, tmp_path, name: str, t=(0.0, 1.0)) -> dict[str, np.ndarray]:
    import sim
    from physics.ode._sbml import sbml_model

    path = tmp_path / f"{name}.xml"
    libsbml.writeSBMLToFile(document, str(path))
    m = sbml_model(path)
    with jax.numpy_dtype_promotion("standard"):
        traj = sim.simulate(m, m.default_params(), jax.numpy.asarray(t))
    return {k: np.asarray(v) for k, v in traj.observables.items()}


def test_a_rule_reads_the_ids_a_called_function_reads_before_it_is_computed(tmp_path):
    # f(x) = x * k, with k an assignment rule (k = c + 1, c = 4) listed after the rule
    # a = f(2) that calls f: a reads k through f's body, so k comes first and a = 10.
    document, model = _document(3, 2)
    f = model.createFunctionDefinition()
    f.setId("f"), f.setMath(libsbml.parseL3Formula("lambda(x, x * k)"))
    for pid, value in (("a", None), ("k", None), ("c", 4.0)):
        p = model.createParameter()
        p.setId(pid), p.setConstant(value is not None)
        if value is not None:
            p.setValue(value)
    for pid, formula in (("a", "f(2)"), ("k", "c + 1")):
        rule = model.createAssignmentRule()
        rule.setVariable(pid), rule.setMath(libsbml.parseL3Formula(formula))
    # (a species, so that the model has a state to integrate)
    c = model.createCompartment()
    c.setId("cell"), c.setSize(1.0), c.setConstant(True)
    s = model.createSpecies()
    (
        s.setId("S"),
        s.setCompartment("cell"),
        s.setInitialAmount(1.0),
        s.setConstant(False),
        s.setBoundaryCondition(False),
        s.setHasOnlySubstanceUnits(False),
    )
    out = _simulated(document, tmp_path, "calls")
    np.testing.assert_allclose(out["a"], 10.0, rtol=1e-12)


def test_species_in_compartments_of_zero_and_one_dimensions(tmp_path):
    # A compartment of spatial dimension 0 has no size: its species are amounts (3). One of
    # dimension 1 and size 2 (a length) holds a species of amount 3 at concentration 1.5.
    document, model = _document(3, 2)
    for cid, dims, size in (("point", 0, None), ("line", 1, 2.0)):
        c = model.createCompartment()
        c.setId(cid), c.setConstant(True), c.setSpatialDimensions(dims)
        if size is not None:
            c.setSize(size)
    for sid, cid in (("P", "point"), ("L", "line")):
        s = model.createSpecies()
        (
            s.setId(sid),
            s.setCompartment(cid),
            s.setInitialAmount(3.0),
            s.setConstant(False),
            s.setBoundaryCondition(False),
            s.setHasOnlySubstanceUnits(False),
        )
    out = _simulated(document, tmp_path, "dims")
    np.testing.assert_allclose(out["P"], 3.0, rtol=1e-12)
    np.testing.assert_allclose(out["L"], 1.5, rtol=1e-12)


def test_math_nested_past_the_readers_bound_is_refused_in_one_line():
    # `not` applied 149 times to x > 1 (at x = 2 an odd number of negations of a true
    # relation: false, so its root function is negative), and minus 149 times to x,
    # compile; one level more than the bound is refused by it, not by Python's recursion
    # limit (at a bound of 400, math of 399 levels raised RecursionError).
    from physics.ode._sbml_math import MAX_DEPTH, SbmlError

    def nested(levels, kind=libsbml.AST_LOGICAL_NOT, leaf="x > 1"):
        node = libsbml.parseL3Formula(leaf)
        for _ in range(levels):
            parent = libsbml.ASTNode(kind)
            parent.addChild(node)
            node = parent
        return node

    assert MAX_DEPTH == 150
    assert float(_Compiler(libsbml, {}, "test").root(nested(149))({"x": np.float64(2.0)})) < 0
    assert (
        float(
            _Compiler(libsbml, {}, "test").compile(nested(149, libsbml.AST_MINUS, "x"))(
                {"x": np.float64(2.0)}
            )
        )
        == -2.0
    )
    for levels, how, kind, leaf in (
        (151, "root", libsbml.AST_LOGICAL_NOT, "x > 1"),
        (151, "compile", libsbml.AST_MINUS, "x"),
    ):
        with pytest.raises(SbmlError, match="math nested more than 150 levels deep"):
            getattr(_Compiler(libsbml, {}, "test"), how)(nested(levels, kind, leaf))

    # A relation's sides are one level below it: 149 minus signs under `>` reach level
    # 150, 150 of them level 151.
    def related(levels):
        relation = libsbml.ASTNode(libsbml.AST_RELATIONAL_GT)
        relation.addChild(nested(levels, libsbml.AST_MINUS, "x"))
        relation.addChild(libsbml.parseL3Formula("1"))
        return relation

    _Compiler(libsbml, {}, "test").root(related(149))
    with pytest.raises(SbmlError, match="math nested more than 150 levels deep"):
        _Compiler(libsbml, {}, "test").root(related(150))


def test_a_rule_that_reads_the_time_through_a_function_follows_the_time(tmp_path):
    # f(x) = x * time (the csymbol time inside a function definition, SBML Level 3
    # Version 2): the rule a = f(2) is 2 t at every time, not its value at the start.
    document, model = _document(3, 2)
    f = model.createFunctionDefinition()
    f.setId("f"), f.setMath(libsbml.parseL3Formula("lambda(x, x * time)"))
    p = model.createParameter()
    p.setId("a"), p.setConstant(False)
    rule = model.createAssignmentRule()
    rule.setVariable("a"), rule.setMath(libsbml.parseL3Formula("f(2)"))
    c = model.createCompartment()
    c.setId("cell"), c.setSize(1.0), c.setConstant(True)
    s = model.createSpecies()
    (
        s.setId("S"),
        s.setCompartment("cell"),
        s.setInitialAmount(1.0),
        s.setConstant(False),
        s.setBoundaryCondition(False),
        s.setHasOnlySubstanceUnits(False),
    )
    t = np.array([0.0, 0.5, 1.5])
    out = _simulated(document, tmp_path, "time", t=tuple(t))
    np.testing.assert_allclose(out["a"], 2 * t, rtol=1e-12)


def test_an_event_priority_that_reads_the_time_through_a_function_is_refused(tmp_path):
    # Only constant priorities are supported: one that calls f(x) = x * time is not.
    from physics.ode._sbml import SbmlError, sbml_model

    document, model = _document(3, 2)
    f = model.createFunctionDefinition()
    f.setId("f"), f.setMath(libsbml.parseL3Formula("lambda(x, x * time)"))
    c = model.createCompartment()
    c.setId("cell"), c.setSize(1.0), c.setConstant(True)
    s = model.createSpecies()
    (
        s.setId("S"),
        s.setCompartment("cell"),
        s.setInitialAmount(1.0),
        s.setConstant(False),
        s.setBoundaryCondition(False),
        s.setHasOnlySubstanceUnits(False),
    )
    event = model.createEvent()
    event.setId("e"), event.setUseValuesFromTriggerTime(True)
    trigger = event.createTrigger()
    (
        trigger.setMath(libsbml.parseL3Formula("time > 0.5")),
        trigger.setInitialValue(False),
        trigger.setPersistent(True),
    )
    event.createPriority().setMath(libsbml.parseL3Formula("f(1)"))
    assignment = event.createEventAssignment()
    assignment.setVariable("S"), assignment.setMath(libsbml.parseL3Formula("2"))
    path = tmp_path / "priority.xml"
    libsbml.writeSBMLToFile(document, str(path))
    with pytest.raises(
        SbmlError, match="priority of .* reads 'time': only constant priorities are supported"
    ):
        sbml_model(path)


def test_the_parameters_of_species_nothing_changes_are_described_by_name_or_id(tmp_path):
    # A species that nothing changes is a parameter of the model (its start can be fitted
    # or swept), described by its SBML name, or by its id where it has none.
    from physics.ode._sbml import sbml_model

    document, model = _document(3, 2)
    c = model.createCompartment()
    c.setId("cell"), c.setSize(2.0), c.setConstant(True)
    for sid, name in (("A", "glucose"), ("B", "")):
        s = model.createSpecies()
        (
            s.setId(sid),
            s.setCompartment("cell"),
            s.setInitialConcentration(1.0),
            s.setConstant(True),
            s.setBoundaryCondition(False),
            s.setHasOnlySubstanceUnits(False),
        )
        if name:
            s.setName(name)
    path = tmp_path / "described.xml"
    libsbml.writeSBMLToFile(document, str(path))
    m = sbml_model(path)
    assert m.parameter("A").doc == "concentration of species glucose, which nothing changes"
    assert m.parameter("B").doc == "concentration of species B, which nothing changes"
