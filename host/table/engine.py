"""The pure session machine: log records in, session state out; causes in, new records out.

No I/O, no trio. The table core (``host.table.core``), the replay debugger (``tools.replay``)
and the tests all drive a game through this module, so live play and replay cannot drift apart.

Log records (one JSON object per line in the event log; each with its ``ts``, the time of its
append, which the table core gives it):

==============  ===================================================================================
``header``      seq 0: ``format``, ``host_version``, ``session``, ``game``, ``game_version``,
                ``event_version``, ``options``, ``seats``, ``bots`` (seat list), ``seed`` (hex,
                secret) and ``seed_commitment`` (sha256 of the seed, public)
``seat_taken``  ``seat``, ``name``, ``bot``, ``token_hash`` (sha256 of the seat token) and, for a
                seat a connection joined, ``holder`` (that connection's key)
``action``      ``seat`` and ``action`` (the wire form): an accepted action, followed by its events
``event``       ``v`` (event schema version) and ``event`` (the wire form)
``seat_held``   ``seat`` and ``holder``: a connection resumed the seat (it holds it from here on);
                with ``returned`` (the seq of a resume whose connection went away before its
                reply) the seat goes straight back to ``holder``, which held it before that
``seat_released`` ``seat`` and ``reason`` (``left``, ``gone``, ``unresponsive``, ``host_gone``): no
                connection holds the seat any more (``returned``: as for ``seat_held``, when
                nobody held it before that resume)
``undo_asked``  ``seat``, ``action_seq`` (the seq of the ``action`` record it asks to take back),
                ``action`` (that action's wire form) and ``waiting`` (the seats whose answer it
                needs: every other human seat); with nobody to wait for, ``undo`` follows at once
``undo_answered`` ``seat``, ``action_seq`` and ``accept`` (true or false): a seat's answer; a false
                one refuses the request; the last true one is followed by ``undo``
``undo``        ``seat``, ``action_seq`` and ``action``: the action is taken back, the game state
                is again the one before it (never a cause of its own: it ends the cause of the
                ``undo_asked`` or ``undo_answered`` that completed the consent)
``undo_refused`` ``seat`` (who asked), ``action_seq`` and ``reason``: ``expired`` (nobody answered
                in time) or ``acted`` (an action came first: it is appended just before it)
``ended``       ``outcome`` and ``seed`` (hex): the commit-reveal, always the last record; when the
                host ended it, ``outcome`` null and ``aborted`` (why), and for a game that
                faulted (``aborted: "game_error"``) ``fault``: ``time``, ``memory`` or
                ``thread`` (past its budget), ``error`` (anything else; logs before it was
                recorded lack it), ``crash`` or ``hang`` (it took the host down, see
                ``host.net.marker``)
==============  ===================================================================================

``seat_held`` and ``seat_released`` are *presence* records: who holds a seat is the log's to say,
so every host (and a host after a restart) agrees on it. They change nothing of the game; each is
a cause of its own, appended alone (or, for a resume from a connection already closing, its
``seat_held`` and the record giving the seat back, together).

**Undo by consent.** A game that has the optional ``undoable(state_before, seat, action,
events)`` member lets a seat take back its last action when that action is still the session's
last one, its seat chose it (not a turn timer) and ``undoable`` says it revealed nothing (no
draw, no deal, no card turned): :meth:`Engine.ask_undo`, :meth:`Engine.answer_undo` and
:meth:`Engine.lapse_undo` make the records above. The engine keeps what an undo needs in the
session state, from folding the log alone: the last action, the events it caused and the game
state before it (:class:`UndoPoint`; only for a game with ``undoable``), and the request waiting
for answers (:class:`UndoAsk`). Folding ``undo`` makes the game state the one before that
action again (the very value, not a copy), so every view is what it was.

A cause (a seat being taken, an action) yields the records it produces. ``start`` runs as soon as
the last seat is taken; ``ended`` follows the first event after which ``outcome`` is not ``None``.
The game's ``Rng`` for a cause is ``Rng(seed, seq)`` with ``seq`` the number of the cause's first
game-visible record: the ``action`` record for ``decide``, the first start event for ``start``.

The game is third-party code. Every call into it while producing records (``start``, ``decide``,
``evolve``, ``outcome``, ``to_act``, ``legal_actions``, ``bot_action``) is guarded: anything it
raises, except an :class:`~host.errors.ActionError` (such as :class:`IllegalAction`) from ``decide``
on a client's action, becomes
:class:`GameFault` (the original chained as ``__cause__``, the message naming the game id and the
seq). Before an action or event becomes a :class:`Record` it must be an instance of one of the
classes the game registered in its :class:`host.game.GameInfo`, and it must read back equal to
itself through the game's codec and JSON (``from_wire(loads(dumps(to_wire(x)))) == x``), so the
log never holds what replay cannot read. A cause whose events leave no seat to act and no outcome
would freeze its table, so it is a fault too. Nothing of a cause that faulted is returned. In a
host-driven step (:meth:`Engine.bot_act`: a bot's move, a turn timer) ``decide`` refusing the
action the game's own bot or ``legal_actions`` chose is a fault as well. :meth:`Engine.to_act`,
:meth:`Engine.view_wire` and :meth:`Engine.redacted_wire` give the same guard to what the host
shows its viewers.

Folding (:meth:`Engine.apply`, :meth:`Engine.rebuild`) raises :class:`BadRecord`, a
:class:`~host.errors.LogError` (and ``ValueError``) carrying the ``seq`` of the record that does
not fold, whether the record is bad
(missing field, unknown type, undecodable event, a seq out of order) or the game's ``evolve``
refuses it: a log the current code cannot fold is a corrupt log to its reader.
:meth:`Engine.verify` never raises: it reports the first such record as ``(seq, explanation)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Iterable
from typing import Any

import attrs
import orjson

from host import __version__
from host.errors import ActionError, LogError, SeatError, SeatTaken, UndoRefused
from host.game import (
    NOT_YOUR_TURN,
    Emitter,
    Game,
    IllegalAction,
    Rng,
    Seat,
    Viewer,
    seed_commitment,
    tag_of,
)
from host.plugins.budget import BudgetExceeded
from host.plugins.codec import GameCodec
from host.plugins.faults import GameFault, game_error
from protocol.framing import kept

LOG_FORMAT = 1
PRESENCE = frozenset({"seat_held", "seat_released"})
"""The record types that say who holds a seat (no game state changes)."""
UNDO_CAUSES = frozenset({"undo_asked", "undo_answered", "undo_refused"})
"""The undo record types that begin a cause (``undo`` ends the cause that completed consent)."""
UNDO_RECORDS = UNDO_CAUSES | {"undo"}
"""Every undo record type."""
CAUSES = frozenset({"seat_taken", "action"}) | PRESENCE | UNDO_CAUSES
"""The record types that begin a cause (an ``ended`` the host appends is one too)."""
LAPSE_REASONS = frozenset({"expired", "acted"})
"""Why an ``undo_refused`` record ends a request (a seat's refusal is its ``undo_answered``)."""
RELEASE_REASONS = frozenset({"left", "gone", "unresponsive", "host_gone"})
VERIFY_STEP = 4096
"""Records between two calls of :meth:`Engine.verify`'s ``progress``."""
_NEVER = 1 << 62  # a record count no log reaches
_SCALARS = frozenset({str, int, bool, float, type(None)})

KNOWN_GOOD_MAX = 4096
"""How many checked actions and events an engine remembers (an equal value with the same JSON
text is not structured again; the set is emptied when full)."""
KNOWN_GOOD_BYTES = 512
"""Only values whose JSON is at most this many bytes are remembered as known good: the small,
repeated ones (a card played, a draw) that the cache is for. A large one (a deal: the whole
shoe) is checked each time, so the cache holds at most about 2 MiB and keeps nothing of a
finished session's big events alive."""

MAX_VIEW_BYTES = 1 << 20
"""The most bytes a game's view may take as JSON (1 MiB): a larger one is a game fault (a view
goes into replies and pushes, each held to a connection's outbox budget)."""

__all__ = [
    "LOG_FORMAT",
    "MAX_VIEW_BYTES",
    "BadRecord",
    "Engine",
    "GameFault",
    "Record",
    "SeatInfo",
    "SessionState",
    "UndoAsk",
    "UndoPoint",
]


class BadRecord(LogError, ValueError):
    """A log record the engine cannot fold into the session state (answered ``session_damaged``).

    Args:
        seq: the seq at which the log goes wrong (0 for the header or an empty log).
        message: why.

    Attributes:
        seq, message: as given; the original error, if any, is chained as ``__cause__``.
    """

    code = "session_damaged"

    def __init__(self, seq: int, message: str) -> None:
        super().__init__(message)
        self.args = (seq, message)
        self.seq = seq

    def __str__(self) -> str:
        return f"seq {self.seq}: {self.message}"

    def reply(self) -> tuple[str, str, dict[str, Any]]:
        """``session_damaged``, naming the seq and what is wrong."""
        return self.code, f"the session's log is damaged at seq {self.seq}: {self.message}", {}


@attrs.frozen
class Record:
    """One log record.

    Attributes:
        seq: its gapless sequence number (0 = header).
        type: ``header``, ``seat_taken``, ``action``, ``event`` or ``ended``.
        data: the JSON body without ``seq``, ``type`` and ``ts``.
        obj: for ``action`` and ``event`` records the structured game value (not serialised).
        encoded: for an ``event`` record the engine just made, its ``event`` body as JSON (an
            ``orjson.Fragment`` of ``orjson.dumps(data["event"])``, made once when the event
            was checked), so the log line and the event push splice it in instead of encoding
            the body again; None for records read from a log.
        ts: the record's time as the log holds it (``2026-11-30T10:00:00.123Z``, UTC), for
            records read from a log; None for records not written yet (their append gives
            them one).
    """

    seq: int
    type: str
    data: dict[str, Any]
    obj: Any = attrs.field(default=None, eq=False)
    encoded: Any = attrs.field(default=None, eq=False, repr=False)
    ts: str | None = attrs.field(default=None, eq=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """``{"seq": ..., "type": ..., **data}`` (the store adds ``ts``)."""
        return {"seq": self.seq, "type": self.type, **self.data}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Record:
        """A record from a log line's object (its ``ts`` kept apart from ``data``)."""
        return cls(
            raw["seq"],
            raw["type"],
            {k: v for k, v in raw.items() if k not in ("seq", "type", "ts")},
            ts=raw.get("ts"),
        )


@attrs.frozen
class SeatInfo:
    """Who holds a seat. ``token_hash`` is None for bots."""

    name: str
    bot: bool
    token_hash: str | None


@attrs.frozen
class UndoPoint:
    """The session's last action, as an undo needs it (kept only for a game with ``undoable``).

    Attributes:
        seq: the ``action`` record's seq.
        seat: who acted.
        action: the action: its structured value, or its wire form as the log holds it (not
            compared: the seq names it).
        timed_out: the host played it for the seat (its turn timer ran out).
        before: the game state before the action.
        events: the events it caused (structured), in order.
    """

    seq: int
    seat: int
    action: Any = attrs.field(eq=False)
    timed_out: bool
    before: Any
    events: tuple[Any, ...]


@attrs.frozen
class UndoAsk:
    """A request to take back an action, waiting for answers.

    Attributes:
        seq: the ``undo_asked`` record's seq.
        seat: who asked.
        action_seq: the seq of the action to take back.
        waiting: the seats whose answer is still awaited (every one must accept).
        action: the action's wire form (not compared).
    """

    seq: int
    seat: int
    action_seq: int
    waiting: tuple[int, ...]
    action: Any = attrs.field(default=None, eq=False)


@functools.lru_cache(maxsize=1024)
def _seed_bytes(text: str) -> bytes:
    """A header's hex seed as bytes (asked for on every action: remembered per seed)."""
    return bytes.fromhex(text)


@attrs.frozen
class SessionState:
    """Everything the host knows of a session, rebuilt by folding its records.

    Attributes:
        header: the header record's data.
        game: the game's state.
        seats: one entry per seat, ``None`` while free.
        seq: the last record's seq.
        started: ``start`` has run.
        ended: the ``ended`` record is written.
        undo_point: the last action and the state before it (None: no action yet, it was
            taken back, or the game has no ``undoable``).
        undo_ask: the request to take back an action that waits for answers, or None.
    """

    header: dict[str, Any]
    game: Any
    seats: tuple[SeatInfo | None, ...]
    seq: int = 0
    started: bool = False
    ended: bool = False
    undo_point: UndoPoint | None = None
    undo_ask: UndoAsk | None = None

    @property
    def seed(self) -> bytes:
        return _seed_bytes(self.header["seed"])

    @property
    def free_seats(self) -> list[Seat]:
        return [i for i, s in enumerate(self.seats) if s is None]


def same_json(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same JSON value: Python's ``==`` with JSON's types, so
    ``true`` is not ``1`` and ``1.0`` is not ``1`` (a tuple and a list are both an array)."""
    ta, tb = type(a), type(b)
    if ta is not tb:
        if ta in _ARRAYS and tb in _ARRAYS:
            return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
        return False
    if ta is dict:
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    if ta in _ARRAYS:
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return a == b


_ARRAYS = (list, tuple)


def _same_text(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` encode to the same JSON text (orjson, keys in their order): then
    a log holding one holds the other, byte for byte, and for JSON's values they are the same
    (:func:`same_json`: ``true`` and ``1``, ``1.0`` and ``1`` encode apart; only a float that is
    no JSON number, NaN or infinity, is written as ``null`` like None). False tells nothing (keys
    in another order, or a value orjson cannot write): ask :func:`same_json`. A few C calls
    where :func:`same_json` walks every value."""
    try:
        return orjson.dumps(a) == orjson.dumps(b)
    except orjson.JSONEncodeError:
        return False


class Engine:
    """Drives one game through the record model above.

    Args:
        game: the game.
        codec: its codec (made if omitted).
    """

    def __init__(self, game: Game, codec: GameCodec | None = None) -> None:
        self.game = game
        self.codec = codec or GameCodec(game)
        self._event_types = frozenset(game.info.event_types)
        self._action_types = frozenset(game.info.action_types)
        self._known_good: set[tuple[Any, bytes]] = set()  # see _checked_wire
        self._undoable: Callable[..., Any] | None = getattr(game, "undoable", None)

    def _fault(self, seq: int, what: str, exc: BaseException | None = None) -> GameFault:
        """A :class:`GameFault` naming the game, the seq and what failed (raise it ``from exc``)."""
        text = f"game {self.game.info.id!r} at seq {seq}: {what}"
        if exc is not None:
            game_error(exc)  # the budget's interruption goes on up: not a fault of this kind
            text += f" raised {type(exc).__name__}: {exc}"
        return GameFault(text, seq)

    def _checked_wire(self, obj: Any, seq: int, kind: str) -> dict[str, Any]:
        """:meth:`_checked_wire_text`'s wire form alone."""
        return self._checked_wire_text(obj, seq, kind)[0]

    def _checked_wire_text(self, obj: Any, seq: int, kind: str) -> tuple[dict[str, Any], bytes]:
        """The wire form of an action or event (``kind``) the game produced, and its JSON text
        (``orjson.dumps`` of the wire form, no options), after checking that
        its class is registered and that it reads back equal to itself through JSON and the
        codec (what replay and :meth:`verify` do with it).

        A value once checked is remembered with its JSON text: an equal value with the same
        text reads back the same, so it is not structured again. (Equality alone would not do:
        ``Kept(True) == Kept(1)``, but ``true`` is no integer to the codec.)

        Raises:
            GameFault: naming the type and what failed.
        """
        is_event = kind == "event"
        cls = type(obj)
        if cls not in (self._event_types if is_event else self._action_types):
            raise self._fault(
                seq, f"the {kind} {cls.__qualname__!r} is not one the game registered ({obj!r})"
            )
        codec = self.codec
        try:
            wire = codec.event_to_wire(obj) if is_event else codec.action_to_wire(obj)
            text = kept(orjson.dumps(wire))  # kept: in a table's tail and the checked set
        except BaseException as exc:
            raise self._fault(seq, f"writing the {kind} {tag_of(cls)!r} ({obj!r})", exc) from exc
        key: tuple[Any, bytes] | None = (obj, text)
        try:
            if key in self._known_good:
                return wire, text
        except BaseException as exc:  # noqa: BLE001 - unhashable (or odd) values are checked every time
            game_error(exc)
            key = None
        try:
            data = orjson.loads(text)
            back = codec.event_from_wire(data) if is_event else codec.action_from_wire(data)
            same = back == obj
        except BaseException as exc:
            raise self._fault(
                seq, f"reading back the {kind} {tag_of(cls)!r} ({obj!r})", exc
            ) from exc
        if not same:
            raise self._fault(
                seq,
                f"the {kind} {tag_of(cls)!r} reads back from its wire form as {back!r},"
                f" not as {obj!r}",
            )
        if key is not None and len(text) <= KNOWN_GOOD_BYTES:
            if len(self._known_good) >= KNOWN_GOOD_MAX:
                self._known_good.clear()
            self._known_good.add(key)
        return wire, text

    # -- building records ----------------------------------------------------------------------
    def header(
        self, session: str, options: Any, seats: int, bots: Iterable[Seat], seed: bytes
    ) -> Record:
        """The seq-0 record of a new session (``options`` already validated)."""
        info = self.game.info
        return Record(
            0,
            "header",
            {
                "format": LOG_FORMAT,
                "host_version": __version__,
                "session": session,
                "game": info.id,
                "game_version": info.version,
                "event_version": info.event_version,
                "options": self.codec.options_to_wire(options),
                "seats": seats,
                "bots": sorted(bots),
                "seed": seed.hex(),
                "seed_commitment": seed_commitment(seed),
            },
        )

    def initial(self, header: Record | dict[str, Any]) -> SessionState:
        """The state right after the header.

        Raises:
            BadRecord: (seq 0) the header lacks a field, its options do not fit the game, or the
                game's ``initial_state`` raised.
        """
        data = header.data if isinstance(header, Record) else header
        try:
            options = self.codec.conv.structure(data["options"], self.game.info.options)
            n = data["seats"]
            if type(n) is not int or n < 1:
                raise ValueError(f"seats must be a positive integer, not {n!r}")
            game = self.game.initial_state(options, n)
            return SessionState(data, game, (None,) * n)
        except BaseException as exc:
            game_error(exc)
            raise BadRecord(0, f"a header this game cannot start from: {exc!r}") from exc

    def options(self, state: SessionState) -> Any:
        """The session's options instance."""
        return self.codec.conv.structure(state.header["options"], self.game.info.options)

    # -- folding -------------------------------------------------------------------------------
    def apply(self, state: SessionState, rec: Record) -> SessionState:
        """Fold one record into the state.

        Raises:
            BadRecord: with ``seq`` = ``state.seq + 1``: the record's seq is not that, its type
                is unknown, it follows the ``ended`` record, it lacks a field, names a seat
                that does not exist or is taken, holds an event the game cannot read, or the
                game's ``evolve`` raised on it (the cause is chained).
        """
        return self.apply_all(state, (rec,))

    def apply_all(self, state: SessionState, records: Iterable[Record]) -> SessionState:
        """Fold several records (each as :meth:`apply` does, each event exactly once).

        The session state is built once at the end, not once per record; an event record that
        carries its structured event (``obj``) is not structured again from its wire form.

        Raises:
            BadRecord: the first record that does not fold (see :meth:`apply`); nothing of the
                records before it is returned.
        """
        header, game, seats = state.header, state.game, state.seats
        seq, started, ended = state.seq, state.started, state.ended
        point, ask = state.undo_point, state.undo_ask
        keep = self._undoable is not None
        # the last action's undo point while its events are folded: [seq, seat, action,
        # timed_out, state before, [events]] (made an UndoPoint once they are)
        building: list[Any] | None = None
        evolve = self.game.evolve
        read = self.codec.event_from_wire
        folded = False
        for rec in records:
            folded = True
            seq += 1
            if rec.seq != seq:
                raise BadRecord(seq, f"a record with seq {rec.seq!r} where {seq} should follow")
            if ended:
                raise BadRecord(seq, f"a {rec.type!r} record after the session ended")
            kind = rec.type
            if kind == "event":
                event = rec.obj
                if event is None:
                    try:
                        event = read(rec.data["event"], rec.data.get("v"))
                    except (KeyError, TypeError, ValueError) as exc:
                        raise BadRecord(seq, f"an event the game cannot read: {exc}") from exc
                try:
                    game = evolve(game, event)
                except BaseException as exc:
                    game_error(exc)
                    raise BadRecord(
                        seq, f"the game's evolve raised {type(exc).__name__} on it: {exc}"
                    ) from exc
                started = True
                if building is not None:
                    building[5].append(event)
                elif point is not None:  # the action's events go on past a fold's boundary
                    building = [*attrs.astuple(point, recurse=False)[:5], [*point.events, event]]
                    point = None
            elif kind == "action":
                d = rec.data
                ask = None  # an action ends any request (the host appends undo_refused first)
                point = None
                if keep:
                    action = rec.obj if rec.obj is not None else d.get("action")
                    building = [seq, d.get("seat"), action, bool(d.get("timed_out")), game, []]
            elif kind == "seat_taken":
                seats = self._seat_taken(seats, seq, rec.data)
                building = point = None
            elif kind in PRESENCE:
                self._check_presence(seats, seq, rec)
            elif kind in UNDO_RECORDS:
                if building is not None:
                    point, building = UndoPoint(*building[:5], tuple(building[5])), None
                game, point, ask = self._fold_undo(rec, seq, game, point, ask)
            elif kind == "ended":
                ended = True
            elif kind != "action":
                raise BadRecord(seq, f"unknown record type {kind!r}")
        if not folded:
            return state
        if building is not None:
            point = UndoPoint(*building[:5], tuple(building[5]))
        return SessionState(header, game, seats, seq, started, ended, point, ask)

    @staticmethod
    def _fold_undo(
        rec: Record, seq: int, game: Any, point: UndoPoint | None, ask: UndoAsk | None
    ) -> tuple[Any, UndoPoint | None, UndoAsk | None]:
        """The game state, the undo point and the request after an undo record at ``seq``.

        Raises:
            BadRecord: the record does not fit: a request while another waits or for no action
                its seat may take back, an answer from a seat not asked, an ``undo`` before
                every answer, a lapse with an unknown reason, a missing field.
        """
        d, kind = rec.data, rec.type
        if kind == "undo_asked":
            waiting = d.get("waiting")
            if ask is not None:
                raise BadRecord(seq, "an undo_asked record while another request waits")
            if point is None or d.get("action_seq") != point.seq or d.get("seat") != point.seat:
                raise BadRecord(seq, "an undo_asked record for no action its seat may take back")
            if not isinstance(waiting, list) or not all(type(s) is int for s in waiting):
                raise BadRecord(seq, "an undo_asked record without its waiting seats")
            return game, point, UndoAsk(seq, point.seat, point.seq, tuple(waiting), d.get("action"))
        if ask is None:
            raise BadRecord(seq, f"a {kind} record while no request to take back an action waits")
        if d.get("action_seq") != ask.action_seq:
            raise BadRecord(seq, f"a {kind} record for another action than the one asked for")
        if kind == "undo_answered":
            seat, accept = d.get("seat"), d.get("accept")
            if seat not in ask.waiting or type(accept) is not bool:
                raise BadRecord(seq, f"an undo_answered record from seat {seat!r}, not asked")
            if not accept:
                return game, point, None
            left = tuple(s for s in ask.waiting if s != seat)
            return game, point, attrs.evolve(ask, waiting=left)
        if kind == "undo":
            if ask.waiting or point is None or point.seq != ask.action_seq:
                raise BadRecord(seq, "an undo record before every seat asked agreed")
            return point.before, None, None
        if d.get("reason") not in LAPSE_REASONS:
            raise BadRecord(seq, f"an undo_refused record with reason {d.get('reason')!r}")
        return game, point, None

    @staticmethod
    def _seat_taken(
        seats: tuple[SeatInfo | None, ...], seq: int, d: dict[str, Any]
    ) -> tuple[SeatInfo | None, ...]:
        """The seats after a ``seat_taken`` record with data ``d`` at ``seq``.

        Raises:
            BadRecord: a missing field, no such seat, or the seat is taken.
        """
        try:
            seat = d["seat"]
            if type(seat) is not int or not 0 <= seat < len(seats):
                raise ValueError(f"there is no seat {seat!r}")
            if seats[seat] is not None:
                raise ValueError(f"seat {seat} is already taken")
            info = SeatInfo(d["name"], d["bot"], d.get("token_hash"))
        except (KeyError, ValueError) as exc:
            raise BadRecord(seq, f"a bad seat_taken record: {exc!r}") from exc
        return (*seats[:seat], info, *seats[seat + 1 :])

    @staticmethod
    def _check_presence(seats: tuple[SeatInfo | None, ...], seq: int, rec: Record) -> None:
        """Check a ``seat_held`` or ``seat_released`` record against the seats.

        Raises:
            BadRecord: a missing field, no such seat, a free or bot seat, an unknown reason.
        """
        d = rec.data
        seat = d.get("seat")
        if type(seat) is not int or not 0 <= seat < len(seats):
            raise BadRecord(seq, f"a {rec.type} record for no seat ({seat!r})")
        info = seats[seat]
        if info is None or info.bot:
            raise BadRecord(seq, f"a {rec.type} record for seat {seat}, which no player took")
        back = d.get("returned", 0)
        if type(back) is not int or not 0 <= back < seq:
            raise BadRecord(seq, f"a {rec.type} record giving back no resume ({back!r})")
        if rec.type == "seat_held":
            if not isinstance(d.get("holder"), str):
                raise BadRecord(seq, "a seat_held record without its holder")
        elif d.get("reason") not in RELEASE_REASONS:
            raise BadRecord(seq, f"a seat_released record with reason {d.get('reason')!r}")

    def rebuild(self, records: Iterable[Record]) -> SessionState:
        """Fold a whole log (header first).

        Raises:
            BadRecord: an empty log, a first record that is not a header, or a bad record
                (see :meth:`initial`, :meth:`apply`).
        """
        it = iter(records)
        first = next(it, None)
        if first is None or first.type != "header" or first.seq != 0:
            raise BadRecord(0, "a log must start with its header at seq 0")
        return self.apply_all(self.initial(first), it)

    # -- causes --------------------------------------------------------------------------------
    def take_seat(
        self, state: SessionState, seat: Seat, name: str, bot: bool, token_hash: str | None
    ) -> list[Record]:
        """Records for a seat being taken, plus the opening events if it was the last free one.

        The records of :meth:`seat_step`, without the state.

        Raises:
            SeatError: the seat does not exist (:class:`~host.errors.SeatTaken`: it is taken).
            GameFault: the game's ``start`` (or what its events lead to) faulted.
        """
        return self.seat_step(state, seat, name, bot, token_hash)[0]

    def seat_step(
        self,
        state: SessionState,
        seat: Seat,
        name: str,
        bot: bool,
        token_hash: str | None,
        holder: str | None = None,
    ) -> tuple[list[Record], SessionState]:
        """A seat being taken: its records (``seat_taken``, then the opening events and perhaps
        ``ended`` if it was the last free seat) and the state after them, each event folded
        exactly once (the state is what :meth:`apply_all` of the records gives).

        ``holder``: the key of the connection that joined (recorded as the seat's holder).

        Raises:
            SeatError: the seat does not exist (:class:`~host.errors.SeatTaken`, with the free
                seats: it is taken). Both are ``ValueError`` subclasses.
            GameFault: the game's ``start`` (or what its events lead to) faulted.
        """
        if type(seat) is not int or not 0 <= seat < len(state.seats):
            raise SeatError(f"seats are 0..{len(state.seats) - 1}, not {seat!r}")
        if state.seats[seat] is not None:
            raise SeatTaken(f"seat {seat} is not free", free=state.free_seats)
        data = {"seat": seat, "name": name, "bot": bot, "token_hash": token_hash}
        if holder is not None:
            data["holder"] = holder
        rec = Record(state.seq + 1, "seat_taken", data)
        after = self.apply(state, rec)
        if after.free_seats or after.started:
            return [rec], after
        seq = after.seq + 1
        rng = Rng(after.seed, seq)
        try:
            events = self.game.start(after.game, rng)
            if not isinstance(events, Emitter):
                events = list(events)
        except BaseException as exc:
            raise self._fault(seq, "start", exc) from exc
        if not events:
            raise self._fault(seq, "start returned no events")
        out, end = self._events(after, events)
        return [rec, *out], end

    def act(
        self, state: SessionState, seat: Seat, action: Any, timed_out: bool = False
    ) -> list[Record]:
        """Records for an accepted action: the action, its events, ``ended`` if it ended the game.

        The records of :meth:`step`, without the state.

        Args:
            timed_out: the host chose the action for a seat whose turn timer ran out (recorded
                as ``"timed_out": true`` in the action record).

        Raises:
            ActionError: the game refuses it, normally an :class:`IllegalAction` (reason
                ``not_your_turn`` if the seat is not in ``to_act``, ``not_running`` if the
                session is not running).
            GameFault: the game faulted (see the module docstring); nothing is produced.
        """
        return self.step(state, seat, action, timed_out)[0]

    def step(
        self, state: SessionState, seat: Seat, action: Any, timed_out: bool = False
    ) -> tuple[list[Record], SessionState]:
        """An action: its records (the ``action`` record, its events, ``ended`` if it ended the
        game) and the state after them, each event folded exactly once (the state is what
        :meth:`apply_all` of the records gives; the caller need not fold them again).

        Args:
            timed_out: the host chose the action for a seat whose turn timer ran out (recorded
                as ``"timed_out": true`` in the action record).

        Raises:
            ActionError: the game refuses it, normally an :class:`IllegalAction` (reason
                ``not_your_turn`` if the seat is not in ``to_act``, ``not_running`` if the
                session is not running).
            GameFault: the game faulted (see the module docstring); nothing is produced.
        """
        return self._step_at(self._seat_to_act(state, seat), state, seat, action, timed_out)

    def _step_at(
        self,
        seq: int,
        state: SessionState,
        seat: Seat,
        action: Any,
        timed_out: bool,
        wire: dict[str, Any] | None = None,
    ) -> tuple[list[Record], SessionState]:
        """:meth:`step` once :meth:`_seat_to_act` passed (``seq``: the action record's;
        ``wire``: the action's checked wire form when an earlier step made it, see
        :meth:`_replay_cause`)."""
        if wire is None:
            wire = self._checked_wire(action, seq, "action")
        data: dict[str, Any] = {"seat": seat, "action": wire}
        try:
            events = self.game.decide(state.game, seat, action, Rng(state.seed, seq))
            if not isinstance(events, Emitter):
                events = list(events)
        except ActionError:  # IllegalAction or any other refusal: it changes nothing
            raise
        except BaseException as exc:
            raise self._fault(seq, "decide", exc) from exc
        if timed_out:
            data["timed_out"] = True
        rec = Record(seq, "action", data, action)
        point = None
        if self._undoable is not None:
            point = UndoPoint(seq, seat, action, timed_out, state.game, tuple(events))
        out, end = self._events(state, events, seq, point)  # the events follow the action record
        return [rec, *out], end

    def bot_seat(self, state: SessionState) -> Seat | None:
        """The first bot seat that is to act, or ``None`` if no bot is to act.

        Raises:
            GameFault: ``to_act`` raised or named a seat that does not exist.
        """
        if not state.started or state.ended:
            return None
        seq = state.seq + 1
        try:
            seats = tuple(self.game.to_act(state.game))
        except BaseException as exc:
            raise self._fault(seq, "to_act", exc) from exc
        for seat in seats:
            if type(seat) is not int or not 0 <= seat < len(state.seats):
                raise self._fault(seq, f"to_act named {seat!r}, which is not a seat")
            info = state.seats[seat]
            if info is not None and info.bot:
                return seat
        return None

    def bot_move(self, state: SessionState) -> tuple[Seat, Any] | None:
        """The action of the first bot seat that is to act, or ``None`` if no bot is to act.

        Bots use the game's ``bot_action`` when it has one, else a uniformly random legal action,
        drawn from ``Rng(seed, seq, "bot")`` so a session with bots replays the same way.

        Raises:
            GameFault: ``to_act``, ``bot_action`` or ``legal_actions`` faulted.
        """
        seat = self.bot_seat(state)
        return None if seat is None else (seat, self.bot_action(state, seat))

    def _seat_to_act(self, state: SessionState, seat: Seat) -> int:
        """Check that the session runs and ``seat`` is to act; the seq of the cause to come.

        Raises:
            IllegalAction: ``not_running``, or ``not_your_turn``.
            GameFault: the game's ``to_act`` raised.
        """
        if not state.started or state.ended:
            raise IllegalAction("not_running", "the session is not running")
        seq = state.seq + 1
        try:
            waiting = seat in self.game.to_act(state.game)
        except BaseException as exc:
            raise self._fault(seq, "to_act", exc) from exc
        if not waiting:
            raise IllegalAction(NOT_YOUR_TURN, f"seat {seat} is not to act")
        return seq

    def bot_action(self, state: SessionState, seat: Seat) -> Any:
        """What a host bot would do in ``seat`` now (also used when a turn timer runs out).

        Raises:
            GameFault: the game's ``bot_action`` or ``legal_actions`` raised, or listed nothing.
        """
        rng = Rng(state.seed, state.seq, f"bot{seat}")
        chooser = getattr(self.game, "bot_action", None)
        what = "bot_action" if chooser is not None else "legal_actions"
        try:
            if chooser is not None:
                return chooser(state.game, seat, rng)
            return rng.choice(self.game.legal_actions(state.game, seat))
        except BaseException as exc:
            raise self._fault(state.seq + 1, f"{what} for seat {seat}", exc) from exc

    def bot_act(self, state: SessionState, seat: Seat, timed_out: bool = False) -> list[Record]:
        """A host-driven step: the records of the bot's action (:meth:`bot_action`) in ``seat``.

        The records of :meth:`bot_step`, without the state.

        Raises:
            IllegalAction: the caller's mistake, not the game's: the session is not running or
                ``seat`` is not to act (check :meth:`bot_seat` or ``to_act`` first).
            GameFault: the game faulted; nothing is produced.
        """
        return self.bot_step(state, seat, timed_out)[0]

    def bot_step(
        self, state: SessionState, seat: Seat, timed_out: bool = False
    ) -> tuple[list[Record], SessionState]:
        """A host-driven step: the bot's action (:meth:`bot_action`) in ``seat``, as
        :meth:`step` gives it (records and the state after them, each event folded once).

        For bot seats and for seats whose turn timer ran out (``timed_out``, see :meth:`step`).
        Whatever the game does wrong here is a :class:`GameFault`, including ``decide``
        refusing the action the game's own bot or ``legal_actions`` chose.

        Raises:
            IllegalAction: the caller's mistake, not the game's: the session is not running or
                ``seat`` is not to act (check :meth:`bot_seat` or ``to_act`` first).
            GameFault: the game faulted; nothing is produced.
        """
        seq = self._seat_to_act(state, seat)
        action = self.bot_action(state, seat)
        try:
            return self._step_at(seq, state, seat, action, timed_out)
        except ActionError as exc:
            raise self._fault(
                seq, f"decide refused the bot's action {action!r} for seat {seat}", exc
            ) from exc

    # -- undo by consent -----------------------------------------------------------------------
    def undo_refusal(self, state: SessionState, seat: Seat) -> UndoRefused | None:
        """Why ``seat`` may not ask now to take back its last action (None: it may).

        Reasons (:class:`~host.errors.UndoRefused`): ``nothing_to_undo`` (the session is not
        running, no action was taken yet, or the last one was taken back already),
        ``acted_since`` (the session's last action is another seat's: only the last action
        may be taken back), ``timed_out`` (the host played it when the seat's turn timer ran
        out), ``not_undoable`` (the game says it revealed something hidden or random, or the
        game takes nothing back) and ``pending`` (a request waits for answers already).

        Raises:
            GameFault: the game's ``undoable`` raised.
        """
        if self._undoable is None:
            return UndoRefused("not_undoable", f"{self.game.info.title} takes no action back")
        if not state.started or state.ended:
            return UndoRefused("nothing_to_undo", "the session is not running")
        ask = state.undo_ask
        if ask is not None:
            return UndoRefused(
                "pending",
                f"seat {ask.seat}'s request to take back seq {ask.action_seq} waits for answers",
            )
        point = state.undo_point
        if point is None:
            return UndoRefused(
                "nothing_to_undo", "no action to take back (none yet, or it was taken back)"
            )
        if point.seat != seat:
            return UndoRefused(
                "acted_since",
                f"the last action is seat {point.seat}'s (seq {point.seq}): only the session's"
                " last action may be taken back, by the seat that took it",
            )
        if point.timed_out:
            return UndoRefused(
                "timed_out", "the host played that action when this seat's turn timer ran out"
            )
        action = self._point_action(point)
        try:
            allowed = self._undoable(point.before, seat, action, list(point.events))
        except Exception as exc:
            raise self._fault(state.seq + 1, "undoable", exc) from exc
        if not allowed:
            return UndoRefused(
                "not_undoable",
                "that action revealed something hidden or random (a card drawn, dealt or"
                " turned): it cannot be taken back",
            )
        return None

    def _point_action(self, point: UndoPoint) -> Any:
        """The undo point's action, structured (decoded from its wire form if need be)."""
        if type(point.action) in self._action_types:
            return point.action
        return self.codec.action_from_wire(point.action)

    def _point_wire(self, point: UndoPoint) -> Any:
        """The undo point's action in wire form."""
        if type(point.action) in self._action_types:
            return self.codec.action_to_wire(point.action)
        return point.action

    def ask_undo(self, state: SessionState, seat: Seat) -> tuple[list[Record], SessionState]:
        """``seat`` asks to take back its last action: the ``undo_asked`` record (naming the
        other human seats as ``waiting``; host bots agree at once, so they are not asked) and,
        when nobody is to be asked, the ``undo`` record; and the state after them.

        Raises:
            UndoRefused: see :meth:`undo_refusal`.
            GameFault: the game's ``undoable`` raised.
        """
        refused = self.undo_refusal(state, seat)
        if refused is not None:
            raise refused
        point = state.undo_point
        assert point is not None
        wire = self._point_wire(point)
        seats = state.seats
        waiting = [s for s, x in enumerate(seats) if s != seat and x is not None and not x.bot]
        data = {"seat": seat, "action_seq": point.seq, "action": wire, "waiting": waiting}
        records = [Record(state.seq + 1, "undo_asked", data)]
        if not waiting:
            done = {"seat": seat, "action_seq": point.seq, "action": wire}
            records.append(Record(state.seq + 2, "undo", done))
        return records, self.apply_all(state, records)

    def answer_undo(
        self, state: SessionState, seat: Seat, accept: bool
    ) -> tuple[list[Record], SessionState]:
        """``seat`` answers the request waiting for it: the ``undo_answered`` record (a refusal
        ends the request), followed by ``undo`` when it was the last agreement awaited; and the
        state after them.

        Raises:
            UndoRefused: ``no_request`` (none waits) or ``not_asked`` (this seat asked, has
                answered already, or is not one the request waits for).
        """
        ask = state.undo_ask
        if ask is None or state.ended:
            raise UndoRefused("no_request", "no request to take back an action waits for answers")
        if seat not in ask.waiting:
            why = "this seat asked it" if seat == ask.seat else "it does not wait for this seat"
            raise UndoRefused("not_asked", f"that request is not this seat's to answer: {why}")
        data = {"seat": seat, "action_seq": ask.action_seq, "accept": bool(accept)}
        records = [Record(state.seq + 1, "undo_answered", data)]
        if accept and ask.waiting == (seat,):
            done = {"seat": ask.seat, "action_seq": ask.action_seq, "action": ask.action}
            records.append(Record(state.seq + 2, "undo", done))
        return records, self.apply_all(state, records)

    def lapse_undo(self, state: SessionState, reason: str) -> tuple[list[Record], SessionState]:
        """The ``undo_refused`` record that ends the waiting request (``reason``: ``expired``,
        nobody answered in time; ``acted``, an action is appended right after it) and the state
        after it; none when no request waits.

        Raises:
            ValueError: ``reason`` is not one of :data:`LAPSE_REASONS`.
        """
        if reason not in LAPSE_REASONS:
            raise ValueError(f"an undo request lapses as {sorted(LAPSE_REASONS)}, not {reason!r}")
        ask = state.undo_ask
        if ask is None:
            return [], state
        data = {"seat": ask.seat, "action_seq": ask.action_seq, "reason": reason}
        records = [Record(state.seq + 1, "undo_refused", data)]
        return records, self.apply_all(state, records)

    # -- what viewers see ----------------------------------------------------------------------
    def to_act(self, state: SessionState) -> tuple[Seat, ...]:
        """The seats whose input is awaited (``()`` unless the session is running).

        Raises:
            GameFault: ``to_act`` raised.
        """
        if not state.started or state.ended:
            return ()
        try:
            return tuple(self.game.to_act(state.game))
        except BaseException as exc:
            raise self._fault(state.seq, "to_act", exc) from exc

    def view_wire(self, state: SessionState, viewer: Viewer) -> Any:
        """The game's view of the state for ``viewer``, as JSON-able data (checked: it encodes
        as JSON, in at most :data:`MAX_VIEW_BYTES`).

        Raises:
            GameFault: ``view`` raised, returned what the codec or JSON cannot write, or a view
                larger than :data:`MAX_VIEW_BYTES` encoded.
        """
        try:
            wire = self.codec.to_wire(self.game.view(state.game, viewer))
            size = len(orjson.dumps(wire))
        except BaseException as exc:
            raise self._fault(state.seq, f"view for viewer {viewer!r}", exc) from exc
        if size > MAX_VIEW_BYTES:
            raise self._fault(
                state.seq,
                f"view for viewer {viewer!r} is {size:,} bytes as JSON (at most"
                f" {MAX_VIEW_BYTES:,})",
            )
        return wire

    def redact(self, rec: Record, event: Any, viewer: Viewer) -> Any:
        """The game's ``redact`` of ``event`` (the event of ``rec``) for ``viewer``, guarded.

        Raises:
            GameFault: ``redact`` raised.
        """
        try:
            return self.game.redact(event, viewer)
        except BaseException as exc:
            raise self._fault(rec.seq, f"redact for viewer {viewer!r}", exc) from exc

    def event_wire(self, rec: Record, event: Any) -> dict[str, Any]:
        """The wire form of ``event`` (``rec``'s, or a redaction of it), guarded.

        Raises:
            GameFault: the codec cannot write what the game's ``redact`` returned.
        """
        try:
            return self.codec.event_to_wire(event)
        except BaseException as exc:
            raise self._fault(rec.seq, f"writing the redacted event {event!r}", exc) from exc

    def redacted_wire(self, rec: Record, viewer: Viewer) -> dict[str, Any]:
        """What ``viewer`` may see of an ``event`` record: the redacted event's wire form.

        Raises:
            GameFault: ``redact`` raised or returned what the codec cannot write.
            BadRecord: the record holds an event the game cannot read.
        """
        event = rec.obj
        if event is None:
            try:
                event = self.codec.event_from_wire(rec.data["event"], rec.data.get("v"))
            except (KeyError, TypeError, ValueError) as exc:
                raise BadRecord(rec.seq, f"an event the game cannot read: {exc}") from exc
        try:
            return self.codec.event_to_wire(self.game.redact(event, viewer))
        except BaseException as exc:
            raise self._fault(rec.seq, f"redact for viewer {viewer!r}", exc) from exc

    def _events(
        self,
        state: SessionState,
        events: list[Any],
        seq: int | None = None,
        point: UndoPoint | None = None,
    ) -> tuple[list[Record], SessionState]:
        """The records of a cause's events (``state`` is the state before the first; ``seq``,
        if given, the seq of the record before them instead of ``state.seq``), checked, with
        ``ended`` after the first event that yields an outcome, and the state after them
        (whose undo point is ``point``: the action's, or None for the opening events).

        Each event is folded exactly once: by the game's :class:`Emitter` inside ``start`` or
        ``decide`` when ``events`` is one that folded them from ``state`` with the game's
        ``evolve``, else here.

        Raises:
            GameFault: a bad event, ``evolve``/``outcome``/``to_act`` raised, an outcome that is
                not JSON, or no seat to act while the game has no outcome.
        """
        game = self.game
        if seq is None:
            seq = state.seq
        states = None
        if isinstance(events, Emitter):
            try:
                states = events.folded_states(state.game, game.evolve)
            except BaseException as exc:  # noqa: BLE001 - an odd evolve to compare with: fold here instead
                game_error(exc)
                states = None
        out = []
        v = game.info.event_version
        game_state = state.game
        for i, ev in enumerate(events):
            seq += 1
            wire, text = self._checked_wire_text(ev, seq, "event")
            out.append(Record(seq, "event", {"v": v, "event": wire}, ev, orjson.Fragment(text)))
            if states is not None:
                game_state = states[i]
            else:
                try:
                    game_state = game.evolve(game_state, ev)
                except BaseException as exc:
                    raise self._fault(seq, f"evolve on {wire['type']!r}", exc) from exc
            try:
                outcome = game.outcome(game_state)
            except BaseException as exc:
                raise self._fault(seq, f"outcome after {wire['type']!r}", exc) from exc
            if outcome is not None:
                try:
                    result = self.codec.to_wire(outcome)
                    orjson.dumps(result)
                except BaseException as exc:
                    raise self._fault(seq, "the outcome is not JSON:", exc) from exc
                seq += 1
                out.append(Record(seq, "ended", {"outcome": result, "seed": state.header["seed"]}))
                end = SessionState(state.header, game_state, state.seats, seq, True, True, point)
                return out, end
        try:
            waiting = tuple(game.to_act(game_state))
        except BaseException as exc:
            raise self._fault(seq, "to_act", exc) from exc
        if not waiting:
            raise self._fault(seq, "no seat is to act and the game has no outcome (stalled)")
        return out, SessionState(state.header, game_state, state.seats, seq, True, False, point)

    def abort(self, state: SessionState, reason: str, fault: str | None = None) -> list[Record]:
        """The ``ended`` record that stops a session the game did not end (a host limit).

        Its ``outcome`` is ``None`` and ``aborted`` says why; ``fault`` (for ``game_error``:
        ``time``, ``memory`` or ``thread`` when the game ran past its budget, see
        :mod:`host.plugins.budget`, ``crash`` or ``hang`` when it took the host down, see
        ``host.net.marker``, ``error`` for any other fault) is recorded when given.
        """
        data: dict[str, Any] = {"outcome": None, "aborted": reason, "seed": state.header["seed"]}
        if fault is not None:
            data["fault"] = fault
        return [Record(state.seq + 1, "ended", data)]

    def abort_step(
        self, state: SessionState, reason: str, fault: str | None = None
    ) -> tuple[list[Record], SessionState]:
        """:meth:`abort`'s record and the state after it."""
        records = self.abort(state, reason, fault)
        return records, self.apply_all(state, records)

    def complete_prefix(self, records: list[Record]) -> int:
        """How many leading records form whole causes (a crash can leave the last append half
        written: an action without all its events). Appends are acknowledged only once whole,
        so the records past this count were never acknowledged to anyone.

        The count of :meth:`load`, without the state.

        Raises:
            BadRecord: the log does not fold (see :meth:`rebuild`).
        """
        return self.load(records)[0]

    def load(self, records: list[Record]) -> tuple[int, SessionState]:
        """:meth:`complete_prefix` and :meth:`rebuild` of those records, in one pass: how many
        leading records form whole causes, and the state they fold to. Each record is folded
        once; the last cause is re-run once on the current code to count the records it makes
        (only when the header's ``game_version`` is the installed game's: a log written by
        another version is kept whole).

        Raises:
            BadRecord: the log does not fold (see :meth:`rebuild`).
        """
        whole, state, _ = self.load_tail(records, 0)
        return whole, state

    def load_tail(
        self, records: list[Record], window: int, most: int | None = None
    ) -> tuple[int, SessionState, list[SessionState]]:
        """:meth:`load`, also giving the state after each cause that ends within the last
        ``window`` records *of play* (presence records between them do not count; at most
        ``most`` records back), and the one before them, oldest first: what the freshness rule
        needs to judge an ``act`` naming an older seq. Still one fold of each record.

        Returns:
            ``(whole, state, states)``: the count of leading records that form whole causes,
            the state they fold to (``states[-1]``), and the states after causes.

        Raises:
            BadRecord: the log does not fold (see :meth:`rebuild`).
        """
        state = self.rebuild(records[:1])
        n = len(records)
        starts: list[int] = []  # cause starts of the window (and the last cause), newest first
        played = 0  # records of play from i on
        for i in range(n - 1, 0, -1):
            kind = records[i].type
            if kind not in PRESENCE:
                played += 1
            if kind in CAUSES:
                starts.append(i)
                if played > window or (most is not None and n - i >= most):
                    break
        starts.reverse()
        if not starts:
            state = self.apply_all(state, records[1:])
            return n, state, [state]
        state = self.apply_all(state, records[1 : starts[0]])
        states = [state]
        for a, b in zip(starts, starts[1:], strict=False):
            state = self.apply_all(state, records[a:b])
            states.append(state)
        last_cause = starts[-1]
        before = state
        after = self.apply_all(before, records[last_cause:])  # the rest must fold too
        whole = n
        if records[last_cause].type not in PRESENCE and (
            records[0].data.get("game_version") == self.game.info.version
        ):  # another version's count of a cause's records is not ours to judge: kept whole
            rec = records[last_cause]
            d = rec.data
            try:
                if rec.type == "seat_taken":
                    want = self.seat_step(
                        before,
                        d["seat"],
                        d["name"],
                        d["bot"],
                        d.get("token_hash"),
                        d.get("holder"),
                    )[0]
                elif rec.type in UNDO_CAUSES:
                    want = self._undo_cause(before, rec)[0]
                else:
                    action = self.codec.action_from_wire(d["action"])
                    want = self.act(before, d["seat"], action, d.get("timed_out", False))
            except (ActionError, UndoRefused, ValueError, GameFault, KeyError):
                want = []  # not for this check to judge: verify reports it
            if n - last_cause < len(want):
                whole = last_cause
        if whole == n:
            states.append(after)
            return n, after, states
        return whole, before, states

    # -- replay checking -----------------------------------------------------------------------
    def verify(
        self, records: Iterable[Record], progress: Callable[[int], None] | None = None
    ) -> tuple[int, str] | None:
        """Re-run every cause in a log on the current code (:meth:`verify_steps` run through).
        ``records``: the log's records in order, a list or any iterable (each record is looked
        at once, in order, and not kept: a log read a record at a time is checked in the memory
        of one cause); ``progress`` (if given) is called with the number of records checked so
        far every :data:`VERIFY_STEP` records or so.

        A recorded event is compared with the produced one as the current code reads it: one
        written under another event schema version (its ``v`` is not ``event_version``) is
        first upcast by the game's ``upcast`` (see :meth:`_compare`), so a log that spans a
        schema bump verifies; the ``v`` itself is no difference. Records equal as they are
        (the common case) are taken without any decoding.

        Never raises on a bad log: a record the code cannot read, fold or re-produce (an
        unregistered or undecodable event, an upcast that fails, a game that faults on replay)
        is reported like a difference.

        Returns:
            ``None`` if every recorded event is what the current code produces, else
            ``(seq, explanation)`` for the first record that differs.
        """
        steps = self.verify_steps(records, progress)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]

    def verify_steps(
        self, records: Iterable[Record], progress: Callable[[int], None] | None = None
    ) -> Generator[None, None, tuple[int, str] | None]:
        """:meth:`verify` one cause at a time: the generator yields after each cause and
        returns verify's result, so its caller can bound each stretch of game code (a budget
        step, ``host.plugins.budget``) and let others run between two. A step the budget
        interrupts (:class:`~host.plugins.budget.BudgetExceeded` raised inside the game's
        code) is reported as the game's fault at that cause, like any other."""
        log = iter(records)
        header = next(log, None)
        if header is None or header.type != "header":
            return (0, "the log does not start with a header")
        at = 0
        actions: dict[tuple[Any, ...], Any] = {}  # decoded actions, see _recorded_action
        wires: dict[int, tuple[Any, dict[str, Any]]] = {}  # their wire forms, see _replay_cause
        try:
            state = self.initial(header)
            i = 1
            mark = VERIFY_STEP if progress is not None else _NEVER
            rec = next(log, None)
            while rec is not None:
                if i >= mark:
                    progress(i)  # type: ignore[misc]
                    mark = i + VERIFY_STEP
                at = rec.seq
                diff, produced, after = self._replay_cause(state, rec, actions, wires)
                if diff is not None:
                    return diff
                got = rec  # the cause's own record is the first one it produces
                for j, want in enumerate(produced):
                    if j:
                        got = next(log, None)
                        if got is None:
                            return (
                                want.seq,
                                f"the log ends here but the code produces {want.to_json()}",
                            )
                    if (
                        got.seq == want.seq
                        and got.type == want.type
                        and (_same_text(got.data, want.data) or same_json(got.data, want.data))
                    ):
                        continue  # equal as they are (the common case): no JSON round trip
                    diff = self._compare(got, want)
                    if diff is not None:
                        return diff
                # the recorded records equal the produced ones (an older event once upcast),
                # whose events read back equal to themselves: the state they fold to is the
                # one the cause produced
                state = after
                i += len(produced)
                rec = next(log, None)
                yield
        except BadRecord as exc:
            return (exc.seq, f"the log does not fold: {exc.message}")
        except GameFault as exc:
            return (exc.seq or at, f"the game faults on replay: {exc.message}")
        except BudgetExceeded as exc:
            return (at, f"the game faults on replay: past its {exc.what} budget ({exc.message})")
        except BaseException as exc:  # noqa: BLE001 - a verifier reports, it does not crash
            game_error(exc)
            return (at, f"replay failed: {type(exc).__name__}: {exc}")
        return None

    def _compare(self, got: Record, want: Record) -> tuple[int, str] | None:
        """:meth:`verify`'s comparison of a recorded record ``got`` with the record ``want`` the
        current code produces for it, once they are not equal as they are: ``None`` if they are
        the same record, else ``(seq, explanation)``.

        Both are compared as JSON (a produced tuple is a list, as the log holds it). An event
        recorded under another event schema version (its ``v`` is not the game's
        ``event_version``) is first read as the current code reads it, by the codec with the
        game's ``upcast``, and compared in its current wire form: the version it was written
        under is no difference, what it says is. One the current code cannot read is a
        difference (never an exception: the game's ``upcast`` is third-party code).
        """
        want_data = orjson.loads(orjson.dumps(want.data))
        got_data = got.data
        note = ""
        version = got_data.get("v") if got.type == "event" else None
        if version is not None and version != self.game.info.event_version:
            try:
                event = self.codec.event_from_wire(got_data["event"], version)
                upcast = orjson.loads(orjson.dumps(self.codec.event_to_wire(event)))
            except BaseException as exc:  # noqa: BLE001 - the game's upcast may raise anything
                game_error(exc)
                return (
                    got.seq,
                    f"recorded {got.to_json()}, which the code cannot read as an event of"
                    f" schema v{version} ({type(exc).__name__}: {exc}); the code produces"
                    f" {want.to_json()}",
                )
            got_data = {**got_data, "v": self.game.info.event_version, "event": upcast}
            note = f" (v{version}, read as {upcast})"
        if (got.seq, got.type) != (want.seq, want.type) or not same_json(got_data, want_data):
            return (
                got.seq,
                f"recorded {got.to_json()}{note} but the code produces {want.to_json()}",
            )
        return None

    def _recorded_action(self, wire: Any, seen: dict[tuple[Any, ...], Any]) -> Any:
        """A recorded action's structured value, by the codec (as a client's action is).

        An action object of scalars only (``{"type": "play", "card": "7H"}``) is decoded once
        per :meth:`verify` and remembered in ``seen`` by its keys, values and their types (so
        ``true`` is never taken for ``1``); the same object decodes to an equal, immutable
        value every time, so replay need not structure it again.

        Raises:
            BadAction (a ``ValueError``): see :meth:`GameCodec.action_from_wire`.
        """
        key: tuple[Any, ...] | None = None
        if type(wire) is dict:
            key = ()
            for k, v in wire.items():
                if type(v) not in _SCALARS:
                    key = None
                    break
                key += (k, type(v), v)
        if key is None:
            return self.codec.action_from_wire(wire)
        action = seen.get(key)
        if action is None:
            action = seen[key] = self.codec.action_from_wire(wire)
        return action

    def _replay_cause(
        self,
        state: SessionState,
        rec: Record,
        actions: dict[tuple[Any, ...], Any] | None = None,
        wires: dict[int, tuple[Any, dict[str, Any]]] | None = None,
    ) -> tuple[tuple[int, str] | None, list[Record], SessionState]:
        """What the current code produces for the cause ``rec`` records and the state after
        it, or why it refuses (``actions``: see :meth:`_recorded_action`).

        ``wires`` (with ``actions``): the wire form the code gave each decoded action, by the
        action's ``id`` with the action itself (which keeps that id its own), so that an action
        replayed again is not encoded and checked again: the same object encodes the same way.
        At most :data:`KNOWN_GOOD_MAX` are remembered."""
        d = rec.data
        if rec.type in PRESENCE:  # a presence record is its own cause: it must fold
            return None, [rec], self.apply(state, rec)
        if rec.type == "seat_taken":
            try:
                return None, *self.seat_step(
                    state, d["seat"], d["name"], d["bot"], d.get("token_hash"), d.get("holder")
                )
            except (KeyError, ValueError) as exc:
                return (rec.seq, f"seat_taken refused on replay: {exc}"), [], state
        if rec.type == "action":
            try:
                if actions is None:
                    action = self.codec.action_from_wire(d["action"])
                else:
                    action = self._recorded_action(d["action"], actions)
                known = wires.get(id(action)) if wires is not None else None
                wire = known[1] if known is not None and known[0] is action else None
                seat = d["seat"]
                records, after = self._step_at(
                    self._seat_to_act(state, seat),
                    state,
                    seat,
                    action,
                    d.get("timed_out", False),
                    wire,
                )
                if wires is not None and wire is None and len(wires) < KNOWN_GOOD_MAX:
                    wires[id(action)] = (action, records[0].data["action"])
                return None, records, after
            except (KeyError, ActionError, ValueError) as exc:
                return (rec.seq, f"action refused on replay: {exc}"), [], state
        if rec.type == "ended" and "aborted" in d:
            return None, *self.abort_step(state, d["aborted"], d.get("fault"))
        if rec.type in UNDO_CAUSES:
            try:
                return None, *self._undo_cause(state, rec)
            except (KeyError, UndoRefused, ValueError) as exc:
                return (rec.seq, f"{rec.type} refused on replay: {exc}"), [], state
        return (rec.seq, f"a {rec.type!r} record that no cause produced"), [], state

    def _undo_cause(self, state: SessionState, rec: Record) -> tuple[list[Record], SessionState]:
        """What the current code produces for the undo cause ``rec`` begins, and the state.

        Raises:
            KeyError: a field is missing. UndoRefused, ValueError: the code refuses it.
            GameFault: the game's ``undoable`` raised.
        """
        d = rec.data
        if rec.type == "undo_asked":
            return self.ask_undo(state, d["seat"])
        if rec.type == "undo_answered":
            if type(d["accept"]) is not bool:
                raise ValueError(f"accept must be true or false, not {d['accept']!r}")
            return self.answer_undo(state, d["seat"], d["accept"])
        if state.undo_ask is None:
            raise ValueError("an undo_refused record while no request waits")
        return self.lapse_undo(state, d["reason"])
