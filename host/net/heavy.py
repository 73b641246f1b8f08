"""Heavy work off the event loop: folding or verifying a whole long log, bounded.

The host runs every table on one trio thread. A job that must fold a whole log (the first
``replay`` of a long log builds its snapshots, ``verify`` re-runs every cause, loading a long
unfinished session) would hold that thread for seconds, and a worker *thread* would still hold
the GIL against it. So such jobs run in worker processes (``serve --heavy-workers N``, 2 by
default, started with the ``spawn`` method on the first job and kept), each of which loads the
same games as the host, reopens the store read-only (a file store's log by its path;
PostgreSQL on its own connection) and steps aside on the CPU (:func:`step_aside`: a lower
priority and every CPU but one), so that on a busy machine the
tables come first.

**Bounded.** At most N jobs run at once, and at most :data:`MAX_WAITING` more wait for a worker;
one more is refused (:class:`Busy`, answered ``unavailable``) rather than queued without end.
A job is a generator that yields between stretches of work (a stretch of a fold, one cause of a
verify, a thousand records read): each stretch runs within the game budget
(:mod:`host.plugins.budget`) — a worker is the main thread of its own process and runs its own
:class:`~host.plugins.budget.Budget` with the host's ``--game-time`` and ``--game-memory`` — so a
game that loops or hoards in a fold or a verify is stopped and reported as the game's fault
(a fold's result is ``("fault", seq, what, message)``; verify names the seq in its answer)
instead of pinning the worker. Each finished stretch moves the worker's progress counter; the
host stops (SIGKILL) a worker whose job made no progress for :data:`JOB_STALL` seconds or ran
:data:`JOB_WALL` seconds in all (what the budget cannot interrupt: one long call into C), and
the waiting request gets :class:`HeavyFailed` (answered ``unavailable``); the next job starts a
new worker. A request that is cancelled while its job runs stops that worker too. On shutdown
:meth:`HeavyWork.close` kills every worker at once: no job holds up a SIGTERM. A worker dies with
its host, even a SIGKILLed one (``PR_SET_PDEATHSIG`` where Linux has it, and a watch of its
parent's pid every second).

A host whose games cannot be loaded by module name in another process (a plugin object that is
not a module, as tests register) or whose store cannot be reopened (a memory store), or run with
``--heavy-workers 0``, runs the same jobs on its event loop instead, a stretch at a time, each
stretch a step of the host's budget, with the other tables served between stretches (and the
same bounds on how many run and wait).

Jobs (:func:`fold_job`, :func:`verify_job`) are plain generator functions; their results are
plain data (snapshots as bytes, see :mod:`host.table.snapshots`). A damaged log comes back as
``("damaged", seq, message)``, an unknown one as ``("unknown",)``: exceptions with their own
arguments do not always cross a process boundary.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import itertools
import multiprocessing
import os
import signal
import threading
import time
import types
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import structlog
import trio
import trio.testing

from host.plugins.budget import Budget, BudgetExceeded
from host.plugins.faults import GameFault
from host.store.base import CorruptLog, UnknownSession
from host.table.engine import BadRecord, Engine, Record, SessionState
from host.table.history import seed_difference, version_warning
from host.table.snapshots import EVERY, fold_steps, load

__all__ = [
    "JOB_STALL",
    "JOB_WALL",
    "MAX_WAITING",
    "NICE",
    "SPARE_CPUS",
    "Busy",
    "HeavyFailed",
    "HeavyWork",
    "fold_job",
    "give_way",
    "page_job",
    "replay_job",
    "load_job",
    "step_aside",
    "stretch",
    "verify_job",
]

log = structlog.get_logger("gamehost.heavy")

MAX_WAITING = 8
"""Heavy jobs that may wait for a worker; one more is refused (:class:`Busy`)."""
NICE = 10
"""How much lower the worker processes' CPU priority is than the host's (``os.nice``)."""
SPARE_CPUS = 1
"""CPUs of the host's (the first of those it may use) that its worker processes leave to it."""
JOB_STALL = 60.0
"""Seconds a job in a worker may go without finishing a stretch before the worker is killed."""
JOB_WALL = 600.0
"""Seconds a job in a worker may run in all before the worker is killed."""
HERE_SLICE = 0.01
"""Seconds of stretches a job run on the event loop does between two checkpoints."""
READ_STRETCH = 1000
"""Records a job reads between two yields."""
GIVE_WAY = 0.02
"""The longest a slice of heavy work on the loop waits for the tables (:func:`give_way`),
seconds."""

