"""The replay ops (``log``, ``replay``, ``verify``, ``fork``): a session's log read through the
host, for the web client's debugger and any other client. PROTOCOL.md, "Replay ops", is the
contract.

Who may see what. Every request names a viewer: a spectator (the default), a seat, or the full
truth. A spectator's view is always given. A seat's view is given to a request that carries that
seat's token (the same secret ``resume`` takes). Everything else (any seat's view, the full truth
with the seed, the explanation ``verify`` gives, ``fork``) is *open* only when nothing is secret
any more: the session has ended and its game reveals the seed (anyone holding the seed and the
code can re-deal every card), or the host runs with ``serve --debug-replay``. Seven Twenty-Seven
keeps its seed, so its folded hands stay hidden from every client of a normal host.

Costs. Records are read from the store (a live session's up to its own seq: what is
acknowledged); the last few logs read stay in memory while their files do not change
(:data:`CACHED_LOGS`, :data:`CACHED_RECORDS`), so paging through a long log reads it once.
Folding runs on the host's thread in slices of :data:`SLICE` records with a checkpoint between
them, so a long log does not stall the other tables; each connection keeps the last state it was
shown, so stepping forward folds only the records in between. ``verify`` runs the game in a
worker thread, one verify at a time per host.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import weakref
from collections import OrderedDict
from typing import Any

import orjson
import structlog
import trio

from host.store.base import CorruptLog, UnknownSession
from host.table.engine import BadRecord, Engine, Record, SessionState
from host.table.history import fork_records, verify_log, version_warning
from host.table.visibility import NEVER_SHOWN
from protocol.framing import MAX_LINE
from protocol.messages import MAX_LOG_PAGE, ErrorCode, ProtocolError, Request
from protocol.replies import Forked, LogPage, ReplayState, SeatInfo, Verified

__all__ = ["OPS", "dispatch"]

log = structlog.get_logger("gamehost.replay")

OPS = frozenset({"log", "replay", "verify", "fork"})
MAX_VERIFY_WAITING = 8
"""Verify requests that may wait for the host's one verify slot; one more is ``unavailable``
(a client cannot queue verifies of big logs without bound and keep a core busy)."""
"""The ops this module answers."""

SLICE = 500
"""Records folded between two checkpoints."""

PAGE_BYTES = MAX_LINE - 4096
"""The most bytes the records of one ``log`` reply take (the rest of the line is left for the
reply around them): a page of ``limit`` records ends early past it, and ``next`` goes on."""

CACHED_LOGS = 4
CACHED_RECORDS = 100_000
"""Logs kept read (so paging through one reads it once), at most, and their records in all;
a copy is used only while the file's size and time of change are what they were."""
_logs: weakref.WeakKeyDictionary[Any, OrderedDict[str, tuple[tuple[int, int], list[Record]]]] = (
    weakref.WeakKeyDictionary()
)

_shown: weakref.WeakKeyDictionary[Any, tuple[str, SessionState]] = weakref.WeakKeyDictionary()
"""Per connection: the session and state it was last shown (so stepping on is cheap)."""
_verifying: weakref.WeakKeyDictionary[Any, trio.CapacityLimiter] = weakref.WeakKeyDictionary()


async def dispatch(host: Any, conn: Any, req: Request) -> Any:
    """Answer a replay op for ``conn`` on ``host``; returns its ``result``.

    Raises:
        ProtocolError: ``unknown_session``, ``session_damaged``, ``unavailable``,
            ``bad_request`` (seq or limit out of range, a fork inside a cause), ``hidden``
            (a view this connection may not see), ``overloaded`` (``fork`` past the limits).
    """
    p = req.params
    engine, records, live = await _records(host, p.session)
    ended = records[-1].type == "ended"
    is_open = bool(host.config.debug_replay) or (ended and engine.game.info.reveal_seed)
    if req.op == "verify":
        return await _verify(host, engine, records, is_open)
    if req.op == "fork":
        if not is_open:
            raise ProtocolError(
                ErrorCode.HIDDEN,
                "fork needs an ended session whose game reveals its seed (or serve"
                " --debug-replay): a fork keeps the seed, and would foretell the deals",
            )
        return await _fork(host, conn, engine, records, p.seq)
    viewer = _viewer(engine, records, p.seat, p.truth, p.token, is_open)
    if req.op == "log":
        if not 1 <= p.limit <= MAX_LOG_PAGE:
            raise ProtocolError(
                ErrorCode.BAD_REQUEST, f"limit must be 1 to {MAX_LOG_PAGE}, not {p.limit}"
            )
        start = 0 if p.after is None else p.after + 1
        if start < 0:
            raise ProtocolError(ErrorCode.BAD_REQUEST, "after must be >= 0")
        seed = records[0].data.get("seed") if engine.game.info.reveal_seed else None
        shown, size = [], 0
        for r in records[start : start + p.limit]:
            item = _record(engine, r, viewer, p.truth, seed)
            size += len(orjson.dumps(item)) + 1
            if shown and size > PAGE_BYTES:
                break
            shown.append(item)
        return LogPage(
            p.session,
            engine.game.info.id,
            records[-1].seq,
            live,
            ended,
            is_open,
            shown,
            shown[-1]["seq"] if shown and shown[-1]["seq"] < records[-1].seq else None,
        )
    # replay
    if not 0 <= p.seq <= records[-1].seq:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"seq must be 0..{records[-1].seq}")
    state = await _state_at(conn, p.session, engine, records, p.seq)
    shown = engine.codec.to_wire(state.game) if p.truth else engine.view_wire(state, viewer)
    return ReplayState(
        p.session,
        engine.game.info.id,
        state.seq,
        records[-1].seq,
        [None if s is None else SeatInfo(i, s.name, s.bot) for i, s in enumerate(state.seats)],
        state.started,
        state.ended,
        list(engine.to_act(state)) if state.started and not state.ended else [],
        shown,
        p.truth,
    )


