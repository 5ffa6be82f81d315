"""Load clients that record every operation they invoke, and what came of it.

Owns: `Op` (one record of the history the checker reads) and `Load`, a few
threads with tarantool-python connections through the node proxies, each
putting tasks with a unique id as data, and after every other put taking
one and acking it.
A client stays on its node while the node answers; a refusal or a lost
connection sends it to the next node (no retry of the same operation: a
new put has a new id). Must not judge the history (checker.py).

Outcomes:
    ok       the server said it was done
    refused  ER_READONLY: refused before it was applied (the server's promise)
    unknown  no answer (connection lost, timeout) or an error that says the
             outcome is unknown (UNKNOWN_CODES: the quorum's timeout or abandoned wait)
    error    any other error reply, with its code (not a promise either way)
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tarantool
from tarantool.error import NetworkWarning

from tests.fault.cluster import connect

ER_READONLY = 7
REFUSED_CODES = frozenset({ER_READONLY})
# The quorum timeout (194 before issue 24, 216 as Tarantool numbers it since)
# and ER_QUORUM_WAIT (222: a quorum wait abandoned, e.g. the lease lost).
UNKNOWN_CODES = frozenset({194, 216, 222})
OPS_PER_CLIENT = 200_000  # a bound, never reached in a round
CALL_TIMEOUT_S = 3.0  # above the synchro timeout: a quorum wait answers before it


@dataclass(frozen=True)
class Op:
    client: str
    node: str
    kind: str  # put | take | ack
    uid: str | None  # the task's unique id (its data); None: a take that got nothing
    invoke: float  # time.monotonic() before the request was sent
    complete: float  # ... after its answer (or its failure) came
    outcome: str  # ok | refused | unknown | error
    code: int | None = None
    task_id: int | None = None
    detail: str = ""

    def show(self) -> str:
        code = f" code={self.code}" if self.code is not None else ""
        task = f" id={self.task_id}" if self.task_id is not None else ""
        detail = f" ({self.detail})" if self.detail else ""
        return (
            f"{self.client}@{self.node} {self.kind} {self.uid}{task} "
            f"[{self.invoke:.3f}, {self.complete:.3f}] {self.outcome}{code}{detail}"
        )


def classify(error: BaseException) -> tuple[str, int | None]:
    """(outcome, code) of a failed call."""
    if isinstance(error, tarantool.NetworkError) or not isinstance(error, tarantool.DatabaseError):
        return "unknown", None
    code = error.args[0] if error.args and isinstance(error.args[0], int) else None
    if code in REFUSED_CODES:
        return "refused", code
    if code in UNKNOWN_CODES:
        return "unknown", code
    return "error", code


class Load:
    def __init__(self, ports: dict[str, int], tube: str, clients: int = 3) -> None:
        self.ports = ports
        self.tube = tube
        self.ops: list[Op] = []  # list.append is atomic: every client appends here
        self.stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._client, args=(f"c{k}", k), daemon=True)
            for k in range(clients)
        ]

    def start(self) -> None:
        # tarantool-python warns when it reconnects by itself between calls;
        # this harness records that as an unknown outcome instead.
        warnings.filterwarnings("ignore", category=NetworkWarning)
        for thread in self._threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(CALL_TIMEOUT_S * 3 + 10)

    def _client(self, name: str, first: int) -> None:
        nodes = list(self.ports)
        at = first % len(nodes)
        conn: Any = None
        for seq in range(OPS_PER_CLIENT):
            if self.stop.is_set():
                break
            node = nodes[at]
            if conn is None:
                conn = self._connect(node)
            if conn is not None and self._round_trip(conn, name, node, f"{name}-{seq}", seq):
                continue
            if conn is not None:
                conn.close()
                conn = None
            at = (at + 1) % len(nodes)  # refused or cut off: try the next node
            self.stop.wait(0.05)
        if conn is not None:
            conn.close()

    def _connect(self, node: str) -> Any:
        try:
            return connect(self.ports[node], CALL_TIMEOUT_S)
        except (tarantool.Error, OSError):
            return None

    def _round_trip(self, conn: Any, client: str, node: str, uid: str, seq: int) -> bool:
        """put, and every other time take and ack; False once an answer says to
        go elsewhere. Half the puts stay queued: a lost write shows as a task
        missing at the end, not only as history nobody looks at again."""
        tube = self.tube
        call = self._recorder(conn, client, node)
        put = call("put", uid, f"queue.tube.{tube}:put", [uid])
        if put.outcome != "ok":
            return put.outcome == "error"
        if seq % 2 == 0:
            return True
        take = call("take", None, f"queue.tube.{tube}:take", [0])
        if take.outcome != "ok":
            return take.outcome == "error"
        if take.uid is None:
            return True
        ack = call("ack", take.uid, f"queue.tube.{tube}:ack", [take.task_id])
        return ack.outcome in ("ok", "error")

    def _recorder(self, conn: Any, client: str, node: str) -> Callable[..., Op]:
        def call(kind: str, uid: str | None, name: str, args: list[Any]) -> Op:
            invoke = time.monotonic()
            try:
                data = conn.call(name, args).data
            except Exception as e:  # noqa: BLE001 -- every failure is an outcome
                outcome, code = classify(e)
                task_id = args[0] if kind == "ack" else None
                detail = " ".join(str(e).split())[:120]
                op = Op(client, node, kind, uid, invoke, time.monotonic(), outcome, code,
                        task_id, detail)  # fmt: skip
            else:
                task = data[0] if data and data[0] else None
                op = Op(client, node, kind, str(task[2]) if task else uid, invoke,
                        time.monotonic(), "ok", None, task[0] if task else None)  # fmt: skip
            self.ops.append(op)
            return op

        return call
