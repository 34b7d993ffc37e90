"""`sim run --devices N` of a finite-difference PDE (`[grid] devices`: the grid split in
slabs of its first axis, `solvers.HaloGrid`) on simulated CPU devices
(`--xla_force_host_platform_device_count`): the built-in Fisher-KPP model (explicit) and
two fields written as text with a Robin side on the split axis (IMEX) write the file of
one device; every field reaches the file one device's slab at a time (`sim._shards`), the
checkpointed state too; the run's compiled step exchanges ghost planes and gathers no
grid. Grids that do not split are refused in one line (exit 2, no file).

The runs on 4 devices share one process; those on one device run in this one.
"""

import json
import time

import h5py
import numpy as np

from tests.helpers import SIM_COMMANDS, cli, commands_said, on_host_devices

CONFIGS = {
    # u = 1 at x = 0 invades a box with no-flux sides elsewhere
    "fisher": """
[model]
name = "fisher_kpp"
[grid]
points = [32, 12]
domain = [[0.0, 1.0], [0.0, 0.5]]
boundary = [["dirichlet", "neumann"], "neumann"]
boundary_value = [[1.0, 0.0], 0.0]
[params]
diffusivity = 0.002
rate = 2.0
[initial]
u = "exp(-((x - 0.3)**2 + (y - 0.25)**2) / 0.01)"
[time]
t1 = 0.4
save = 5
[solver]
rtol = 1e-7
atol = 1e-9
""",
    # two fields, a Robin side at x = 0 (its data vary along y), order 4
    "text": """
[model]
name = "two_fields"
[model.fields]
u = "Du * laplace(u) - u * v * v + F * (1 - u)"
v = "Dv * laplace(v) + u * v * v - (F + k) * v"
[model.parameters]
F = 0.04
k = 0.06
Du = 2e-3
Dv = 1e-3
[model.observables]
mean_v = "mean(v)"
[grid]
points = [16, 9]
domain = [[0.0, 1.0], [0.0, 1.0]]
boundary = [["robin", "dirichlet"], "neumann"]
[grid.boundary_value]
u = [[{ coefficient = 1.0, value = "1.0 + 0.1 * y" }, 1.0], 0.0]
v = [[{ coefficient = 1.0, value = 0.0 }, 0.0], 0.0]
[initial]
u = "1.0 - 0.5 * exp(-((x - 0.5)**2 + (y - 0.5)**2) / 0.02)"
v = "0.25 * exp(-((x - 0.5)**2 + (y - 0.5)**2) / 0.02)"
[time]
t1 = 2.0
save = 5
[solver]
method = "kencarp4"
order = 4
rtol = 1e-6
atol = 1e-8
""",
    # 8 planes over 4 devices: slabs of 2, thinner than order 4 needs
    "thin": """
[model]
name = "heat_fd"
[grid]
points = [8, 8]
[time]
t1 = 0.1
save = 3
[solver]
order = 4
""",
}

# Every `sim run` of one process of 4 devices, each after a marker line on stderr; then
# the compiled chunk of a split run.
RUNS = (
    r"""
import json, re
import jax
import numpy as np

import sim._result, sim._unfinished
from sim._shards import write_blocks

assert len(jax.devices()) == 4, jax.devices()
written = []  # (what, dataset, block shapes): every split array the runs wrote


def recording(module):
    def write(dataset, value, offset=0):
        if hasattr(value, "addressable_shards"):
            shapes = sorted({tuple(s.data.shape) for s in value.addressable_shards})
            written.append((module, dataset.name, [list(s) for s in shapes], list(value.shape)))
        return write_blocks(dataset, value, offset)

    return write


sim._result.write_blocks = recording("result")
sim._unfinished.write_blocks = recording("checkpoint")
"""
    + SIM_COMMANDS
    + r"""
# the compiled chunk of a split run: ghost planes exchanged, no grid gathered
from sim._config import load_config
from sim._run import _loop_advance, _loop_init, plan_run

gathers = {}
for name, size in (("fisher", 32 * 12), ("text", 16 * 9)):
    plan = plan_run(load_config(f"{name}.toml", ["grid.devices=4"]))
    problem = plan.engine.problem
    state = _loop_init(problem)
    text = _loop_advance.lower(problem, state, np.int32(2), 3).compile().compiled.as_text()
    assert "collective-permute" in text, name
    shapes = re.findall(r"= \w+\[([\d,]*)\]\{[^}]*\} all-gather", text)
    gathers[name] = [s for s in shapes if s and np.prod([int(v) for v in s.split(",")]) >= size]
    blocks = {tuple(s.data.shape) for s in jax.tree.leaves(state.y)[0].addressable_shards}
    gathers[name + "_state"] = sorted(blocks)
print(json.dumps({"codes": codes, "written": written, "gathers": gathers}))
"""
)


