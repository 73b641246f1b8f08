"""The session actor: one trio task owns a live session's state.

Connections submit typed commands (:mod:`host.table.commands`) over a bounded memory channel, each
with the requester and the request id; the actor runs them one at a time: ``decide`` (through
:class:`host.table.engine.Engine`), append durably, ``evolve``, answer the requester with a typed
outcome (:mod:`protocol.replies`: the op's result or ``Refused``), then publish each new record,
redacted per viewer, to every subscriber as a typed push, and send a ``turn`` push to each seat
in ``to_act``. Observer hooks run last, each on its own. The actor builds no JSON: each
:class:`Subscriber` encodes what it is given (a push object shared by many is encoded once).
Each command has one handler (``_join``, ``_act``, ...) returning the outcome and what to push
after the reply (:data:`Answer`).

The actor's loop alternates between commands and *host-driven steps*, each bounded: a host bot's
move (one batch of at most :data:`BOT_BATCH` records, or one move when bots wait ``bot_delay``
seconds), a turn timer running out (or, at once, the turn of a seat whose player is gone:
:data:`ABSENT_AFTER`), a session nobody is attached to being ended as abandoned,
a log being reloaded after a failed append. It waits for the next command with a deadline, the
earliest step due, so a busy table still answers its commands and cancellation between steps.

Faults: a game plugin that raises (or a bot whose listed legal action is refused) during a
*command* fails that command with ``internal`` and appends nothing; during a *host-driven step*
it ends the session, appending ``ended`` with ``outcome: null, aborted: "game_error"``. An append
that fails answers ``unavailable``; the next command (or a retry later: 1 s, doubling up to 60 s
while the store keeps failing) reloads the session from its log and carries on. The first
failure in a row logs a traceback and pushes ``stalled`` (reason ``store_error``) to every
subscriber once; later ones log one line each.

Each event is folded once: the engine's step methods (``step``, ``bot_step``, ``seat_step``,
``abort_step``) return the new records with the state after them, which the actor keeps. A live
session holds only its last :data:`TAIL` records; a ``resume`` from further back reads the missed
records from the store. The ``turn`` push (with its legal list) is built once per seq and seat.

No locks: one task, one writer. Publishing never waits: a subscriber whose outbound channel is
full is disconnected (it can ``resume``), so a slow client never stalls a table.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import secrets
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

import attrs
import structlog
import trio

from host.errors import GamehostError
from host.game import Seat, Viewer
from host.plugins.faults import GameFault, notify_isolated, refusal
from host.store.base import Conflict, CorruptLog, UnknownSession
from host.store.file import FileStore
from host.table.commands import Act, Command, Join, Leave, Resume, View, Watch
from host.table.engine import BadRecord, Engine, Record, SessionState
from host.table.freshness import stale_reason
from protocol.messages import ErrorCode, ProtocolError
from protocol.replies import (
    Accepted,
    EndedPush,
    EventPush,
    Joined,
    Left,
    Outcome,
    Push,
    Refused,
    Resumed,
    SeatInfo,
    Snapshot,
    StalledPush,
    TurnPush,
    ViewPush,
    ViewReply,
    Watching,
)

__all__ = ["Session", "SessionStatistics", "Subscriber", "seat_bots", "seat_bots_step"]

log = structlog.get_logger("gamehost.session")

BOT_BATCH = 64
"""The most records consecutive host-bot moves put into one append (one step)."""
PER_CONNECTION = 32
"""The most requests one connection may have waiting on one session (``overloaded`` past it)."""
RELOAD_RETRY = 1.0
"""Seconds before the first retry (reload, then the step again) of a session whose append
failed; the delay doubles with each failure in a row (commands try at once)."""
RELOAD_RETRY_MAX = 60.0
"""The longest delay, in seconds, between two retries of a session whose log keeps failing."""
ABSENT_AFTER = 3
"""Consecutive timed-out turns of a seat no connection holds after which the host plays that
seat's turns at once (until a connection resumes it)."""
TAIL = 32
"""The most recent records a live session keeps in memory (for a ``resume`` a few records
behind); older ones are read from the store when a ``resume`` asks for them."""


class _Stale(Exception):
    """An append lost the race for its seq to another host; the session has caught up."""


class Subscriber(Protocol):
    """What a session needs of a connection: non-blocking sends of typed messages (the
    connection encodes them)."""

    peer: str

    def send(self, push: Push) -> bool:
        """Queue a push; False if the connection is too slow and is being dropped."""
        ...

    def send_many(self, pushes: list[Push]) -> bool:
        """Queue pushes as one chunk (counted once against the outbox's line budget); False
        as :meth:`send`."""
        ...

    def answer(self, rid: Any, outcome: Outcome) -> None:
        """Queue the reply to request ``rid``."""
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


def seat_bots(engine: Engine, state: SessionState, seats: Iterable[Seat]) -> list[Record]:
    """The records that seat host bots in ``seats`` (each still free), in order, plus the
    opening events once the last seat is taken.

    Raises:
        ValueError: a seat is not free. Anything the game's ``start`` raises.
    """
    return seat_bots_step(engine, state, seats)[0]


def seat_bots_step(
    engine: Engine, state: SessionState, seats: Iterable[Seat]
) -> tuple[list[Record], SessionState]:
    """:func:`seat_bots`' records and the state after them, each event folded exactly once.

    Raises:
        ValueError: a seat is not free. GameFault: the game's ``start`` faulted.
    """
    out: list[Record] = []
    for seat in seats:
        new, state = engine.seat_step(state, seat, f"bot{seat}", True, None)
        out += new
    return out, state


