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

Costs. A request reads only the records it needs, never a whole long log on the host's event
loop: a ``log`` page of records ``[a, b)`` reads those records (the file store's line index, a
``WHERE seq`` range in PostgreSQL), plus the header and the last record. ``replay`` at a seq
starts from the nearest *snapshot* of the session's state (:mod:`host.table.snapshots`: one every
:data:`host.table.snapshots.EVERY` records) and folds at most that many records on the loop, in
slices of :data:`SLICE`, the tables going first between two slices
(:func:`host.net.heavy.give_way`). The snapshots of a log are made by one
fold of the whole log in a worker process (:mod:`host.net.heavy`) the first time a ``replay``
(or a seat's view of a session that is not open) needs them, then kept in memory — the last
logs used, :data:`CACHED_BYTES` of snapshots in all — and extended as a live log grows. They
are derived data: dropped when memory is short or the log is shorter than they say, made again
from the log, never the truth. ``verify`` runs in a worker process too; the same verify asked
while one runs shares its answer. At most :data:`host.net.heavy.MAX_WAITING` heavy jobs wait
for a worker; one more is answered ``unavailable``. ``fork`` reads its records and makes its
lines in a worker thread. Where the host has a reads process (``Host.reads``: with workers, on
a file store), a ``log`` page and a ``replay`` are made there instead of on the loop
(:func:`host.net.heavy.page_job`, :func:`host.net.heavy.replay_job`: the nearest snapshot goes
with the request) and come back as JSON text; with 8 waiting for it, the loop makes them.

Game code. Whatever game code an op runs on the loop (a page's redaction, a replay's fold, its
view and ``to_act``) runs a slice at a time, each slice a step of the host's budget
(:mod:`host.plugins.budget`), never across an ``await``; the worker processes run their own
(:mod:`host.net.heavy`). A fault there — the game raised, ran past its budget, gave what cannot be
sent — is the game's: a live session ends as ``game_error`` (its driver appends the ``ended``
record, with the fault), and for a session that is over the host remembers it
(``Host.remember_fault``); the request gets ``game_faulted``. A session whose game faulted (its
log ends ``aborted: "game_error"``, or remembered) runs no game code again: its log pages show
its events as null (unless ``truth``, which needs no game code), and ``replay``, ``verify`` and
``fork`` answer ``game_faulted`` at once.
"""

from __future__ import annotations

import contextlib
import secrets
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import attrs
import orjson
import structlog
import trio

from host.net.heavy import (
    Busy,
    HeavyFailed,
    fold_job,
    give_way,
    page_job,
    replay_job,
    verify_job,
)
from host.plugins.budget import BudgetExceeded
from host.plugins.faults import GameFault, game_error
from host.store.base import CorruptLog, UnknownSession
from host.table.core import faulted, hash_token, new_token
from host.table.engine import BadRecord, Engine, Record, SessionState
from host.table.history import fork_records
from host.table.snapshots import EVERY, Folded, Snapshots, load
from host.table.visibility import log_record
from host.table.words import Words, display_names
from protocol.framing import MAX_LINE
from protocol.messages import MAX_LOG_PAGE, ErrorCode, ProtocolError, Request
from protocol.replies import Forked, LogPage, ReplayState, SeatInfo, Verified

__all__ = ["OPS", "dispatch"]

log = structlog.get_logger("gamehost.replay")

OPS = frozenset({"log", "replay", "verify", "fork"})
"""The ops this module answers."""

SLICE = 100
"""Records folded on the loop between two checkpoints."""

PAGE_BYTES = MAX_LINE - 4096
"""The most bytes the records of one ``log`` reply take (the rest of the line is left for the
reply around them): a page of ``limit`` records ends early past it, and ``next`` goes on."""

CACHED_LOGS = 64
CACHED_BYTES = 64 << 20
"""Logs whose snapshots are kept, at most, and the bytes of their snapshots in all (the least
recently used log's are dropped first)."""


@attrs.define
class _Log:
    """What one fold of a log up to ``folded.last`` found, and its snapshots."""

    engine: Engine
    last: int
    end: bytes | None
    end_state: SessionState | None
    tokens: frozenset[tuple[int, str]]
    snaps: Snapshots

    @property
    def nbytes(self) -> int:
        return self.snaps.nbytes + len(self.end or b"")

    def state_at_end(self) -> SessionState:
        if self.end_state is not None:
            return self.end_state
        assert self.end is not None
        return load(self.end)

    def take(self, folded: Folded) -> None:
        self.last = folded.last
        self.end, self.end_state = folded.end, folded.state
        self.tokens |= folded.tokens
        self.snaps.add(folded.snapshots)


@attrs.frozen
class _Meta:
    """What every op needs of a log, read without folding it (``faulted``: why the session's
    game code is not run for it any more, or None)."""

    engine: Engine
    header: Record
    last: int
    ended: bool
    live: bool
    faulted: str | None = None


_logs: weakref.WeakKeyDictionary[Any, OrderedDict[str, _Log]] = weakref.WeakKeyDictionary()
_folding: weakref.WeakKeyDictionary[Any, dict[str, trio.Event]] = weakref.WeakKeyDictionary()
_verifying: weakref.WeakKeyDictionary[Any, dict[tuple[str, int], Any]] = weakref.WeakKeyDictionary()
_shown: weakref.WeakKeyDictionary[Any, tuple[str, SessionState]] = weakref.WeakKeyDictionary()
"""Per connection: the session and state it was last shown (so stepping on is cheap)."""
_seat_names: weakref.WeakKeyDictionary[Any, OrderedDict[str, list[str]]] = (
    weakref.WeakKeyDictionary()
)
"""Per host: the seat names of logs that are not live (see :func:`_names`)."""

NAMES_PAGE = 200
"""Records read at a time while looking for a log's ``seat_taken`` records."""
CACHED_NAMES = 1024
"""Logs whose seat names a host remembers."""


async def dispatch(host: Any, conn: Any, req: Request) -> Any:
    """Answer a replay op for ``conn`` on ``host``; returns its ``result``.

    Raises:
        ProtocolError: ``unknown_session``, ``session_damaged``, ``unavailable`` (the log cannot
            be read now, or every heavy-work slot is taken), ``bad_request`` (seq or limit out
            of range, a fork inside a cause), ``hidden`` (a view this connection may not see),
            ``overloaded`` (``fork`` past the limits).
    """
    p = req.params
    await give_way()  # a debugger's request waits while the tables have work
    meta = await _meta(host, p.session)
    engine = meta.engine
    is_open = bool(host.config.debug_replay) or (meta.ended and engine.game.info.reveal_seed)
    if meta.faulted is not None and req.op != "log":
        raise ProtocolError(
            ErrorCode.GAME_FAULTED,
            f"the game of session {p.session!r} faulted ({meta.faulted}): its code is not run"
            " for it again, so it has no replay, verify or fork; its log and its end are still"
            " answered",
        )
    if req.op == "verify":
        return await _verify(host, p.session, meta, is_open)
    if req.op == "fork":
        if not is_open:
            raise ProtocolError(
                ErrorCode.HIDDEN,
                "fork needs an ended session whose game reveals its seed (or serve"
                " --debug-replay): a fork keeps the seed, and would foretell the deals",
            )
        return await _fork(host, conn, p.session, meta, p.seq)
    viewer = await _viewer(host, p.session, meta, p.seat, p.truth, p.token, is_open)
    if req.op == "log":
        if not 1 <= p.limit <= MAX_LOG_PAGE:
            raise ProtocolError(
                ErrorCode.BAD_REQUEST, f"limit must be 1 to {MAX_LOG_PAGE}, not {p.limit}"
            )
        if p.after is not None and p.after < 0:  # null, not -1, asks from the header
            raise ProtocolError(
                ErrorCode.BAD_REQUEST, f"after must be a seq (>= 0) or null, not {p.after}"
            )
        start = 0 if p.after is None else p.after + 1
        header = meta.header
        seed = header.data.get("seed") if engine.game.info.reveal_seed else None
        stop = min(start + p.limit, meta.last + 1)
        game_off = meta.faulted is not None
        shown: Any = None
        last_shown: int | None = None
        reads = _reads(host)
        if start < stop and reads is not None:  # made in the reads process: none of it here
            try:
                got = await reads.run(
                    page_job,
                    reads.source,
                    reads.game(engine),
                    p.session,
                    start,
                    stop,
                    viewer,
                    p.truth,
                    seed,
                    game_off,
                    PAGE_BYTES,
                    await _names(host, p.session, meta) if p.text else None,
                )
            except Busy:
                got = None  # every reader busy: this page is made on the loop, below
            except HeavyFailed as exc:
                raise ProtocolError(ErrorCode.UNAVAILABLE, str(exc)) from None
            if got is not None:
                if got[0] == "bad":
                    raise BadRecord(got[1], got[2])
                if got[0] == "fault":
                    _, at, what, message = got
                    where = "redact" if at is None else f"redact at seq {at}"
                    raise _faulted(host, p.session, where, what, message)
                _, last_shown, text = _job_result(host, p.session, got)
                shown = orjson.Fragment(text)  # the records' JSON array, written as it is
        if shown is None:
            shown, last_shown = await _page_here(host, p, meta, viewer, start, stop, seed)
        return LogPage(
            p.session,
            engine.game.info.id,
            meta.last,
            meta.live,
            meta.ended,
            is_open,
            shown,
            last_shown if last_shown is not None and last_shown < meta.last else None,
        )
    # replay
    if not 0 <= p.seq <= meta.last:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"seq must be 0..{meta.last}")
    in_reads = await _replay_in_reads(host, p, meta, viewer)
    if in_reads is not None:
        return in_reads
    state = await _state_at(host, conn, p.session, meta, p.seq)
    with _game(host, p.session, "view"):
        if p.truth:
            try:  # the whole state must encode as JSON: the game's fault, not the host's
                shown = engine.codec.to_wire(state.game)
                orjson.dumps(shown)
            except BaseException as exc:
                game_error(exc)
                raise GameFault(f"the state of session {p.session!r} is not JSON: {exc}") from exc
        else:
            shown = engine.view_wire(state, viewer)
        to_act = list(engine.to_act(state)) if state.started and not state.ended else []
    return ReplayState(
        p.session,
        engine.game.info.id,
        state.seq,
        meta.last,
        [None if s is None else SeatInfo(i, s.name, s.bot) for i, s in enumerate(state.seats)],
        state.started,
        state.ended,
        to_act,
        shown,
        p.truth,
    )


