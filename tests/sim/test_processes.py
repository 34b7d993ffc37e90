"""One run over several processes (`sim run|sweep --distributed`): who the processes are
(the command line, Slurm's and Open MPI's environment), and, on the loopback interface,
two `sim` processes of two CPU devices each against one process of four: the same sweep
file bit for bit, the same split PDE run, one process killed ending the other in one
line within 30 s, and `--resume` of both finishing the file as if nothing had happened."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from sim import _processes
from sim._errors import InputError
from tests.helpers import host_devices
from tests.sim.test_fd_devices import CONFIGS as FD_CONFIGS
from tests.sim.test_pde_devices import RUN_CONFIGS
from tests.sim.test_sde_devices import OU

SIM = str(Path(sys.executable).parent / "sim")


# ----------------------------------------------------------------------------- who


@pytest.mark.parametrize(
    "nodes, first",
    [
        ("node07", "node07"),
        ("node[07-09,12]", "node07"),
        ("gpu[3,5],cpu1", "gpu3"),
        ("a-b[001-004]", "a-b001"),
        ("login1,login2", "login1"),
    ],
)
def test_the_coordinator_is_the_first_node_of_a_slurm_step(nodes, first):
    env = {"SLURM_NTASKS": "4", "SLURM_PROCID": "2", "SLURM_STEP_NODELIST": nodes}
    env["SLURM_JOB_ID"] = "123456"
    p = _processes.resolve(None, None, None, env)
    assert p == _processes.Processes(f"{first}:{_processes.PORT_BASE + 456}", 4, 2, "Slurm")


def test_open_mpi_names_the_launchers_host_and_the_options_win_over_the_environment():
    env = {
        "OMPI_COMM_WORLD_SIZE": "3",
        "OMPI_COMM_WORLD_RANK": "1",
        "OMPI_MCA_orte_hnp_uri": "1531576320.0;tcp://10.96.0.1,10.148.0.1:34911",
    }
    p = _processes.resolve(None, None, None, env)
    assert p == _processes.Processes(f"10.96.0.1:{_processes.PORT_BASE + 320}", 3, 1, "Open MPI")
    given = _processes.resolve("head:9000", 3, 2, env)
    assert (given.coordinator, given.count, given.index) == ("head:9000", 3, 2)
    assert _processes.resolve("h:1", 2, 0, {}).source == "the command line"


@pytest.mark.parametrize(
    "args, env, option, says",
    [
        ((None, None, None), {}, "--processes", "missing: --distributed needs --coordinator"),
        (("h:1", 2, None), {}, "--process-id", "missing"),
        (("h:1", 2, 2), {}, "--process-id", "expected 0 to 1"),
        (("h:1", 0, 0), {}, "--processes", "expected at least 1 process"),
        (("h", 2, 0), {}, "--coordinator", "expected HOST:PORT"),
        (("h:70000", 2, 0), {}, "--coordinator", "expected HOST:PORT"),
        ((None, 2, 0), {}, "--coordinator", "give --coordinator HOST:PORT"),
        ((None, None, None), {"SLURM_NTASKS": "x", "SLURM_PROCID": "0"}, "--processes", "Slurm"),
        (
            (None, None, None),
            {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0"},
            "--coordinator",
            "Open MPI does not say where process 0 runs",
        ),
    ],
)
def test_a_run_whose_processes_are_not_all_said_is_refused(args, env, option, says):
    with pytest.raises(InputError) as e:
        _processes.resolve(*args, env)
    assert str(e.value).startswith(option) and says in str(e.value)


# ----------------------------------------------------------------------------- loopback

SWEEP = """
[model]
name = "lotka_volterra"
[params]
gamma = 0.80
delta = 0.024
[initial]
prey = 30.0
predator = 4.0
[time]
t1 = {t1}
save = 41
[solver]
rtol = 1e-6
atol = 1e-8
max_steps = 10000000
[sweep]
mode = "grid"
chunk = {chunk}
save = "full"
[sweep.params]
alpha = {{ linspace = [0.3, 0.8, {n}] }}
beta = {{ logspace = [-2.0, -1.3, {n}] }}
"""

# (the forced 2-D flow of test_pde_devices, whose programs it shares)
FLOW = RUN_CONFIGS["ns2d"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(devices: int) -> dict[str, str]:
    env = {**os.environ, "XLA_FLAGS": host_devices(devices)}
    env.pop("NPROC", None)
    return env


def _one_process(args: list[str], cwd: Path) -> None:
    devices = [] if args[0] == "infer" else ["--devices", "4"]  # (infer: every device)
    done = subprocess.run(
        [SIM, *args, *devices, "--quiet"],
        cwd=cwd,
        env=_env(4),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def _start_pair(args: list[str], cwd: Path, port: int | None = None) -> list[subprocess.Popen]:
    """Two `sim ... --distributed` processes of two CPU devices each (process 1 first)."""
    port = port or _free_port()
    return [
        subprocess.Popen(
            [SIM, *args, "--distributed", "--coordinator", f"127.0.0.1:{port}"]
            + ["--processes", "2", "--process-id", str(i), "--quiet"],
            cwd=cwd,
            env=_env(2),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (1, 0)
    ][::-1]


def _finish(processes: list[subprocess.Popen], timeout: float = 300) -> list[tuple[int, str]]:
    out = []
    for p in processes:
        _, err = p.communicate(timeout=timeout)
        out.append((p.returncode, err))
    return out


def _contents(path: Path) -> dict[str, np.ndarray]:
    out = {}

    def keep(name, item) -> None:
        if isinstance(item, h5py.Dataset):
            out[name] = item[()]

    with h5py.File(path, "r") as f:
        f.visititems(keep)
        out.update({f"@{k}": np.asarray(v) for k, v in f.attrs.items() if k != "created"})
    return out


def _bit_equal(a: dict, b: dict) -> list[str]:
    """The names of `a` and `b` whose values or dtypes are not bit for bit the same."""
    differ = sorted(set(a) ^ set(b))
    for name in set(a) & set(b):
        x, y = np.asarray(a[name]), np.asarray(b[name])
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            differ.append(name)
    return differ


def _assert_close(one: dict, two: dict, tolerance: float) -> None:
    """Every floating value of `two` within `tolerance` (absolute, and relative to the
    largest value of its dataset) of `one`'s, everything else equal."""
    assert sorted(one) == sorted(two)
    for name, a in one.items():
        b = two[name]
        if np.asarray(a).dtype.kind == "f":
            scale = max(1.0, float(np.max(np.abs(a))) if np.size(a) else 1.0)
            np.testing.assert_allclose(b, a, rtol=0, atol=tolerance * scale, err_msg=name)
        else:
            assert np.array_equal(a, b), name


