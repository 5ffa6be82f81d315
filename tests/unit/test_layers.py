"""The import direction of DESIGN.md: server -> drivers -> storage; server -> protocol;
clients -> protocol; nothing imports server. Checked on the source, statically."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("server", "protocol", "drivers", "storage", "clients")

# What each package may import from the project (besides itself).
ALLOWED = {
    "server": {"protocol", "drivers", "storage", "clients"},
    "drivers": {"storage"},
    "storage": set(),
    "protocol": set(),
    "clients": {"protocol"},
}

# Standard modules that would put I/O, time or concurrency where DESIGN.md forbids it.
FORBIDDEN_STDLIB = {
    "protocol": {"asyncio", "socket", "time", "threading", "selectors"},
    "drivers": {"asyncio", "socket", "time", "threading", "selectors"},
    "storage": {"asyncio", "socket", "selectors"},
}


def imported_top_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def source_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_follow_the_design(package: str) -> None:
    files = source_files(package)
    assert files, f"{package}/ has no Python files"
    bad = []
    for path in files:
        names = imported_top_names(path)
        for other in (set(PACKAGES) - {package}) & names:
            if other not in ALLOWED[package]:
                bad.append(f"{path.relative_to(ROOT)} imports {other}")
        for mod in FORBIDDEN_STDLIB.get(package, set()) & names:
            bad.append(f"{path.relative_to(ROOT)} imports {mod}")
    assert not bad, "\n".join(bad)


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text("import server.app\nfrom storage.space import Space\n")
    assert imported_top_names(sample) == {"server", "storage"}