def _reads(host: Any) -> Any:
    """The host's reads process (:attr:`host.net.server.Host.reads`) when it can read this
    host's logs (a file store's), else None."""
    reads = getattr(host, "reads", None)
    if reads is None or not reads.in_process or reads.source is None:
        return None
    return reads if reads.source[0] == "file" else None


async def _replay_in_reads(host: Any, p: Any, meta: _Meta, viewer: int | None) -> Any:
    """A ``replay`` answered by the reads process (:func:`host.net.heavy.replay_job`): the
    state from the nearest snapshot (made once per log, :func:`_folded`), the records after it
    folded and the view made there, none of it on the loop. None: no reads process, or it is
    busy with 8 more waiting (the caller folds on the loop instead)."""
    reads = _reads(host)
    if reads is None:
        return None
    sid, engine = p.session, meta.engine
    lg = await _folded(host, sid, meta)
    base: bytes | None
    if p.seq == lg.last:
        if lg.end is None:
            return None
        base = lg.end
    else:
        near = lg.snaps.nearest(p.seq)
        base = near[1] if near is not None else None
    try:
        got = await reads.run(
            replay_job, reads.source, reads.game(engine), sid, base, p.seq, viewer, p.truth
        )
    except Busy:
        return None
    except HeavyFailed as exc:
        raise ProtocolError(ErrorCode.UNAVAILABLE, str(exc)) from None
    if got[0] == "changed":
        raise ProtocolError(ErrorCode.UNAVAILABLE, f"the log of session {sid!r} changed while read")
    if got[0] == "bad":
        raise ProtocolError(
            ErrorCode.SESSION_DAMAGED,
            f"the log of session {sid!r} does not fold: seq {got[1]}: {got[2]}",
        )
    if got[0] == "fault":
        _, at, what, message = got
        raise _faulted(host, sid, "replay" if at is None else f"replay at seq {at}", what, message)
    _, seats, started, ended, to_act, shown = _job_result(host, sid, got)
    return ReplayState(
        sid,
        engine.game.info.id,
        p.seq,
        meta.last,
        [None if s is None else SeatInfo(i, s[0], s[1]) for i, s in enumerate(seats)],
        started,
        ended,
        to_act,
        orjson.Fragment(shown),
        p.truth,
    )