def test_two_processes_of_two_devices_write_the_sweep_file_of_one_process_of_four(tmp_path):
    (tmp_path / "lv.toml").write_text(SWEEP.format(t1=20.0, chunk=16, n=8))
    _one_process(["sweep", "lv.toml", "-o", "one.h5"], tmp_path)
    said = _finish(_start_pair(["sweep", "lv.toml", "-o", "two.h5"], tmp_path))
    assert [code for code, _ in said] == [0, 0], said
    assert [err for _, err in said] == ["", ""]  # (--quiet: nothing, and no C++ log either)
    one, two = _contents(tmp_path / "one.h5"), _contents(tmp_path / "two.h5")
    assert len(one) > 10 and "observables/prey" in one and _bit_equal(one, two) == []
    assert not list(tmp_path.glob(".*"))  # no partial file, checkpoint or lock left


def test_a_spectral_pde_split_over_two_processes_is_the_run_split_over_four_devices(tmp_path):
    (tmp_path / "flow.toml").write_text(FLOW)
    _one_process(["run", "flow.toml", "-o", "one.h5"], tmp_path)
    said = _finish(_start_pair(["run", "flow.toml", "-o", "two.h5"], tmp_path))
    assert [code for code, _ in said] == [0, 0], said
    one, two = _contents(tmp_path / "one.h5"), _contents(tmp_path / "two.h5")
    vorticity = one["observables/vorticity"]
    assert vorticity.shape == (6, 32, 32) and np.ptp(vorticity) > 0.1
    _assert_close(one, two, 1e-12)


