"""A push that is the same for every viewer (an action, a public event) is one object that every
subscriber gets, encoded once; an event the game redacts differs per viewer as before."""

from __future__ import annotations

import trio

from host.plugins.registry import load_registry
from host.table import commands
from protocol.replies import EventPush, TurnPush
from tests.conftest import start_host
from tests.host.test_commands import Inbox


async def test_viewers_share_the_pushes_that_are_alike_and_not_the_redacted_ones(tmp_path):
    async with trio.open_nursery() as nursery:
        running = await start_host(nursery, tmp_path, load_registry())
        await check_shared_pushes(running)
        running.host.request_shutdown()


async def check_shared_pushes(running) -> None:
    c = await running.client()
    sid = (await c.call("create", game="crazy-eights", seats=2))["session"]
    session = running.host.sessions[sid]
    seats = [Inbox("ann"), Inbox("bob")]
    watcher = Inbox("watcher")
    await seats[0].ask(session, 1, commands.Join("ann", 0))
    await watcher.ask(session, 1, commands.Watch())
    await seats[1].ask(session, 1, commands.Join("bob", 1))
    for rid in range(2, 14):  # draw when allowed (a redacted event), else play the first card
        turn = next(p for inbox in seats for p in reversed(inbox.pushes) if isinstance(p, TurnPush))
        if turn.seq != session.state.seq:
            break  # the deal is over: enough seen
        draw = [a for a in turn.legal if a["type"] == "draw"]
        await seats[turn.seat].ask(session, rid, commands.Act((draw or turn.legal)[0]))

    def by_seq(inbox: Inbox) -> dict[int, EventPush]:
        return {p.seq: p for p in inbox.pushes if isinstance(p, EventPush)}

    ann, bob, seen = by_seq(seats[0]), by_seq(seats[1]), by_seq(watcher)
    common = sorted(ann.keys() & bob.keys() & seen.keys())  # pushed once all three were in
    assert len(common) > 5
    kinds = {"shared": 0, "redacted": 0}
    for seq in common:
        push = seen[seq]
        event = push.event if push.kind == "event" else {}
        if event.get("type") in ("drew", "dealt"):  # hidden cards: each seat its own
            assert ann[seq] is not bob[seq] and ann[seq] != bob[seq]
            kinds["redacted"] += 1
        else:  # an action or a public event: one object for all
            assert ann[seq] is bob[seq] is push
            kinds["shared"] += 1
    assert kinds["shared"] > 0 and kinds["redacted"] > 1
