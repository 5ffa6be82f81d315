"""A router's default name (server/route/router.py): its listen address, with
the host's name where that address names every interface, so the routers of one
compose file (all on 0.0.0.0:3301) are told apart on the shards' consoles."""

from __future__ import annotations

import socket

import pytest

from queuebox.server.route.router import default_name


@pytest.mark.parametrize("listen", ["0.0.0.0:3301", ":3301", "[::]:3301"])
def test_every_interface_is_named_by_the_host(listen: str) -> None:
    assert default_name(listen) == f"{socket.gethostname()}:3301"


def test_an_address_names_itself() -> None:
    assert default_name("10.0.0.7:3311") == "10.0.0.7:3311"
