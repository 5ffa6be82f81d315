"""Example consumer: takes tasks from a tube and acknowledges them, with the bundled client.

Settings (environment): QUEUEBOX_HOST / QUEUEBOX_PORT (default 127.0.0.1:3301),
QUEUEBOX_USER / QUEUEBOX_PASSWORD (log in; unset = guest), EXAMPLE_TUBE (jobs),
EXAMPLE_COUNT (stop after this many tasks; 0 = never). Stops cleanly on
SIGTERM (docker stop) and SIGINT: a task being worked on is acknowledged
first, and a task taken but not acknowledged goes back to the queue when the
connection closes.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from queuebox.clients import blocking

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
    count = int(os.environ.get("EXAMPLE_COUNT", "0"))
    user = os.environ.get("QUEUEBOX_USER") or None
    with blocking.connect(host, port, user, os.environ.get("QUEUEBOX_PASSWORD")) as conn:
        tube = conn.create_tube(tube_name, "fifo", if_not_exists=True)
        done = 0
        while not stopping and (count == 0 or done < count):
            # A short timeout keeps the loop responsive to SIGTERM.
            with tube.taking(timeout=1.0) as task:
                if task is None:
                    continue
                created = task.data.get("created") if isinstance(task.data, dict) else None
                age = f" ({(time.time() - created) * 1000:.1f} ms old)" if created else ""
                print(f"took task {task.id}: {task.data}{age}", flush=True)
                done += 1  # leaving the block acks the task
    print(f"consumer stopped after {done} tasks", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
