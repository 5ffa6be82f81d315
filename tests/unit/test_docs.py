"""The notes the code cites live in the repo and have the sections it cites.

Code and tests cite `QUEUE.md §n` (drivers/QUEUE.md), `PROTOCOL.md §n`
(protocol/PROTOCOL.md) and `FORMAT.md §n` (storage/FORMAT.md); each cited section
must exist, citations in tests must name their document, and the notes must ship with
the package.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = {
    "QUEUE.md": REPO / "drivers" / "QUEUE.md",
    "PROTOCOL.md": REPO / "protocol" / "PROTOCOL.md",
    "FORMAT.md": REPO / "storage" / "FORMAT.md",
}
PACKAGE_DATA = {
    "QUEUE.md": "queuebox.drivers",
    "PROTOCOL.md": "queuebox.protocol",
    "FORMAT.md": "queuebox.storage",
}
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "build", "dist", "node_modules"}
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".yaml", ".yml", ".txt", ".cfg", ""}

# `QUEUE.md §6`, and the sections listed right after it: `§1–§3`, `§1, §2`, `§4; §11`.
CITATION = re.compile(
    r"\b(QUEUE|PROTOCOL|FORMAT)\.md (§[\d.]*\d(?:\s*(?:[,;–-]|and)\s*§[\d.]*\d)*)"
)
SECTION = re.compile(r"§([\d.]*\d)")
HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", re.M)


def sections(doc: Path) -> set[str]:
    return set(HEADING.findall(doc.read_text(encoding="utf-8")))


def repo_files() -> list[Path]:
    found = []
    for path in REPO.rglob("*"):
        if any(part in SKIP_DIRS for part in path.relative_to(REPO).parts):
            continue
        if path.is_file() and not path.is_symlink() and path.suffix in TEXT_SUFFIXES:
            found.append(path)
    return found


def citations() -> list[tuple[str, str, str]]:
    """(where, document, section) for every citation in the repo."""
    out = []
    for path in repo_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            for match in CITATION.finditer(line):
                for section in SECTION.findall(match.group(2)):
                    where = f"{path.relative_to(REPO)}:{lineno}"
                    out.append((where, f"{match.group(1)}.md", section))
    return out


@pytest.mark.parametrize("name", sorted(DOCS))
def test_the_note_exists_with_numbered_sections(name: str) -> None:
    assert DOCS[name].is_file()
    assert {"1", "2", "3"} <= sections(DOCS[name])


def test_every_cited_section_exists() -> None:
    found = citations()
    assert len({doc for _, doc, _ in found}) == 3, "the citation pattern stopped matching"
    known = {name: sections(path) for name, path in DOCS.items()}
    missing = [f"{where}: {doc} §{n}" for where, doc, n in found if n not in known[doc]]
    assert missing == []


def test_the_notes_keep_the_sections_code_cites() -> None:
    assert {str(n) for n in range(1, 13)} <= sections(DOCS["QUEUE.md"])
    assert {str(n) for n in range(1, 12)} <= sections(DOCS["PROTOCOL.md"])


def test_citations_in_tests_name_their_document() -> None:
    bare = []
    for path in (REPO / "tests").rglob("*.py"):
        if path.resolve() == Path(__file__).resolve():
            continue  # this file talks about citations
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "§" in line and not CITATION.search(line):
                bare.append(f"{path.relative_to(REPO)}:{lineno}: {line.strip()}")
    assert bare == []


def test_the_notes_ship_in_the_package() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    data = config["tool"]["setuptools"]["package-data"]
    for name, package in PACKAGE_DATA.items():
        assert name in data.get(package, []), f"{name} is not package data of {package}"