def test_sim_run_of_a_finite_difference_grid_on_4_devices_writes_the_file_of_one(tmp_cwd, capsys):
    import sim

    for name, text in CONFIGS.items():
        (tmp_cwd / f"{name}.toml").write_text(text)
    sweep = "[sweep.params]\ndiffusivity = { values = [0.001, 0.002] }\n"
    (tmp_cwd / "sweep.toml").write_text(CONFIGS["fisher"] + sweep)
    for name in ("fisher", "text"):
        assert cli(["run", f"{name}.toml", "-o", f"{name}_1.h5", "--quiet"], capsys)[0] == 0
    # (a chunk of 2 frames and a checkpoint after each: the state is written, split, too)
    often = ["--set", "output.chunk=2", "--set", "output.checkpoint_every=2"]
    runs = [
        ["run", f"{name}.toml", "-o", f"{name}_4.h5", "--quiet", "--devices", "4", *often]
        for name in ("fisher", "text")
    ]
    bad = [
        ["run", "fisher.toml", "-o", "bad.h5", "--quiet", "--devices", "3"],
        ["run", "fisher.toml", "-o", "bad.h5", "--quiet", "--set", "grid.devices=8"],
        ["run", "thin.toml", "-o", "bad.h5", "--quiet", "--devices", "4"],
        ["sweep", "sweep.toml", "-o", "bad.h5", "--quiet", "--set", "grid.devices=4"],
    ]
    began = time.monotonic()
    done = on_host_devices(RUNS, [json.dumps(runs + bad)], 4, EQX_ON_ERROR="nan")
    print(
        f"{len(runs)} runs and {len(bad)} refusals on 4 devices: {time.monotonic() - began:.1f} s"
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["codes"] == [0] * len(runs) + [2] * len(bad), (report, done.stderr[-3000:])
    said = commands_said(done.stderr)
    for argv, text in zip(runs + bad, said, strict=True):
        lines = text.strip().splitlines()[1:]
        if argv in bad:
            assert len(lines) == 1 and "grid.devices" in lines[0], text
    refusals = said[len(runs) :]
    assert "3 does not divide points[0] = 32" in refusals[0]
    assert "only 4 devices are available" in refusals[1]
    assert "slabs of 2 planes of points[0] = 8 are thinner than the 4" in refusals[2]
    assert "a sweep splits its runs over the devices instead" in refusals[3]
    assert not (tmp_cwd / "bad.h5").exists()
    # every field went to the file one device's slab at a time, and so did the state
    written = report["written"]
    for name, (n0, n1), channels in (("fisher", (32, 12), 1), ("text", (16, 9), 2)):
        fields = [w for w in written if w[0] == "result" and w[3][1:] == [n0, n1]]
        assert fields and all(w[2] == [[w[3][0], n0 // 4, n1]] for w in fields), written
        state = [w for w in written if w[0] == "checkpoint" and w[3] == [n0, channels, n1]]
        assert state and all(w[2] == [[n0 // 4, channels, n1]] for w in state), written
        assert report["gathers"][name] == [], report["gathers"]
        assert report["gathers"][name + "_state"] == [[n0 // 4, channels, n1]]
    # the files of 4 devices are those of one
    for name in ("fisher", "text"):
        one, four = sim.read(f"{name}_1.h5"), sim.read(f"{name}_4.h5")
        assert list(four.observables) == list(one.observables)
        worst = 0.0
        for key, value in one.observables.items():
            value, got = np.asarray(value), np.asarray(four.observables[key])
            assert got.shape == value.shape, (name, key)
            scale = max(np.max(np.abs(value)), 1.0)
            assert np.max(np.abs(got - value)) <= 1e-12 * scale, (name, key)
            worst = max(worst, np.max(np.abs(got - value)) / scale)
        print(f"{name}: 4 devices against 1, largest difference {worst:.2g}")
        with h5py.File(f"{name}_1.h5") as a, h5py.File(f"{name}_4.h5") as b:
            assert a["stats"].attrs["num_steps"] == b["stats"].attrs["num_steps"] > 4
        np.testing.assert_array_equal(four.time, one.time)
    # (the runs moved: u grows and invades from x = 0, where it is held at 1)
    fisher = sim.read("fisher_1.h5").observables
    u, mass = np.asarray(fisher["u"]), np.asarray(fisher["mass"])
    assert np.all(u[:, 0, :] == 1.0) and mass[-1] > 1.5 * mass[0]
    v = np.asarray(sim.read("text_1.h5").observables["v"])
    assert np.max(np.abs(v[-1] - v[0])) > 0.01
