"""The floor ``gamehost bench --baseline`` compares the host with: a bare trio JSON-lines server.

It does only what any server speaking this protocol's framing must do, and nothing a game host
adds (no game, no log, no views): it reads lines with :class:`protocol.framing.LineBuffer`,
parses each with orjson, and answers every ``act`` request by encoding (orjson) and queueing
``--lines`` lines of ``--line-bytes`` bytes each (newline included) to the connections of the
requester's table — the pushes spread round-robin over the table's connections, the reply to the
requester last. Each connection has an outbox and a writer task that sends everything queued in
one ``send_all``, as the host's connections do. ``--lines`` may be fractional (say 6.3): each
request then writes the floor or the ceiling, so that the average over the run is ``--lines``;
every request writes at least its reply.

Requests (one JSON object a line; anything else gets an ``{"ok": false}`` reply):

- ``{"id": I, "op": "join", "table": T}`` — this connection is one of table ``T``'s; reply
  ``{"id": I, "ok": true, "result": {}}``.
- ``{"id": I, "op": "act", "table": T, ...}`` — the lines above; other fields (say a ``pad``
  making the request as large as the host's ``act``) are parsed and ignored.

With ``--echo`` it is barer still (what ``gamehost bench --idle`` compares the host's idle
connections with): one task per connection, which answers each line with
``{"id": I, "ok": true}`` on the same connection itself (no writer task, no outbox, no tables).

Run it as ``python -m tools.baseline --port 0 --lines 6.3 --line-bytes 120``; it logs
``{"event": "listening", "port": N}`` on stderr once it accepts connections, then runs until it
is killed (SIGTERM or SIGINT).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from functools import partial
from typing import Any

import orjson
import trio

from protocol.framing import MAX_LINE, LineBuffer, LineTooLong, kept

__all__ = ["Baseline", "echo", "main", "pad_for"]

# the lines' shapes for sizing their pads (a reply's id varies: sized for a 4-digit one)
_PUSH_SHAPE = {"push": "event", "table": "t0", "pad": ""}
_REPLY_SHAPE = {"id": 1000, "ok": True, "result": {"pad": ""}}


def pad_for(shape: dict[str, Any], size: int) -> str:
    """A pad string that makes ``shape`` (with ``pad`` set to it) encode to about ``size`` bytes.

    Args:
        shape: a JSON object with a ``pad`` field (anywhere at the top level or in ``result``).
        size: the wanted encoded size in bytes, the newline included.
    """
    bare = len(orjson.dumps(shape)) + 1
    return "x" * max(0, size - bare)


class _Conn:
    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.send, self.recv = trio.open_memory_channel[bytes](math.inf)

    async def writer(self) -> None:
        try:
            async for line in self.recv:
                chunk = [line]
                while True:
                    try:
                        chunk.append(self.recv.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                await self.stream.send_all(b"".join(chunk) if len(chunk) > 1 else line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


class Baseline:
    """The server's state: tables of connections and the line budget.

    Args:
        lines: lines written per ``act`` request, on average (at least 1).
        line_bytes: bytes per line, the newline included.
    """

    def __init__(self, lines: float, line_bytes: int) -> None:
        self.lines = max(1.0, lines)
        self.push_pad = pad_for(_PUSH_SHAPE, line_bytes)
        self.reply_pad = pad_for(_REPLY_SHAPE, line_bytes)
        self.tables: dict[str, list[_Conn]] = {}
        self._owed = 0.0  # fractional lines carried to the next request
        self._next = 0  # round-robin start over a table's connections
        self.requests = 0

    def _count(self) -> int:
        self._owed += self.lines
        n = int(self._owed)
        self._owed -= n
        return max(1, n)

    def handle(self, conn: _Conn, line: bytes) -> None:
        """Parse one request line and queue its answer lines."""
        try:
            msg = orjson.loads(line)
            rid = msg.get("id")
            op = msg.get("op")
            table = str(msg.get("table"))
        except (orjson.JSONDecodeError, AttributeError):
            conn.send.send_nowait(orjson.dumps({"id": None, "ok": False}) + b"\n")
            return
        if op == "join":
            self.tables.setdefault(table, []).append(conn)
            conn.send.send_nowait(orjson.dumps({"id": rid, "ok": True, "result": {}}) + b"\n")
            return
        members = self.tables.get(table)
        if op != "act" or not members:
            conn.send.send_nowait(orjson.dumps({"id": rid, "ok": False}) + b"\n")
            return
        self.requests += 1
        for i in range(self._count() - 1):
            to = members[(self._next + i) % len(members)]
            to.send.send_nowait(
                orjson.dumps(
                    {"push": "event", "table": table, "pad": self.push_pad},
                    option=orjson.OPT_APPEND_NEWLINE,
                )
            )
        self._next += 1
        conn.send.send_nowait(
            orjson.dumps(
                {"id": rid, "ok": True, "result": {"pad": self.reply_pad}},
                option=orjson.OPT_APPEND_NEWLINE,
            )
        )

    def forget(self, conn: _Conn) -> None:
        for members in self.tables.values():
            if conn in members:
                members.remove(conn)

    async def serve(self, stream: trio.SocketStream) -> None:
        """Serve one connection until EOF."""
        conn = _Conn(stream)
        framer = LineBuffer(MAX_LINE)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(conn.writer)
                while True:
                    try:
                        data = await stream.receive_some(65536)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        break
                    if not data:
                        break
                    for item in framer.feed(data):
                        if not isinstance(item, LineTooLong):
                            self.handle(conn, item)
                    await trio.lowlevel.checkpoint()
                conn.send.close()
        finally:
            self.forget(conn)
            await stream.aclose()


async def echo(stream: trio.SocketStream) -> None:
    """``--echo``: answer each line with ``{"id": I, "ok": true}`` from this one task."""
    framer = LineBuffer(MAX_LINE)
    try:
        while data := await stream.receive_some(65536):
            out = []
            for item in framer.feed(data):
                rid = None
                if not isinstance(item, LineTooLong):
                    with contextlib.suppress(orjson.JSONDecodeError, AttributeError):
                        rid = orjson.loads(item).get("id")
                # kept: the last reply stays referenced while the task waits, and orjson's
                # output holds 4 KiB whatever its length (see protocol.framing.kept)
                out.append(kept(orjson.dumps({"id": rid, "ok": True}) + b"\n"))
            if out:
                await stream.send_all(b"".join(out))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await stream.aclose()


async def _run(port: int, baseline: Baseline | None) -> None:
    handler = baseline.serve if baseline is not None else echo
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handler, port, host="127.0.0.1"))
        bound = listeners[0].socket.getsockname()[1]
        sys.stderr.write(orjson.dumps({"event": "listening", "port": bound}).decode() + "\n")
        sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    """Run the baseline server until killed."""
    p = argparse.ArgumentParser(prog="python -m tools.baseline", description=__doc__)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--lines", type=float, default=1.0, help="lines per request, on average")
    p.add_argument("--line-bytes", type=int, default=100, help="bytes per line, newline included")
    p.add_argument(
        "--echo",
        action="store_true",
        help="one task per connection answering each line itself (for bench --idle)",
    )
    args = p.parse_args(argv)
    try:
        trio.run(_run, args.port, None if args.echo else Baseline(args.lines, args.line_bytes))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
