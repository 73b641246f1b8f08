"""The file store's write-ahead log: one shared, segmented, checksummed log of every session's
appends, synced once per writer batch, so that a batch touching 100 sessions costs one sync
rather than 100.

Layout: ``<data-dir>/wal/<n>.seg`` (``n`` zero-padded to 12 digits, counting up; mode 0600 in a
folder of mode 0700). A segment starts with the line ``gamehost wal 1``; then one line per
record appended, or per truncation::

    <crc> <session> <seq> <log line>
    <crc> <session> <keep> cut

``<log line>`` is the record's line exactly as its session file holds it (``{"crc":"...",...}``,
without the newline; see ``host.store.base.frame``), ``<crc>`` is 8 lowercase hex digits, the
CRC32C of everything after its space (``<session> <seq> <log line>``). A ``cut`` line says the
session's log was cut to its first ``keep`` records (``FileStore.truncate``).

Segments present are the ones not yet retired, always a run of consecutive numbers: a segment
is retired (deleted) once every record in it is durable in its session file (the session files
a segment touched are fsynced first), oldest first, the folder synced after each deletion — a
segment's deletion is its checkpoint marker.

Recovery (:func:`recover`, run by the store that takes the data dir's lock, before anything
else): every segment present is read in order; for each session it names, the records from its
first seq there on are what its log must hold (a later record at a seq already seen replaces
it and everything after it, as an append after a truncation did; a ``cut`` line ends the log
there). Each session file is then compared with that, line by line as bytes: missing records are
appended, a torn last line is cut, a line that differs is cut with everything after it and the
log's lines are written instead; nothing already there is duplicated. A session file that holds
more records than the log knows of (written, but the log's tail was lost with a power cut, so
never acknowledged) is left as it is, unless a truncation or replacement says where it ends.
Every session file the log names is then fsynced and the segments are retired, so running
recovery again changes nothing.

Damage: a torn last line of the newest segment (no newline, or a last line that does not match
its checksum) was never synced, so never acknowledged: it is dropped with a warning. Any other
line that does not match its checksum or does not read, a segment that does not start with the
format's first line, a torn line in an older segment, or a seq that leaves a gap in a session
raises :class:`WalDamaged` naming the segment and the byte offset: the host refuses to start
(nothing is changed) rather than guess.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import stat
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import attrs
import crc32c
import structlog

__all__ = [
    "MAGIC",
    "SEGMENT_BYTES",
    "Recovery",
    "SegmentScan",
    "Wal",
    "WalDamaged",
    "WalEntry",
    "recover",
    "scan_segment",
    "segment_numbers",
    "sync_files",
    "wal_lines",
]

MAGIC = b"gamehost wal 1\n"
"""The first line of every segment (the format's name and version)."""
SEGMENT_BYTES = 16 << 20
"""Default size past which the writer starts a new segment and hands the full one to the
checkpoint (bytes)."""
CHECKPOINT_THREADS = 16
"""Threads that fsync a checkpoint's session files at once."""
_SEGMENT = re.compile(r"\A(\d{12})\.seg\Z")
_SESSION = re.compile(rb"\A[A-Za-z0-9_-]{1,64}\Z")
_SUMMED = b'{"crc":"'
_CUT = b"cut"
log = structlog.get_logger("gamehost.store")


class WalDamaged(OSError):
    """A write-ahead log segment that cannot be trusted (see the module docstring): the data
    dir is refused until it is looked at (an ``OSError``, so a host that cannot start says so in
    one line).

    ``str()`` is ``"<segment>: byte <offset>: <message>"``.

    Attributes:
        path: the segment. offset: the byte where the bad line starts. message: what is wrong.
    """

    def __init__(self, path: Path | str, offset: int, message: str) -> None:
        super().__init__(f"{path}: byte {offset}: {message} (the write-ahead log is damaged)")
        self.path = Path(path)
        self.offset = offset
        self.message = message


def segment_name(number: int) -> str:
    """The file name of segment ``number``, e.g. ``000000000007.seg``."""
    return f"{number:012d}.seg"


def segment_numbers(folder: Path) -> list[int]:
    """The numbers of the segments in ``folder``, ascending (other names are ignored; no folder:
    none)."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return sorted(int(m[1]) for m in map(_SEGMENT.match, names) if m)


def wal_lines(session: str, first: int, lines: Iterable[bytes]) -> bytes:
    """The log lines of records ``first``, ``first + 1``, ... of ``session`` (each a log line as
    its session file holds it, ending with a newline) as write-ahead log lines."""
    sid = session.encode()
    out = []
    for seq, line in enumerate(lines, first):
        rest = b"%b %d %b" % (sid, seq, line[:-1])
        out.append(b"%08x %b\n" % (crc32c.crc32c(rest), rest))
    return b"".join(out)


def cut_line(session: str, keep: int) -> bytes:
    """The write-ahead log line saying ``session``'s log was cut to its first ``keep`` records."""
    rest = b"%b %d %b" % (session.encode(), keep, _CUT)
    return b"%08x %b\n" % (crc32c.crc32c(rest), rest)


class WalEntry(NamedTuple):
    """One line of a segment.

    Attributes:
        session: the session id. seq: the record's seq, or for a cut the records kept.
        line: the record's log line (no newline), or None for a cut.
        offset: where the line starts in its segment (bytes).
    """

    session: str
    seq: int
    line: bytes | None
    offset: int


@attrs.frozen
class SegmentScan:
    """What :func:`scan_segment` found.

    Attributes:
        entries: the lines in order. torn_at: byte offset of a torn tail (dropped), or None.
        size: the segment's size in bytes.
    """

    entries: list[WalEntry]
    torn_at: int | None
    size: int


def scan_segment(path: Path, data: bytes, newest: bool) -> SegmentScan:
    """Read a segment's bytes ``data`` (``path`` names it in errors), checking every line.

    Args:
        newest: the segment is the newest present: only its tail may be torn.

    Raises:
        WalDamaged: see the module docstring.
    """
    size = len(data)
    if not data.startswith(MAGIC):
        if newest and size < len(MAGIC) and MAGIC.startswith(data):
            return SegmentScan([], 0 if size else None, size)  # made, not yet written
        raise WalDamaged(path, 0, "not a write-ahead log segment (its first line is wrong)")
    entries: list[WalEntry] = []
    lines = data[len(MAGIC) :].split(b"\n")
    tail = lines.pop()  # what follows the last newline: b"" unless torn
    pos = len(MAGIC)
    crc = crc32c.crc32c
    for k, line in enumerate(lines):
        body = line[9:]
        if line[8:9] != b" " or line[:8] != b"%08x" % crc(body) or len(line) < 10:
            if newest and k == len(lines) - 1 and not tail:
                log.warning("wal_torn_tail", path=str(path), offset=pos, dropped=size - pos)
                return SegmentScan(entries, pos, size)
            raise WalDamaged(path, pos, "a line that does not match its checksum")
        parts = body.split(b" ", 2)
        if len(parts) != 3 or not parts[1].isdigit() or not _SESSION.match(parts[0]):
            raise WalDamaged(path, pos, "a line that matches its checksum but does not read")
        sid, seq, rest = parts
        if rest == _CUT:
            entries.append(WalEntry(sid.decode(), int(seq), None, pos))
        elif rest.startswith(_SUMMED):
            entries.append(WalEntry(sid.decode(), int(seq), rest, pos))
        else:
            raise WalDamaged(path, pos, "a line that matches its checksum but does not read")
        pos += len(line) + 1
    if tail:
        if not newest:
            raise WalDamaged(path, pos, "a torn line in a segment that is not the newest")
        log.warning("wal_torn_tail", path=str(path), offset=pos, dropped=size - pos)
        return SegmentScan(entries, pos, size)
    return SegmentScan(entries, None, size)


@attrs.define
class _Plan:
    """What one session's log must hold from ``base`` on, by the write-ahead log."""

    base: int
    tail: list[bytes]
    exact: bool  # a cut or a replacement says where the log ends
    where: Path  # the segment of the session's first line (for errors)

    def add(self, entry: WalEntry, where: Path) -> None:
        end = self.base + len(self.tail)
        if entry.seq == end and entry.line is not None:  # the usual case: the next record
            self.tail.append(entry.line)
            return
        if entry.seq > end:
            raise WalDamaged(
                where,
                entry.offset,
                f"session {entry.session}: seq {entry.seq} follows seq {end - 1} (a gap)",
            )
        if entry.seq < end:
            if entry.seq < self.base:
                self.base, self.tail = entry.seq, []
            else:
                del self.tail[entry.seq - self.base :]
            self.exact = True
        if entry.line is None:
            self.exact = True
        else:
            self.tail.append(entry.line)


@attrs.define
class Recovery:
    """What :func:`recover` did (or, with ``apply=False``, would do).

    Attributes:
        segments: segments read. entries: lines read. bytes: their size.
        sessions: sessions the log names. appended: records written into session files.
        dropped: records (and torn tails) cut from session files. missing: sessions the log
        names whose file is gone (skipped). torn: segments with a torn tail.
        repaired: session id -> the seq from which its file is (or would be) rewritten from the
        log (what the file held there differed, was cut short or torn).
        seconds: how long it took (wall clock).
    """

    segments: int = 0
    entries: int = 0
    bytes: int = 0
    sessions: int = 0
    appended: int = 0
    dropped: int = 0
    missing: list[str] = attrs.field(factory=list)
    torn: int = 0
    repaired: dict[str, int] = attrs.field(factory=dict)
    seconds: float = 0.0


def _datasync(fd: int) -> None:
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


def _fsync_dir(folder: Path) -> None:
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _open_regular(path: Path, flags: int) -> int | None:
    """Open a session file without following links; None if it is missing or not a regular
    file (skipped with a warning)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("wal_session_file_refused", path=str(path), error=str(exc))
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        log.warning("wal_session_file_refused", path=str(path), error="not a regular file")
        return None
    return fd


def _apply(path: Path, plan: _Plan, report: Recovery, apply: bool) -> None:
    """Make one session file hold what ``plan`` says (see the module docstring)."""
    fd = _open_regular(path, os.O_RDWR if apply else os.O_RDONLY)
    if fd is None:
        report.missing.append(path.stem)
        log.warning("wal_session_missing", path=str(path))
        return
    try:
        with open(os.dup(fd), "rb") as f:
            data = f.read()
        parts = data.split(b"\n")
        n = len(parts) - 1  # complete lines
        torn = len(parts[-1])
        base, tail = plan.base, plan.tail
        if n < base:
            raise WalDamaged(
                plan.where,
                0,
                f"session {path.stem}: its log ends at seq {n - 1}, but the write-ahead log"
                f" continues it at seq {base}: records that were durable are missing",
            )
        end = base + len(tail)
        p = base
        stop = min(n, end)
        while p < stop and parts[p] == tail[p - base]:
            p += 1
        if p < stop or n < end:
            keep = p  # a line that differs (cut from there), or the file ends early
        elif n > end and plan.exact:
            keep = end  # a truncation or a replacement ends the log here
        else:
            keep = n  # as the log says, or ahead of it
        report.sessions += 1
        if keep == n and keep >= end and not torn:
            return
        cut_at = len(data) - torn - sum(len(parts[i]) + 1 for i in range(keep, n))
        new = b"".join(line + b"\n" for line in tail[keep - base :])
        report.appended += len(tail) - (keep - base) if keep < end else 0
        report.dropped += n - keep + (1 if torn else 0)
        report.repaired[path.stem] = keep
        if not apply:
            return
        log.warning(
            "wal_session_repaired",
            path=str(path),
            kept=keep,
            dropped=n - keep,
            torn_bytes=torn,
            appended=max(end - keep, 0),
        )
        if not apply:
            return
        os.ftruncate(fd, cut_at)
        view = memoryview(new)
        pos = cut_at
        while view:
            written = os.pwrite(fd, view, pos)
            view, pos = view[written:], pos + written
    finally:
        os.close(fd)


def sync_files(
    sessions_dir: Path, sessions: list[str], pool: ThreadPoolExecutor | None = None
) -> set[str]:
    """Fsync the session files of ``sessions``, up to :data:`CHECKPOINT_THREADS` at once (the
    journal then commits them together: 1,000 files take a fraction of the time one after
    another takes, and the log's own syncs wait less meanwhile). A missing file is skipped.

    Args:
        pool: threads to use (default: made for the call, if more than one file).

    Returns:
        The sessions whose sync failed (each logged).
    """
    if len(sessions) < 2:
        return _sync_share(sessions_dir, sessions)
    k = min(CHECKPOINT_THREADS, len(sessions))
    shares = [sessions[i::k] for i in range(k)]
    failed: set[str] = set()
    if pool is None:
        with ThreadPoolExecutor(k, "gamehost recovery sync") as own:
            parts = list(own.map(_sync_share, [sessions_dir] * k, shares))
    else:
        parts = list(pool.map(_sync_share, [sessions_dir] * k, shares))
    for part in parts:
        failed |= part
    return failed


def _sync_share(sessions_dir: Path, sessions: list[str]) -> set[str]:
    failed: set[str] = set()
    for sid in sessions:
        fd = _open_regular(sessions_dir / f"{sid}.jsonl", os.O_RDONLY)
        if fd is None:
            continue  # gone: nothing of it to keep
        try:
            _datasync(fd)
        except OSError as exc:
            log.error("wal_session_sync_failed", session=sid, error=str(exc))
            failed.add(sid)
        finally:
            os.close(fd)
    return failed


def recover(wal_dir: Path, sessions_dir: Path, *, apply: bool = True) -> Recovery:
    """Replay every segment in ``wal_dir`` onto the session files in ``sessions_dir`` and fsync
    them (see the module docstring). Only the store holding the data dir's lock may apply it.
    Segments are not retired here (:meth:`Wal.retire_all`). Idempotent.

    Args:
        apply: False: change nothing, only say what would be done (``gamehost check``).

    Returns:
        What was (or would be) done.

    Raises:
        WalDamaged: a damaged segment, a gap, or a session file behind what was durable.
        OSError: a file cannot be read or written.
    """
    started = time.perf_counter()
    report = Recovery()
    numbers = segment_numbers(wal_dir)
    plans: dict[str, _Plan] = {}
    for i, number in enumerate(numbers):
        path = wal_dir / segment_name(number)
        with open(path, "rb") as f:
            data = f.read()
        scan = scan_segment(path, data, newest=i == len(numbers) - 1)
        report.segments += 1
        report.bytes += scan.size
        report.entries += len(scan.entries)
        report.torn += scan.torn_at is not None
        for entry in scan.entries:
            plan = plans.get(entry.session)
            if plan is None:
                plans[entry.session] = plan = _Plan(entry.seq, [], entry.line is None, path)
            plan.add(entry, path)
    for sid, plan in plans.items():
        _apply(sessions_dir / f"{sid}.jsonl", plan, report, apply)
    if apply:  # every file the log names, written now or not (a crash may have left it unsynced)
        failed = sync_files(sessions_dir, [sid for sid in plans if sid not in report.missing])
        if failed:
            raise OSError(f"recovery could not sync the session files of {', '.join(failed)}")
    report.seconds = time.perf_counter() - started
    if report.segments and apply:
        log.info(
            "wal_recovered",
            segments=report.segments,
            entries=report.entries,
            bytes=report.bytes,
            sessions=report.sessions,
            appended=report.appended,
            dropped=report.dropped,
            seconds=round(report.seconds, 3),
        )
    return report


class Wal:
    """The write-ahead log the store holding a data dir writes (see the module docstring).

    The writer thread calls :meth:`write`, :meth:`sync` and :meth:`mark` (under the store's
    lock; ``FileStore.truncate`` too); a full segment is handed to a checkpoint thread, which
    fsyncs the session files it touched and then retires it. :meth:`close` checkpoints what is
    left and retires every segment.

    Args:
        folder: ``<data-dir>/wal`` (made, mode 0700). sessions_dir: where session files live.
        segment_bytes: size past which a new segment is begun (bytes, at least 1).

    A failed write or sync is cut off again (the segment truncated to its last synced size);
    if even that fails, every later write raises the first error until the store is opened
    again (which recovers the log).
    """

    def __init__(
        self, folder: Path, sessions_dir: Path, segment_bytes: int = SEGMENT_BYTES
    ) -> None:
        self.folder = folder
        self.sessions_dir = sessions_dir
        self.segment_bytes = max(1, segment_bytes)
        folder.mkdir(mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)
        present = segment_numbers(folder)
        self.number = (present[-1] + 1) if present else 1  # of the open segment (or the next)
        self.fd: int | None = None
        self.size = self.synced = 0
        self.broken: OSError | None = None
        self.dirty: set[str] = set()  # sessions whose files the open segment's records touched
        self.log_syncs = 0  # fsyncs of the log made by the writer (and truncations)
        self.checkpoint_syncs = 0  # fsyncs made by checkpoints (its own thread, or close)
        self._checkpoints: queue.SimpleQueue[tuple[int, set[str]] | None] = queue.SimpleQueue()
        self._checkpointer: threading.Thread | None = None
        self._sync_thread: ThreadPoolExecutor | None = None
        self._checkpoint_pool: ThreadPoolExecutor | None = None
        self._retire_lock = threading.Lock()
        self._carried: set[str] = set()  # sessions a failed checkpoint still owes a sync
        self.checkpoint_errors = 0

    @property
    def syncs(self) -> int:
        """Every fsync this log made: of its segments and of session files at checkpoints."""
        return self.log_syncs + self.checkpoint_syncs

    @classmethod
    def open(
        cls, folder: Path, sessions_dir: Path, segment_bytes: int = SEGMENT_BYTES
    ) -> tuple[Wal, Recovery]:
        """Recover the segments in ``folder`` onto the session files (:func:`recover`), retire
        them, and return a log that begins a new segment on its first write. Only the store
        holding the data dir's lock may call it.

        Raises:
            WalDamaged: see :func:`recover` (nothing is changed). NotADirectoryError: ``folder``
            is a symbolic link. OSError: a file cannot be read or written.
        """
        if folder.is_symlink():
            raise NotADirectoryError(f"{folder} is a symbolic link, not the log folder: refused")
        folder.mkdir(mode=0o700, exist_ok=True)
        report = recover(folder, sessions_dir)
        wal = cls(folder, sessions_dir, segment_bytes)
        wal.retire(wal.number - 1)
        return wal, report

    def path(self, number: int) -> Path:
        """The file of segment ``number``."""
        return self.folder / segment_name(number)

    def _open_segment(self) -> None:
        path = self.path(self.number)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, MAGIC)
            _datasync(fd)
            _fsync_dir(self.folder)  # the segment's name is durable before a line in it counts
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
        self.log_syncs += 2
        self.fd = fd
        self.size = self.synced = len(MAGIC)

    def write(self, data: bytes) -> None:
        """Append lines to the open segment (opening one if none is). Not synced yet.

        Raises:
            OSError: the write failed (cut off again), or the log is broken.
        """
        if self.broken is not None:
            raise self.broken
        if self.fd is None:
            self._open_segment()
        assert self.fd is not None
        view = memoryview(data)
        try:
            while view:
                n = os.write(self.fd, view)
                if n <= 0:
                    raise OSError(5, "write wrote nothing")
                view = view[n:]
        except OSError:
            self._cut_back()
            raise
        self.size += len(data)

    def sync(self) -> None:
        """Make everything written so far durable (one ``fdatasync``): :meth:`sync_start`, then
        :meth:`sync_wait`.

        Raises:
            OSError: the sync failed; what was written since the last sync is cut off again.
        """
        self.sync_wait(self.sync_start())

    def sync_start(self) -> tuple[Future[None], int] | None:
        """Begin making everything written so far durable: one ``fdatasync``, run by the log's
        own sync thread, so the writer can write the session files meanwhile. (On a busy
        machine a thread that only waits for the disk is also run again sooner after its sync
        than the writer, which computes: measured, the sync returns in about half the time.)
        None if nothing is to be synced. Finish with :meth:`sync_wait`.

        Raises:
            OSError: the log is broken.
        """
        if self.broken is not None:
            raise self.broken
        if self.fd is None or self.synced == self.size:
            return None
        if self._sync_thread is None:
            self._sync_thread = ThreadPoolExecutor(1, "gamehost store log sync")
        return self._sync_thread.submit(_datasync, self.fd), self.size

    def sync_wait(self, pending: tuple[Future[None], int] | None) -> None:
        """Wait for a sync begun by :meth:`sync_start` (None: nothing to wait for).

        Raises:
            OSError: the sync failed; what was written since the last sync is cut off again.
        """
        if pending is None:
            return
        future, size = pending
        try:
            future.result()
        except OSError:
            self._cut_back()
            raise
        self.log_syncs += 1
        self.synced = max(self.synced, size)

    def _cut_back(self) -> None:
        assert self.fd is not None
        try:
            os.ftruncate(self.fd, self.synced)
            self.size = self.synced
        except OSError as exc:
            log.error("wal_broken", path=str(self.path(self.number)), error=str(exc))
            self.broken = exc

    def mark(self, sessions: Iterable[str]) -> None:
        """Note that the open segment's records touched these sessions' files."""
        self.dirty.update(sessions)

    def rotate_if_full(self) -> None:
        """If the open segment is past ``segment_bytes``, close it and hand it to the checkpoint
        thread (the next write begins a new one)."""
        if self.fd is None or self.size < self.segment_bytes:
            return
        os.close(self.fd)
        self.fd = None
        self._checkpoints.put((self.number, self.dirty))
        self.dirty = set()
        self.number += 1
        if self._checkpointer is None:
            self._checkpointer = threading.Thread(
                target=self._checkpoint_loop, name="gamehost store checkpoint", daemon=True
            )
            self._checkpointer.start()

    def _checkpoint_loop(self) -> None:
        while True:
            item = self._checkpoints.get()
            if item is None:
                return
            self.checkpoint(*item)

    def checkpoint(self, upto: int, sessions: set[str]) -> bool:
        """Fsync the files of ``sessions`` (and any a failed checkpoint left), then retire every
        segment up to ``upto``; True if done. A failure is logged and carried to the next."""
        owed = sessions | self._carried
        failed = self.sync_sessions(owed)
        if failed:
            self._carried = failed
            self.checkpoint_errors += 1
            return False
        self._carried = set()
        self.retire(upto)
        return True

    def sync_sessions(self, sessions: Iterable[str]) -> set[str]:
        """Fsync each session's file (:func:`sync_files`); returns the sessions whose sync
        failed."""
        sids = list(sessions)
        if len(sids) > 1 and self._checkpoint_pool is None:
            self._checkpoint_pool = ThreadPoolExecutor(CHECKPOINT_THREADS, "gamehost checkpoint")
        failed = sync_files(self.sessions_dir, sids, self._checkpoint_pool)
        self.checkpoint_syncs += len(sids) - len(failed)
        return failed

    def retire(self, upto: int) -> None:
        """Delete every segment up to number ``upto``, oldest first, the folder synced after each
        (so the segments left are always a run of consecutive numbers)."""
        with self._retire_lock:
            for number in segment_numbers(self.folder):
                if number > upto:
                    break
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path(number))
                _fsync_dir(self.folder)

    def close(self) -> None:
        """Wait for the checkpoint thread, fsync what the open segment touched, and retire every
        segment (a failure leaves them for the next recovery)."""
        if self._checkpointer is not None:
            self._checkpoints.put(None)
            self._checkpointer.join()
            self._checkpointer = None
        if self._sync_thread is not None:
            self._sync_thread.shutdown()
            self._sync_thread = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        try:
            if self.broken is None:  # else recovery sorts it out on the next open
                self.checkpoint(self.number, self.dirty)
        except OSError as exc:
            log.error("wal_final_checkpoint_failed", error=str(exc))
        finally:
            self.dirty = set()
            if self._checkpoint_pool is not None:
                self._checkpoint_pool.shutdown()
                self._checkpoint_pool = None
