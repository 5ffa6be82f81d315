"""The request path, counted: which of the project's files a put crosses.

    python tests/bench/trace_path.py [--show]

Builds a server in process (pure Python, asyncio loop, wal_mode=write, a
temporary data directory), connects a raw IPROTO client from a thread, and
traces (sys.setprofile, the server's thread only) two requests from the
moment the client sends until its reply is read:

- put: `queue.tube.jobs:put` on a fifo tube;
- take woken by a put: a take(5) waits on one connection, a put from another
  wakes it; traced from the put's send until the take's reply.

Prints, for each, the functions entered, the files they live in and the moves
between files (a call from a function of one file into a function of another),
counting the project's own code only (not asyncio, msgpack, the standard
library). `--show` lists the files. Asserts nothing: a map, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import struct
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import msgpack

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
OWN = tuple(str(REPO / part) for part in ("server", "drivers", "storage", "protocol", "queuebox"))


def frame(request_type: int, sync: int, body: dict[int, object]) -> bytes:
    payload = msgpack.packb({0: request_type, 1: sync}) + msgpack.packb(body)
    return b"\xce" + struct.pack(">I", len(payload)) + payload


def call(sync: int, name: str, args: list[Any]) -> bytes:
    return frame(10, sync, {0x22: name, 0x21: args})


def read_reply(sock: socket.socket) -> dict[int, Any]:
    head = b""
    while len(head) < 5:
        head += sock.recv(5 - len(head))
    size = struct.unpack(">I", head[1:5])[0]
    data = b""
    while len(data) < size:
        data += sock.recv(size - len(data))
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    header = next(unpacker)
    body = next(unpacker)
    if header[0] != 0:
        raise RuntimeError(f"error reply: {body}")
    return dict(body)


class Tracer:
    """Counts the project's functions entered and the moves between its files."""

    def __init__(self) -> None:
        self.active = False
        self.functions: set[tuple[str, str]] = set()
        self.files: dict[str, int] = {}
        self.moves = 0

    def reset(self) -> None:
        self.functions.clear()
        self.files.clear()
        self.moves = 0

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if not self.active or event != "call":
            return
        path = frame.f_code.co_filename
        if not path.startswith(OWN):
            return
        self.functions.add((path, frame.f_code.co_qualname))
        self.files[path] = self.files.get(path, 0) + 1
        caller = frame.f_back
        while caller is not None and not caller.f_code.co_filename.startswith(OWN):
            caller = caller.f_back  # through asyncio, msgpack's fallbacks, the stdlib
        if caller is not None and caller.f_code.co_filename != path:
            self.moves += 1


def client(port: int, tracer: Tracer, done: list[tuple[str, dict[str, Any]]]) -> None:
    a = socket.create_connection(("127.0.0.1", port))
    b = socket.create_connection(("127.0.0.1", port))
    for s in (a, b):
        s.recv(128)  # the greeting
    a.sendall(call(1, "queue.create_tube", ["jobs", "fifo"]))
    read_reply(a)
    for sync in range(2, 50):  # warm-up: names resolved, caches filled
        a.sendall(call(sync, "queue.tube.jobs:put", [sync]))
        read_reply(a)
        a.sendall(call(sync + 1000, "queue.tube.jobs:take", [0]))
        read_reply(a)
    a.sendall(call(60, "queue.tube.jobs:take", [0]))
    while read_reply(a).get(0x30):
        a.sendall(call(60, "queue.tube.jobs:take", [0]))

    tracer.reset()
    tracer.active = True
    a.sendall(call(100, "queue.tube.jobs:put", ["payload"]))
    read_reply(a)
    tracer.active = False
    done.append(("put", snapshot(tracer)))
    a.sendall(call(200, "queue.tube.jobs:take", [0]))
    task_id = read_reply(a)[0x30][0][0]
    a.sendall(call(201, "queue.tube.jobs:ack", [task_id]))
    read_reply(a)

    b.sendall(call(101, "queue.tube.jobs:take", [5]))
    threading.Event().wait(0.3)  # the take is waiting
    tracer.reset()
    tracer.active = True
    a.sendall(call(102, "queue.tube.jobs:put", ["wake"]))
    read_reply(b)
    tracer.active = False
    read_reply(a)
    done.append(("take woken by a put", snapshot(tracer)))
    a.close()
    b.close()


def snapshot(tracer: Tracer) -> dict[str, Any]:
    return {
        "functions": len(tracer.functions),
        "files": dict(tracer.files),
        "moves": tracer.moves,
    }


async def main(show: bool) -> None:
    from queuebox.server.core.app import App
    from queuebox.server.net.listener import Listener
    from queuebox.server.settings.config import Config
    from queuebox.server.start.build import build_server

    with tempfile.TemporaryDirectory() as data_dir:
        app = App(Config(data_dir=data_dir, listen_port=0, wal_mode="write"))
        listener = Listener(app)
        _, port = await listener.bind_main()
        await build_server(app)
        await listener.start()
        tracer = Tracer()
        sys.setprofile(tracer)
        done: list[tuple[str, dict[str, Any]]] = []
        thread = threading.Thread(target=client, args=(port, tracer, done))
        thread.start()
        await asyncio.get_running_loop().run_in_executor(None, thread.join)
        sys.setprofile(None)
        await listener.shutdown(1.0)
    for what, seen in done:
        files = seen["files"]
        print(f"{what}: {seen['functions']} functions, {len(files)} files, {seen['moves']} moves")
        if show:
            for path in sorted(files):
                print(f"    {Path(path).relative_to(REPO)}  ({files[path]} calls)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="list the files crossed")
    asyncio.run(main(parser.parse_args().show))
