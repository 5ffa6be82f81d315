"""The password-guessing guard (server/access/authguard.py) on a fake clock."""

from __future__ import annotations

from queuebox.server.access.authguard import FORGET_S, AuthGuard


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def guard(clock: Clock, delay: float = 0.05, max_delay: float = 10.0) -> AuthGuard:
    return AuthGuard(delay, max_delay, clock, lambda user: user in ("app", "ops"))


def guesses_in(g: AuthGuard, clock: Clock, address: str, seconds: float, conns: int) -> int:
    """Checks a guesser gets in `seconds` with `conns` connections, each sending
    its next AUTH as soon as the last is answered (a deferred one is answered
    at its reserved time)."""
    end = clock.now + seconds
    ready = [clock.now] * conns  # when each connection sends its next AUTH
    checks = 0
    while True:
        i = min(range(conns), key=ready.__getitem__)
        if ready[i] > end:
            return checks
        clock.now = max(clock.now, ready[i])
        at = g.admit(address, "app")
        reserved = bool(at)
        if at:
            if at > end:
                return checks
            clock.now = at
        g.failed(address, "app", "password", reserved)
        checks += 1
        ready[i] = clock.now


def test_no_failure_no_wait() -> None:
    clock = Clock()
    g = guard(clock)
    for _ in range(100):
        assert g.admit("10.0.0.1", "app") == 0.0
        g.succeeded("10.0.0.1", "app")


def test_each_failure_doubles_the_wait_up_to_the_maximum() -> None:
    clock = Clock()
    g = guard(clock, delay=0.1, max_delay=1.0)
    assert g.failed("10.0.0.1", "nobody", "user") == 0.1
    assert g.admit("10.0.0.1", "nobody") == clock.now + 0.1
    g.failed("10.0.0.1", "nobody", "user", reserved=True)
    assert [g.delay(n) for n in range(1, 7)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert g.counts.failures == {"password": 0, "user": 2}
    assert g.counts.delayed == 1


def test_many_connections_from_one_address_share_one_pace() -> None:
    clock = Clock()
    g = guard(clock)
    # 50 connections guessing as fast as they are answered, for 60 s.
    checks = guesses_in(g, clock, "10.0.0.9", 60.0, 50)
    assert checks <= 60 * 20  # the promise: at most one check per 0.05 s
    assert checks < 100  # and in fact a few, once the delay has grown


def test_a_correct_password_from_another_address_is_checked_at_once() -> None:
    clock = Clock()
    g = guard(clock)
    g.succeeded("10.0.0.2", "app")  # the application logged in from here before
    guesses_in(g, clock, "10.0.0.9", 5.0, 10)
    assert g.admit("10.0.0.2", "app") == 0.0
    assert g.admit("10.0.0.3", "ops") == 0.0  # another user from a new address
    # A new address for the guessed user waits its turn with the guesser...
    waited = g.admit("10.0.0.4", "app")
    assert waited > clock.now
    # ... and once in, it is trusted: the guesses no longer hold it up.
    clock.now = waited
    g.succeeded("10.0.0.4", "app", reserved=True)
    guesses_in(g, clock, "10.0.0.9", 5.0, 10)
    assert g.admit("10.0.0.4", "app") == 0.0


def test_a_success_clears_the_address_and_quiet_forgets() -> None:
    clock = Clock()
    g = guard(clock)
    for _ in range(5):
        clock.now += 10
        g.failed("10.0.0.1", "nobody", "user")
    clock.now += 0.01
    assert g.admit("10.0.0.1", "nobody") > clock.now
    g.succeeded("10.0.0.1", "ops", reserved=True)
    assert g.admit("10.0.0.1", "nobody") == 0.0
    g.failed("10.0.0.5", "nobody", "user")
    clock.now += FORGET_S + 1
    g.failed("10.0.0.5", "nobody", "user")
    assert g.delay(1) == 0.05 and g.admit("10.0.0.5", "nobody") == clock.now + 0.05


def test_off() -> None:
    clock = Clock()
    g = guard(clock, delay=0.0)
    for _ in range(10):
        g.failed("10.0.0.1", "app", "password")
        assert g.admit("10.0.0.1", "app") == 0.0
    assert g.counts.failures["password"] == 10


def test_a_reserved_time_given_back_does_not_hold_the_address_for_ever() -> None:
    clock = Clock()
    g = guard(clock)
    g.failed("10.0.0.1", "app", "password")
    for _ in range(20):  # connections that wait their turn, then hang up
        assert g.admit("10.0.0.1", "app") > clock.now
        g.withdrawn("10.0.0.1")
    assert g._addresses["10.0.0.1"].waiting == 0
    clock.now += FORGET_S + g.max_delay_s * 30
    assert g.admit("10.0.0.1", "app") == 0.0
    assert "10.0.0.1" not in g._addresses
