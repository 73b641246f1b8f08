"""An event the engine just made is encoded to JSON once: the log line and the push that every
viewer shares splice in the same bytes, and both are byte for byte what encoding them whole
gives."""

from __future__ import annotations

import orjson
import trio
from hypothesis import given
from hypothesis import strategies as st

from host.plugins.registry import load_registry
from host.table import commands
from protocol.replies import EventPush, TurnPush
from tests.conftest import start_host
from tests.host.test_commands import Inbox

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)


@given(json_values, st.integers(0, 10**6), st.sampled_from(["event", "action"]))
def test_a_push_with_its_body_encoded_already_is_the_same_line(body, seq, kind):
    plain = EventPush("s-1", seq, kind, body)
    spliced = EventPush.with_encoded_body(
        "s-1", seq, kind, body, orjson.Fragment(orjson.dumps(body))
    )
    assert spliced == plain
    assert (
        spliced.line()
        == plain.line()
        == orjson.dumps(plain.to_wire(), option=orjson.OPT_APPEND_NEWLINE)
    )


async def test_log_lines_and_shared_pushes_reuse_one_encoding_of_an_event(tmp_path):
    async with trio.open_nursery() as nursery:
        running = await start_host(nursery, tmp_path, load_registry())
        c = await running.client()
        sid = (await c.call("create", game="crazy-eights", seats=2))["session"]
        session = running.host.sessions[sid]
        seats = [Inbox("ann"), Inbox("bob")]
        watcher = Inbox("watcher")
        await seats[0].ask(session, 1, commands.Join("ann", 0))
        await watcher.ask(session, 1, commands.Watch())
        await seats[1].ask(session, 1, commands.Join("bob", 1))
        for rid in range(2, 40):
            turn = next(
                p for inbox in seats for p in reversed(inbox.pushes) if isinstance(p, TurnPush)
            )
            if turn.seq != session.state.seq:
                break
            await seats[turn.seat].ask(session, rid, commands.Act(turn.legal[0]))
        running.host.request_shutdown()

    lines = (tmp_path / "sessions" / f"{sid}.jsonl").read_bytes().splitlines(keepends=True)
    for line in lines:  # what the old encoding (the whole record at once) wrote
        assert orjson.dumps(orjson.loads(line), option=orjson.OPT_APPEND_NEWLINE) == line
    spliced = 0
    for push in watcher.pushes:
        if not isinstance(push, EventPush) or push.kind != "event":
            continue
        body = orjson.dumps(push.event)
        if push._line is not None:  # made with its line: the engine's encoding spliced in
            spliced += 1
            assert push._line == orjson.dumps(push.to_wire(), option=orjson.OPT_APPEND_NEWLINE)
            assert b'"event":' + body in lines[push.seq]
        assert push.line() == orjson.dumps(push.to_wire(), option=orjson.OPT_APPEND_NEWLINE)
    assert spliced > 0
