#!/usr/bin/env bash
# Mutation testing of one target (mutation/TARGET.toml): cosmic-ray mutates files in
# place, so the work happens in a scratch git worktree of HEAD, never in this checkout.
# The session database is kept in mutation/TARGET.sqlite (an interrupted run continues
# where it stopped when run again); the full report goes to mutation/TARGET-report.txt,
# the score and the survivors to mutation/TARGET-score.txt (kept in git).
# With SAMPLE, a new session keeps a random sample of that many mutants (sample.py).
#
#   mutation/run.sh ode
#   mutation/run.sh pde 150
set -euo pipefail
target=${1:?usage: mutation/run.sh TARGET [SAMPLE] (TARGET names a mutation/TARGET.toml)}
sample=${2:-}
here="$(cd "$(dirname "$0")/.." && pwd)"
python="$here/.venv/bin/python"
config="$here/mutation/$target.toml"
db="$here/mutation/$target.sqlite"
scratch="$(mktemp -d)"
trap 'git -C "$here" worktree remove --force "$scratch" >/dev/null 2>&1 || true' EXIT
git -C "$here" worktree add --quiet --detach "$scratch" HEAD
cd "$scratch"
export PATH="$here/.venv/bin:$PATH"
export SIMJAX_TEST_CACHE="$here/.pytest_cache/jax"  # the compiled programs of unmutated code are shared
if [ ! -f "$db" ]; then
    cosmic-ray init "$config" "$db"
    cr-filter-operators "$db" "$config"
    if [ -n "$sample" ]; then
        "$python" "$here/mutation/sample.py" "$db" "$sample"
    fi
fi
cosmic-ray exec "$config" "$db"
cr-report --show-pending "$db" > "$here/mutation/$target-report.txt"  # every mutant (not in git)
cd "$here"
"$python" mutation/score.py "mutation/$target.sqlite" | tee "mutation/$target-score.txt"
