"""server/replication/leader.py's reading of `etcd_endpoints`: the part that needs no etcd."""

from __future__ import annotations

import pytest

from queuebox.server.replication.leader import LeaderError, parse_endpoints


def test_endpoints_are_read_in_order_with_the_default_port() -> None:
    text = "http://10.0.0.1:2379, http://etcd-b:12379,http://etcd-c"
    assert parse_endpoints(text) == [("10.0.0.1", 2379), ("etcd-b", 12379), ("etcd-c", 2379)]


def test_https_endpoints_are_read_too() -> None:
    assert parse_endpoints("https://etcd-a:2379,https://etcd-b") == [
        ("etcd-a", 2379), ("etcd-b", 2379)
    ]  # fmt: skip


@pytest.mark.parametrize(
    "text",
    ["", " , ", "ftp://etcd:2379", "http://:2379", "http://e:99999", "http://a,https://b"],
)
def test_unusable_endpoints_raise_one_line(text: str) -> None:
    with pytest.raises(LeaderError) as raised:
        parse_endpoints(text)
    assert "\n" not in str(raised.value) and str(raised.value).startswith("etcd endpoint")
