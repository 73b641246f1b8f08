"""A live host's lines, read with the typed messages of protocol/replies.py (as tools/client.py
offers them): each line decodes into its typed message and encodes back to the very same bytes,
so nothing the host sends falls outside the typed messages (or PROTOCOL.md)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import trio

from protocol.framing import LineBuffer
from protocol.messages import ErrorCode
from protocol.replies import (
    Accepted,
    Created,
    EndedPush,
    EventPush,
    GamesResult,
    HelloResult,
    Joined,
    Left,
    Pong,
    Reply,
    Resumed,
    SessionsPage,
    TurnPush,
    ViewReply,
    Watching,
    decode_line,
    encode_message,
)
from tools.client import Client, HostError


class Recording(trio.abc.Stream):
    """A stream that keeps every byte received and the op of every request sent."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.received = bytearray()
        self.ops: dict[Any, str] = {}

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        for line in bytes(data).splitlines():
            req = orjson.loads(line)
            self.ops[req.get("id")] = req.get("op")
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        self.received += data
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


async def recording_client(running: Any) -> tuple[Client, Recording]:
    rec = Recording(await trio.open_tcp_stream("127.0.0.1", running.port))
    c = Client(rec)
    c.start(running.nursery)
    return c, rec


def assert_every_line_round_trips(rec: Recording) -> list[Any]:
    lines = LineBuffer().feed(bytes(rec.received))
    assert lines, "nothing was received"
    out = []
    for line in lines:
        assert isinstance(line, bytes)
        raw = orjson.loads(line)
        op = None if "push" in raw else rec.ops[raw["id"]]
        msg = decode_line(line, op)
        if isinstance(msg, Reply) and msg.ok:
            assert not isinstance(msg.outcome, dict), f"{op}'s result was not read typed"
        assert encode_message(msg) == line + b"\n", f"{op or raw['push']} drifted"
        out.append(msg)
    return out


async def test_a_whole_session_read_typed_is_byte_for_byte_what_the_host_sent(toy_host):
    a, rec_a = await recording_client(toy_host)
    hello = await a.ask("hello", protocol=1, client="typed")
    assert isinstance(hello, HelloResult) and hello.capabilities.games == ["high-card"]
    assert isinstance(await a.ask("ping"), Pong)
    games = await a.ask("games")
    assert isinstance(games, GamesResult) and games.games[0].options[0].choices == [1, 2]
    created = await a.ask("create", game="high-card", seats=2, bots=1)
    assert isinstance(created, Created) and created.bots == [1] and created.free == [0]
    page = await a.ask("sessions")
    assert isinstance(page, SessionsPage) and [s.session for s in page.sessions] == [
        created.session
    ]
    sid = created.session
    joined = await a.ask("join", session=sid, name="ann")
    assert (
        isinstance(joined, Joined) and joined.seat == 0 and joined.snapshot.seats[0].name == "ann"
    )
    w, rec_w = await recording_client(toy_host)
    assert isinstance(await w.ask("watch", session=sid), Watching)

    with pytest.raises(HostError) as refused:
        await a.ask("act", session=sid, action={"type": "keep"}, seq=0)
    assert refused.value.refused.code is ErrorCode.CONFLICT
    assert refused.value.refused.extra == {"seq": joined.snapshot.seq}

    seen = joined.snapshot.seq
    while True:
        p = await a.next_message()
        assert p is not None
        if isinstance(p, EventPush):
            assert p.seq == seen + 1
            seen = p.seq
        elif isinstance(p, TurnPush) and p.seat == 0:
            done = await a.ask("act", session=sid, action=p.legal[0], seq=p.seq)
            assert isinstance(done, Accepted) and done.seq > p.seq
        elif isinstance(p, EndedPush):
            break
    view = await a.ask("view", session=sid)
    assert isinstance(view, ViewReply) and view.snapshot.ended and view.snapshot.seq == seen
    assert isinstance(await a.ask("leave", session=sid), Left)

    b, rec_b = await recording_client(toy_host)
    resumed = await b.ask("resume", session=sid, token=joined.token, after=0)
    assert isinstance(resumed, Resumed) and resumed.seat == 0
    while not isinstance(await b.next_message(), EndedPush):
        pass
    while not isinstance(await w.next_message(), EndedPush):
        pass

    kinds = set()
    for rec in (rec_a, rec_w, rec_b):
        kinds |= {type(m).__name__ for m in assert_every_line_round_trips(rec)}
    assert {"Reply", "EventPush", "TurnPush", "EndedPush"} <= kinds
