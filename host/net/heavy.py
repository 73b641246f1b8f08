"""Heavy work off the event loop: folding or verifying a whole long log.

The host runs every table on one trio thread. A job that must fold a whole log (the first
``replay`` of a long log builds its snapshots, ``verify`` re-runs every cause) would hold that
thread for seconds, and a worker *thread* would still hold the GIL against it. So such jobs run
in worker processes (``serve --heavy-workers N``, 2 by default; a
``concurrent.futures.ProcessPoolExecutor`` of the ``spawn`` kind, made on the first job), each
of which loads the same games as the host, reopens the store read-only (a file store's log by
its path; PostgreSQL on its own connection) and runs at a lower CPU priority
(:data:`NICE`), so that on a busy machine the tables come first.

Bounded: at most N jobs run at once, and at most :data:`MAX_WAITING` more wait for a worker;
one more is refused (:class:`Busy`, answered ``unavailable``) rather than queued without end.
A host whose games cannot be loaded by module name in another process (a plugin object that is
not a module, as tests register) or whose store cannot be reopened (a memory store), or run with
``--heavy-workers 0``, runs the same jobs in a worker thread instead, with the same bounds.

Jobs (:func:`fold_job`, :func:`verify_job`) are plain functions; their results are plain data
(snapshots as bytes, see :mod:`host.table.snapshots`). A damaged log comes back as
``("damaged", seq, message)``, an unknown one as ``("unknown",)``: exceptions with their own
arguments do not always cross a process boundary.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib
import multiprocessing
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import structlog
import trio

from host.store.base import CorruptLog, UnknownSession
from host.table.engine import BadRecord, Engine, Record
from host.table.history import verify_log, version_warning
from host.table.snapshots import EVERY, fold_log, load

__all__ = ["MAX_WAITING", "NICE", "Busy", "HeavyWork", "fold_job", "verify_job"]

log = structlog.get_logger("gamehost.heavy")

MAX_WAITING = 8
"""Heavy jobs that may wait for a worker; one more is refused (:class:`Busy`)."""
NICE = 10
"""How much lower the worker processes' CPU priority is than the host's (``os.nice``)."""

Source = tuple[str, Any]
"""Where a job reads a log: ``("file", sessions dir)``, ``("pg", url)`` or, in a thread only,
``("records", the raw records)``."""


class Busy(Exception):
    """Every worker is busy and :data:`MAX_WAITING` jobs wait already."""


# -- the worker side ----------------------------------------------------------------------------
_registry: Any = None
_stores: dict[str, Any] = {}


def _init_worker(entrypoints: bool, modules: list[tuple[str, str]], nice: int) -> None:
    global _registry
    from host.plugins.registry import load_registry

    if nice:
        with contextlib.suppress(OSError):  # not allowed: the host's priority, then
            os.nice(nice)
    plugins = [(name, importlib.import_module(mod)) for name, mod in modules]
    _registry = load_registry(plugins, entrypoints=entrypoints)


def _engine(game: str | Engine) -> Engine:
    if isinstance(game, Engine):
        return game
    return _registry.engines[game]


def _stream(source: Source, sid: str, first: int, upto: int) -> Iterator[Record]:
    """Records ``first .. upto`` of a log, made one at a time from the file's lines (a file
    store: the bytes are read whole, each record is made as the fold takes it); blocking."""
    if source[0] != "file":
        yield from _read(source, sid, first, upto)
        return
    from host.store.base import _check_header
    from host.store.file import _open_log

    path = Path(source[1]) / f"{sid}.jsonl"
    try:
        fd = _open_log(path, os.O_RDONLY)
    except FileNotFoundError:
        raise UnknownSession(f"no session {sid}") from None
    with open(fd, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    del data
    for seq in range(first, upto + 1):
        try:
            rec = orjson.loads(lines[seq])
        except (IndexError, orjson.JSONDecodeError):
            raise CorruptLog(path, seq, "the record is not JSON") from None
        if (
            not isinstance(rec, dict)
            or rec.get("seq") != seq
            or not isinstance(rec.get("type"), str)
        ):
            raise CorruptLog(path, seq, f"not the record of seq {seq}")
        if seq == 0:
            _check_header(path, rec)
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
        raw = parse_rows(store.path(sid), rows, first)
    return [Record.from_json(r) for r in raw]


def fold_job(
    source: Source,
    game: str | Engine,
    sid: str,
    upto: int,
    every: int = EVERY,
    start: bytes | None = None,
) -> Any:
    """Fold a log up to seq ``upto`` (from the snapshot ``start`` when given, else from its
    header), making snapshots every ``every`` records: a :class:`host.table.snapshots.Folded`,
    or ``("damaged", seq, message)`` / ``("unknown",)``."""
    try:
        state = None if start is None else load(start)
        first = 0 if state is None else state.seq + 1
        return fold_log(_engine(game), _stream(source, sid, first, upto), every, state)
    except UnknownSession:
        return ("unknown",)
    except CorruptLog as exc:
        return ("damaged", exc.seq, exc.message)
    except BadRecord as exc:
        return ("damaged", exc.seq, f"does not fold: {exc.message}")


def verify_job(source: Source, game: str | Engine, sid: str, upto: int) -> Any:
    """:func:`host.table.history.verify_log` of a log up to seq ``upto``: ``("verified",
    records, difference or None, version warning or None)``, or ``("damaged", seq, message)``
    / ``("unknown",)``."""
    try:
        records = _read(source, sid, 0, upto)
    except UnknownSession:
        return ("unknown",)
    except CorruptLog as exc:
        return ("damaged", exc.seq, exc.message)
    engine = _engine(game)
    if not records:
        return ("unknown",)
    return ("verified", len(records), verify_log(engine, records), version_warning(engine, records))


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


class HeavyWork:
    """Runs heavy jobs for one host: in worker processes when it can (see the module
    docstring), else in a worker thread; at most ``workers`` at once and :data:`MAX_WAITING`
    waiting.

    Args:
        registry: the host's games.
        store: the host's store (a file store's logs and a PostgreSQL URL can be reopened).
        workers: processes (0: a thread instead).
    """

    def __init__(self, registry: Any, store: Any, workers: int = 2) -> None:
        self.registry = registry
        self.workers = max(workers, 0)
        spec = _worker_spec(registry) if self.workers else None
        self.source: Source | None = _source(store)
        self._spec = spec if self.source is not None else None
        self.limiter = trio.CapacityLimiter(max(self.workers, 1))
        self.max_waiting = MAX_WAITING
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    @property
    def in_process(self) -> bool:
        """Jobs run in worker processes (not a thread of the host's)."""
        return self._spec is not None

    def game(self, engine: Engine) -> str | Engine:
        """What a job is given to find a game's engine."""
        return engine.game.info.id if self.in_process else engine

    async def run(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in a worker; its result.

        Raises:
            Busy: every worker busy and :data:`MAX_WAITING` jobs waiting.
            concurrent.futures.process.BrokenProcessPool: a worker died (the next job starts
                a new pool).
        """
        if self.limiter.available_tokens == 0 and (
            self.limiter.statistics().tasks_waiting >= self.max_waiting
        ):
            raise Busy("every heavy-work slot of this host is busy; retry later")
        async with self.limiter:
            if self._spec is None:
                return await trio.to_thread.run_sync(fn, *args)
            pool = self._get_pool()
            try:
                return await _wait(pool.submit(fn, *args))
            except concurrent.futures.process.BrokenProcessPool:
                log.error("heavy_worker_died")
                if self._pool is pool:
                    self._pool = None
                    pool.shutdown(wait=False, cancel_futures=True)
                raise

    def _get_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            assert self._spec is not None
            entrypoints, modules = self._spec
            self._pool = concurrent.futures.ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(entrypoints, modules, NICE),
            )
        return self._pool

    def close(self) -> None:
        """Stop the worker processes (jobs running are abandoned)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _source(store: Any) -> Source | None:
    from host.store.file import FileStore
    from host.store.pg import PostgresStore

    if isinstance(store, FileStore):
        return ("file", str(store.dir))
    if isinstance(store, PostgresStore):
        return ("pg", store.url)
    return None


async def _wait(fut: concurrent.futures.Future[Any]) -> Any:
    """A future's result, awaited without a thread (cancelling the wait cancels a job not begun;
    one running is left to end)."""
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()

    def wake(_: Any) -> None:
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(done.set)

    fut.add_done_callback(wake)
    try:
        await done.wait()
    except trio.Cancelled:
        fut.cancel()
        raise
    return fut.result()