Source = tuple[str, Any]
"""Where a job reads a log: ``("file", sessions dir)``, ``("pg", url)`` or, on the event loop
only, ``("records", the raw records)``."""


async def give_way(longest: float = GIVE_WAY) -> None:
    """Let the tables go first: return once every other task of the event loop is blocked (on
    a client, a timer, the store) and no socket is ready, or after ``longest`` seconds even if
    they are not (so heavy work is slowed by a busy host, never stopped). Heavy work done on the
    loop a slice at a time (a ``log`` page, a fold, a job run here) awaits this between two
    slices, where a plain checkpoint would let a slice run in every turn of the loop: an ``act``
    that awaits its append three times then waited behind three slices of a debugger's page.

    trio has no task priorities; this is its idle wait (``trio.testing.wait_all_tasks_blocked``,
    whose scheduler polls the sockets before it wakes the waiter), bounded by ``longest``."""
    with trio.move_on_after(longest):
        await trio.testing.wait_all_tasks_blocked()
    await trio.lowlevel.checkpoint()


class Busy(Exception):
    """Every worker is busy and :data:`MAX_WAITING` jobs wait already."""


class HeavyFailed(Exception):
    """A job could not finish: its worker died, or was stopped (no progress for
    :data:`JOB_STALL` seconds, or :data:`JOB_WALL` in all), or the host is shutting down."""


# -- the jobs (run in a worker process, or on the host's loop) -----------------------------------
_registry: Any = None
_stores: dict[str, Any] = {}


def _engine(game: str | Engine) -> Engine:
    if isinstance(game, Engine):
        return game
    return _registry.engines[game]


def _lines(source: Source, sid: str) -> tuple[Path, list[bytes]]:
    """A file store's log as its lines (read whole: a worker's own memory), blocking."""
    from host.store.file import _open_log

    path = Path(source[1]) / f"{sid}.jsonl"
    try:
        fd = _open_log(path, os.O_RDONLY)
    except FileNotFoundError:
        raise UnknownSession(f"no session {sid}") from None
    with open(fd, "rb") as f:
        data = f.read()
    return path, data.split(b"\n")


def _stream(source: Source, sid: str, first: int, upto: int) -> Iterator[Record]:
    """Records ``first .. upto`` of a log, made one at a time (a file store: from its lines,
    each checked against its checksum as the store reads it); blocking."""
    if source[0] != "file":
        yield from _read(source, sid, first, upto)
        return
    from host.store.base import check_record, decode_line

    path, lines = _lines(source, sid)
    for seq in range(first, upto + 1):
        if seq >= len(lines) - 1:  # the last element is what follows the last newline
            raise CorruptLog(path, seq, "the log ends before this record")
        rec = check_record(path, seq, decode_line(path, seq, lines[seq]))
        lines[seq] = b""
        yield Record.from_json(rec)


def _read(source: Source, sid: str, first: int, upto: int) -> list[Record]:
    """Records ``first .. upto`` of a log (blocking)."""
    kind, where = source
    if kind == "records":
        raw = where[first : upto + 1]
    elif kind == "file":
        from host.store.file import read_log

        try:
            raw = read_log(Path(where) / f"{sid}.jsonl")[first : upto + 1]
        except FileNotFoundError:
            raise UnknownSession(f"no session {sid}") from None
    else:
        from host.store.pg import PostgresStore, parse_rows

        store = _stores.get(where)
        if store is None:
            store = _stores[where] = PostgresStore(where)
        rows = store.read_rows(sid, first - 1)[: upto + 1 - first]
        raw = parse_rows(store.path(sid), rows, first, session=sid)
    return [Record.from_json(r) for r in raw]


class _Last:
    """An iterator of records that remembers the seq of the last one it gave."""

    def __init__(self, records: Iterator[Record]) -> None:
        self.records = records
        self.seq: int | None = None

    def __iter__(self) -> Iterator[Record]:
        for rec in self.records:
            self.seq = rec.seq
            yield rec


