"""Write a small PEtab problem: A' = -k A, A(0) = A0 (an SBML model), eleven
measurements of 2 exp(-0.7 t) on t in [0, 5] with 2.5% Gaussian noise, sigma 0.05, and
k and A0 estimated on log10 scales within [0.01, 10] and [0.1, 10]. Small enough that a
multistart fit of it is mostly start-up and compilation (tests, benchmarks).

    python experiments/data/make_decay_petab.py FOLDER
"""

import sys
from pathlib import Path

import numpy as np

SBML = """<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">
  <model id="decay">
    <listOfCompartments><compartment id="c" size="1" constant="true"/></listOfCompartments>
    <listOfSpecies>
      <species id="A" compartment="c" initialAmount="1" hasOnlySubstanceUnits="true" boundaryCondition="false" constant="false"/>
    </listOfSpecies>
    <listOfParameters><parameter id="k" value="0.5" constant="true"/><parameter id="A0" value="1" constant="true"/></listOfParameters>
    <listOfInitialAssignments>
      <initialAssignment symbol="A"><math xmlns="http://www.w3.org/1998/Math/MathML"><ci>A0</ci></math></initialAssignment>
    </listOfInitialAssignments>
    <listOfRules>
      <rateRule variable="A"><math xmlns="http://www.w3.org/1998/Math/MathML"><apply><minus/><apply><times/><ci>k</ci><ci>A</ci></apply></apply></math></rateRule>
    </listOfRules>
  </model>
</sbml>
"""
TRUTH = {"k": 0.7, "A0": 2.0}


def write(folder: Path) -> Path:
    """The problem's files in `folder` (created); returns its YAML file."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "decay.xml").write_text(SBML)
    (folder / "conditions.tsv").write_text("conditionId\nc0\n")
    (folder / "observables.tsv").write_text(
        "observableId\tobservableFormula\tnoiseFormula\nobs_A\tA\t0.05\n"
    )
    t = np.linspace(0.0, 5.0, 11)
    y = (
        TRUTH["A0"]
        * np.exp(-TRUTH["k"] * t)
        * (1 + 0.025 * np.random.default_rng(0).standard_normal(t.size))
    )
    rows = "".join(f"obs_A\tc0\t{float(a)!r}\t{float(b)!r}\n" for a, b in zip(t, y, strict=False))
    (folder / "measurements.tsv").write_text(
        "observableId\tsimulationConditionId\ttime\tmeasurement\n" + rows
    )
    (folder / "parameters.tsv").write_text(
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\nk\tlog10\t"
        "0.01\t10\t0.5\t1\nA0\tlog10\t0.1\t10\t1\t1\n"
    )
    (folder / "decay.yaml").write_text(
        "format_version: 1\nparameter_file: parameters.tsv\nproblems:\n- sbml_files: [decay.xml]\n "
        " condition_files: [conditions.tsv]\n"
        "  measurement_files: [measurements.tsv]\n  observable_files: [observables.tsv]\n"
    )
    return folder / "decay.yaml"


if __name__ == "__main__":
    print(write(Path(sys.argv[1] if len(sys.argv) > 1 else "decay")))
