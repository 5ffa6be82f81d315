"""The queue's state names, as they were imported from here: they live in
drivers/queue_state.py (the one list every part uses); these are the same
names, kept for code written against this module before it moved."""

from __future__ import annotations

from queuebox.drivers.queue_state import ENDING, INIT, RUNNING, STARTUP, WAITING

__all__ = ["ENDING", "INIT", "RUNNING", "STARTUP", "WAITING"]