async def _page_here(
    host: Any, p: Any, meta: _Meta, viewer: int | None, start: int, stop: int, seed: str | None
) -> tuple[list[Any], int | None]:
    """A ``log`` page made on the loop: its records read a slice at a time (:func:`_range`),
    then redacted (and told in words when asked) a slice at a time, each slice a step of the
    game's budget, the tables going first between two slices; up to :data:`PAGE_BYTES`. The
    records shown and the last one's seq."""
    engine = meta.engine
    records = await _range(host, p.session, start, stop) if start < stop else []
    words = Words(None if meta.faulted is not None else engine.game) if p.text else None
    names = await _names(host, p.session, meta) if p.text else []
    shown: list[Any] = []
    size = 0
    game_off = meta.faulted is not None
    for i in range(0, len(records), SLICE):
        if i:  # the tables go first between two slices of redaction
            await give_way()
        with _game(host, p.session, "redact"):  # each slice a step within the budget
            part = [
                log_record(engine, r, viewer, p.truth, seed, game_off)
                for r in records[i : i + SLICE]
            ]
            if words is not None:
                for r, item in zip(records[i : i + SLICE], part, strict=True):
                    body = item.get("event") if r.type == "event" else item
                    item["text"] = words.record(r.type, body, viewer, names)
        for item in part:
            size += len(orjson.dumps(item)) + 1
            if shown and size > PAGE_BYTES:
                break
            shown.append(item)
        else:
            continue
        break
    return shown, (shown[-1]["seq"] if shown else None)


