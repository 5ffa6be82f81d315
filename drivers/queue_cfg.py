"""`queue.cfg(opts)`: the module's options read and checked as upstream does.

Owns: `read_cfg`, the options map (or array) of a cfg call turned into the
values queue.py applies (the sessions' ttr, in_replicaset), with upstream's
error texts. Must not touch: the queue's state (queue.py applies the result),
tubes, tasks.
"""

from __future__ import annotations

from typing import Any

from .args import is_number, lua_tostring, lua_type
from .errors import module_error


def read_cfg(raw: Any) -> dict[Any, Any]:
    """The options of `queue.cfg(raw)`, checked: "in_replicaset" always, a bool;
    "ttr" when given, a number >= 0."""
    if raw is None:
        raw = {}
    if isinstance(raw, dict):
        items = [(k, v) for k, v in raw.items() if v is not None]
    elif isinstance(raw, list | tuple):
        items = [(i + 1, v) for i, v in enumerate(raw) if v is not None]
    else:
        raise module_error(f"attempt to index local 'opts' (a {lua_type(raw)} value)")
    opts = dict(items)
    opts.setdefault("in_replicaset", False)
    for key, value in opts.items():
        if key == "in_replicaset" and not isinstance(value, bool):
            raise module_error(f"Invalid value of in_replicaset: {lua_tostring(value)}")
        if key not in ("ttr", "in_replicaset"):
            raise module_error(f"Unknown option {lua_tostring(key)}")
    if "ttr" in opts:
        ttr = opts["ttr"]
        if not is_number(ttr) or ttr < 0:
            raise module_error(f"Invalid value of ttr: {lua_tostring(ttr)}")
    return opts