async def _records(host: Any, sid: str) -> tuple[Engine, list[Record], bool]:
    """The engine of a session's game and its records (a live one's up to its seq)."""
    if sid in host._damaged:
        raise ProtocolError(ErrorCode.SESSION_DAMAGED, host._damaged[sid])
    session = await host._live_session(sid)
    cache = _logs.setdefault(host, OrderedDict())
    key = await _log_key(host, sid)
    cached = cache.get(sid)
    if cached is not None and key is not None and cached[0] == key:
        cache.move_to_end(sid)
        records = cached[1]
    else:
        records = await _read(host, sid)
        if key is not None and len(records) <= CACHED_RECORDS:
            cache[sid] = (key, records)
            while len(cache) > CACHED_LOGS or sum(len(r) for _, r in cache.values()) > (
                CACHED_RECORDS
            ):
                cache.popitem(last=False)
    if session is not None:  # what is acknowledged, not what is being written
        records = records[: session.state.seq + 1]
    engine = host.registry.engines.get(records[0].data.get("game", "")) if records else None
    if engine is None:
        raise ProtocolError(ErrorCode.UNKNOWN_SESSION, f"no session {sid!r} of an installed game")
    return engine, records, session is not None


async def _log_key(host: Any, sid: str) -> tuple[int, int] | None:
    """What tells a cached copy of a log from a changed log: its size and time of change
    (None: the store has no files, or this one cannot be seen; then nothing is cached)."""
    path_of = getattr(host.store, "path", None)
    if path_of is None:
        return None
    try:
        st = await trio.to_thread.run_sync(os.stat, path_of(sid))
    except (OSError, ValueError):
        return None
    return (st.st_size, st.st_mtime_ns)


async def _read(host: Any, sid: str) -> list[Record]:
    try:
        raw = await host.store.read(sid)
    except (UnknownSession, ValueError):
        raise ProtocolError(ErrorCode.UNKNOWN_SESSION, f"no session {sid!r}") from None
    except CorruptLog as exc:
        raise host._damage(sid, exc) from None
    except Exception:  # OSError, a database that is away (StoreUnavailable), ...
        log.exception("session_log_unreadable", session=sid)
        raise ProtocolError(
            ErrorCode.UNAVAILABLE, f"the log of session {sid!r} cannot be read"
        ) from None
    return [Record.from_json(r) for r in raw]


def _viewer(
    engine: Engine,
    records: list[Record],
    seat: int | None,
    truth: bool,
    token: str | None,
    is_open: bool,
) -> int | None:
    """The viewer a request may have (``seat``; None for a spectator or the truth).

    Raises:
        ProtocolError: ``bad_request`` (no such seat, seat and truth both), ``hidden``.
    """
    if truth and seat is not None:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "ask for a seat or the truth, not both")
    if seat is not None and not 0 <= seat < _seat_count(records):
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"no seat {seat}")
    if truth and not is_open:
        raise ProtocolError(
            ErrorCode.HIDDEN,
            "the full truth is shown only once the session ended and its game reveals its seed",
        )
    if seat is not None and not is_open:
        want = hashlib.sha256(token.encode()).hexdigest() if token else None
        taken = {(r.data.get("seat"), r.data.get("token_hash")) for r in records[1:]}
        held = want is not None and (seat, want) in taken
        if not held:
            raise ProtocolError(ErrorCode.HIDDEN, f"seat {seat}'s view needs that seat's token")
    return seat


