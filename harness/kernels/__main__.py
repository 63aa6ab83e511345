"""``python -m harness.kernels SCENARIO [--out DIR]``: the same command as ``harness kernels``."""

import sys

from harness.cli import main

if __name__ == "__main__":
    main(["kernels", *sys.argv[1:]], prog_name="harness")