def fold_job(
    source: Source,
    game: str | Engine,
    sid: str,
    upto: int,
    every: int = EVERY,
    start: bytes | None = None,
) -> Generator[Any, None, Any]:
    """Fold a log up to seq ``upto`` (from the snapshot ``start`` when given, else from its
    header), making snapshots every ``every`` records: a :class:`host.table.snapshots.Folded`,
    or ``("damaged", seq, message)`` / ``("unknown",)`` / ``("fault", seq, what, message)``
    (the game faulted folding it: ``what`` is ``time``, ``memory`` or ``error``)."""
    records: _Last | None = None
    try:
        state = None if start is None else load(start)
        first = 0 if state is None else state.seq + 1
        records = _Last(_stream(source, sid, first, upto))
        return (yield from fold_steps(_engine(game), iter(records), every, state))
    except UnknownSession:
        return ("unknown",)
    except CorruptLog as exc:
        return ("damaged", exc.seq, exc.message)
    except BadRecord as exc:
        return ("damaged", exc.seq, f"does not fold: {exc.message}")
    except BudgetExceeded as exc:
        return ("fault", records.seq if records else None, exc.what, exc.message)
    except GameFault as exc:
        return ("fault", exc.seq, "error", exc.message)


def load_job(
    source: Source,
    game: str | Engine,
    sid: str,
    last: int,
    window: int,
    recheck: bool = True,
    skim: bool = False,
) -> Generator[Any, None, Any]:
    """:func:`host.table.loading.load_steps` of a log's records ``0 .. last``: a
    :class:`host.table.loading.Loaded`, or ``("damaged", seq, message)`` / ``("unknown",)`` /
    ``("fault", seq, what, message)`` (the game faulted loading it)."""
    from host.table.loading import load_steps

    records: _Last | None = None
    try:
        records = _Last(_stream(source, sid, 0, last))
        return (
            yield from load_steps(
                _engine(game), iter(records), last, window, recheck=recheck, skim=skim
            )
        )
    except UnknownSession:
        return ("unknown",)
    except CorruptLog as exc:
        return ("damaged", exc.seq, exc.message)
    except BadRecord as exc:
        return ("damaged", exc.seq, f"does not fold: {exc.message}")
    except BudgetExceeded as exc:
        return ("fault", records.seq if records else None, exc.what, exc.message)
    except GameFault as exc:
        return ("fault", exc.seq, "error", exc.message)


PAGE_SLICE = 100
"""Records a page or replay job runs game code on between two yields."""


def page_job(
    source: Source,
    game: str | Engine,
    sid: str,
    first: int,
    stop: int,
    viewer: int | None,
    truth: bool,
    seed: str | None,
    game_off: bool,
    max_bytes: int,
    names: list[str] | None = None,
) -> Any:
    """The records ``first <= seq < stop`` of a file store's log as a ``log`` page shows them
    to ``viewer`` (:func:`host.table.visibility.log_record`), each as its JSON text, until
    their lines (each plus one byte) pass ``max_bytes`` (at least one record is given):
    ``("page", last seq or None, JSON text of the list of them)`` (one bytes object: the
    host writes it into its reply as it is), or ``("damaged", seq, message)`` /
    ``("unknown",)`` / ``("bad", seq, message)`` (an event the game cannot read) /
    ``("fault", seq, what, message)`` (the game's ``redact`` faulted: ``what`` is ``time``,
    ``memory`` or ``error``). With ``names`` (each seat's name as texts use it), each record
    also carries its ``text`` (:class:`host.table.words.Words`).

    Reading the records (the store's line index: the first read of a log indexes the whole
    file) is the host's work: it is done first, outside the game's budget; only the game's
    part (redact, words) runs within it, :data:`PAGE_SLICE` records a stretch. Run in a
    worker process."""
    try:
        store = _file_store(source)
        raw = store._read_range(sid, store.path(sid), first, stop)
    except (UnknownSession, CorruptLog) as exc:
        return _read_failed(exc, None)
    steps = _page_steps(game, raw, viewer, truth, seed, game_off, max_bytes, names)
    return _in_stretches(steps, "page_job")