def _seat_count(records: list[Record]) -> int:
    seats = records[0].data.get("seats")
    return len(seats) if isinstance(seats, list) else int(seats or 0)


def _record(
    engine: Engine, rec: Record, viewer: int | None, truth: bool, seed: str | None
) -> dict[str, Any]:
    """A record as the viewer may see it (never a token hash; the seed only when public)."""
    data = {k: v for k, v in rec.data.items() if k not in NEVER_SHOWN}  # nor the holder
    if not truth:
        if rec.type == "header":
            data["seed"] = None
        elif rec.type == "event":  # as the current code reads it: upcast, then redacted
            data["event"] = engine.redacted_wire(rec, viewer)
            data["v"] = engine.game.info.event_version
        elif rec.type == "ended":
            data["seed"] = seed
    out: dict[str, Any] = {"seq": rec.seq, "type": rec.type}
    if rec.ts is not None:
        out["ts"] = rec.ts
    out.update(data)
    return out


async def _fold(engine: Engine, state: SessionState, records: list[Record]) -> SessionState:
    for i, rec in enumerate(records, 1):
        state = engine.apply(state, rec)
        if i % SLICE == 0:
            await trio.lowlevel.checkpoint()
    return state


async def _state_at(
    conn: Any, sid: str, engine: Engine, records: list[Record], seq: int
) -> SessionState:
    try:
        last = _shown.get(conn)
        if last is not None and last[0] == sid and last[1].seq <= seq:
            state = await _fold(engine, last[1], records[last[1].seq + 1 : seq + 1])
        else:
            state = await _fold(engine, engine.initial(records[0]), records[1 : seq + 1])
    except BadRecord as exc:
        raise ProtocolError(
            ErrorCode.SESSION_DAMAGED, f"the log of session {sid!r} does not fold: {exc}"
        ) from None
    _shown[conn] = (sid, state)
    return state


async def _verify(host: Any, engine: Engine, records: list[Record], is_open: bool) -> Any:
    limiter = _verifying.get(host)
    if limiter is None:
        limiter = _verifying[host] = trio.CapacityLimiter(1)
    if limiter.statistics().tasks_waiting >= MAX_VERIFY_WAITING:
        raise ProtocolError(
            ErrorCode.UNAVAILABLE, "too many verify requests are waiting on this host; retry later"
        )
    diff = await trio.to_thread.run_sync(verify_log, engine, records, limiter=limiter)
    return Verified(
        diff is None,
        len(records),
        None if diff is None else diff[0],
        # the explanation quotes records whole: hidden cards included
        None if diff is None or not is_open else diff[1],
        version_warning(engine, records),
    )


async def _fork(host: Any, conn: Any, engine: Engine, records: list[Record], seq: int) -> Forked:
    sid = secrets.token_hex(8)
    try:
        lines = fork_records(records, seq, sid)
    except ValueError as exc:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"cannot fork at {seq}: {exc}") from None
    state = engine.rebuild(records[: seq + 1])
    if state.started and not engine.to_act(state):
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"nothing is left to play after seq {seq}")
    if len(host.sessions) >= host.max_sessions and host._running() >= host.max_sessions:
        raise ProtocolError(
            ErrorCode.OVERLOADED, f"this host holds {host.max_sessions} live sessions already"
        )
    host._check_create(conn)
    # every human seat of the fork gets a new token, given to the forker only
    tokens: dict[str, str] = {}
    for line in lines:
        if line["type"] == "seat_taken" and not line.get("bot"):
            token = secrets.token_urlsafe(24)
            line["token_hash"] = hashlib.sha256(token.encode()).hexdigest()
            tokens[str(line["seat"])] = token
    try:
        await host.store.create(sid, lines)
    except OSError as exc:
        log.error("fork_failed", error=str(exc))
        raise ProtocolError(ErrorCode.UNAVAILABLE, "the host cannot write a new log now") from None
    host._unloaded.add(sid)
    await host._load_session(sid)
    session = host.sessions.get(sid)
    if session is None:
        raise ProtocolError(ErrorCode.INTERNAL, "internal error: the fork did not start")
    log.info("session_forked", session=sid, forked_from=records[0].data["session"], seq=seq)
    return Forked(
        sid,
        engine.game.info.id,
        {"session": records[0].data["session"], "seq": seq},
        session.seat_list(),
        session.state.free_seats,
        session.state.seq,
        tokens,
    )