@contextlib.contextmanager
def _game(host: Any, sid: str, what: str) -> Iterator[None]:
    """Run game code for a replay op (``what`` names it) within the host's budget, as one
    step: a fault there (the game raised, ran past its budget, gave what cannot be sent) is
    the game's, :func:`_faulted`. Never spans an ``await``.

    Raises:
        ProtocolError: ``game_faulted``.
    """
    try:
        with host.budget.step(f"{what} (a replay op)"):
            yield
    except BudgetExceeded as exc:
        raise _faulted(host, sid, what, exc.what, exc.message) from None
    except GameFault as exc:
        raise _faulted(host, sid, what, "error", exc.message) from None


def _faulted(host: Any, sid: str, what: str, fault: str, message: str) -> ProtocolError:
    """The game of ``sid`` faulted in a replay op: a live session ends as ``game_error`` with
    that fault (its driver appends the ``ended`` record); one that is over is remembered by
    the host, which runs its code no more. The error the request gets."""
    log.error("game_fault", session=sid, step=what, fault=fault, error=message, replay=True)
    session = host.sessions.get(sid)
    if session is not None and session.live and not session.state.ended:
        session.game_faulted(fault, message)
    else:
        host.remember_fault(sid, message)
    return ProtocolError(
        ErrorCode.GAME_FAULTED,
        f"the game of session {sid!r} faulted ({what}: {message}); its code is not run for it"
        " again",
    )


def _unreadable(host: Any, sid: str, exc: BaseException) -> ProtocolError:
    if isinstance(exc, UnknownSession | ValueError):
        return ProtocolError(ErrorCode.UNKNOWN_SESSION, f"no session {sid!r}")
    if isinstance(exc, CorruptLog):
        return host._damage(sid, exc)
    log.error("session_log_unreadable", session=sid, error=repr(exc))
    return ProtocolError(ErrorCode.UNAVAILABLE, f"the log of session {sid!r} cannot be read")


