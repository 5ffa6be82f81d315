"""Example producer: puts a task into a tube a few times a second, with the bundled client.

Settings (environment): QUEUEBOX_HOST / QUEUEBOX_PORT (default 127.0.0.1:3301),
or QUEUEBOX_ADDRESSES (HOST:PORT,...: a primary and its replicas, or routers),
or QUEUEBOX_ETCD_ENDPOINTS (route over a sharded cluster by itself),
QUEUEBOX_USER / QUEUEBOX_PASSWORD (log in; unset = guest), EXAMPLE_TUBE (jobs),
EXAMPLE_RATE (puts per second, 5; 0 = no pause), EXAMPLE_COUNT (stop after this many; 0 = never).
A put that fails (a failover, no primary for a moment) is tried again with the
same key. Stops cleanly on SIGTERM (docker stop) and SIGINT.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid

from queuebox.clients import QueueboxError, blocking

stopping = False


def stop(signum: int, frame: object) -> None:
    global stopping
    stopping = True


def main() -> int:
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    host = os.environ.get("QUEUEBOX_HOST") or "127.0.0.1"
    port = int(os.environ.get("QUEUEBOX_PORT") or 3301)
    tube_name = os.environ.get("EXAMPLE_TUBE", "jobs")
    rate = float(os.environ.get("EXAMPLE_RATE", "5"))
    interval = 1.0 / rate if rate > 0 else 0.0
    count = int(os.environ.get("EXAMPLE_COUNT", "0"))
    user = os.environ.get("QUEUEBOX_USER") or None
    with blocking.connect(
        host,
        port,
        user,
        os.environ.get("QUEUEBOX_PASSWORD"),
        addresses=os.environ.get("QUEUEBOX_ADDRESSES") or None,
        etcd_endpoints=os.environ.get("QUEUEBOX_ETCD_ENDPOINTS") or None,
    ) as conn:
        # The client reconnects by itself if the server restarts.
        tube = conn.create_tube(tube_name, "fifo", if_not_exists=True)
        sent = 0
        run = uuid.uuid4().hex
        while not stopping and (count == 0 or sent < count):
            try:
                # Its own key per task, so putting it again after an error never
                # makes a second task (docs/workers.md, "Exactly-once puts").
                task = tube.put({"n": sent, "created": time.time()}, key=f"{run}-{sent}")
            except QueueboxError as error:  # e.g. a failover: no primary for a moment
                print(f"put n={sent} failed, trying again: {error}", flush=True)
                time.sleep(0.5)
                continue
            sent += 1
            print(f"put task {task.id} (n={sent - 1})", flush=True)
            time.sleep(interval)
    print(f"producer stopped after {sent} tasks", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
