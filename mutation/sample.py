"""Keep a random sample of a cosmic-ray session's pending mutants; mark the rest skipped.

A module of a few thousand mutants takes days on two cores. A uniform random sample
estimates the mutation score with a known error (the binomial interval that the report
script prints), and every survivor in the sample is still examined one by one. The
sample is drawn with a fixed seed from the mutants in a canonical order (file, position,
operator, occurrence), so the same code gives the same sample.

    python mutation/sample.py mutation/pde.sqlite 150
"""

from __future__ import annotations

import random
import sys

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult


def canonical(item):
    m = item.mutations[0]
    return (str(m.module_path), tuple(m.start_pos), m.operator_name, m.occurrence)


def main(db_path: str, size: int, seed: int = 20261123) -> None:
    with use_db(db_path, WorkDB.Mode.open) as db:
        run = sum(1 for _, r in db.results if r.worker_outcome != WorkerOutcome.SKIPPED)
        if run:
            print(f"{db_path}: {run} mutants already run; the sample is kept as it is")
            return
        pending = sorted(db.pending_work_items, key=canonical)
        keep = set(random.Random(seed).sample(range(len(pending)), min(size, len(pending))))
        skipped = [item.job_id for i, item in enumerate(pending) if i not in keep]
        db.set_multiple_results(
            skipped, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="not in the sample")
        )
        print(f"{db_path}: sampled {len(keep)} of {len(pending)} mutants (seed {seed})")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
