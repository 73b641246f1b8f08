"""Loading a session's log for its table, a stretch at a time: :func:`load_steps`.

What a table needs of a whole log (:class:`Loaded`) is what :meth:`Engine.load_tail` gives — the
count of leading records that form whole causes (a crash can leave the last append half
written), the state they fold to, the states of the freshness window — plus who holds each seat
and the timers' starts (:class:`host.table.core.Presence`) and the last records (the table's
tail). :func:`load_steps` makes it from the records streamed in order, folding each cause once,
keeping nothing of the log but the window's states and the last records, and yielding after
each stretch of :data:`STRETCH` records, so its caller can bound each stretch of game code (a
budget step) and let others run between two — the host on its event loop for a short log, a
heavy-work process for a long one (``host.net.heavy``).

``skim``: the game's code is not run at all (a session whose game faulted): the state holds the
seats, seq, started and ended as the log's own records say, and no game state (``None``).

Pure: no I/O, no trio.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator, Iterable

import attrs

from host.errors import ActionError, UndoRefused
from host.plugins.faults import GameFault
from host.table.core import TAIL_MAX, Presence
from host.table.engine import (
    CAUSES,
    PRESENCE,
    UNDO_CAUSES,
    UNDO_RECORDS,
    BadRecord,
    Engine,
    Record,
    SessionState,
)

__all__ = ["STRETCH", "Loaded", "load_steps", "skim_all"]

STRETCH = 100
"""Records folded between two yields of :func:`load_steps`."""


@attrs.frozen
class Loaded:
    """A log as a table loads it.

    Attributes:
        whole: how many leading records form whole causes (the rest, never acknowledged, is
            to be cut from the log).
        state: the state after them.
        states: the state after each cause of the freshness window (and the one before
            them), oldest first, as :meth:`Engine.load_tail` gives them.
        tail: the last :data:`host.table.core.TAIL_MAX` whole records, oldest first (the
            table keeps what its freshness window needs of them).
        presence: seat holders, timed-out counts and timer starts over the whole records.
    """

    whole: int
    state: SessionState
    states: list[SessionState]
    tail: list[Record]
    presence: Presence


def skim_all(engine: Engine, state: SessionState, records: Iterable[Record]) -> SessionState:
    """Fold records without running any game code: seats, seq, started and ended as the
    log's own records say them; the game state is left as it is (``None`` from a skimmed
    header).

    Raises:
        BadRecord: a record out of order, after the end, a bad seat or presence record.
    """
    seats, seq, started, ended = state.seats, state.seq, state.started, state.ended
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
            started = True
        elif kind == "seat_taken":
            seats = engine._seat_taken(seats, seq, rec.data)
        elif kind in PRESENCE:
            engine._check_presence(seats, seq, rec)
        elif kind == "ended":
            ended = True
        elif kind != "action" and kind not in UNDO_RECORDS:  # undo records change no seat
            raise BadRecord(seq, f"unknown record type {kind!r}")
    if not folded:
        return state
    return SessionState(state.header, state.game, seats, seq, started, ended)


def _skimmed_header(header: Record) -> SessionState:
    seats = header.data.get("seats")
    if type(seats) is not int or seats < 1:
        raise BadRecord(0, f"a header whose seats are {seats!r}")
    return SessionState(header.data, None, (None,) * seats)


def load_steps(
    engine: Engine,
    records: Iterable[Record],
    last: int,
    window: int,
    *,
    recheck: bool = True,
    skim: bool = False,
) -> Generator[int, None, Loaded]:
    """Load a whole log (header first; ``last`` is the seq of its last record): yields the
    seq folded so far after every stretch, returns the :class:`Loaded`. The window's states
    are those :meth:`Engine.load_tail` gives for ``window`` records of play (presence records
    between them do not count; at most :data:`host.table.core.TAIL_MAX` records back).

    ``recheck``: re-run the last cause on the current code to find a half-written one, as
    :meth:`Engine.load_tail` does (a log that ends ``ended`` needs none). ``skim``: run no game
    code (see the module docstring).

    Raises:
        BadRecord: the log does not fold (or has no header).
        host.plugins.budget.BudgetExceeded: from the caller's budget, inside the game's code.
    """
    it = iter(records)
    first = next(it, None)
    if first is None or first.type != "header" or first.seq != 0:
        raise BadRecord(0, "a log must start with its header at seq 0")
    state = _skimmed_header(first) if skim else engine.initial(first)
    fold = (lambda s, rs: skim_all(engine, s, rs)) if skim else engine.apply_all
    presence = Presence.of(len(state.seats))
    presence.feed((first,))
    tail: deque[Record] = deque((first,), maxlen=TAIL_MAX)
    threshold = last + 1 - TAIL_MAX  # a cause start this far back is before the window anyway
    played = 0  # records of play (not presence records) after the header, so far
    # the state before each cause start of the window, with the records of play before it
    bounds: deque[tuple[int, SessionState]] = deque()
    cause: list[Record] = []  # the records of the newest cause seen (not folded yet)
    start: Record | None = None  # its first record (None before the first cause)
    done = 0
    yield 0
    while True:
        stretch = [rec for _, rec in zip(range(STRETCH), it, strict=False)]
        if not stretch:
            break
        for rec in stretch:
            if rec.type in CAUSES:  # the cause before it is whole: folded, then this one opens
                if cause:
                    state = fold(state, cause)
                    presence.feed(cause)
                    tail.extend(cause)
                if rec.seq <= threshold:
                    bounds.clear()  # only the newest cause start at or before the window
                bounds.append((played, state))
                cause = [rec]
                start = rec
            else:
                cause.append(rec)
            if rec.type not in PRESENCE:
                played += 1
                # a cause start with more than `window` records of play from it on is at or
                # before the window's start: only the newest such one is kept
                while len(bounds) > 1 and played - bounds[1][0] > window:
                    bounds.popleft()
        done = stretch[-1].seq
        yield done
    if start is None:  # no cause at all: every record folds as one
        state = fold(state, cause)
        presence.feed(cause)
        tail.extend(cause)
        return Loaded(state.seq + 1, state, [state], list(tail), presence)
    before = state
    after = fold(before, cause)  # the last cause must fold too
    whole = after.seq + 1
    if recheck and not skim and not after.ended and _cut_short(engine, first, before, cause):
        whole = start.seq
    states = [s for _, s in bounds]
    if whole == after.seq + 1:
        presence.feed(cause)
        tail.extend(cause)
        return Loaded(whole, after, [*states, after], list(tail), presence)
    return Loaded(whole, before, states, list(tail), presence)


def _cut_short(engine: Engine, header: Record, before: SessionState, cause: list[Record]) -> bool:
    """Whether the last cause (its records as the log holds them) makes more records on the
    current code than the log holds (judged only for a log of the installed game version, and
    a cause that is not a presence record), as :meth:`Engine.load_tail` judges it."""
    rec = cause[0]
    if rec.type in PRESENCE or header.data.get("game_version") != engine.game.info.version:
        return False
    d = rec.data
    try:
        if rec.type == "seat_taken":
            want = engine.seat_step(
                before, d["seat"], d["name"], d["bot"], d.get("token_hash"), d.get("holder")
            )[0]
        elif rec.type in UNDO_CAUSES:
            want = engine._undo_cause(before, rec)[0]
        else:
            action = engine.codec.action_from_wire(d["action"])
            want = engine.act(before, d["seat"], action, d.get("timed_out", False))
    except (ActionError, UndoRefused, ValueError, GameFault, KeyError):
        return False  # not for this check to judge: verify reports it
    return len(cause) < len(want)
