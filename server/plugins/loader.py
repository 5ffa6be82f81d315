"""Finding a plugin by the name it is configured with, and its entry function.

Owns: what a name in `plugins` means, in this order: `pkg.mod:function` (that
function), the name of an installed entry point of group `queuebox.plugins`
(the function it points to, or its module's `queuebox_plugin`), else an
importable module (its `queuebox_plugin`); and the list of installed entry
points (`plugin_entry_points`). Must not run the entry function nor catch
what importing raises: the host does both, isolated (guard.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

GROUP = "queuebox.plugins"
ENTRY = "queuebox_plugin"

EntryFunction = Callable[[Any], Any]


class PluginNotFound(Exception):
    """A configured plugin name that resolves to nothing callable."""


def installed() -> list[EntryPoint]:
    """Every entry point of group queuebox.plugins, in name order."""
    # Imported here: a start without plugins pays neither the import nor the scan.
    from importlib.metadata import entry_points

    return sorted(entry_points(group=GROUP), key=lambda ep: ep.name)


def entry_of(name: str) -> EntryFunction:
    """The entry function `name` stands for (see the module doc)."""
    module_name, sep, function = name.partition(":")
    if sep:
        return _callable(getattr(importlib.import_module(module_name), function, None), name)
    for ep in installed():
        if ep.name == name:
            return from_entry_point(ep)
    return _callable(getattr(importlib.import_module(name), ENTRY, None), f"{name}:{ENTRY}")


def from_entry_point(ep: EntryPoint) -> EntryFunction:
    loaded = ep.load()
    if isinstance(loaded, ModuleType):
        return _callable(getattr(loaded, ENTRY, None), f"{ep.value}:{ENTRY}")
    return _callable(loaded, ep.value)


def _callable(found: object, where: str) -> EntryFunction:
    if not callable(found):
        raise PluginNotFound(f"{where} is not a function: a plugin's entry is fn(api)")
    return found
