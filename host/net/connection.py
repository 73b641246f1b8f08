"""One client connection: one task reads lines into typed requests; its output is a bounded
outbox the host's flusher writes.

A :class:`Connection` serves TCP and WebSocket clients alike (``host.net.web`` hands it a
stream that presents messages as lines). Lobby ops are answered by the host on the reader's
task; session ops are typed commands the host submits to the session's driver, which answers
them on this connection (:meth:`Connection.answer`) and pushes to it (:meth:`Connection.send`):
those two methods are where host messages become bytes.

What the connection knows of the sessions it plays or watches comes from the sessions
themselves, through :meth:`Connection.attached` and :meth:`Connection.detached`: it never reads
a session's state. Each connection has a :attr:`Connection.key`, unique among every host's
connections (``<host instance>.<n>``), which a session writes into its log as a seat's holder.

Liveness: a frozen or vanished client must not hold its seat. The reader's deadlines close a
lobby connection that stays silent (``idle_timeout``) and one that never ends a line
(``line_timeout``). A connection that plays or watches a live session may stay silent, so it is
asked instead: after ``ping_after`` seconds without a complete line the host sends it a
``ping`` (:class:`protocol.replies.PingPush`; a WebSocket Ping frame over a WebSocket, see
:class:`host.net.web.WebSocketStream`), and if nothing at all comes in ``ping_timeout``
seconds more (a line, or over a WebSocket a Pong) it is closed as ``unresponsive``. A process
that is frozen (its kernel still acknowledges every segment) is found so; TCP keepalive
(:func:`set_keepalive`, on every accepted socket) finds a network path that died without a FIN.
"""

from __future__ import annotations

import contextlib
import math
import socket
import weakref
from typing import TYPE_CHECKING, Any

import structlog
import trio

from host.errors import GamehostError
from host.plugins.faults import refusal
from host.table.liveness import Liveness
from protocol.framing import MAX_LINE, LineBuffer, LineTooLong
from protocol.messages import ErrorCode, ProtocolError, parse_request
from protocol.replies import (
    ClosedPush,
    Outcome,
    PingPush,
    Push,
    Refused,
    encode_reply,
    reply_id,
)

if TYPE_CHECKING:
    from host.net.server import Host
    from host.net.session import Session
    from host.table import commands

__all__ = [
    "KEEPALIVE_COUNT",
    "KEEPALIVE_INTERVAL",
    "LINGER_REASONS",
    "Connection",
    "set_keepalive",
]

log = structlog.get_logger("gamehost.server")

LINGER_REASONS = frozenset({"idle", "line_timeout"})
"""``closed`` reasons after which the host drains the client's input briefly before closing."""

_NONE: frozenset[Any] = frozenset()

PING = PingPush()
"""The one ``ping`` push (its line is encoded once)."""

KEEPALIVE_INTERVAL = 10
"""Seconds between TCP keepalive probes once they begin (at most the idle time)."""

KEEPALIVE_COUNT = 3
"""Unanswered TCP keepalive probes after which the kernel resets the connection."""


def set_keepalive(sock: Any, idle: float | None) -> bool:
    """Turn TCP keepalive on for ``sock`` (a stdlib or trio socket): the first probe after
    ``idle`` seconds without traffic (rounded, at least 1), then one every
    :data:`KEEPALIVE_INTERVAL` seconds (at most ``idle``), the connection reset by the kernel
    after :data:`KEEPALIVE_COUNT` unanswered ones. ``idle`` None or 0: nothing is set. The
    per-socket timings are set where the OS has them (``TCP_KEEPIDLE``, or ``TCP_KEEPALIVE``
    on macOS; ``TCP_KEEPINTVL``; ``TCP_KEEPCNT``), else the system's defaults hold.

    Returns whether ``SO_KEEPALIVE`` was set. Never raises: a socket that refuses an option
    (not TCP, closed, an OS without it) keeps working without it.
    """
    if not idle:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    except (OSError, AttributeError, TypeError):
        return False
    seconds = max(1, round(idle))
    keepidle = getattr(socket, "TCP_KEEPIDLE", None) or getattr(socket, "TCP_KEEPALIVE", None)
    for option, value in (
        (keepidle, seconds),
        (getattr(socket, "TCP_KEEPINTVL", None), min(KEEPALIVE_INTERVAL, seconds)),
        (getattr(socket, "TCP_KEEPCNT", None), KEEPALIVE_COUNT),
    ):
        if option is None:
            continue
        with contextlib.suppress(OSError, AttributeError, TypeError):
            sock.setsockopt(socket.IPPROTO_TCP, option, value)
    return True


