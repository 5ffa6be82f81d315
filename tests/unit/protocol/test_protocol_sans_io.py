"""protocol/ stays sans-I/O: no event loop, sockets, clocks, threads or project folders."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "protocol"
FORBIDDEN = {
    "asyncio",
    "socket",
    "selectors",
    "ssl",
    "time",
    "threading",
    "multiprocessing",
    "subprocess",
    "uvloop",
    "server",
    "storage",
    "drivers",
    "clients",
}
MODULES = sorted(PACKAGE.glob("*.py"))


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_package_is_found() -> None:
    assert {"request.py", "response.py", "framing.py"} <= {m.name for m in MODULES}


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_module_imports_nothing_forbidden(module: Path) -> None:
    assert imported_roots(module) & FORBIDDEN == set()


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_module_is_small_and_says_what_it_owns(module: Path) -> None:
    tree = ast.parse(module.read_text())
    assert ast.get_docstring(tree), f"{module.name} needs a module docstring"
    assert len(module.read_text().splitlines()) <= 400
