"""The distributed real FFT of `solvers.SlabGrid` against `numpy.fft.rfftn`, on 1, 2 and 4
simulated CPU devices (`--xla_force_host_platform_device_count`), and the refusals of a
grid that does not split.

One process of 4 devices runs every case (meshes of its first 1, 2 and 4 devices), so its
start-up is paid once; its shapes are drawn by hypothesis there, with a fixed seed.
"""

import os
import subprocess
import time

import pytest

from solvers import SlabGrid, check_slabs
from tests.helpers import host_devices, script_command

FFT_CASES = r"""
import math
import sys

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
from solvers import SlabGrid, slab_irfft, slab_rfft, unpadded

assert len(jax.devices()) == 4, jax.devices()
checked = []


def check(points, devices, lead, seed):
    domain = tuple((0.0, 1.0 + i) for i in range(len(points)))
    grid = SlabGrid(points, domain, devices=devices)
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((*lead, *points))
    axes = tuple(range(len(lead), u.ndim))
    placed = grid.shard(jnp.asarray(u))

    def transforms(v):  # (one program a case: the transform, its unpadded modes, the inverse)
        h = slab_rfft(v, grid)
        return h, unpadded(h, grid), slab_irfft(h, grid)

    u_hat, got, back = jax.jit(transforms)(placed)
    # each device holds its block of every first-axis mode
    blocks = {s.data.shape for s in u_hat.addressable_shards}
    assert blocks == {(*lead, *grid.spectral_shape)}, (blocks, grid.spectral_shape)
    assert len(u_hat.sharding.device_set) == devices
    reference = np.fft.rfftn(u, axes=axes)
    got = np.asarray(got)
    scale = np.max(np.abs(reference))
    assert np.max(np.abs(got - reference)) <= 1e-13 * scale, (points, devices)
    # the padded modes are zero
    padded = np.asarray(u_hat)
    rest = padded.reshape(*padded.shape[: len(lead) + 1], padded.shape[len(lead) + 1], -1)
    assert np.all(rest[..., grid.swap_length :, :] == 0), (points, devices)
    slabs = {s.data.shape for s in back.addressable_shards}
    assert slabs == {(*lead, points[0] // devices, *points[1:])}, slabs
    assert np.max(np.abs(np.asarray(back) - u)) <= 1e-13 * np.max(np.abs(u))
    checked.append((points, devices))


even = st.integers(2, 9).map(lambda n: 2 * n)


@hypothesis.settings(max_examples=30, derandomize=True, deadline=None, database=None)
@hypothesis.given(
    dims=st.sampled_from([2, 3]),
    devices=st.sampled_from([1, 2, 4]),
    sizes=st.lists(even, min_size=3, max_size=3),
    lead=st.sampled_from([(), (1,), (3,)]),
    seed=st.integers(0, 2**31),
)
def test(dims, devices, sizes, lead, seed):
    points = tuple(sizes[:dims])
    points = (math.lcm(points[0], 2 * devices) if points[0] % devices else points[0],) + points[1:]
    check(points, devices, lead, seed)


test()
# the cases named in the docs: 2-D and 3-D, 64 points a side
for devices in (1, 2, 4):
    check((64, 64), devices, (1,), 1)
    check((64, 64, 64), devices, (3,), 2)
print(len(checked), "cases", sorted({d for _, d in checked}))
"""


def test_the_distributed_real_fft_is_numpys_rfftn_on_1_2_and_4_devices(tmp_cwd):
    env = {**os.environ, "XLA_FLAGS": host_devices(4)}
    env.pop("NPROC", None)
    began = time.monotonic()
    done = subprocess.run(
        script_command(FFT_CASES), env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-4000:]
    cases, _, counts = done.stdout.strip().partition(" cases ")
    assert int(cases) >= 36 and counts == "[1, 2, 4]", done.stdout
    print(f"{cases} transforms checked in {time.monotonic() - began:.1f} s")


@pytest.mark.parametrize(
    ("points", "devices", "message"),
    [
        ((64, 64), 3, "does not divide points[0] = 64"),
        ((64,), 2, "which needs 2 or 3 axes"),
        ((64, 64), 0, "expected a whole number >= 1"),
        ((64, 64), True, "expected a whole number >= 1"),
        ((64, 64), 8, "only 4 devices are available"),
    ],
)
def test_a_grid_that_does_not_split_is_refused(points, devices, message):
    with pytest.raises(ValueError, match="devices = ") as info:
        check_slabs(points, devices, available=4)
    assert message in str(info.value)


def test_a_slab_grid_checks_its_axes():
    with pytest.raises(ValueError, match="2 or 3 axes"):
        SlabGrid((16,), ((0.0, 1.0),), devices=1)
    with pytest.raises(ValueError, match="does not divide points"):
        SlabGrid((18, 16), ((0.0, 1.0),) * 2, devices=4)
    grid = SlabGrid((16, 12, 10), ((0.0, 1.0),) * 3, devices=4)
    assert grid.spectral_shape == (16, 3, 6) and grid.slab_points == (4, 12, 10)
    flat = SlabGrid((16, 12), ((0.0, 1.0),) * 2, devices=4)  # 7 real-FFT modes, padded to 8
    assert flat.swap_length == 7 and flat.global_spectral_shape == (16, 8)
