"""python -m tests.fault --rounds 50 --seed 7 --mode sync [--scenario lag-kill] [--sharded]

Runs N rounds (tests/fault/rounds.py), prints each round's faults, operations
and verdict, then a summary; exits 1 if any round found a violation. A
round's node and etcd logs stay in --workdir (a fresh temporary directory
by default) when it found one, or asynchronous loss.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from tests.e2e.etcdproc import need_etcd
from tests.fault.cluster import MODES
from tests.fault.nemesis import SCENARIOS
from tests.fault.rounds import run_round, summary
from tests.fault.sharded import run_sharded_round


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fault", description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mode", choices=sorted(MODES), default="sync")
    parser.add_argument("--scenario", choices=["random", *sorted(SCENARIOS)], default="random")
    parser.add_argument("--first", type=int, default=1, help="index of the first round")
    parser.add_argument("--workdir", type=Path, help="where rounds keep their data and logs")
    parser.add_argument("--keep", action="store_true", help="keep every round's directory")
    parser.add_argument("--verbose", action="store_true", help="every round's timeline")
    parser.add_argument(
        "--sharded",
        action="store_true",
        help="a sharded cluster: 2 shards x 3 nodes on one etcd, load direct and through "
        "the self-routing client, faults in each shard (tests/fault/sharded.py)",
    )
    args = parser.parse_args(argv)
    need_etcd()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="queuebox-fault-"))
    results = []
    for index in range(args.first, args.first + args.rounds):
        where = workdir / f"round-{index}"
        run = run_sharded_round if args.sharded else run_round
        result = run(where, args.mode, args.seed, index, args.scenario)
        results.append(result)
        print(result.show(verbose=args.verbose), flush=True)
        if result.ok and not result.tolerated and not args.keep:
            shutil.rmtree(where, ignore_errors=True)
    print(summary(results))
    if args.workdir is None and not any(workdir.iterdir()):
        workdir.rmdir()  # every round passed and went: the directory made here goes too
    else:
        print(f"rounds kept in {workdir}")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