def _page_steps(
    game: str | Engine,
    raw: list[dict[str, Any]],
    viewer: int | None,
    truth: bool,
    seed: str | None,
    game_off: bool,
    max_bytes: int,
    names: list[str] | None,
) -> Generator[None, None, Any]:
    import orjson

    from host.table.visibility import log_record
    from host.table.words import Words

    engine = _engine(game)
    words = None if names is None else Words(None if game_off else engine.game)
    out: list[bytes] = []
    shown: int | None = None
    size = 0
    seq: int | None = None
    try:
        for i, r in enumerate(raw):
            if i and i % PAGE_SLICE == 0:
                yield
            rec = Record.from_json(r)
            seq = rec.seq
            item = log_record(engine, rec, viewer, truth, seed, game_off)
            if words is not None:
                body = item.get("event") if rec.type == "event" else item
                item["text"] = words.record(rec.type, body, viewer, names or [])
            line = orjson.dumps(item)
            size += len(line) + 1
            if out and size > max_bytes:
                break
            out.append(line)
            shown = rec.seq
    except (BadRecord, BudgetExceeded, GameFault) as exc:
        return _read_failed(exc, seq)
    except TypeError as exc:  # orjson: what the game gave is not JSON
        return ("fault", seq, "error", f"the redacted event is not JSON: {exc}")
    return ("page", shown, b"[" + b",".join(out) + b"]")


def _file_store(source: Source) -> Any:
    """A file store on a ``("file", sessions dir)`` source, for reading only (kept per dir: its
    line indexes are what make a range cheap to read again)."""
    from host.store.file import FileStore

    store = _stores.get(source[1])
    if store is None:
        store = _stores[source[1]] = FileStore(source[1], logs_in_root=True)
    return store


def replay_job(
    source: Source,
    game: str | Engine,
    sid: str,
    base: bytes | None,
    seq: int,
    viewer: int | None,
    truth: bool,
) -> Any:
    """The state of a file store's log after record ``seq``, as ``replay`` answers it: from the
    snapshot ``base`` (:func:`host.table.snapshots.load`; None: from the header), folding the
    records after it up to ``seq``, :data:`PAGE_SLICE` a stretch, then the view for ``viewer``
    (with ``truth``, the whole state). ``("state", seats, started, ended, to_act, JSON bytes of
    the view)`` (``seats``: ``(name, bot)`` or None each), or ``("changed",)`` (the log ends
    before ``seq``) / ``("unknown",)`` / ``("damaged", seq, message)`` / ``("bad", seq,
    message)`` (a record that does not fold) / ``("fault", seq, what, message)`` (the game
    faulted: ``what`` is ``time``, ``memory`` or ``error``).

    As :func:`page_job`, the records are read first, outside the game's budget; the fold and
    the view run within it. Run in a worker process."""
    try:
        state = None if base is None else load(base)
        store = _file_store(source)
        first = 0 if state is None else state.seq + 1
        raw = store._read_range(sid, store.path(sid), first, seq + 1) if first <= seq else []
    except (UnknownSession, CorruptLog) as exc:
        return _read_failed(exc, None)
    if state is None and not raw:
        return ("unknown",)
    return _in_stretches(_replay_steps(game, state, raw, seq, viewer, truth), "replay_job")


def _replay_steps(
    game: str | Engine,
    state: SessionState | None,
    raw: list[dict[str, Any]],
    seq: int,
    viewer: int | None,
    truth: bool,
) -> Generator[None, None, Any]:
    import orjson

    engine = _engine(game)
    at: int | None = None
    try:
        records = [Record.from_json(r) for r in raw]
        if state is None:
            state = engine.initial(records.pop(0))
        at = state.seq
        for i in range(0, len(records), PAGE_SLICE):
            if i:
                yield
            state = engine.apply_all(state, records[i : i + PAGE_SLICE])
            at = state.seq
        if state.seq != seq:
            return ("changed",)
        if truth:
            try:  # the whole state must encode as JSON: the game's fault, not the host's
                shown = orjson.dumps(engine.codec.to_wire(state.game))
            except (BudgetExceeded, GameFault):
                raise
            except Exception as exc:  # noqa: BLE001 - the game's state, whatever it raised
                return ("fault", seq, "error", f"the state is not JSON: {exc}")
        else:
            shown = orjson.dumps(engine.view_wire(state, viewer))
        to_act = list(engine.to_act(state)) if state.started and not state.ended else []
        seats = [None if s is None else (s.name, s.bot) for s in state.seats]
        return ("state", seats, state.started, state.ended, to_act, shown)
    except (BadRecord, BudgetExceeded, GameFault) as exc:
        return _read_failed(exc, at)


