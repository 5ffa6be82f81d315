"""Which calls the benchmark makes: the modern tube API or the legacy one.

Owns: `ApiSpec` (a picklable description: API flavour, namespace, tube,
legacy space, payload), the request templates built from it in each worker,
how a take reply is read (task id, payload), and the setup / statistics /
cleanup calls made once per run over a control connection. Modern calls are
`<ns>.tube.<tube>:put|take|ack`; legacy ones `<ns>.put(space, tube, delay,
ttl, ttr, pri, data)`, `<ns>.take(space, tube, timeout)`, `<ns>.ack(space, id)`.
Must not loop, time or count anything.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from queuebox import protocol

from .conn import BenchConnection, BenchError
from .frames import (
    ID_SENTINEL,
    LEGACY_ID_SENTINEL,
    STAMP_SENTINEL,
    Template,
    call_template,
    payload,
)

MODERN = "modern"
LEGACY = "legacy"
ABANDON_TRIES = 30  # 0.1 s apart: the killed workers' connections close meanwhile


@dataclass(frozen=True)
class ApiSpec:
    flavour: str = MODERN
    namespace: str = "queue"
    tube: str = "bench"
    tube_type: str = "fifo"
    storage_mode: str | None = None  # utube only: "default" or "ready_buffer"
    legacy_space: int = 0
    payload_size: int = 64
    stamped: bool = False  # payload starts with the send time (end-to-end latency)

    @property
    def legacy(self) -> bool:
        return self.flavour == LEGACY

    def _method(self, name: str) -> str:
        if self.legacy:
            return f"{self.namespace}.{name}"
        return f"{self.namespace}.tube.{self.tube}:{name}"

    # --- templates, built in the worker that uses them ---

    def put_template(self, utube: str | None = None) -> Template:
        data = payload(self.payload_size, self.stamped)
        slot = STAMP_SENTINEL if self.stamped else None
        if self.legacy:
            args: list[Any] = [self.legacy_space, self.tube, 0, 0, 0, 0, data]
        elif utube is not None:
            args = [data, {"utube": utube}]
        else:
            args = [data]
        return call_template(self._method("put"), args, slot)

    def take_template(self, timeout: float) -> Template:
        if self.legacy:
            return call_template(self._method("take"), [self.legacy_space, self.tube, timeout])
        return call_template(self._method("take"), [timeout])

    def ack_template(self) -> Template:
        if self.legacy:
            args: list[Any] = [self.legacy_space, LEGACY_ID_SENTINEL]
            return call_template(self._method("ack"), args, LEGACY_ID_SENTINEL)
        return call_template(self._method("ack"), [ID_SENTINEL], ID_SENTINEL)

    def encode_ack(self, sync: int, task_id: Any) -> bytes:
        """An ack for an id that does not fit the template's slot."""
        args = [self.legacy_space, task_id] if self.legacy else [task_id]
        return protocol.encode_call(sync, self._method("ack"), args)

    def read_task(self, data: Any) -> tuple[Any, Any] | None:
        """(task id, payload) of a take reply's DATA, or None when nothing was taken."""
        if not data or not data[0]:
            return None
        task = data[0]
        return task[0], task[3 if self.legacy else 2]

    # --- once per run, over a control connection ---

    async def setup(self, conn: BenchConnection) -> None:
        """Create the tube the run uses (anew if it exists; legacy: empty it)."""
        if self.legacy:
            await _call(conn, f"{self.namespace}.truncate", [self.legacy_space, self.tube])
            return
        exists = await _call(conn, f"{self.namespace}.tube", [self.tube])
        if exists and exists[0] is True:
            # Dropped, not truncated: a leftover tube may have another type or
            # storage mode than this run asks for.
            await _call(conn, self._method("drop"), [])
        opts: dict[str, Any] = {"if_not_exists": True}
        if self.storage_mode:
            opts["storage_mode"] = self.storage_mode
        # Over CALL, create_tube answers an error even when it worked (it returns
        # the tube object, which cannot be serialised): check the tube instead.
        name = f"{self.namespace}.create_tube"
        await conn.request(
            lambda s: protocol.encode_call(s, name, [self.tube, self.tube_type, opts])
        )
        exists = await _call(conn, f"{self.namespace}.tube", [self.tube])
        if not exists or exists[0] is not True:
            raise BenchError(f"could not create tube {self.tube!r} ({self.tube_type})")

    async def statistics(self, conn: BenchConnection) -> Any:
        """The server's statistics of the tube (legacy: the flat list as a dict)."""
        if self.legacy:
            flat = await _call(conn, f"{self.namespace}.statistics", [self.legacy_space, self.tube])
            items = flat[0] if flat and isinstance(flat[0], list) else flat
            return dict(zip(items[::2], items[1::2], strict=False))
        stats = await _call(conn, f"{self.namespace}.statistics", [self.tube])
        return stats[0] if stats else None

    async def abandon(self, conn: BenchConnection) -> None:
        """An interrupted run: give back what killed workers held, then clean up. Their
        connections may still be closing, so the taken tasks are released first."""
        for _ in range(ABANDON_TRIES):
            try:
                if not self.legacy:
                    await _call(conn, self._method("release_all"), [])
                    await _call(conn, self._method("truncate"), [])
                await self.cleanup(conn)
                return
            except BenchError:  # a worker's waiting take not closed yet: a moment more
                await asyncio.sleep(0.1)
        await self.cleanup(conn)

    async def cleanup(self, conn: BenchConnection) -> None:
        if self.legacy:
            await _call(conn, f"{self.namespace}.truncate", [self.legacy_space, self.tube])
        else:
            await _call(conn, self._method("drop"), [])


async def _call(conn: BenchConnection, name: str, args: list[Any]) -> Any:
    reply = await conn.request(lambda sync: protocol.encode_call(sync, name, args))
    if not reply.ok:
        raise BenchError(f"{name}: {reply.error_message}")
    return reply.data
