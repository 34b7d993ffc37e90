"""Mutation score of a cosmic-ray session, with a 95% interval when it was sampled.

    python mutation/score.py mutation/pde.sqlite [mutation/equivalent.txt]

Killed over run mutants; mutants listed as equivalent (lines `FILE:LINE OPERATOR OCCURRENCE reason`
in mutation/equivalent.txt) leave the denominator, as do mutants run again after the code
they mutated was removed (cosmic-ray finds nothing to mutate: "gone"). The interval is Wilson's
score interval for a binomial proportion: with a random sample it bounds the score of the
whole population of mutants.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import TestOutcome, WorkerOutcome


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def equivalents(path: Path) -> set[tuple[str, int, str, int]]:
    out = set()
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                where, operator, occurrence = line.split()[:3]
                file, lineno = where.rsplit(":", 1)
                out.add((file, int(lineno), operator, int(occurrence)))
    return out


def main(db_path: str, equivalent_path: str = "mutation/equivalent.txt") -> None:
    equivalent = equivalents(Path(equivalent_path))
    killed = survived = incompetent = pending = skipped = excluded = gone = 0
    survivors = []
    with use_db(db_path, WorkDB.Mode.open) as db:
        items = {item.job_id: item for item in db.work_items}
        results = dict(db.results)
        for job_id, item in items.items():
            result = results.get(job_id)
            if result is None:
                pending += 1
                continue
            m = item.mutations[0]
            key = (str(m.module_path), m.start_pos[0], m.operator_name, m.occurrence)
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                if key in equivalent:
                    excluded += (
                        1  # a sampled mutant argued equivalent after an earlier run: not run again
                    )
                else:
                    skipped += 1
                continue
            if result.worker_outcome == WorkerOutcome.NO_TEST:
                gone += 1  # rerun after the code changed: the mutated place no longer exists
                continue
            if result.test_outcome == TestOutcome.INCOMPETENT:
                incompetent += 1  # the mutant does not even import: killed by any test
            elif result.test_outcome == TestOutcome.KILLED:
                killed += 1
            elif key in equivalent:
                excluded += 1
            else:
                survived += 1
                survivors.append(f"{key[0]}:{key[1]} {key[2]} {key[3]}")
    dead = killed + incompetent
    n = dead + survived
    low, high = wilson(dead, n)
    print(
        f"{db_path}: {dead} killed, {survived} survived, {excluded} equivalent, "
        f"{pending} pending, {skipped} skipped"
        + (f", {gone} gone with the code they mutated" if gone else "")
    )
    if n:
        print(f"score {dead}/{n} = {dead / n:.1%} (95% interval {low:.1%} to {high:.1%})")
    for s in sorted(survivors):
        print("  survived:", s)


if __name__ == "__main__":
    main(*sys.argv[1:])
