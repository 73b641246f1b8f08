"""The store interface every session log goes through, and the in-memory store.

A store keeps one append-only log per session: records (JSON objects) with a gapless ``seq``
from 0, the first a header (see ``host.table.engine`` for the record types). The host, ``replay``'s
fork and every other tool write logs only through a :class:`Store`; nothing else writes log files.

Implementations:

- :class:`host.store.file.FileStore`: the embedded default, one JSON-lines file per session, durable
  (per its ``fsync`` mode) and group-committed by one writer thread;
- :class:`MemoryStore`: the same rules in memory, for tests and tools; nothing survives the
  process. Records are kept as the JSON lines a file would hold, so what is read back is a fresh
  copy, equal to what a :class:`~host.store.file.FileStore` would return;
- :class:`host.store.pg.PostgresStore`: every log as rows of one PostgreSQL database, which many
  hosts can share;
- :func:`open_store` picks one from a ``--store`` value. ``tests/host/test_store_contract.py``
  runs one suite against every store; a new store passes it by being added to that suite's list.

Shared rules (the contract):

- **Records.** ``create`` and ``append`` take dicts with an int ``seq`` and a str ``type``; the
  store adds ``ts``, the time of the append (ISO 8601, UTC, milliseconds, ``Z``), unless the
  record brings its own. A record is stored as ``{"seq", "ts", **record}`` in that key order and
  read back (``load``, ``read``) as new dicts equal to what was written, JSON-encoded by orjson
  (``TypeError`` for what it cannot encode, before anything is stored).
- **Expected seq.** An append names the seq its first record must have: the log's length. Any
  other value, records whose seqs are not gapless from it, or a session that is not *open* in
  this store object is a :class:`Conflict` and writes nothing. A session is open once this store
  object created, loaded or truncated it, and stays open until one of its appends fails (then
  ``load`` it again). So two appends racing for one seq: one wins, the other is a ``Conflict``.
- **Errors.** Every store error but ``OSError`` is a ``host.errors.LogError``: ``Conflict`` (see
  above; also a create of a session that exists), ``UnknownSession`` (no log of that session),
  ``BadSessionId`` (not 1 to 64 of ``A-Za-z0-9_-``), ``BadHeader`` (a create whose first record is
  not a valid header; it and ``BadSessionId`` are ``ValueError`` subclasses too), ``StoreClosed``
  (``create``/``append`` after ``aclose`` began), ``CorruptLog`` (a log that does not read as a
  session); ``OSError`` (the medium failed; the session is then not open).
- **Durability.** ``create`` and ``append`` return once their records are durable (what that
  means is the store's: see ``FileStore``'s fsync modes; ``MemoryStore`` keeps them only as long
  as its ``logs`` dict lives). A record once acknowledged is never lost or changed, except by
  ``truncate``, which the host uses only on restart to drop a half-written cause.
- **Lifecycle.** Start :meth:`Store.run` in a nursery before the first ``create``/``append``;
  :meth:`Store.aclose` refuses new writes, finishes the queued ones and ends ``run``.

``session_ids``, ``load`` and ``truncate`` are synchronous: the host calls them on start-up, and
the file store reads in the calling thread. ``read`` is async (a file store reads in a worker
thread), for readers while the host runs (e.g. records a resuming client missed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import orjson
import trio

from host.errors import BadSessionId
from host.store.file import (
    _SESSION_ID,
    Conflict,
    CorruptLog,
    FileStore,
    FsyncMode,
    StoreClosed,
    StoreStatistics,
    UnknownSession,
    check_append,
    creation_records,
    encode_lines,
)

__all__ = [
    "Conflict",
    "CorruptLog",
    "MemoryStore",
    "Store",
    "StoreClosed",
    "StoreStatistics",
    "UnknownSession",
    "open_store",
]


@runtime_checkable
class Store(Protocol):
    """Where session logs live. See the module docstring for the shared rules."""

    def session_ids(self) -> list[str]:
        """Every session with a log, sorted (a file store skips files that are not logs)."""
        ...

    def load(self, session: str) -> list[dict[str, Any]]:
        """Every record of a session, in seq order, header first; opens the session for
        appends at the next seq (also after a failed append). A file store repairs a torn tail.

        Raises:
            UnknownSession: no such log. CorruptLog: a damaged log (the session stays not
            open). Conflict: appends of it are in progress. ValueError: a bad session id.
            OSError: the medium failed.
        """
        ...

    async def read(self, session: str, after: int | None = None) -> list[dict[str, Any]]:
        """The session's records with a seq above ``after`` (every record with None), in seq
        order, changing nothing (no repair; the session is not opened). Holds every
        acknowledged record and may hold some of an append still in progress.

        Raises:
            UnknownSession, CorruptLog, ValueError, OSError: as :meth:`load`.
        """
        ...

    def truncate(self, session: str, keep: int) -> None:
        """Keep only the first ``keep`` records (seq ``0 .. keep - 1``), durably; the session is
        then open at seq ``keep``. For the host's restart only (dropping a half-written cause).

        Raises:
            UnknownSession: no such log. CorruptLog: fewer than ``keep`` records.
            Conflict: appends of it are in progress. ValueError: a bad session id.
            OSError: the medium failed.
        """
        ...

    async def create(self, session: str, records: list[dict[str, Any]]) -> None:
        """Make a session's log with its first records, seq 0 up, the header first (a host puts
        the bots' ``seat_taken`` records in the same call), in one durable append; the session
        is then open at the next seq. A create that raises leaves no log.

        Raises:
            Conflict: the session exists, or the seqs are not 0, 1, ...
            ValueError: a bad session id, no records, or a first record that is not a valid
                header (``host.store.file.creation_records``). TypeError: not JSON-encodable.
            StoreClosed: the store is closing. OSError: the medium failed.
        """
        ...

    async def append(self, session: str, expected_seq: int, records: list[dict[str, Any]]) -> None:
        """Append records (seqs ``expected_seq``, ``expected_seq + 1``, ...) durably; returns
        once they are. An empty list checks and writes nothing.

        Raises:
            Conflict: a different expected seq, seqs not gapless from it, or the session not
                open. Nothing was written.
            TypeError: a record JSON cannot hold. Nothing was written.
            StoreClosed: the store is closing. Nothing was written.
            OSError, CorruptLog: the write failed; the session is not open until ``load``,
                which tells whether the records were kept.
        """
        ...

    def release(self, session: str) -> None:
        """Let go of what the store holds open for a session (it ended). Appending to it again
        still works; it only costs a re-open."""
        ...

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The store's own task (writer, connections): start it in a nursery before writing;
        it returns after :meth:`aclose`."""
        ...

    async def aclose(self) -> None:
        """Refuse new creates and appends (``StoreClosed``), finish the queued ones, release
        everything; returns once :meth:`run` has ended."""
        ...

    def statistics(self) -> StoreStatistics:
        """Counters now (appends, records, batches, fsyncs, queued, sessions held open)."""
        ...


