"""The import direction of DESIGN.md, checked on the source, statically.

server -> drivers -> storage; server -> protocol; clients -> protocol; nothing
imports server. Imports count in every form: `import`, `from ... import`,
and a module named in a string (what importlib would load). Only the umbrella's
command modules (`queuebox/cli.py`, and `queuebox/backupcli.py`: the client's
connection options over the server's replication link and storage) reach both
server and clients.

One exception, by module: storage may import protocol's SHARED modules, the
one copy of two byte formats both sides read (msgpack by its bytes; the WAL
and snapshot files, which the Spark pipeline in clients/ reads too). They are
pure and import nothing of the project but each other, so the arrow adds no
path from storage to the wire's requests and replies.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("server", "protocol", "drivers", "storage", "clients")

# What each package may import from the project (besides itself).
ALLOWED = {
    "server": {"protocol", "drivers", "storage"},
    "drivers": {"storage"},
    "storage": set(),
    "protocol": set(),
    "clients": {"protocol"},
}

# Modules any package may import: pure byte formats, importing only each other.
SHARED = {"queuebox.protocol.rawmsgpack", "queuebox.protocol.walformat"}

# Standard modules that would put I/O, time or concurrency where DESIGN.md forbids it.
FORBIDDEN_STDLIB = {
    "protocol": {"asyncio", "socket", "time", "threading", "selectors", "importlib"},
    "drivers": {"asyncio", "socket", "time", "threading", "selectors", "importlib"},
    "storage": {"asyncio", "socket", "selectors", "importlib"},
}

_MODULE_STRING = re.compile(r"queuebox\.(\w+)")


def imported_names(path: Path) -> set[str]:
    """Top-level stdlib names and `queuebox.<package>` names a file reaches."""
    return {_project_or_top(name) for name in imported_modules(path)}


def imported_modules(path: Path) -> set[str]:
    """The full names of the modules a file reaches (`queuebox.storage.space`, `zlib`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.add(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "queuebox":
                names.update(f"queuebox.{alias.name}" for alias in node.names)
            else:
                names.add(node.module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.update(f"queuebox.{m}" for m in _MODULE_STRING.findall(node.value))
    return names


def _project_or_top(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "queuebox" and len(parts) > 1 else parts[0]


def source_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_follow_the_design(package: str) -> None:
    files = source_files(package)
    assert files, f"{package}/ has no Python files"
    bad = []
    for path in files:
        modules = imported_modules(path)
        names = {_project_or_top(name) for name in modules}
        where = path.relative_to(ROOT)
        for name in {_project_or_top(m) for m in modules - SHARED}:
            if name.startswith("queuebox."):
                other = name.split(".")[1]
                if other != package and other in PACKAGES and other not in ALLOWED[package]:
                    bad.append(f"{where} reaches {name}")
        for mod in FORBIDDEN_STDLIB.get(package, set()) & names:
            bad.append(f"{where} imports {mod}")
        # The old top-level names would only work from a checkout, never installed.
        for old in set(PACKAGES) & names:
            bad.append(f"{where} imports {old!r}, not 'queuebox.{old}'")
    assert not bad, "\n".join(bad)


def test_the_shared_modules_import_only_each_other() -> None:
    for module in SHARED:
        path = ROOT / (module.removeprefix("queuebox.").replace(".", "/") + ".py")
        project = {m for m in imported_modules(path) if m.startswith("queuebox")}
        tree = ast.parse(path.read_text(encoding="utf-8"))
        relative = {
            f"queuebox.{module.split('.')[1]}.{node.module}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        }
        assert project | relative <= SHARED, f"{module} imports {project | relative}"
        assert not {"mmap", "os", "io", "socket", "time"} & imported_names(path), module


def test_the_checker_sees_every_form(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text(
        "import queuebox.server.core.app\n"
        "from queuebox.storage.space import Space\n"
        "from queuebox import protocol\n"
        "import importlib\n"
        "importlib.import_module('queuebox.clients.cli.commands')\n"
        "import drivers\n"
    )
    assert imported_names(sample) == {
        "queuebox.server",
        "queuebox.storage",
        "queuebox.protocol",
        "queuebox.clients",
        "importlib",
        "drivers",
    }


def test_the_umbrella_links_every_package() -> None:
    for package in PACKAGES:
        link = ROOT / "queuebox" / package
        assert link.is_symlink() and link.resolve() == (ROOT / package).resolve(), package
