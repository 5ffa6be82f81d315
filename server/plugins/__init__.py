"""Plugins: Python code loaded at start that adds tube drivers, functions callable
over CALL and task-change callbacks to the server (docs/plugins.md).

Modules: `loader` (a configured name to an entry function), `api` (what a
plugin's entry function, functions and callbacks are given), `guard` (plugin
code run so that no failure or stall of it reaches the server), `host` (the
loaded plugins, and running what they registered). Nothing outside server/
imports this package.
"""

from .api import Caller, PluginAPI, Task, TubeCalls, unpack
from .host import PluginHost

__all__ = ["Caller", "PluginAPI", "PluginHost", "Task", "TubeCalls", "unpack"]
