"""The lobby's decisions without a socket (host/table/lobby.py): what a create writes."""

from __future__ import annotations

import pytest

from host.plugins.registry import load_registry
from host.table.core import format_ts
from host.table.lobby import is_loopback, plan_create
from protocol.messages import ErrorCode, ProtocolError
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
