"""The session driver: one trio task carries out what a session's table core decides.

The decisions are :class:`host.table.core.Table`'s (no I/O there); a :class:`Session` is the
thin part that does the I/O, the way h11's trio example drives its ``Connection``:

- it takes commands from connections over a bounded memory channel (:meth:`Session.submit`;
  at most :data:`PER_CONNECTION` waiting per connection) and runs them one at a time, between
  the host-driven steps the table says are due (:meth:`Table.next_due`), waiting for the next
  command with that deadline; a connection that goes away is told to the table too
  (:meth:`Session.drop`);
- for each step it appends the table's records to the store, expecting the seq the table
  names, and only once they are durable hands the step back (:meth:`Table.commit`) and carries
  the effects out in order: the reply, the pushes per connection, the connections told their
  roles, then the observer hooks (each on its own: one that raises is logged, never fatal). So
  the order of every change is persist -> apply -> reply -> publish -> notify;
- it owns the store's retries: an append that another host won (``Conflict``) makes it read what
  that host wrote, fold it in (:meth:`Table.follow`, which pushes it) and ask the table again
  (a second loss answers ``conflict``); an append that fails answers ``unavailable`` and the
  session reloads its log by itself after :data:`RELOAD_RETRY` seconds, doubling up to
  :data:`RELOAD_RETRY_MAX` while the store keeps failing; the first failure in a row logs a
  traceback and pushes ``stalled`` (reason ``store_error``) to every subscriber once, later
  ones log one line each. A command brings the retry forward only once :data:`RELOAD_RETRY`
  seconds have passed since the last failed attempt, so the store is tried at most once a
  second however many requests come. Until then a command that would write answers
  ``unavailable`` at once, one that only reads (``view``, ``watch``) is answered from what the
  table holds (the state before the failed write), and a connection that goes is released by
  the retry (the table's rule for seats whose connection is gone);
- when another host appended (:meth:`Session.notice`), it reads the new records and follows.

Times: the table works in the host clock (seconds since the epoch, ``clock_base +
trio.current_time()``, so tests with trio's ``autojump_clock`` move it too); every record is
written with the time of its append, and every timer is counted from records, so it holds across
a restart and across hosts.

No locks: one task, one writer. Publishing never waits: a subscriber whose outbound channel is
full is disconnected (it can ``resume``), so a slow client never stalls a table.
"""

from __future__ import annotations

import contextlib
import math
import socket
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Protocol

import attrs
import structlog
import trio

from host.net import collector
from host.net.heavy import stretch
from host.net.metrics import Metrics
from host.plugins.budget import Budget, BudgetExceeded
from host.plugins.faults import GameFault, notify_isolated
from host.store.base import Conflict, CorruptLog, UnknownSession
from host.store.file import FileStore
from host.table.commands import Command, Join, Resume
from host.table.core import (
    GAME_FAULTED_NOW,
    Attach,
    Backfill,
    Detach,
    Effect,
    Observe,
    Reply,
    Send,
    SendMany,
    Step,
    Table,
    hash_token,
)
from host.table.engine import BadRecord, Engine, Record, SessionState
from host.table.loading import load_steps
from protocol.messages import ErrorCode, ProtocolError
from protocol.replies import Outcome, Push, Refused, SeatInfo, StalledPush

__all__ = [
    "Session",
    "SessionStatistics",
    "Subscriber",
    "hash_token",
    "seat_bots",
    "seat_bots_step",
]

log = structlog.get_logger("gamehost.session")

PER_CONNECTION = 32
"""The most requests one connection may have waiting on one session (``overloaded`` past it)."""
RELOAD_RETRY = 1.0
"""Seconds before the first retry (reload, then the step again) of a session whose append
failed; the delay doubles with each failure in a row. A command brings a retry forward, but
never to less than this after the last failed attempt."""
CATCH_UP_ROUNDS = 16
"""Scheduling rounds a session waits at most for a resumer's reader to read what is already
in its socket before it judges whether that connection has closed (:func:`gone_by_now`)."""
RELOAD_RETRY_MAX = 60.0
"""The longest delay, in seconds, between two retries of a session whose log keeps failing."""