async def _range(host: Any, sid: str, first: int, stop: int) -> list[Record]:
    """Records ``first <= seq < stop`` of a log, reading only those where the store can, and
    :data:`SLICE` at a time: each slice is read and parsed in a worker thread, then made
    records on the loop, and the other tables are served between two slices. (A thread that
    parses a thousand records holds the interpreter lock for milliseconds, and the loop waits
    for it each time it takes the lock back: every act of every table paid that while a
    debugger paged a long log.) Between two slices the tables go first (:func:`give_way`)."""
    store = host.store
    out: list[Record] = []
    try:
        if not hasattr(store, "read_range"):
            raw = (await store.read(sid, first - 1))[: stop - first]
            return [Record.from_json(r) for r in raw]
        at = first
        while at < stop:
            if at > first:
                await give_way()
            end = min(at + SLICE, stop)
            raw = await store.read_range(sid, at, end)
            out.extend(Record.from_json(r) for r in raw)
            if len(raw) < end - at:  # the log ends before stop
                break
            at = end
    except Exception as exc:  # noqa: BLE001 - UnknownSession, CorruptLog, OSError, ...
        raise _unreadable(host, sid, exc) from None
    return out


async def _count(host: Any, sid: str) -> int:
    store = host.store
    try:
        if hasattr(store, "record_count"):
            return int(await store.record_count(sid))
        return len(await store.read(sid))
    except Exception as exc:  # noqa: BLE001 - UnknownSession, CorruptLog, OSError, ...
        raise _unreadable(host, sid, exc) from None


async def _names(host: Any, sid: str, meta: _Meta) -> list[str]:
    """Each seat's name as texts use it (:func:`host.table.words.display_names`): a live
    session's from its state; else from the log's ``seat_taken`` records, read from seq 1 in
    pages of :data:`NAMES_PAGE` up to the first game record (every seat is taken before the
    game starts), then remembered (the last :data:`CACHED_NAMES` logs)."""
    session = await host._live_session(sid)
    if session is not None:
        return display_names([s.name if s is not None else None for s in session.state.seats])
    known = _seat_names.setdefault(host, OrderedDict())
    if sid in known:
        known.move_to_end(sid)
        return known[sid]
    seats = meta.header.data.get("seats")
    found: list[str | None] = [None] * (seats if isinstance(seats, int) and seats > 0 else 0)
    at, started = 1, False
    while at <= meta.last and not started and None in found:
        page = await _range(host, sid, at, min(at + NAMES_PAGE, meta.last + 1))
        if not page:
            break
        for r in page:
            seat = r.data.get("seat")
            if r.type == "seat_taken" and isinstance(seat, int) and 0 <= seat < len(found):
                found[seat] = str(r.data.get("name") or "")
            elif r.type not in ("seat_taken", "seat_held", "seat_released"):
                started = True
                break
        at = page[-1].seq + 1
    names = display_names(found)
    if started or None not in found:  # a seat may still be taken (on another host) otherwise
        known[sid] = names
        while len(known) > CACHED_NAMES:
            known.popitem(last=False)
    return names


async def _meta(host: Any, sid: str) -> _Meta:
    """The engine, header, last seq (a live session's: what is acknowledged) of a log."""
    if sid in host._damaged:
        raise ProtocolError(ErrorCode.SESSION_DAMAGED, host._damaged[sid])
    session = await host._live_session(sid)
    why: str | None = None
    if session is not None:
        state = session.state
        engine = session.engine if hasattr(session, "engine") else None
        header = Record(0, "header", state.header)
        last, ended = state.seq, state.ended
        table = getattr(session, "table", None)
        if table is not None and (table.visible.game_off or table.faulted):
            why = "it ended aborted: game_error" if ended else "it is ending: game_error"
    else:
        n = await _count(host, sid)
        if n == 0:
            raise ProtocolError(ErrorCode.UNKNOWN_SESSION, f"no session {sid!r}")
        got = await _range(host, sid, 0, 1)
        if not got:
            raise ProtocolError(ErrorCode.UNKNOWN_SESSION, f"no session {sid!r}")
        header = got[0]
        tail = got if n == 1 else await _range(host, sid, n - 1, n)
        if not tail:  # the log changed under us: shorter now
            raise ProtocolError(ErrorCode.UNAVAILABLE, f"the log of session {sid!r} changed")
        last, ended = tail[-1].seq, tail[-1].type == "ended"
        engine = None
        if ended and faulted(tail[-1].data):
            fault = tail[-1].data.get("fault")
            why = "it ended aborted: game_error" + (f", fault: {fault}" if fault else "")
    if engine is None:
        engine = host.registry.engines.get(header.data.get("game", ""))
    if engine is None:
        raise ProtocolError(ErrorCode.UNKNOWN_SESSION, f"no session {sid!r} of an installed game")
    why = why or host.fault_of(sid)
    return _Meta(engine, header, last, ended, session is not None, why)


