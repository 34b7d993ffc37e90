"""`python -m sim.cli`: the `sim` command."""

from . import main

if __name__ == "__main__":
    main()
