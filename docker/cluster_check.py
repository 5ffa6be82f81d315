"""Bring the compose `cluster` profile up and check it end to end, then take it down.

Run from the repository root, with a Docker engine, Compose v2 and docker/.env
(cp docker/queuebox.env.example docker/.env; for an offline build, with the
base image and the wheelhouse of README.md "Offline build" named in it):

    python3 docker/cluster_check.py [--tasks 1000] [--failover-tasks 600]

Needs nothing but Python's standard library on the host: every client runs in a
container of the cluster's own image on the compose network. Under its own
project name (`queuebox-cluster-check`), it

1. builds the images of the profile (`compose build`) and prints their sizes;
2. brings the profile up (`up -d --wait`) and prints how long until every
   service was healthy, and each one's state;
3. runs README.md's five-minute producer and worker (its two code blocks, the
   address and login put in) through both routers: 10 tasks, 9 acked, 1 buried;
4. runs docker/examples' producer and consumer (`--tasks` each) through the
   routers, then through the self-routing client (etcd), and counts that every
   task put was taken and acknowledged, per shard too;
5. stops shard a's primary (`compose stop`) while the producer and consumer
   run through the routers, prints how long until its replica led (as the
   routers see it), starts the stopped node again (it follows: with
   synchronous replication a shard writes only with a replica following), and
   counts that every task put was taken, none lost;
6. takes everything down, volumes too (`down -v`), unless --keep.

It exits 1 at the first check that fails. The printed lines are the ones
docker/README.md and docs/cluster.md quote.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "queuebox-cluster-check"
NETWORK = f"{PROJECT}_default"
IMAGE = "queuebox-ha:local"  # the shards' and routers' image; the clients run in it too
ROUTERS = "router-1:3301,router-2:3301"
ETCD = "http://etcd:2379"
# What `--profile cluster up` starts: the profile's services and the default server.
SERVICES = {"etcd", "shard-a-1", "shard-a-2", "shard-b-1", "shard-b-2", "router-1", "router-2"}
SERVICES |= {"queuebox"}
DEFAULT_BASE = "python:3.11-slim-bookworm"  # compose.yaml's PYTHON_IMAGE default
WAIT_S = 180.0  # every wait for a state is bounded by this


class CheckFailed(Exception):
    pass


def run(
    *args: str, check: bool = True, timeout: float = 900, env: dict[str, str] | None = None
) -> str:
    done = subprocess.run(
        args, cwd=ROOT, env=os.environ | (env or {}), capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    if check and done.returncode != 0:
        raise CheckFailed(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def compose_command() -> list[str]:
    # `docker compose` (the plugin), else the standalone binary of the same v2.
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=60)
    command = ["docker", "compose"] if plugin.returncode == 0 else ["docker-compose"]
    return [*command, "-f", "docker/compose.yaml", "-p", PROJECT, "--profile", "cluster"]


COMPOSE: list[str] = []


def compose(*args: str, check: bool = True, env: dict[str, str] | None = None) -> str:
    return run(*COMPOSE, *args, check=check, env=env)


def dotenv() -> dict[str, str]:
    path = ROOT / "docker" / ".env"
    if not path.is_file():
        sys.exit("docker/.env is missing: cp docker/queuebox.env.example docker/.env")
    lines = path.read_text().splitlines()
    return dict(ln.split("=", 1) for ln in lines if re.match(r"^[A-Z_]+=", ln))


def client(name: str, env: dict[str, str], *command: str, app: Path, detach: bool = False) -> str:
    """A client container on the cluster's network: docker/examples at /examples,
    `app` (README.md's code) at /app, the .env login in its environment."""
    flags = ["--network", NETWORK, "--env-file", "docker/.env", "--no-healthcheck"]
    flags += ["-v", f"{ROOT / 'docker' / 'examples'}:/examples:ro", "-v", f"{app}:/app:ro"]
    flags += ["-w", "/app", "--name", f"{PROJECT}-{name}", "--entrypoint", command[0]]
    flags += [f for k, v in env.items() for f in ("-e", f"{k}={v}")]
    mode = ["-d"] if detach else []
    return run("docker", "run", *mode, *flags, IMAGE, *command[1:], timeout=WAIT_S)


def logs_of(name: str) -> str:
    """A client container's output, stdout and stderr (where logging writes) together."""
    done = subprocess.run(
        ["docker", "logs", f"{PROJECT}-{name}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
    )  # fmt: skip
    return done.stdout


def remove_client(name: str) -> str:
    logs = logs_of(name)
    run("docker", "rm", "-f", "-v", f"{PROJECT}-{name}", check=False)
    return logs


def wait_exit(name: str) -> tuple[int, str]:
    code = run("docker", "wait", f"{PROJECT}-{name}", timeout=WAIT_S).strip()
    return int(code), remove_client(name)


def cli(*args: str) -> Any:
    """`queuebox ARGS --json` in router-1's container: through that router."""
    return json.loads(compose("exec", "-T", "router-1", "queuebox", *args, "--json"))


def shards() -> dict[str, str | None]:
    listed = cli("shard", "list", "--etcd-endpoints", ETCD)
    return {s["name"]: s["primary"] for s in listed["shards"]}


def tasks_left(tube: str) -> dict[str, int]:
    return cli("stats", tube)["tasks"]


def wait_for(what: str, probe: Any, limit: float = WAIT_S) -> float:
    """Poll `probe()` until it is true; the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        try:
            if probe():
                return time.monotonic() - started
        except CheckFailed:
            pass  # a call refused while the cluster moves: asked again
        time.sleep(0.5)  # polling a state, bounded by `limit`
    raise CheckFailed(f"{what}: not within {limit:.0f} s")


def build() -> None:
    started = time.monotonic()
    # One build at a time: six services share queuebox-ha:local, and the first
    # build makes the others cache hits instead of six builds racing.
    compose("build", env={"COMPOSE_PARALLEL_LIMIT": "1"})
    print(f"built the cluster profile's images in {time.monotonic() - started:.0f} s")


def sizes(base: str) -> None:
    def mb(image: str) -> float:
        return int(run("docker", "image", "inspect", "--format", "{{.Size}}", image)) / 1e6

    base_mb = mb(base)
    print(f"base {base}: {base_mb:.0f} MB")
    for image in (IMAGE, "queuebox-etcd:local"):
        print(f"image {image}: {mb(image):.0f} MB ({mb(image) - base_mb:.0f} MB over the base)")


def states() -> dict[str, str]:
    """Each service's state and health, as `compose ps` shows them."""
    found = {}
    for line in compose("ps", "--all", "--format", "json").splitlines():
        for service in json.loads(line) if line.startswith("[") else [json.loads(line)]:
            found[service["Service"]] = f"{service['State']} {service.get('Health', '')}".strip()
    return found


def all_healthy(found: dict[str, str]) -> bool:
    return set(found) == SERVICES and all(v == "running healthy" for v in found.values())


def up() -> None:
    started = time.monotonic()
    compose("up", "-d", "--wait", "--wait-timeout", str(int(WAIT_S)), check=False)
    print(f"cluster profile up in {time.monotonic() - started:.0f} s")
    found = states()
    for name, state in sorted(found.items()):
        print(f"  {name}: {state}")
    if not all_healthy(found):
        raise CheckFailed(f"not every service of the profile is running healthy: {found}")
    print(f"shards (primary as etcd says): {shards()}")
    pong = compose("exec", "-T", "router-1", "queuebox", "ping", "--etcd-endpoints", ETCD)
    print(f"queuebox ping --etcd-endpoints (every shard's primary): {pong.strip()}")


def readme_code(app: Path, env: dict[str, str]) -> None:
    """README.md's producer.py and worker.py, the address and the login put in."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(# (producer|worker)\.py\n.*?)```", readme, re.S)
    code = {name: text for text, name in blocks}
    if set(code) != {"producer", "worker"}:
        raise CheckFailed("README.md: no `# producer.py` and `# worker.py` blocks")
    login = 'addresses="{}", user="{}", password="{}"'.format(
        ROUTERS, env["QUEUEBOX_USER"], env["QUEUEBOX_PASSWORD"]
    )
    producer = code["producer"].replace('"127.0.0.1", 3301', login)
    if producer == code["producer"]:
        raise CheckFailed('README.md producer.py: no blocking.connect("127.0.0.1", 3301)')
    (app / "producer.py").write_text(producer)
    (app / "worker.py").write_text(code["worker"])
    for path in (app, app / "producer.py", app / "worker.py"):
        path.chmod(0o755 if path.is_dir() else 0o644)  # the image's user reads them


def readme(app: Path, env: dict[str, str]) -> None:
    readme_code(app, env)
    out = client("readme-producer", {}, "python", "producer.py", app=app)
    remove_client("readme-producer")
    print(f"README producer.py through the routers: {out.strip()}")
    if out.strip() != "queued 10 tasks":
        raise CheckFailed(f"README producer: {out!r}")
    # `queuebox worker` reads the addresses and the login from the environment.
    client(
        "readme-worker",
        {"QUEUEBOX_ADDRESSES": ROUTERS},
        "queuebox",
        "worker",
        "worker:resize",
        app=app,
        detach=True,
    )
    took = wait_for(
        "README worker: 9 acked, 1 buried",
        lambda: _settled(tasks_left("images"), buried=1),
    )
    logs = remove_client("readme-worker")
    resized = len(re.findall(r"resized img\d+\.png", logs))
    failed = len(re.findall(r"img0\.png has no width", logs))
    print(
        f"README worker through the routers: {resized} resized, img0.png failed "
        f"{failed} times and was buried, in {took:.1f} s; stats: {tasks_left('images')}"
    )
    if resized != 9:
        raise CheckFailed(f"README worker resized {resized}, not 9:\n{logs}")


def _settled(tasks: dict[str, int], buried: int = 0) -> bool:
    busy = ("ready", "taken", "delayed")
    return all(tasks.get(k, 0) == 0 for k in busy) and tasks.get("buried", 0) == buried


def taken_numbers(logs: str) -> list[int]:
    return [int(n) for n in re.findall(r"took task \d+: \{'n': (\d+)", logs)]


def examples(tube: str, how: str, env: dict[str, str], n: int, app: Path) -> None:
    """docker/examples' producer and consumer, n tasks each, counted."""
    settings = {"EXAMPLE_TUBE": tube, "EXAMPLE_COUNT": str(n), "EXAMPLE_RATE": "0", **env}
    started = time.monotonic()
    client(f"{tube}-consumer", settings, "python", "/examples/consumer.py", app=app, detach=True)
    client(f"{tube}-producer", settings, "python", "/examples/producer.py", app=app, detach=True)
    put_code, put_logs = wait_exit(f"{tube}-producer")
    took_code, took_logs = wait_exit(f"{tube}-consumer")
    seconds = time.monotonic() - started
    ids = [int(i) for i in re.findall(r"put task (\d+) ", put_logs)]
    per_shard = {k: sum(1 for i in ids if i % 1024 == k) for k in sorted({i % 1024 for i in ids})}
    numbers = taken_numbers(took_logs)
    print(
        f"examples through {how}: put {len(ids)} (exit {put_code}), took and acked "
        f"{len(numbers)} (exit {took_code}) in {seconds:.1f} s; puts per shard number "
        f"{per_shard}; stats {tasks_left(tube)}"
    )
    if sorted(numbers) != list(range(n)) or len(ids) != n or put_code or took_code:
        raise CheckFailed(f"examples through {how}: {put_logs[-2000:]}\n{took_logs[-2000:]}")


def failover(env: dict[str, str], n: int, app: Path) -> None:
    """Shard a's primary stopped while tasks flow through the routers."""
    tube = "failover"
    settings = {"EXAMPLE_TUBE": tube, "QUEUEBOX_ADDRESSES": ROUTERS}
    client(
        "failover-consumer",
        {**settings, "EXAMPLE_COUNT": "0"},
        "python",
        "/examples/consumer.py",
        app=app,
        detach=True,
    )
    client(
        "failover-producer",
        {**settings, "EXAMPLE_COUNT": str(n), "EXAMPLE_RATE": "50"},
        "python",
        "/examples/producer.py",
        app=app,
        detach=True,
    )
    wait_for("a quarter of the tasks put", lambda: _count_puts() >= n // 4)
    old = shards()["a"]
    if old is None:
        raise CheckFailed("shard a has no primary before the stop")
    service = old.rsplit(":", 1)[0]
    stopped_at = time.monotonic()
    compose("stop", service)
    print(f"stopped {service} (shard a's primary) after {_count_puts()} of {n} puts")
    took = wait_for("shard a's replica leads", lambda: shards()["a"] not in (None, old))
    print(f"shard a's primary is now {shards()['a']}, {took:.1f} s after the stop")
    compose("start", service)
    print(f"started {service} again {time.monotonic() - stopped_at:.1f} s after the stop")
    wait_for("every service healthy again", lambda: all_healthy(states()))
    print(f"every service healthy again {time.monotonic() - stopped_at:.1f} s after the stop")
    code, put_logs = wait_exit("failover-producer")
    retried = len(re.findall(r"failed, trying again", put_logs))
    wait_for("every failover task taken", lambda: _settled(tasks_left(tube)))
    time.sleep(1.5)  # the consumer prints a task before it acks it: let the last one print
    logs = remove_client("failover-consumer")
    numbers = taken_numbers(logs)
    missing = sorted(set(range(n)) - set(numbers))
    print(
        f"failover: put {n} (exit {code}, {retried} puts tried again), took and acked "
        f"{len(set(numbers))} distinct ({len(numbers) - len(set(numbers))} taken twice, "
        f"the consumer connected again {logs.count('connecting again')} times), "
        f"lost {len(missing)}; {time.monotonic() - stopped_at:.1f} s from the stop to "
        f"the last ack; stats {tasks_left(tube)}"
    )
    if missing or code:
        raise CheckFailed(f"failover: missing {missing[:20]}\n{put_logs[-3000:]}")


def _count_puts() -> int:
    return len(re.findall(r"^put task ", logs_of("failover-producer"), re.M))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000, help="tasks per examples run")
    parser.add_argument("--failover-tasks", type=int, default=600, help="tasks of the failover")
    parser.add_argument("--skip-build", action="store_true", help="use the images there are")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    args = parser.parse_args()
    COMPOSE.extend(compose_command())
    env = dotenv()
    print(time.strftime("checked %Y-%m-%d %H:%M UTC", time.gmtime()))
    app = Path(tempfile.mkdtemp(prefix="queuebox-cluster-check-"))
    try:
        if not args.skip_build:
            build()
        sizes(os.environ.get("PYTHON_IMAGE") or env.get("PYTHON_IMAGE") or DEFAULT_BASE)
        up()
        readme(app, env)
        examples("jobs", "the routers", {"QUEUEBOX_ADDRESSES": ROUTERS}, args.tasks, app)
        examples(
            "direct", "the self-routing client", {"QUEUEBOX_ETCD_ENDPOINTS": ETCD}, args.tasks, app
        )
        failover(env, args.failover_tasks, app)
        print("cluster check passed")
        return 0
    except CheckFailed as failure:
        print(f"cluster check FAILED: {failure}")
        return 1
    finally:
        for name in ("readme-worker", "failover-consumer", "failover-producer"):
            run("docker", "rm", "-f", "-v", f"{PROJECT}-{name}", check=False)
        if not args.keep:
            compose("down", "-v", "--timeout", "30", check=False)
        shutil.rmtree(app, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
