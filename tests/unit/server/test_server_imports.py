"""No import circle among the server's modules, read statically from the source.

A circle is how a request came to cross ~20 files: calls.py, connection.py
and requests.py imported each other and passed the whole Connection around.
Every import counts, those under `if TYPE_CHECKING:` too.
"""

from __future__ import annotations

import ast
from pathlib import Path

SERVER = Path(__file__).resolve().parents[3] / "server"


def server_imports(path: Path) -> set[str]:
    """The server modules (by stem) one file imports."""
    modules = {p.stem for p in SERVER.glob("*.py")}
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:  # from .x import y / from . import x
                names = [node.module] if node.module else [a.name for a in node.names]
            elif node.level == 0 and node.module and node.module.startswith("queuebox.server"):
                rest = node.module.split(".")[2:]
                names = rest[:1] if rest else [a.name for a in node.names]
            else:
                continue
        elif isinstance(node, ast.Import):
            names = [
                a.name.split(".")[2] for a in node.names if a.name.startswith("queuebox.server.")
            ]
        else:
            continue
        found.update(n for n in names if n in modules)
    return found


def graph() -> dict[str, set[str]]:
    return {p.stem: server_imports(p) - {p.stem} for p in sorted(SERVER.glob("*.py"))}


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
    assert {"connection", "dispatch", "requests", "session"} <= set(edges)
    assert find_cycle(edges) is None, " -> ".join(find_cycle(edges) or [])


def test_handlers_never_import_the_connection() -> None:
    edges = graph()
    for module in ("requests", "session", "dispatch", "queue_calls"):
        assert "connection" not in edges[module], module


def test_the_checker_finds_a_circle(tmp_path: Path) -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    sample = tmp_path / "x.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "from .dispatch import f\n"
        "from . import app\n"
        "from queuebox.server.requests import g\n"
        "import queuebox.server.listener\n"
        "if TYPE_CHECKING:\n"
        "    from .connection import Connection\n"
    )
    assert server_imports(sample) == {"dispatch", "app", "requests", "connection", "listener"}
