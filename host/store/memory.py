"""The in-memory store: a :class:`~host.store.base.Store` with the file store's rules and no
durability, for tests and tools (see ``host.store.base`` for the contract)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from host.errors import BadSessionId
from host.store.base import (
    _SESSION_ID,
    Conflict,
    CorruptLog,
    StoreClosed,
    StoreStatistics,
    UnknownSession,
    check_append,
    check_record,
    creation_records,
    decode_line,
    encode_lines,
)

__all__ = ["MemoryStore"]


class MemoryStore:
    """A :class:`~host.store.base.Store` in memory, with the file store's rules and no durability.

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

    def _records(self, session: str, lines: list[bytes], first: int) -> list[dict[str, Any]]:
        """The records of ``lines`` from seq ``first``, checked as a log file's are (checksums,
        seqs, the header).

        Raises:
            CorruptLog: naming the first wrong seq.
        """
        where = Path(f"memory:{session}")
        return [
            check_record(where, seq, decode_line(where, seq, line, 0, len(line.rstrip(b"\n"))))
            for seq, line in enumerate(lines, first)
        ]

    def load(self, session: str) -> list[dict[str, Any]]:
        """See :meth:`~host.store.base.Store.load`."""
        lines = self._lines(session)
        records = self._records(session, lines, 0)
        self._next[session] = len(lines)
        return records

    async def read(self, session: str, after: int | None = None) -> list[dict[str, Any]]:
        """See :meth:`~host.store.base.Store.read`."""
        await trio.lowlevel.checkpoint()
        lines = self._lines(session)
        start = 0 if after is None else max(after + 1, 0)
        return self._records(session, lines[start:], start)

    async def record_count(self, session: str) -> int:
        """See :meth:`host.store.file.FileStore.record_count`."""
        await trio.lowlevel.checkpoint()
        return len(self._lines(session))

    async def read_range(self, session: str, first: int, stop: int) -> list[dict[str, Any]]:
        """See :meth:`host.store.file.FileStore.read_range`."""
        await trio.lowlevel.checkpoint()
        first, stop = max(first, 0), max(stop, 0)
        return self._records(session, self._lines(session)[first:stop], first)

    def truncate(self, session: str, keep: int) -> None:
        """See :meth:`~host.store.base.Store.truncate`."""
        lines = self._lines(session)
        if len(lines) < keep:
            raise CorruptLog(f"memory:{session}", len(lines), f"cannot keep {keep} records")
        del lines[keep:]
        self._next[session] = keep

    async def create(self, session: str, records: list[dict[str, Any]]) -> None:
        """See :meth:`~host.store.base.Store.create` (also takes one header dict, as
        ``FileStore`` does)."""
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
        """See :meth:`~host.store.base.Store.append`. Stored before the first checkpoint, so
        appends are ordered as they were called."""
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
        """See :meth:`~host.store.base.Store.release`."""
        self._held.discard(session)
        self._next.pop(session, None)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Waits for :meth:`aclose` (nothing to write in the background)."""
        task_status.started()
        await self._stop.wait()

    async def aclose(self) -> None:
        """See :meth:`~host.store.base.Store.aclose`."""
        self._closed = True
        self._stop.set()
        self._held.clear()
        await trio.lowlevel.checkpoint()

    def statistics(self) -> StoreStatistics:
        """Counters; each append is its own batch and nothing is fsynced."""
        n = self._n_appends
        return StoreStatistics(len(self._held), n, self._n_records, n, 0, 0)
