"""Example consumer: takes tasks from a tube and acknowledges them, with the bundled client.

Settings (environment): QUEUEBOX_HOST / QUEUEBOX_PORT (default 127.0.0.1:3301),
or QUEUEBOX_ADDRESSES (HOST:PORT,...: a primary and its replicas, or routers),
or QUEUEBOX_ETCD_ENDPOINTS (route over a sharded cluster by itself),
QUEUEBOX_USER / QUEUEBOX_PASSWORD (log in; unset = guest), EXAMPLE_TUBE (jobs),
EXAMPLE_COUNT (stop after this many tasks; 0 = never). Stops cleanly on
SIGTERM (docker stop) and SIGINT: a task being worked on is acknowledged
first, and a task taken but not acknowledged goes back to the queue when the
connection closes. After a take or an ack that fails (a failover) it connects
again, which gives back a task the failed call may have left taken.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from queuebox.clients import QueueboxError, blocking

stopping = False


def stop(signum: int, frame: object) -> None:
    global stopping
    stopping = True


def work_one(tube: blocking.Tube) -> int:
    """Take a task, print it and ack it: 1, or 0 when none came within a second."""
    # A short timeout keeps the loop responsive to SIGTERM.
    with tube.taking(timeout=1.0) as task:
        if task is None:
            return 0
        created = task.data.get("created") if isinstance(task.data, dict) else None
        age = f" ({(time.time() - created) * 1000:.1f} ms old)" if created else ""
        print(f"took task {task.id}: {task.data}{age}", flush=True)
    return 1  # leaving the block acked the task


def connect() -> blocking.Connection:
    return blocking.connect(
        os.environ.get("QUEUEBOX_HOST") or "127.0.0.1",
        int(os.environ.get("QUEUEBOX_PORT") or 3301),
        os.environ.get("QUEUEBOX_USER") or None,
        os.environ.get("QUEUEBOX_PASSWORD"),
        addresses=os.environ.get("QUEUEBOX_ADDRESSES") or None,
        etcd_endpoints=os.environ.get("QUEUEBOX_ETCD_ENDPOINTS") or None,
    )


def main() -> int:
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    tube_name = os.environ.get("EXAMPLE_TUBE", "jobs")
    count = int(os.environ.get("EXAMPLE_COUNT", "0"))
    done = 0
    while not stopping and (count == 0 or done < count):
        try:
            with connect() as conn:
                tube = conn.create_tube(tube_name, "fifo", if_not_exists=True)
                while not stopping and (count == 0 or done < count):
                    done += work_one(tube)
        except QueueboxError as error:
            # A failover: a take or an ack whose outcome is unknown (216) may have
            # left a task taken by this connection; closing it gives that task back.
            print(f"take or ack failed, connecting again: {error}", flush=True)
            time.sleep(0.5)
    print(f"consumer stopped after {done} tasks", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
