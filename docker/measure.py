"""Build the images offline and measure what docs/docker.md and README.md here quote.

Run from the repository root, with a Docker engine, Compose v2, the base image
and the wheelhouse of README.md "Offline build" (etcd-server's .deb included),
and docker/.env (cp docker/queuebox.env.example docker/.env):

    python3 docker/measure.py --base queuebox-base:bookworm --wheelhouse wheelhouse

It builds the three images with `docker build --network none --no-cache` (so
a step that needs the network fails), prints their sizes and the compiled
module count, then brings up the `ha` profile under its own project name, puts
tasks through a client given both addresses, kills the primary (`docker kill
-s KILL`, which the restart policy leaves down), prints how long the replica
took to lead, checks that a put then fails for want of a replica (quorum 1),
starts the old primary again (it follows), and prints how long until a put
was acknowledged and whether every acknowledged task is there. Its
containers and volumes are removed at the end.
The printed lines are the ones the docs quote.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's client, not another installed one

from cluster_check import dotenv  # noqa: E402  (beside this file: docker/)

from queuebox.clients import blocking  # noqa: E402

PROJECT = "queuebox-measure"
IMAGES = (  # tag, Dockerfile, extra build arguments
    ("queuebox:local", "Dockerfile", {}),
    ("queuebox-ha:local", "Dockerfile", {"EXTRAS": "etcd"}),
    ("queuebox-etcd:local", "docker/etcd.Dockerfile", {}),
)
PUTS_BEFORE, PUTS_AFTER = 200, 50
TAKEOVER_LIMIT_S = 120.0  # the wait for the first put after the kill, at most


def run(*args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if check and done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def build(base: str, wheelhouse: str) -> None:
    env = os.environ | {"DOCKER_BUILDKIT": "0"}
    for tag, dockerfile, extra in IMAGES:
        args = {"PYTHON_IMAGE": base, "WHEELHOUSE": wheelhouse, **extra}
        flags = [f for k, v in args.items() for f in ("--build-arg", f"{k}={v}")]
        started = time.monotonic()
        # --no-cache: every step runs, so the time is a whole build's.
        command = ["docker", "build", "--network", "none", "--no-cache", "-f", dockerfile]
        command += [*flags, "-t", tag]
        run(*command, ".", env=env)
        print(f"built {tag} with --network none in {time.monotonic() - started:.0f} s")


def size_mb(image: str) -> float:
    return int(run("docker", "image", "inspect", "--format", "{{.Size}}", image)) / 1e6


def measure_images(base: str) -> None:
    base_mb = size_mb(base)
    print(f"base {base}: {base_mb:.0f} MB")
    for tag, _, _ in IMAGES:
        mb = size_mb(tag)
        print(f"image {tag}: {mb:.0f} MB ({mb - base_mb:.0f} MB over the base)")
    version = run("docker", "run", "--rm", "queuebox:local", "--version").strip()
    modules = re.search(r"compiled: (\d+) modules", version)
    print(f"compiled modules: {modules.group(1) if modules else 'none'} ({version})")


def compose(*args: str, env: dict[str, str]) -> str:
    # `docker compose` (the plugin), else the standalone binary of the same v2.
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=60)
    command = ["docker", "compose"] if plugin.returncode == 0 else ["docker-compose"]
    file = ["-f", "docker/compose.yaml", "-p", PROJECT, "--profile", "ha"]
    return run(*command, *file, *args, env=env)


def container(service: str, env: dict[str, str]) -> str:
    return compose("ps", "-q", service, env=env).strip()


def put_until_acknowledged(tube: blocking.Tube, n: int, deadline: float) -> bool:
    """One put, repeated while it fails (an unknown outcome may put it twice)."""
    while time.monotonic() < deadline:
        try:
            tube.put({"n": n})
            return True
        except Exception as error:  # the old primary gone, no quorum yet: try again
            print(f"  put {n}: {type(error).__name__}: {str(error)[:150]}")
            time.sleep(0.2)  # a pause between retries, not a wait for a state
    return False


def wait_running(address: str, user: str, password: str, deadline: float) -> bool:
    """Poll the instance's queue.state() until it leads (RUNNING)."""
    host, port = address.rsplit(":", 1)
    with blocking.connect(host, int(port), user, password) as conn:
        while time.monotonic() < deadline:
            if conn.state() == "RUNNING":
                return True
            time.sleep(0.1)  # polling the state, bounded by the deadline
    return False