def _read_failed(exc: Exception | BudgetExceeded, seq: int | None) -> tuple[Any, ...]:
    """What a page or replay job answers for ``exc`` (``seq``: the record it was at, for a
    fault without one of its own): ``("unknown",)``, ``("damaged", seq, message)``, ``("bad",
    seq, message)`` or ``("fault", seq, what, message)``."""
    if isinstance(exc, UnknownSession):
        return ("unknown",)
    if isinstance(exc, CorruptLog):
        return ("damaged", exc.seq, exc.message)
    if isinstance(exc, BadRecord):
        return ("bad", exc.seq, exc.message)
    if isinstance(exc, BudgetExceeded):
        return ("fault", seq, exc.what, exc.message)
    assert isinstance(exc, GameFault)
    return ("fault", exc.seq if exc.seq is not None else seq, "error", exc.message)


def verify_job(
    source: Source, game: str | Engine, sid: str, upto: int
) -> Generator[None, None, Any]:
    """:func:`host.table.history.verify_log` of a log up to seq ``upto`` (one cause per
    stretch): ``("verified", records, difference or None, version warning or None)``, or
    ``("damaged", seq, message)`` / ``("unknown",)``. A game that faults on replay, past its
    budget too, is a difference at its seq.

    The records are read as they are checked and not kept (:class:`_Checked`): a long log is
    verified in the memory of its lines. A record that does not read is the answer
    (``damaged``) even past a difference, as when the log was read whole first."""
    log = _Checked(_stream(source, sid, 0, upto))
    header = next(iter(log), None)  # the session's existence and its header, read first
    if log.slow is not None:
        return _too_slow(log.slow)
    if log.unknown:
        return ("unknown",)
    if log.damage is not None:
        return ("damaged", log.damage.seq, log.damage.message)
    if header is None:
        return ("unknown",)
    engine = _engine(game)
    try:
        diff = yield from engine.verify_steps(log.records(header))
    except BudgetExceeded as exc:  # landed between two causes: the game's all the same
        diff = (0, f"the game faults on replay: past its {exc.what} budget ({exc.message})")
    try:
        for n, _ in enumerate(log.rest(), 1):  # a difference stopped the re-run: read on for
            if n % READ_STRETCH == 0:  # the seed and for damage, a stretch at a time
                yield
    except BudgetExceeded as exc:  # between two records
        return _too_slow(exc)
    if log.slow is not None:
        return _too_slow(log.slow)
    if log.damage is not None:
        return ("damaged", log.damage.seq, log.damage.message)
    diff = seed_difference(log.kept) or diff
    return ("verified", log.count, diff, version_warning(engine, [header]))


def _too_slow(exc: BudgetExceeded) -> tuple[Any, ...]:
    """:func:`verify_job`'s answer when the budget ran out while the log was read."""
    return ("verified", 0, (0, f"the log could not be read in time ({exc.message})"), None)


class _Checked:
    """The records of a log as :func:`verify_job` reads them: each once, in order, not kept
    but for the first and every ``ended`` one (``kept``, what the seed check reads); the
    iteration stops at a record that does not read (``damage``), a missing log (``unknown``)
    or the budget's interruption landing while a record is read (``slow``: reading is no game
    code); ``count``: records read."""

    def __init__(self, records: Iterator[Record]) -> None:
        self._records = records
        self.kept: list[Record] = []
        self.count = 0
        self.damage: CorruptLog | None = None
        self.unknown = False
        self.slow: BudgetExceeded | None = None
        self._iter = self._read()

    def _read(self) -> Iterator[Record]:
        records = self._records
        while True:
            try:
                rec = next(records)
            except StopIteration:
                return
            except UnknownSession:
                self.unknown = True
                return
            except CorruptLog as exc:
                self.damage = exc
                return
            except BudgetExceeded as exc:  # landed in the reading: no game code's fault
                self.slow = exc
                return
            self.count += 1
            if not self.kept or rec.type == "ended":
                self.kept.append(rec)
            yield rec

    def __iter__(self) -> Iterator[Record]:
        return self._iter

    def records(self, header: Record) -> Iterator[Record]:
        """``header`` (read already), then the rest (a chain: dropping it does not close the
        reading, which :meth:`rest` goes on with)."""
        return itertools.chain((header,), self._iter)

    def rest(self) -> Iterator[Record]:
        """What was not read yet."""
        return self._iter


