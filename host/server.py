"""The trio TCP host: the lobby, connections, and the life of every live session.

Each connection has a reader (lines -> requests) and a writer draining a bounded outbound channel.
Lobby ops (``hello``, ``games``, ``create``, ``sessions``, ``ping``) are answered by the
connection's own task; session ops are submitted to the session's actor, which answers them.
No input from one client can crash the host: every request is parsed into a typed request or a
typed error, and an unexpected exception is logged and answered with ``internal``.

Shutdown (SIGINT/SIGTERM, or :meth:`Host.request_shutdown`): stop accepting, tell every client
``{"push": "closed", "reason": "shutdown"}``, let the session actors finish the command under way
(so every acknowledged append is on disk) within a grace period, then close the logs.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import signal
import stat
from collections import OrderedDict
from pathlib import Path
from typing import Any

import attrs
import structlog
import trio

from host import __version__
from host.engine import Engine, Record
from host.faults import notify_isolated
from host.game import OptionError
from host.registry import Registry
from host.session import Session, seat_bots
from host.store import FileStore, FsyncMode, read_log
from protocol.framing import MAX_LINE, LineBuffer, LineTooLong
from protocol.messages import (
    HOST_DEFAULT,
    PROTOCOL_VERSION,
    REQUESTS,
    ErrorCode,
    ProtocolError,
    Request,
    encode_error,
    encode_ok,
    encode_protocol_error,
    parse_request,
    push,
)

__all__ = ["Connection", "Host", "HostConfig", "run_host"]

log = structlog.get_logger("gamehost.server")

ENDED_CACHE = 8
"""Ended sessions (no longer live) kept in memory to answer ``resume``/``view``/``watch``; the
others are read again from their logs."""
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@attrs.frozen
class HostConfig:
    """How to run a host.

    Attributes:
        data_dir: where ``sessions/*.jsonl`` live.
        port: TCP port (0: any free port).
        bind: the address to listen on.
        fsync: ``always``, ``batch`` or ``never``.
        bot_delay: seconds a host bot waits before acting.
        outbox: lines a connection may have queued before it is dropped as too slow.
        grace: seconds sessions get to finish on shutdown.
        turn_timeout: seconds a human seat may take to act before the host plays the bot's
            choice for it (None or 0: no turn timer); a session's ``create`` may set its own.
        max_sessions: live sessions at most (``create`` answers ``overloaded`` past it).
        max_records: records at most in one session; the host ends it there (``aborted``).
        abandon_after: seconds a live session may have no connection attached (no seat, no
            spectator; counted from its creation or load) before the host ends it with
            ``aborted: "abandoned"`` (None or 0: never).
    """

    data_dir: Path
    port: int = 7878
    bind: str = "127.0.0.1"
    fsync: FsyncMode = "batch"
    bot_delay: float = 0.0
    outbox: int = 4096
    grace: float = 5.0
    turn_timeout: float | None = 120.0
    max_sessions: int = 10_000
    max_records: int = 500_000
    abandon_after: float | None = 600.0


class Connection:
    """One client connection. Implements :class:`host.session.Subscriber`."""

    def __init__(self, host: Host, stream: trio.abc.Stream, peer: str, outbox: int) -> None:
        self.host = host
        self.stream = stream
        self.peer = peer
        self._send, self._recv = trio.open_memory_channel[bytes](outbox)
        self.sessions: set[Session] = set()
        self.dead = False
        self.reason: str | None = None
        self.scope = trio.CancelScope()
        self._mid_send = False
        self._waiting = 0  # requests submitted to sessions and not answered yet
        self._answered = trio.Event()
        self._answered.set()

    def __hash__(self) -> int:
        return id(self)

    def send_nowait(self, line: bytes) -> bool:
        """Queue a line for the writer; on a full queue drop the connection (False)."""
        if self.dead:
            return False
        try:
            self._send.send_nowait(line)
            return True
        except trio.WouldBlock:
            log.warning("slow_consumer_dropped", peer=self.peer)
            self.kill("slow_consumer")
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            self.dead = True
        return False

    def submit(self, session: Session, rid: Any, method: Any, *args: Any) -> None:
        """Hand a request to a session's actor, which answers it (see :meth:`Session.submit`)."""
        session.submit(self, rid, method, *args)
        if not self._waiting:
            self._answered = trio.Event()
        self._waiting += 1

    def settled(self) -> None:
        """A session answered one of this connection's requests."""
        self._waiting -= 1
        if not self._waiting:
            self._answered.set()

    def kill(self, reason: str) -> None:
        """Hang up now (the writer stops; a ``closed`` push is attempted)."""
        self.dead = True
        self.reason = reason
        self.scope.cancel()

    def close_gracefully(self, reason: str) -> None:
        """Queue a ``closed`` push and let the writer drain, then hang up."""
        if not self.dead:
            self.send_nowait(push("closed", reason=reason))
            self.dead = True
            self.reason = reason
            self._send.close()

    async def run(self) -> None:
        """Serve the connection until EOF, a kill, or shutdown."""
        structlog.contextvars.bind_contextvars(peer=self.peer)
        log.info("connected")
        try:
            with self.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._writer)
                    await self._reader()
                    if not self.dead:
                        # the client closed its side: answer what it asked first (at most 5 s)
                        with trio.move_on_after(5):
                            await self._answered.wait()
                        self._send.close()
            if self.reason == "slow_consumer" and not self._mid_send:
                # best effort: a send cut off by the kill leaves the stream unusable
                with trio.move_on_after(1):
                    await self.stream.send_all(push("closed", reason=self.reason))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.dead = True
            for session in self.sessions:
                session.drop(self)
            self.host.forget(self)
            with trio.move_on_after(1) as cleanup:
                cleanup.shield = True
                await self.stream.aclose()
            log.info("disconnected", reason=self.reason)

    async def _writer(self) -> None:
        try:
            async with self._recv:
                async for line in self._recv:
                    # coalesce what is queued already into one send (fewer syscalls)
                    chunk = [line]
                    size = len(line)
                    while size < 256 * 1024:
                        try:
                            more = self._recv.receive_nowait()
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                        chunk.append(more)
                        size += len(more)
                    self._mid_send = True
                    await self.stream.send_all(b"".join(chunk) if len(chunk) > 1 else line)
                    self._mid_send = False
            if self.dead:  # closed gracefully: everything queued is sent, stop reading too
                self.scope.cancel()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.kill("gone")

    async def _reader(self) -> None:
        framer = LineBuffer(MAX_LINE)
        while not self.dead:
            try:
                data = await self.stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not data:  # end of input: a last line without its newline still counts
                data = b"\n" if framer.pending else b""
                if not data:
                    return
            for item in framer.feed(data):
                if self.dead:
                    return
                if isinstance(item, LineTooLong):
                    self.send_nowait(
                        encode_error(
                            None,
                            ErrorCode.LINE_TOO_LONG,
                            f"a line may hold at most {MAX_LINE} bytes",
                        )
                    )
                    continue
                await self._handle(item)
                await trio.lowlevel.checkpoint()  # one busy client must not starve the others

    async def _handle(self, line: bytes) -> None:
        rid: Any = None
        try:
            req = parse_request(line)
            rid = req.id
            result = await self.host.dispatch(self, req)
            if result is not None:
                self.send_nowait(encode_ok(rid, result))
        except ProtocolError as exc:
            self.send_nowait(encode_protocol_error(rid, exc))
        except Exception:
            log.exception("request_failed")
            self.send_nowait(encode_error(rid, ErrorCode.INTERNAL, "internal error"))


class Host:
    """The lobby and the live sessions.

    Args:
        registry: the loaded games.
        store: the event store (its writer running).
        nursery: where session actors run.
        config: the limits and timers (:class:`HostConfig`).
    """

    def __init__(
        self, registry: Registry, store: FileStore, nursery: trio.Nursery, config: HostConfig
    ) -> None:
        self.registry = registry
        self.store = store
        self.nursery = nursery
        self.config = config
        self.max_sessions = config.max_sessions
        self.sessions: dict[str, Session] = {}
        self.connections: set[Connection] = set()
        self.shutdown = trio.Event()
        self._games: dict[str, Any] | None = None
        self._conns_changed = trio.Event()
        self._ended: OrderedDict[str, Session] = OrderedDict()

    def _session(self, sid: str, engine: Engine, records: list[Record], **kw: Any) -> Session:
        c = self.config
        return Session(
            sid,
            engine,
            self.store,
            records,
            self.registry.hook,
            bot_delay=c.bot_delay,
            turn_timeout=c.turn_timeout,
            max_records=c.max_records,
            abandon_after=c.abandon_after,
            **kw,
        )

    async def wait_disconnected(self) -> None:
        """Wait until no connection is open."""
        while self.connections:
            self._conns_changed = trio.Event()
            await self._conns_changed.wait()

    def forget(self, conn: Connection) -> None:
        """Remove a closed connection."""
        self.connections.discard(conn)
        self._conns_changed.set()

    def request_shutdown(self) -> None:
        """Begin a clean shutdown (as SIGTERM does)."""
        self.shutdown.set()

    async def load_sessions(self) -> int:
        """Rebuild every unfinished session from its log and start its actor; returns how many.

        A log that cannot be read, or whose game is not installed, is reported and left alone.
        Bot seats the header lists but the log does not seat (a ``create`` cut short) are
        seated by the session's actor before it starts.
        """
        n = 0
        for sid in self.store.session_ids():
            try:
                raw = self.store.load(sid)
                records = [Record.from_json(r) for r in raw]
                engine = self.registry.engines.get(records[0].data.get("game", ""))
                if engine is None:
                    log.warning(
                        "session_game_missing", session=sid, game=records[0].data.get("game")
                    )
                    continue
                whole = engine.complete_prefix(records)
                if whole < len(records):
                    log.warning(
                        "half_written_cause_dropped",
                        session=sid,
                        kept=whole,
                        dropped=len(records) - whole,
                    )
                    self.store.truncate(sid, whole)
                    records = records[:whole]
                session = self._session(sid, engine, records)
            except Exception:
                log.exception("session_load_failed", session=sid)
                continue
            if session.state.ended:
                continue
            self.sessions[sid] = session
            await self.nursery.start(self._run_session, session)
            n += 1
        log.info("sessions_loaded", live=n)
        return n

    async def dispatch(self, conn: Connection, req: Request) -> Any:
        """Answer a request; returns the ``result`` for lobby ops, None when a session answers.

        Raises:
            ProtocolError: the typed error to answer.
        """
        p = req.params
        if req.op == "hello":
            if p.protocol != PROTOCOL_VERSION:
                raise ProtocolError(
                    ErrorCode.UNSUPPORTED_PROTOCOL,
                    f"this host speaks protocol {PROTOCOL_VERSION}",
                    supported=[PROTOCOL_VERSION],
                )
            return {
                "protocol": PROTOCOL_VERSION,
                "host": "gamehost",
                "version": __version__,
                "ops": list(REQUESTS),
                "capabilities": {
                    "max_line": MAX_LINE,
                    "bots": True,
                    "resume": True,
                    "watch": True,
                    "games": sorted(self.registry.games),
                },
            }
        if req.op == "ping":
            return {"pong": True}
        if req.op == "games":
            if self._games is None:
                self._games = {"games": self.registry.describe()}
            return self._games
        if req.op == "sessions":
            return {
                "sessions": [
                    self._summary(s)
                    for s in self.sessions.values()
                    if p.game is None or s.game.info.id == p.game
                ]
            }
        if req.op == "create":
            await self.create(conn, req.id, p.game, p.options, p.seats, p.bots, p.turn_timeout)
            return None
        session = self.sessions.get(p.session)
        if session is None:
            ended = await self._ended_session(p.session)
            if ended is None:
                raise ProtocolError(ErrorCode.UNKNOWN_SESSION, f"no session {p.session!r}")
            if req.op == "resume":
                await ended.resume(conn, req.id, p.token, p.after)
            elif req.op == "watch":
                await ended.watch(conn, req.id)
            elif req.op == "view":
                await ended.view(conn, req.id)
            else:
                raise ProtocolError(ErrorCode.SESSION_ENDED, "the session is over")
            return None
        if req.op == "join":
            name = "".join(ch for ch in (p.name or "") if ch.isprintable())[:64] or "player"
            conn.sessions.add(session)
            conn.submit(session, req.id, session.join, name, p.seat)
        elif req.op == "watch":
            conn.sessions.add(session)
            conn.submit(session, req.id, session.watch)
        elif req.op == "resume":
            conn.sessions.add(session)
            conn.submit(session, req.id, session.resume, p.token, p.after)
        elif req.op == "view":
            conn.submit(session, req.id, session.view)
        elif req.op == "act":
            conn.submit(session, req.id, session.act, p.action, p.seq)
        elif req.op == "leave":
            conn.submit(session, req.id, session.leave)
        return None

    async def create(
        self,
        conn: Connection,
        rid: Any,
        game_id: str,
        options: dict[str, Any] | None,
        seats: int | None,
        bots: int,
        turn_timeout: float | None = HOST_DEFAULT,
    ) -> Session:
        """Validate and create a session, answer ``create`` and start its actor.

        The seats ``seats - bots`` .. ``seats - 1`` are the bots'; humans join the lower seats.
        The header, the bots' ``seat_taken`` records (and the opening events if every seat is a
        bot) are written in one append, so a crash never leaves a half-made session.
        ``turn_timeout`` (seconds; None or 0: no timer; left out: the host's) goes into the
        header, which is what a reload reads.

        Raises:
            ProtocolError: ``overloaded``, ``unknown_game``, ``bad_request`` (seats/bots/turn
                timeout), ``bad_option``, ``internal`` (the game failed to start; nothing is
                written) or ``unavailable`` (the log cannot be written).
        """
        if len(self.sessions) >= self.max_sessions and self._running() >= self.max_sessions:
            raise ProtocolError(
                ErrorCode.OVERLOADED, f"this host holds {self.max_sessions} live sessions already"
            )
        engine = self.registry.engines.get(game_id)
        if engine is None:
            raise ProtocolError(
                ErrorCode.UNKNOWN_GAME,
                f"no game {game_id!r}; games: {', '.join(sorted(self.registry.engines))}",
            )
        info = engine.game.info
        n = info.min_seats if seats is None else seats
        if not info.min_seats <= n <= info.max_seats:
            raise ProtocolError(
                ErrorCode.BAD_REQUEST,
                f"{game_id} seats {info.min_seats} to {info.max_seats}, not {n}",
            )
        if not 0 <= bots <= n:
            raise ProtocolError(ErrorCode.BAD_REQUEST, f"bots must be 0..{n}, not {bots}")
        if turn_timeout is HOST_DEFAULT:
            turn_timeout = self.config.turn_timeout
        if turn_timeout is not None and not (math.isfinite(turn_timeout) and turn_timeout >= 0):
            raise ProtocolError(
                ErrorCode.BAD_REQUEST, "turn_timeout must be seconds >= 0 or null (no timer)"
            )
        try:
            opts = engine.codec.options_from_wire(options, n)
        except OptionError as exc:
            raise ProtocolError(ErrorCode.BAD_OPTION, str(exc), option=exc.option) from None
        sid = secrets.token_hex(8)
        bot_seats = list(range(n - bots, n))
        header = engine.header(sid, opts, n, bot_seats, secrets.token_bytes(32))
        header.data["turn_timeout"] = turn_timeout or None
        try:
            seated = seat_bots(engine, engine.initial(header), bot_seats)
        except Exception:
            log.exception("game_fault", step="create", game=game_id)
            raise ProtocolError(
                ErrorCode.INTERNAL, "internal error: the game failed to start"
            ) from None
        records = [header, *seated]
        try:
            await self.store.create(sid, [r.to_json() for r in records])
        except OSError as exc:
            log.error("create_failed", error=str(exc))
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, "the host cannot write a new log now"
            ) from None
        session = self._session(sid, engine, records, unobserved=seated)
        self.sessions[sid] = session
        st = session.state
        conn.send_nowait(
            encode_ok(
                rid,
                {
                    "session": sid,
                    "game": game_id,
                    "seats": n,
                    "bots": bot_seats,
                    "free": st.free_seats,
                    "seq": st.seq,
                    "seed_commitment": st.header["seed_commitment"],
                },
            )
        )
        structlog.contextvars.bind_contextvars(session=sid)
        log.info("session_created", game=game_id, seats=n, bots=bots)
        structlog.contextvars.unbind_contextvars("session")
        notify_isolated(
            self.registry.hook.gamehost_session_created,
            session=sid,
            game=game_id,
            header=header.to_json(),
        )
        await self.nursery.start(self._run_session, session)
        return session

    def _running(self) -> int:
        """Live sessions not ended yet (an ended one lingers, but holds no table)."""
        return sum(1 for s in self.sessions.values() if not s.state.ended)

    async def _run_session(
        self, session: Session, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            await session.run(task_status=task_status)
        finally:
            if self.sessions.get(session.id) is session:
                del self.sessions[session.id]
            self.store.release(session.id)
            if session.state.ended:  # still answers resume/view/watch for a while
                session.retire()
                self._remember_ended(session)

    def _remember_ended(self, session: Session) -> None:
        self._ended[session.id] = session
        self._ended.move_to_end(session.id)
        while len(self._ended) > ENDED_CACHE:
            self._ended.popitem(last=False)

    async def _ended_session(self, sid: str) -> Session | None:
        """An ended session that is not live, read from its log (a few stay cached), or None
        if there is no such log or the session in it has not ended.

        Raises:
            ProtocolError: ``unavailable`` if the log exists but cannot be read.
        """
        cached = self._ended.get(sid)
        if cached is not None:
            self._ended.move_to_end(sid)
            return cached
        if not _SESSION_ID.match(sid):
            return None
        path = self.store.path(sid)

        def load() -> tuple[Engine, list[Record], Any] | None:
            try:
                if not stat.S_ISREG(os.lstat(path).st_mode):
                    return None
            except FileNotFoundError:
                return None
            records = [Record.from_json(r) for r in read_log(path)]
            engine = self.registry.engines.get(records[0].data.get("game", "")) if records else None
            if engine is None:
                return None
            return engine, records, engine.rebuild(records)

        try:
            got = await trio.to_thread.run_sync(load)
        except Exception:
            log.exception("session_log_unreadable", session=sid)
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, f"the log of session {sid!r} cannot be read"
            ) from None
        if got is None or not got[2].ended or sid in self.sessions:
            return None
        engine, records, state = got
        session = Session(sid, engine, self.store, records, state=state)
        session.retire()
        self._remember_ended(session)
        return session

    def _summary(self, s: Session) -> dict[str, Any]:
        st = s.state
        return {
            "session": s.id,
            "game": s.game.info.id,
            "seats": len(st.seats),
            "free": st.free_seats,
            "started": st.started,
            "ended": st.ended,
            "seq": st.seq,
        }

    async def handle(self, stream: trio.SocketStream) -> None:
        """The per-connection handler given to ``serve_tcp``; never raises."""
        try:
            addr = stream.socket.getpeername()
            peer = f"{addr[0]}:{addr[1]}"
        except OSError:
            peer = "?"
        conn = Connection(self, stream, peer, self.config.outbox)
        if self.shutdown.is_set():
            await stream.aclose()
            return
        self.connections.add(conn)
        try:
            await conn.run()
        except Exception:
            log.exception("connection_failed", peer=peer)


async def _accept(
    host: Host,
    config: HostConfig,
    conns: trio.Nursery,
    scope: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    with scope:
        await trio.serve_tcp(
            host.handle,
            config.port,
            host=config.bind,
            handler_nursery=conns,
            task_status=task_status,
        )


async def _signals(host: Host) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as sigs:
        async for sig in sigs:
            log.info("signal", signal=signal.Signals(sig).name)
            host.request_shutdown()
            return


async def run_host(
    config: HostConfig,
    registry: Registry,
    *,
    handle_signals: bool = True,
    task_status: trio.TaskStatus[tuple[Host, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a host until shutdown. ``task_status.started((host, port))`` once it listens."""
    store = FileStore(config.data_dir, config.fsync)
    async with trio.open_nursery() as outer:
        await outer.start(store.run)
        try:
            async with trio.open_nursery() as sessions:
                host = Host(registry, store, sessions, config)
                await host.load_sessions()
                async with trio.open_nursery() as conns:
                    accepting = trio.CancelScope()
                    listeners = await conns.start(_accept, host, config, conns, accepting)
                    port = listeners[0].socket.getsockname()[1]
                    log.info(
                        "listening",
                        bind=config.bind,
                        port=port,
                        data_dir=str(config.data_dir),
                        fsync=config.fsync,
                    )
                    if handle_signals:
                        outer.start_soon(_signals, host)
                    task_status.started((host, port))
                    await host.shutdown.wait()
                    log.info("shutting_down", connections=len(host.connections))
                    accepting.cancel()
                    for conn in list(host.connections):
                        conn.close_gracefully("shutdown")
                    with trio.move_on_after(1):
                        await host.wait_disconnected()
                    conns.cancel_scope.cancel()
                for session in host.sessions.values():
                    session.close()
                sessions.cancel_scope.deadline = trio.current_time() + config.grace
        finally:
            with trio.CancelScope(shield=True):
                await store.aclose()
            outer.cancel_scope.cancel()
    log.info("stopped")
