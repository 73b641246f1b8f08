"""The operator's ``End`` command on the table core alone: an ``ended`` record that every
subscriber of every host is shown, that replays, and after which nothing more is appended."""

from __future__ import annotations

import pytest

from host.plugins.registry import load_registry
from host.table.commands import Act, End, Watch
from host.table.history import verify_log
from protocol.messages import ErrorCode
from protocol.replies import Accepted, Refused
from tests.table.test_core import join_all
from tests.table.world import World, new_log

ENGINE = load_registry().engines["crazy-eights"]


@pytest.mark.parametrize("hosts", [1, 2])
def test_the_operator_ends_a_session_for_every_subscriber_and_it_replays(hosts: int) -> None:
    world = World(ENGINE, new_log(ENGINE, 3, bots=1), hosts=hosts)
    players = join_all(world, 2, host_of=lambda i: i % hosts)
    spectator = world.client("spectator", hosts - 1)
    world.command(spectator, Watch())
    operator = world.client("operator", hosts - 1)  # on the host that does not drive, if two
    reply = world.command(operator, End("admin"))
    assert isinstance(reply, Accepted), reply
    records = world.records()
    assert reply.seq == records[-1].seq
    end = records[-1]
    assert end.type == "ended" and end.data["outcome"] is None and end.data["aborted"] == "admin"
    for c in (*players, spectator):
        assert [(e.seq, e.outcome, e.aborted) for e in c.ended] == [(end.seq, None, "admin")]
        assert c.events[end.seq][0] == "ended"
    assert operator.ended == []  # it watches nothing: it is answered, not pushed
    assert verify_log(ENGINE, records) is None
    again = world.command(operator, End("admin"))
    assert isinstance(again, Refused) and again.code is ErrorCode.SESSION_ENDED
    turn = players[0].turns[-1] if players[0].turns else None
    if turn is not None:
        late = world.command(players[0], Act(turn.legal[0], expected=turn.seq))
        assert isinstance(late, Refused)
    assert world.records() == records  # nothing after the end