def stretch(
    budget: Budget,
    job: Generator[Any, None, Any],
    what: str,
    session: str | None = None,
    seq: int = 0,
) -> tuple[bool, Any]:
    """Run one stretch of ``job`` (to its next yield) within a step of ``budget`` (for
    ``session`` at ``seq``, when the job runs one session's game: the crash marker names it):
    ``(True, result)`` once it returned, else ``(False, None)``. The budget's interruption,
    should it land between the job's own code and the step's end, is thrown into the job to
    handle."""
    try:
        with budget.step(what, session, seq):
            try:
                next(job)
            except StopIteration as done:
                return True, done.value
        return False, None
    except BudgetExceeded as exc:
        if job.gi_frame is None:  # it ended raising it: the job did not handle it
            return True, ("fault", None, exc.what, exc.message)
        try:
            job.throw(exc)
        except StopIteration as done:
            return True, done.value
        except BudgetExceeded:
            pass
        job.close()
        return True, ("fault", None, exc.what, exc.message)


# -- the worker process --------------------------------------------------------------------------
_budget: Budget | None = None
_progress: Any = None


def _die_with_parent(parent: int) -> None:
    """End this process when the host that started it is gone, even SIGKILLed."""
    with contextlib.suppress(Exception):  # Linux: the kernel sends SIGKILL when it goes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="gamehost parent watch", daemon=True).start()