def failover(env: dict[str, str]) -> None:
    settings = dotenv()
    ports = {
        "primary": settings.get("QUEUEBOX_PRIMARY_PUBLISH", "127.0.0.1:3311"),
        "replica": settings.get("QUEUEBOX_REPLICA_PUBLISH", "127.0.0.1:3312"),
    }
    started = time.monotonic()
    compose("up", "-d", "--wait", "primary", "replica", env=env)
    print(f"ha profile up (healthy) in {time.monotonic() - started:.0f} s")
    quorum = env.get("QUEUEBOX_REPLICATION_SYNCHRO_QUORUM", "1")
    print(f"replication_synchro_quorum: {quorum}")
    user, password = settings["QUEUEBOX_USER"], settings["QUEUEBOX_PASSWORD"]
    conn = blocking.connect(addresses=list(ports.values()), user=user, password=password)
    with conn:
        tube = conn.create_tube("measure", "fifo", if_not_exists=True)
        acknowledged = [n for n in range(PUTS_BEFORE) if tube.put({"n": n})]
        leader = next(name for name, addr in ports.items() if addr.endswith(f":{conn.port}"))
        other = "replica" if leader == "primary" else "primary"
        # docker kill: SIGKILL, and the restart policy leaves it down.
        run("docker", "kill", "--signal", "KILL", container(leader, env))
        killed = time.monotonic()
        deadline = killed + TAKEOVER_LIMIT_S
        print(f"docker kill -s KILL {leader!r} after {len(acknowledged)} acknowledged puts")
        if not wait_running(ports[other], user, password, deadline):
            sys.exit(f"{other} did not lead {TAKEOVER_LIMIT_S:.0f} s after the kill")
        print(f"takeover: {other} RUNNING {time.monotonic() - killed:.1f} s after the kill")
        if quorum != "0":
            try:
                tube.put({"n": -1})
                print("a put with no replica following was acknowledged (not expected)")
            except Exception as error:
                print(f"a put with no replica following: {str(error)[:150]}")
            rejoin = time.monotonic()
            compose("up", "-d", "--no-deps", leader, env=env)
            print(f"restarted {leader!r} (it follows {other!r})")
        else:
            rejoin = killed
        if not put_until_acknowledged(tube, PUTS_BEFORE, deadline):
            sys.exit(f"no put acknowledged {TAKEOVER_LIMIT_S:.0f} s after the kill")
        print(f"writes again {time.monotonic() - rejoin:.1f} s after the restart/kill")
        acknowledged.append(PUTS_BEFORE)
        for n in range(PUTS_BEFORE + 1, PUTS_BEFORE + 1 + PUTS_AFTER):
            if put_until_acknowledged(tube, n, deadline):
                acknowledged.append(n)
        seen = set()
        while (task := tube.take(timeout=0)) is not None:
            seen.add(task.data["n"])
        lost = sorted(set(acknowledged) - seen)
        found = len(seen - {-1})  # the put answered 216 may be there too: not counted
        print(f"acknowledged {len(acknowledged)} puts, found {found} tasks, lost {len(lost)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="queuebox-base:bookworm", help="PYTHON_IMAGE")
    parser.add_argument("--wheelhouse", default="wheelhouse", help="WHEELHOUSE")
    parser.add_argument("--skip-build", action="store_true", help="measure the images there are")
    args = parser.parse_args()
    print(time.strftime("measured %Y-%m-%d %H:%M UTC", time.gmtime()))
    if not args.skip_build:
        build(args.base, args.wheelhouse)
    measure_images(args.base)
    env = os.environ | {"PYTHON_IMAGE": args.base, "WHEELHOUSE": args.wheelhouse}
    try:
        failover(env)
    finally:
        compose("down", "-v", "--timeout", "30", env=env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