async def _folded(host: Any, sid: str, meta: _Meta) -> _Log:
    """The log's snapshots up to ``meta.last``: kept ones, extended by folding what was added
    since, or made by one fold of the whole log in a worker (one at a time per log)."""
    cache = _logs.setdefault(host, OrderedDict())
    busy = _folding.setdefault(host, {})
    while True:
        got = cache.get(sid)
        if got is not None and (got.last > meta.last or got.engine is not meta.engine):
            del cache[sid]  # the log is shorter than its snapshots say (or another game's)
            got = None
        if got is not None and got.last == meta.last:
            cache.move_to_end(sid)
            return got
        wait = busy.get(sid)
        if wait is None:
            break
        await wait.wait()  # another request is folding this log: share its work
    done = busy[sid] = trio.Event()
    try:
        if got is not None and meta.last - got.last <= EVERY and got.end is not None:
            # a few records more (a live log grew): folded here, in slices
            start = got.state_at_end()
            more = await _range(host, sid, got.last + 1, meta.last + 1)
            folded = await _fold_here(host, sid, meta.engine, start, more)
        else:
            start_bytes = got.end if got is not None else None
            heavy = host.heavy
            source = heavy.source
            if source is None:  # a store no other thread may read: its records, read here
                try:
                    source = ("records", await host.store.read(sid))
                except Exception as exc:  # noqa: BLE001
                    raise _unreadable(host, sid, exc) from None
            try:
                folded = await heavy.run(
                    fold_job, source, heavy.game(meta.engine), sid, meta.last, EVERY, start_bytes
                )
            except (Busy, HeavyFailed) as exc:
                raise ProtocolError(ErrorCode.UNAVAILABLE, str(exc)) from None
            folded = _job_result(host, sid, folded)
        if folded.last < meta.last:
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, f"the log of session {sid!r} changed while read"
            )
        if got is None:
            got = _Log(meta.engine, -1, None, None, frozenset(), Snapshots())
        got.take(folded)
        cache[sid] = got
        cache.move_to_end(sid)
        total = sum(lg.nbytes for lg in cache.values())
        while len(cache) > 1 and (len(cache) > CACHED_LOGS or total > CACHED_BYTES):
            total -= cache.popitem(last=False)[1].nbytes
        return got
    finally:
        del busy[sid]
        done.set()


def log_meta(host: Any, sid: str) -> Any:
    """What every op needs of a log, read without folding it (an awaitable of ``_Meta``:
    ``engine``, ``header``, ``last``, ``ended``, ``live``, ``faulted``).

    Raises:
        ProtocolError: ``unknown_session``, ``session_damaged``, ``unavailable``.
    """
    return _meta(host, sid)


def folded(host: Any, sid: str, meta: Any) -> Any:
    """The log's snapshots up to ``meta.last`` (an awaitable of ``_Log``, whose
    ``state_at_end()`` is the state after its last record): kept, or made by a heavy-work
    process (see :func:`_folded`).

    Raises:
        ProtocolError: ``game_faulted``, ``session_damaged``, ``unavailable``.
    """
    return _folded(host, sid, meta)