def step_aside(nice: int = NICE) -> None:
    """Make the calling process give way to its host on the CPU: ``nice`` lower priority, and
    every CPU the host may use but the first (:data:`SPARE_CPUS`), so that the host and its
    store threads always find one core free of heavy work. Each step is skipped where the
    system does not have it or refuses it.

    (The idle scheduling policy, ``SCHED_IDLE``, was tried too: the tables gained a little
    more, but on a machine kept busy by other programs a worker then got no CPU at all and
    every heavy request ended ``unavailable`` after :data:`JOB_STALL` seconds; BENCHMARKS.md.)"""
    with contextlib.suppress(OSError):  # not allowed: the host's priority, then
        os.nice(nice)
    if hasattr(os, "sched_getaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) > SPARE_CPUS:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, cpus[SPARE_CPUS:])


def _worker_main(
    conn: Any,
    progress: Any,
    entrypoints: bool,
    modules: list[tuple[str, str]],
    nice: int,
    seconds: float | None,
    memory: int | None,
    parent: int,
) -> None:
    """A worker process: load the games, start its own budget, then run the jobs it is sent,
    one at a time, until its host closes the pipe (or goes)."""
    global _registry, _budget, _progress
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is for the host to handle
    _die_with_parent(parent)
    if nice:
        step_aside(nice)
    from host.plugins.registry import load_registry

    plugins = [(name, importlib.import_module(mod)) for name, mod in modules]
    _registry = load_registry(plugins, entrypoints=entrypoints)
    _progress = progress
    _budget = Budget(seconds, memory)
    _budget.start()
    while True:
        try:
            fn, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, Any] = ("ok", _run(fn, args))
        except BaseException as exc:  # noqa: BLE001 - told to the host, never the worker's end
            reply = ("error", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return
        except Exception as exc:  # noqa: BLE001 - a result that does not pickle
            conn.send(("error", f"the result does not pickle: {exc}"))


def _run(fn: Any, args: tuple[Any, ...]) -> Any:
    job = fn(*args)
    if not isinstance(job, types.GeneratorType):
        return job
    return _in_stretches(job, fn.__name__)


def _in_stretches(job: Generator[Any, None, Any], name: str) -> Any:
    """Run ``job`` to its end, a stretch at a time within this worker's budget, moving the
    progress counter after each (outside a worker: to its end, unbounded)."""
    if _budget is None:
        try:
            while True:
                next(job)
        except StopIteration as done:
            return done.value
    while True:
        done, value = stretch(_budget, job, f"a heavy job ({name})")
        _progress.value += 1
        if done:
            return value


# -- the host side ------------------------------------------------------------------------------
def _worker_spec(registry: Any) -> tuple[bool, list[tuple[str, str]]] | None:
    """How a worker process loads the host's games (None: it cannot, by module name)."""
    pm = registry.pm
    from_dists = {id(p) for p, _ in pm.list_plugin_distinfo()}
    modules = []
    for name, plugin in pm.list_name_plugin():
        if id(plugin) in from_dists or plugin is None:
            continue
        mod = getattr(plugin, "__name__", None)
        if not isinstance(plugin, type(os)) or not isinstance(mod, str):
            return None  # an object, not a module: another process cannot import it
        modules.append((name, mod))
    return (bool(from_dists), modules)


class _Worker:
    """One worker process, its end of the pipe and its progress counter."""

    def __init__(self, spec: tuple[bool, list[tuple[str, str]]], budget: Budget) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.progress = ctx.RawValue("q", 0)
        self.conn, child = ctx.Pipe()
        entrypoints, modules = spec
        self.proc = ctx.Process(
            target=_worker_main,
            args=(
                child,
                self.progress,
                entrypoints,
                modules,
                NICE,
                budget.seconds,
                budget.memory,
                os.getpid(),
            ),
            name="gamehost heavy",
            daemon=True,
        )
        self.proc.start()  # from the loop's (main) thread: PR_SET_PDEATHSIG follows it
        child.close()

    def kill(self) -> None:
        """Stop the process at once (SIGKILL) and reap it."""
        with contextlib.suppress(Exception):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.join(1.0)


class HeavyWork:
    """Runs heavy jobs for one host: in worker processes when it can (see the module
    docstring), else on the event loop a stretch at a time; at most ``workers`` at once and
    :data:`MAX_WAITING` waiting.

    Args:
        registry: the host's games.
        store: the host's store (a file store's logs and a PostgreSQL URL can be reopened).
        workers: processes (0: on the event loop instead).
        budget: the host's budget for game code: its limits are every worker's, and jobs on
            the event loop run within its steps.

    Attributes:
        stall: seconds a job may go without progress before its worker is killed
            (:data:`JOB_STALL`).
        wall: seconds a job may run in all before its worker is killed (:data:`JOB_WALL`).
    """

    def __init__(
        self, registry: Any, store: Any, workers: int = 2, budget: Budget | None = None
    ) -> None:
        self.registry = registry
        self.workers = max(workers, 0)
        spec = _worker_spec(registry) if self.workers else None
        self.source: Source | None = _source(store)
        self._spec = spec if self.source is not None else None
        self.budget = budget if budget is not None else Budget(None, None)
        self.limiter = trio.CapacityLimiter(max(self.workers, 1))
        self.max_waiting = MAX_WAITING
        self.stall = JOB_STALL
        self.wall = JOB_WALL
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._closed = False

    @property
    def in_process(self) -> bool:
        """Jobs run in worker processes (not on the host's event loop)."""
        return self._spec is not None

    def game(self, engine: Engine) -> str | Engine:
        """What a job is given to find a game's engine."""
        return engine.game.info.id if self.in_process else engine

    def pids(self) -> list[int]:
        """The worker processes running now."""
        return [w.proc.pid for w in (*self._idle, *self._busy) if w.proc.pid is not None]

    async def run(
        self,
        fn: Any,
        *args: Any,
        wait: bool = False,
        session: str | None = None,
        seq: int = 0,
    ) -> Any:
        """``fn(*args)`` in a worker (a job: a generator function, run a stretch at a time
        within the game budget; any other function just called); its result.

        Args:
            wait: wait for a slot however many wait already (the host's own jobs, such as
                loading its sessions, which are each asked for once).
            session, seq: the session (and the last seq of its log) whose game the job runs,
                for the crash marker when the job runs on the event loop (no workers).

        Raises:
            Busy: every worker busy and :data:`MAX_WAITING` jobs waiting.
            HeavyFailed: the worker died or was stopped, or the host is shutting down.
        """
        if (
            not wait
            and self.limiter.available_tokens == 0
            and self.limiter.statistics().tasks_waiting >= self.max_waiting
        ):
            raise Busy("every heavy-work slot of this host is busy; retry later")
        async with self.limiter:
            if self._closed:
                raise HeavyFailed("the host is shutting down")
            if self._spec is None:
                return await self._run_here(fn, args, session, seq)
            try:
                worker = self._idle.pop() if self._idle else _Worker(self._spec, self.budget)
            except OSError as exc:
                raise HeavyFailed(f"no heavy-work process could start: {exc}") from None
            self._busy.add(worker)
            ok = False
            try:
                result = await self._run_in(worker, fn, args)
                ok = True
            finally:
                self._busy.discard(worker)
                if ok and not self._closed:
                    self._idle.append(worker)
                else:  # failed, cancelled or closing: its state is unknown, it goes
                    worker.kill()
                    worker.conn.close()
            return result

    async def run_here(self, fn: Any, *args: Any, session: str | None = None, seq: int = 0) -> Any:
        """``fn(*args)`` on the event loop, a stretch at a time within the host's budget (a
        short job the host does not send to a worker), outside the bounds of :meth:`run`;
        ``session`` and ``seq`` as for :meth:`run`."""
        return await self._run_here(fn, args, session, seq)

    async def _run_here(
        self, fn: Any, args: tuple[Any, ...], session: str | None = None, seq: int = 0
    ) -> Any:
        """Run a job on the event loop, a stretch at a time within the host's budget, giving
        way to the tables (:func:`give_way`) every :data:`HERE_SLICE` seconds of stretches."""
        job = fn(*args)
        if not isinstance(job, types.GeneratorType):
            return job
        what = f"a heavy job ({getattr(fn, '__name__', 'job')})"
        until = time.monotonic() + HERE_SLICE
        while True:
            done, value = stretch(self.budget, job, what, session, seq)
            if done:
                return value
            if time.monotonic() >= until:
                await give_way()
                until = time.monotonic() + HERE_SLICE

    async def _run_in(self, worker: _Worker, fn: Any, args: tuple[Any, ...]) -> Any:
        """Send a job to a worker and wait for its answer, stopping the worker when the job
        makes no progress for :attr:`stall` seconds or runs :attr:`wall` seconds in all."""
        try:
            worker.conn.send((fn, args))
        except (OSError, ValueError) as exc:
            raise HeavyFailed(f"a heavy-work process is gone ({exc})") from None
        start = moved = time.monotonic()
        seen = worker.progress.value
        while True:
            with trio.move_on_after(1.0) as waited:
                try:
                    await trio.lowlevel.wait_readable(worker.conn)
                except trio.ClosedResourceError:
                    raise HeavyFailed("the host is shutting down") from None
            if not waited.cancelled_caught:
                break
            now = time.monotonic()
            if worker.progress.value != seen:
                seen, moved = worker.progress.value, now
            if now - moved > self.stall or now - start > self.wall:
                why = (
                    f"no progress for {self.stall:g} s"
                    if now - moved > self.stall
                    else f"past {self.wall:g} s in all"
                )
                log.error("heavy_job_stopped", job=fn.__name__, why=why, pid=worker.proc.pid)
                raise HeavyFailed(f"the heavy job was stopped: {why}")
        try:
            kind, value = await trio.to_thread.run_sync(worker.conn.recv)
        except (EOFError, OSError):
            if self._closed:
                raise HeavyFailed("the host is shutting down") from None
            code = worker.proc.exitcode
            log.error("heavy_worker_died", job=fn.__name__, exitcode=code)
            raise HeavyFailed(f"a heavy-work process died (exit code {code})") from None
        if kind != "ok":
            log.error("heavy_job_failed", job=fn.__name__, error=value)
            raise HeavyFailed(f"the heavy job failed: {value}")
        return value

    def close(self) -> None:
        """Stop every worker process at once (SIGKILL: a job running is abandoned, its
        request answered ``unavailable``); no job starts after this."""
        self._closed = True
        for worker in self._idle:
            worker.kill()
            worker.conn.close()
        self._idle.clear()
        for worker in list(self._busy):  # their waiting task closes the pipe
            worker.kill()


def _source(store: Any) -> Source | None:
    from host.store.file import FileStore
    from host.store.pg import PostgresStore

    if isinstance(store, FileStore):
        return ("file", str(store.dir))
    if isinstance(store, PostgresStore):
        return ("pg", store.url)
    return None
