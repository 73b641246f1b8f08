"""The embedded event store: one append-only JSON-lines file per session.

Layout: ``<data-dir>/sessions/<session>.jsonl``, mode 0600 (logs hold hands and the seed). Each
line is one record ``{"seq": n, "ts": "2026-11-30T10:00:00.123Z", "type": ..., ...}`` with a
gapless ``seq`` from 0 (see ``host.engine`` for the record types).

Durability: :meth:`FileStore.append` returns only once its records are written, flushed and (per
``fsync``) synced. One writer task drains every queued append, writes them all, then fsyncs each
touched file once (group commit) before acknowledging them all:

- ``always``: fsync each append on its own before acknowledging it;
- ``batch`` (default): one fsync per file per batch covers every append queued meanwhile;
- ``never``: write and flush only (survives a crash of the host, not of the machine).

Optimistic concurrency: an append names the seq it expects to write first; any other value is a
:class:`Conflict`, never an overwrite. Loading truncates a torn last line (no newline, or not
JSON) with a warning; a bad line in the middle raises :class:`CorruptLog`.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path
from typing import Any, Literal

import attrs
import orjson
import structlog
import trio

__all__ = ["Conflict", "CorruptLog", "FileStore", "FsyncMode", "StoreStatistics", "read_log"]

FsyncMode = Literal["always", "batch", "never"]
MAX_OPEN = 256
"""Log files the writer keeps open at once; others are reopened when appended to."""
log = structlog.get_logger("gamehost.store")
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Conflict(Exception):
    """An append expected a different next seq, or a create found the session already there."""


class CorruptLog(Exception):
    """A log line in the middle of a file is not a record, or seqs are not gapless."""


class StoreClosed(Exception):
    """The store is shutting down: no new appends."""


@attrs.frozen
class StoreStatistics:
    """Counters for ``bench`` and tests.

    Attributes:
        sessions_open: files held open.
        appends: appends acknowledged.
        records: records written.
        batches: group commits done.
        fsyncs: fsync calls made.
        queued: appends waiting for the writer now.
    """

    sessions_open: int
    appends: int
    records: int
    batches: int
    fsyncs: int
    queued: int


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def read_log(path: Path, repair: bool = False) -> list[dict[str, Any]]:
    """Read a session log.

    Args:
        path: the ``.jsonl`` file.
        repair: truncate a torn last line in place (the host does this on open); otherwise it
            is just skipped.

    Returns:
        The records in order, as dicts.

    Raises:
        CorruptLog: a bad line before the last one, or a seq out of order.
        OSError: the file cannot be read.
    """
    data = path.read_bytes()
    records: list[dict[str, Any]] = []
    pos = 0
    good_end = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        last = nl < 0 or nl == len(data) - 1
        line = data[pos:] if nl < 0 else data[pos:nl]
        try:
            if nl < 0:
                raise ValueError("no newline at the end")
            rec = orjson.loads(line)
            if not isinstance(rec, dict) or rec.get("seq") != len(records):
                raise ValueError(f"expected a record with seq {len(records)}")
        except ValueError as exc:
            if not last:
                raise CorruptLog(f"{path}: bad record at byte {pos}: {exc}") from None
            log.warning("torn_tail", path=str(path), offset=pos, dropped=len(data) - pos)
            if repair:
                with open(path, "r+b") as f:
                    f.truncate(good_end)
                    f.flush()
                    os.fsync(f.fileno())
            break
        records.append(rec)
        pos = nl + 1
        good_end = pos
    return records


@attrs.define
class _Append:
    session: str
    data: bytes
    done: trio.Event = attrs.field(factory=trio.Event)
    error: BaseException | None = None


class FileStore:
    """The file-backed store. Start :meth:`run` in a nursery before appending.

    Args:
        root: the data dir; logs go to ``root/sessions``.
        fsync: ``always``, ``batch`` or ``never`` (see the module docstring).
    """

    def __init__(self, root: Path | str, fsync: FsyncMode = "batch") -> None:
        self.dir = Path(root) / "sessions"
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.fsync = fsync
        self._next: dict[str, int] = {}
        self._fds: dict[str, int] = {}
        self._queue: list[_Append] = []
        self._wake = trio.Event()
        self._closed = False
        self._stopped = trio.Event()
        self._n_appends = self._n_records = self._n_batches = self._n_fsyncs = 0

    def path(self, session: str) -> Path:
        """The log file of a session."""
        return self.dir / f"{session}.jsonl"

    def session_ids(self) -> list[str]:
        """Every session with a log file, sorted."""
        return sorted(p.stem for p in self.dir.glob("*.jsonl"))

    def statistics(self) -> StoreStatistics:
        """The counters now."""
        return StoreStatistics(
            len(self._fds),
            self._n_appends,
            self._n_records,
            self._n_batches,
            self._n_fsyncs,
            len(self._queue),
        )

    # -- reading -------------------------------------------------------------------------------
    def load(self, session: str) -> list[dict[str, Any]]:
        """Read a session's records (repairing a torn tail) and make it appendable.

        Raises:
            CorruptLog, OSError: see :func:`read_log`.
        """
        records = read_log(self.path(session), repair=True)
        self._next[session] = len(records)
        return records

    def truncate(self, session: str, keep: int) -> None:
        """Cut a (loaded, not yet appended-to) log after its first ``keep`` records, durably."""
        path = self.path(session)
        data = path.read_bytes()
        end = 0
        for _ in range(keep):
            end = data.index(b"\n", end) + 1
        with open(path, "r+b") as f:
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())
        self._next[session] = keep

    # -- writing -------------------------------------------------------------------------------
    async def create(self, session: str, records: list[dict[str, Any]]) -> None:
        """Create a session's log with its first records (the header at seq 0, then what the
        same command adds, e.g. the bots' seats), durably and in one append.

        Raises:
            Conflict: the log exists. ValueError: a bad session id.
        """
        if not _SESSION_ID.match(session):
            raise ValueError(f"bad session id {session!r}")
        path = self.path(session)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        except FileExistsError:
            raise Conflict(f"session {session} exists") from None
        os.close(fd)
        self._next[session] = 0
        try:
            await self.append(session, 0, records)
        except OSError:
            path.unlink(missing_ok=True)  # no half-made log to trip over on the next start
            raise
        if self.fsync != "never":
            await trio.to_thread.run_sync(self._fsync_dir)

    def _fsync_dir(self) -> None:
        dfd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    async def append(self, session: str, expected_seq: int, records: list[dict[str, Any]]) -> None:
        """Append records durably; returns once they are on disk (per the fsync mode).

        Args:
            session: the session id.
            expected_seq: the seq the first record must have (the log's length now).
            records: dicts with ``seq`` (gapless from ``expected_seq``) and ``type``; the store
                adds ``ts``.

        Raises:
            Conflict: ``expected_seq`` is not the log's next seq, or the records' seqs are wrong.
            StoreClosed: the store is shutting down.
            OSError: the write or fsync failed (the session must stop: its state is unknown).
        """
        if self._closed:
            raise StoreClosed("the store is closed")
        have = self._next.get(session)
        if have is None:
            raise Conflict(f"session {session} is not open in this store")
        if expected_seq != have:
            raise Conflict(f"session {session}: expected seq {expected_seq}, the log is at {have}")
        for i, rec in enumerate(records):
            if rec.get("seq") != expected_seq + i:
                raise Conflict(f"record {i} has seq {rec.get('seq')}, wanted {expected_seq + i}")
        if not records:
            return
        ts = _now()
        data = b"".join(
            orjson.dumps({"seq": r["seq"], "ts": ts, **r}, option=orjson.OPT_APPEND_NEWLINE)
            for r in records
        )
        self._next[session] = expected_seq + len(records)
        job = _Append(session, data)
        self._queue.append(job)
        self._n_records += len(records)
        self._wake.set()
        await job.done.wait()
        if job.error is not None:
            raise job.error

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The writer task: group commit until :meth:`aclose`, then drain and close the files."""
        task_status.started()
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                if self._queue:
                    batch, self._queue = self._queue, []
                    await trio.to_thread.run_sync(self._write_batch, batch, abandon_on_cancel=False)
                    for job in batch:
                        job.done.set()
                if self._closed and not self._queue:
                    break
        finally:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
            self._stopped.set()

    def _fd(self, session: str) -> int:
        """The session's open file (the :data:`MAX_OPEN` most recently used stay open)."""
        fd = self._fds.pop(session, None)
        if fd is None:
            fd = os.open(self.path(session), os.O_WRONLY | os.O_APPEND)
        self._fds[session] = fd  # most recently used last
        while len(self._fds) > MAX_OPEN:
            oldest = next(iter(self._fds))
            old = self._fds.pop(oldest, None)
            if old is not None:
                os.close(old)
        return fd

    def _write_batch(self, batch: list[_Append]) -> None:
        touched: dict[str, int] = {}
        for job in batch:
            try:
                fd = self._fd(job.session)
                view = memoryview(job.data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                if self.fsync == "always":
                    os.fsync(fd)
                    self._n_fsyncs += 1
                else:
                    touched[job.session] = fd
            except OSError as exc:
                job.error = exc
        if self.fsync == "batch":
            for session, fd in touched.items():
                try:
                    os.fsync(fd)
                    self._n_fsyncs += 1
                except OSError as exc:
                    for job in batch:
                        if job.session == session:
                            job.error = exc
        self._n_batches += 1
        self._n_appends += sum(1 for job in batch if job.error is None)

    def release(self, session: str) -> None:
        """Close a session's file when it will not be appended to again (it ended)."""
        fd = self._fds.pop(session, None)
        if fd is not None:
            os.close(fd)

    async def aclose(self) -> None:
        """Refuse new appends, write the queued ones, close every file."""
        self._closed = True
        self._wake.set()
        await self._stopped.wait()
