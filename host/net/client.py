"""A small trio client for protocol v1, used by the tools (``play``, ``demo``, ``bench``), the
plugin kit (:mod:`host.testing`) and the tests; the host itself never imports it.

It frames lines with :mod:`protocol.framing`, matches replies to requests by ``id`` and queues
pushes for the caller. One reader task per client feeds both.

Two ways to read what the host sends, over the same lines: the typed messages of
:mod:`protocol.replies`, which are what the host itself builds (:meth:`Client.ask` returns an
op's typed result, :meth:`Client.reply` the whole typed reply, :meth:`Client.next_message` the
next typed push); or the JSON objects as they came (:meth:`Client.request`, :meth:`Client.call`,
:meth:`Client.next_push`), for tests of the exact wire shape and for tools that only look at a
field or two.

The host pings a connection that plays or watches a session when it has been silent for a
while (``serve --ping-after``) and hangs up on it if it does not answer. The client answers
each ``ping`` push by itself with a ``ping`` request (whose reply it drops), so a player that
thinks for long keeps its seat; those pushes are not queued for the caller. Tests of an
unresponsive client turn that off (``answer_pings=False``): the pushes are then queued as any.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import orjson
import trio

from protocol.framing import LineBuffer, LineTooLong
from protocol.messages import encode
from protocol.replies import Push, Refused, Reply, Result, decode_message

__all__ = ["PING_ID", "Client", "HostError"]

PING_ID = "ping"
"""The ``id`` of the ``ping`` requests that answer the host's pings (never one of the integer
ids of the caller's requests, so their replies are told apart and dropped)."""


class HostError(Exception):
    """The host answered a request with an error; ``code``, ``message``, ``error`` (the whole
    error object) and ``refused`` (the same, typed)."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")
        self.error = error
        self.refused = Refused.from_wire(error)


class Client:
    """A connection to a host. Use ``async with await Client.connect(host, port) as c``.

    Args:
        stream: a connected trio stream.
        answer_pings: answer the host's ``ping`` pushes with a ``ping`` request (their count
            is ``pings_answered``); False: queue them as other pushes, unanswered.
    """

    def __init__(self, stream: trio.abc.Stream, *, answer_pings: bool = True) -> None:
        self.stream = stream
        self.answer_pings = answer_pings
        self.pings_answered = 0
        self._send_lock = trio.Lock()  # one send at a time: the reader answers pings too
        self._ids = itertools.count(1)
        self._waiting: dict[Any, trio.MemorySendChannel[dict[str, Any]]] = {}
        self._push_send, self.pushes = trio.open_memory_channel[dict[str, Any]](math.inf)
        self._nursery: trio.Nursery | None = None
        self._tasks: trio.Nursery | None = None  # where the reader runs (and answers pings)
        self._cm: Any = None
        self._closed = False

    @classmethod
    async def connect(cls, host: str, port: int, *, answer_pings: bool = True) -> Client:
        """Open a TCP connection (``answer_pings``: see :class:`Client`)."""
        return cls(await trio.open_tcp_stream(host, port), answer_pings=answer_pings)

    async def __aenter__(self) -> Client:
        self._cm = trio.open_nursery()
        self._nursery = self._tasks = await self._cm.__aenter__()
        self._nursery.start_soon(self._reader)
        return self

    async def _send(self, data: bytes) -> None:
        async with self._send_lock:
            await self.stream.send_all(data)

    async def _answer_ping(self) -> None:
        """Answer one ``ping`` push (a write that fails means the connection is going)."""
        try:
            await self._send(encode({"id": PING_ID, "op": "ping"}))
            self.pings_answered += 1
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        try:
            return await self._cm.__aexit__(*exc)
        finally:
            await self.stream.aclose()

    async def _reader(self) -> None:
        framer = LineBuffer(16 * 1024 * 1024)
        try:
            while True:
                data = await self.stream.receive_some(65536)
                if not data:
                    break
                for line in framer.feed(data):
                    if isinstance(line, LineTooLong):
                        continue
                    msg = orjson.loads(line)
                    if msg.get("push") == "ping" and self.answer_pings and self._tasks:
                        self._tasks.start_soon(self._answer_ping)
                    elif "push" in msg:
                        self._push_send.send_nowait(msg)
                    else:
                        waiter = self._waiting.pop(msg.get("id"), None)
                        if waiter is not None:
                            waiter.send_nowait(msg)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self._push_send.close()
            self._closed = True
            for waiter in self._waiting.values():
                waiter.close()

    async def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (tests of bad input; a ping's answer may come between two
        calls, so send a partial line only with ``answer_pings`` off)."""
        await self._send(data)

    def start(self, nursery: trio.Nursery) -> None:
        """Run the reader (and the answers to pings) in ``nursery`` instead of using
        ``async with``."""
        self._tasks = nursery
        nursery.start_soon(self._reader)

    async def aclose(self) -> None:
        """Hang up."""
        await self.stream.aclose()

    async def request(self, op: str, **params: Any) -> dict[str, Any]:
        """Send a request and return the whole reply (``ok`` true or false)."""
        if self._closed:
            raise ConnectionError(f"the connection is closed ({op})")
        rid = next(self._ids)
        send, recv = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[rid] = send
        await self._send(encode({"id": rid, "op": op, **params}))
        try:
            return await recv.receive()
        except trio.EndOfChannel:
            raise ConnectionError(f"the host closed the connection during {op}") from None

    async def call(self, op: str, **params: Any) -> Any:
        """Send a request and return its ``result``.

        Raises:
            HostError: the reply was an error. ConnectionError: the host hung up.
        """
        reply = await self.request(op, **params)
        if not reply.get("ok"):
            raise HostError(reply.get("error") or {})
        return reply.get("result")

    async def next_push(self) -> dict[str, Any] | None:
        """The next push, or None once the connection is closed."""
        try:
            return await self.pushes.receive()
        except trio.EndOfChannel:
            return None

    async def reply(self, op: str, **params: Any) -> Reply:
        """Send a request and return its typed reply: ``outcome`` is ``op``'s result class
        (:data:`protocol.replies.RESULTS`) or :class:`protocol.replies.Refused`.

        Raises:
            ConnectionError: the host hung up. KeyError, TypeError: the reply lacks a field
                its op's result has (not a v1 host).
        """
        return Reply.from_wire(await self.request(op, **params), op)

    async def ask(self, op: str, **params: Any) -> Result:
        """Send a request and return its typed result (e.g. ``Joined`` for ``join``).

        Raises:
            HostError: the reply was an error (``refused`` holds it typed). ConnectionError:
                the host hung up.
        """
        raw = await self.request(op, **params)
        if not raw.get("ok"):
            raise HostError(raw.get("error") or {})
        return Reply.from_wire(raw, op).outcome  # type: ignore[no-any-return]

    async def next_message(self) -> Push | None:
        """The next push as a typed message (:mod:`protocol.replies`), or None once the
        connection is closed.

        Raises:
            ValueError: a push this client does not know. KeyError: one lacking a field.
        """
        raw = await self.next_push()
        return None if raw is None else decode_message(raw)  # type: ignore[return-value]