class MemoryStore:
    """A :class:`Store` in memory, with the file store's rules and no durability.

    Args:
        logs: the backing, session id → its records as JSON lines (``bytes`` ending in a
            newline, as a log file holds them). Pass another ``MemoryStore``'s ``logs`` to model
            a restart on the same data: its sessions exist but are not open until loaded.
            Default: a new empty dict. An append to a session another store on the same
            ``logs`` has appended to meanwhile is a ``Conflict`` (load it again), as two hosts
            on one database would see.

    ``run`` need not be started for appends to work, but may be (the host starts it).
    """

    def __init__(self, logs: dict[str, list[bytes]] | None = None) -> None:
        self.logs: dict[str, list[bytes]] = {} if logs is None else logs
        self._next: dict[str, int] = {}
        self._held: set[str] = set()
        self._closed = False
        self._stop = trio.Event()
        self._n_appends = self._n_records = 0

    def _lines(self, session: str) -> list[bytes]:
        if not _SESSION_ID.match(session):
            raise BadSessionId(f"bad session id {session!r}")
        lines = self.logs.get(session)
        if lines is None:
            raise UnknownSession(f"no session {session}")
        return lines

    def session_ids(self) -> list[str]:
        """Every session in ``logs``, sorted."""
        return sorted(self.logs)

    def load(self, session: str) -> list[dict[str, Any]]:
        """See :meth:`Store.load`."""
        lines = self._lines(session)
        self._next[session] = len(lines)
        return [orjson.loads(line) for line in lines]

    async def read(self, session: str, after: int | None = None) -> list[dict[str, Any]]:
        """See :meth:`Store.read`."""
        await trio.lowlevel.checkpoint()
        lines = self._lines(session)
        start = 0 if after is None else max(after + 1, 0)
        return [orjson.loads(line) for line in lines[start:]]

    def truncate(self, session: str, keep: int) -> None:
        """See :meth:`Store.truncate`."""
        lines = self._lines(session)
        if len(lines) < keep:
            raise CorruptLog(f"memory:{session}", len(lines), f"cannot keep {keep} records")
        del lines[keep:]
        self._next[session] = keep

    async def create(self, session: str, records: list[dict[str, Any]]) -> None:
        """See :meth:`Store.create` (also takes one header dict, as ``FileStore`` does)."""
        if self._closed:
            raise StoreClosed("the store is closed")
        records = creation_records(session, records)
        if session in self.logs:
            raise Conflict(f"session {session} exists")
        self.logs[session] = []
        self._next[session] = 0
        try:
            await self.append(session, 0, records)
        except Exception:
            del self.logs[session]
            self._next.pop(session, None)
            raise

    async def append(self, session: str, expected_seq: int, records: list[dict[str, Any]]) -> None:
        """See :meth:`Store.append`. Stored before the first checkpoint, so appends are ordered
        as they were called."""
        if self._closed:
            raise StoreClosed("the store is closed")
        have = self._next.get(session)
        if have == expected_seq and len(self.logs.get(session, ())) != have:
            del self._next[session]  # another store on these ``logs`` wrote
            raise Conflict(f"session {session} was appended to elsewhere: load it again")
        check_append(have, session, expected_seq, records)
        if records:
            self.logs[session].extend(encode_lines(records))
            self._next[session] = expected_seq + len(records)
            self._held.add(session)
            self._n_appends += 1
            self._n_records += len(records)
        await trio.lowlevel.checkpoint()

    def release(self, session: str) -> None:
        """See :meth:`Store.release`."""
        self._held.discard(session)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Waits for :meth:`aclose` (nothing to write in the background)."""
        task_status.started()
        await self._stop.wait()

    async def aclose(self) -> None:
        """See :meth:`Store.aclose`."""
        self._closed = True
        self._stop.set()
        self._held.clear()
        await trio.lowlevel.checkpoint()

    def statistics(self) -> StoreStatistics:
        """Counters; each append is its own batch and nothing is fsynced."""
        n = self._n_appends
        return StoreStatistics(len(self._held), n, self._n_records, n, 0, 0)


def open_store(spec: str | Path, *, fsync: FsyncMode = "batch", exclusive: bool = False) -> Store:
    """The store a ``--store`` value names: a ``postgresql://`` or ``postgres://`` URL is a
    :class:`host.store.pg.PostgresStore` (nothing connects yet: see its ``check``); anything
    else is a data dir for a :class:`~host.store.file.FileStore` (``fsync`` and ``exclusive`` are
    its arguments, ignored for a database).

    Raises:
        ValueError: a URL of another scheme, or a PostgreSQL URL libpq cannot parse.
        OSError: the data dir cannot be made.
    """
    text = str(spec)
    if text.startswith(("postgresql://", "postgres://")):
        from host.store.pg import PostgresStore  # psycopg loads only where a database is used

        return PostgresStore(text)
    if "://" in text:
        raise ValueError(f"unsupported store URL {text!r}: use postgresql://... or a data dir")
    return FileStore(text, fsync, exclusive=exclusive)
