"""``tools.client.Client`` against a scripted host on an in-memory stream: the host's ``ping``
pushes are answered by the client itself, between a request and its reply too, without
confusing which reply answers which request."""

from __future__ import annotations

import orjson
import trio
import trio.testing

from tools.client import PING_ID, Client


class ScriptedHost:
    """The host's end of a client's stream: reads request lines, writes whatever it is told."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buf = b""

    async def read(self) -> dict:
        while b"\n" not in self.buf:
            data = await self.stream.receive_some(65536)
            assert data, "the client hung up"
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return orjson.loads(line)

    async def write(self, *messages: dict) -> None:
        await self.stream.send_all(b"".join(orjson.dumps(m) + b"\n" for m in messages))


async def test_a_ping_between_a_request_and_its_reply_is_answered_and_kept_apart():
    client_end, host_end = trio.testing.memory_stream_pair()
    host = ScriptedHost(host_end)
    c = Client(client_end)
    with trio.fail_after(10):
        async with trio.open_nursery() as n:
            c.start(n)

            async def serve() -> None:
                req = await host.read()
                assert req == {"id": 1, "op": "view", "session": "s"}
                await host.write({"push": "ping"})
                answer = await host.read()  # answered before the view's reply came
                assert answer == {"id": PING_ID, "op": "ping"}
                # the ping's reply first, then the view's: each goes where it belongs
                await host.write(
                    {"id": PING_ID, "ok": True, "result": {"pong": True}},
                    {"push": "event", "session": "s", "seq": 2, "kind": "event", "event": {}},
                    {"id": 1, "ok": True, "result": {"seq": 2}},
                )

            n.start_soon(serve)
            assert await c.call("view", session="s") == {"seq": 2}
            assert c.pings_answered == 1
            assert (await c.next_push())["push"] == "event"  # the ping was not queued
            assert c.pushes.statistics().current_buffer_used == 0
            n.cancel_scope.cancel()


async def test_with_answering_off_a_ping_is_queued_and_left_unanswered(autojump_clock):
    client_end, host_end = trio.testing.memory_stream_pair()
    host = ScriptedHost(host_end)
    c = Client(client_end, answer_pings=False)
    with trio.fail_after(1000):
        async with trio.open_nursery() as n:
            c.start(n)
            await host.write({"push": "ping"})
            assert await c.next_push() == {"push": "ping"}
            n.start_soon(c.call, "ping")
            assert await host.read() == {"id": 1, "op": "ping"}  # the caller's own, nothing else
            with trio.move_on_after(100):
                extra = await host.read()
                raise AssertionError(f"the client sent {extra}")
            assert c.pings_answered == 0
            n.cancel_scope.cancel()