class Session:
    """A session: live (its actor runs :meth:`run`), or an ended one answered from its log.

    Args:
        sid: the session id.
        engine: the game's engine.
        store: the event store (the log exists and is loaded/created).
        records: the records so far (at least the header); only the last :data:`TAIL` are kept.
        hooks: the plugin manager's hook relay (observers), or None.
        bot_delay: seconds a host bot waits before acting (0: at once).
        turn_timeout: seconds a human seat may take to act; then the host plays the bot's choice
            for it (recorded with ``"timed_out": true``). ``None``: wait forever. A
            ``turn_timeout`` in the header (``create`` option; null: no timer) wins.
        max_records: once a session holds this many records (bot moves stop there; one human
            action may pass it), the host ends it with one more: ``ended`` with ``outcome``
            null and ``aborted: "too_long"``, so no table grows for ever.
        linger: seconds a finished session stays (for ``view``/``resume``) once idle.
        abandon_after: seconds a session may go on with no player attached (no connection
            holding a human seat; a spectator counts only if every seat is a bot; counted from
            creation or load) before the host ends it with
            ``aborted: "abandoned"``. ``None``: never.
        state: the folded ``records`` if the caller has it already (then they are not folded).
        unobserved: records already durable that observers have not been told of yet.
        driver: run host-driven steps (bots, turn timers, abandonment). A host sharing its
            store with others starts a session with False and lets the holder of its lease
            drive it (:meth:`set_driver`; see ``host.store.feed``).
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
        abandon_after: float | None = None,
        state: SessionState | None = None,
        unobserved: Iterable[Record] = (),
        driver: bool = True,
    ) -> None:
        self.id = sid
        self.engine = engine
        self.game = engine.game
        self.store = store
        self._tail: deque[Record] = deque(records[-TAIL:], maxlen=TAIL)
        self._turns: tuple[int, dict[Seat, TurnPush]] = (-1, {})  # seq, the turn push per seat
        # the turn pushes of earlier seqs (for an act naming one: host.table.freshness)
        self._past_turns: deque[tuple[int, dict[Seat, TurnPush]]] = deque(maxlen=TAIL)
        self.state: SessionState = state if state is not None else engine.rebuild(records)
        self.hooks = hooks
        self.bot_delay = bot_delay
        header = self.state.header
        if "turn_timeout" in header:
            turn_timeout = header["turn_timeout"]
        self.turn_timeout = turn_timeout or None
        self.max_records = max_records
        self.linger = linger
        self.abandon_after = abandon_after or None
        self._inflight: dict[Subscriber, int] = {}
        now = trio.current_time()
        self._changed_at = now
        self._unattended_since: float | None = now
        self._reload_at: float | None = None
        self._store_failures = 0  # failed appends/reloads in a row
        self._timeouts: dict[Seat, int] = {}  # consecutive timed-out turns of an absent seat
        self._lost_logged = False  # log_lost_records said once (a client may repeat its resume)
        self._faulted = False
        self._wait: trio.CancelScope | None = None
        self._unobserved: list[Record] = list(unobserved)
        self.subscribers: dict[Subscriber, Viewer] = {}
        self._viewing: set[Subscriber] = set()  # subscribers that asked for view pushes
        self._send, self._recv = trio.open_memory_channel[tuple[Subscriber, Any, Command]](256)
        self.actions = 0
        self.live = True
        self.driver = driver
        self.shared = not driver  # only a host sharing its store starts a session not driving
        self._behind = False  # the log may hold records this copy has not folded yet
        self.lost_races = 0  # appends refused because another host had written that seq

    def retire(self) -> None:
        """Make this an ended session answered from its log: no actor, no subscribers."""
        self.live = False
        self.subscribers.clear()
        self._inflight.clear()

    @property
    def ended(self) -> bool:
        """The session has ended."""
        return self.state.ended

    def set_driver(self, driver: bool) -> None:
        """Run host-driven steps from now on (this host holds the session's lease) or not."""
        if driver != self.driver:
            self.driver = driver
            log.info("lease_taken" if driver else "lease_lost", session=self.id)
            self._poke()

    def notice(self, seq: int | None) -> None:
        """The session's log reaches ``seq`` (None: it may have grown): the actor reads and
        folds the records it lacks, and pushes them to its subscribers, before its next
        command or step."""
        if seq is None or seq > self.state.seq:
            self._behind = True
            self._poke()

    def _poke(self) -> None:
        if self._wait is not None:
            self._wait.cancel()  # the actor works out its next step again

    @property
    def failed(self) -> bool:
        """The last append failed and the session has not been reloaded from its log yet."""
        return self._reload_at is not None

    # -- the actor -----------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve commands and host-driven steps until :meth:`close` (or until the session ended
        and stayed idle ``linger`` seconds). Bot seats the header lists that the log does not
        seat (a create cut short by a crash) are seated first."""
        structlog.contextvars.clear_contextvars()  # not the creating connection's peer
        structlog.contextvars.bind_contextvars(session=self.id, game=self.game.info.id)
        await self._guarded("seat_bots", self._seat_missing_bots)
        task_status.started()
        self._observe()
        async with self._recv:
            while True:
                worked = False
                try:
                    item = self._recv.receive_nowait()
                except trio.WouldBlock:
                    item = None
                except trio.EndOfChannel:
                    return
                if item is not None:
                    await self._serve(*item)
                    worked = True
                when, kind = self._next_step()
                if when <= trio.current_time():
                    if kind == "expire":
                        if item is None:  # no command waits (one queued is answered first)
                            return  # finished and idle for `linger` seconds: forgotten
                    else:
                        await self._guarded(kind, self._steps[kind])
                        self._observe()
                        worked = True
                if worked:
                    await trio.lowlevel.checkpoint()
                    continue
                item = None
                with trio.CancelScope(deadline=when) as self._wait:
                    try:
                        item = await self._recv.receive()
                    except trio.EndOfChannel:
                        return
                self._wait = None
                if item is not None:
                    await self._serve(*item)

    async def _serve(self, conn: Subscriber, rid: Any, command: Command) -> None:
        left = self._inflight.get(conn, 1) - 1
        if left:
            self._inflight[conn] = left
        else:
            self._inflight.pop(conn, None)
        await self.execute(conn, rid, command)
        conn.settled()
        self._observe()

    async def execute(self, conn: Subscriber, rid: Any, command: Command) -> None:
        """Run ``command`` now for ``conn`` and answer request ``rid`` on it: the command's
        outcome, or :class:`protocol.replies.Refused` (its typed error; ``internal`` for any
        other exception, which is logged). The actor runs every command so; a retired session
        (:meth:`retire`) answers ``resume``, ``view`` and ``watch`` through it directly."""
        seq = self.state.seq
        try:
            if self._reload_at is not None:
                await self._reload()
                seq = self.state.seq
            handler = _HANDLERS[type(command)]
            try:
                outcome, then = await handler(self, conn, command)
            except _Stale:  # another host appended first: decide again on the caught-up copy
                seq = self.state.seq
                try:
                    outcome, then = await handler(self, conn, command)
                except _Stale:
                    raise ProtocolError(
                        ErrorCode.CONFLICT,
                        "another host changed the session meanwhile; retry",
                        seq=self.state.seq,
                    ) from None
            conn.answer(rid, outcome)
            if then is not None:  # the pushes that follow the reply
                then()
        except (ProtocolError, GamehostError) as exc:  # a typed refusal: each knows its reply
            conn.answer(rid, refusal(exc))
        except Exception as exc:
            event = "game_fault" if isinstance(exc, GameFault) else "command_failed"
            log.exception(event, op=type(command).__name__.lower())
            conn.answer(rid, Refused(ErrorCode.INTERNAL, "internal error"))
            if self.state.seq != seq:
                self._faulted = True  # it failed after an append: end the session (game_error)

    def _next_step(self) -> tuple[float, str]:
        """When the next host-driven step is due, and which (``inf`` if none)."""
        if self._reload_at is not None:
            return self._reload_at, "reload"
        if self._behind:
            return -math.inf, "follow"
        st = self.state
        if st.ended:
            return self._changed_at + self.linger, "expire"
        if self._faulted:
            return -math.inf, "fault"
        steps: list[tuple[float, str]] = [(math.inf, "")]
        if not self.driver:  # another host holds the lease: it runs bots and timers
            return min(steps)
        if self.abandon_after is not None and self._unattended_since is not None:
            steps.append((self._unattended_since + self.abandon_after, "abandon"))
        if st.started:
            try:
                to_act = self.game.to_act(st.game)
            except Exception:
                log.exception("game_fault", step="to_act")
                self._faulted = True
                return -math.inf, "fault"
            if any(st.seats[s] is not None and st.seats[s].bot for s in to_act):  # type: ignore[union-attr]
                steps.append((self._changed_at + self.bot_delay, "bot"))
            elif to_act and self.turn_timeout is not None:
                if self._absent(to_act):
                    steps.append((self._changed_at, "absent"))
                steps.append((self._changed_at + self.turn_timeout, "timeout"))
        return min(steps)

    @property
    def _steps(self) -> dict[str, Callable[[], Awaitable[None]]]:
        return {
            "reload": self._reload,
            "bot": self._bot_step,
            "timeout": self._time_out_turns,
            "absent": self._play_absent,
            "abandon": self._abandon,
            "fault": self._game_error,
            "follow": self._follow,
        }

    async def _guarded(self, step: str, fn: Callable[[], Awaitable[None]]) -> None:
        """Run a host-driven step: a failed append waits for a reload; any other exception is
        the game's fault and ends the session (``aborted: "game_error"``)."""
        try:
            await fn()
        except (ProtocolError, _Stale):  # _Stale: caught up; the next step decides again
            return
        except Exception:
            log.exception("game_fault", step=step)
            self._faulted = True
            try:
                await self._game_error()
            except ProtocolError:
                return

    async def _abort(self, reason: str) -> None:
        if self.state.ended:
            return
        stop, after = self.engine.abort_step(self.state, reason)
        log.warning("session_aborted", reason=reason, seq=self.state.seq)
        await self._commit(stop, after)
        self._publish(stop)

    async def _game_error(self) -> None:
        await self._abort("game_error")

    async def _abandon(self) -> None:
        await self._abort("abandoned")

    async def _seat_missing_bots(self) -> None:
        """Seat the bots the header lists that the log does not seat (a create cut short)."""
        st = self.state
        if st.ended:
            return
        n = len(st.seats)
        missing = [s for s in st.header.get("bots", []) if 0 <= s < n and st.seats[s] is None]
        if not missing:
            return
        new, after = seat_bots_step(self.engine, st, missing)
        log.warning("bots_seated_on_load", seats=missing)
        await self._commit(new, after)
        self._publish(new)

    def _absent(self, to_act: Iterable[Seat]) -> list[Seat]:
        """The seats in ``to_act`` whose turns timed out :data:`ABSENT_AFTER` times in a row
        with no connection holding them: the host plays those at once."""
        held = set(self.subscribers.values())
        return [s for s in to_act if self._timeouts.get(s, 0) >= ABSENT_AFTER and s not in held]

    async def _time_out_turns(self, seats: Iterable[Seat] | None = None) -> None:
        """Play the host bot's choice for every human seat still to act (turn timer ran out),
        or for ``seats`` only; each is recorded ``"timed_out": true``. A seat that times out
        with no connection holding it counts one more turn towards being played at once."""
        held = set(self.subscribers.values())
        for seat in list(self.game.to_act(self.state.game) if seats is None else seats):
            if self.state.ended or seat not in self.game.to_act(self.state.game):
                continue
            new, after = self.engine.bot_step(self.state, seat, timed_out=True)
            await self._commit(new, after)
            self._timeouts[seat] = 0 if seat in held else self._timeouts.get(seat, 0) + 1
            if self._timeouts[seat] <= ABSENT_AFTER:  # then it is played at once: log that once
                log.info("turn_timed_out", seat=seat, absent=self._timeouts[seat] == ABSENT_AFTER)
            self.actions += 1
            self._publish(new)

    async def _play_absent(self) -> None:
        """Play at once the turns of the seats whose players are gone (:meth:`_absent`)."""
        await self._time_out_turns(self._absent(self.game.to_act(self.state.game)))

    async def _bot_step(self) -> None:
        """One bounded step of host bots: one move (with a ``bot_delay``), else consecutive moves
        up to :data:`BOT_BATCH` records, appended together, then published."""
        batch: list[Record] = []
        state = self.state
        while len(batch) < BOT_BATCH and state.seq + 1 < self.max_records:
            seat = self.engine.bot_seat(state)
            if seat is None:
                break
            new, state = self.engine.bot_step(state, seat)
            batch += new
            if self.bot_delay:
                break
        if not batch:
            await self._abort("too_long")  # a bot is to act but the session is full
            return
        await self._commit(batch, state)
        self.actions += sum(1 for r in batch if r.type == "action")
        self._publish(batch)

    async def _reload(self) -> None:
        """Rebuild the session from its log after a failed append (subscribers stay).

        Raises:
            ProtocolError: ``unavailable`` if the log cannot be read now (retried later).
        """
        old = self.state.seq
        try:
            raw = await trio.to_thread.run_sync(self.store.load, self.id)
            records = [Record.from_json(r) for r in raw]
            whole, state = self.engine.load(records)
            if whole < len(records):
                self.store.truncate(self.id, whole)
                records = records[:whole]
        except (UnknownSession, CorruptLog, BadRecord) as exc:
            # gone or damaged for good: retrying cannot help. The actor stops (the session
            # leaves the live list, freeing its place); later requests are answered from the
            # log, i.e. session_damaged or unknown_session.
            log.error("session_log_unusable", error=str(exc))
            self._reload_at = None
            self.close()
            raise ProtocolError(
                ErrorCode.SESSION_DAMAGED, f"the log of session {self.id!r} is gone or damaged"
            ) from None
        except Exception as exc:
            self._store_failed("reload_failed", exc)
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, "the session's log cannot be read now; retry"
            ) from None
        self._tail, self.state = deque(records[-TAIL:], maxlen=TAIL), state
        self._reload_at = None
        self._changed_at = trio.current_time()
        log.warning("session_reloaded", seq=state.seq, was=old)
        if state.seq > old:  # the failed append reached the log after all: tell everyone
            self._publish(records[old + 1 :])
        if state.ended:
            self.store.release(self.id)

    async def _follow(self, reopen: bool = False) -> None:
        """Fold the records the log holds past this copy (appended by another host sharing
        the store), then push them to the subscribers, as if appended here (observers are not
        told: the appending host tells its own). With ``reopen`` the whole log is loaded, which
        also opens the session in this store object at its end (after a ``Conflict``).

        A player active on another host keeps the session attended here too.

        Raises:
            ProtocolError: ``unavailable`` if the log cannot be read now (a reload is
                scheduled), ``session_damaged`` if it does not fold.
        """
        self._behind = False
        seq = self.state.seq
        try:
            if reopen:
                raw = await trio.to_thread.run_sync(self.store.load, self.id)
            else:
                raw = await self.store.read(self.id, seq)
        except Exception as exc:
            self._store_failed("follow_failed", exc)
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, "the session's log cannot be read now; retry"
            ) from None
        new = [Record.from_json(r) for r in raw if r["seq"] > seq]
        if not new:
            return
        try:
            state = self.engine.apply_all(self.state, new)
        except BadRecord as exc:
            log.error("session_log_unusable", error=str(exc))
            self.close()
            raise ProtocolError(
                ErrorCode.SESSION_DAMAGED, f"the log of session {self.id!r} is damaged"
            ) from None
        self.state = state
        follow = getattr(self.store, "follow", None)  # a shared store: append from here on
        if follow is not None and not reopen:
            with contextlib.suppress(Conflict):  # never: this actor is the one appender
                follow(self.id, state.seq + 1)
        now = self._changed_at = trio.current_time()
        self._tail.extend(new)
        if self._unattended_since is not None:
            self._unattended_since = now
        self._publish(new)
        if state.ended:
            self.store.release(self.id)

    def close(self) -> None:
        """Stop taking commands; :meth:`run` returns after the queued ones."""
        self._send.close()

    def submit(self, conn: Subscriber, rid: Any, command: Command) -> None:
        """Queue ``command`` from ``conn`` for the actor, which answers request ``rid`` on
        ``conn`` with a typed outcome (:meth:`execute`).

        Raises:
            ProtocolError: ``overloaded`` if the queue is full, ``unavailable`` if closed.
        """
        if self._inflight.get(conn, 0) >= PER_CONNECTION:
            raise ProtocolError(
                ErrorCode.OVERLOADED,
                f"at most {PER_CONNECTION} requests per connection wait on one session; retry",
            )
        try:
            self._send.send_nowait((conn, rid, command))
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

    # -- commands (run inside the actor; ``resume``/``view``/``watch`` also answer an ended
    # session loaded from its log, which keeps no subscribers) ------------------------------------
    async def _join(self, conn: Subscriber, cmd: Join) -> Answer:
        """Take a free seat (the lowest, or ``seat``): :class:`Joined` (seat, token, snapshot);
        then the new records go to the other subscribers and the turn pushes to every seat.

        One connection holds one role per session (:meth:`_one_role`): open another connection
        to play two seats.

        Raises:
            ProtocolError: ``session_ended``, ``already_attached``, ``session_full`` (with
                ``free``), ``bad_request`` (no such seat), ``internal`` (the game's start failed).
        """
        if self.state.ended:
            raise ProtocolError(ErrorCode.SESSION_ENDED, "the session is over")
        self._one_role(conn)
        name, seat = cmd.name, cmd.seat
        free = self.state.free_seats
        if seat is None:
            if not free:
                raise ProtocolError(ErrorCode.SESSION_FULL, "every seat is taken", free=free)
            seat = free[0]
        elif not 0 <= seat < len(self.state.seats):
            raise ProtocolError(
                ErrorCode.BAD_REQUEST, f"seats are 0..{len(self.state.seats) - 1}, not {seat}"
            )
        elif seat not in free:
            raise ProtocolError(ErrorCode.SESSION_FULL, f"seat {seat} is not free", free=free)
        token = secrets.token_urlsafe(24)
        try:
            new, after = self.engine.seat_step(self.state, seat, name, False, hash_token(token))
        except Exception:  # the game's start failed: a step of the host's, not the joiner's
            log.exception("game_fault", step="start")
            self._faulted = True  # the next step ends the session (game_error)
            raise ProtocolError(
                ErrorCode.INTERNAL, "internal error: the game failed to start"
            ) from None
        # the reply's view is built before the append: a game fault there appends nothing
        snap = self.snapshot(seat, after, new[-1])
        await self._commit(new, after)
        if self.state is not after:  # the commit ended it (too_long): build it again
            snap = self.snapshot(seat)
        self._attach(conn, seat, cmd.view)
        log.info("seat_taken", seat=seat, peer=conn.peer)
        return Joined(seat, token, snap), lambda: self._publish(new, skip=conn)

    async def _watch(self, conn: Subscriber, cmd: Watch) -> Answer:
        """Subscribe as a spectator: :class:`Watching` (the spectator's snapshot), then the
        ``ended`` push if the session is over.

        Raises:
            ProtocolError: ``already_attached`` (:meth:`_one_role`).
        """
        self._one_role(conn)
        self._attach(conn, None, cmd.view)
        return Watching(self.snapshot(None)), self._then_ended(conn)

    def _then_ended(self, conn: Subscriber) -> Callable[[], None] | None:
        """Send ``conn`` the ``ended`` push after the reply, if the session is over."""
        if not self.state.ended:
            return None
        return lambda: conn.send(self._ended_push())

    async def _resume(self, conn: Subscriber, cmd: Resume) -> Answer:
        """Re-attach a seat by its token: the records after ``after`` are pushed, then
        :class:`Resumed` (seat, snapshot), then the ``ended`` push if the session is over, else
        the seat's ``turn`` push if it is to act.

        Raises:
            ProtocolError: ``bad_token``; ``bad_request`` for ``after`` < 0;
                ``records_lost`` (with ``seq``) for ``after`` past the log's end;
                ``already_attached`` (:meth:`_one_role`).
        """
        after = cmd.after
        if self.shared:  # the seat, and what the client saw, may be another host's records
            await self._follow()
        h = hash_token(cmd.token)
        seat = next(
            (i for i, s in enumerate(self.state.seats) if s is not None and s.token_hash == h),
            None,
        )
        if seat is None:
            raise ProtocolError(ErrorCode.BAD_TOKEN, "that token holds no seat in this session")
        if after is not None and after < 0:
            raise ProtocolError(
                ErrorCode.BAD_REQUEST, f"'after' must be 0..{self.state.seq}, not {after}"
            )
        if after is not None and after > self.state.seq:
            await self._follow()  # the client may have seen records of another host's
        if after is not None and after > self.state.seq:
            if not self._lost_logged:  # once per session and host run: a client can repeat it
                self._lost_logged = True
                log.error("log_lost_records", seat=seat, after=after, seq=self.state.seq)
            raise ProtocolError(
                ErrorCode.RECORDS_LOST,
                f"the client saw seq {after} but the log ends at {self.state.seq}: "
                "the log lost records",
                seq=self.state.seq,
            )
        self._one_role(conn)
        for other, viewer in list(self.subscribers.items()):
            if viewer == seat and other is not conn:
                self._detach(other)
        if after is not None:  # one queued chunk, however far behind the seat is
            missed = (self._push(rec, seat) for rec in await self._missed_records(after))
            pushes = [p for p in missed if p is not None]
            if pushes:
                conn.send_many(pushes)
        self._attach(conn, seat, cmd.view)
        return Resumed(seat, self.snapshot(seat)), self._then_ended(conn) or (
            lambda: self._send_turn(conn, seat)
        )

    async def _view(self, conn: Subscriber, cmd: View) -> Answer:
        """:class:`ViewReply`: the snapshot of the seat this connection holds (else a
        spectator's)."""
        return ViewReply(self.snapshot(self.subscribers.get(conn))), None

    async def _act(self, conn: Subscriber, cmd: Act) -> Answer:
        """Run an action from the seat this connection holds: :class:`Accepted` (the last seq
        after its records), then its records go to every subscriber (this one too).

        Raises:
            ProtocolError: ``not_seated``, ``conflict`` (with ``seq``), ``session_ended``.
            ActionError: ``bad_action`` (``BadAction``), ``not_your_turn``, ``illegal_action``
                (``IllegalAction``, with ``reason``).
        """
        action, expected = cmd.action, cmd.expected
        seat = self.subscribers.get(conn)
        if seat is None:
            raise ProtocolError(ErrorCode.NOT_SEATED, "join or resume a seat first")
        if expected is not None and expected > self.state.seq:
            await self._follow()  # the turn push may come from another host's append
        if expected is not None and expected != self.state.seq:
            why = self._stale(seat, expected)
            if why is not None:
                raise ProtocolError(
                    ErrorCode.CONFLICT,
                    f"the session is at seq {self.state.seq}, not {expected}: {why}",
                    seq=self.state.seq,
                )
        if self.state.ended:
            raise ProtocolError(ErrorCode.SESSION_ENDED, "the session is over")
        parsed = self.engine.codec.action_from_wire(action)  # BadAction, an ActionError
        new, after = self.engine.step(self.state, seat, parsed)  # ActionError: the game refuses
        await self._commit(new, after)
        self._timeouts.pop(seat, None)
        self.actions += 1
        return Accepted(self.state.seq), lambda: self._publish(new)

    async def _leave(self, conn: Subscriber, cmd: Leave) -> Answer:
        """Stop pushes to this connection (a seat stays reserved for its token): :class:`Left`.

        Raises:
            ProtocolError: ``not_seated`` (it neither plays nor watches here).
        """
        if conn not in self.subscribers:
            raise ProtocolError(ErrorCode.NOT_SEATED, "this connection neither plays nor watches")
        self._detach(conn)
        return Left(), None

    def drop(self, conn: Subscriber) -> None:
        """Forget a connection that went away (not a command: safe from any task)."""
        self._detach(conn)
        self._inflight.pop(conn, None)
        if self._wait is not None:
            self._wait.cancel()  # the actor works out its next deadline again

    # -- internals -----------------------------------------------------------------------------
    def _one_role(self, conn: Subscriber) -> None:
        """The role rule: a connection plays one seat of a session or watches it, and changes
        that only by ``leave`` first (so no op silently drops a seat or takes a second one).

        Raises:
            ProtocolError: ``already_attached`` with ``seat``: the seat held, or None for a
                spectator.
        """
        if conn not in self.subscribers:
            return
        held = self.subscribers[conn]
        what = "watches this session" if held is None else f"holds seat {held} here"
        raise ProtocolError(
            ErrorCode.ALREADY_ATTACHED,
            f"this connection {what} already; leave first",
            seat=held,
        )

    def _attach(self, conn: Subscriber, viewer: Viewer, view: bool = False) -> None:
        """Subscribe ``conn`` as ``viewer``; ``view``: it gets a view push after every change."""
        if not self.live or getattr(conn, "dead", False):
            return  # a connection that went away while its join/watch/resume was under way
        self.subscribers[conn] = viewer
        told = getattr(conn, "attached", None)
        if told is not None:
            told(self.id, viewer)
        if view:
            self._viewing.add(conn)
        else:
            self._viewing.discard(conn)
        if viewer is not None:
            self._timeouts.pop(viewer, None)  # its player is back: wait for it again
        self._check_attended()

    def _detach(self, conn: Subscriber) -> None:
        self.subscribers.pop(conn, None)
        told = getattr(conn, "detached", None)
        if told is not None:
            told(self.id)
        self._viewing.discard(conn)
        self._check_attended()

    def _attended(self) -> bool:
        """Whether a connection counts as attached (for abandonment): one holding a human
        seat; a spectator only counts if the session has no human seat at all (all bots)."""
        humans = len(self.state.seats) > len(self.state.header.get("bots", ()))
        return any(v is not None or not humans for v in self.subscribers.values())

    def _check_attended(self) -> None:
        if self._attended():
            self._unattended_since = None
        elif self._unattended_since is None:
            self._unattended_since = trio.current_time()

    async def _missed_records(self, after: int) -> list[Record]:
        """The records after seq ``after`` (0 <= ``after`` <= ``state.seq``) up to the session's
        seq: from the records held in memory if they reach back that far, else read from the
        store (without their structured values: pushes decode the events again).

        Raises:
            ProtocolError: ``unavailable`` if the log cannot be read now.
        """
        tail = self._tail
        if tail and tail[0].seq <= after + 1:
            return [r for r in tail if r.seq > after]
        seq = self.state.seq
        try:
            raw = await self.store.read(self.id, after)
        except Exception:
            log.exception("log_read_failed", after=after)
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, "the session's log cannot be read now; retry"
            ) from None
        # the store may hold records of an append not acknowledged yet: never past our seq
        return [Record.from_json(r) for r in raw if r["seq"] <= seq]

    def _ended_fields(self, last: Record | None = None) -> dict[str, Any]:
        data = (self._tail[-1] if last is None else last).data
        out = {"outcome": data["outcome"]}
        if "aborted" in data:
            out["aborted"] = data["aborted"]
        return out

    def _ended_push(self) -> EndedPush:
        data = self._tail[-1].data
        return EndedPush(self.id, self.state.seq, data["outcome"], data.get("aborted"))

    def seat_list(self, state: SessionState | None = None) -> list[SeatInfo | None]:
        """The wire's ``seats``, in every reply that has it: one entry per seat, None while it
        is free (of ``state``, default now)."""
        return [
            None if s is None else SeatInfo(i, s.name, s.bot)
            for i, s in enumerate((state or self.state).seats)
        ]

    def snapshot(
        self, viewer: Viewer, state: SessionState | None = None, last: Record | None = None
    ) -> Snapshot:
        """The session as ``viewer`` sees it now, or as of ``state`` whose last record is
        ``last`` (a state not committed yet).

        Raises:
            Exception: whatever the game's ``to_act``/``view`` raise.
        """
        st = self.state if state is None else state
        end: dict[str, Any] = {}
        if st.ended:
            data = (self._tail[-1] if last is None else last).data
            end = {
                "outcome": data["outcome"],
                "aborted": data.get("aborted"),
                "seed": self._public_seed(),
            }
        return Snapshot(
            self.id,
            self.game.info.id,
            st.seq,
            self.seat_list(st),
            st.started,
            st.ended,
            list(self.game.to_act(st.game)) if st.started and not st.ended else [],
            self.engine.codec.to_wire(self.game.view(st.game, viewer)),
            st.header["seed_commitment"],
            **end,
        )

    def _public_seed(self) -> str | None:
        """The seed for clients once the session ended, or None if the game keeps it secret."""
        return self.state.header["seed"] if self.game.info.reveal_seed else None

    async def _commit(self, new: list[Record], after: SessionState | None = None) -> None:
        """Append ``new`` durably, then make it the session's state (``after``, if the caller
        folded it already). Observers are told later (:meth:`_observe`).

        Raises:
            ProtocolError: ``unavailable`` if the append failed (the session reloads its log
                on the next command, or after :data:`RELOAD_RETRY` seconds).
        """
        state = after if after is not None else self.engine.apply_all(self.state, new)
        too_long = not state.ended and state.seq + 1 >= self.max_records
        if too_long:  # the host's stop goes in the same append: both durable, or neither
            stop, state = self.engine.abort_step(state, "too_long")
            new.extend(stop)
        await self._append(new)
        self.state = state
        self._changed_at = trio.current_time()
        self._tail.extend(new)
        self._unobserved.extend(new)
        if too_long:
            log.warning("session_aborted", reason="too_long", seq=self.state.seq)
        if self.state.ended:
            self.store.release(self.id)
            log.info("session_ended", seq=self.state.seq, **self._ended_fields())

    async def _append(self, new: list[Record]) -> None:
        try:
            await self.store.append(self.id, self.state.seq + 1, self._store_records(new))
        except Conflict:
            # another host sharing the store appended first: catch up; the caller decides again
            log.info("append_conflict", seq=self.state.seq + 1)
            self.lost_races += 1
            await self._follow(reopen=True)
            raise _Stale from None
        except Exception as exc:
            self._store_failed("append_failed", exc)
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, "the session's log could not be written; retry"
            ) from None
        if self._store_failures:
            log.warning("store_recovered", failures=self._store_failures)
            self._store_failures = 0

    def _store_records(self, new: list[Record]) -> list[dict[str, Any]]:
        """The records as the store takes them; for a store that writes ``orjson.Fragment``
        values as they are (``FileStore.splices_encoded``), an event's body is its JSON made
        once by the engine (``Record.encoded``), which the event push reuses (see :meth:`_push`)."""
        records = [r.to_json() for r in new]
        if getattr(self.store, "splices_encoded", False):
            for rec, raw in zip(new, records, strict=True):
                if rec.encoded is not None:
                    raw["event"] = rec.encoded
        return records

    def _store_failed(self, event: str, exc: Exception) -> None:
        """Note a failed append or reload: retry after a delay doubling from
        :data:`RELOAD_RETRY` to :data:`RELOAD_RETRY_MAX` seconds; the first failure in a row
        logs its traceback and tells every subscriber once (``stalled`` push), later ones log
        one line each."""
        self._store_failures += 1
        n = self._store_failures
        delay = min(RELOAD_RETRY_MAX, RELOAD_RETRY * 2 ** min(n - 1, 16))
        self._reload_at = trio.current_time() + delay
        if n == 1:
            log.exception(event, retry_in=delay)
            stalled = StalledPush(self.id, "store_error")
            for conn in list(self.subscribers):
                conn.send(stalled)
        else:
            log.error(event, error=repr(exc), failures=n, retry_in=delay)

    def _observe(self) -> None:
        """Tell the observer hooks of the records appended since (after the replies and the
        pushes), each implementation on its own: one that raises is logged, never fatal."""
        if not self._unobserved:
            return
        recs, self._unobserved = self._unobserved, []
        if self.hooks is None:
            return
        for rec in recs:
            notify_isolated(
                self.hooks.gamehost_event_appended, session=self.id, record=rec.to_json()
            )
            if rec.type == "ended":
                notify_isolated(
                    self.hooks.gamehost_session_ended, session=self.id, outcome=rec.data["outcome"]
                )

    def _push(
        self, rec: Record, viewer: Viewer, shared: list[EventPush] | None = None
    ) -> EventPush | None:
        """The ``event`` push of ``rec`` for ``viewer``. With ``shared`` (empty for each new
        record), a push that is the same for every viewer — a record other than an event, or
        an event the game's ``redact`` gives back unchanged — is made once and kept there, so
        the viewers share one object (encoded once)."""
        if rec.type == "event":
            event = rec.obj
            if event is None:
                event = self.engine.codec.event_from_wire(rec.data["event"], rec.data.get("v"))
            redacted = self.game.redact(event, viewer)
            if redacted is not event or shared is None:
                body = self.engine.codec.event_to_wire(redacted)
                return EventPush(self.id, rec.seq, rec.type, body)
            if shared:
                return shared[0]
            if rec.encoded is not None:  # the body's JSON the engine made: no second encoding
                push = EventPush.with_encoded_body(
                    self.id, rec.seq, rec.type, rec.data["event"], rec.encoded
                )
                shared.append(push)
                return push
            body = self.engine.codec.event_to_wire(event)
        elif shared:
            return shared[0] if rec.type in ("action", "seat_taken", "ended") else None
        elif rec.type == "action":
            body = {"seat": rec.data["seat"], "action": rec.data["action"]}
            if rec.data.get("timed_out"):
                body["timed_out"] = True
        elif rec.type == "seat_taken":
            body = {"seat": rec.data["seat"], "name": rec.data["name"], "bot": rec.data["bot"]}
        elif rec.type == "ended":
            body = {"outcome": rec.data["outcome"], "seed": self._public_seed()}
            if "aborted" in rec.data:
                body["aborted"] = rec.data["aborted"]
        else:
            return None
        push = EventPush(self.id, rec.seq, rec.type, body)
        if shared is not None:
            shared.append(push)
        return push

    def _publish(self, new: list[Record], skip: Subscriber | None = None) -> None:
        """Send each record to every subscriber (one redaction per distinct viewer), then the
        ``ended`` push or the ``turn`` pushes. A game fault here (the records are durable
        already) ends the session as ``game_error`` on the next step."""
        try:
            self._publish_unguarded(new, skip)
        except Exception:
            log.exception("game_fault", step="publish")
            self._faulted = True

    def _publish_unguarded(self, new: list[Record], skip: Subscriber | None) -> None:
        subs = [(c, v) for c, v in self.subscribers.items() if c is not skip]
        for rec in new:
            cache: dict[Viewer, EventPush | None] = {}
            shared: list[EventPush] = []  # the push every viewer gets alike (see _push)
            for conn, viewer in subs:
                if viewer not in cache:
                    cache[viewer] = self._push(rec, viewer, shared)
                msg = cache[viewer]
                if msg is not None and not conn.send(msg):
                    self._detach(conn)
        if self._viewing:
            self._send_views(subs)
        if self.state.ended:
            end = self._ended_push()
            for conn, _ in subs:
                conn.send(end)
            return
        for conn, viewer in list(self.subscribers.items()):
            if viewer is not None:
                self._send_turn(conn, viewer)

    def _send_views(self, subs: list[tuple[Subscriber, Viewer]]) -> None:
        """The ``view`` push of the state now to each of ``subs`` that asked for them (one
        view per distinct viewer), after a change's records and before its turn or ended push.

        Raises:
            GameFault: the game's ``view`` failed (``_publish`` ends the session then).
        """
        st = self.state
        views: dict[Viewer, ViewPush] = {}
        for conn, viewer in subs:
            if conn not in self._viewing:
                continue
            if viewer not in views:
                views[viewer] = ViewPush(self.id, st.seq, self.engine.view_wire(st, viewer))
            if not conn.send(views[viewer]):
                self._detach(conn)

    def _send_turn(self, conn: Subscriber, seat: Seat) -> None:
        turn = self._turn(seat)
        if turn is not None:
            conn.send(turn)

    def _turn(self, seat: Seat) -> TurnPush | None:
        """The seat's ``turn`` push now, or None when it is not to act (legal lists are
        computed once per state and seat; those of earlier seqs are kept for :meth:`_stale`)."""
        st = self.state
        if not st.started or st.ended or seat not in self.game.to_act(st.game):
            return None
        seq, lines = self._turns
        if seq != st.seq:
            if lines:
                self._past_turns.append(self._turns)
            lines = {}
            self._turns = (st.seq, lines)
        turn = lines.get(seat)
        if turn is None:
            legal = [
                self.engine.codec.action_to_wire(a) for a in self.game.legal_actions(st.game, seat)
            ]
            turn = lines[seat] = TurnPush(self.id, st.seq, seat, legal)
        return turn

    def _stale(self, seat: Seat, expected: int) -> str | None:
        """Why an act of ``seat`` naming seq ``expected`` (not the session's) is refused, or
        None when it still holds (the rule: :mod:`host.table.freshness`).

        Raises:
            GameFault: the game's ``redact`` or ``legal_actions`` failed.
        """
        if expected > self.state.seq:
            return "that seq is not reached yet"
        since = [r for r in self._tail if r.seq > expected]
        if len(since) != self.state.seq - expected:
            return "the host no longer holds the records since"
        then = None
        for seq, lines in (*self._past_turns, self._turns):
            if seq == expected and seat in lines:
                then = lines[seat].legal
        now = self._turn(seat)
        return stale_reason(self.engine, seat, since, then, now.legal if now else [])


Answer = tuple[Outcome, Callable[[], None] | None]
"""A command handler's result: the outcome to answer, and what to push after the reply."""

_HANDLERS: dict[type, Callable[[Session, Subscriber, Any], Awaitable[Answer]]] = {
    Join: Session._join,
    Watch: Session._watch,
    Resume: Session._resume,
    View: Session._view,
    Act: Session._act,
    Leave: Session._leave,
}
"""Each mailbox command's handler."""
