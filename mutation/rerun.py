"""Forget the survivors of a cosmic-ray session so that the next run tests them again.

After tests are added for surviving mutants, `python mutation/rerun.py DB` followed by
`mutation/run.sh TARGET` runs exactly those mutants against the new tests.
"""

from __future__ import annotations

import sqlite3
import sys


def main(db_path: str) -> None:
    with sqlite3.connect(db_path) as db:
        n = db.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED'").rowcount
    print(f"{db_path}: {n} survivors will run again")


if __name__ == "__main__":
    main(sys.argv[1])