class Connection:
    """One client connection. Implements :class:`host.net.session.Subscriber`.

    One task serves it (:meth:`run`, which reads). What is queued to it (:meth:`send_nowait`)
    is written by the host's flusher once the task that queued it yields
    (:meth:`host.net.server.Host.flush_soon`): everything queued meanwhile in one write, so a
    step that pushes several lines to a connection costs it one system call. Over TCP the
    flusher writes to the socket without waiting; only what the socket does not take at once
    (a client that reads slowly) is left to a writer task made for it, which ends once all is
    written. Over another stream (a WebSocket) that writer task writes every batch. Nothing is
    allocated for output until there is some: an idle connection is its socket, its task and
    this object.
    """

    __slots__ = (
        "__weakref__",
        "_answered",
        "_cut",
        "_drained",
        "_lines",
        "_mid_send",
        "_out",
        "_sock",
        "_wait",
        "_waiting",
        "_writer",
        "address",
        "created",
        "host",
        "input_ended",
        "dead",
        "key",
        "liveness",
        "outbox",
        "outbox_bytes",
        "peer",
        "queued",
        "queued_peak",
        "reason",
        "roles",
        "sessions",
        "stream",
    )

    def __init__(
        self,
        host: Host,
        stream: trio.abc.Stream,
        peer: str,
        outbox: int,
        outbox_bytes: int = 8 * 1024 * 1024,
        key: str = "",
    ) -> None:
        self.host = host
        self.stream = stream
        self.peer = peer
        self.key = key
        self.address = peer.rpartition(":")[0] or peer  # the IP, without the port
        self.outbox = outbox
        self.outbox_bytes = outbox_bytes
        self._out: list[bytes] | None = None  # lines queued, not handed to a write yet
        self._lines = 0  # how many (a chunk of send_many counts as one)
        self.queued = 0  # bytes queued and not yet written to the socket
        self.queued_peak = 0
        # the socket to write to without waiting (TCP); None: every write is the writer task's
        self._sock: Any = (
            getattr(stream.socket, "_sock", None) if type(stream) is trio.SocketStream else None
        )
        self._writer: trio.CancelScope | None = None  # the writer task's, while it runs
        self._drained: trio.Event | None = None  # set when the writer task ends, if awaited
        # ids of sessions this connection created, not started: a new set each time they
        # change (rarely), none until then
        self.created: frozenset[str] | set[str] = _NONE
        # the sessions it joined, watched or resumed (told when it goes), made on the first
        # (:meth:`joined`); weak: a session that leaves the host's memory leaves this set too,
        # so a long-lived connection holds none
        self.sessions: frozenset[Session] | weakref.WeakSet[Session] = _NONE
        self.roles: dict[str, int | None] = {}  # session id -> seat played (None: watched)
        self.input_ended = False  # the client closed its sending side
        self.dead = False  # takes nothing more to send (closing, or cut)
        self._cut = False  # killed: nothing more is written
        self.reason: str | None = None
        self._mid_send = False  # a write of part of a line is under way (or was cut)
        self._waiting = 0  # requests submitted to sessions and not answered yet
        self._answered: trio.Event | None = None  # made while requests wait, set when answered
        self._wait: trio.CancelScope | None = None  # the reader's wait for input, while it waits
        if hasattr(stream, "on_pong"):  # a WebSocket: a Pong answers a ping as a line does
            stream.on_pong = self._rearm
        cfg = host.config
        self.liveness = Liveness(
            cfg.idle_timeout, cfg.line_timeout, cfg.ping_after, cfg.ping_timeout
        )
        """The silence rules (:class:`host.table.liveness.Liveness`, in ``trio.current_time()``
        seconds): its ``pinged`` is when the host sent the ping not answered yet, or None."""

    def __hash__(self) -> int:
        return id(self)

    # -- output ---------------------------------------------------------------------------------
    def send_nowait(self, line: bytes) -> bool:
        """Queue a line (written with the rest of the batch, see the class docstring); past
        ``outbox`` lines or ``outbox_bytes`` bytes queued and not written, drop the connection
        as ``slow_consumer`` (False)."""
        if self.dead:
            return False
        size = len(line)
        if self.queued + size > self.outbox_bytes or self._lines >= self.outbox:
            log.warning("slow_consumer_dropped", peer=self.peer)
            self.kill("slow_consumer")
            return False
        out = self._out
        if out is None:
            self._out = [line]
            if self._writer is None:
                self.host.flush_soon(self)
        else:
            out.append(line)
        self._lines += 1
        self.queued += size
        if self.queued > self.queued_peak:
            self.queued_peak = self.queued
        return True

    def send(self, push: Push) -> bool:
        """Queue a push (encoded here: the only place besides :meth:`answer` where host
        messages become bytes); False as :meth:`send_nowait`."""
        return self.send_nowait(push.line())

    def send_many(self, pushes: list[Push]) -> bool:
        """Queue pushes as one chunk (one line of the ``outbox`` budget, all their bytes of
        ``outbox_bytes``); False as :meth:`send_nowait`."""
        return self.send_nowait(b"".join([p.line() for p in pushes]))

    def flush(self) -> None:
        """Write what is queued (the host's flusher calls this): over TCP straight to the
        socket, without waiting; whatever it does not take, and everything over another
        stream, goes to a writer task. A socket that fails closes the connection (``gone``)."""
        out = self._out
        if out is None or self._writer is not None or self._cut:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        self._out = None
        self._lines = 0
        sent = 0
        if self._sock is not None:
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self.kill("gone")
                return
            self.queued -= sent
            if sent == len(data):
                return
            data = data[sent:]
            self._mid_send = sent > 0
        self._writer = scope = trio.CancelScope()
        self.host.nursery.start_soon(self._write, scope, data)

    async def _write(self, scope: trio.CancelScope, data: bytes) -> None:
        """The writer task: send ``data``, then whatever was queued meanwhile, until nothing is
        left (or the connection is cut)."""
        try:
            with scope:
                while True:
                    self._mid_send = True
                    await self.stream.send_all(data)
                    self._mid_send = False
                    self.queued -= len(data)
                    out = self._out
                    if out is None:
                        break
                    data = out[0] if len(out) == 1 else b"".join(out)
                    self._out = None
                    self._lines = 0
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            self.kill("gone")
        finally:
            self._writer = None
            if self._drained is not None:
                self._drained.set()

    async def _drain(self) -> None:
        """Wait until everything queued is written (within the caller's deadline)."""
        self.flush()
        if self._writer is not None:
            self._drained = trio.Event()
            await self._drained.wait()

    def answer(self, rid: Any, outcome: Outcome) -> None:
        """Queue the reply to request ``rid``: ``outcome``, a result or :class:`Refused`.

        A reply that cannot be encoded (a host bug: games' views are checked before they get
        here, and the parser keeps what it accepts within what orjson writes) is logged and
        answered ``internal`` instead, with the request's id (null only if the id itself does
        not encode), so the connection stays up."""
        try:
            line = encode_reply(rid, outcome)
        except TypeError:  # orjson.JSONEncodeError: too deep, a type it does not know
            log.exception("reply_unencodable")
            internal = Refused(ErrorCode.INTERNAL, "internal error")
            try:
                line = encode_reply(rid, internal)
            except TypeError:
                line = encode_reply(None, internal)
        self.send_nowait(line)

    # -- requests ---------------------------------------------------------------------------------
    def joined(self, session: Session) -> None:
        """Remember ``session`` (this connection joined, watched or resumed it): it is told
        when the connection goes (:meth:`Session.drop`)."""
        if not isinstance(self.sessions, weakref.WeakSet):
            self.sessions = weakref.WeakSet()
        self.sessions.add(session)

    def submit(self, session: Session, rid: Any, command: commands.Command) -> None:
        """Hand a command to a session's driver, which answers it (see :meth:`Session.submit`).

        Raises:
            ProtocolError: ``overloaded`` or ``unavailable`` (the session takes no more now).
        """
        session.submit(self, rid, command)
        if not self._waiting:
            self._answered = None
        self._waiting += 1

    def settled(self) -> None:
        """A session answered one of this connection's requests."""
        self._waiting -= 1
        if not self._waiting and self._answered is not None:
            self._answered.set()

    # -- the end ----------------------------------------------------------------------------------
    def kill(self, reason: str) -> None:
        """Hang up now (nothing queued is written; a ``closed`` push is attempted)."""
        self.dead = True
        self._cut = True
        self.reason = reason
        self._out = None
        self._lines = 0
        self.queued = 0
        self._rearm()  # what the task waits for ends (a request being handled ends first)
        if self._writer is not None:
            self._writer.cancel()

    def close_gracefully(self, reason: str) -> None:
        """Queue a ``closed`` push, let everything queued be written, then hang up."""
        if not self.dead:
            self.send(ClosedPush(reason))
            self.dead = True
            self.reason = reason
            self._rearm()  # the reader stops; run() then waits for the output to go

    async def run(self) -> None:
        """Serve the connection until EOF, a kill, or shutdown."""
        structlog.contextvars.bind_contextvars(peer=self.peer)
        log.info("connected")
        try:
            await self._reader()
            if not self.dead:
                # the client closed its side: answer what it asked first (at most 5 s)
                # (a session attaching or detaching it meanwhile only wakes the wait; a kill or
                # a close ends it)
                deadline = trio.current_time() + 5
                while self._waiting and not self.dead and trio.current_time() < deadline:
                    self._answered = self._answered or trio.Event()
                    with trio.move_on_at(deadline) as self._wait:
                        await self._answered.wait()
                self.dead = True
            if not self._cut:  # closed: what is queued is written first (at most 5 s: a
                # client that does not read either must not hold the connection open)
                with trio.move_on_after(5) as self._wait:
                    await self._drain()
            if self.reason in LINGER_REASONS and not self._cut:
                with trio.move_on_after(1) as self._wait:
                    await self._linger()
            if self.reason == "slow_consumer" and not self._mid_send:
                # best effort: a send cut off by the kill leaves the stream unusable
                with trio.move_on_after(1):
                    await self.stream.send_all(ClosedPush(self.reason).line())
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.dead = True
            if self._writer is not None:
                self._writer.cancel()
            if hasattr(self.stream, "on_pong"):
                self.stream.on_pong = None  # no cycle left between the stream and this
            for session in list(self.sessions):
                session.drop(self)
            self.host.forget(self)
            with trio.move_on_after(1) as cleanup:
                cleanup.shield = True
                await self.stream.aclose()
            log.info("disconnected", reason=self.reason)

    async def _linger(self) -> None:
        """Half-close, then read and drop what the client still sends until it closes too
        (within the caller's deadline; host shutdown cancels it): closing a socket with unread
        input resets it, and the reset can destroy the ``closed`` push before the client reads
        it."""
        try:
            await self.stream.send_eof()  # type: ignore[attr-defined]
            while await self.stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, AttributeError, OSError):
            pass

    def attached(self, session: str, viewer: int | None) -> None:
        """A session took this connection as ``viewer`` (a seat, or None: a spectator)."""
        self.roles[session] = viewer
        self._rearm()

    def detached(self, session: str) -> None:
        """A session no longer counts this connection as playing or watching it."""
        self.roles.pop(session, None)
        self._rearm()

    @property
    def closing(self) -> bool:
        """The connection is going: the client closed its side (its requests are still
        answered), or the connection was dropped or closed."""
        return self.dead or self.input_ended

    def evictable(self) -> bool:
        """Idle in the lobby: it plays and watches nothing, waits for no answer and is not
        closing (the host may close it to admit another connection at its cap)."""
        return not self.roles and not self._waiting and self.reason is None

    def _watching(self) -> bool:
        """Whether this connection plays or watches a live session (then it may stay silent,
        as may one whose requests a session has not answered yet)."""
        return bool(self.roles)

    @property
    def pinged(self) -> float | None:
        """When the host sent the ping not answered yet (``trio.current_time()``), or None."""
        return self.liveness.pinged

    def _heard(self, last_line: float) -> float:
        """When the client was last heard from: its last complete line, or over a WebSocket
        its last Pong."""
        return max(last_line, getattr(self.stream, "last_pong", -math.inf))

    def _rearm(self) -> None:
        """End what the task waits for now: the reader then works out its deadline again (its
        roles changed, and with them whether silence is idleness or calls for a ping; or a Pong
        answered its ping), or sees that the connection is closing."""
        if self._wait is not None:
            self._wait.cancel()

    def _timed_out(self, reason: str) -> None:
        log.info("connection_timed_out", reason=reason)
        self.close_gracefully(reason)

    async def _receive(self, wait_first: bool = False) -> bytes:
        """The next bytes from the client (empty at the end of its input). A TCP socket is read
        directly, and a read that finds nothing waits until the socket is readable: a
        connection waiting for input holds one short chain of frames (trio's ``receive_some``
        holds three more). ``wait_first``: the client most likely sent nothing yet (its last
        line was answered and it waits for the reply), so wait until the socket is readable
        before reading, rather than after a read that finds nothing (a system call and an
        exception saved per request).

        Raises:
            trio.BrokenResourceError: the socket failed. trio.ClosedResourceError: it was
                closed meanwhile.
        """
        sock = self._sock
        if sock is None:
            return await self.stream.receive_some(65536)
        waited = wait_first
        if wait_first:
            await trio.lowlevel.wait_readable(sock)
        while True:
            try:
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                data = None  # wait outside the handler: the exception is not kept while it waits
            except OSError as exc:
                if sock.fileno() < 0:
                    raise trio.ClosedResourceError from None
                raise trio.BrokenResourceError(exc) from exc
            if data is None:
                await trio.lowlevel.wait_readable(sock)
                waited = True
                continue
            if not waited:
                # a read that found data at once still lets the other tasks run (a client
                # sending without pause must not starve them), and is not undone by a
                # cancellation; one that waited has let them run already
                await trio.lowlevel.cancel_shielded_checkpoint()
            return data

    async def _reader(self) -> None:
        framer = LineBuffer(MAX_LINE)
        rules = self.liveness
        last_line = trio.current_time()  # when the last complete line was handled (or connect)
        line_began: float | None = None  # when an unfinished line was first seen
        idle_next = False  # the last bytes read ended a line: the client now likely waits
        while not self.dead:
            deadline, reason = rules.deadline(
                trio.current_time(),
                last_line,
                line_began,
                self._heard(last_line),
                bool(self._waiting),
                self._watching(),
            )
            with trio.move_on_at(deadline) as waited:
                self._wait = waited  # attached/detached cancel it: the deadline is worked out anew
                try:
                    data = await self._receive(idle_next)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self.input_ended = True  # reset: nothing more comes in
                    return
                finally:
                    self._wait = None
            if waited.cancelled_caught:
                if trio.current_time() < deadline:  # woken: roles changed, a Pong, a close
                    continue
                if reason == "ping":
                    rules.pinged = trio.current_time()
                    self.send(PING)
                elif (
                    reason == "unresponsive"
                    and rules.ping_deadline(self._heard(last_line), self._watching())[1] == "ping"
                ):
                    pass  # answered meanwhile by something that is not a line (a Pong)
                elif reason is not None:
                    self._timed_out(reason)
                    return
                continue
            ended = b"\n" in data  # a line ended (and what follows, if anything, began)
            partial = bool(data) and not data.endswith(b"\n")
            idle_next = ended and not partial and len(data) < 65536
            if not data:  # end of input: a last line without its newline still counts
                self.input_ended = True
                data = b"\n" if framer.pending else b""
                if not data:
                    return
            items = framer.feed(data)
            for item in items:
                if self.dead:
                    return
                if isinstance(item, LineTooLong):
                    self.answer(
                        None,
                        Refused(
                            ErrorCode.LINE_TOO_LONG, f"a line may hold at most {MAX_LINE} bytes"
                        ),
                    )
                    continue
                await self._handle(item)
                if len(items) > 1:
                    await trio.lowlevel.checkpoint()  # one busy client must not starve others
            # timed from when the lines were handled, not from when they came
            now = trio.current_time()
            if ended:
                last_line = now
            if not partial:
                line_began = None
            elif line_began is None or ended:
                line_began = now

    async def _handle(self, line: bytes) -> None:
        rid: Any = None
        try:
            req = parse_request(line)
            rid = req.id
            result = await self.host.dispatch(self, req)
            if result is not None:
                self.answer(rid, result)
        except (ProtocolError, GamehostError) as exc:  # a typed refusal: each knows its reply
            self.answer(reply_id(rid, exc), refusal(exc))
        except Exception:
            log.exception("request_failed")
            self.answer(rid, Refused(ErrorCode.INTERNAL, "internal error"))
