"""`python -m queuebox`: the same as the `queuebox` command."""

import sys

from queuebox.cli import main

sys.exit(main())
