"""queuebox's own calls on the queue (QUEUE.md §14), beside the module's API.

Owns: `OwnCalls`, the base of `queue.Queue` that runs them as entry points:
`queuebox.identify_as` (a router's session), `queuebox.tasks` (a page of a
tube's tasks, listing.py), `queuebox.tube_options` (the options an existing
tube may change, and its answer), the schedule calls' entry
(`with_schedules`, schedules.py), the operator's `queuebox.release` and
`queuebox.kick_task` of one task, and `queuebox.result` (result_call.py).
Its attributes are the queue's parts, set by `Queue.__init__`.
Must not touch: the module's names and calls (queue.py binds them), sockets,
wall time (the clock is injected), users and grants (the server's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .args import lua_tostring, options
from .args import task_id as task_id_arg
from .core import EntryPoints
from .driver import BURIED, TAKEN, Tuple
from .durable import SessionJournal
from .errors import QueueError, module_error, not_buried, not_taken, task_not_found, tube_not_found
from .keys import WINDOW_OPTION
from .limits import options_of
from .listing import list_tasks
from .result_call import result_call
from .retries import policy_options
from .schedules import Schedules
from .sessions import Ownership, Sessions
from .tube import Answer, Call, Tube
from .tubes import OWN_OPTIONS, TubeRegistry, check_options

Handler = Callable[[Call], Answer]


def tube_options_answer(tube: Tube) -> dict[str, Any]:
    """The options `queuebox.tube_options` answers: the retry policy, the rate limit
    and buried retention, result_ttl and key_window if set."""
    found = {**policy_options(tube.retries.policy), **options_of(tube.opts)}
    if tube.results.ttl_us:
        found["result_ttl"] = tube.results.ttl_us / 1_000_000
    if WINDOW_OPTION in tube.opts:
        found[WINDOW_OPTION] = tube.opts[WINDOW_OPTION]
    return found


class OwnCalls(EntryPoints):
    """queuebox's own entry points; `queue.Queue` sets every attribute. A base in
    one chain of single bases (EntryPoints -> OwnCalls -> Queue), as mypyc
    compiles it: a native class has one non-trait base."""

    registry: TubeRegistry
    owners: Ownership
    sessions: Sessions
    schedules: Schedules
    journal: SessionJournal | None

    def identify_as(self, conn_id: int, value: Any) -> list[Any]:
        """queuebox.identify_as(uuid): identify, the session made if unknown (a router's)."""
        session = self.sessions.adopt(conn_id, value, self._clock())
        if self.journal is not None:
            self.journal.identified(session, self.owners.held_by(session))
        return [session.decode("utf-8", "surrogateescape")]

    # -- on a tube --
    def list_tasks(self, name: Any, raw: Any) -> dict[str, Any]:
        """`queuebox.tasks(tube, opts)`: a page of the tube's tasks (listing.py)."""
        with self._entry():
            tube = self._named(name)
            counting = tube.retries.policy is not None
            driver, owners = tube.driver, self.owners

            def owner_of(task_id: int) -> bytes | None:
                return owners.owner(tube.name, task_id)

            page = list_tasks(driver.space, type(driver), tube.retries.row, counting, raw, owner_of)
            retries = policy_options(tube.retries.policy)
            found = {"tube": tube.name, "type": tube.type, "retries": retries, **page}
            limits = options_of(tube.opts)
            return {**found, "limits": limits} if limits else found

    def tube_options(self, name: Any, raw: Any) -> dict[str, Any]:
        """`queuebox.tube_options(tube, opts)`: change a tube's retry options, rate
        limit, buried retention, result_ttl or key_window; the answer is what is now
        in force ({} for none)."""
        with self._entry():
            tube = self._named(name)
            changes = options(raw)
            for key in changes:
                if key not in OWN_OPTIONS:
                    raise module_error(f"Unknown option {lua_tostring(key)}")
            check_options({**tube.opts, **changes}, type(tube.driver))
            self.registry.update_options(tube, changes)
            tube.retries.set_policy(tube.opts)
            tube.limits.set_options(tube.opts, self._clock())
            tube.results.set_options(tube.opts)
            tube.keys.set_window(tube.opts)
            tube.sync_deadline()
            return tube_options_answer(tube)

    def with_schedules(self, run: Callable[[Schedules, int], Any]) -> Any:
        """Run a schedule call (`queuebox.schedule` and co.) as an entry point."""
        with self._entry():
            return run(self.schedules, self._clock())

    def release_task(self, tube_name: Any, raw_id: Any) -> list[Any]:
        """An operator's release (`queuebox.release`): a taken task back to
        ready whichever session holds it, as if that session had ended."""
        with self._entry():
            tube, task = self._task_in(tube_name, raw_id, TAKEN, not_taken)
            tube.release_owned(task[0], self._clock())
            released = tube.driver.peek(task[0])
            assert released is not None
            return [tube.driver.normalize(released)]

    def kick_task(self, tube_name: Any, raw_id: Any) -> list[Any]:
        """An operator's kick of one buried task by its id (`queuebox.kick_task`):
        ready again with a fresh start, as `kick` would make it."""
        with self._entry():
            tube, task = self._task_in(tube_name, raw_id, BURIED, not_buried)
            tube.driver.note("kick")  # counted and heard as the module's kick
            return [tube.driver.normalize(tube.driver.kick_task(task[0], task))]

    def _task_in(
        self, tube_name: Any, raw_id: Any, status: str, wrong: Callable[[], QueueError]
    ) -> tuple[Tube, Tuple]:
        """The task an operator's call names, which must be in `status` (else `wrong()`)."""
        tube = self._named(tube_name)
        tid = task_id_arg(raw_id)
        task = tube.driver.peek(tid)
        if task is None:
            raise task_not_found(tid)
        if task[1] != status:
            raise wrong()
        return tube, task

    def _result(self, call: Call) -> Answer:
        """`queuebox.result(tube, id [, timeout])` (result_call.py)."""
        return result_call(self._named(call.arg(0)), call.arg(1), call.arg(2))

    def _entry_call(self, name: str, handler: Handler) -> Callable[[int, list[Any]], Answer]:
        """A queuebox call that is no tube method, run as an entry point."""

        def run(conn_id: int, args: list[Any]) -> Answer:
            with self._entry():
                return handler(Call(conn_id, name, list(args or ()), self._clock()))

        return run

    def _named(self, name: Any) -> Tube:
        tube = self.registry.get(name)
        if tube is None:
            raise tube_not_found(name)
        return tube