@pytest.mark.parametrize(
    "text, field",
    [
        # a finite-difference grid, its halos exchanged between the processes (under slow:
        # its file is written as the spectral grid's is)
        pytest.param(FD_CONFIGS["fisher"], "observables/u", marks=pytest.mark.slow),
        (OU.format(paths=1024, extra=""), "observables/x"),  # an ensemble's paths
    ],
    ids=["finite-difference", "sde-ensemble"],
)
def test_a_run_split_over_two_processes_is_the_run_split_over_four_devices(tmp_path, text, field):
    (tmp_path / "c.toml").write_text(text)
    _one_process(["run", "c.toml", "-o", "one.h5"], tmp_path)
    said = _finish(_start_pair(["run", "c.toml", "-o", "two.h5"], tmp_path))
    assert [code for code, _ in said] == [0, 0], said
    one, two = _contents(tmp_path / "one.h5"), _contents(tmp_path / "two.h5")
    assert np.ptp(one[field]) > 0.1
    _assert_close(one, two, 1e-12)


@pytest.mark.slow
def test_a_split_pde_run_whose_lead_is_killed_resumes_on_both_processes(tmp_path):
    text = FLOW.replace("t1 = 0.5", "t1 = 6.0").replace("save = 6", "save = 61")
    text = text.replace("points = [32, 32]", "points = [64, 64]")
    (tmp_path / "flow.toml").write_text(text + "[output]\ncheckpoint_every = 5\n")
    _one_process(["run", "flow.toml", "-o", "one.h5"], tmp_path)
    args = ["run", "flow.toml", "-o", "two.h5"]
    lead, other = _start_pair(args, tmp_path)
    deadline = time.monotonic() + 120
    while not (tmp_path / ".two.h5.checkpoint").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    lead.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    [(code, err)] = _finish([other], timeout=60)
    lead.communicate()
    assert code == 1 and time.monotonic() - killed < 30, err
    assert err.startswith("error: process 1 of 2 of this distributed run stopped: another ")
    assert len(err.strip().splitlines()) == 1, err
    said = _finish(_start_pair([*args, "--resume"], tmp_path))
    assert [code for code, _ in said] == [0, 0], said
    _assert_close(_contents(tmp_path / "one.h5"), _contents(tmp_path / "two.h5"), 1e-12)


def _written(partial: Path) -> int:
    with h5py.File(partial, "r") as f:
        return int(np.sum(f["status"][()] != 0))


def _when_computing(lead: subprocess.Popen, seconds: float) -> None:
    """Wait until the processes compute together (gloo has connected them: its lines in
    the lead's log, `sim._supervisor.log_path`), then `seconds` more."""
    log = Path(tempfile.gettempdir()) / f"sim-distributed-{lead.pid}.log"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if log.exists() and "connected to 1 peer" in log.read_text(errors="replace"):
            break
        time.sleep(0.1)
    time.sleep(seconds)


