"""The session actor: one trio task owns a live session's state.

Connections submit commands over a bounded memory channel; the actor runs them one at a time:
``decide`` (through :class:`host.engine.Engine`), append durably, ``evolve``, answer the
requester, then publish each new record, redacted per viewer, to every subscriber, and send a
``turn`` push to each seat in ``to_act``. Host bots move inside the actor after each command.

No locks: one task, one writer. Publishing never waits: a subscriber whose outbound channel is
full is disconnected (it can ``resume``), so a slow client never stalls a table.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import attrs
import structlog
import trio

from host.engine import Engine, Record, SessionState
from host.game import NOT_YOUR_TURN, IllegalAction, Seat, Viewer
from host.store import FileStore
from protocol.messages import (
    ErrorCode,
    ProtocolError,
    encode_error,
    encode_ok,
    encode_protocol_error,
    push,
)

__all__ = ["Session", "SessionStatistics", "Subscriber"]

log = structlog.get_logger("gamehost.session")

BOT_BATCH = 64
"""The most records consecutive host-bot moves put into one append."""
PER_CONNECTION = 32
"""The most requests one connection may have waiting on one session (``overloaded`` past it)."""


class Subscriber(Protocol):
    """What a session needs of a connection: a non-blocking send of one line."""

    peer: str

    def send_nowait(self, line: bytes) -> bool:
        """Queue a line; False if the connection is too slow and is being dropped."""
        ...

    def settled(self) -> None:
        """The session has answered one of this connection's requests."""
        ...


@attrs.frozen
class SessionStatistics:
    """Counters: ``seq`` (last record), ``subscribers``, ``queued`` commands, ``actions``."""

    seq: int
    subscribers: int
    queued: int
    actions: int


def hash_token(token: str) -> str:
    """sha256 of a seat token, hex (only hashes are stored)."""
    return hashlib.sha256(token.encode()).hexdigest()


