"""Example producer: puts a task into a tube a few times a second, with the bundled client.

Settings (environment): QUEUEBOX_HOST / QUEUEBOX_PORT (default 127.0.0.1:3301),
QUEUEBOX_USER / QUEUEBOX_PASSWORD (log in; unset = guest), EXAMPLE_TUBE (jobs),
EXAMPLE_RATE (puts per second, 5), EXAMPLE_COUNT (stop after this many; 0 = never).
Stops cleanly on SIGTERM (docker stop) and SIGINT.
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
    interval = 1.0 / float(os.environ.get("EXAMPLE_RATE", "5"))
    count = int(os.environ.get("EXAMPLE_COUNT", "0"))
    user = os.environ.get("QUEUEBOX_USER") or None
    with blocking.connect(host, port, user, os.environ.get("QUEUEBOX_PASSWORD")) as conn:
        # The client reconnects by itself if the server restarts.
        tube = conn.create_tube(tube_name, "fifo", if_not_exists=True)
        sent = 0
        while not stopping and (count == 0 or sent < count):
            task = tube.put({"n": sent, "created": time.time()})
            sent += 1
            print(f"put task {task.id} (n={sent - 1})", flush=True)
            time.sleep(interval)
    print(f"producer stopped after {sent} tasks", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
