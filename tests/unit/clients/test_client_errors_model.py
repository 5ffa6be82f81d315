"""The client's error mapping and typed values: what a user catches and reads."""

import pytest

from queuebox.clients import errors
from queuebox.clients.model import LegacyTask, Status, Task

PREFIX = "/usr/share/tarantool/queue/abstract.lua:83: "


@pytest.mark.parametrize(
    ("code", "message", "cls"),
    [
        (32, PREFIX + "Task was not taken", errors.TaskNotTaken),
        (32, "/x/queue/abstract.lua:237: Task 7 not found", errors.TaskNotFound),
        (32, "Task not found", errors.TaskNotFound),
        (32, "Task is not taken", errors.TaskNotTaken),
        (32, "Only consumer that took the task can it ack", errors.TaskNotTaken),
        (32, "/q/abstract.lua:663: Space 'jobs' already exists", errors.TubeExists),
        (32, "/q/abstract.lua:295: There are taken tasks in the tube", errors.TubeBusy),
        (32, "/q/abstract.lua:290: There are consumers connected the tube", errors.TubeBusy),
        (32, "/q/queue_session.lua:223: The UUID 3332-a is unknown.", errors.UnknownSession),
        (32, "/q/queue_session.lua:214: Invalid UUID format.", errors.UnknownSession),
        (32, "/q/abstract.lua:657: Unknown tube type nosuch", errors.QueueError),
        (33, "Procedure 'queue.tube.jobs:put' is not defined", errors.TubeNotFound),
        (33, "Procedure 'no_such_fn' is not defined", errors.NoSuchProcedure),
        (47, "Incorrect password supplied for user 'tester'", errors.AuthError),
        (45, "User 'nobody' is not found", errors.AuthError),
        (42, "Execute access to function 'f' is denied for user 'guest'", errors.AccessDenied),
        (
            216,
            "Quorum collection for a synchronous transaction is timed out",
            errors.OutcomeUnknown,
        ),
        (222, "Couldn't wait for quorum 1: fenced", errors.OutcomeUnknown),
    ],
)
def test_error_from_reply_picks_the_specific_class(code: int, message: str, cls: type) -> None:
    error = errors.error_from_reply(code, message)
    assert type(error) is cls
    assert (error.code, error.message) == (code, message)
    assert str(error) == f"[{code}] {message}"


def test_queue_error_text_drops_the_lua_position() -> None:
    error = errors.error_from_reply(32, PREFIX + "Task was not taken")
    assert isinstance(error, errors.QueueError)
    assert error.text == "Task was not taken"


def test_tube_not_found_names_the_tube() -> None:
    error = errors.error_from_reply(33, "Procedure 'queue.tube.my_jobs:take' is not defined")
    assert isinstance(error, errors.TubeNotFound)
    assert error.tube == "my_jobs"


def test_network_errors_are_builtin_connection_errors_but_not_server_errors() -> None:
    assert issubclass(errors.ConnectionLost, ConnectionError)
    assert issubclass(errors.ConnectionLost, errors.QueueboxError)
    assert not issubclass(errors.NetworkError, errors.ServerError)
    assert issubclass(errors.CallTimeout, TimeoutError)


def test_task_from_tuple() -> None:
    task = Task.from_tuple([3, "~", {"a": [1]}])
    assert task == Task(3, Status.DELAYED, {"a": [1]})
    assert task.status == "~"


@pytest.mark.parametrize(
    ("word", "status"),
    [
        ("ready", Status.READY),
        ("taken", Status.TAKEN),
        ("done", Status.DONE),
        ("buried", Status.BURIED),
        ("delayed", Status.DELAYED),
    ],
)
def test_legacy_task_reads_status_words(word: str, status: Status) -> None:
    task = LegacyTask.from_tuple(["ab" * 16, "t1", word, "x", 2])
    assert task == LegacyTask("ab" * 16, "t1", status, ("x", 2))