def _job_result(host: Any, sid: str, got: Any) -> Any:
    """A heavy job's result, or the error its log gives (``game_faulted`` when the game
    faulted in the job: see :func:`_faulted`)."""
    if isinstance(got, tuple) and got and got[0] == "unknown":
        raise ProtocolError(ErrorCode.UNKNOWN_SESSION, f"no session {sid!r}")
    if isinstance(got, tuple) and got and got[0] == "damaged":
        raise host._damage(sid, CorruptLog(host.store.path(sid), got[1], got[2]))
    if isinstance(got, tuple) and got and got[0] == "fault":
        _, seq, what, message = got
        where = "a fold" if seq is None else f"a fold at seq {seq}"
        raise _faulted(host, sid, where, what, message)
    return got


async def _fold_here(
    host: Any, sid: str, engine: Engine, state: SessionState, records: list[Record]
) -> Folded:
    """:func:`host.table.snapshots.fold_log` of a few records on the loop, in slices."""
    from host.table.snapshots import fold_log

    parts: list[Folded] = []
    try:
        for i in range(0, len(records), SLICE):
            with _game(host, sid, "a fold"):
                part = fold_log(engine, records[i : i + SLICE], EVERY, state)
            state = _end(part)
            parts.append(part)
            await give_way()
    except BadRecord as exc:
        raise host._damage(sid, CorruptLog(host.store.path(sid), exc.seq, exc.message)) from None
    if not parts:
        return Folded(state.seq, None, state, [], frozenset(), state.ended, 0)
    last = parts[-1]
    return Folded(
        last.last,
        last.end,
        last.state,
        [s for part in parts for s in part.snapshots],
        frozenset().union(*(part.tokens for part in parts)),
        last.ended,
        last.seats,
    )


def _end(part: Folded) -> SessionState:
    if part.state is not None:
        return part.state
    assert part.end is not None
    return load(part.end)


async def _viewer(
    host: Any,
    sid: str,
    meta: _Meta,
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
    if seat is not None and not 0 <= seat < _seat_count(meta.header):
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"no seat {seat}")
    if truth and not is_open:
        raise ProtocolError(
            ErrorCode.HIDDEN,
            "the full truth is shown only once the session ended and its game reveals its seed",
        )
    if seat is not None and not is_open and meta.faulted is None:  # (a faulted session's
        # events are null for every viewer: nothing to hide, and no fold runs its game code)
        want = hash_token(token) if token else None
        held = want is not None and (seat, want) in (await _folded(host, sid, meta)).tokens
        if not held:
            raise ProtocolError(ErrorCode.HIDDEN, f"seat {seat}'s view needs that seat's token")
    return seat


def _seat_count(header: Record) -> int:
    seats = header.data.get("seats")
    return len(seats) if isinstance(seats, list) else int(seats or 0)


async def _fold(
    host: Any, sid: str, engine: Engine, state: SessionState, records: list[Record]
) -> SessionState:
    """Fold ``records`` on the loop, a slice of :data:`SLICE` at a time, each slice a step
    within the game's budget (:func:`_game`).

    Raises:
        BadRecord: a record does not fold. ProtocolError: ``game_faulted``.
    """
    for i in range(0, len(records), SLICE):
        with _game(host, sid, "a fold"):
            state = engine.apply_all(state, records[i : i + SLICE])
        await give_way()
    return state


async def _state_at(host: Any, conn: Any, sid: str, meta: _Meta, seq: int) -> SessionState:
    """The state after record ``seq``: from the state this connection was last shown or the
    nearest snapshot, whichever is later, folding the records in between on the loop."""
    engine = meta.engine
    last = _shown.get(conn)
    base: SessionState | None = None
    if last is not None and last[0] == sid and last[1].seq <= seq and seq - last[1].seq <= EVERY:
        base = last[1]
    else:
        lg = await _folded(host, sid, meta)
        if seq == lg.last:
            base = lg.state_at_end()
        else:
            near = lg.snaps.nearest(seq)
            if near is not None:
                base = load(near[1])
            shown = last[1] if last is not None and last[0] == sid else None
            if shown is not None and shown.seq <= seq and (base is None or shown.seq > base.seq):
                base = shown
    try:
        if base is None:
            with _game(host, sid, "initial_state"):
                base = engine.initial(meta.header)
        if base.seq < seq:
            more = await _range(host, sid, base.seq + 1, seq + 1)
            state = await _fold(host, sid, engine, base, more)
        else:
            state = base
    except BadRecord as exc:
        raise ProtocolError(
            ErrorCode.SESSION_DAMAGED, f"the log of session {sid!r} does not fold: {exc}"
        ) from None
    if state.seq != seq:
        raise ProtocolError(ErrorCode.UNAVAILABLE, f"the log of session {sid!r} changed while read")
    _shown[conn] = (sid, state)
    return state


