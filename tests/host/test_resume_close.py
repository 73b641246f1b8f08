"""A resume whose connection closes before its reply takes nothing, however late the close.

The case the table cannot see when it decides: the client sends ``resume`` and hangs up (an end
of input, a reset, a WebSocket close frame) while the resume's ``seat_held`` record is being
written. Each test holds that append until the client has closed, so the close always lands in
that window; the seat's holder — on the same host, or on another host sharing the store — must
not be told ``detached``, must be shown the resume's record and the one giving the seat back
(``seat_held`` with ``returned``), and must go on playing.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from trio_websocket import connect_websocket

from host.store.feed import MemoryHub
from tests.conftest import RunningHost, start_host
from tests.host.test_multi_host import Shared, client, start_shared
from tests.host.test_server import new_session
from tools.client import Client

KINDS = ["fin", "rst", "ws"]


@pytest.fixture(params=["memory", "postgres"])
def shared(request: pytest.FixtureRequest) -> Shared:
    """Two hosts share an in-process hub, or a throwaway PostgreSQL database."""
    if request.param == "memory":
        return Shared(hub=MemoryHub())
    return Shared(url=request.getfixturevalue("pg_store_url"))


def hold_resume_appends(host: Any) -> tuple[trio.Event, trio.Event]:
    """Make ``host``'s store hold an append holding a resume's ``seat_held`` until the second
    event is set; the first is set once such an append has begun."""
    began, go = trio.Event(), trio.Event()
    store = host.store
    append = store.append

    async def held(session: str, expected: int, records: list[dict[str, Any]]) -> None:
        if any(r["type"] == "seat_held" and "returned" not in r for r in records):
            began.set()
            await go.wait()
        await append(session, expected, records)

    store.append = held
    return began, go


async def resume_and_close(
    nursery: trio.Nursery, host: RunningHost, kind: str, line: bytes, began: trio.Event
) -> None:
    """Send ``line`` (a resume) to ``host`` over TCP or a WebSocket, and once its append has
    begun close the connection as ``kind`` says."""
    if kind == "ws":
        ws = await connect_websocket(
            nursery, "127.0.0.1", host.host.http_port, "/ws", use_ssl=False
        )
        await ws.send_message(line.decode().strip())
        await began.wait()
        await ws.aclose()  # a close frame right behind the resume
        return
    stream = await trio.open_tcp_stream("127.0.0.1", host.port)
    await stream.send_all(line)
    await began.wait()
    if kind == "fin":
        await stream.send_eof()
        await stream.aclose()
    else:  # a reset: SO_LINGER 0, then close
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await stream.aclose()


async def holder_keeps_its_seat(holder: Client, sid: str, base: int, records: Any) -> None:
    """The holder (which joined at seq ``base``) is shown the resume's record and the one
    giving the seat back, never ``detached``, and plays on."""
    shown = []
    with trio.fail_after(30):
        while True:
            push = await holder.next_push()
            assert push is not None
            shown.append(push)
            assert push["push"] != "detached", shown
            if push["push"] == "presence" and push["seq"] == base + 2:
                break
    recs = await records(sid)
    held, back = recs[base + 1], recs[base + 2]
    assert held["type"] == "seat_held" and "returned" not in held
    assert back["type"] == "seat_held" and back["returned"] == base + 1
    events = [(p["seq"], p["kind"]) for p in shown if p["push"] == "event"]
    assert events == [(base + 1, "seat_held"), (base + 2, "seat_held")]
    played = await holder.request("act", session=sid, action={"type": "keep"})
    assert played["ok"], played


@pytest.mark.parametrize("kind", KINDS)
async def test_on_one_host(tmp_path: Path, kind: str) -> None:
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, http_port=0)
        holder = await running.client()
        sid = await new_session(holder, seats=2, bots=1)
        joined = await holder.call("join", session=sid, name="ann")
        base = joined["seq"]
        began, go = hold_resume_appends(running.host)
        line = orjson.dumps(
            {"id": 1, "op": "resume", "session": sid, "token": joined["token"], "after": base}
        )
        await resume_and_close(n, running, kind, line + b"\n", began)
        go.set()

        async def records(sid: str) -> list[dict[str, Any]]:
            return await running.host.store.read(sid)

        await holder_keeps_its_seat(holder, sid, base, records)
        running.host.request_shutdown()


@pytest.mark.parametrize("kind", KINDS)
async def test_across_two_hosts(tmp_path: Path, shared: Shared, kind: str) -> None:
    """The holder on host A, the resume on host B: A holds its connection's pushes back until
    B has given the seat back, then lets them out."""
    async with trio.open_nursery() as n:
        a = await start_shared(n, shared, tmp_path / "a")
        b = await start_shared(n, shared, tmp_path / "b", http_port=0)
        holder = await client(n, a)
        sid = await new_session(holder, seats=2, bots=1)
        joined = await holder.call("join", session=sid, name="ann")
        base = joined["seq"]
        began, go = hold_resume_appends(b.host)
        line = orjson.dumps(
            {"id": 1, "op": "resume", "session": sid, "token": joined["token"], "after": base}
        )
        await resume_and_close(n, b, kind, line + b"\n", began)
        go.set()
        await holder_keeps_its_seat(holder, sid, base, shared.records)
        n.cancel_scope.cancel()
