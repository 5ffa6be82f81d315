"""`queuebox wal cat PATH...`: print WAL and snapshot records as JSON lines.

Owns only the argument parsing; reading and printing are storage.walcat's.
"""

from __future__ import annotations

import argparse

from queuebox.storage import walcat


def main(argv: list[str], prog: str = "queuebox wal") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    cat = sub.add_parser("cat", help="print records as JSON lines (lsn, time, op, space, tuple)")
    cat.add_argument(
        "paths", nargs="+", metavar="PATH", help="a .wal or .snap file, or a data directory"
    )
    args = parser.parse_args(argv)
    return walcat.main(args.paths)
