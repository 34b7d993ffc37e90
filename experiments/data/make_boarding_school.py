"""Write the 1978 boarding-school influenza outbreak as the HDF5 file the SIR example fits.

Source: "Influenza in a boarding school", British Medical Journal 1978;1:587 (4 March
1978): of the 763 boys of a boarding school in the north of England, 512 fell ill after
one boy came back from holiday; the series is the number confined to bed on each of the
14 days after the first case (also the `influenza_england_1978_school` data set of the
R package outbreaks, column in_bed).

Run: python experiments/data/make_boarding_school.py  (writes boarding_school.h5 beside
this script)
"""

from pathlib import Path

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent

IN_BED = [3, 8, 26, 76, 225, 298, 258, 233, 189, 128, 68, 29, 14, 4]


def main() -> None:
    with h5py.File(HERE / "boarding_school.h5", "w") as f:
        f.attrs["source"] = (
            "Influenza in a boarding school, BMJ 1978;1:587; 763 boys, one index case on day 0"
        )
        f.attrs["units"] = "boys confined to bed; days since the first case"
        f.create_dataset("day", data=np.arange(1.0, len(IN_BED) + 1.0))
        f.create_dataset("in_bed", data=np.asarray(IN_BED, dtype=float))


if __name__ == "__main__":
    main()
