"""What the host does with a whole log: verify it against the current code, fork it.

Pure: no trio, no store, no files. A log here is its records in seq order, header first, as
:meth:`host.table.engine.Record.from_json` makes them from a log's lines. Both the host's replay
ops (``verify`` and ``fork``, :mod:`host.net.replayops`) and ``gamehost replay --verify`` /
``--fork-at`` (:mod:`tools.replay`) answer through these functions, so the wire and the command
line cannot disagree about a log.

A log may span versions of its game's event schema (a session begun before the game bumped
``GameInfo.event_version``, finished after): :func:`verify_log` compares each recorded event
after the game's ``upcast`` (see :meth:`host.table.engine.Engine.verify`), and :func:`fork_records`
copies the records as they were written, so the fork reads, plays on and verifies the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from host.table.engine import CAUSES, Engine, Record

__all__ = ["fork_records", "seed_difference", "verify_log", "version_warning"]


def verify_log(
    engine: Engine, records: Iterable[Record], progress: Callable[[int], None] | None = None
) -> tuple[int, str] | None:
    """Check a log: the seed its ``ended`` record reveals matches the header's
    ``seed_commitment`` (sha256 of the seed), and the current code re-produces every record
    (:meth:`Engine.verify`: every cause re-run, each recorded event compared after upcasting it
    to the game's current event schema).

    Never raises on a bad log: a missing or malformed seed, or a record the code cannot read,
    fold or re-produce, is reported like a difference.

    ``records``: a list, or any iterable that does not raise, read once, in order, without
    keeping the records (a log read a record at a time: ``gamehost replay --verify``); the seed
    difference is the one reported when there are two.

    ``progress``: called with the records checked so far, now and then (see
    :meth:`Engine.verify`).

    Returns:
        None when it all holds, else ``(seq, explanation)`` of the first difference (an
        explanation quotes records whole, hidden cards included: show it only to whoever may
        see the full truth).
    """
    kept: list[Record] = []  # the first record and every ``ended`` one: what the seed check reads

    def passing() -> Iterator[Record]:
        for rec in records:
            if not kept or rec.type == "ended":
                kept.append(rec)
            yield rec

    log = passing()
    diff = engine.verify(log, progress)
    for _ in log:  # a difference stopped the re-run: the rest is read for the seed check
        pass
    return seed_difference(kept) or diff


def seed_difference(records: list[Record]) -> tuple[int, str] | None:
    """:func:`verify_log`'s first check: ``(seq, explanation)`` when the seed the ``ended``
    record reveals does not hash to the header's ``seed_commitment``, else None."""
    header = records[0].data if records else {}
    for rec in records:
        if rec.type == "ended":
            try:
                seed = bytes.fromhex(rec.data["seed"])
            except (KeyError, TypeError, ValueError):
                seed = None
            if seed is None or hashlib.sha256(seed).hexdigest() != header.get("seed_commitment"):
                return (rec.seq, "the revealed seed does not match the header's commitment")
    return None


def version_warning(engine: Engine, records: list[Record]) -> str | None:
    """A warning when the log's header (``records[0]``) names another ``game_version`` than the
    installed game's ``GameInfo.version`` (or names none at all), else None.

    Only the game's version counts: a log whose events were written under an older event schema
    (``event_version``) by the same version of the rules verifies without a warning, its events
    upcast.
    """
    logged = records[0].data.get("game_version")
    installed = engine.game.info.version
    if logged is None:
        return f"the header names no game_version; checked against installed version {installed}"
    if str(logged) != str(installed):
        return (
            f"the log was written by {engine.game.info.id} version {logged};"
            f" the installed version is {installed}"
        )
    return None


def fork_records(records: list[Record], n: int, new_id: str) -> list[dict[str, Any]]:
    """The records 0..``n`` of a log as the records of a new session ``new_id``, ready for a
    store's ``create``: one JSON object per record (``{"seq", "type", **data}``, no ``ts``).

    The header names ``new_id`` as its ``session`` and says ``forked_from`` (``{"session": the
    original id, "seq": n}``); an ``ended`` record (always a log's last) is left out, so a
    fork at the end of a session a host limit stopped plays on. No seat of the fork is held by
    a connection (the original's connections are not the fork's): ``seat_taken`` loses its
    ``holder`` and each ``seat_held`` becomes a ``seat_released`` of that seat, at the same seq.
    Everything else is copied as it
    was written: the seed (so the fork replays, and its future deals can be foretold by whoever
    knows it), the token hashes (a caller handing out new seats replaces them), and each event
    with the schema version ``v`` it was written under (the current code upcasts it on reading,
    as it does the original's).

    Raises:
        ValueError: ``n`` is not a seq of the log, or ends inside a cause (the next record is
            not a ``seat_taken``, an ``action``, a ``seat_held``, a ``seat_released`` or an
            undo record that begins a cause, :data:`~host.table.engine.CAUSES`): the
            message says where to fork instead.
    """
    last = records[-1].seq
    if not 0 <= n <= last:
        raise ValueError(f"the seq must be 0..{last}")
    after = records[n + 1] if n < last else None
    if after is not None and after.type not in CAUSES:
        ends = [r.seq - 1 for r in records[1:] if r.type in CAUSES]
        before = max((e for e in ends if e < n), default=0)
        raise ValueError(
            f"seq {n} is inside a cause (record {n + 1} is its {after.type});"
            f" fork at {before} or at the end of that cause"
        )
    lines = []
    for r in records[: n + 1]:
        if r.type == "ended":
            continue
        data = dict(r.data)
        kind = r.type
        if kind == "header":
            data["session"] = new_id
            data["forked_from"] = {"session": r.data["session"], "seq": n}
        elif kind == "seat_taken":
            data.pop("holder", None)
        elif kind == "seat_held":  # no connection of the original holds a seat of the fork
            kind, data = "seat_released", {"seat": data["seat"], "reason": "gone"}
        lines.append({"seq": r.seq, "type": kind, **data})
    return lines
