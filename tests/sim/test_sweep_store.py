"""The partial file of an unfinished sweep (`sim._sweep_store.FileSink`): resumed when its
datasets are those the layout asks for, refused, unchanged, when one has another type."""

import h5py
import numpy as np
import pytest

import sim
from sim._sweep_store import FileSink, Layout, partial_path

ROWS = {
    "observables/x": ((2,), np.dtype(float)),
    "status": ((), np.dtype(np.int8)),
    "stats/result": ((), np.dtype(np.int32)),
}


def test_a_partial_sweep_whose_rows_changed_type_is_refused(tmp_path):
    # A partial sweep file of the same config whose per-run dataset was rewritten as
    # float32 with the same shape: resuming into it would keep the rest in float32.
    layout = Layout(
        3, {"time": np.arange(2.0)}, ROWS, {"model": "m", "config": "a = 1\n", "seed": 0}
    )
    out = tmp_path / "out.h5"
    FileSink.create(out, layout).abandon(keep=True)
    FileSink.resume(out, layout).abandon(keep=True)  # (as written: resumed)
    with h5py.File(partial_path(out), "r+") as f:
        del f["observables/x"]
        f.create_dataset("observables/x", shape=(3, 2), dtype=np.float32)
    before = partial_path(out).read_bytes()
    with pytest.raises(sim.DataError, match="observables/x.*another shape or type"):
        FileSink.resume(out, layout)
    assert partial_path(out).read_bytes() == before
