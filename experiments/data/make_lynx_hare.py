"""Convert the Hudson's Bay lynx-hare pelt counts (CSV) into the HDF5 file the examples use.

Source: Howard (2009), as used in the Stan Lotka-Volterra case study (Carpenter 2018);
thousands of pelts per year, 1900-1920.

Run: python experiments/data/make_lynx_hare.py  (writes lynx_hare.h5 beside this script)
"""

from pathlib import Path

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> None:
    table = np.genfromtxt(
        HERE / "hudson-bay-lynx-hare.csv", delimiter=",", names=True, skip_header=1
    )
    with h5py.File(HERE / "lynx_hare.h5", "w") as f:
        f.attrs["source"] = (
            "Hudson's Bay Company pelts (Howard 2009, via the Stan Lotka-Volterra case study)"
        )
        f.attrs["units"] = "thousands of pelts; year"
        f.create_dataset("year", data=table["year"].astype(float))
        f.create_dataset("hare", data=table["hare"].astype(float))
        f.create_dataset("lynx", data=table["lynx"].astype(float))


if __name__ == "__main__":
    main()