class Subscriber(Protocol):
    """What a session needs of a connection: its key, non-blocking sends of typed messages (the
    connection encodes them), and being told its role."""

    peer: str
    key: str

    def send(self, push: Push) -> bool:
        """Queue a push; False if the connection is too slow and is being dropped."""
        ...

    def send_many(self, pushes: list[Push]) -> bool:
        """Queue pushes as one chunk; False as :meth:`send`."""
        ...

    def answer(self, rid: Any, outcome: Outcome) -> None:
        """Queue the reply to request ``rid``."""
        ...

    def settled(self) -> None:
        """The session has answered one of this connection's requests."""
        ...

    def attached(self, session: str, viewer: int | None) -> None:
        """The session counts this connection as playing ``viewer``'s seat (None: watching)."""
        ...

    def detached(self, session: str) -> None:
        """The session no longer counts this connection as playing or watching."""
        ...


@attrs.frozen
class SessionStatistics:
    """Counters: ``seq`` (last record), ``subscribers``, ``queued`` commands, ``actions``."""

    seq: int
    subscribers: int
    queued: int
    actions: int


def seat_bots(engine: Engine, state: SessionState, seats: Iterable[int]) -> list[Record]:
    """The records that seat host bots in ``seats`` (each still free), in order, plus the
    opening events once the last seat is taken.

    Raises:
        ValueError: a seat is not free. Anything the game's ``start`` raises.
    """
    return seat_bots_step(engine, state, seats)[0]


