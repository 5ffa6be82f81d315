"""The captured IPROTO frames (iproto-vectors.json, from real Tarantool and real
connectors), read once for every protocol test: `VECTORS` as listed, `BY_NAME`
their bytes by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

VECTORS: list[dict[str, Any]] = json.loads(
    Path(__file__).with_name("iproto-vectors.json").read_text()
)
BY_NAME = {v["name"]: bytes.fromhex(v["hex"]) for v in VECTORS}
