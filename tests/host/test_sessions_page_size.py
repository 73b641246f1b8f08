"""A ``sessions`` page stays within the 64 KiB line limit however long the players' names are:
the host lists fewer than ``limit`` sessions then, and ``next`` goes on from there."""

from __future__ import annotations

import orjson
import trio

from host.plugins.registry import load_registry
from protocol.framing import MAX_LINE, LineBuffer
from tests.conftest import start_host

SEATS = 9
SESSIONS = 40
NAME = "\u4e00" * 64  # the longest name a join keeps, 3 bytes a character in UTF-8


class Line:
    """One raw TCP connection: a request, then the raw reply line (pushes skipped)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.framer = LineBuffer(1 << 24)
        self.lines: list[bytes] = []

    async def call(self, op: str, **params: object) -> bytes:
        await self.stream.send_all(orjson.dumps({"id": 1, "op": op, **params}) + b"\n")
        while True:
            while self.lines:
                line = self.lines.pop(0)
                if not line.startswith(b'{"push"'):
                    return line
            data = await self.stream.receive_some(1 << 20)
            assert data, "the host closed the connection"
            self.lines += self.framer.feed(data)


async def test_a_sessions_page_of_long_names_fits_in_a_line(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, load_registry(), max_unstarted=SESSIONS)
        players = [
            Line(await trio.open_tcp_stream("127.0.0.1", running.port)) for _ in range(SEATS)
        ]
        made = []
        for _ in range(SESSIONS):
            got = orjson.loads(
                await players[0].call("create", game="around-the-world", seats=SEATS)
            )
            assert got["ok"], got
            made.append(got["result"]["session"])
        for sid in made:
            for seat, player in enumerate(players):
                got = orjson.loads(await player.call("join", session=sid, seat=seat, name=NAME))
                assert got["ok"], got
        lobby = Line(await trio.open_tcp_stream("127.0.0.1", running.port))
        listed, after = [], None
        while True:
            line = await lobby.call("sessions", limit=500, after=after)
            assert len(line) <= MAX_LINE
            page = orjson.loads(line)["result"]
            assert page["sessions"]
            listed += [s["session"] for s in page["sessions"]]
            after = page["next"]
            if after is None:
                break
        assert listed == sorted(made)
        for c in (*players, lobby):
            await c.stream.aclose()
        running.host.request_shutdown()
