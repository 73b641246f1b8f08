"""Snapshots of a session's state: derived data that lets the state at any seq be reached by
folding at most :data:`EVERY` records from the nearest snapshot, not the whole log from seq 0.

Pure: no trio, no store, no files. A snapshot is the pickled :class:`SessionState` after the
record whose seq is a multiple of the interval (``every``); the log stays the truth. Snapshots
are made while the log is folded once (:func:`fold_log` — the host runs that off its event loop),
kept in memory by the host (bounded by their bytes, see :class:`Snapshots`) and thrown away at
will: dropping them only makes the next request fold again. :func:`check_snapshots` compares
each one with the fold (what the tests and ``verify`` rely on: a snapshot is never trusted over
the log it was made from).

A game's state must pickle (frozen attrs classes of module-level types do); a state that does not
gives no snapshots (:func:`fold_log` then keeps only the end state, unpickled).
"""

from __future__ import annotations

import bisect
import itertools
import pickle
from collections.abc import Generator, Iterable

import attrs

from host.table.engine import Engine, Record, SessionState

__all__ = [
    "EVERY",
    "Folded",
    "Snapshots",
    "check_snapshots",
    "dump",
    "fold_log",
    "fold_steps",
    "load",
]

EVERY = 100
"""Records between two snapshots by default (a ``replay`` folds at most this many)."""


def dump(state: SessionState) -> bytes | None:
    """A state as snapshot bytes (pickle), or None when the game's state does not pickle."""
    try:
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - a game state that does not pickle: no snapshots
        return None


def load(data: bytes) -> SessionState:
    """The state a snapshot holds (only bytes :func:`dump` made: pickle runs code)."""
    state = pickle.loads(data)  # noqa: S301 - our own snapshots, never a client's bytes
    if not isinstance(state, SessionState):
        raise TypeError("not a snapshot of a session state")
    return state


@attrs.frozen
class Folded:
    """What one fold of a log (or of the records after a snapshot) found.

    Attributes:
        last: the seq of the last record folded.
        end: the state after it, pickled (None when it does not pickle, see ``state``).
        state: the state after it (kept only when ``end`` is None, else None: a worker process
            sends bytes).
        snapshots: ``(seq, bytes)`` of every snapshot made, oldest first.
        tokens: ``(seat, token_hash)`` of every human ``seat_taken`` folded (who ever held a
            seat: a seat's view is shown to any of them).
        ended: the last record is ``ended``.
        seats: the header's seat count.
    """

    last: int
    end: bytes | None
    state: SessionState | None
    snapshots: list[tuple[int, bytes]]
    tokens: frozenset[tuple[int, str]]
    ended: bool
    seats: int


def fold_log(
    engine: Engine,
    records: Iterable[Record],
    every: int = EVERY,
    start: SessionState | None = None,
) -> Folded:
    """Fold records (header first when ``start`` is None, else the records after
    ``start.seq``), making a snapshot after each record whose seq is a multiple of ``every``
    (:func:`fold_steps` run through).

    Raises:
        BadRecord: a record that does not fold (its seq), or no header to start from.
        ValueError: ``every`` below 1.
    """
    steps = fold_steps(engine, records, every, start)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def fold_steps(
    engine: Engine,
    records: Iterable[Record],
    every: int = EVERY,
    start: SessionState | None = None,
) -> Generator[int, None, Folded]:
    """:func:`fold_log` a stretch of at most ``every`` records at a time: the generator yields
    the seq folded so far after each stretch (and once before the first, header folded), and
    returns the :class:`Folded`; so a caller can bound each stretch of game code (a budget
    step) and let others run between two.

    Raises:
        BadRecord: a record that does not fold (its seq), or no header to start from.
        ValueError: ``every`` below 1.
    """
    if every < 1:
        raise ValueError(f"every must be at least 1, not {every}")
    it = iter(records)
    if start is None:
        first = next(it, None)
        if first is None or first.type != "header" or first.seq != 0:
            from host.table.engine import BadRecord

            raise BadRecord(0, "a log must start with its header at seq 0")
        start = engine.initial(first)
    state = start
    yield state.seq
    snaps: list[tuple[int, bytes]] = []
    tokens: set[tuple[int, str]] = set()
    pickles = True
    while True:  # a stretch at a time (the state built once per stretch), never the whole list
        upto = -(-(state.seq + 1) // every) * every  # the next seq a snapshot is taken after
        stretch = list(itertools.islice(it, upto - state.seq))
        if not stretch:
            break
        tokens.update(
            (r.data.get("seat"), r.data["token_hash"])
            for r in stretch
            if r.type == "seat_taken" and r.data.get("token_hash")
        )
        state = engine.apply_all(state, stretch)
        if pickles and state.seq % every == 0:
            data = dump(state)
            if data is None:
                pickles = False
            else:
                snaps.append((state.seq, data))
        yield state.seq
    end = dump(state) if pickles else None
    seats = state.header.get("seats")
    return Folded(
        state.seq,
        end,
        None if end is not None else state,
        snaps,
        frozenset(tokens),
        state.ended,
        len(seats) if isinstance(seats, list) else int(seats or 0),
    )


class Snapshots:
    """The snapshots of one log, found by seq (:meth:`nearest`), with their size in bytes."""

    def __init__(self) -> None:
        self._seqs: list[int] = []
        self._data: list[bytes] = []
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._seqs)

    def add(self, items: Iterable[tuple[int, bytes]]) -> None:
        """Keep these snapshots (seqs above every one kept, oldest first; others skipped)."""
        for seq, data in items:
            if self._seqs and seq <= self._seqs[-1]:
                continue
            self._seqs.append(seq)
            self._data.append(data)
            self.nbytes += len(data)

    def nearest(self, seq: int) -> tuple[int, bytes] | None:
        """The snapshot of the greatest seq ``<= seq`` (None: none that early)."""
        i = bisect.bisect_right(self._seqs, seq)
        return None if i == 0 else (self._seqs[i - 1], self._data[i - 1])

    def items(self) -> list[tuple[int, bytes]]:
        """Every snapshot ``(seq, bytes)``, oldest first."""
        return list(zip(self._seqs, self._data, strict=True))


def check_snapshots(
    engine: Engine, records: list[Record], snapshots: Iterable[tuple[int, bytes]]
) -> int | None:
    """Compare snapshots with a fold of the whole log (``records`` in seq order, header first):
    the seq of the first snapshot whose state is not the fold's at its seq, or None if all hold.
    A snapshot past the log's end is a mismatch too.

    Raises:
        BadRecord: the log does not fold.
    """
    want = sorted(snapshots)
    state = engine.initial(records[0])
    i = 0
    for seq, data in want:
        if seq >= len(records):
            return seq
        state = engine.apply_all(state, records[i + 1 : seq + 1]) if seq > i else state
        i = seq
        if load(data) != state:
            return seq
    return None
