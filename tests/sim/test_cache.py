"""The persistent compilation cache: a second process loads what the first compiled, and
a damaged, foreign or unwritable cache never changes a result or stops a run."""

import os
import subprocess
import sys
from pathlib import Path

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sim import _cache

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "experiments" / "lotka_volterra.toml"


def sim_run(tmp_path, name, cache, *options):
    env = {**os.environ, "SIMJAX_CACHE_DIR": str(cache)}
    out = tmp_path / f"{name}.h5"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "_sim_entry",
            *options,
            "run",
            str(CONFIG),
            "-o",
            str(out),
            "--quiet",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    with h5py.File(out) as f:
        return np.asarray(f["observables/prey"]), proc.stderr


def entries(folder):
    return sorted(p for p in Path(folder).glob("*.simjax")) if Path(folder).is_dir() else []


def test_a_second_process_loads_every_program_and_damaged_or_blocked_entries_cost_only_a_compile(
    tmp_path,
):
    cache = tmp_path / "cache"
    first, _ = sim_run(tmp_path, "first", cache)
    saved = entries(cache)
    assert len(saved) >= 5, saved
    stamps = {p: p.stat().st_mtime_ns for p in saved}
    for p in saved:  # (an old modification time, so that a read, which touches it, shows)
        os.utime(p, ns=(stamps[p] - 10**10, stamps[p] - 10**10))
    again, _ = sim_run(tmp_path, "again", cache)
    np.testing.assert_array_equal(again, first)
    assert entries(cache) == saved  # nothing compiled anew ...
    assert all(p.stat().st_mtime_ns > stamps[p] - 10**10 for p in saved)  # ... every entry read

    # Damage the entries four different ways: garbage, truncated (a killed writer), one bit
    # flipped in the program, and another key's valid entry under this key's name; and take
    # the names of the others by folders, so that each load and each store of those fails
    # (reading and writing a folder as a file; as root, permissions would not stop a write,
    # so this is the unwritable entry that holds for every user). One run: it compiles, and
    # its result is the same bits.
    damaged_ones, blocked_ones = saved[:4], saved[4:]
    blobs = [p.read_bytes() for p in saved]
    for i, p in enumerate(damaged_ones):
        if i == 0:
            p.write_bytes(os.urandom(len(blobs[i])))
        elif i == 1:
            p.write_bytes(blobs[i][: len(blobs[i]) // 2])
        elif i == 2:
            flipped = bytearray(blobs[i])
            flipped[-10] ^= 0x01
            p.write_bytes(bytes(flipped))
        else:
            p.write_bytes(blobs[(i + 1) % len(blobs)])
    for p in blocked_ones:
        p.unlink()
        p.mkdir()
    (cache / "stray.simjax").write_bytes(b"not an entry")
    damaged, err = sim_run(tmp_path, "damaged", cache)
    np.testing.assert_array_equal(damaged, first)
    assert "cache" not in err.lower() and "Traceback" not in err, err
    # Each damaged entry was replaced by a good one; the folders are left as they were.
    checked = _cache.CheckedCache(cache)
    assert all(checked.get(p.name.removesuffix(".simjax")) is not None for p in damaged_ones)
    assert all(p.is_dir() for p in blocked_ones)
    assert (
        checked.get("stray") is None and not (cache / "stray.simjax").exists()
    )  # (removed when read)


# (two Python processes; the command's second process is checked by default above)
@pytest.mark.slow
def test_sim_run_and_sweep_from_python_are_compiled_by_the_first_process_only(tmp_path):
    """`sim.run` and `sim.sweep` called from Python compile once, as the `sim` command
    does: their loops report failures through result codes, not through host callbacks
    (which JAX never stores), so a second Python process compiles nothing."""
    script = (
        "import sim, numpy as np\n"
        "sim.configure_jax()\n"
        f"run = sim.run(sim.load_config({str(CONFIG)!r}))\n"
        f"config = sim.load_config({str(REPO / 'experiments' / 'lotka_volterra_sweep.toml')!r}, "
        "overrides=['sweep.params.alpha.linspace=[0.3, 0.8, 4]', "
        "'sweep.params.beta.logspace=[-2.0, -1.3, 2]'])\n"
        "swept = sim.sweep(config)\n"
        "print(repr(float(np.sum(run.observables['prey']))), "
        "repr(float(np.nansum(swept.observables['prey']))))\n"
    )
    env = {
        **os.environ,
        "SIMJAX_CACHE_DIR": str(tmp_path / "cache"),
        "JAX_EXPLAIN_CACHE_MISSES": "true",
    }
    env.pop("EQX_ON_ERROR", None)

    def python():
        proc = subprocess.run(
            [sys.executable, "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout, proc.stderr

    first, err = python()
    assert "to persistent compilation cache" in err  # (JAX explains what it stores)
    assert "host callbacks" not in err, err
    again, err = python()
    assert again == first
    assert "to persistent compilation cache" not in err, err


# (two `sim fit` processes of a PEtab problem; the cache of a second process is checked by default
# above)
@pytest.mark.slow
def test_a_petab_objective_is_compiled_by_the_first_process_only(tmp_path):
    """diffrax checks the save times of a solve through a host callback, and JAX keeps no
    program that holds one: the `sim` command turns such checks into NaN (EQX_ON_ERROR),
    so that the PEtab objective (a batch of implicit solves, each saving at its
    measurement times) is stored, and a second process compiles nothing."""
    import runpy

    problem = runpy.run_path(str(REPO / "experiments" / "data" / "make_decay_petab.py"))["write"](
        tmp_path / "decay"
    )
    env = {
        **os.environ,
        "SIMJAX_CACHE_DIR": str(tmp_path / "cache"),
        "JAX_EXPLAIN_CACHE_MISSES": "true",
    }
    env.pop("EQX_ON_ERROR", None)

    def evaluate(name):
        out = tmp_path / f"{name}.h5"
        proc = subprocess.run(
            [sys.executable, "-m", "_sim_entry", "fit", str(problem), "--evaluate", "-o", str(out)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        with h5py.File(out) as f:
            return float(f["objective"][()]), proc.stderr

    first, err = evaluate("first")
    assert "to persistent compilation cache" in err  # (JAX explains what it stores)
    assert "host callbacks" not in err, err
    again, err = evaluate("again")
    assert again == first
    assert "to persistent compilation cache" not in err, err


def test_an_unwritable_or_disabled_cache_leaves_the_run_as_it_was(tmp_path):
    import sim

    # (the reference in this process, with the tests' working cache: one `sim` process fewer)
    reference = np.asarray(sim.run(sim.load_config(CONFIG)).observables["prey"])
    blocked = tmp_path / "a_file"
    blocked.write_text("a regular file where the cache folder would be")
    result, err = sim_run(tmp_path, "blocked", blocked / "jax")
    np.testing.assert_array_equal(result, reference)
    assert err == ""
    # (SIMJAX_CACHE_DIR="" gives no folder, as --no-cache:
    # test_the_cache_folder_defaults_to_the_users_cache)
    unused = tmp_path / "unused"
    result, _ = sim_run(tmp_path, "no_cache", unused, "--no-cache")
    np.testing.assert_array_equal(result, reference)
    assert not unused.exists()


def test_a_cache_folder_deleted_again_and_again_during_a_sim_run_changes_nothing(tmp_path):
    import shutil
    import threading

    import sim

    cache = tmp_path / "cache"
    # (the reference in this process, with the tests' working cache: one `sim` process fewer)
    reference = np.asarray(sim.run(sim.load_config(CONFIG)).observables["prey"])
    stop, deletions = threading.Event(), [0]

    def delete():
        while not stop.is_set():
            if cache.exists():
                shutil.rmtree(cache, ignore_errors=True)
                deletions[0] += 1
            stop.wait(0.005)

    remover = threading.Thread(target=delete)
    remover.start()
    try:
        result, err = sim_run(tmp_path, "deleted", cache)
    finally:
        stop.set()
        remover.join()
    np.testing.assert_array_equal(result, reference)
    assert "Traceback" not in err, err
    assert deletions[0] >= 1  # (the folder was made, and taken away, while the run went)


def test_a_cache_folder_deleted_mid_run_is_made_again(tmp_path):
    from jax._src import compilation_cache

    before = (
        Path(jax.config.jax_compilation_cache_dir) if jax.config.jax_compilation_cache_dir else None
    )
    folder = tmp_path / "cache"
    try:
        _cache.enable(folder)
        f = jax.jit(lambda x: jnp.sin(x) * 3.25 + 1.0)
        assert float(f(jnp.asarray(0.5))) == pytest.approx(np.sin(0.5) * 3.25 + 1.0)
        assert len([p for p in entries(folder) if p.name.startswith("jit__lambda")]) == 1
        for p in entries(folder):
            p.unlink()
        folder.rmdir()
        g = jax.jit(lambda x: jnp.cos(x) * 1.75 - 2.0)
        assert float(g(jnp.asarray(0.5))) == pytest.approx(np.cos(0.5) * 1.75 - 2.0)
        assert len([p for p in entries(folder) if p.name.startswith("jit__lambda")]) == 1
        assert isinstance(compilation_cache._cache, _cache.CheckedCache)
    finally:
        if before is not None:
            _cache.enable(before)
        else:
            _cache.disable()


def test_the_cache_folder_defaults_to_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("SIMJAX_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    if sys.platform.startswith("linux"):
        assert _cache.default_folder() == tmp_path / "simjax" / "jax"
    monkeypatch.setenv("SIMJAX_CACHE_DIR", str(tmp_path / "here"))
    assert _cache.default_folder() == tmp_path / "here"
    monkeypatch.setenv("SIMJAX_CACHE_DIR", "")
    assert _cache.default_folder() is None


def test_configure_jax_turns_the_cache_on_in_a_fresh_process(tmp_path):
    # What a script gets from `import sim; sim.configure_jax()` (no command): the checked
    # cache in the user's cache folder, where a sim.* call then stores its programs.
    # (`import sim` alone leaves JAX's cache as it was: tests/test_architecture.py)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JAX_COMPILATION_CACHE") and k != "SIMJAX_CACHE_DIR"
    }
    env["XDG_CACHE_HOME"] = str(tmp_path / "home_cache")
    script = (
        "import jax, sim\n"  # noqa: UP031 (script text)
        "sim.configure_jax()\n"
        "from jax._src import compilation_cache as cc\n"
        "print(jax.config.jax_compilation_cache_dir)\n"
        "sim.run(sim.load_config(%r))\n"
        "print(type(cc._cache).__name__)\n" % str(CONFIG)
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    folder, kind = proc.stdout.split()
    expected = tmp_path / "home_cache" / "simjax" / "jax"
    assert Path(folder) == expected and kind == "CheckedCache"
    assert entries(expected), "sim.run stored nothing"


def test_an_empty_folder_turns_no_cache_on(tmp_cwd):
    # (as an empty SIMJAX_CACHE_DIR: never a cache in the current folder)
    import jax

    from sim import _cache

    before = jax.config.jax_compilation_cache_dir
    assert _cache.enable("") is None and _cache.enable("  ") is None
    assert jax.config.jax_compilation_cache_dir == before
    jax.jit(lambda x: x * 3.0 + 1.0)(jax.numpy.ones(7))
    assert list(tmp_cwd.iterdir()) == []
