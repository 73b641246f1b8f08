"""The table core: one session's decisions as a state machine that does no I/O.

Like h11's ``Connection``, which a trio server only drives, a :class:`Table` is built from the
records of a session's log and takes one input at a time:

- a client's command (:meth:`Table.command`: ``join``, ``watch``, ``resume``, ``view``,
  ``act``, ``undo``, ``undo_answer``, ``leave``; or the operator's ``End``) or a connection
  going away (:meth:`Table.drop`);
- a host-driven step that is due (:meth:`Table.due`, :meth:`Table.next_due`): a host bot's
  move, a turn timer, a seat whose player is absent, abandonment, the end of a session whose
  game faulted, bots a ``create`` cut short did not seat, seats held by connections that are
  gone;
- records appended by someone else (:meth:`Table.follow`): another host sharing the store, or
  a failed append that reached the log after all.

A command or a step gives a :class:`Step`: the records to append (with the seq the first must
have) and, once the driver has made them durable, :meth:`Table.commit` gives the ordered
effects — the reply, the pushes per connection, the connections attached or detached, the
records to tell observers of. A step with no records carries its effects already. Nothing here
imports trio, a store or a socket: the driver (``host.net.session``) carries the effects out
in the order persist -> apply -> reply -> publish -> notify and owns the store's retries.

**Everything that decides a later command is derived from the log**, so one host, the same host
after a restart and several hosts on one database answer alike:

- *Who holds a seat*: the ``holder`` of a ``seat_taken`` record (the joining connection's key),
  then ``seat_held`` (a ``resume``) and ``seat_released`` records. A takeover is a record, so
  every host sees it and the replaced connection, wherever it is, is told (``detached``). A
  seat whose holder is gone (its connection closed, or its host died or restarted) is released
  by a record too.
- *What a stale seq may still do* (:mod:`host.table.freshness`): the records since the oldest
  seq an ``act`` may still name — :data:`WINDOW` records *of play* back; presence records
  (``seat_held``, ``seat_released``) do not count, so reconnects and a restart, which write them,
  never change what a stale act may do (up to :data:`TAIL_MAX` records kept) — the state after
  each cause among them, kept from folding them (or rebuilt from the log on load), and the
  legal actions computed from those states.
- *Timers*: every record has its time (``ts``, from the host clock of the append). A turn timer
  and a bot's delay count from the last record of play (a seat taken, an action and its events,
  an ``undo``; presence records and the other undo records do not reset them, so a player
  cannot stall a table by reconnecting or asking, except ``seat_released`` for ``host_gone``:
  its players could not act meanwhile); abandonment counts
  from the record after which no player held a human seat; a seat is *absent* after
  :data:`ABSENT_AFTER` timed-out turns in a row while nobody held it. The turn ``deadline``
  every snapshot, ``turn`` and ``view`` push shows is that timer's end (:meth:`Table.deadline`).
- *Presence*: a seat is ``connected`` while the log says a connection holds it (or a host bot
  plays it); each ``seat_taken``, ``seat_held`` and ``seat_released`` record is followed by a
  ``presence`` push wherever its ``event`` push goes (:meth:`Visibility.presence`).
- *Undo by consent* (``undo``, ``undo_answer``): the request waiting for answers is the
  engine's fold of the undo records (:class:`~host.table.engine.UndoAsk`); it lapses
  :data:`UNDO_EXPIRES` seconds after its ``undo_asked`` record's ``ts`` (an ``undo_refused``
  record, ``expired``, appended by the host that drives the session) or as soon as any action
  is appended (``undo_refused``, ``acted``, in the same append, just before it). An ``undo``
  record is a record of play: the turn timer counts from it. Every undo record's ``event`` push
  is followed by its ``undo_asked``, ``undo_done`` or ``undo_refused`` push
  (:meth:`Visibility.undo`).

Time comes in with every input (``now``, the host clock in seconds since the epoch): what a
message says of the time left is counted from it, never read from a clock here.

The rule for what a viewer may see of a record is :mod:`host.table.visibility`.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import secrets
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import structlog

from host.errors import GamehostError
from host.game import Seat, Viewer
from host.plugins.budget import BudgetExceeded
from host.plugins.faults import GameFault, game_error, refusal
from host.table.commands import (
    Act,
    Command,
    End,
    Join,
    Leave,
    Resume,
    Undo,
    UndoAnswer,
    View,
    Watch,
)
from host.table.engine import (
    CAUSES,
    PRESENCE,
    UNDO_RECORDS,
    BadRecord,
    Engine,
    Record,
    SessionState,
)
from host.table.freshness import stale_reason
from host.table.visibility import Visibility
from host.table.words import Words, display_names
from protocol.messages import ErrorCode, ProtocolError
from protocol.replies import (
    Accepted,
    Deadline,
    DetachedPush,
    EndedPush,
    EventPush,
    Expiry,
    Joined,
    Left,
    Outcome,
    Push,
    Refused,
    Resumed,
    SeatInfo,
    Snapshot,
    Timers,
    TurnPush,
    UndoRequest,
    UndoResult,
    ViewPush,
    ViewReply,
    Watching,
)

__all__ = [
    "ABSENT_AFTER",
    "BOT_BATCH",
    "GAME_FAULTED_NOW",
    "RESUME_BURST",
    "RESUME_PERIOD",
    "SETTLE",
    "TAIL",
    "TAIL_MAX",
    "UNDO_EXPIRES",
    "Presence",
    "WINDOW",
    "Attach",
    "Backfill",
    "Detach",
    "Effect",
    "Observe",
    "Reply",
    "Send",
    "SendMany",
    "Step",
    "Table",
    "TableSettings",
    "faulted",
    "format_ts",
    "hash_token",
    "new_token",
    "parse_ts",
]

log = structlog.get_logger("gamehost.session")

BOT_BATCH = 64
"""The most records consecutive host-bot moves put into one append (one step)."""
ABSENT_AFTER = 3
"""Consecutive timed-out turns of a seat no connection holds after which the host plays that
seat's turns at once (until a connection resumes it)."""
RESUME_BURST = 20
"""How many times one seat may be resumed (``seat_held`` records, by their ``ts``) within
:data:`RESUME_PERIOD` seconds; one more ``resume`` of it is answered ``overloaded`` with
``retry_after``, so a reconnect storm cannot grow the log (or end the session at its record
limit) without bound."""
RESUME_PERIOD = 60.0
"""Seconds over which :data:`RESUME_BURST` counts a seat's resumes."""
SETTLE = 1.0
"""Seconds a host waits, once it has read another host's ``seat_held`` that takes a seat from a
connection of its own, for that host to give the seat back (its resumer went away before the
reply) before it tells its connection ``detached`` (after reading the log to its end once
more). Meanwhile the connection's pushes are held back and its ``act`` answers
``not_seated``, as the log says."""
WINDOW = 32
"""How many records *of play* back an ``act`` may name its seq and still be judged by the
freshness rule (older: ``conflict``): presence records (``seat_held``, ``seat_released``) in
between do not count, so reconnects and restarts do not use the window up. The table keeps the
state after each cause since then."""
TAIL = WINDOW
"""The records of play a table keeps in memory, with the presence records between and after
them (a ``resume`` from further back reads the missed records from the store)."""
TAIL_MAX = 256
"""The most records a table keeps in memory however many presence records come between its
records of play (a reconnect storm): past it the oldest go, and an ``act`` naming a seq before
what is kept is ``conflict`` (too old to check)."""
UNDO_EXPIRES = 30.0
"""Seconds a request to take back an action waits for its answers, from its ``undo_asked``
record's time; then the host that drives the session appends ``undo_refused`` (``expired``)."""


GAME_FAULTED_NOW = (
    "the session's game faulted while answering this; its code is not run for the session"
    " again (its end and its log are still answered)"
)


def faulted(ended: dict[str, Any]) -> bool:
    """Whether the data of a session's ``ended`` record says its game faulted (``aborted:
    "game_error"``, with or without the ``fault`` logs written before it was recorded)."""
    return ended.get("aborted") == "game_error"


def new_token() -> str:
    """A new seat token: 32 characters of URL-safe base64 (24 random bytes, from
    :func:`secrets.token_urlsafe`), never beginning with ``-``, so that it can follow an option on
    a command line (``gamehost play --resume TOKEN``; argparse takes ``-x…`` for an option)."""
    while True:
        token = secrets.token_urlsafe(24)
        if token[0] != "-":
            return token


def hash_token(token: str) -> str:
    """sha256 of a seat token, hex (only hashes are stored)."""
    return hashlib.sha256(token.encode()).hexdigest()


_ts_cache: tuple[int, str] = (-1, "")  # the last second formatted, to the seconds


def format_ts(t: float) -> str:
    """The time ``t`` (seconds since the epoch) as a record's ``ts``,
    ``2026-11-30T10:00:00.123Z`` (UTC, milliseconds, rounded up so that a deadline counted from
    it never falls before the time it stands for)."""
    global _ts_cache
    sec, frac = divmod(math.ceil(round(t * 1000, 3)), 1000)
    cached, text = _ts_cache
    if sec != cached:
        stamp = datetime.datetime.fromtimestamp(sec, datetime.UTC)
        text = stamp.strftime("%Y-%m-%dT%H:%M:%S")
        _ts_cache = (sec, text)
    return f"{text}.{frac:03d}Z"


def parse_ts(text: str | None, default: float = 0.0) -> float:
    """A record's ``ts`` as seconds since the epoch (``default`` when absent or unreadable)."""
    if not text:
        return default
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        return default


