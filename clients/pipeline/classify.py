"""Which lifecycle event a WAL record of a task space stands for.

Owns: `RULES`, the ordered table that maps (op, status before, status after, queue
call) to an event name, and `classify`, its plain-Python evaluator. The lifecycle job
compiles the same table into one Spark expression, so both always agree. Must not
touch Spark, files or sockets.

The call key (the queue call recorded with the change, when the WAL has it) refines a
transition; without it the event is inferred from the statuses alone:

    insert ─────────────▶ put            replace r→t ─────▶ take
    delete of a t task ─▶ ack            replace t→r|~ ───▶ release (ttr / disconnect
    delete otherwise ───▶ delete                             when the call says so)
      (expire when the call is ttl, or   replace →! ──────▶ bury
       the ttl fields show it expired)   replace !→r ─────▶ kick
                                         replace ~→r ─────▶ delay (the delay ended)
                                         replace t→t ─────▶ touch
"""

from __future__ import annotations

from dataclasses import dataclass

ANY = None


@dataclass(frozen=True)
class Rule:
    """Matches when every non-None field matches; the first matching rule wins."""

    event: str
    op: str | None = ANY
    before: frozenset[str] | None = ANY
    after: frozenset[str] | None = ANY
    calls: frozenset[str] | None = ANY
    # True: only when the record shows the task's ttl had passed (see lifecycle).
    ttl_passed: bool | None = ANY


def _set(*items: str) -> frozenset[str]:
    return frozenset(items)


RULES: tuple[Rule, ...] = (
    Rule("put", op="insert"),
    Rule("expire", op="delete", calls=_set("ttl", "take")),
    Rule("truncate", op="delete", calls=_set("truncate", "drop")),
    Rule("ack", op="delete", calls=_set("ack")),
    Rule("delete", op="delete", calls=_set("delete")),
    Rule("ack", op="delete", before=_set("t")),
    Rule("expire", op="delete", ttl_passed=True),
    Rule("delete", op="delete"),
    Rule("take", op="replace", before=_set("r"), after=_set("t")),
    Rule("ttr", op="replace", before=_set("t"), after=_set("r", "~"), calls=_set("ttr")),
    Rule(
        "disconnect",
        op="replace",
        before=_set("t"),
        after=_set("r", "~"),
        calls=_set("disconnect", "session", "restart"),
    ),
    Rule("release", op="replace", before=_set("t"), after=_set("r", "~")),
    Rule("bury", op="replace", after=_set("!")),
    Rule("kick", op="replace", before=_set("!"), after=_set("r")),
    Rule("delay", op="replace", before=_set("~"), after=_set("r")),
    Rule("touch", op="replace", before=_set("t"), after=_set("t")),
    Rule("other"),
)

# Lifecycle metrics: metric name -> the events it counts.
METRICS: dict[str, tuple[str, ...]] = {
    "put": ("put",),
    "taken": ("take",),
    "acked": ("ack",),
    "released": ("release", "ttr", "disconnect"),
    "buried": ("bury",),
    "kicked": ("kick",),
    "deleted": ("delete", "truncate"),
    "expired": ("expire",),
}

# Events that end a task's life.
FINAL_EVENTS = ("ack", "delete", "expire", "truncate")


def _matches(
    rule: Rule, op: str, before: str | None, after: str | None, call: str | None, ttl: bool
) -> bool:
    return (
        (rule.op is ANY or rule.op == op)
        and (rule.before is ANY or before in rule.before)
        and (rule.after is ANY or after in rule.after)
        and (rule.calls is ANY or call in rule.calls)
        and (rule.ttl_passed is ANY or rule.ttl_passed == ttl)
    )


def classify(
    op: str,
    before: str | None,
    after: str | None,
    call: str | None = None,
    ttl_passed: bool = False,
) -> str:
    """The event name of one task record (see the table in the module docstring)."""
    for rule in RULES:
        if _matches(rule, op, before, after, call, ttl_passed):
            return rule.event
    return "other"
