"""etcd over TLS: aetcd 1.0's `Client.connect` opens only plaintext gRPC channels.

Owns: `EtcdTls` (the CA etcd's certificate is checked with, and the client
certificate and key shown to etcd: `etcd_ca`, `etcd_cert`, `etcd_key`), read
into gRPC credentials each time a client is made, and `TlsClient`, an
aetcd.Client whose channel is a gRPC secure channel. Must not know the
leadership key or what etcd is asked (leader.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aetcd
import grpc
from aetcd import rpc, watcher


@dataclass(frozen=True)
class EtcdTls:
    ca: str = ""  # "": the system's CAs
    cert: str = ""
    key: str = ""

    def credentials(self) -> grpc.ChannelCredentials:
        """OSError when a file cannot be read (the caller says which etcd call failed)."""

        def read(path: str) -> bytes | None:
            if not path:
                return None
            with open(path, "rb") as stream:
                return stream.read()

        return grpc.ssl_channel_credentials(read(self.ca), read(self.key), read(self.cert))


class TlsClient(aetcd.Client):  # type: ignore[misc]
    """aetcd's client on a secure channel; etcd's client certificate is the login
    (no username and password here)."""

    def __init__(self, host: str, port: int, tls: EtcdTls, **kwargs: Any) -> None:
        super().__init__(host, port, **kwargs)
        self._credentials = tls.credentials()

    async def connect(self) -> None:
        if self._connected.is_set():
            return
        # What aetcd's own connect sets up once its channel is open.
        target = f"{self._host}:{self._port}"
        self.channel = rpc.secure_channel(target, self._credentials, self._options.items())
        self.kvstub = rpc.KVStub(self.channel)
        self.clusterstub = rpc.ClusterStub(self.channel)
        self.leasestub = rpc.LeaseStub(self.channel)
        self.maintenancestub = rpc.MaintenanceStub(self.channel)
        self._watcher = watcher.Watcher(
            rpc.WatchStub(self.channel), timeout=self._timeout, metadata=self.metadata
        )
        self._connected.set()
