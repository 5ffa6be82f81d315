"""`python -m clients.bench SCENARIO ...`, the same as `queuebox bench`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], prog="python -m clients.bench"))