class Session:
    """A live session.

    Args:
        sid: the session id.
        engine: the game's engine.
        store: the event store (the log exists and is loaded/created).
        records: the records so far (at least the header).
        hooks: the plugin manager's hook relay (observers), or None.
        bot_delay: seconds a host bot waits before acting (0: at once).
        turn_timeout: seconds a human seat may take to act; then the host plays the bot's choice
            for it (recorded with ``"timed_out": true``). ``None``: wait forever.
        max_records: once a session holds this many records (bot moves stop there; one human
            action may pass it), the host ends it with one more: ``ended`` with ``outcome``
            null and ``aborted: "too_long"``, so no table grows for ever.
        linger: seconds a finished session stays (for ``view``/``resume``) once idle.
    """

    def __init__(
        self,
        sid: str,
        engine: Engine,
        store: FileStore,
        records: list[Record],
        hooks: Any = None,
        bot_delay: float = 0.0,
        turn_timeout: float | None = None,
        max_records: int = 500_000,
        linger: float = 60.0,
    ) -> None:
        self.id = sid
        self.engine = engine
        self.game = engine.game
        self.store = store
        self.records = records
        self.state: SessionState = engine.rebuild(records)
        self.hooks = hooks
        self.bot_delay = bot_delay
        self.turn_timeout = turn_timeout
        self.max_records = max_records
        self.linger = linger
        self._inflight: dict[Subscriber, int] = {}
        self._changed_at = trio.current_time()
        self.subscribers: dict[Subscriber, Viewer] = {}
        self._send, self._recv = trio.open_memory_channel[tuple[Any, ...]](256)
        self.failed = False
        self.actions = 0

    # -- the actor -----------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve commands until :meth:`close`; finish the command under way first."""
        structlog.contextvars.clear_contextvars()  # not the creating connection's peer
        structlog.contextvars.bind_contextvars(session=self.id, game=self.game.info.id)
        task_status.started()
        await self._run_bots()
        async with self._recv:
            while True:
                with trio.move_on_at(self._turn_deadline()) as timer:
                    try:
                        conn, rid, method, args = await self._recv.receive()
                    except trio.EndOfChannel:
                        return
                if timer.cancelled_caught:
                    if self.state.ended:
                        return  # finished and idle for `linger` seconds: the host forgets it
                    await self._time_out_turns()
                    await self._run_bots()
                    continue
                left = self._inflight.get(conn, 1) - 1
                if left:
                    self._inflight[conn] = left
                else:
                    self._inflight.pop(conn, None)
                try:
                    if self.failed:
                        raise ProtocolError(ErrorCode.UNAVAILABLE, "the session's log failed")
                    await method(conn, rid, *args)
                except ProtocolError as exc:
                    conn.send_nowait(encode_protocol_error(rid, exc))
                except Exception:
                    log.exception("command_failed", op=method.__name__)
                    conn.send_nowait(encode_error(rid, ErrorCode.INTERNAL, "internal error"))
                conn.settled()
                await self._run_bots()

    def _turn_deadline(self) -> float:
        """When the seats now to act run out of time (``inf`` without a turn timer)."""
        if self.state.ended:
            return self._changed_at + self.linger
        if self.turn_timeout is None or self.failed or not self.state.started:
            return math.inf
        return self._changed_at + self.turn_timeout

    async def _time_out_turns(self) -> None:
        """Play the host bot's choice for every human seat still to act (turn timer ran out)."""
        for seat in self.game.to_act(self.state.game):
            if self.failed or self.state.ended or seat not in self.game.to_act(self.state.game):
                continue
            try:
                new = self.engine.act(
                    self.state, seat, self.engine.bot_action(self.state, seat), timed_out=True
                )
                await self._commit(new)
            except ProtocolError:
                return
            except Exception:
                log.exception("timeout_move_failed", seat=seat)
                self.failed = True
                return
            log.info("turn_timed_out", seat=seat)
            self.actions += 1
            self._publish(new)

    def close(self) -> None:
        """Stop taking commands; :meth:`run` returns after the queued ones."""
        self._send.close()

    def submit(
        self, conn: Subscriber, rid: Any, method: Callable[..., Awaitable[None]], *args: Any
    ) -> None:
        """Queue ``method(conn, rid, *args)`` (one of the command methods below) for the actor.

        The actor answers ``rid`` on ``conn``: the method's own reply, or the error it raised.

        Raises:
            ProtocolError: ``overloaded`` if the queue is full, ``unavailable`` if closed.
        """
        if self._inflight.get(conn, 0) >= PER_CONNECTION:
            raise ProtocolError(
                ErrorCode.OVERLOADED,
                f"at most {PER_CONNECTION} requests per connection wait on one session; retry",
            )
        try:
            self._send.send_nowait((conn, rid, method, args))
            self._inflight[conn] = self._inflight.get(conn, 0) + 1
        except trio.WouldBlock:
            raise ProtocolError(ErrorCode.OVERLOADED, "the session is busy; retry") from None
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise ProtocolError(ErrorCode.UNAVAILABLE, "the session is closing") from None

    def statistics(self) -> SessionStatistics:
        """The counters now."""
        return SessionStatistics(
            self.state.seq,
            len(self.subscribers),
            self._recv.statistics().current_buffer_used,
            self.actions,
        )

    # -- commands (run inside the actor) ---------------------------------------------------------
    async def join(self, conn: Subscriber, rid: Any, name: str, seat: Seat | None) -> None:
        """Take a free seat (the lowest, or ``seat``); reply with seat, token, seq, view.

        One connection holds at most one seat of a session (open another connection to play
        two seats).
        """
        held = self.subscribers.get(conn)
        if held is not None:
            raise ProtocolError(
                ErrorCode.BAD_REQUEST, f"this connection holds seat {held} here already"
            )
        free = self.state.free_seats
        if seat is None:
            if not free:
                raise ProtocolError(ErrorCode.SESSION_FULL, "every seat is taken")
            seat = free[0]
        elif not 0 <= seat < len(self.state.seats):
            raise ProtocolError(
                ErrorCode.BAD_REQUEST, f"seats are 0..{len(self.state.seats) - 1}, not {seat}"
            )
        elif seat not in free:
            raise ProtocolError(ErrorCode.SESSION_FULL, f"seat {seat} is not free", free=free)
        token = secrets.token_urlsafe(24)
        new = self.engine.take_seat(self.state, seat, name, False, hash_token(token))
        await self._commit(new)
        self.subscribers[conn] = seat
        log.info("seat_taken", seat=seat, peer=conn.peer)
        conn.send_nowait(encode_ok(rid, {"seat": seat, "token": token, **self.snapshot(seat)}))
        self._publish(new, skip=conn)

    async def seat_bots(self, conn: Subscriber, rid: Any, seats: list[Seat]) -> None:
        """Seat host bots (``create`` with ``bots``), then answer ``create``."""
        for seat in seats:
            new = self.engine.take_seat(self.state, seat, f"bot{seat}", True, None)
            await self._commit(new)
            self._publish(new)
        st = self.state
        conn.send_nowait(
            encode_ok(
                rid,
                {
                    "session": self.id,
                    "game": self.game.info.id,
                    "seats": len(st.seats),
                    "bots": list(seats),
                    "free": st.free_seats,
                    "seq": st.seq,
                    "seed_commitment": st.header["seed_commitment"],
                },
            )
        )

    async def watch(self, conn: Subscriber, rid: Any) -> None:
        """Subscribe as a spectator; reply with seq and the spectator's view."""
        self.subscribers[conn] = None
        conn.send_nowait(encode_ok(rid, self.snapshot(None)))

    async def resume(self, conn: Subscriber, rid: Any, token: str, after: int | None) -> None:
        """Re-attach a seat by its token; push the records after ``after``, then reply."""
        h = hash_token(token)
        seat = next(
            (i for i, s in enumerate(self.state.seats) if s is not None and s.token_hash == h),
            None,
        )
        if seat is None:
            raise ProtocolError(ErrorCode.BAD_TOKEN, "that token holds no seat in this session")
        if after is not None and not 0 <= after <= self.state.seq:
            raise ProtocolError(
                ErrorCode.BAD_REQUEST, f"'after' must be 0..{self.state.seq}", seq=self.state.seq
            )
        for other, viewer in list(self.subscribers.items()):
            if viewer == seat and other is not conn:
                del self.subscribers[other]
        if after is not None:  # one queued chunk, however far behind the seat is
            missed = (self._push_line(rec, seat) for rec in self.records[after + 1 :])
            chunk = b"".join(line for line in missed if line is not None)
            if chunk:
                conn.send_nowait(chunk)
        self.subscribers[conn] = seat
        conn.send_nowait(encode_ok(rid, {"seat": seat, **self.snapshot(seat)}))
        self._send_turn(conn, seat)

    async def view(self, conn: Subscriber, rid: Any) -> None:
        """Reply with the view of the seat this connection holds (else a spectator's)."""
        conn.send_nowait(encode_ok(rid, self.snapshot(self.subscribers.get(conn))))

    async def act(self, conn: Subscriber, rid: Any, action: Any, expected: int | None) -> None:
        """Run an action from the seat this connection holds; reply ``{"seq": last seq}``."""
        seat = self.subscribers.get(conn)
        if seat is None:
            raise ProtocolError(ErrorCode.NOT_SEATED, "join or resume a seat first")
        if expected is not None and expected != self.state.seq:
            raise ProtocolError(
                ErrorCode.CONFLICT,
                f"the session is at seq {self.state.seq}, not {expected}",
                seq=self.state.seq,
            )
        if self.state.ended:
            raise ProtocolError(ErrorCode.SESSION_ENDED, "the session is over")
        try:
            parsed = self.engine.codec.action_from_wire(action)
        except ValueError as exc:
            raise ProtocolError(ErrorCode.BAD_ACTION, str(exc)) from None
        try:
            new = self.engine.act(self.state, seat, parsed)
        except IllegalAction as exc:
            code = ErrorCode.NOT_YOUR_TURN if exc.reason == NOT_YOUR_TURN else None
            if code is None:
                raise ProtocolError(
                    ErrorCode.ILLEGAL_ACTION, exc.message, reason=exc.reason
                ) from None
            raise ProtocolError(code, exc.message) from None
        await self._commit(new)
        self.actions += 1
        conn.send_nowait(encode_ok(rid, {"seq": self.state.seq}))
        self._publish(new)

    async def leave(self, conn: Subscriber, rid: Any) -> None:
        """Stop pushes to this connection (a seat stays reserved for its token)."""
        if self.subscribers.pop(conn, ...) is ...:
            raise ProtocolError(ErrorCode.NOT_SEATED, "this connection neither plays nor watches")
        conn.send_nowait(encode_ok(rid, {"left": True}))

    def drop(self, conn: Subscriber) -> None:
        """Forget a connection that went away (not a command: safe from any task)."""
        self.subscribers.pop(conn, None)
        self._inflight.pop(conn, None)

    # -- internals -----------------------------------------------------------------------------
    def snapshot(self, viewer: Viewer) -> dict[str, Any]:
        """``seq``, ``to_act``, ``seats``, ``started``, ``ended``, ``view`` (and ``outcome``)."""
        st = self.state
        out: dict[str, Any] = {
            "session": self.id,
            "game": self.game.info.id,
            "seq": st.seq,
            "seats": [
                None if s is None else {"seat": i, "name": s.name, "bot": s.bot}
                for i, s in enumerate(st.seats)
            ],
            "started": st.started,
            "ended": st.ended,
            "to_act": list(self.game.to_act(st.game)) if st.started and not st.ended else [],
            "view": self.engine.codec.to_wire(self.game.view(st.game, viewer)),
            "seed_commitment": st.header["seed_commitment"],
        }
        if st.ended:
            out["outcome"] = self.records[-1].data["outcome"]
            out["seed"] = self._public_seed()
        return out

    def _public_seed(self) -> str | None:
        """The seed for clients once the session ended, or None if the game keeps it secret."""
        return self.state.header["seed"] if self.game.info.reveal_seed else None

    async def _commit(self, new: list[Record], after: SessionState | None = None) -> None:
        """Append ``new`` durably, then make it the session's state (``after``, if the caller
        folded it already).

        Raises:
            ProtocolError: ``unavailable`` if the append failed (the session stops).
        """
        try:
            await self.store.append(self.id, self.state.seq + 1, [r.to_json() for r in new])
        except Exception:
            self.failed = True
            log.exception("append_failed")
            for conn in list(self.subscribers):
                conn.send_nowait(push("closed", reason="store_error", session=self.id))
            self.subscribers.clear()
            raise ProtocolError(ErrorCode.UNAVAILABLE, "the session's log failed") from None
        self.state = after if after is not None else self.engine.apply_all(self.state, new)
        self._changed_at = trio.current_time()
        self.records.extend(new)
        if not self.state.ended and self.state.seq + 1 >= self.max_records:
            stop = self.engine.abort(self.state, "too_long")
            log.warning("session_aborted", reason="too_long", seq=self.state.seq)
            await self.store.append(self.id, self.state.seq + 1, [r.to_json() for r in stop])
            self.state = self.engine.apply_all(self.state, stop)
            self.records.extend(stop)
            new.extend(stop)
        if self.hooks is not None:
            for rec in new:
                self.hooks.gamehost_event_appended(session=self.id, record=rec.to_json())
        if self.state.ended:
            self.store.release(self.id)
            log.info("session_ended", seq=self.state.seq)
            if self.hooks is not None:
                self.hooks.gamehost_session_ended(
                    session=self.id, outcome=self.records[-1].data["outcome"]
                )

    def _push_line(self, rec: Record, viewer: Viewer) -> bytes | None:
        if rec.type == "event":
            event = rec.obj
            if event is None:
                event = self.engine.codec.event_from_wire(rec.data["event"], rec.data.get("v"))
            body = self.engine.codec.event_to_wire(self.game.redact(event, viewer))
        elif rec.type == "action":
            body = {"seat": rec.data["seat"], "action": rec.data["action"]}
            if rec.data.get("timed_out"):
                body["timed_out"] = True
        elif rec.type == "seat_taken":
            body = {"seat": rec.data["seat"], "name": rec.data["name"], "bot": rec.data["bot"]}
        elif rec.type == "ended":
            body = {"outcome": rec.data["outcome"], "seed": self._public_seed()}
        else:
            return None
        return push("event", session=self.id, seq=rec.seq, kind=rec.type, event=body)

    def _publish(self, new: list[Record], skip: Subscriber | None = None) -> None:
        """Send each record to every subscriber (one redaction per distinct viewer), then the
        ``ended`` push or the ``turn`` pushes."""
        subs = [(c, v) for c, v in self.subscribers.items() if c is not skip]
        for rec in new:
            cache: dict[Viewer, bytes | None] = {}
            for conn, viewer in subs:
                if viewer not in cache:
                    cache[viewer] = self._push_line(rec, viewer)
                line = cache[viewer]
                if line is not None and not conn.send_nowait(line):
                    self.subscribers.pop(conn, None)
        if self.state.ended:
            end = push(
                "ended",
                session=self.id,
                seq=self.state.seq,
                outcome=self.records[-1].data["outcome"],
            )
            for conn, _ in subs:
                conn.send_nowait(end)
            return
        for conn, viewer in self.subscribers.items():
            if viewer is not None:
                self._send_turn(conn, viewer)

    def _send_turn(self, conn: Subscriber, seat: Seat) -> None:
        st = self.state
        if not st.started or st.ended or seat not in self.game.to_act(st.game):
            return
        legal = [
            self.engine.codec.action_to_wire(a) for a in self.game.legal_actions(st.game, seat)
        ]
        conn.send_nowait(push("turn", session=self.id, seq=st.seq, seat=seat, legal=legal))

    async def _run_bots(self) -> None:
        """Let host bots move until a human must act. Consecutive bot moves are appended
        together (one durable append per :data:`BOT_BATCH` records at most), then published."""
        while not self.failed:
            if self.bot_delay:
                await trio.sleep(self.bot_delay)
            else:
                await trio.lowlevel.checkpoint()
            batch: list[Record] = []
            state = self.state
            try:
                while len(batch) < BOT_BATCH and state.seq + 1 < self.max_records:
                    move = self.engine.bot_move(state)
                    if move is None:
                        break
                    new = self.engine.act(state, *move)
                    state = self.engine.apply_all(state, new)
                    batch += new
                    if self.bot_delay:
                        break
                if not batch:
                    return
                await self._commit(batch, state)
                self.actions += sum(1 for r in batch if r.type == "action")
                self._publish(batch)
            except ProtocolError:
                return
            except Exception:
                log.exception("bot_failed")
                self.failed = True
                return