def seat_bots_step(
    engine: Engine, state: SessionState, seats: Iterable[int]
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


def peer_closed(conn: Any) -> bool | None:
    """Whether ``conn``'s client has closed its side: True when the connection says so (an end
    of input or a WebSocket close frame read), or when (TCP) its socket holds nothing but the
    end of input (a peek, never a read); None when input it sent has not been read yet (its
    reader has not caught up: ask again after a checkpoint); else False. None and False are
    both falsy: "not known to be closing"."""
    if getattr(conn, "closing", False) or getattr(conn, "dead", False):
        return True
    stream = getattr(conn, "stream", None)
    if getattr(stream, "peer_closed", False):  # a WebSocket whose close frame was read
        return True
    sock = getattr(getattr(stream, "socket", None), "_sock", None)
    if sock is None:
        return False
    try:
        got = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    return True if got == b"" else None


def closing(conn: Any, command: Command) -> bool:
    """Whether ``conn``'s client has closed its side, as the table is told it for ``command``:
    only a ``join`` or a ``resume`` uses the answer (a seat is not taken for a client that is
    going), so only they ask it (:func:`peer_closed` peeks at the socket: a system call, not
    one for every ``act``)."""
    return isinstance(command, (Join, Resume)) and bool(peer_closed(conn))


async def gone_by_now(conn: Any) -> bool:
    """Whether ``conn`` has closed by now (or was dropped: None), after giving its reader a
    few scheduling rounds (at most :data:`CATCH_UP_ROUNDS`) to read what its client sent
    right behind a request, so a close sent just after it (an end of input, a WebSocket close
    frame, a reset) is seen."""
    if conn is None:
        return True
    for _ in range(CATCH_UP_ROUNDS):
        state = peer_closed(conn)
        if state is not None:
            return state
        await trio.lowlevel.checkpoint()
    return bool(peer_closed(conn))


class Session:
    """A session's driver: live (its task runs :meth:`run`), or an ended one answered from its
    log (:meth:`retire`).

    Args:
        table: the session's table core.
        store: the event store (the log exists).
        hooks: the plugin manager's hook relay (observers), or None.
        linger: seconds a finished session stays (for ``view``/``resume``) once idle.
        clock_base: the host clock is ``clock_base + trio.current_time()`` (seconds since the
            epoch); default: now's wall clock.
        budget: the host's budget for game code (``host.plugins.budget``): every call into
            the table (which runs the game) is one bounded step; None: unbounded.
        metrics: the host's metrics (:mod:`host.net.metrics`): append latency, actions,
            endings, faults, store errors, leases; None: not counted.
    """

    def __init__(
        self,
        table: Table,
        store: FileStore,
        hooks: Any = None,
        linger: float = 60.0,
        clock_base: float | None = None,
        budget: Budget | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.table = table
        self.id = table.id
        self.engine = table.engine
        self.game = table.game
        self.store = store
        self.hooks = hooks
        self.linger = linger
        self.budget = budget or Budget(None, None)
        self.metrics = metrics
        self._told_driver: bool | None = None  # what the feed last said (None: nothing yet)
        self.clock_base = time.time() - trio.current_time() if clock_base is None else clock_base
        self._conns: dict[str, Subscriber] = {}
        self._inflight: dict[str, int] = {}
        self._drops: dict[str, str] = {}  # connections gone, not told to the table yet
        self._send, self._recv = trio.open_memory_channel[tuple[Subscriber, Any, Command]](256)
        self._wait: trio.CancelScope | None = None
        self._behind = False
        self._reload_at: float | None = None
        self._failed_at = -math.inf  # trio time of the last failed read or append
        self._unusable: ProtocolError | None = None  # the log is gone or damaged for good
        self._store_failures = 0
        self._changed_at = trio.current_time()
        self._used_at = trio.current_time()  # a connection's last command here, or the lease's end
        self._let_go = False  # leave as soon as unserved (see let_go)
        self.leaving = False
        """The task has decided to end (the session leaves memory): a request for it waits for
        :attr:`left`, then loads it again."""
        self.left = trio.Event()
        """Set (by the host) once the session has left the host's live list."""
        self.live = True
        self.lost_races = 0
        self.stopping = False
        """The host is shutting down: connections that go are not released in the log (the
        host that serves the session next releases every seat the old connections held, as
        ``host_gone``)."""

    # -- what the host reads -------------------------------------------------------------------
    @property
    def state(self) -> SessionState:
        return self.table.state

    @property
    def ended(self) -> bool:
        """The session has ended."""
        return self.table.ended

    @property
    def driver(self) -> bool:
        return self.table.driver

    @property
    def shared(self) -> bool:
        return self.table.shared

    @property
    def actions(self) -> int:
        return self.table.actions

    @property
    def turn_timeout(self) -> float | None:
        """Seconds a seat may take to act (the header's, else the host's), or None."""
        return self.table.turn_timeout

    @property
    def failed(self) -> bool:
        """The last append failed and the session has not been reloaded from its log yet."""
        return self._reload_at is not None

    @property
    def subscribers(self) -> dict[Subscriber, int | None]:
        """The connections that play or watch here, each with its seat (None: watching)."""
        subs = self.table.subs
        return {c: subs[k].viewer for k, c in self._conns.items() if k in subs}

    def seat_list(self, state: SessionState | None = None) -> list[SeatInfo | None]:
        return self.table.seat_list(state)

    def now(self) -> float:
        """The host clock (seconds since the epoch)."""
        return self.clock_base + trio.current_time()

    def statistics(self) -> SessionStatistics:
        """The counters now."""
        return SessionStatistics(
            self.table.seq,
            len(self.table.subs),
            self._recv.statistics().current_buffer_used,
            self.table.actions,
        )

    # -- what the host tells ------------------------------------------------------------------
    def set_driver(self, driver: bool) -> None:
        """Run host-driven steps from now on (this host holds the session's lease) or not."""
        m = self.metrics
        if m is not None and driver != self._told_driver:
            if driver:
                m.leases_taken += 1
                m.lease_takeovers += self._told_driver is False  # another host held it
            elif self._told_driver:
                m.leases_lost += 1
        self._told_driver = driver
        if driver != self.table.driver:
            self.table.set_driver(driver)
            if not driver:
                self._used_at = trio.current_time()  # followed a while yet: no churn
            self._poke()

    def set_host_alive(self, alive: Callable[[str], bool]) -> None:
        """How to tell whether another host (by instance id) still runs (``host.store.feed``)."""
        self.table.host_alive = alive
        self._poke()

    def seat_hosts(self) -> set[str]:
        """The instance ids of the hosts whose connections hold seats here, per the log."""
        return {h.partition(".")[0] for h in self.table.holders if h is not None}

    def let_go(self) -> None:
        """Another host drives the session: keep it only while a connection of this host uses
        it, and once none does, let it leave memory at once rather than after ``linger``
        (a connection that uses it again brings the linger back)."""
        if not self._let_go:
            self._let_go = True
            self._poke()

    def notice(self, seq: int | None) -> None:
        """The session's log reaches ``seq`` (None: it may have grown): the driver reads and
        folds the records it lacks, and pushes them, before its next command or step."""
        if seq is None or seq > self.table.seq:
            self._behind = True
            self._poke()

    def _poke(self) -> None:
        if self._wait is not None:
            self._wait.cancel()  # the driver works out its next step again

    def retire(self) -> None:
        """Make this an ended session answered from its log: no task, no subscribers."""
        self.live = False
        self.table.live = False
        for key in list(self.table.subs):
            conn = self._conns.get(key)
            if conn is not None:
                conn.detached(self.id)
        self.table.subs.clear()
        self._conns.clear()
        self._inflight.clear()

    def close(self) -> None:
        """Stop taking commands; :meth:`run` returns after the queued ones."""
        self._send.close()

    def submit(self, conn: Subscriber, rid: Any, command: Command) -> None:
        """Queue ``command`` from ``conn``; the driver answers request ``rid`` on ``conn``.

        Raises:
            ProtocolError: ``overloaded`` if the queue is full, ``unavailable`` if closed.
        """
        key = conn.key
        if self.leaving:  # past its last look at the queue: nothing queued now would be run
            raise ProtocolError(ErrorCode.UNAVAILABLE, "the session is closing")
        if self._inflight.get(key, 0) >= PER_CONNECTION:
            raise ProtocolError(
                ErrorCode.OVERLOADED,
                f"at most {PER_CONNECTION} requests per connection wait on one session; retry",
            )
        try:
            self._send.send_nowait((conn, rid, command))
        except trio.WouldBlock:
            raise ProtocolError(ErrorCode.OVERLOADED, "the session is busy; retry") from None
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise ProtocolError(ErrorCode.UNAVAILABLE, "the session is closing") from None
        self._inflight[key] = self._inflight.get(key, 0) + 1
        self._conns[key] = conn

    def drop(self, conn: Subscriber) -> None:
        """A connection went away (safe from any task): it gets nothing more from here, and
        the table is told before the next command (it releases a seat the connection held)."""
        key = conn.key
        self._used_at = trio.current_time()
        self._conns.pop(key, None)
        self._inflight.pop(key, None)
        if key in self.table.subs:
            conn.detached(self.id)
        if key in self.table.subs and self.live and not self.stopping:
            reason = "unresponsive" if getattr(conn, "reason", None) == "unresponsive" else "gone"
            self._drops[key] = reason
            self._poke()

    # -- the task ------------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve commands and host-driven steps until :meth:`close`, or until the session ended
        and stayed idle ``linger`` seconds, or (on a shared store) until it went ``linger``
        seconds without being driven here or used by a connection of this host (it is followed
        only while served: :meth:`unserved_since`)."""
        structlog.contextvars.clear_contextvars()  # not the creating connection's peer
        structlog.contextvars.bind_contextvars(session=self.id, game=self.game.info.id)
        for _ in range(3):  # bots a create cut short did not seat, seats of connections gone:
            when, _ = self._next_step()  # done before the first command
            if when != -math.inf:
                break
            await self._host_step("table")
        task_status.started()
        async with self._recv:
            while True:
                worked = False
                if self._drops:
                    await self._drop_pending()
                    worked = True
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
                        if item is None and not self._drops:
                            self.leaving = True
                            return  # finished (or not served here) and idle: forgotten
                    else:
                        await self._host_step(kind)
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

    def _next_step(self) -> tuple[float, str]:
        """When the next step is due, in trio time, and which."""
        if self._reload_at is not None:
            return self._reload_at, "reload"
        if self._behind:
            return -math.inf, "follow"
        if self.table.ended:
            return self._changed_at + self.linger, "expire"
        blame = self.budget.blamed(self.id)
        if blame is not None:  # found after a step had closed: a caught interruption, memory
            self._overran(BudgetExceeded(*blame))
        try:
            with self.budget.step("to_act", self.id, self.table.seq):
                when, _ = self.table.next_due()
        except BudgetExceeded as exc:
            self._overran(exc)
            when = -math.inf
        when -= self.clock_base
        since = self.unserved_since()
        if since is not None:
            linger = -math.inf if self._let_go else self.linger
            if since + linger < when:
                return since + linger, "expire"
        return when, "table"

    def unserved_since(self) -> float | None:
        """Since when (trio time) this host has served the session no more: on a shared store,
        it does not drive it (no lease), no connection of this host plays or watches it and
        none has a command waiting. None while it serves it (and always on a store of its
        own, where the host drives every session)."""
        table = self.table
        if not table.shared or table.driver or table.subs or self._inflight or self._drops:
            return None
        return self._used_at

    async def _host_step(self, kind: str) -> None:
        try:
            if kind == "reload":
                await self._reload()
            elif kind == "follow":
                await self._follow()
            else:
                await self._run(lambda caught_up: self.table.due(self.now(), caught_up))
        except ProtocolError:
            return  # a failed read or append: retried after the reload delay

    async def _serve(self, conn: Subscriber, rid: Any, command: Command) -> None:
        key = conn.key
        self._used_at = trio.current_time()
        self._let_go = False  # a connection of this host uses it: the linger holds again
        left = self._inflight.get(key, 1) - 1
        if left > 0:
            self._inflight[key] = left
        else:
            self._inflight.pop(key, None)
        await self.execute(conn, rid, command)
        self._used_at = trio.current_time()
        conn.settled()
        if key not in self.table.subs and key not in self._inflight:
            self._conns.pop(key, None)  # answered, and holds no role here: forgotten

    async def execute(self, conn: Subscriber, rid: Any, command: Command) -> None:
        """Run ``command`` now for ``conn`` and answer request ``rid`` on it. The task runs
        every command so; a retired session answers ``resume``, ``view`` and ``watch``
        through it directly. While the store is failing the command is answered without the
        store (:meth:`_stalled`) until :data:`RELOAD_RETRY` seconds after the last failed
        attempt; after that it makes the host retry (reload) first."""
        self._conns.setdefault(conn.key, conn)
        if self._unusable is not None:  # found so: the requests still queued are told
            conn.answer(rid, Refused.of(self._unusable))
            return
        if self._reload_at is not None:
            now = trio.current_time()
            if now < self._reload_at and now < self._failed_at + RELOAD_RETRY:
                await self._stalled(conn, rid, command)
                return
            try:
                await self._reload()
            except ProtocolError as exc:
                conn.answer(rid, Refused.of(exc))
                return
        key = conn.key
        # whether the client has closed its side is asked when the table decides (after any
        # catching up with the log), not before, so a resume that closes meanwhile takes nothing
        await self._run(
            lambda caught_up: self.table.command(
                key,
                rid,
                command,
                self.now(),
                closing=closing(conn, command),
                caught_up=caught_up,
            ),
            key,
            rid,
        )

    async def _stalled(self, conn: Subscriber, rid: Any, command: Command) -> None:
        """Answer ``command`` while the store fails and its retry is not due: from the table
        as it stands (a ``view`` or ``watch``, never following the log first), or, for one
        that would append, ``unavailable`` saying when the host retries."""
        key = conn.key
        step = await self._decide(
            lambda _: self.table.command(
                key,
                rid,
                command,
                self.now(),
                closing=closing(conn, command),
                caught_up=True,
            ),
            True,
            key,
            rid,
        )
        if step is None:
            return
        if step.records:
            wait = max(0.0, self._failed_at + RELOAD_RETRY - trio.current_time())
            why = Refused(
                ErrorCode.UNAVAILABLE,
                f"the session's log cannot be written now; the host retries in {wait:.1f} s",
            )
            await self._carry([Reply(key, rid, why)])
            return
        await self._carry(step.effects)

    async def _drop_pending(self) -> None:
        drops, self._drops = self._drops, {}
        for key, reason in drops.items():
            step = self.table.drop(key, self.now(), reason)
            if step is not None and self._reload_at is not None:
                continue  # the store is failing: the retry releases it (connection gone)
            if step is not None:
                with contextlib.suppress(ProtocolError):
                    await self._run(lambda caught_up, s=step: s if not caught_up else None)

    def _overran(self, exc: BudgetExceeded, conn: str | None = None, rid: Any = None) -> None:
        """The game ran past its budget in a step: logged; the requester, if any, is answered
        ``internal`` (``game_faulted`` for a session answered from its log: it is over); the
        table ends the session on its next step (``game_error``), or, over already, runs no
        game code again."""
        log.error("game_budget_exceeded", fault=exc.what, error=exc.message)
        if self.metrics is not None:
            self.metrics.budget_overruns[(self.game.info.id, exc.what)] += 1
        self.table.overran(exc.what)
        if conn is not None:
            c = self._conns.get(conn)
            if c is not None:
                if self.live and not self.table.ended:
                    c.answer(rid, Refused(ErrorCode.INTERNAL, "internal error: the game stopped"))
                else:
                    c.answer(rid, Refused(ErrorCode.GAME_FAULTED, GAME_FAULTED_NOW))
        self._poke()

    def game_faulted(self, what: str, message: str) -> None:
        """Game code run for this session outside its driver (a replay op of its log) faulted
        (``what``: ``time``, ``memory``, ``error``): the session ends on its next step as
        ``game_error`` with that fault, as if its driver had run into it."""
        log.error("game_fault", fault=what, error=message, step="replay")
        self.table.overran(what)
        self._poke()

    async def _decide(
        self, decide: Callable[[bool], Step | None], caught_up: bool, conn: str | None, rid: Any
    ) -> Step | None:
        """Ask the table, within the game's budget (an overrun: :meth:`_overran`, None); the
        step's :attr:`Step.first` effects are carried out at once."""
        try:
            with self.budget.step("a step of the game", self.id, self.table.seq):
                step = decide(caught_up)
        except BudgetExceeded as exc:
            self._overran(exc, conn, rid)
            return None
        if step is not None and step.first:
            first, step.first = step.first, []
            await self._carry(first)
        return step

    async def _run(
        self, decide: Callable[[bool], Step | None], conn: str | None = None, rid: Any = None
    ) -> None:
        """Carry out one step: append its records (expecting its seq), then its effects.

        A lost race (another host appended that seq) is followed, and the step decided again
        once; a second loss is answered ``conflict``. A failed append is answered
        ``unavailable`` (the session reloads its log later). ``conn``/``rid``: the requester
        of a command (answered ``internal`` if the game runs past its budget)."""
        caught_up = False
        races = 0
        step = await self._decide(decide, False, conn, rid)
        while step is not None:
            if step.follow_first and not caught_up:
                try:
                    await self._follow()
                except ProtocolError as exc:
                    if step.conn is not None:
                        await self._carry([Reply(step.conn, step.rid, Refused.of(exc))])
                    return
                caught_up = True
                step = await self._decide(decide, True, conn, rid)
                continue
            if not step.records:
                await self._carry(step.effects)
                return
            began = time.perf_counter()
            try:
                await self.store.append(self.id, step.expected, step.to_store())
            except Conflict:
                # another host sharing the store appended first: catch up, decide again
                log.info("append_conflict", seq=step.expected)
                self.lost_races += 1
                if self.metrics is not None:
                    self.metrics.append_conflicts += 1
                races += 1
                step.then = None  # decided again below: its closure (which holds it) goes
                try:
                    await self._follow(reopen=True)
                except ProtocolError as exc:
                    if step.conn is not None:
                        await self._carry([Reply(step.conn, step.rid, Refused.of(exc))])
                    return
                if races >= 2 or step.conn is None:
                    await self._carry(self.table.conflicted(step))
                    return
                caught_up = True
                step = await self._decide(decide, True, conn, rid)
                continue
            except Exception as exc:
                self._store_failed("append_failed", exc)
                await self._carry(self.table.failed(step))
                return
            m = self.metrics
            if m is not None:
                m.append_seconds.observe(time.perf_counter() - began)
                actions = self.table.actions
            if self._store_failures:
                log.warning("store_recovered", failures=self._store_failures)
                self._store_failures = 0
            self._changed_at = trio.current_time()
            # a resume takes the seat only if its connection is still there to be answered:
            # one that went away meanwhile (or closes right behind it) takes nothing
            closed = step.what == "resume" and await gone_by_now(self._conns.get(conn))
            with self.budget.step("the pushes of a change", self.id, step.records[-1].seq):
                effects = self.table.commit(
                    step, self.now(), closed=closed
                )  # an overrun: the table's
            if m is not None:
                game = self.game.info.id
                if self.table.actions != actions:
                    m.actions[game] += self.table.actions - actions
                last = step.records[-1]
                if last.type == "ended":
                    m.ended(game, last.data)
            if self.table.ended:
                self.store.release(self.id)
            await self._carry(effects)
            collector.made(len(step.records))  # after the pushes: not before this reply
            if closed:
                await self._run(partial(self._give_back, step), conn, rid)
                return
            if conn is not None and conn in self.table.subs:
                c = self._conns.get(conn)
                if c is None or getattr(c, "dead", False):
                    # it went away while its command was written (a resume whose client hung
                    # up meanwhile): it holds nothing, so it is dropped like any other
                    self._drops[conn] = "gone"
                    self._poke()
            return

    def _give_back(self, step: Step, caught_up: bool) -> Step | None:
        """The step that gives back the seat a resume (``step``) took for a connection that
        went away before its reply (:meth:`Table.give_back`)."""
        return self.table.give_back(step, self.now())

    async def _carry(self, effects: list[Effect]) -> None:
        """Carry effects out, in order."""
        conns = self._conns
        for e in effects:
            kind = type(e)
            if kind is Send:
                conn = conns.get(e.conn)  # type: ignore[union-attr]
                if conn is not None:
                    conn.send(e.push)  # type: ignore[union-attr]
            elif kind is Reply:
                conn = conns.get(e.conn)  # type: ignore[union-attr]
                if conn is not None:
                    conn.answer(e.rid, e.outcome)  # type: ignore[union-attr]
                outcome = e.outcome  # type: ignore[union-attr]
                if (
                    outcome.__class__ is Refused
                    and outcome.code is ErrorCode.INTERNAL
                    and self.metrics is not None
                ):  # the game's code failed on a command
                    self.metrics.plugin_faults[(self.game.info.id, "command")] += 1
            elif kind is SendMany:
                conn = conns.get(e.conn)  # type: ignore[union-attr]
                if conn is not None:
                    conn.send_many(list(e.pushes))  # type: ignore[union-attr]
            elif kind is Backfill:
                await self._backfill(e)  # type: ignore[arg-type]
            elif kind is Attach:
                conn = conns.get(e.conn)  # type: ignore[union-attr]
                if conn is not None:
                    conn.attached(self.id, e.viewer)  # type: ignore[union-attr]
            elif kind is Detach:
                conn = conns.get(e.conn)  # type: ignore[union-attr]
                if conn is not None:
                    conn.detached(self.id)
            elif kind is Observe:
                self._observe(e.records)  # type: ignore[union-attr]

    async def _backfill(self, e: Backfill) -> None:
        """The records a ``resume`` missed that the table no longer holds, from the store, as
        one chunk. If the log cannot be read now the connection is dropped (it resumes
        again)."""
        conn = self._conns.get(e.conn)
        if conn is None:
            return
        try:
            raw = await self.store.read(self.id, e.after)
        except Exception:
            log.exception("log_read_failed", after=e.after)
            if self.metrics is not None:
                self.metrics.store_errors["backfill"] += 1
            kill = getattr(conn, "kill", None)
            if kill is not None:
                kill("store_error")
            return
        records = [Record.from_json(r) for r in raw if r["seq"] <= e.upto]
        try:
            with self.budget.step("redact", self.id, self.table.seq):
                pushes = self.table.pushes_for(records, e.viewer, e.text)
        except BudgetExceeded as exc:
            self._overran(exc)
            pushes = []
        except GameFault:  # the game's redact faulted: as in any push, the table ends (a
            log.exception("game_fault", step="redact")  # session over runs no game code again)
            self.table.overran("error")
            self._poke()
            pushes = []
        if pushes:
            conn.send_many(pushes)

    def _observe(self, records: Iterable[Record]) -> None:
        """Tell the observer hooks of records appended here (after the replies and the pushes),
        each implementation on its own: one that raises is logged, never fatal."""
        if self.hooks is None:
            return
        failed = 0
        for rec in records:
            failed += notify_isolated(
                self.hooks.gamehost_event_appended, session=self.id, record=rec.to_json()
            )
            if rec.type == "ended":
                failed += notify_isolated(
                    self.hooks.gamehost_session_ended, session=self.id, outcome=rec.data["outcome"]
                )
        if failed and self.metrics is not None:
            self.metrics.plugin_faults[(self.game.info.id, "observer")] += failed

    # -- the store -----------------------------------------------------------------------------
    def _store_failed(self, event: str, exc: Exception) -> None:
        """Note a failed append or read: retry after a delay doubling from
        :data:`RELOAD_RETRY` to :data:`RELOAD_RETRY_MAX` seconds; the first failure in a row
        logs its traceback and tells every subscriber once (``stalled``), later ones log one
        line each."""
        self._store_failures += 1
        n = self._store_failures
        if self.metrics is not None:
            self.metrics.store_errors[event.partition("_")[0]] += 1
        delay = min(RELOAD_RETRY_MAX, RELOAD_RETRY * 2 ** min(n - 1, 16))
        self._failed_at = trio.current_time()
        self._reload_at = self._failed_at + delay
        if n == 1:
            log.exception(event, retry_in=delay)
            stalled = StalledPush(self.id, "store_error")
            for key in list(self.table.subs):
                conn = self._conns.get(key)
                if conn is not None:
                    conn.send(stalled)
        else:
            log.error(event, error=repr(exc), failures=n, retry_in=delay)

    async def _reload(self) -> None:
        """Read the log again after a failed append (its records may have reached it after
        all: they are folded in and pushed; a half-written last cause is dropped).

        Raises:
            ProtocolError: ``unavailable`` if the log cannot be read now (retried later),
                ``session_damaged`` if it is gone or damaged for good (the session stops).
        """
        old = self.table.seq
        if self.metrics is not None:
            self.metrics.store_retry("session")
        try:
            raw = await trio.to_thread.run_sync(self.store.load, self.id)
            records = [Record.from_json(r) for r in raw]
            whole = await self._whole(records)
            if whole < len(records):
                self.store.truncate(self.id, whole)
                records = records[:whole]
        except (UnknownSession, CorruptLog, BadRecord) as exc:
            # gone or damaged for good: retrying cannot help. The task stops (the session
            # leaves the live list, freeing its place); later requests are answered from the
            # log, i.e. session_damaged or unknown_session.
            log.error("session_log_unusable", error=str(exc))
            self._reload_at = None
            self.close()
            self._unusable = ProtocolError(
                ErrorCode.SESSION_DAMAGED, f"the log of session {self.id!r} is gone or damaged"
            )
            raise self._unusable from None
        except Exception as exc:
            self._store_failed("reload_failed", exc)
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, "the session's log cannot be read now; retry"
            ) from None
        self._reload_at = None
        self._changed_at = trio.current_time()
        log.warning("session_reloaded", seq=records[-1].seq, was=old)
        if records[-1].seq > old:  # the failed append reached the log after all: tell everyone
            await self._carry(self._follow_records(records[old + 1 :]))
        if self.table.ended:
            self.store.release(self.id)

    async def _whole(self, records: list[Record]) -> int:
        """How many leading records of the log form whole causes, folded a stretch at a time
        (:func:`host.table.loading.load_steps`), each stretch a step of the game's budget. A
        game that faults there ends the session (:meth:`_overran`; the records are kept).

        Raises:
            BadRecord: the log does not fold.
        """
        steps = load_steps(self.engine, iter(records), records[-1].seq, 0)
        while True:
            done, got = stretch(self.budget, steps, "reloading the log")
            if done:
                break
            await trio.lowlevel.checkpoint()
        if isinstance(got, tuple):  # ("fault", seq, what, message)
            self._overran(BudgetExceeded(got[2], got[3]))
            return len(records)
        return int(got.whole)

    def _follow_records(self, records: list[Record]) -> list[Effect]:
        """:meth:`Table.follow`, within the game's budget (folding runs ``evolve``).

        Raises:
            BadRecord: the records do not fold.
        """
        try:
            with self.budget.step("folding another host's records", self.id, self.table.seq):
                return self.table.follow(records, self.now())
        except BudgetExceeded as exc:
            self._overran(exc)
            return []

    async def _follow(self, reopen: bool = False) -> None:
        """Fold the records the log holds past the table (appended by another host sharing
        the store) and push them. With ``reopen`` the whole log is loaded, which also opens
        the session in this store object at its end (after a ``Conflict``).

        Raises:
            ProtocolError: ``unavailable`` if the log cannot be read now (a reload is
                scheduled), ``session_damaged`` if it does not fold.
        """
        self._behind = False
        seq = self.table.seq
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
            effects = self._follow_records(new)
        except BadRecord as exc:
            log.error("session_log_unusable", error=str(exc))
            self.close()
            self._unusable = ProtocolError(
                ErrorCode.SESSION_DAMAGED, f"the log of session {self.id!r} is damaged"
            )
            raise self._unusable from None
        follow = getattr(self.store, "follow", None)  # a shared store: append from here on
        if follow is not None and not reopen:
            with contextlib.suppress(Conflict):  # never: this task is the one appender
                follow(self.id, self.table.seq + 1)
        self._changed_at = trio.current_time()
        await self._carry(effects)
        if self.table.ended:
            self.store.release(self.id)
