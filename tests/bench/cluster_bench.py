"""`queuebox bench cluster` on this machine: etcd, shards a and b (one node each)
and one plain node, started here, then the bench with every server's CPU named.
Prints what the bench prints, asserts nothing.

    python tests/bench/cluster_bench.py [--servers DIR] [--client DIR] [BENCH ARGS...]

`--servers`: the checkout whose servers run (default this one); `--client`: the
checkout whose `queuebox bench cluster` (and so whose client) runs (default this
one). Other arguments go to the bench (`--shape bulk --seconds 5 ...`). The pids
of the servers are printed first, for a profiler to attach to. Owns
`shards_and_node`, the servers tests/bench/bulk_client.py starts too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def shards_and_node(
    servers: Path | None, lease_ttl: float = 15.0
) -> Iterator[tuple[str, str, list[Any]]]:
    """etcd, shards a and b (one node each, `lease_ttl` their etcd lease) and one
    plain node, of the checkout `servers` (None: the one `tests.e2e` comes from),
    all stopped at the end: (etcd's endpoints, the cluster's prefix, [shard a,
    shard b, node])."""
    from tests.e2e import routing, serverproc
    from tests.e2e.etcdproc import EtcdProc
    from tests.e2e.routing import CLUSTER_TOML, Sharded
    from tests.e2e.serverproc import ServerProc, start_proc

    if servers is not None:
        serverproc.REPO = routing.REPO = servers.resolve()
    with (
        tempfile.TemporaryDirectory(prefix="cluster-bench-") as tmp,
        EtcdProc(Path(tmp) / "e") as etcd,
    ):
        procs: list[ServerProc] = []

        def start(*flags: str, **kwargs: Any) -> ServerProc:
            proc = start_proc(Path(tmp) / f"s{len(procs)}", list(flags), None, CLUSTER_TOML)
            procs.append(proc)
            return proc

        try:
            cluster = Sharded(start, etcd, Path(tmp), "--etcd-lease-ttl", f"{lease_ttl:g}")
            cluster.start()
            start()
            yield etcd.endpoints, cluster.prefix, procs
        finally:
            for proc in procs:
                proc.stop()


def _flag(argv: list[str], name: str, default: Path) -> tuple[Path, list[str]]:
    if name not in argv:
        return default, argv
    at = argv.index(name)
    return Path(argv[at + 1]).resolve(), argv[:at] + argv[at + 2 :]


def main() -> None:
    here = Path(__file__).resolve().parents[2]
    servers, rest = _flag(sys.argv[1:], "--servers", here)
    client, rest = _flag(rest, "--client", here)
    sys.path.insert(0, str(here))
    with shards_and_node(servers) as (endpoints, prefix, procs):
        names = ["a", "b", "node"]
        pids = [f"--cpu-pid={n}={p.proc.pid}" for n, p in zip(names, procs, strict=True)]
        print("servers: " + " ".join(p[len("--cpu-pid=") :] for p in pids), flush=True)
        cmd = [
            sys.executable, "-m", "queuebox", "bench", "cluster", "--etcd-endpoints", endpoints,
            "--etcd-prefix", prefix, "--port", str(procs[2].port), "--user", "tester",
            *pids, *rest,
        ]  # fmt: skip
        # The password in the environment, not the command line (which `ps` shows).
        env = {**os.environ, "QUEUEBOX_PASSWORD": "secret"}
        subprocess.run(cmd, cwd=client, check=False, env=env)


if __name__ == "__main__":
    main()