def test_a_signal_to_one_process_stops_both_a_killed_one_ends_the_other_and_resume_is_exact(
    tmp_path,
):
    (tmp_path / "lv.toml").write_text(SWEEP.format(t1=12000.0, chunk=16, n=16))
    _one_process(["sweep", "lv.toml", "-o", "one.h5"], tmp_path)
    args = ["sweep", "lv.toml", "-o", "two.h5"]
    partial = tmp_path / ".two.h5.partial"

    # SIGTERM to process 1 (a scheduler's stop): both stop at the same safe point, each
    # with its interrupted line and 143, the partial file kept
    lead, other = _start_pair(args, tmp_path)
    _when_computing(lead, 2.0)
    other.send_signal(signal.SIGTERM)
    said = _finish([lead, other], timeout=60)
    assert [code for code, _ in said] == [143, 143], said
    for i, (_, err) in enumerate(said):
        assert err.startswith("interrupted (SIGTERM): the sweep so far is checkpointed"), err
        assert err.strip().endswith(f"--process-id {i} --quiet --resume"), err
        assert len(err.strip().splitlines()) == 1, err
    stopped = _written(partial)
    assert 0 < stopped < 256, stopped  # (else the test shows nothing)

    # resumed, then process 1 killed outright: process 0 ends within 30 s, in one line
    lead, other = _start_pair([*args, "--resume"], tmp_path)
    _when_computing(lead, 2.0)
    other.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    [(code, err)] = _finish([lead], timeout=60)
    took = time.monotonic() - killed
    other.communicate()
    assert code == 1 and took < 30, (code, took, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: process 0 of 2 of this distributed run stopped: another ")
    assert lines[0].endswith("--process-id 0 --quiet") and lines[0].count("--resume") == 1
    assert stopped <= _written(partial) < 256

    # resumed again on both: the file of one process of four devices, bit for bit
    said = _finish(_start_pair([*args, "--resume"], tmp_path))
    assert [code for code, _ in said] == [0, 0], said
    assert _bit_equal(_contents(tmp_path / "one.h5"), _contents(tmp_path / "two.h5")) == []


@pytest.mark.slow  # (45 s: three processes each compile the batched fit)
def test_a_multistart_fit_over_two_processes_is_the_fit_over_four_devices(tmp_path):
    from tests.inference.test_multistart import decay_config

    decay_config(tmp_path, starts=8)
    _one_process(["fit", "decay.toml", "-o", "one.h5"], tmp_path)
    processes = _start_pair(["fit", "decay.toml", "-o", "two.h5"], tmp_path)
    outputs = [p.communicate(timeout=300) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    lead_table, other_table = (out for out, _ in outputs)
    assert "initial.A" in lead_table and other_table == ""  # (the lead prints the result)
    one, two = _contents(tmp_path / "one.h5"), _contents(tmp_path / "two.h5")
    assert len(one["starts/objective"]) == 8
    _assert_close(one, two, 1e-12)


@pytest.mark.slow  # (each process compiles the objective through Kvaerno5: minutes)
def test_a_petab_multistart_fit_over_two_processes_is_the_fit_over_four_devices(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments" / "data"))
    from make_decay_petab import TRUTH, write

    yaml = write(tmp_path / "decay").relative_to(tmp_path)
    args = ["fit", str(yaml), "--starts", "8"]
    _one_process([*args, "-o", "one.h5"], tmp_path)
    said = _finish(_start_pair([*args, "-o", "two.h5"], tmp_path))
    assert [code for code, _ in said] == [0, 0], said
    assert said[1][1] == ""  # (process 1 says nothing: the lead reports the fit)
    one, two = _contents(tmp_path / "one.h5"), _contents(tmp_path / "two.h5")
    assert len(one["starts/objective"]) == 8
    _assert_close(one, two, 1e-12)
    assert abs(float(two["estimate/k"]) - TRUTH["k"]) < 0.1 * TRUTH["k"], two["estimate/k"]
    assert not list(tmp_path.glob(".*"))  # (no checkpoint or lock left by either process)


def test_two_processes_claiming_one_id_end_in_one_line_each_and_write_nothing(tmp_path):
    (tmp_path / "lv.toml").write_text(SWEEP.format(t1=1.0, chunk=4, n=2))
    port = _free_port()
    args = [SIM, "sweep", "lv.toml", "-o", "x.h5", "--distributed", "--coordinator"]
    args += [f"127.0.0.1:{port}", "--processes", "2", "--process-id", "0"]
    # (the one whose place the other took waits for a second process to join: 5 s here)
    env = {**_env(2), "SIMJAX_JOIN_SECONDS": "5"}
    started = time.monotonic()
    both = [
        subprocess.Popen(args, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    said = _finish(both, timeout=120)
    assert time.monotonic() - started < 60
    for code, err in said:
        assert code == 1 and len(err.strip().splitlines()) == 1, err
        assert "the processes could not join (each needs its own --process-id" in err, err
    assert not (tmp_path / "x.h5").exists()


@pytest.mark.slow  # (NUTS compiles for minutes in three processes)
def test_nuts_chains_over_two_processes_draw_the_chains_of_one_process_of_four_devices(tmp_path):
    # Each chain is one program for one device, so its draws are the same bits on
    # whichever process's device it runs.
    (tmp_path / "data").mkdir()
    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "data" / "lynx_hare.h5").write_bytes(
        (repo / "experiments" / "data" / "lynx_hare.h5").read_bytes()
    )
    (tmp_path / "lh.toml").write_text((repo / "experiments" / "lynx_hare.toml").read_text())
    short = ["--set", "infer.warmup=40", "--set", "infer.samples=40"]
    _one_process(["infer", "lh.toml", "-o", "one.h5", *short], tmp_path)
    said = _finish(_start_pair(["infer", "lh.toml", "-o", "two.h5", *short], tmp_path), 900)
    assert [code for code, _ in said] == [0, 0], said
    assert said[1][1] == ""  # (process 1 says nothing: the lead reports the posterior)
    one, two = _contents(tmp_path / "one.h5"), _contents(tmp_path / "two.h5")
    assert one["posterior/alpha"].shape == (4, 40)
    assert _bit_equal(one, two) == []


@pytest.mark.slow  # (NUTS through Kvaerno5, compiled in three processes)
def test_a_petab_posterior_over_two_processes_draws_the_chains_of_one_process(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments" / "data"))
    from make_decay_petab import write

    yaml = write(tmp_path / "decay").relative_to(tmp_path)
    args = ["infer", str(yaml), "--chains", "4", "--warmup", "20", "--samples", "20"]
    _one_process([*args, "-o", "one.h5"], tmp_path)
    said = _finish(_start_pair([*args, "-o", "two.h5"], tmp_path), 900)
    assert [code for code, _ in said] == [0, 0], said
    assert said[1][1] == ""  # (process 1 says nothing: the lead reports the posterior)
    one, two = _contents(tmp_path / "one.h5"), _contents(tmp_path / "two.h5")
    assert one["posterior/k"].shape == (4, 20) and np.all(np.isfinite(one["posterior/k"]))
    assert _bit_equal(one, two) == []
    assert not list(tmp_path.glob(".*"))  # (no lock left by either process)


@pytest.mark.parametrize(
    "method, thermostat",
    [
        pytest.param("verlet", "", marks=pytest.mark.slow),  # (langevin takes the same path)
        ("langevin", "temperature = 1.0\nfriction = 1.0"),
    ],
)
def test_an_md_run_over_two_processes_is_the_run_split_by_slabs_over_four_devices(
    tmp_path, method, thermostat
):
    from tests.sim.test_md_slabs import CONFIG  # (2,048 LJ particles, 120 steps)

    text = CONFIG.format(solver=thermostat).replace('"verlet"', f'"{method}"')
    (tmp_path / "md.toml").write_text(text)
    _one_process(["run", "md.toml", "-o", "one.h5"], tmp_path)  # (--devices 4: 4 slabs)
    said = _finish(_start_pair(["run", "md.toml", "-o", "two.h5"], tmp_path))
    assert [code for code, _ in said] == [0, 0], said
    one, two = _contents(tmp_path / "one.h5"), _contents(tmp_path / "two.h5")
    assert one["particles/all/position/value"].shape == (13, 2048, 3)
    # the particles the same bits; the observables are sums over the devices, which the
    # processes add in another order (gloo): their last bits
    differ = _bit_equal(one, two)
    assert all(name.startswith("observables/") for name in differ), differ
    _assert_close(one, two, 1e-13)


def test_process_options_without_distributed_and_a_missing_coordinator_are_one_line(tmp_path):
    (tmp_path / "lv.toml").write_text(SWEEP.format(t1=1.0, chunk=4, n=2))
    for args, says in (
        (["--processes", "2"], "error: --processes: 2: applies with --distributed only"),
        (["--distributed"], "error: --processes: missing: --distributed needs --coordinator"),
        (
            ["--distributed", "--processes", "2", "--process-id", "0", "--scheduler", "local:1"],
            "error: --coordinator: missing",
        ),
    ):
        done = subprocess.run(
            [SIM, "sweep", "lv.toml", "-o", "x.h5", *args],
            cwd=tmp_path,
            env=_env(1),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert (done.returncode, done.stderr.strip().splitlines()) == (2, [done.stderr.strip()])
        assert done.stderr.startswith(says), done.stderr
    assert not (tmp_path / "x.h5").exists()
