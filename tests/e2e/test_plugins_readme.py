"""docs/plugins.md's examples run as written: its plugin loaded into a real server
(`--plugin myplugin`), then its client scripts against it. Only the port is changed,
from 3301 to the test server's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.serverproc import REPO, StartServer, login_tester

BLOCK = re.compile(r"^```python\n# (\S+\.py)\n(.*?)^```", re.S | re.M)


def examples() -> dict[str, str]:
    manual = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
    return dict(BLOCK.findall(manual))


def run(script: Path, timeout: float = 30) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_manuals_plugin_and_scripts(start_server: StartServer, tmp_path: Path) -> None:
    found = examples()
    assert set(found) == {"myplugin.py", "use_it.py", "follow.py", "watch.py"}
    (tmp_path / "myplugin.py").write_text(found["myplugin.py"])
    server = start_server(
        "--plugin", "myplugin", "--guest-rights", "all", env={"PYTHONPATH": str(tmp_path)}
    )
    scripts = {}
    for name in ("use_it.py", "follow.py", "watch.py"):
        code = found[name]
        assert '"127.0.0.1", 3301' in code, f"{name} connects somewhere else"
        scripts[name] = tmp_path / name
        scripts[name].write_text(code.replace('"127.0.0.1", 3301', f'"127.0.0.1", {server.port}'))

    assert run(scripts["use_it.py"]).strip() == "[0, 1, 2]"
    assert "task buried" in server.log() and "task done" in server.log()
    conn = login_tester(server.port)
    try:
        for n in (49, 50):  # 1 ready already: the capped driver refuses the 101st
            conn.call("jobs.put_many", "mail", list(range(n)))
        with pytest.raises(Exception, match="has 100 ready tasks already"):
            conn.call("queue.tube.mail:put", "one too many")
        task = conn.call("queue.tube.mail:take", 0).data[0]
        assert "mail (capped): 1 taken, 0 takes waiting" in run(scripts["watch.py"])
        conn.call("queue.tube.mail:ack", task[0])
    finally:
        conn.close()
    lines = run(scripts["follow.py"]).splitlines()
    assert [line.split()[1:] for line in lines[:3]] == [
        ["put", "0", "r"],
        ["put", "1", "r"],
        ["put", "2", "r"],
    ]
    assert lines[-1].split()[1:] == ["ack", "0", "-"]