async def _verify(host: Any, sid: str, meta: _Meta, is_open: bool) -> Any:
    """Verify the log up to ``meta.last`` in a worker; one job per log and seq at a time (a
    request while it runs waits for its answer)."""
    running = _verifying.setdefault(host, {})
    key = (sid, meta.last)
    job = running.get(key)
    if job is None:
        job = running[key] = _Shared()
        try:
            heavy = host.heavy
            source = heavy.source
            if source is None:
                try:
                    source = ("records", await host.store.read(sid))
                except Exception as exc:  # noqa: BLE001
                    raise _unreadable(host, sid, exc) from None
            job.result = await heavy.run(
                verify_job, source, heavy.game(meta.engine), sid, meta.last
            )
        except (Busy, HeavyFailed) as exc:
            job.error = ProtocolError(ErrorCode.UNAVAILABLE, str(exc))
        except ProtocolError as exc:
            job.error = exc
        except Exception as exc:  # noqa: BLE001 - a worker that died, ...
            log.error("verify_failed", session=sid, error=repr(exc))
            job.error = ProtocolError(ErrorCode.UNAVAILABLE, "the verify could not run; retry")
        finally:
            del running[key]
            job.done.set()
    else:
        job.waiters += 1
        await job.done.wait()
    if job.error is not None:
        raise ProtocolError(job.error.code, job.error.message, **job.error.extra)
    got = _job_result(host, sid, job.result)
    _, n, diff, warning = got
    return Verified(
        diff is None,
        n,
        None if diff is None else diff[0],
        # the explanation quotes records whole: hidden cards included
        None if diff is None or not is_open else diff[1],
        warning,
    )


class _Shared:
    """One job's answer, shared by the requests that asked for it while it ran."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.waiters = 0  # requests that joined it
        self.result: Any = None
        self.error: ProtocolError | None = None


async def _fork(host: Any, conn: Any, sid: str, meta: _Meta, seq: int) -> Forked:
    engine = meta.engine
    new_sid = secrets.token_hex(8)
    if not 0 <= seq <= meta.last:
        raise ProtocolError(
            ErrorCode.BAD_REQUEST, f"cannot fork at {seq}: the seq must be 0..{meta.last}"
        )
    records = await _range(host, sid, 0, min(seq + 2, meta.last + 1))
    try:
        lines = await trio.to_thread.run_sync(fork_records, records, seq, new_sid)
    except ValueError as exc:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"cannot fork at {seq}: {exc}") from None
    state = await _state_at(host, conn, sid, meta, seq)
    del records
    with _game(host, sid, "to_act"):
        waiting = engine.to_act(state) if state.started else ()
    if state.started and not waiting:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"nothing is left to play after seq {seq}")
    host.check_room()
    host._check_create(conn)
    # every human seat of the fork gets a new token, given to the forker only
    tokens: dict[str, str] = {}
    for line in lines:
        if line["type"] == "seat_taken" and not line.get("bot"):
            token = new_token()
            line["token_hash"] = hash_token(token)
            tokens[str(line["seat"])] = token
    try:
        await host.store.create(new_sid, lines)
    except OSError as exc:
        log.error("fork_failed", error=str(exc))
        raise ProtocolError(ErrorCode.UNAVAILABLE, "the host cannot write a new log now") from None
    host._unloaded.add(new_sid)
    await host._load_session(new_sid)
    session = host.sessions.get(new_sid)
    if session is None:
        raise ProtocolError(ErrorCode.INTERNAL, "internal error: the fork did not start")
    log.info("session_forked", session=new_sid, forked_from=sid, seq=seq)
    return Forked(
        new_sid,
        engine.game.info.id,
        {"session": sid, "seq": seq},
        session.seat_list(),
        session.state.free_seats,
        session.state.seq,
        tokens,
    )
