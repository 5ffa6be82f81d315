"""Error codes have one home, protocol's ErrorCode: the drivers' code names map into it."""

from __future__ import annotations

import pytest

from queuebox.drivers.errors import CODE_NAMES, QueueError, module_error, no_such_engine
from queuebox.protocol import ErrorCode
from queuebox.server.runtime.errors import CallError, error_code_and_message
from queuebox.server.runtime.outcomes import WalFailed


@pytest.mark.parametrize("name", CODE_NAMES)
def test_every_code_name_of_the_drivers_is_an_error_code(name: str) -> None:
    assert ErrorCode[name].name == name


def test_queue_errors_map_to_their_wire_numbers() -> None:
    assert error_code_and_message(module_error("Task was not taken")) == (32, "Task was not taken")
    assert error_code_and_message(no_such_engine("x")) == (
        57,
        "Space engine 'x' does not exist",
    )


def test_an_unknown_code_name_carries_no_code() -> None:
    # Reported as an unexpected error (ER_PROC_LUA with the type), not a wrong code.
    assert error_code_and_message(QueueError("ER_NOT_A_CODE", "x")) is None  # type: ignore[arg-type]


def test_server_errors_keep_their_numbers() -> None:
    assert error_code_and_message(CallError(ErrorCode.ER_NO_SUCH_PROC, "p")) == (33, "p")
    assert error_code_and_message(WalFailed("disk full")) == (
        40,
        "Failed to write to disk: disk full",
    )
