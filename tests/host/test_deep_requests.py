"""Nested or oversized request ids, and deep nesting in any field, over real TCP and a
WebSocket: each line is answered with a typed error (its id null when the id was not one) and
the connection keeps serving; the host logs no traceback."""

from __future__ import annotations

import orjson
import pytest
import trio
from structlog.testing import capture_logs

from protocol.messages import MAX_ID
from tests.conftest import start_host
from tests.wsclient import LineOverWebSocket, open_ws


def nested(depth: int) -> bytes:
    return b"[" * depth + b"1" + b"]" * depth


LINES = [  # (line, code, the reply's id)
    (b'{"id":' + nested(300) + b',"op":"ping"}', "bad_request", None),
    (b'{"id":' + nested(254) + b',"op":"ping"}', "bad_request", None),
    (b'{"id":' + nested(1023) + b',"op":"ping"}', "bad_request", None),
    (b'{"id":' + nested(1030) + b',"op":"ping"}', "bad_json", None),
    (b'{"id":{"a":{"b":[1]}},"op":"ping"}', "bad_request", None),
    (b'{"id":"' + b"x" * (MAX_ID + 1) + b'","op":"ping"}', "bad_request", None),
    (b'{"id":1.5,"op":"ping"}', "bad_request", 1.5),
    (b'{"id":3,"op":"act","session":"s","action":' + nested(500) + b"}", "bad_request", 3),
    (b'{"id":4,"op":"act","session":"s","action":' + nested(1023) + b"}", "bad_request", 4),
    (b'{"id":5,"op":"create","game":"high-card","options":' + nested(300) + b"}", "bad_request", 5),
    (b'{"id":6,"op":"join","session":"s","name":' + nested(700) + b"}", "bad_request", 6),
]


async def read_line(stream: trio.abc.Stream, buf: bytearray) -> dict:
    while b"\n" not in buf:
        data = await stream.receive_some(65536)
        assert data, "the host hung up"
        buf += data
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return orjson.loads(line)


async def exchange(stream: trio.abc.Stream) -> None:
    buf = bytearray()
    for line, code, rid in LINES:
        await stream.send_all(line + b"\n")
        reply = await read_line(stream, buf)
        assert (reply["ok"], reply["error"]["code"], reply["id"]) == (False, code, rid), line[:60]
        await stream.send_all(b'{"id":"after","op":"ping"}\n')  # the connection still serves
        assert await read_line(stream, buf) == {"id": "after", "ok": True, "result": {"pong": True}}


@pytest.mark.parametrize("transport", ["tcp", "websocket"])
async def test_deep_and_oversized_requests_get_typed_errors_and_keep_the_connection(
    tmp_path, transport
):
    with capture_logs() as logged, trio.fail_after(60):
        async with trio.open_nursery() as n:
            running = await start_host(n, tmp_path, http_port=0)
            if transport == "tcp":
                stream: trio.abc.Stream = await trio.open_tcp_stream("127.0.0.1", running.port)
            else:
                stream = LineOverWebSocket(await open_ws(n, running.host.http_port))
            await exchange(stream)
            await stream.aclose()
            running.host.request_shutdown()
    failures = [e for e in logged if e["log_level"] in ("error", "critical")]
    assert not failures, failures
