"""TLS between the instances of a cluster: a replica follows its primary over
TLS, logged in by its certificate; nodes hold etcd's leader key over https
with a client certificate (etcd's --client-cert-auth). Real processes, real
sockets, certificates made by tests/e2e/certs.py into tmp_path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import tarantool

from tests.e2e.certs import Issued, Pki, make_pki, tarantool_tls
from tests.e2e.client_targets import free_port
from tests.e2e.cluster import wait_for
from tests.e2e.etcdproc import EtcdProc, need_etcd
from tests.e2e.serverproc import ServerProc, StartServer, unique

# The replica logs in as `replicator` by its certificate: no password is given to it.
CLUSTER_TOML = """
[users.tester]
password = "secret"
rights = "all"

[users.replicator]
certificate_only = true
rights = ["replication"]
"""


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path)


def node_flags(pki: Pki, cert: Issued) -> tuple[str, ...]:
    return (
        "--tls-cert", str(cert.cert), "--tls-key", str(cert.key), "--tls-ca", str(pki.ca.cert),
        "--tls-client-auth", "required", "--replication-timeout", "0.25",
    )  # fmt: skip


def total(node: ServerProc, pki: Pki, tube: str) -> int:
    # No schema read: on a replica still applying its bootstrap, the connector's
    # two reads (spaces, then indexes) can straddle a new space and fail.
    conn = tarantool_tls(node.port, pki, pki.tester, fetch_schema=False)
    try:
        return int(conn.call("queue.statistics", [tube]).data[0]["tasks"]["total"])
    except tarantool.DatabaseError:
        return -1  # the tube is not there yet
    finally:
        conn.close()


def state(node: ServerProc, pki: Pki) -> str:
    try:
        conn = tarantool_tls(node.port, pki, pki.tester)
    except tarantool.Error:
        return "DOWN"
    try:
        return str(conn.call("queue.state").data[0])
    finally:
        conn.close()


def put(node: ServerProc, pki: Pki, tube: str, count: int, create: bool = False) -> None:
    conn = tarantool_tls(node.port, pki, pki.tester)
    try:
        if create:
            conn.call("queue.create_tube", [tube, "fifottl"])
        for n in range(count):
            conn.call(f"queue.tube.{tube}:put", [{"n": n}])
    finally:
        conn.close()


def test_a_replica_follows_a_tls_primary(start_server: StartServer, pki: Pki) -> None:
    primary = start_server(*node_flags(pki, pki.server), toml=CLUSTER_TOML)
    tube = unique("tlsrepl")
    put(primary, pki, tube, 50, create=True)
    replicator = pki.ca.issue("replicator", server=True)
    replica = start_server(
        *node_flags(pki, replicator),
        "--replication-source", f"127.0.0.1:{primary.port}",
        toml=CLUSTER_TOML,
    )  # fmt: skip
    wait_for(lambda: total(replica, pki, tube) == 50, what="the replica's bootstrap")
    put(primary, pki, tube, 25)  # the live stream
    wait_for(lambda: total(replica, pki, tube) == 75, what="the live stream")
    assert state(replica, pki) == "INIT"  # a replica that never led: as the module
    assert "user=replicator" in primary.log()


@pytest.fixture
def tls_etcd(tmp_path: Path, pki: Pki) -> Iterator[EtcdProc]:
    need_etcd()
    served = pki.ca.issue("etcd", server=True)
    with EtcdProc(tmp_path / "etcd", tls=(served.cert, served.key, pki.ca.cert)) as proc:
        yield proc


def test_nodes_lead_and_follow_through_etcd_over_tls(
    start_server: StartServer, pki: Pki, tls_etcd: EtcdProc
) -> None:
    assert tls_etcd.endpoints.startswith("https://")
    client = pki.ca.issue("queuebox")  # what the nodes show etcd
    prefix = f"/{unique('tlscluster')}"
    nodes = []
    for name in ("node-a", "node-b"):
        port = free_port()
        cert = pki.ca.issue("replicator", server=True, tag=f"-{name}")
        nodes.append(
            start_server(
                *node_flags(pki, cert),
                "--listen",
                f"127.0.0.1:{port}",
                "--advertise",
                f"127.0.0.1:{port}",
                "--etcd-endpoints",
                tls_etcd.endpoints,
                "--etcd-prefix",
                prefix,
                "--etcd-lease-ttl",
                "2",
                "--etcd-ca",
                str(pki.ca.cert),
                "--etcd-cert",
                str(client.cert),
                "--etcd-key",
                str(client.key),
                toml=CLUSTER_TOML,
            )  # fmt: skip
        )
        if name == "node-a":
            wait_for(lambda: state(nodes[0], pki) == "RUNNING", what="node-a to lead")
    primary, replica = nodes
    wait_for(lambda: "following the primary" in replica.log(), what="node-b to follow")
    tube = unique("tlsetcd")
    put(primary, pki, tube, 20, create=True)
    wait_for(lambda: total(replica, pki, tube) == 20, what="node-b to catch up")
    assert state(replica, pki) == "INIT"
    # etcd refuses a client without a certificate: a node with none cannot start leading.
    lone = start_server(
        *node_flags(pki, pki.server),
        "--etcd-endpoints", tls_etcd.endpoints, "--etcd-prefix", f"/{unique('nocert')}",
        "--etcd-lease-ttl", "2", "--etcd-ca", str(pki.ca.cert),
        toml=CLUSTER_TOML,
    )  # fmt: skip
    wait_for(lambda: "etcd unreachable; staying read-only" in lone.log(), what="the refusal")
    assert state(lone, pki) != "RUNNING"