# -- effects ---------------------------------------------------------------------------------------
@attrs.frozen
class Reply:
    """Answer request ``rid`` of connection ``conn`` with ``outcome``."""

    conn: str
    rid: Any
    outcome: Outcome


@attrs.frozen
class Send:
    """Push ``push`` to ``conn`` (if it is too slow, the driver drops it: :meth:`Table.drop`)."""

    conn: str
    push: Push


@attrs.frozen
class SendMany:
    """Push ``pushes`` to ``conn`` as one chunk (the records a ``resume`` missed)."""

    conn: str
    pushes: tuple[Push, ...]


@attrs.frozen
class Backfill:
    """Push ``conn`` the records ``after + 1 .. upto`` as ``viewer`` sees them, as one chunk,
    before the effects that follow: older than the table keeps, so the driver reads them from
    the store and makes the pushes with :meth:`Table.pushes_for`."""

    conn: str
    viewer: Viewer
    after: int
    upto: int
    text: bool = False  # the pushes carry their text (the connection asked for it)


@attrs.frozen
class Attach:
    """``conn`` now plays ``viewer``'s seat here (or watches: None): tell the connection."""

    conn: str
    viewer: Viewer


@attrs.frozen
class Detach:
    """``conn`` no longer plays or watches here: tell the connection."""

    conn: str


@attrs.frozen
class Observe:
    """Tell the observer hooks of ``records`` (appended here, durable, replied and pushed)."""

    records: tuple[Record, ...]


Effect = Reply | Send | SendMany | Backfill | Attach | Detach | Observe


@attrs.frozen
class TableSettings:
    """The host's settings for its tables.

    Attributes:
        bot_delay: seconds a host bot waits before acting (0: at once).
        turn_timeout: seconds a human seat may take to act before the host plays the bot's
            choice for it (None: wait for ever); a ``turn_timeout`` in the header wins.
        max_records: records at most in a session: the host ends it there (``too_long``).
        abandon_after: seconds a session may have no player holding a human seat before the
            host ends it (``abandoned``); None: never. A session without human seats is never
            abandoned (its bots end it).
    """

    bot_delay: float = 0.0
    turn_timeout: float | None = None
    max_records: int = 500_000
    abandon_after: float | None = None


@attrs.define
class Step:
    """What the table decided for one input.

    Attributes:
        records: to append, in one append whose first record has seq ``expected`` (empty: no
            append; ``effects`` are the whole answer).
        expected: the seq the first record must have.
        ts: the append's time, to write into every record (``format_ts``).
        effects: the effects when there is nothing to append.
        follow_first: the driver must first read what the log holds past this table (another
            host may have appended), fold it in (:meth:`Table.follow`) and ask again with
            ``caught_up``.
        conn, rid: the requester of a command (None for host-driven steps).
        what: what it is, for logs (``act``, ``bot``, ``timeout``, ``abandon``, ...).
        first: effects to carry out at once, before anything else of the step (a connection
            whose seat another host's resume took is told so before its command is answered).
        prev: for a ``resume``, the connection that held the seat before it (None: nobody).
        closed: set by :meth:`Table.commit` when the requester went away before its reply.
    """

    records: list[Record] = attrs.Factory(list)
    expected: int = 0
    ts: str = ""
    effects: list[Effect] = attrs.Factory(list)
    follow_first: bool = False
    conn: str | None = None
    rid: Any = None
    what: str = ""
    after: SessionState | None = None
    states: list[SessionState] = attrs.Factory(list)  # after each cause of ``records``
    then: Callable[[list[Effect]], None] | None = None
    time: float = 0.0
    first: list[Effect] = attrs.Factory(list)
    prev: str | None = None
    closed: bool = False

    def to_store(self) -> list[dict[str, Any]]:
        """The records as the store takes them, each with the step's ``ts``; an event's body is
        its JSON made once by the engine (``Record.encoded``), for stores that splice it."""
        out = []
        for r in self.records:
            raw = {"seq": r.seq, "ts": self.ts, "type": r.type, **r.data}
            if r.encoded is not None:
                raw["event"] = r.encoded
            out.append(raw)
        return out


@attrs.define
class _Sub:
    viewer: Viewer
    views: bool = False
    text: bool = False  # event and ended pushes carry "text" (host.table.words)
    # another host's resume took this connection's seat at seq `pending` (host time `since`)
    # and has not been settled yet: its pushes are held back meanwhile (see Table._publish)
    pending: int | None = None
    since: float = 0.0
    held: list[Push] = attrs.Factory(list)


class _Refuse(Exception):
    """A command's typed refusal inside the table (carries the error to answer)."""

    def __init__(self, exc: ProtocolError | GamehostError) -> None:
        self.exc = exc


def _protocol(code: ErrorCode, message: str, **extra: Any) -> _Refuse:
    return _Refuse(ProtocolError(code, message, **extra))


@attrs.define
class Presence:
    """What a log says beyond the game, folded a record at a time (:meth:`feed`): who holds
    each seat (a connection's key), each seat's timed-out turns in a row, the ``ts`` of the
    last record of play (the turn timer and a bot's delay count from it) and of the record
    after which nobody held a seat (abandonment counts from it), of the last ``undo_asked``
    record (a waiting request lapses from it), and whether anyone holds one now. Only the
    timestamps that matter are kept (as text: parsed once, by the table)."""

    holders: list[str | None]
    timeouts: list[int]
    play_ts: str | None = None
    since_ts: str | None = None
    attended: bool = False
    ask_ts: str | None = None
    resumes: list[deque[str | None]] = attrs.Factory(list)
    """Per seat, the ``ts`` of its latest :data:`RESUME_BURST` resumes (``seat_held`` records
    that do not give a seat back)."""

    @classmethod
    def of(cls, seats: int) -> Presence:
        """Nothing folded yet, for ``seats`` seats."""
        return cls(
            [None] * seats,
            [0] * seats,
            resumes=[deque(maxlen=RESUME_BURST) for _ in range(seats)],
        )

    def feed(self, records: Iterable[Record]) -> None:
        """Fold records in order (each looked at once; events cost nothing)."""
        holders, timeouts = self.holders, self.timeouts
        play_ts, since_ts, attended = self.play_ts, self.since_ts, self.attended
        ask_ts = self.ask_ts
        for rec in records:
            kind = rec.type
            if kind == "event" or kind == "ended":
                continue
            d = rec.data
            if kind == "action":
                seat = d["seat"]
                if d.get("timed_out"):
                    timeouts[seat] = 0 if holders[seat] is not None else timeouts[seat] + 1
                else:
                    timeouts[seat] = 0
                play_ts = rec.ts
                continue
            if kind == "header":
                play_ts = since_ts = rec.ts
                continue
            if kind in UNDO_RECORDS:
                if kind == "undo":
                    play_ts = rec.ts
                elif kind == "undo_asked":
                    ask_ts = rec.ts
                continue
            if kind == "seat_taken":
                if not d.get("bot"):
                    holders[d["seat"]] = d.get("holder")
                play_ts = rec.ts
            elif kind == "seat_held":
                holders[d["seat"]] = d["holder"]
                timeouts[d["seat"]] = 0
                if "returned" not in d:
                    self.resumes[d["seat"]].append(rec.ts)
            elif kind == "seat_released":
                holders[d["seat"]] = None
                if d.get("reason") == "host_gone":
                    play_ts = rec.ts
            now_attended = any(h is not None for h in holders)
            if attended and not now_attended:
                since_ts = rec.ts
            attended = now_attended
        self.play_ts, self.since_ts, self.attended = play_ts, since_ts, attended
        self.ask_ts = ask_ts


