"""docs/legacy.md's Perl example for the Tarantool 1.5 port runs as written, with
MR::Tarantool::Box, against a queuebox subprocess. Only the port is changed,
from 33013 to the test server's legacy port."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.e2e.box15proc import need_perl_client, start_legacy_server
from tests.e2e.serverproc import REPO

SECTION = re.compile(r"^## The Tarantool 1\.5 port\n(.*?)(?=^## |\Z)", re.S | re.M)
BLOCK = re.compile(r"^```perl\n# (\S+\.pl)\n(.*?)^```", re.S | re.M)
ADDRESS = '"127.0.0.1:33013"'


def example() -> tuple[str, str]:
    readme = (REPO / "docs" / "legacy.md").read_text(encoding="utf-8")
    section = SECTION.search(readme)
    assert section, "docs/legacy.md has no '## The Tarantool 1.5 port' section"
    blocks = BLOCK.findall(section.group(1))
    assert len(blocks) == 1, blocks
    assert "--legacy-listen 127.0.0.1:33013" in section.group(1)
    name, code = blocks[0]
    return name, code


def test_readme_perl_example_runs_as_written(tmp_path: Path) -> None:
    need_perl_client()
    name, code = example()
    assert ADDRESS in code, f"{name} connects somewhere else"
    server, port = start_legacy_server(tmp_path / "server")
    try:
        script = tmp_path / name
        script.write_text(code.replace(ADDRESS, f'"127.0.0.1:{port}"'))
        done = subprocess.run(
            ["perl", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "put ready to@example.org",
        "took to@example.org",
        "acked 1",
    ]
