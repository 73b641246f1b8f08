"""The session actor without the wire: typed commands in its mailbox, typed outcomes and pushes
out (host/table/commands.py, protocol/replies.py). Nothing here is JSON."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import trio

from host.table import commands
from protocol.messages import ErrorCode
from protocol.replies import (
    Accepted,
    EventPush,
    Joined,
    Left,
    Refused,
    Resumed,
    TurnPush,
    ViewReply,
    Watching,
)

_keys = itertools.count(1)


@attrs.define(eq=False)
class Inbox:
    """A :class:`host.net.session.Subscriber` that keeps what the actor gives it."""

    peer: str
    key: str = ""  # made by ask(): a key of the host's own instance, as its connections have
    roles: dict[str, Any] = attrs.Factory(dict)
    answers: dict[Any, Any] = attrs.Factory(dict)
    pushes: list[Any] = attrs.Factory(list)
    _settled: trio.Event = attrs.Factory(trio.Event)

    def send(self, push: Any) -> bool:
        self.pushes.append(push)
        return True

    def send_many(self, pushes: list[Any]) -> bool:
        self.pushes.extend(pushes)
        return True

    def answer(self, rid: Any, outcome: Any) -> None:
        self.answers[rid] = outcome

    def settled(self) -> None:
        self._settled.set()

    def attached(self, session: str, viewer: Any) -> None:
        self.roles[session] = viewer

    def detached(self, session: str) -> None:
        self.roles.pop(session, None)

    async def ask(self, session: Any, rid: Any, command: commands.Command) -> Any:
        """Submit a command and wait until the actor has answered it."""
        self._settled = trio.Event()
        if not self.key:
            self.key = f"{session.table.instance}.inbox{next(_keys)}"
        session.submit(self, rid, command)
        await self._settled.wait()
        return self.answers[rid]


async def test_the_actor_takes_typed_commands_and_answers_typed_outcomes(toy_host):
    c = await toy_host.client()
    sid = (await c.call("create", game="high-card", seats=2))["session"]
    session = toy_host.host.sessions[sid]
    ann, bob, w1, w2 = Inbox("ann"), Inbox("bob"), Inbox("w1"), Inbox("w2")

    joined = await ann.ask(session, 1, commands.Join("ann"))
    assert isinstance(joined, Joined) and joined.seat == 0 and not joined.snapshot.started
    assert isinstance(await w1.ask(session, 1, commands.Watch()), Watching)
    assert isinstance(await w2.ask(session, 1, commands.Watch()), Watching)
    joined_b = await bob.ask(session, 1, commands.Join("bob", 1))
    assert joined_b.seat == 1 and joined_b.snapshot.started and joined_b.snapshot.to_act == [0]
    turn = ann.pushes[-1]
    assert isinstance(turn, TurnPush) and turn.seat == 0 and turn.seq == joined_b.snapshot.seq

    stale = await ann.ask(session, 2, commands.Act({"type": "keep"}, expected=0))
    assert stale == Refused(ErrorCode.CONFLICT, stale.message, {"seq": turn.seq})
    not_yours = await bob.ask(session, 2, commands.Act({"type": "keep"}))
    assert isinstance(not_yours, Refused) and not_yours.code is ErrorCode.NOT_YOUR_TURN
    acted = await ann.ask(session, 3, commands.Act({"type": "keep"}, expected=turn.seq))
    assert acted == Accepted(turn.seq + 2)  # the action record and the game's event

    # one push object per record and viewer: both spectators hold the same one (encoded once)
    mine = [p for p in w1.pushes if isinstance(p, EventPush) and p.seq > turn.seq]
    theirs = [p for p in w2.pushes if isinstance(p, EventPush) and p.seq > turn.seq]
    assert [p.seq for p in mine] == [turn.seq + 1, turn.seq + 2]
    assert all(a is b for a, b in zip(mine, theirs, strict=True))
    assert [p.kind for p in mine] == ["action", "event"]

    view = await bob.ask(session, 3, commands.View())
    assert isinstance(view, ViewReply) and view.snapshot.to_act == [1]
    assert isinstance(await bob.ask(session, 4, commands.Leave()), Left)
    assert bob.roles == {}  # told it holds nothing there any more
    again = Inbox("bob again")
    resumed = await again.ask(session, 1, commands.Resume(joined_b.token, after=turn.seq))
    assert isinstance(resumed, Resumed) and resumed.seat == 1 and again.roles == {sid: 1}
    got = [p for p in again.pushes if isinstance(p, EventPush)]
    assert [p.seq for p in got] == [p.seq for p in mine] + [turn.seq + 3, turn.seq + 4]
    assert [(p.kind, p.event) for p in got[2:]] == [  # bob left, then took the seat back
        ("seat_released", {"seat": 1}),
        ("seat_held", {"seat": 1}),
    ]
    assert isinstance(again.pushes[-1], TurnPush) and again.pushes[-1].seat == 1
    bad = await again.ask(session, 2, commands.Resume("no such token"))
    assert isinstance(bad, Refused) and bad.code is ErrorCode.BAD_TOKEN
