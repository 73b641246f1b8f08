"""The lobby's decisions without a socket (host/table/lobby.py): what a create writes, who may
create now, what a ``sessions`` page holds; and a connection's silence rules
(host/table/liveness.py)."""

from __future__ import annotations

import math

import pytest

from host.plugins.registry import load_registry
from host.table.core import format_ts
from host.table.liveness import Liveness
from host.table.lobby import CreateLimiter, Lobby, is_loopback, plan_create, sessions_page
from protocol.messages import ErrorCode, ProtocolError
from protocol.replies import SessionSummary
from tests.table.world import T0

ENGINE = load_registry().engines["crazy-eights"]


def test_a_create_writes_the_header_and_the_bots_seats_with_one_time() -> None:
    made = plan_create(ENGINE, "s1", b"\x01" * 32, None, 3, 2, 30.0, T0)
    kinds = [(r.type, r.data.get("seat")) for r in made.records]
    assert kinds == [("header", None), ("seat_taken", 1), ("seat_taken", 2)]
    assert made.bots == [1, 2] and made.records[0].data["turn_timeout"] == 30.0
    assert {r.ts for r in made.records} == {format_ts(T0)}
    assert made.states[-1].seq == 2 and not made.states[-1].started


def test_an_all_bot_create_holds_the_opening_events_too() -> None:
    made = plan_create(ENGINE, "s1", b"\x01" * 32, None, 2, 2, None, T0)
    assert made.states[-1].started and made.records[-1].type == "event"
    assert made.records[0].data["turn_timeout"] is None


@pytest.mark.parametrize(
    ("seats", "bots", "timeout"), [(1, 0, None), (9, 0, None), (2, 3, None), (2, 0, -1.0)]
)
def test_bad_seats_bots_or_timers_are_bad_requests(seats, bots, timeout) -> None:
    with pytest.raises(ProtocolError) as got:
        plan_create(ENGINE, "s1", b"\x01" * 32, None, seats, bots, timeout, T0)
    assert got.value.code is ErrorCode.BAD_REQUEST


def test_loopback_addresses() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1")
    assert not is_loopback("10.0.0.1") and not is_loopback("not an address")


def _lobby(max_sessions: int = 100, unstarted: int = 2, burst: int = 3, rate: float = 1.0):
    return Lobby(max_sessions, unstarted, CreateLimiter(burst, rate), limit_loopback=False)


def _code(call) -> tuple[ErrorCode, dict]:
    with pytest.raises(ProtocolError) as got:
        call()
    return got.value.code, got.value.extra


def test_a_connection_and_an_address_may_hold_a_few_unstarted_sessions() -> None:
    lobby = _lobby()
    waiting = {"a", "b"}
    live = waiting.__contains__
    # the connection's own cap: its unstarted sessions (those no longer waiting are dropped)
    assert lobby.check_create({"a", "gone"}, "10.0.0.1", 0.0, live) == {"a"}
    code, _ = _code(lambda: lobby.check_create({"a", "b"}, "10.0.0.1", 0.0, live))
    assert code is ErrorCode.OVERLOADED
    # the address's cap, across connections (reconnecting does not get round it)
    lobby.created("10.0.0.2", "a")
    lobby.created("10.0.0.2", "b")
    code, _ = _code(lambda: lobby.check_create(set(), "10.0.0.2", 0.0, live))
    assert code is ErrorCode.OVERLOADED
    assert lobby.check_create(set(), "127.0.0.1", 0.0, live) == set()  # loopback: no such cap
    lobby.forget("a")  # it left memory: the address may create again
    assert lobby.created_from("10.0.0.2") == {"b"}
    assert lobby.check_create(set(), "10.0.0.2", 0.0, live) == set()
    lobby.forget("b")
    assert lobby.created_from("10.0.0.2") == set() and not lobby._created_by


def test_the_address_rate_says_when_to_retry_and_spends_nothing_when_refused() -> None:
    lobby = _lobby(burst=2, rate=0.5)
    never = lambda sid: False  # noqa: E731
    lobby.check_create(set(), "10.0.0.1", 0.0, never)
    lobby.check_create(set(), "10.0.0.1", 0.0, never)
    code, extra = _code(lambda: lobby.check_create(set(), "10.0.0.1", 0.5, never))
    assert code is ErrorCode.OVERLOADED and extra["retry_after"] == 1.5
    lobby.check_create(set(), "10.0.0.1", 2.0, never)  # one token back after 2 s


def test_a_full_host_refuses_new_sessions_unless_some_have_ended() -> None:
    lobby = _lobby(max_sessions=2)
    lobby.check_room(1, lambda: 1)
    code, _ = _code(lambda: lobby.check_room(2, lambda: 2))
    assert code is ErrorCode.OVERLOADED
    lobby.check_room(2, lambda: 1)  # one of the two has ended (it lingers)


def _summary(sid: str, name: str = "ann") -> SessionSummary:
    return SessionSummary(sid, "crazy-eights", [None, None], [0, 1], False, False, 0)


def test_a_sessions_page_ends_at_its_limit_or_its_bytes() -> None:
    rows = [_summary(f"s{i}") for i in range(5)]
    page = sessions_page(iter(rows), 2)
    assert [s.session for s in page.sessions] == ["s0", "s1"] and page.next == "s1"
    page = sessions_page(iter(rows), 10)
    assert len(page.sessions) == 5 and page.next is None
    one = len(__import__("orjson").dumps(rows[0].to_wire())) + 1
    page = sessions_page(iter(rows), 10, max_bytes=2 * one)
    assert [s.session for s in page.sessions] == ["s0", "s1"] and page.next == "s1"
    page = sessions_page(iter(rows), 10, max_bytes=1)  # the first always fits
    assert [s.session for s in page.sessions] == ["s0"] and page.next == "s0"


def test_a_silent_connection_is_closed_when_idle_and_pinged_when_it_plays() -> None:
    rules = Liveness(idle_timeout=300.0, line_timeout=30.0, ping_after=30.0, ping_timeout=30.0)
    # a lobby connection: closed when idle; a line begun must end
    assert rules.deadline(10.0, 0.0, None, 0.0, False, False) == (300.0, "idle")
    assert rules.deadline(10.0, 0.0, 5.0, 0.0, False, False) == (35.0, "line_timeout")
    assert rules.deadline(10.0, 0.0, None, 0.0, True, False) == (310.0, None)  # answers due
    # a seated one: pinged 30 s after it was last heard from, closed 30 s after the ping
    assert rules.deadline(10.0, 0.0, None, 0.0, False, True) == (30.0, "ping")
    rules.pinged = 30.0
    assert rules.deadline(31.0, 0.0, None, 0.0, False, True) == (60.0, "unresponsive")
    # a Pong (heard) after the ping answers it: the next ping is due 30 s after that
    assert rules.deadline(40.0, 0.0, None, 35.0, False, True) == (65.0, "ping")
    assert rules.pinged is None
    off = Liveness()
    assert off.deadline(10.0, 0.0, None, 0.0, False, True) == (math.inf, None)
