"""The server's imports, read statically from the source: no circle among its
modules, and its rooms (subpackages) import one way.

A circle is how a request came to cross ~20 files: calls.py, connection.py
and requests.py imported each other and passed the whole Connection around.
Every import counts, those under `if TYPE_CHECKING:` too.
"""

from __future__ import annotations

import ast
from pathlib import Path

SERVER = Path(__file__).resolve().parents[3] / "server"

# The rooms from the top down: each may import only rooms after it in this list
# (server/__init__.py draws the same order).
ROOMS = (
    "start",
    "route",
    "web",
    "net",
    "replication",
    "plugins",
    "queue",
    "core",
    "access",
    "settings",
    "runtime",
)


def module_name(path: Path, root: Path = SERVER) -> str:
    """`queuebox.server.<room>.<module>` for a file under root."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["queuebox", "server", *parts])


def server_imports(path: Path, root: Path = SERVER) -> set[str]:
    """The server modules (dotted names) one file imports, relative or absolute."""
    modules = {module_name(p, root) for p in root.rglob("*.py")}
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            submodules = [f"{target}.{alias.name}" for alias in node.names]
            # `from ..core import app` imports the module; `from ..plugins import X`, the package
            candidates = [m for m in submodules if m in modules] or [target]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(c for c in candidates if c in modules)
    return found - {here}


def graph(root: Path = SERVER) -> dict[str, set[str]]:
    return {module_name(p, root): server_imports(p, root) for p in sorted(root.rglob("*.py"))}


def room_of(module: str) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else ""


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path of module names, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_the_server_modules_import_no_circle() -> None:
    edges = graph()
    names = {m.rsplit(".", 1)[-1] for m in edges}
    assert {"connection", "dispatch", "requests", "session", "build"} <= names
    assert find_cycle(edges) is None, " -> ".join(find_cycle(edges) or [])


def test_every_module_lives_in_a_room() -> None:
    loose = [m for m in graph() if m.count(".") == 2 and room_of(m) not in ROOMS]
    assert loose == []
    rooms = {room_of(m) for m in graph()} - {""}
    assert rooms == set(ROOMS)


def test_rooms_import_one_way() -> None:
    wrong = []
    for module, targets in graph().items():
        here = room_of(module)
        if not here:
            continue
        for target in targets:
            there = room_of(target)
            if there and there != here and ROOMS.index(there) < ROOMS.index(here):
                wrong.append(f"{module} ({here}) imports {target} ({there})")
    assert wrong == []


def test_handlers_never_import_the_connection() -> None:
    edges = graph()
    connection = "queuebox.server.net.connection"
    for module in ("core.requests", "core.session", "core.dispatch", "queue.queue_calls"):
        assert connection not in edges[f"queuebox.server.{module}"], module


def test_the_checker_finds_a_circle(tmp_path: Path) -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    for room in ("core", "net"):
        (tmp_path / room).mkdir()
        (tmp_path / room / "__init__.py").write_text("")
    for name in ("dispatch", "app", "requests"):
        (tmp_path / "core" / f"{name}.py").write_text("")
    (tmp_path / "net" / "listener.py").write_text("")
    sample = tmp_path / "net" / "connection.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "from ..core.dispatch import f\n"
        "from ..core import app\n"
        "from queuebox.server.core.requests import g\n"
        "import queuebox.server.net.listener\n"
        "if TYPE_CHECKING:\n"
        "    from .connection import Connection\n"
    )
    assert server_imports(sample, tmp_path) == {
        "queuebox.server.core.dispatch",
        "queuebox.server.core.app",
        "queuebox.server.core.requests",
        "queuebox.server.net.listener",
    }
    assert room_of("queuebox.server.net.listener") == "net"