class Table:
    """One session's table (see the module docstring).

    Args:
        sid: the session id.
        engine: the game's engine.
        records: the session's whole log (whole causes only: drop a half-written last one
            first, see :meth:`Engine.load`), header first.
        settings: the host's settings.
        now: the host clock now (seconds since the epoch), the time of records without a
            ``ts`` (not written yet).
        instance: this host's id, the first part of each of its connections' keys.
        driver: whether this host runs the session's host-driven steps (it holds its lease;
            a host alone always does).
        live: False for an ended session answered from its log (it keeps no subscribers).
        loaded: ``(state, boundaries)`` if the caller folded ``records`` already
            (:meth:`Engine.load_tail`).
        presence: what the whole log says of seat holders and timers, if the caller folded
            it already (``records`` may then be the log's last :data:`TAIL_MAX` records only,
            as ``host.table.loading`` gives them).

    Raises:
        BadRecord: the records do not fold.
    """

    def __init__(
        self,
        sid: str,
        engine: Engine,
        records: Sequence[Record],
        settings: TableSettings,
        *,
        now: float,
        instance: str = "",
        driver: bool = True,
        shared: bool = False,
        live: bool = True,
        loaded: tuple[SessionState, list[SessionState]] | None = None,
        presence: Presence | None = None,
    ) -> None:
        self.id = sid
        self.engine = engine
        self.game = engine.game
        self.visible = Visibility(engine)
        self.words = Words(engine.game)
        self._names: tuple[tuple[Any, ...], list[str]] = ((), [])
        self.settings = settings
        self.instance = instance
        self.driver = driver
        self.shared = shared
        self.live = live
        if loaded is None:
            whole, state, bounds = engine.load_tail(list(records), TAIL, TAIL_MAX)
            if whole != len(records):
                raise BadRecord(whole, "the log ends inside a cause")
        else:
            state, bounds = loaded
        self.state: SessionState = state
        self._bounds: deque[SessionState] = deque(bounds)
        self._tail: deque[Record] = deque(records[-TAIL_MAX:])
        self._played = sum(1 for r in self._tail if r.type not in PRESENCE)  # in _tail
        self._trim()
        header = state.header
        timeout = header.get("turn_timeout", settings.turn_timeout)
        self.turn_timeout: float | None = timeout or None
        self.timers = Timers(self.turn_timeout, settings.abandon_after, ABSENT_AFTER)
        """The session's timers, as snapshots show them."""
        self._now = now  # the host clock of the input being decided
        self._deadline: tuple[int, float, Deadline | None] = (-1, 0.0, None)
        self.host_alive: Callable[[str], bool] = lambda instance: False
        """Whether the host of another instance is still running (a host alone: none is)."""
        self.subs: dict[str, _Sub] = {}
        self.actions = 0
        self.faulted = False
        self.fault: str | None = None  # a budget the game ran past (time, memory), if any
        self._lost_logged = False
        self._words_logged = False
        # (id of a game state, seat) -> (that game state, its legal list): the states of the
        # freshness window (each kept alive by the entry itself, so an id is never reused)
        self._legal: dict[tuple[int, Seat], tuple[Any, list[Any]]] = {}
        self._turns: dict[tuple[int, Seat], TurnPush] = {}
        self._to_act: tuple[int, tuple[Seat, ...]] = (-1, ())
        n = len(state.seats)
        self.holders: list[str | None] = [None] * n
        self.timeouts: list[int] = [0] * n
        # per seat: the times of its latest resumes (seat_held records not giving a seat back)
        self.resumes: list[deque[float]] = [deque(maxlen=RESUME_BURST) for _ in range(n)]
        self._bots = frozenset(header.get("bots", ()))
        self._humans = n > len(self._bots)
        self.turn_started = now
        self.unattended_since: float | None = None
        if presence is None:
            presence = Presence.of(n)
            presence.feed(records)
        self.undo_at: float | None = None
        """The time of the waiting request's ``undo_asked`` record (None: none waits)."""
        self._fold_presence(presence, now)
        self._game_off()

    # -- what the log says beyond the game: holders, timers --------------------------------------
    def _fold_presence(self, presence: Presence, default: float) -> None:
        """Take seat holders, timed-out counts, the timers' starts and each seat's latest
        resumes from what a whole log says (:class:`Presence`); a record without a ``ts`` (not
        written yet), or one whose ``ts`` is later than ``default`` (the host clock now: its
        writer's clock was ahead), counts as of ``default``."""
        self.holders = list(presence.holders)
        self.timeouts = list(presence.timeouts)
        self.turn_started = min(parse_ts(presence.play_ts, default), default)
        self.unattended_since = (
            None if presence.attended else min(parse_ts(presence.since_ts, default), default)
        )
        self.resumes = [
            deque((min(parse_ts(ts, default), default) for ts in times), maxlen=RESUME_BURST)
            for times in presence.resumes
        ]
        waits = self.state.undo_ask is not None
        self.undo_at = min(parse_ts(presence.ask_ts, default), default) if waits else None

    def _presence(self, rec: Record, at: float) -> None:
        """Fold one new record (of time ``at``) into holders, counts and timers, as
        :meth:`_fold_presence` does for a whole log."""
        kind = rec.type
        if kind == "event" or kind == "ended":
            return
        d = rec.data
        if kind == "action":
            seat = d["seat"]
            if d.get("timed_out"):
                held = self.holders[seat] is not None
                self.timeouts[seat] = 0 if held else self.timeouts[seat] + 1
            else:
                self.timeouts[seat] = 0
            self.turn_started = at
            return
        if kind in UNDO_RECORDS:
            if kind == "undo":  # a record of play: the seat to act has its time again
                self.turn_started = at
            elif kind == "undo_asked":
                self.undo_at = at
            return
        was = self._attended()
        if kind == "seat_taken":
            if not d.get("bot"):
                self.holders[d["seat"]] = d.get("holder")
            self.turn_started = at
        elif kind == "seat_held":
            self.holders[d["seat"]] = d["holder"]
            self.timeouts[d["seat"]] = 0
            if "returned" not in d:
                self.resumes[d["seat"]].append(at)
        elif kind == "seat_released":
            self.holders[d["seat"]] = None
            if d.get("reason") == "host_gone":
                self.turn_started = at
        if self._attended():
            self.unattended_since = None
        elif was:
            self.unattended_since = at

    def _game_off(self) -> None:
        """A session whose game faulted (its log ends ``aborted: "game_error"``, see
        :func:`faulted`) runs no game code again."""
        if self.state.ended and faulted(self._ended_data()):
            self.visible.game_off = True

    def overran(self, what: str) -> None:
        """The game faulted in code run for this table (``what``: ``time``, ``memory`` or
        ``thread`` for its budget, ``error`` for anything else; a replay op's fault too): the
        session ends on its next host-driven step, as ``game_error`` with that ``fault``, and
        runs no game code after that. A table answered from its log (not live) just stops
        running game code."""
        self.faulted = True
        self.fault = what
        if not self.live or self.state.ended:
            self.visible.game_off = True

    @property
    def fault_unrecorded(self) -> bool:
        """The game faulted in code run for this session after it ended: it runs no game code
        again, and no record says so (nothing follows ``ended``): the host remembers it."""
        return self.visible.game_off and not faulted(self._ended_data())

    def _attended(self) -> bool:
        return any(h is not None for h in self.holders)

    # -- reading -----------------------------------------------------------------------------
    @property
    def ended(self) -> bool:
        """The session has ended."""
        return self.state.ended

    @property
    def seq(self) -> int:
        return self.state.seq

    def seat_list(self, state: SessionState | None = None) -> list[SeatInfo | None]:
        """The wire's ``seats``: one entry per seat, None while it is free."""
        return [
            None if s is None else SeatInfo(i, s.name, s.bot)
            for i, s in enumerate((state or self.state).seats)
        ]

    def to_act(self) -> tuple[Seat, ...]:
        """The seats whose input is awaited now (computed once per seq).

        Raises:
            GameFault: the game's ``to_act`` raised.
        """
        seq, seats = self._to_act
        if seq != self.state.seq:
            seats = self.engine.to_act(self.state)
            self._to_act = (self.state.seq, seats)
        return seats

    def turn_deadline(self) -> float | None:
        """When the turn timer plays the bot's choice for the seats to act (host time, from the
        log: the last record of play's ``ts`` plus the turn timeout), or None when no timer
        runs (none set, nobody to act, or a host bot to act: it moves by itself).

        Raises:
            GameFault: the game's ``to_act`` raised.
        """
        st = self.state
        if self.turn_timeout is None or not st.started or st.ended:
            return None
        to_act = self.to_act()
        if not to_act or any(st.seats[x] is not None and st.seats[x].bot for x in to_act):  # type: ignore[union-attr]
            return None
        return self.turn_started + self.turn_timeout

    def deadline(self) -> Deadline | None:
        """:meth:`turn_deadline` as the wire shows it (its UTC time, and the seconds left from
        the time of the input being decided); made once per seq and input.

        Raises:
            GameFault: the game's ``to_act`` raised.
        """
        seq, at, made = self._deadline
        if seq == self.state.seq and at == self._now:
            return made
        when = self.turn_deadline()
        if when is not None:
            made = Deadline(format_ts(when), max(0.0, round(when - self._now, 3)))
        else:
            made = None
        self._deadline = (self.state.seq, self._now, made)
        return made

    def connected(self, state: SessionState | None = None) -> list[bool]:
        """Per seat: whether a connection holds it, by the log (a host bot's seat: True, a free
        one: False). Once the session has ended nobody holds a seat any more (an ended log
        gets no release records, so this is the only answer every host can give alike)."""
        st = state or self.state
        seats = st.seats
        if st.ended:
            return [s is not None and s.bot for s in seats]
        holders = self.holders
        return [holders[i] is not None or (s is not None and s.bot) for i, s in enumerate(seats)]

    def snapshot(self, viewer: Viewer, state: SessionState | None = None) -> Snapshot:
        """The session as ``viewer`` sees it now (or as of ``state``, not committed yet: its
        ``deadline`` and ``connected`` are then the table's, to be made again once it is).

        Raises:
            GameFault: the game's ``to_act`` or ``view`` failed.
        """
        st = self.state if state is None else state
        end: dict[str, Any] = {}
        if st.ended:
            data = self._ended_data(st)
            end = {
                "outcome": data.get("outcome"),
                "aborted": data.get("aborted"),
                "seed": self.visible.public_seed(st.header),
            }
        if self.visible.game_off:
            view = None
        elif st.ended:  # a game whose view fails still answers its end, with a null view
            try:
                view = self.engine.view_wire(st, viewer)
            except GameFault:
                log.warning("game_fault", session=self.id, step="view", viewer=viewer)
                view = None
                self.overran("error")  # nor is it run again for this session
        else:
            try:
                view = self.engine.view_wire(st, viewer)
            except GameFault:  # as a fault in decide on a step of the host's: the table ends
                self._game_failed("view")
                raise
        return Snapshot(
            self.id,
            self.game.info.id,
            st.seq,
            self.seat_list(st),
            st.started,
            st.ended,
            list(self.engine.to_act(st)),
            view,
            st.header["seed_commitment"],
            **end,
            deadline=self.deadline() if state is None else None,
            connected=self.connected(st),
            options=st.header.get("options", {}),
            timers=self.timers,
            undo=self._undo_request(st),
        )

    def _expiry(self, asked: float) -> Expiry:
        """When a request asked at ``asked`` (host time) lapses, as the wire shows it."""
        when = asked + UNDO_EXPIRES
        return Expiry(format_ts(when), max(0.0, round(when - self._now, 3)))

    def _asked_at(self, seq: int, ts: str | None) -> float:
        """The time of the ``undo_asked`` record of ``seq`` (its ``ts``; for one appended here,
        the time the table folded it; one not committed yet: now)."""
        if ts is not None:
            return parse_ts(ts, self._now)
        ask = self.state.undo_ask
        if ask is not None and ask.seq == seq and self.undo_at is not None:
            return self.undo_at
        return self._now

    def _undo_request(self, st: SessionState) -> UndoRequest | None:
        """The request waiting in ``st`` as snapshots show it, or None (none waits, or the
        session ended: nothing is taken back after its end)."""
        ask = st.undo_ask
        if ask is None or st.ended:
            return None
        expires = self._expiry(self._asked_at(ask.seq, None))
        return UndoRequest(ask.seat, ask.action_seq, ask.action, list(ask.waiting), expires)

    def _undo_push(self, rec: Record) -> Push | None:
        """The undo push that follows ``rec``'s event push, or None."""
        if rec.type not in UNDO_RECORDS:
            return None
        expires = None
        if rec.type == "undo_asked":
            expires = self._expiry(self._asked_at(rec.seq, rec.ts))
        return self.visible.undo(self.id, rec, expires)

    def _ended_data(self, state: SessionState | None = None) -> dict[str, Any]:
        for rec in reversed(self._tail):
            if rec.type == "ended":
                return rec.data
        return {"outcome": None}

    def _ended_push(self, text: bool = False) -> EndedPush:
        data = self._ended_data()
        outcome, aborted = data.get("outcome"), data.get("aborted")
        words = self._said(self.words.outcome(outcome, aborted, self.names())) if text else None
        return EndedPush(self.id, self.state.seq, outcome, aborted, words)

    def names(self) -> list[str]:
        """Each seat's name as texts use it (:func:`host.table.words.display_names`), made
        again only when the seats change."""
        seats = self.state.seats
        key = tuple((s.name if s is not None else None) for s in seats)
        if self._names[0] != key:
            self._names = (key, display_names(list(key)))
        return self._names[1]

    def _said(self, text: str) -> str:
        """``text`` as made; logs once per table that a text member of the game raised (its
        text was replaced by the host's plain one)."""
        if self.words.failed and not self._words_logged:
            self._words_logged = True
            log.warning("game_text_failed", session=self.id, game=self.game.info.id)
        return text

    def text_push(self, push: EventPush, viewer: Viewer, rec: Record | None = None) -> EventPush:
        """``push`` with its ``text`` for ``viewer``, told from the push's own (redacted)
        body, so it says nothing the push does not — but for a ``seat_released`` record
        (``rec``), whose release reason the ``presence`` push that follows says anyway: with it
        the text is the log's ("Ann lost the connection", not "Ann left")."""
        body = push.event
        if rec is not None and push.kind == "seat_released" and isinstance(body, dict):
            body = {**body, "reason": rec.data.get("reason")}
        text = self.words.record(push.kind, body, viewer, self.names())
        return EventPush(push.session, push.seq, push.kind, push.event, self._said(text))

    def pushes_for(
        self, records: Iterable[Record], viewer: Viewer, text: bool = False
    ) -> list[Push]:
        """The ``event`` pushes of ``records`` for ``viewer`` (for a :class:`Backfill`), with
        their text when ``text``, each presence record's followed by its ``presence`` push.

        Raises:
            GameFault: the game's ``redact`` failed.
        """
        header = self.state.header
        out: list[Push] = []
        visible = self.visible
        for rec in records:
            push = visible.push(self.id, rec, viewer, header)
            if push is not None:
                out.append(self.text_push(push, viewer, rec) if text else push)
                presence = visible.presence(self.id, rec)
                if presence is not None:
                    out.append(presence)
                undo = self._undo_push(rec)
                if undo is not None:
                    out.append(undo)
        return out

    def holder_of(self, conn: str) -> Seat | None:
        """The seat ``conn`` plays here, or None: one it subscribed to as that seat and that
        the log says it holds."""
        sub = self.subs.get(conn)
        if sub is None or sub.viewer is None or sub.pending is not None:
            return None
        return sub.viewer if self.holders[sub.viewer] == conn else None

    # -- inputs ------------------------------------------------------------------------------
    def command(
        self,
        conn: str,
        rid: Any,
        cmd: Command,
        now: float,
        *,
        closing: bool = False,
        caught_up: bool = False,
    ) -> Step:
        """Decide ``cmd`` from connection ``conn`` (request ``rid``) at host time ``now``.

        ``closing``: the connection is going (its client closed its side): a ``resume`` then
        takes nothing (its ``seat_held`` record is followed, in the same append, by one giving
        the seat back: see :meth:`give_back`), and a ``join`` takes its seat for the token it
        answers but no connection holds it. ``caught_up``: the driver has just read the log's
        end (see :attr:`Step.follow_first`).

        A connection whose seat another host's resume took, not settled yet, is told
        ``detached`` first (:attr:`Step.first`): it has moved on, so that takeover stands for
        it.

        Never raises: a refusal is the step's reply; a fault in the game's code is answered
        ``internal`` (logged) and appends nothing.
        """
        self._now = now
        sub = self.subs.get(conn)
        first: list[Effect] = []
        if sub is not None and sub.pending is not None:
            self._stood(conn, sub, first)
        step = self._command(conn, rid, cmd, now, closing, caught_up)
        if first:
            step.first = first + step.first
        return step

    def _command(
        self, conn: str, rid: Any, cmd: Command, now: float, closing: bool, caught_up: bool
    ) -> Step:
        try:
            if isinstance(cmd, Act):
                return self._act(conn, rid, cmd, now, caught_up)
            if isinstance(cmd, Undo):
                return self._undo(conn, rid, now, caught_up)
            if isinstance(cmd, UndoAnswer):
                return self._undo_answer(conn, rid, cmd, now, caught_up)
            if isinstance(cmd, Join):
                return self._join(conn, rid, cmd, now, closing)
            if isinstance(cmd, Resume):
                return self._resume(conn, rid, cmd, now, closing, caught_up)
            if isinstance(cmd, Watch):
                if self.shared and not caught_up and self.live:  # answer from the log's end
                    return Step(follow_first=True, conn=conn, rid=rid, what="watch")
                return self._watch(conn, rid, cmd)
            if isinstance(cmd, View):
                if self.shared and not caught_up and self.live:
                    return Step(follow_first=True, conn=conn, rid=rid, what="view")
                return self._view(conn, rid)
            if isinstance(cmd, Leave):
                return self._leave(conn, rid, now)
            if isinstance(cmd, End):
                return self._end(conn, rid, cmd, now, caught_up)
            raise TypeError(f"not a command: {cmd!r}")
        except _Refuse as r:
            return Step(effects=[Reply(conn, rid, refusal(r.exc))], conn=conn, rid=rid)
        except (ProtocolError, GamehostError) as exc:  # a typed refusal: each knows its reply
            return Step(effects=[Reply(conn, rid, refusal(exc))], conn=conn, rid=rid)
        except Exception as exc:
            event = "game_fault" if isinstance(exc, GameFault) else "command_failed"
            log.exception(event, session=self.id, op=type(cmd).__name__.lower())
            why = Refused(ErrorCode.INTERNAL, "internal error")
            if isinstance(exc, GameFault) and (not self.live or self.state.ended):  # over
                self.overran("error")  # while answering it: its code is not run again
                why = Refused(ErrorCode.GAME_FAULTED, GAME_FAULTED_NOW)
            return Step(effects=[Reply(conn, rid, why)], conn=conn, rid=rid)

    def drop(self, conn: str, now: float, reason: str = "gone") -> Step | None:
        """Connection ``conn`` went away (``reason``: ``gone``, ``unresponsive``): it leaves
        the subscribers at once; if the log says it holds a seat, the seat is released by a
        ``seat_released`` record."""
        self._now = now
        sub = self.subs.pop(conn, None)
        if sub is None or sub.viewer is None:
            return None
        seat = sub.viewer
        if self.holders[seat] != conn or self.state.ended or not self.live:
            return None
        return self._release(seat, reason, now, "drop")

    def follow(self, records: Sequence[Record], now: float) -> list[Effect]:
        """Fold records someone else appended (another host, or an append whose failure
        reached the log after all) and push them to this table's subscribers, as if appended
        here (observers are not told: the appender tells its own).

        Raises:
            BadRecord: they do not fold (the driver stops the table: ``session_damaged``).
        """
        new = [r for r in records if r.seq > self.state.seq]
        if not new:
            return []
        self._now = now
        start = 0
        state = self.state
        states: list[SessionState] = []
        for i in range(1, len(new) + 1):  # one state per cause, for the freshness window
            if i == len(new) or new[i].type in CAUSES:
                state = self.engine.apply_all(state, new[start:i])
                states.append(state)
                start = i
        self._apply(new, states, now, parse=True)
        out: list[Effect] = []
        try:
            self._publish(new, out, remote=True)
        except BudgetExceeded as exc:  # folded already: the pushes made so far go
            log.error("game_budget_exceeded", session=self.id, fault=exc.what, step="publish")
            self.overran(exc.what)
        if self.state.ended:
            log.info("session_ended", session=self.id, seq=self.state.seq, followed=True)
        return out

    def set_driver(self, driver: bool) -> None:
        """Run host-driven steps from now on (this host holds the session's lease) or not."""
        if driver != self.driver:
            self.driver = driver
            log.info("lease_taken" if driver else "lease_lost", session=self.id)

    # -- committing ----------------------------------------------------------------------------
    def commit(self, step: Step, now: float | None = None, *, closed: bool = False) -> list[Effect]:
        """``step``'s records are durable: make them the table's state and give the effects
        (reply, pushes, then the observers' records). ``now``: the host clock once they are
        (the time left that messages show counts from it; default: the step's time). A fault
        in the game's code while making the pushes is logged; the session is then ended on the
        next step (``game_error``).

        ``closed``: the requester went away before its reply (the driver looked once the
        records were durable). For a ``resume`` its takeover does not stand: the others are
        pushed its record, the connection that held the seat keeps it meanwhile, and the
        driver then carries out :meth:`give_back`."""
        if not step.records:
            return list(step.effects)
        step.closed = closed
        self._now = step.time if now is None else now
        self._apply(step.records, step.states, step.time)
        out: list[Effect] = []
        # the closure refers to the step: unhooked first, so no cycle outlives the commit (the
        # step, its records and states are then freed by reference counting, not the collector)
        then, step.then = step.then, None
        try:
            if then is not None:
                then(out)
        except BudgetExceeded as exc:  # the records are durable: the effects made so far go
            log.error("game_budget_exceeded", session=self.id, fault=exc.what, step="publish")
            self.overran(exc.what)
        except Exception:
            log.exception("game_fault", session=self.id, step="publish")
            self.faulted = True
        out.append(Observe(tuple(step.records)))
        if self.state.ended:
            data = self._ended_data()
            fields = {"outcome": data.get("outcome")}
            if "aborted" in data:
                fields["aborted"] = data["aborted"]
            log.info("session_ended", session=self.id, seq=self.state.seq, **fields)
        return out

    def failed(self, step: Step) -> list[Effect]:
        """``step``'s append failed (the store could not write): the requester, if any, is
        answered ``unavailable``; nothing changes."""
        step.then = None  # the closure refers to the step: no cycle left behind
        if step.conn is None:
            return []
        why = Refused(ErrorCode.UNAVAILABLE, "the session's log could not be written; retry")
        return [Reply(step.conn, step.rid, why)]

    def conflicted(self, step: Step) -> list[Effect]:
        """``step`` lost the race for its seq twice (other hosts keep appending)."""
        step.then = None  # the closure refers to the step: no cycle left behind
        if step.conn is None:
            return []
        err = ProtocolError(
            ErrorCode.CONFLICT,
            "another host changed the session meanwhile; retry",
            seq=self.state.seq,
        )
        return [Reply(step.conn, step.rid, refusal(err))]

    def _apply(
        self,
        records: Sequence[Record],
        states: Sequence[SessionState],
        at: float,
        parse: bool = False,
    ) -> None:
        """Make ``records`` (folded to ``states``, one per cause) the table's own."""
        self.state = states[-1]
        self._bounds.extend(states)
        self._tail.extend(records)
        self._played += sum(1 for r in records if r.type not in PRESENCE)
        self._trim()
        if len(self._legal) > 4 * len(self.state.seats) + 8:  # keep the window's states only
            games = {id(s.game) for s in self._bounds} | {id(self.state.game)}
            for key in [k for k in self._legal if k[0] not in games]:
                del self._legal[key]
        for key in [k for k in self._turns if k[0] < self.state.seq]:
            del self._turns[key]
        for rec in records:  # another host's record from this host's future counts as now
            self._presence(rec, min(parse_ts(rec.ts, at), at) if parse else at)
            if rec.type == "action":
                self.actions += 1
        if self.state.ended:
            self._game_off()

    def _trim(self) -> None:
        """Keep the tail to :data:`TAIL` records of play (and the presence records after the
        one before them), at most :data:`TAIL_MAX` records, and the states after causes that
        an ``act`` may still name (from the one before the tail on)."""
        tail = self._tail
        while tail and (self._played > TAIL or len(tail) > TAIL_MAX):
            if tail.popleft().type not in PRESENCE:
                self._played -= 1
        floor = tail[0].seq - 1 if tail else self.state.seq
        bounds = self._bounds
        while len(bounds) > 1 and bounds[0].seq < floor:
            bounds.popleft()

    def _finish(
        self, step: Step, records: list[Record], states: list[SessionState], now: float
    ) -> Step:
        """Fill ``step`` with ``records`` (and the stop of a session that reaches the record
        limit: both durable, or neither)."""
        state = states[-1]
        if not state.ended and state.seq + 1 >= self.settings.max_records:
            stop, state = self.engine.abort_step(state, "too_long")
            records = [*records, *stop]
            states = [*states, state]
            log.warning("session_aborted", session=self.id, reason="too_long", seq=state.seq)
        step.records = records
        step.states = states
        step.after = state
        step.expected = self.state.seq + 1
        step.time = math.ceil(round(now * 1000, 3)) / 1000
        step.ts = format_ts(now)
        return step

    # -- publishing ----------------------------------------------------------------------------
    def _publish(
        self,
        new: Sequence[Record],
        out: list[Effect],
        skip: str | None = None,
        spare: str | None = None,
        remote: bool = False,
    ) -> None:
        """The pushes of ``new`` records: each record to every subscriber (one redaction per
        distinct viewer), a presence record's followed by its ``presence`` push, then the view
        pushes, then the ``ended`` push or the ``turn`` pushes.

        A connection whose seat another connection took is told ``detached`` and pushed
        nothing more — except for the takeover of ``spare`` (a resumer gone before its reply:
        the seat is given back next), and, for records read from another host (``remote``),
        a takeover by a connection of that host: it may not stand (the host gives the seat
        back if its resumer went away before the reply), so the replaced connection's pushes
        are held back (:attr:`_Sub.pending`) until it is settled: by the record that gives the
        seat back (the held pushes go out, it holds the seat again), by any other record of
        that seat or the session's end, by a command of its own, or after :data:`SETTLE`
        seconds (:meth:`next_due`): then it is told ``detached``."""
        header = self.state.header
        visible = self.visible
        all_subs = self.subs

        def emit(key: str, sub: _Sub, push: Push) -> None:
            if sub.pending is None:
                out.append(Send(key, push))
            else:
                sub.held.append(push)

        subs = [(k, s) for k, s in all_subs.items() if k != skip]
        for rec in new:
            kind = rec.type
            if kind == "seat_held" or kind == "seat_released" or kind == "ended":
                subs = self._settle(rec, subs, out)
            if (kind == "seat_held" and rec.data["holder"] != spare) or kind == "seat_released":
                d = rec.data
                seat, holder = d["seat"], d.get("holder")
                provisional = (
                    remote
                    and kind == "seat_held"
                    and "returned" not in d
                    and holder.partition(".")[0] != self.instance
                )
                gone = []
                for key, sub in subs:
                    if sub.viewer != seat or key == holder or sub.pending is not None:
                        continue
                    if provisional:
                        sub.pending, sub.since, sub.held = rec.seq, self._now, []
                    else:
                        gone.append(key)
                for key in gone:
                    reason = "resumed" if kind == "seat_held" else "released"
                    out.append(Send(key, DetachedPush(self.id, seat, reason)))
                    self._unsubscribe(key, out)
                if gone:
                    subs = [(k, s) for k, s in subs if k not in gone]
            cache: dict[Viewer, EventPush | None] = {}
            told: dict[Viewer, EventPush] = {}  # the same with its text, for those who asked
            shared: list[EventPush] = []
            for key, sub in subs:
                viewer = sub.viewer
                if viewer not in cache:
                    try:
                        cache[viewer] = visible.push(self.id, rec, viewer, header, shared)
                    except GameFault:  # the game's redact fails: nothing of the event shows,
                        self._game_failed("redact")  # and the seq stays gapless
                        cache[viewer] = EventPush(self.id, rec.seq, rec.type, None)
                msg = cache[viewer]
                if msg is not None and sub.text:
                    if viewer not in told:
                        told[viewer] = self.text_push(msg, viewer, rec)
                    msg = told[viewer]
                if msg is not None:
                    emit(key, sub, msg)
            presence = visible.presence(self.id, rec)
            if presence is not None:
                for key, sub in subs:
                    emit(key, sub, presence)
            undo = self._undo_push(rec)
            if undo is not None:
                for key, sub in subs:
                    emit(key, sub, undo)
        if any(s.views for _, s in subs) and not self.visible.game_off:
            views: dict[Viewer, ViewPush | None] = {}
            try:
                to_act, deadline = list(self.to_act()), self.deadline()
            except GameFault:
                self._game_failed("to_act")
                to_act, deadline = [], None
            connected = self.connected()
            for key, sub in subs:
                if sub.views:
                    if sub.viewer not in views:
                        try:
                            wire = self.engine.view_wire(self.state, sub.viewer)
                            views[sub.viewer] = ViewPush(
                                self.id, self.state.seq, wire, to_act, deadline, connected
                            )
                        except GameFault:
                            self._game_failed("view")
                            views[sub.viewer] = None
                    push = views[sub.viewer]
                    if push is not None:
                        emit(key, sub, push)
        if self.state.ended:
            end = self._ended_push()
            told_end = self._ended_push(text=True) if any(s.text for _, s in subs) else end
            for key, sub in subs:
                emit(key, sub, told_end if sub.text else end)
            return
        try:
            for key, sub in list(all_subs.items()):
                if sub.viewer is not None:
                    turn = self._turn(sub.viewer)
                    if turn is not None:
                        emit(key, sub, turn)
        except GameFault:
            self._game_failed("turn")

    def _settle(
        self, rec: Record, subs: list[tuple[str, _Sub]], out: list[Effect]
    ) -> list[tuple[str, _Sub]]:
        """Settle the connections waiting on another host's takeover that ``rec`` decides
        (see :meth:`_publish`): the record giving the seat back to one lets its held pushes
        out; any other record of its seat, or the session's end, means the takeover stood.
        Returns ``subs`` less those told ``detached``."""
        stood = []
        for key, sub in subs:
            if sub.pending is None:
                continue
            if rec.type != "ended" and rec.data.get("seat") != sub.viewer:
                continue
            d = rec.data
            if rec.type == "seat_held" and d.get("returned") == sub.pending and d["holder"] == key:
                pushes, sub.pending, sub.held = sub.held, None, []
                out.extend(Send(key, p) for p in pushes)
            else:
                self._stood(key, sub, out)
                stood.append(key)
        return [(k, s) for k, s in subs if k not in stood] if stood else subs

    def _stood(self, key: str, sub: _Sub, out: list[Effect]) -> None:
        """The takeover ``key`` waited on stands: it is told ``detached`` (its held pushes are
        dropped: a replaced connection is pushed nothing after the takeover)."""
        out.append(Send(key, DetachedPush(self.id, sub.viewer, "resumed")))
        sub.held = []
        self._unsubscribe(key, out)

    def _game_failed(self, step: str) -> None:
        """The game's code failed while the table showed a change (the records are durable):
        logged once, and the session ends as ``game_error`` on its next host-driven step."""
        if not self.faulted:
            log.exception("game_fault", session=self.id, step=step)
        self.faulted = True

    def _turn(self, seat: Seat) -> TurnPush | None:
        """The seat's ``turn`` push now, or None when it is not to act (made once per seq and
        seat)."""
        st = self.state
        if not st.started or st.ended or seat not in self.to_act():
            return None
        key = (st.seq, seat)
        turn = self._turns.get(key)
        if turn is None:
            legal = self._legal_at(st, seat)
            turn = TurnPush(self.id, st.seq, seat, legal, list(self.to_act()), self.deadline())
            self._turns[key] = turn
        return turn

    def _legal_at(self, state: SessionState, seat: Seat) -> list[Any]:
        """The seat's wire legal actions in ``state`` (a state of the window), made once per
        game state and seat (a presence record moves the seq, not the game: same list)."""
        key = (id(state.game), seat)
        got = self._legal.get(key)
        if got is not None and got[0] is state.game:
            return got[1]
        try:
            actions = self.game.legal_actions(state.game, seat)
            legal = [self.engine.codec.action_to_wire(a) for a in actions]
        except BaseException as exc:
            game_error(exc)
            raise GameFault(
                f"game {self.game.info.id!r} at seq {state.seq}: legal_actions for seat"
                f" {seat} raised {type(exc).__name__}: {exc}",
                state.seq,
            ) from exc
        self._legal[key] = (state.game, legal)
        return legal

    # -- subscribers -------------------------------------------------------------------------
    def _one_role(self, conn: str) -> None:
        """The role rule: a connection plays one seat of a session or watches it, and changes
        that only by ``leave`` first.

        Raises:
            _Refuse: ``already_attached`` with ``seat`` (the seat held; None: watching).
        """
        sub = self.subs.get(conn)
        if sub is None:
            return
        held = sub.viewer
        what = "watches this session" if held is None else f"holds seat {held} here"
        raise _protocol(
            ErrorCode.ALREADY_ATTACHED, f"this connection {what} already; leave first", seat=held
        )

    def _subscribe(
        self, conn: str, viewer: Viewer, views: bool, out: list[Effect], text: bool = False
    ) -> None:
        if not self.live:
            return
        self.subs[conn] = _Sub(viewer, views, text)
        out.append(Attach(conn, viewer))

    def _unsubscribe(self, conn: str, out: list[Effect]) -> None:
        if self.subs.pop(conn, None) is not None:
            out.append(Detach(conn))

    # -- commands ------------------------------------------------------------------------------
    def _join(self, conn: str, rid: Any, cmd: Join, now: float, closing: bool) -> Step:
        if self.state.ended:
            raise _protocol(ErrorCode.SESSION_ENDED, "the session is over")
        self._one_role(conn)
        name, seat = cmd.name, cmd.seat
        free = self.state.free_seats
        if seat is None:
            if not free:
                raise _protocol(ErrorCode.SESSION_FULL, "every seat is taken", free=free)
            seat = free[0]
        elif not 0 <= seat < len(self.state.seats):
            raise _protocol(
                ErrorCode.BAD_REQUEST, f"seats are 0..{len(self.state.seats) - 1}, not {seat}"
            )
        elif seat not in free:
            raise _protocol(ErrorCode.SESSION_FULL, f"seat {seat} is not free", free=free)
        token = new_token()
        try:
            new, after = self.engine.seat_step(
                self.state, seat, name, False, hash_token(token), None if closing else conn
            )
        except GameFault:  # the game's start failed: a step of the host's, not the joiner's
            log.exception("game_fault", session=self.id, step="start")
            self.faulted = True  # the next step ends the session (game_error)
            raise _protocol(
                ErrorCode.INTERNAL, "internal error: the game failed to start"
            ) from None
        step = self._finish(Step(conn=conn, rid=rid, what="join"), new, [after], now)
        # the reply's view is built before the append: a game fault there appends nothing
        snap = self.snapshot(seat, step.after)

        def then(out: list[Effect]) -> None:
            if not closing:
                self._subscribe(conn, seat, cmd.view, out, cmd.text)
            log.info("seat_taken", session=self.id, seat=seat, conn=conn)
            now = attrs.evolve(snap, deadline=self.deadline(), connected=self.connected())
            out.append(Reply(conn, rid, Joined(seat, token, now)))
            self._publish(step.records, out, skip=conn)

        step.then = then
        return step

    def _watch(self, conn: str, rid: Any, cmd: Watch) -> Step:
        self._one_role(conn)
        snap = self.snapshot(None)
        out: list[Effect] = []
        self._subscribe(conn, None, cmd.view, out, cmd.text)
        out.append(Reply(conn, rid, Watching(snap)))
        if self.state.ended:
            out.append(Send(conn, self._ended_push(cmd.text)))
        return Step(effects=out, conn=conn, rid=rid)

    def _view(self, conn: str, rid: Any) -> Step:
        snap = self.snapshot(self.holder_of(conn))
        return Step(effects=[Reply(conn, rid, ViewReply(snap))], conn=conn, rid=rid)

    def _seat_of_token(self, token: str) -> Seat:
        h = hash_token(token)
        for i, s in enumerate(self.state.seats):
            if s is not None and s.token_hash == h:
                return i
        raise _protocol(ErrorCode.BAD_TOKEN, "that token holds no seat in this session")

    def _resume(
        self, conn: str, rid: Any, cmd: Resume, now: float, closing: bool, caught_up: bool
    ) -> Step:
        after = cmd.after
        if self.shared and not caught_up:  # the seat, and what the client saw, may be newer
            return Step(follow_first=True, conn=conn, rid=rid, what="resume")
        seat = self._seat_of_token(cmd.token)
        seq = self.state.seq
        if after is not None and after < 0:
            raise _protocol(ErrorCode.BAD_REQUEST, f"'after' must be 0..{seq}, not {after}")
        if after is not None and after > seq:
            if not self._lost_logged:  # once per table: a client can repeat its resume
                self._lost_logged = True
                log.error("log_lost_records", session=self.id, seat=seat, after=after, seq=seq)
            raise _protocol(
                ErrorCode.RECORDS_LOST,
                f"the client saw seq {after} but the log ends at {seq}: the log lost records",
                seq=seq,
            )
        self._one_role(conn)
        if self.state.ended or not self.live:  # nothing is appended after the end
            out: list[Effect] = []
            self._catch_up(conn, seat, after, seq, out, cmd.text)
            out.append(Reply(conn, rid, Resumed(seat, self.snapshot(seat))))
            out.append(Send(conn, self._ended_push(cmd.text)))
            return Step(effects=out, conn=conn, rid=rid)
        self._resume_rate(seat, now)
        prev = self.holders[seat]
        rec = Record(seq + 1, "seat_held", {"seat": seat, "holder": conn})
        state = self.engine.apply(self.state, rec)
        if closing:  # it takes nothing: the same records as a resumer gone before its reply
            back = self._giving_back(rec, prev)
            state2 = self.engine.apply(state, back)
            step = self._finish(
                Step(conn=conn, rid=rid, what="resume", prev=prev),
                [rec, back],
                [state, state2],
                now,
            )
            step.then = lambda out: self._given_back(step.records, conn, rid, out)
            return step
        step = self._finish(Step(conn=conn, rid=rid, what="resume", prev=prev), [rec], [state], now)

        def then(out: list[Effect]) -> None:
            if step.closed:  # gone before its reply: the driver gives the seat back next
                self._publish(step.records, out, spare=conn)
                return
            upto = self.state.seq
            self._publish(step.records, out, skip=conn)  # the seat's old holder is told
            self._catch_up(conn, seat, after, upto, out, cmd.text)
            self._subscribe(conn, seat, cmd.view, out, cmd.text)
            out.append(Reply(conn, rid, Resumed(seat, self.snapshot(seat))))
            if self.state.ended:
                out.append(Send(conn, self._ended_push(cmd.text)))
            else:
                turn = self._turn(seat)
                if turn is not None:
                    out.append(Send(conn, turn))

        step.then = then
        return step

    def _resume_rate(self, seat: Seat, now: float) -> None:
        """Refuse a resume of ``seat`` past :data:`RESUME_BURST` of them within
        :data:`RESUME_PERIOD` seconds (counted from the log's ``seat_held`` records).

        Raises:
            _Refuse: ``overloaded`` with ``retry_after`` (seconds, rounded up to 0.1).
        """
        recent = self.resumes[seat]
        if len(recent) < RESUME_BURST:
            return
        wait = recent[0] + RESUME_PERIOD - now
        if wait > 0:
            raise _protocol(
                ErrorCode.OVERLOADED,
                f"seat {seat} was resumed {RESUME_BURST} times in {RESUME_PERIOD:g} s; retry"
                f" in {wait:.1f} s",
                retry_after=math.ceil(round(wait * 10, 6)) / 10,
            )

    def give_back(self, step: Step, now: float) -> Step | None:
        """The step after a ``resume`` ``step`` whose connection went away before its reply
        (:meth:`commit` with ``closed``): a record that gives the seat straight back to the
        connection that held it before (a ``seat_held`` naming it, with ``returned``: the
        resume's seq; its host keeps it there if that connection is still open, else releases
        it by the usual rule), or, when nobody held it or that connection was this host's and
        is gone, a ``seat_released`` (``gone``, ``returned``). The resumer is answered
        ``unavailable``. None when there is nothing to give back (the session ended, or the
        seat changed hands again meanwhile)."""
        self._now = now
        held = step.records[0]
        seat, conn = held.data["seat"], held.data["holder"]
        if self.state.ended or not self.live or self.holders[seat] != conn:
            return None
        back = self._giving_back(held, step.prev)
        state = self.engine.apply(self.state, back)
        out = self._finish(
            Step(conn=step.conn, rid=step.rid, what="give_back"), [back], [state], now
        )
        out.then = lambda effects: self._given_back(out.records, conn, step.rid, effects)
        return out

    def _giving_back(self, held: Record, prev: str | None) -> Record:
        """The record after ``held`` (a resume's ``seat_held``) that gives its seat back to
        ``prev``: see :meth:`give_back`."""
        seat = held.data["seat"]
        seq = held.seq + 1
        if prev is not None and (prev.partition(".")[0] != self.instance or prev in self.subs):
            return Record(seq, "seat_held", {"seat": seat, "holder": prev, "returned": held.seq})
        data = {"seat": seat, "reason": "gone", "returned": held.seq}
        return Record(seq, "seat_released", data)

    def _given_back(self, records: list[Record], conn: str, rid: Any, out: list[Effect]) -> None:
        """The effects of a resume that took nothing (its records, the seat given back): the
        pushes, the connection that held the seat keeping it; the resumer (if it still reads)
        answered ``unavailable``."""
        self._publish(records, out, spare=conn)
        why = "this connection closed before the reply to its resume: the seat went back"
        out.append(Reply(conn, rid, Refused(ErrorCode.UNAVAILABLE, why)))

    def _catch_up(
        self,
        conn: str,
        viewer: Viewer,
        after: int | None,
        upto: int,
        out: list[Effect],
        text: bool = False,
    ) -> None:
        """The records ``after + 1 .. upto`` for ``conn``, as one chunk (with their text when
        ``text``): from the table's tail when it reaches back that far, else read from the
        store by the driver."""
        if after is None or after >= upto:
            return
        tail = self._tail
        if tail and tail[0].seq <= after + 1:
            records = (r for r in tail if after < r.seq <= upto)
            pushes = self.pushes_for(records, viewer, text)
            if pushes:
                out.append(SendMany(conn, tuple(pushes)))
            return
        out.append(Backfill(conn, viewer, after, upto, text))

    def _act(self, conn: str, rid: Any, cmd: Act, now: float, caught_up: bool) -> Step:
        action, expected = cmd.action, cmd.expected
        seat = self.holder_of(conn)
        if seat is None:
            raise _protocol(ErrorCode.NOT_SEATED, "join or resume a seat first")
        seq = self.state.seq
        if expected is not None and expected > seq and self.shared and not caught_up:
            return Step(follow_first=True, conn=conn, rid=rid, what="act")
        if expected is not None and expected != seq:
            why = self._stale(seat, expected)
            if why is not None:
                raise _protocol(
                    ErrorCode.CONFLICT,
                    f"the session is at seq {seq}, not {expected}: {why}",
                    seq=seq,
                )
        if self.state.ended:
            raise _protocol(ErrorCode.SESSION_ENDED, "the session is over")
        parsed = self.engine.codec.action_from_wire(action)  # BadAction, an ActionError
        lapse, state = self.engine.lapse_undo(self.state, "acted")  # a waiting request ends
        new, after = self.engine.step(state, seat, parsed)  # ActionError: the game refuses
        states = [state, after] if lapse else [after]
        step = self._finish(Step(conn=conn, rid=rid, what="act"), [*lapse, *new], states, now)

        def then(out: list[Effect]) -> None:
            out.append(Reply(conn, rid, Accepted(self.state.seq)))
            self._publish(step.records, out)

        step.then = then
        return step

    def _undo(self, conn: str, rid: Any, now: float, caught_up: bool) -> Step:
        """The seat held asks to take back its last action (:meth:`Engine.ask_undo`): the
        ``undo_asked`` record, and ``undo`` at once when no other human seat is to be asked.
        On a shared store the log's end is read first (the last action may be newer)."""
        seat = self.holder_of(conn)
        if seat is None:
            raise _protocol(ErrorCode.NOT_SEATED, "join or resume a seat first")
        if self.shared and not caught_up and self.live:
            return Step(follow_first=True, conn=conn, rid=rid, what="undo")
        if self.state.ended:
            raise _protocol(ErrorCode.SESSION_ENDED, "the session is over")
        new, after = self.engine.ask_undo(self.state, seat)  # UndoRefused: cannot_undo
        log.info("undo_asked", session=self.id, seat=seat, action_seq=new[0].data["action_seq"])
        return self._undo_step(conn, rid, "undo", new, after, now)

    def _undo_answer(
        self, conn: str, rid: Any, cmd: UndoAnswer, now: float, caught_up: bool
    ) -> Step:
        """The seat held answers the waiting request (:meth:`Engine.answer_undo`)."""
        seat = self.holder_of(conn)
        if seat is None:
            raise _protocol(ErrorCode.NOT_SEATED, "join or resume a seat first")
        if self.shared and not caught_up and self.live:
            return Step(follow_first=True, conn=conn, rid=rid, what="undo_answer")
        if self.state.ended:
            raise _protocol(ErrorCode.SESSION_ENDED, "the session is over")
        new, after = self.engine.answer_undo(self.state, seat, cmd.accept)  # UndoRefused
        return self._undo_step(conn, rid, "undo_answer", new, after, now)

    def _undo_step(
        self,
        conn: str,
        rid: Any,
        what: str,
        new: list[Record],
        after: SessionState,
        now: float,
    ) -> Step:
        """The step of an undo request or answer: its records, answered with where the request
        stands (:class:`UndoResult`), then their pushes."""
        last = new[-1]
        if last.type == "undo":
            status = "done"
            log.info("undo_done", session=self.id, action_seq=last.data["action_seq"])
        elif last.type == "undo_answered" and not last.data["accept"]:
            status = "refused"
        else:
            status = "asked"
        step = self._finish(Step(conn=conn, rid=rid, what=what), new, [after], now)

        def then(out: list[Effect]) -> None:
            out.append(Reply(conn, rid, UndoResult(self.state.seq, status)))
            self._publish(step.records, out)

        step.then = then
        return step

    def _stale(self, seat: Seat, expected: int) -> str | None:
        """Why an act of ``seat`` naming seq ``expected`` (not the session's) is refused, or
        None when it still holds (:mod:`host.table.freshness`), from the records since
        ``expected`` (at most :data:`WINDOW` of them records of play: presence records do not
        count) and the state after the cause that ends at ``expected``.

        Raises:
            GameFault: the game's ``redact``, ``to_act`` or ``legal_actions`` failed.
        """
        seq = self.state.seq
        if expected > seq:
            return "that seq is not reached yet"
        tail = self._tail
        since = [r for r in tail if r.seq > expected]
        played = sum(1 for r in since if r.type not in PRESENCE)
        if played > WINDOW or not tail or tail[0].seq > expected + 1:
            return f"that seq is more than {WINDOW} records of play old"
        then_state = next((s for s in self._bounds if s.seq == expected), None)
        if then_state is None:
            return "this seat had no turn at that seq (it is inside a cause)"
        then = None
        if seat in self.engine.to_act(then_state):
            then = self._legal_at(then_state, seat)
        now_turn = self._turn(seat)
        return stale_reason(self.engine, seat, since, then, now_turn.legal if now_turn else [])

    def _leave(self, conn: str, rid: Any, now: float) -> Step:
        sub = self.subs.get(conn)
        if sub is None:
            raise _protocol(ErrorCode.NOT_SEATED, "this connection neither plays nor watches")
        seat = sub.viewer
        if seat is None or self.holders[seat] != conn or self.state.ended:
            out: list[Effect] = []
            self._unsubscribe(conn, out)
            out.append(Reply(conn, rid, Left()))
            return Step(effects=out, conn=conn, rid=rid)
        step = self._release(seat, "left", now, "leave", conn=conn, rid=rid)
        then = step.then

        def left(out: list[Effect]) -> None:
            self._unsubscribe(conn, out)
            out.append(Reply(conn, rid, Left()))
            if then is not None:
                then(out)

        step.then = left
        return step

    def _end(self, conn: str, rid: Any, cmd: End, now: float, caught_up: bool) -> Step:
        """The operator ends the session: its ``ended`` record (``aborted``: ``cmd.reason``),
        pushed to every subscriber as any end is, and answered with its seq. On a shared store
        the log's end is read first, so whichever host drives the session, the end follows
        every record before it."""
        if self.shared and not caught_up and self.live:
            return Step(follow_first=True, conn=conn, rid=rid, what="end")
        if self.state.ended or not self.live:
            raise _protocol(ErrorCode.SESSION_ENDED, "the session is over")
        stop, after = self.engine.abort_step(self.state, cmd.reason)
        log.warning("session_aborted", session=self.id, reason=cmd.reason, seq=self.state.seq)
        step = self._finish(Step(conn=conn, rid=rid, what="end"), stop, [after], now)

        def then(out: list[Effect]) -> None:
            out.append(Reply(conn, rid, Accepted(self.state.seq)))
            self._publish(step.records, out)

        step.then = then
        return step

    def _release(
        self, seat: Seat, reason: str, now: float, what: str, conn: str | None = None, rid=None
    ) -> Step:
        rec = Record(self.state.seq + 1, "seat_released", {"seat": seat, "reason": reason})
        state = self.engine.apply(self.state, rec)
        step = self._finish(Step(conn=conn, rid=rid, what=what), [rec], [state], now)
        step.then = lambda out: self._publish(step.records, out)
        return step

    # -- host-driven steps ---------------------------------------------------------------------
    def _orphans(self) -> list[tuple[Seat, str]]:
        """Seats held (per the log) by connections that are gone: this host's connections no
        longer subscribed here (``gone``), and connections of hosts no longer running
        (``host_gone``, judged by the lease holder only)."""
        out: list[tuple[Seat, str]] = []
        for seat, holder in enumerate(self.holders):
            if holder is None:
                continue
            instance = holder.partition(".")[0]
            if instance == self.instance:
                if holder not in self.subs:
                    out.append((seat, "gone"))
            elif self.driver and not self.host_alive(instance):
                out.append((seat, "host_gone"))
        return out

    def next_due(self) -> tuple[float, str]:
        """When the next host-driven step is due (host time, ``inf`` if none) and which."""
        st = self.state
        if st.ended or not self.live:
            return math.inf, ""
        if self._orphans():
            return -math.inf, "release"
        settle = min(
            (s.since + SETTLE for s in self.subs.values() if s.pending is not None),
            default=math.inf,
        )
        if not self.driver:  # another host holds the lease: it runs bots and timers
            return (settle, "settle") if settle < math.inf else (math.inf, "")
        if self.faulted:
            return -math.inf, "fault"
        n = len(st.seats)
        if any(0 <= s < n and st.seats[s] is None for s in self._bots):
            return -math.inf, "seat_bots"
        steps: list[tuple[float, str]] = [(math.inf, ""), (settle, "settle")]
        if st.undo_ask is not None and self.undo_at is not None:
            steps.append((self.undo_at + UNDO_EXPIRES, "undo_expire"))
        s = self.settings
        if s.abandon_after and self._humans and self.unattended_since is not None:
            steps.append((self.unattended_since + s.abandon_after, "abandon"))
        if st.started:
            try:
                to_act = self.to_act()
            except GameFault:
                log.exception("game_fault", session=self.id, step="to_act")
                self.faulted = True
                return -math.inf, "fault"
            if any(st.seats[x] is not None and st.seats[x].bot for x in to_act):  # type: ignore[union-attr]
                steps.append((self.turn_started + s.bot_delay, "bot"))
            else:
                deadline = self.turn_deadline()  # the deadline every message shows
                if deadline is not None:
                    if self._absent(to_act):
                        steps.append((-math.inf, "absent"))
                    steps.append((deadline, "timeout"))
        return min(steps)

    def _absent(self, to_act: Iterable[Seat]) -> list[Seat]:
        """The seats in ``to_act`` whose turns timed out :data:`ABSENT_AFTER` times in a row
        with no connection holding them: the host plays those at once."""
        return [s for s in to_act if self.timeouts[s] >= ABSENT_AFTER and self.holders[s] is None]

    def due(self, now: float, caught_up: bool = False) -> Step | None:
        """The host-driven step due at ``now`` (None if none is). A fault in the game's code
        here ends the session: the step is then the ``ended`` record with ``aborted:
        "game_error"``. ``caught_up``: the driver has just read the log's end (a takeover
        waiting to be settled is settled only after that: see :attr:`Step.follow_first`)."""
        when, what = self.next_due()
        if when > now:
            return None
        self._now = now
        if what == "settle":
            if self.shared and not caught_up:  # the seat may have been given back meanwhile
                return Step(follow_first=True, what="settle")
            out: list[Effect] = []
            for key, sub in list(self.subs.items()):
                if sub.pending is not None and sub.since + SETTLE <= now:
                    self._stood(key, sub, out)
            return Step(effects=out, what="settle")
        try:
            return self._host_step(what, now)
        except Exception:  # the game's code (GameFault), or what it broke: end the session
            log.exception("game_fault", session=self.id, step=what)
            self.faulted = True
            return self._abort("game_error", now)

    def _host_step(self, what: str, now: float) -> Step | None:
        if what == "release":
            orphans = self._orphans()
            state = self.state
            records, states = [], []
            for seat, reason in orphans:
                rec = Record(state.seq + 1, "seat_released", {"seat": seat, "reason": reason})
                state = self.engine.apply(state, rec)
                records.append(rec)
                states.append(state)
            log.info("seats_released", session=self.id, seats=[s for s, _ in orphans])
            step = self._finish(Step(what="release"), records, states, now)
            step.then = lambda out: self._publish(step.records, out)
            return step
        if what == "fault":
            return self._abort("game_error", now)
        if what == "undo_expire":
            records, state = self.engine.lapse_undo(self.state, "expired")
            if not records:
                return None
            log.info("undo_expired", session=self.id, action_seq=records[0].data["action_seq"])
            return self._publishing(self._finish(Step(what="undo_expire"), records, [state], now))
        if what == "abandon":
            return self._abort("abandoned", now)
        if what == "seat_bots":
            st = self.state
            missing = [s for s in sorted(self._bots) if st.seats[s] is None]
            records, states = [], []
            for seat in missing:
                new, st = self.engine.seat_step(st, seat, f"bot{seat}", True, None)
                records += new
                states.append(st)
            log.warning("bots_seated_on_load", session=self.id, seats=missing)
            return self._publishing(self._finish(Step(what="seat_bots"), records, states, now))
        if what == "bot":
            return self._bot_step(now)
        if what in ("timeout", "absent"):
            to_act = self.to_act()
            seats = list(to_act) if what == "timeout" else self._absent(to_act)
            return self._time_out(seats, now)
        return None

    def _publishing(self, step: Step) -> Step:
        step.then = lambda out: self._publish(step.records, out)
        return step

    def _abort(self, reason: str, now: float) -> Step | None:
        if self.state.ended:
            return None
        fault = (self.fault or "error") if reason == "game_error" else None
        stop, after = self.engine.abort_step(self.state, reason, fault)
        log.warning("session_aborted", session=self.id, reason=reason, seq=self.state.seq)
        self.faulted = False
        return self._publishing(self._finish(Step(what=reason), stop, [after], now))

    def _bot_step(self, now: float) -> Step | None:
        """One bounded step of host bots: one move (with a ``bot_delay``), else consecutive
        moves up to :data:`BOT_BATCH` records, appended together."""
        batch: list[Record] = []
        states: list[SessionState] = []
        state = self.state
        limit = self.settings.max_records
        while len(batch) < BOT_BATCH and state.seq + 1 < limit:
            seat = self.engine.bot_seat(state)
            if seat is None:
                break
            if state.undo_ask is not None:  # the bot's move ends a waiting request
                lapse, state = self.engine.lapse_undo(state, "acted")
                batch += lapse
                states.append(state)
            new, state = self.engine.bot_step(state, seat)
            batch += new
            states.append(state)
            if self.settings.bot_delay:
                break
        if not batch:
            return self._abort("too_long", now)  # a bot is to act but the session is full
        return self._publishing(self._finish(Step(what="bot"), batch, states, now))

    def _time_out(self, seats: Sequence[Seat], now: float) -> Step | None:
        """Play the host bot's choice for each of ``seats`` still to act (its turn timer ran
        out, or its player is absent), each recorded ``"timed_out": true``, in one append."""
        records: list[Record] = []
        states: list[SessionState] = []
        state = self.state
        for seat in seats:
            if state.ended or seat not in self.engine.to_act(state):
                continue
            if state.undo_ask is not None:  # the host's move ends a waiting request
                lapse, state = self.engine.lapse_undo(state, "acted")
                records += lapse
                states.append(state)
            new, state = self.engine.bot_step(state, seat, timed_out=True)
            records += new
            states.append(state)
            count = 0 if self.holders[seat] is not None else self.timeouts[seat] + 1
            if count <= ABSENT_AFTER:  # then it is played at once: logged once
                log.info("turn_timed_out", session=self.id, seat=seat, absent=count == ABSENT_AFTER)
        if not records:
            return None
        return self._publishing(self._finish(Step(what="timeout"), records, states, now))
