"""The embedded event store: one append-only JSON-lines file per session.

Layout: ``<data-dir>/sessions/<session>.jsonl``, mode 0600 (logs hold hands and the seed), in a
``sessions`` folder of mode 0700 (set on every start, also when the folder existed before). Each
line is one record ``{"seq": n, "ts": "2026-11-30T10:00:00.123Z", "type": ..., ...}`` with a
gapless ``seq`` from 0 (see ``host.table.engine`` for the record types).

Durability: :meth:`FileStore.append` returns only once its records are written, flushed and (per
``fsync``) synced. One long-lived writer thread, started by :meth:`FileStore.run` and fed by a
thread-safe queue, takes every append queued so far as one batch and writes it; the
acknowledgements of a batch go back to trio in one ``TrioToken.run_sync_soon`` callback (no thread
hand-off per batch or append).

The store that holds the data dir (a host's, made with ``exclusive``; or a tool's that finds the
data dir free when it starts running) writes every session's appends through one shared write-ahead
log, ``<data-dir>/wal/`` (``host.store.wal``: its format, checkpoints and recovery): the batch's
records go to the log, the log's sync begins (in its own thread), meanwhile each append is written
to its session file (not synced: the log holds it), and once the sync returns the batch is
acknowledged (a failed sync cuts the appends off their files again and fails them). The session
files thus hold every acknowledged record as soon as it is acknowledged (readers see it), byte for
byte as without the log; they are made durable off the critical path, when a full segment of the
log (16 MiB) is checkpointed by a background thread (each session file it touched fsynced, 16 at
once, then the segment deleted), and when the store closes (everything checkpointed, no segment
left). Opening the data dir replays any segment left by a crash onto the session files first.
``fsync``:

- ``always``: the log is synced after each append on its own, before it is acknowledged;
- ``batch`` (default): one sync of the log per batch covers every append queued meanwhile, of
  every session (group commit): one ``fdatasync`` per batch, however many sessions it touched;
- ``never``: no log; each append is written and flushed only (survives a crash of the host, not
  of the machine).

A store that does not hold the data dir (a tool beside a running host; ``wal=False``) writes file
by file instead: each touched file is fsynced once per batch (``always``: each append on its
own). Those files are synced by up to :data:`SYNC_THREADS` threads at once (each takes its share),
not one after the other: the filesystem's journal then commits them together. Syncs use
``fdatasync`` where the OS has it (it flushes the data and the file size an append changes, which
is all a later read needs; ``fsync`` elsewhere).

Shutdown: :meth:`FileStore.aclose` refuses new appends, lets the thread write everything queued,
and waits until it has closed its files and ended. If the task running :meth:`FileStore.run` is
cancelled instead, the store closes the same way: the thread still writes (and acknowledges) every
append queued before, so none is acknowledged unwritten and no appender waits forever.

Timestamps: every record's ``ts`` is the wall-clock time of its append to the millisecond; the
string is made at most once per millisecond and shared by the appends within it.

Descriptors: the writer keeps at most ``max_open`` log files open (least recently used closed
first). Without the write-ahead log, a descriptor written in the current batch is fsynced before
it is closed to make room, so every acknowledged append was synced on its own file, never on a
reused descriptor number (with it, the log's sync covers the append; a checkpoint syncs the file
by its name).
:meth:`FileStore.release` never closes a file under the writer thread: while a batch is being
written (the thread holds a lock on the open files) it is handed to the thread, which closes the
file once its batch is done; while the thread waits for work, it is closed at once. When opening
a log fails for want of descriptors (EMFILE/ENFILE), the writer closes its cached files and tries
once more.

Failed appends: an append that raises (a write, fsync or open error; a failed write or sync of
the write-ahead log fails every append of its batch) leaves the session *not open*: the store
forgets its next seq, so every later append of it raises :class:`Conflict` — including appends
already queued behind the failed one (no record is ever written after a gap) — until
:meth:`FileStore.load` re-reads the log. A write that fails half way is cut off again where
possible; whatever is left (a torn last line) is truncated by that ``load``. Records of a failed
append may still be in the log (e.g. written but not synced, or in the write-ahead log, which a
recovery after a crash replays), so the caller must carry on from what ``load`` returns, not from
what it meant to write.

Optimistic concurrency: an append names the seq it expects to write first; any other value is a
:class:`Conflict`, never an overwrite.

Checksums: each line is ``{"crc":"<8 hex digits>",`` followed by the rest of the record's
canonical bytes, the CRC32C of which the digits are (see ``host.store.base``: one JSON object per
line still, ``crc`` always its first key). Every read checks it; a line that starts ``{"seq":``
was written before checksums and is accepted unchecked.

Damage: loading tells a torn tail from a damaged log. Only a torn *last* line — an append a
crash cut short: a prefix of its line with no newline at its end, or (in a log whose lines carry
no checksum, as before checksums) a last line that is not JSON — is dropped: truncated in place,
with a warning, when repairing; it was never acknowledged. Anything else raises
:class:`CorruptLog` naming the file and the seq: an empty file, a record that does not match its
checksum (the last one too, with its newline; or with its first bytes flipped, which its hex
digits at bytes 8-17 still show), a whole last line followed by one byte in place of its newline
(a flipped newline: a cut-short append is never the whole line and one byte more), a line
without a checksum after one with it (a removed checksum), a line that starts with neither a
checksum nor a seq, a first record that is not a valid header (its ``seed`` must hash to its
``seed_commitment``), a bad line before the last one, a seq out of order. :func:`fold_log` does
the same for records that read but do not fold (an unknown card, an inconsistent record). A
record still in the write-ahead log is restored from it on the next start, before any load.

Links: logs are opened without following symbolic links and must be regular files; anything else
in ``sessions/`` is refused (:class:`CorruptLog`) and left untouched, and not listed by
:meth:`FileStore.session_ids` (nor is a file whose name is not a session id).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import queue
import re
import secrets
import stat
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs
import orjson
import structlog
import trio

from host.errors import BadSessionId
from host.store.base import (
    _SESSION_ID,
    _STOP,
    _SUMMED,
    Conflict,
    CorruptLog,
    StoreClosed,
    StoreStatistics,
    UnknownSession,
    WriterThreadStore,
    check_append,
    check_record,
    check_seqs,
    creation_records,
    decode_line,
    encode_lines,
)
from host.store.wal import SEGMENT_BYTES, Recovery, Wal, cut_line, wal_lines

if TYPE_CHECKING:
    from host.table.engine import Engine, Record, SessionState

__all__ = [
    "DataDirInUse",
    "FileStore",
    "FsyncMode",
    "LogReader",
    "LogScan",
    "fold_log",
    "read_log",
    "scan_bytes",
    "scan_log",
    "torn_last_line",
]

FsyncMode = Literal["always", "batch", "never"]
MAX_OPEN = 256
"""Default of ``FileStore(max_open=...)``: log files the writer keeps open at once; others are
reopened when appended to."""
SYNC_THREADS = 16
"""Threads that sync the files of one batch at once (see the module docstring)."""
INDEX_ENTRIES = 4_000_000
"""Line offsets the store keeps in memory for :meth:`FileStore.read_range`, in all (8 bytes
each: 32 MiB); past it the least recently read sessions' indexes are dropped."""
INDEX_CHUNK = 8 << 20
"""Bytes read at a time while a log's line index is built or extended."""
_HEX8 = re.compile(rb'[0-9a-f]{8}",')  # a checksum's digits and the comma after its quote
log = structlog.get_logger("gamehost.store")


def _append_all(fd: int, data: bytes, start: int) -> None:
    """Write all of ``data`` to ``fd``, whose end is at ``start``; on a failure cut the file
    back to ``start`` (else a load would find a torn tail) and raise the ``OSError``."""
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(errno.EIO, "write wrote nothing")
            view = view[n:]
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        raise


def _datasync(fd: int) -> None:
    """Make what was appended to ``fd`` durable: ``fdatasync`` (data and size), or ``fsync``
    where the OS has no ``fdatasync``.

    Raises:
        OSError: the sync failed.
    """
    sync = getattr(os, "fdatasync", None)
    (sync or os.fsync)(fd)


def _try_datasync(fd: int) -> OSError | None:
    """:func:`_datasync`, returning its error instead of raising it (for a sync thread)."""
    try:
        _datasync(fd)
    except OSError as exc:
        return exc
    return None


class DataDirInUse(OSError):
    """Another process holds the data dir (two hosts on one set of files would corrupt logs)."""


def _lock_dir(folder: Path) -> int:
    """Take an exclusive ``flock`` on ``folder/.gamehost.lock`` (it holds the holder's pid);
    returns the open descriptor, which holds the lock until it is closed or the process dies.

    Raises:
        DataDirInUse: another process holds it.
    """
    fd = os.open(
        folder / ".gamehost.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise DataDirInUse(
            f"{folder} is in use by another host (pid {holder}); one data dir serves one"
            " host process"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _open_log(path: Path, flags: int) -> int:
    """Open a log without following a symbolic link; refuse anything but a regular file.

    Raises:
        CorruptLog: ``path`` is a symbolic link or not a regular file (nothing is changed).
        OSError: any other failure to open it (e.g. ``FileNotFoundError``, EMFILE).
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CorruptLog(path, 0, "a symbolic link, not a log file: refused") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise CorruptLog(path, 0, "not a regular file: refused")
        if flags & os.O_ACCMODE == os.O_RDONLY:
            return fd
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _read_all(path: Path) -> bytes:
    fd = _open_log(path, os.O_RDONLY)
    with open(fd, "rb") as f:
        return f.read()


def _truncate(path: Path, size: int) -> None:
    """Cut a log to ``size`` bytes, durably (links are not followed)."""
    fd = _open_log(path, os.O_RDWR)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


@attrs.frozen
class LogScan:
    """What :func:`scan_log` found in a log file.

    Attributes:
        records: the records in order, as dicts (``crc`` taken out).
        torn_at: the byte offset of a torn last line (dropped), or None.
        unchecked: how many records carry no checksum (written before checksums).
    """

    records: list[dict[str, Any]]
    torn_at: int | None
    unchecked: int


def scan_log(path: Path, repair: bool = False) -> LogScan:
    """Read a session log, telling a torn tail from damage (see :func:`read_log`), and say what
    it found.

    Raises:
        CorruptLog, OSError: as :func:`read_log`.
    """
    scan = scan_bytes(path, _read_all(path))
    if repair and scan.torn_at is not None:
        _truncate(path, scan.torn_at)
    return scan


def scan_bytes(path: Path, data: bytes) -> LogScan:
    """:func:`scan_log` of a log's bytes ``data`` (``path`` names it in errors and warnings).

    Raises:
        CorruptLog: as :func:`read_log`.
    """
    reader = LogReader(path, data)
    records = list(reader)
    return LogScan(records, reader.torn_at, reader.unchecked)


class LogReader:
    """A log's records one at a time, as :func:`read_log` reads and checks them, without
    holding them all: for a reader that looks at each record once (``replay --verify``), so
    that a long log takes the memory of its bytes, not of every record parsed.

    Iterating yields each record as a dict (``crc`` taken out), in order; once it ended,
    :attr:`torn_at` and :attr:`unchecked` are those of :class:`LogScan`. Iterate once.

    Args:
        path: names the log in errors and warnings.
        data: the log's bytes.
        warn: log a ``torn_tail`` warning for a torn last line (False: a second read of bytes
            read before, which warned then).

    Raises (while iterating):
        CorruptLog: as :func:`read_log`, at the first damaged record (those before it were
            yielded).
    """

    def __init__(self, path: Path, data: bytes, warn: bool = True) -> None:
        self.path = path
        self.data = data
        self.warn = warn
        self.torn_at: int | None = None
        self.unchecked = 0

    @classmethod
    def open(cls, path: Path) -> LogReader:
        """A reader of the log file at ``path`` (read whole into memory; links not followed).

        Raises:
            OSError: the file cannot be read.
        """
        return cls(path, _read_all(path))

    def lines(self) -> int:
        """The log's lines (complete or torn): about its records, counted without parsing."""
        data = self.data
        return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        path, data = self.path, self.data
        if not data:
            raise CorruptLog(path, 0, "the file is empty (no header record)")
        pos = 0
        seq = 0
        torn = False
        summed = False  # a checksummed line was read: every later one must carry a checksum too
        size = len(data)
        while pos < size:
            nl = data.find(b"\n", pos)
            if nl < 0:
                _check_torn_tail(path, seq, data, pos)
                torn = True
                break
            try:
                rec = decode_line(path, seq, data, pos, nl)
            except CorruptLog as exc:
                if nl == size - 1 and not summed and _torn_line(data[pos:nl]):
                    torn = True
                    break
                raise CorruptLog(path, seq, f"the line at byte {pos}: {exc.message}") from None
            if data.startswith(_SUMMED, pos, nl):
                summed = True
            elif summed:
                raise CorruptLog(
                    path,
                    seq,
                    f"the line at byte {pos} carries no checksum, but the records before it do"
                    " (its checksum was removed)",
                )
            else:
                self.unchecked += 1
            yield check_record(path, seq, rec)
            seq += 1
            pos = nl + 1
        if torn:
            if not seq:
                raise CorruptLog(path, 0, "no complete header record (only a torn line)")
            if self.warn:
                log.warning("torn_tail", path=str(path), offset=pos, dropped=size - pos)
            self.torn_at = pos


def _check_torn_tail(path: Path, seq: int, data: bytes, pos: int) -> None:
    """Refuse a tail with no newline (``data[pos:]``, the line of ``seq``) that is a whole line
    whose newline was damaged rather than an append a crash cut short: a cut-short append is a
    prefix of its line, never the whole line and one byte more.

    Raises:
        CorruptLog: the tail is a line that reads, followed by one byte in place of its newline.
    """
    if len(data) - pos < 2:
        return
    try:
        decode_line(path, seq, data, pos, len(data) - 1)
    except CorruptLog:
        return  # a prefix of a line: torn
    raise CorruptLog(
        path,
        seq,
        f"the line at byte {pos} ends with byte {data[-1]:#04x} where its newline belongs"
        " (damaged, not torn)",
    )


def torn_last_line(path: Path, seq: int, line: bytes, summed: bool) -> bool:
    """Whether a log's last line ``line`` (seq ``seq``, with its newline if it has one) is a
    torn tail, as :func:`scan_bytes` tells it; ``summed``: a line before it carries a checksum.
    False for a line that is no torn tail, whether it reads or not (reading it tells).

    Raises:
        CorruptLog: a whole line followed by one byte in place of its newline.
    """
    if not line.endswith(b"\n"):
        _check_torn_tail(path, seq, line, 0)
        return True
    try:
        decode_line(path, seq, line, 0, len(line) - 1)
    except CorruptLog:
        return not summed and _torn_line(line[:-1])
    return False


def _torn_line(line: bytes) -> bool:
    """Whether a last line that ends with a newline but does not decode is a torn append, in a
    log whose lines carry no checksum (as logs before checksums were told: it is not JSON). A
    line that starts as a checksummed line does — or did, before a flipped bit in its first
    bytes: its 8 hex digits and ``",`` still stand at bytes 8-17 — is damage, as anywhere else
    (so is any such line in a log that carries checksums; :func:`scan_bytes` asks only there)."""
    if line.startswith(_SUMMED) or _HEX8.match(line, 8):
        return False
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return True
    return False


def read_log(path: Path, repair: bool = False) -> list[dict[str, Any]]:
    """Read a session log, telling a torn tail from damage, checking every record's checksum.

    Only a torn last line is dropped (an append the crash cut short, never acknowledged): a
    prefix of its line with no newline at its end (not the whole line and a byte in place of
    its newline), or — in a log without checksums, as such logs were read before — a last line
    that is not JSON and does not start as a checksummed line. With ``repair`` it is also
    truncated from the file, durably. Every other line must decode
    (:func:`host.store.base.decode_line`): a checksummed line must match its checksum, a line
    without one (written before checksums) must start ``{"seq":`` and come before the first
    checksummed line. Links are not followed.

    Args:
        path: the ``.jsonl`` file.
        repair: truncate a torn last line in place (the host does this on open); otherwise it
            is just skipped.

    Returns:
        The records in order, as dicts (each with an int ``seq`` and a str ``type``, without
        ``crc``); the first is a header whose ``seed`` matches its ``seed_commitment``.

    Raises:
        CorruptLog: naming the file and seq: an empty file or one with no complete header, a
            record that does not match its checksum, a line without a checksum after one with
            it, a last line whose newline is damaged, a first record that is not a valid
            header, a bad line before the last one, a seq out of order, a second header; or
            ``path`` is a link or not a regular file.
        OSError: the file cannot be read.
    """
    return scan_log(path, repair).records


def fold_log(
    path: Path | str,
    engine: Engine,
    records: Iterable[Record],
    keep: Callable[[SessionState], None] | None = None,
) -> SessionState:
    """Fold a log's records (header first, as :func:`read_log` returns them, made
    :class:`~host.table.engine.Record`) with the game's engine, and decode every ``action`` record's
    action, so a log whose records read but do not make sense is told as damage.

    Any exception the engine, codec or game plugin raises while folding a record (a ``KeyError``,
    ``ValueError``, ``IndexError``, a plugin's own error on an unknown card, ...) becomes one
    :class:`CorruptLog` with that record's seq.

    Args:
        records: a list, or any iterable read once (a :class:`LogReader`'s records: a log
            folded in the memory of its bytes); a :class:`CorruptLog` it raises goes through.
        keep: called with the state after each record, the header's first (to keep the one at
            some seq: ``gamehost replay --at``).

    Returns:
        The session state after the last record.

    Raises:
        CorruptLog: no records, or the first record (by seq) that does not fold.
    """
    log = iter(records)
    first = next(log, None)
    if first is None:
        raise CorruptLog(path, 0, "no header record")
    seq = first.seq
    try:
        if first.type != "header" or seq != 0:
            raise ValueError("the first record is not the header at seq 0")
        state = engine.initial(first)
        if keep is not None:
            keep(state)
        for rec in log:
            seq = rec.seq
            if rec.type == "action":
                seat = rec.data["seat"]
                if type(seat) is not int or not 0 <= seat < len(state.seats):
                    raise ValueError(f"no seat {seat!r}")
                if rec.obj is None:
                    engine.codec.action_from_wire(rec.data["action"])
            state = engine.apply(state, rec)
            if keep is not None:
                keep(state)
    except CorruptLog:  # a record that does not read: told as it is
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the plugin raises is damage here
        raise CorruptLog(path, seq, f"does not fold: {type(exc).__name__}: {exc}") from exc
    return state


@attrs.define
class _Append:
    session: str
    data: bytes
    opened: int  # which opening (load or create) of the session the append belongs to
    first: int  # the seq of its first record
    lines: list[bytes]  # its log lines (``data`` is them joined)
    start: int = -1  # where it was written in its session file (write-ahead log mode)
    done: trio.Event = attrs.field(factory=trio.Event)
    error: BaseException | None = None


def _not_open(session: str) -> Conflict:
    return Conflict(
        f"session {session} is not open in this store (an earlier append of it failed:"
        " load it again)"
    )


class _LineIndex:
    """Where each complete line of one log file starts: ``starts[k]`` is the byte offset of
    seq ``k``'s line and ``starts[-1]`` the end of the last complete line (a torn tail is left
    out). Derived data: rebuilt whenever the file is not the one it was built from."""

    def __init__(self, ino: int) -> None:
        self.ino = ino
        self.mtime_ns = 0
        self.starts = array("q", [0])

    @property
    def count(self) -> int:
        return len(self.starts) - 1

    def extend(self, fd: int, size: int) -> None:
        """Index the complete lines between the indexed end and ``size`` bytes."""
        pos = self.starts[-1]
        while pos < size:
            chunk = os.pread(fd, min(INDEX_CHUNK, size - pos), pos)
            if not chunk:
                break
            last = chunk.rfind(b"\n")
            while last < 0 and pos + len(chunk) < size:  # a line longer than a chunk
                more = os.pread(fd, INDEX_CHUNK, pos + len(chunk))
                if not more:
                    break
                chunk += more
                last = chunk.rfind(b"\n")
            if last < 0:
                break  # only a torn tail is left
            ends = accumulate(map((1).__add__, map(len, chunk[:last].split(b"\n"))), initial=pos)
            next(ends)  # pos itself is indexed already
            self.starts.extend(ends)
            pos = self.starts[-1]


class FileStore(WriterThreadStore):
    """The file-backed store. Start :meth:`run` in a nursery before appending.

    Args:
        root: the data dir; logs go to ``root/sessions`` (made, or set to, mode 0700).
        fsync: ``always``, ``batch`` or ``never`` (see the module docstring).
        max_open: how many log files the writer keeps open at once (at least 1).
        logs_in_root: the logs go in ``root`` itself, not ``root/sessions`` (a folder of logs
            outside a data dir, as ``replay --fork-at --out`` writes); ``root`` is made with
            mode 0700 if missing, an existing folder's mode is left alone. No write-ahead log.
        exclusive: hold the data dir from now on, as a host does (its lock,
            ``root/.gamehost.lock``), and recover its write-ahead log at once.
        wal: write appends through the write-ahead log ``root/wal`` while this store holds the
            data dir and ``fsync`` is not ``never`` (False: always file by file).
        segment_bytes: the size past which the write-ahead log begins a new segment.

    Raises:
        ValueError: ``max_open`` below 1.
        DataDirInUse: ``exclusive``, and another store or process holds the data dir.
        WalDamaged: ``exclusive``, and the write-ahead log is damaged (see ``host.store.wal``).
    """

    def __init__(
        self,
        root: Path | str,
        fsync: FsyncMode = "batch",
        *,
        max_open: int = MAX_OPEN,
        logs_in_root: bool = False,
        exclusive: bool = False,
        wal: bool = True,
        segment_bytes: int = SEGMENT_BYTES,
    ) -> None:
        if max_open < 1:
            raise ValueError(f"max_open must be at least 1, not {max_open}")
        self.dir = Path(root) if logs_in_root else Path(root) / "sessions"
        if self.dir.is_symlink():  # a link would let repairs and chmod reach outside the data dir
            raise NotADirectoryError(f"{self.dir} is a symbolic link, not the log folder: refused")
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock_fd: int | None = None
        if exclusive:
            self._lock_fd = _lock_dir(Path(root))
        if not logs_in_root:
            os.chmod(self.dir, 0o700)  # also when it existed before, with a looser mode
        if exclusive:  # only the host holding the data dir: a tool must not remove its temp files
            for tmp in self.dir.glob(".*.tmp"):  # a create cut off by a crash: not acknowledged
                with contextlib.suppress(OSError):
                    tmp.unlink()
        self.fsync = fsync
        self.max_open = max_open
        self._root = Path(root)
        self._wal_wanted = wal and not logs_in_root
        self._segment_bytes = segment_bytes
        self.wal: Wal | None = None
        """The write-ahead log appends go through, while this store holds the data dir (and
        ``fsync`` is not ``never``); None: appends are written (and synced) file by file."""
        self.recovery: Recovery | None = None
        """What recovering the write-ahead log did when this store took the data dir."""
        self._n_wal_syncs = 0  # of write-ahead logs this store held before
        # trio side: the next seq of each open session, its opening, its appends not yet done
        self._next: dict[str, int] = {}
        self._opened: dict[str, int] = {}
        self._openings = 0
        self._pending: dict[str, int] = {}
        # handed over: trio puts appends (then _STOP) in; the writer thread takes them out
        self._queue: queue.SimpleQueue[_Append | object] = queue.SimpleQueue()
        # writer side: the open files (lock held by the thread while it writes a batch), the
        # sessions whose append failed (by opening: later appends of that opening are refused),
        # and release() calls to do once the batch is done
        self._fds: dict[str, int] = {}
        self._fds_lock = threading.Lock()
        self._sync_pool: ThreadPoolExecutor | None = None  # made on the first parallel sync
        self._failed: dict[str, int] = {}
        self._releases: set[str] = set()
        self._init_lifecycle()
        self._n_appends = self._n_records = self._n_batches = self._n_fsyncs = 0
        # read_range: a line index per session read by range, least recently used first
        self._indexes: OrderedDict[str, _LineIndex] = OrderedDict()
        self._indexes_lock = threading.Lock()
        if exclusive and not logs_in_root:
            try:
                self._hold()
            except BaseException:
                self._after_writer()  # the lock goes: the next host may try again
                raise

    def _hold(self) -> None:
        """With the data dir's lock held: recover the write-ahead log onto the session files
        and retire it, then write appends through a new one (unless ``fsync`` is ``never``)."""
        wal, self.recovery = Wal.open(self._root / "wal", self.dir, self._segment_bytes)
        if self._wal_wanted and self.fsync != "never":
            self.wal = wal

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the writer thread until :meth:`aclose` (see ``WriterThreadStore.run``). A store
        made without ``exclusive`` that would write through the write-ahead log takes the data
        dir's lock now if it is free (recovering the log first, in a worker thread) and lets it
        go when it ends; if a host holds it, appends are written file by file."""
        if self._lock_fd is None and self._wal_wanted and self.fsync != "never":
            try:
                self._lock_fd = _lock_dir(self._root)
            except DataDirInUse:
                pass
            else:
                try:
                    with trio.CancelScope(shield=True):  # cancelled, it still writes the queue
                        await trio.to_thread.run_sync(self._hold)
                except BaseException:
                    self._after_writer()
                    raise
        await super().run(task_status=task_status)

    splices_encoded: ClassVar[bool] = True
    """Record values that are ``orjson.Fragment`` (JSON made already) are written as they are
    (the session passes an event's body so, encoded once for the log and its push); read back,
    they are plain JSON like any other."""

    def path(self, session: str) -> Path:
        """The log file of a session."""
        return self.dir / f"{session}.jsonl"

    def _checked_path(self, session: str) -> Path:
        if not _SESSION_ID.match(session):
            raise BadSessionId(f"bad session id {session!r}")
        return self.path(session)

    def session_ids(self) -> list[str]:
        """Every session with a log file, sorted. Entries that are not regular files (symbolic
        links, folders, ...) or whose name is not a session id are skipped with a warning."""
        ids = []
        with os.scandir(self.dir) as it:
            for entry in it:
                if not entry.name.endswith(".jsonl"):
                    continue
                sid = entry.name[: -len(".jsonl")]
                if not _SESSION_ID.match(sid):
                    log.warning("not_a_log_file", path=entry.path, reason="not a session id")
                elif not entry.is_file(follow_symlinks=False):
                    log.warning("not_a_log_file", path=entry.path, reason="not a regular file")
                else:
                    ids.append(sid)
        return sorted(ids)

    def statistics(self) -> StoreStatistics:
        """The counters now (``fsyncs`` counts the write-ahead log's and its checkpoints')."""
        wal = self.wal
        return StoreStatistics(
            len(self._fds),
            self._n_appends,
            self._n_records,
            self._n_batches,
            self._n_fsyncs + self._n_wal_syncs + (wal.syncs if wal is not None else 0),
            self._queue.qsize() - (self._stop_sent and not self._stop_taken),
        )

    # -- reading -------------------------------------------------------------------------------
    def _check_idle(self, session: str) -> None:
        if self._pending.get(session):
            raise Conflict(f"session {session} has appends in progress")

    def _open(self, session: str, next_seq: int) -> None:
        """Make a session appendable at ``next_seq``, as a new opening: appends of an earlier
        opening still queued are not this one's."""
        self._openings += 1
        self._opened[session] = self._openings
        self._next[session] = next_seq

    def load(self, session: str) -> list[dict[str, Any]]:
        """Read a session's records (repairing a torn tail) and make it appendable at the next
        seq. This is also how a session whose append failed is opened again.

        Raises:
            Conflict: appends of the session are still queued or being written.
            UnknownSession: no log of that session.
            CorruptLog, OSError: see :func:`read_log` (the session stays not open).
            BadSessionId: a bad session id (a ``ValueError``).
        """
        path = self._checked_path(session)
        self._check_idle(session)
        self._next.pop(session, None)
        try:
            records = read_log(path, repair=True)
        except FileNotFoundError:
            raise UnknownSession(f"no session {session}") from None
        self._open(session, len(records))
        return records

    async def open_end(self, session: str) -> int:
        """Make a session appendable after its last complete record *without reading its
        records*, as :meth:`load` does after reading them all: a torn tail (a last line with no
        newline, or — in a log before checksums — one that is not JSON) is cut, durably, with
        a warning; a whole last line whose newline is damaged is :class:`CorruptLog`. For a log
        too long to read on the event loop, whose records are folded elsewhere (a heavy-work
        process reads and checks every one). The line index is made or extended in a worker
        thread. Returns the log's record count.

        Raises:
            Conflict: appends of the session are still queued or being written.
            UnknownSession: no log of that session.
            CorruptLog: the log is empty (no complete header), its last line is damaged (its
                newline, or it does not decode), it is a link or not a regular file.
            OSError: it cannot be read or cut. BadSessionId: a bad session id.
        """
        path = self._checked_path(session)
        self._check_idle(session)
        self._next.pop(session, None)
        count = await trio.to_thread.run_sync(self._cut_torn_end, session, path)
        self._open(session, count)
        return count

    def _cut_torn_end(self, session: str, path: Path) -> int:
        try:
            fd = _open_log(path, os.O_RDONLY)
        except FileNotFoundError:
            raise UnknownSession(f"no session {session}") from None
        try:
            idx = self._index(session, path, fd)
            size = os.fstat(fd).st_size
            count, end = idx.count, idx.starts[-1]
            if size > end:  # no newline: a cut-short append, unless a whole line's is damaged
                _check_torn_tail(path, count, os.pread(fd, size - end, end), 0)
            if count:
                start = idx.starts[count - 1]
                line = os.pread(fd, end - 1 - start, start)
                try:
                    decode_line(path, count - 1, line)
                except CorruptLog as exc:
                    before = idx.starts[count - 2] if count > 1 else start
                    summed = count > 1 and os.pread(fd, len(_SUMMED), before) == _SUMMED
                    if summed or not _torn_line(line):
                        what = f"the line at byte {start}: {exc.message}"
                        raise CorruptLog(path, count - 1, what) from None
                    count, end = count - 1, start  # not JSON, in a log without checksums: torn
        finally:
            os.close(fd)
        if count == 0:
            what = "the file is empty" if size == 0 else "no complete header record"
            raise CorruptLog(path, 0, f"{what} (no header record)")
        if size > end:
            log.warning("torn_tail", path=str(path), offset=end, dropped=size - end)
            _truncate(path, end)
        return count

    def truncate(self, session: str, keep: int) -> None:
        """Cut a (loaded, not yet appended-to) log after its first ``keep`` records, durably
        (through the write-ahead log first, if the store writes one: a ``cut`` line).

        Raises:
            Conflict: appends of the session are in progress.
            UnknownSession: no log of that session.
            CorruptLog: the log has fewer than ``keep`` records, or is not a regular file.
            OSError: the file cannot be read or cut.
            BadSessionId: a bad session id (a ``ValueError``).
        """
        path = self._checked_path(session)
        self._check_idle(session)
        try:
            data = _read_all(path)
        except FileNotFoundError:
            raise UnknownSession(f"no session {session}") from None
        end = 0
        for i in range(keep):
            nl = data.find(b"\n", end)
            if nl < 0:
                raise CorruptLog(path, i, f"cannot keep {keep} records: the log ends here")
            end = nl + 1
        wal = self.wal
        if wal is None:
            _truncate(path, end)
        else:  # said in the log first (a recovery cuts the file again), and cut before a
            # checkpoint can retire the segment holding that line
            with self._fds_lock:
                wal.write(cut_line(session, keep))
                wal.sync()
                wal.mark([session])
                _truncate(path, end)
        self._open(session, keep)

    async def read(self, session: str, after: int | None = None) -> list[dict[str, Any]]:
        """The session's records with a seq above ``after`` (all with None), changing nothing:
        no repair, and the session is not opened for appends. Read in a worker thread.

        Holds every acknowledged record; it may also hold records of appends not yet
        acknowledged (written, not yet synced), never a torn one.

        Raises:
            UnknownSession: no log of that session.
            CorruptLog, OSError: see :func:`read_log`.
            BadSessionId: a bad session id (a ``ValueError``).
        """
        path = self._checked_path(session)
        try:
            records = await trio.to_thread.run_sync(read_log, path)
        except FileNotFoundError:
            raise UnknownSession(f"no session {session}") from None
        return records if after is None else records[max(after + 1, 0) :]  # seq == index

    # -- reading ranges (an index of line offsets per session, built once, then extended) ------
    async def record_count(self, session: str) -> int:
        """How many complete records the session's log holds now (a torn tail not counted),
        from its line index (made or extended in a worker thread; no record is parsed).

        Raises:
            UnknownSession: no log of that session. OSError: it cannot be read.
            CorruptLog: the log is a link or not a regular file.
            BadSessionId: a bad session id (a ``ValueError``).
        """
        path = self._checked_path(session)
        return await trio.to_thread.run_sync(self._count, session, path)

    async def read_range(self, session: str, first: int, stop: int) -> list[dict[str, Any]]:
        """The records with ``first <= seq < stop`` (fewer when the log ends before ``stop``),
        reading only their bytes: the log's line index (byte offset of every line, derived
        data kept in memory, :data:`INDEX_ENTRIES` in all) is built on the first read and
        extended as the log grows. Changes nothing; in a worker thread. Each record is checked
        as :func:`read_log` checks it (JSON object, its seq in place, a type, a valid header).

        Raises:
            UnknownSession: no log of that session.
            CorruptLog: a record in the range is damaged; the log is a link or not a regular
                file. OSError: it cannot be read.
            BadSessionId: a bad session id (a ``ValueError``).
        """
        path = self._checked_path(session)
        return await trio.to_thread.run_sync(self._read_range, session, path, first, stop)

    def _index(self, session: str, path: Path, fd: int, fresh: bool = False) -> _LineIndex:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CorruptLog(path, 0, "not a regular file")
        with self._indexes_lock:
            idx = None if fresh else self._indexes.get(session)
            if (
                idx is None
                or idx.ino != st.st_ino
                or st.st_size < idx.starts[-1]
                or (st.st_size == idx.starts[-1] and st.st_mtime_ns != idx.mtime_ns)
            ):  # another file, or not this one grown by appends: built again
                idx = _LineIndex(st.st_ino)
            idx.extend(fd, st.st_size)
            idx.mtime_ns = st.st_mtime_ns
            self._indexes[session] = idx
            self._indexes.move_to_end(session)
            total = sum(len(i.starts) for i in self._indexes.values())
            while total > INDEX_ENTRIES and len(self._indexes) > 1:
                total -= len(self._indexes.popitem(last=False)[1].starts)
            return idx

    def _count(self, session: str, path: Path) -> int:
        try:
            fd = _open_log(path, os.O_RDONLY)
        except FileNotFoundError:
            raise UnknownSession(f"no session {session}") from None
        try:
            return self._index(session, path, fd).count
        finally:
            os.close(fd)

    def _read_range(self, session: str, path: Path, first: int, stop: int) -> list[dict[str, Any]]:
        try:
            fd = _open_log(path, os.O_RDONLY)
        except FileNotFoundError:
            raise UnknownSession(f"no session {session}") from None
        try:
            try:
                return self._parse_range(path, fd, self._index(session, path, fd), first, stop)
            except CorruptLog:  # a file replaced in place fools the index: build it again once
                return self._parse_range(
                    path, fd, self._index(session, path, fd, fresh=True), first, stop
                )
        finally:
            os.close(fd)

    @staticmethod
    def _parse_range(
        path: Path, fd: int, idx: _LineIndex, first: int, stop: int
    ) -> list[dict[str, Any]]:
        first = max(first, 0)
        stop = min(stop, idx.count)
        if first >= stop:
            return []
        start = idx.starts[first]
        data = os.pread(fd, idx.starts[stop] - start, start)
        lines = data.split(b"\n")
        out: list[dict[str, Any]] = []
        for i, seq in enumerate(range(first, stop)):
            line = lines[i] if i < len(lines) else b""
            try:
                rec = decode_line(path, seq, line)
            except CorruptLog:
                # as read_log: a last line that is not JSON and carries no checksum is an
                # append a crash cut short (never acknowledged): dropped
                if seq == idx.count - 1 and not line.startswith(_SUMMED):
                    break
                raise
            check_record(path, seq, rec)
            out.append(rec)
        return out

    # -- writing -------------------------------------------------------------------------------
    async def create(self, session: str, header: dict[str, Any] | list[dict[str, Any]]) -> None:
        """Create a session's log with its records from seq 0 (one header dict, or a list with
        the header first) in one append, durably. A create that fails leaves no log, and a crash
        during one leaves either no log or the whole of it (it is written to a temporary file,
        synced, then linked into place; leftover temporary files are removed on start).

        Raises:
            Conflict: the log exists, or the records' seqs are not 0, 1, ...
            ValueError: see :func:`creation_records`. StoreClosed: the store is shutting down.
            OSError: the log cannot be made or written.
        """
        if self._closed:
            raise StoreClosed("the store is closed")
        records = creation_records(session, header)
        check_seqs(records, 0)
        path = self.path(session)
        if os.path.lexists(path):
            raise Conflict(f"session {session} exists")
        data = b"".join(encode_lines(records))  # TypeError here (not JSON): nothing on disk yet
        await trio.to_thread.run_sync(self._create_file, session, path, data)
        self._open(session, len(records))
        self._n_appends += 1
        self._n_records += len(records)

    def _create_file(self, session: str, path: Path, data: bytes) -> None:
        """Write a new log whole into a temporary file, sync it, then link it into place, so a
        crash leaves either no log or the whole first append, never an empty or torn one.

        Raises:
            Conflict: the log exists (the link is refused). OSError: the write failed.
        """
        tmp = self.dir / f".{session}.{secrets.token_hex(4)}.tmp"
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if self.fsync != "never":
                    os.fsync(fd)
                    self._n_fsyncs += 1
            finally:
                os.close(fd)
            try:
                os.link(tmp, path, follow_symlinks=False)
            except FileExistsError:
                raise Conflict(f"session {session} exists") from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if self.fsync != "never":
            self._fsync_dir()

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
            Conflict: ``expected_seq`` is not the log's next seq, the records' seqs are wrong,
                or the session is not open (never loaded, or an earlier append of it failed —
                also one queued just before this one). Nothing was written.
            StoreClosed: the store is shutting down.
            OSError, CorruptLog: the open, write or fsync failed. The session is then not open:
                later appends raise ``Conflict`` until :meth:`load` re-reads the log, which may
                or may not hold this append's records (a torn tail is cut on load).
        """
        if self._closed:
            raise StoreClosed("the store is closed")
        check_append(self._next.get(session), session, expected_seq, records)
        if not records:
            return
        lines = encode_lines(records)
        self._next[session] = expected_seq + len(records)
        job = _Append(session, b"".join(lines), self._opened[session], expected_seq, lines)
        self._pending[session] = self._pending.get(session, 0) + 1
        self._queue.put(job)
        self._n_records += len(records)
        await job.done.wait()
        if job.error is not None:
            raise job.error

    def _after_writer(self) -> None:
        if self.wal is not None:  # closed by the writer thread: appends go file by file now
            self._n_wal_syncs += self.wal.syncs
            self.wal = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # frees the data dir for the next host
            self._lock_fd = None

    def _writer(self) -> None:
        """The writer thread: take every queued append as one batch, write it, hand the
        outcomes to trio; until ``_STOP``. Then close every file."""
        self._thread_started = True
        assert self._token is not None
        try:
            stop = False
            while not stop:
                batch = [self._queue.get()]
                with contextlib.suppress(queue.Empty):
                    while True:
                        batch.append(self._queue.get_nowait())
                stop = self._stop_taken = batch[-1] is _STOP
                jobs: list[_Append] = [job for job in batch if isinstance(job, _Append)]
                if jobs:
                    with self._fds_lock:
                        self._commit(jobs)
                        self._do_releases()
                    self._token.run_sync_soon(self._finish, jobs)
                if self._releases:  # handed over just as the batch ended
                    with self._fds_lock:
                        self._do_releases()
        finally:
            with self._fds_lock:
                for fd in self._fds.values():
                    os.close(fd)
                self._fds.clear()
                if self.wal is not None:  # fsync what it covers and retire every segment
                    self.wal.close()
            if self._sync_pool is not None:
                self._sync_pool.shutdown()
                self._sync_pool = None

    def _commit(self, batch: list[_Append]) -> None:
        """Write one batch (writer thread); a failed append gets its ``error``."""
        for job in batch:
            opening = self._failed.get(job.session)
            if opening is not None and job.opened > opening:
                del self._failed[job.session]  # opened again since: that failure is over
        try:
            self._write_batch(batch)
        except Exception as exc:  # noqa: BLE001 - a bug here must not hang every appender
            log.exception("store_batch_failed")
            for job in batch:
                job.error = job.error or exc
                self._failed[job.session] = job.opened

    def _finish(self, batch: list[_Append]) -> None:
        """Acknowledge a written batch (in trio): wake its appenders; a session whose append
        failed is no longer open (unless it was opened again meanwhile)."""
        for job in batch:
            if job.error is not None and self._opened.get(job.session) == job.opened:
                self._next.pop(job.session, None)
            left = self._pending[job.session] - 1
            if left:
                self._pending[job.session] = left
            else:
                del self._pending[job.session]
            job.done.set()

    def _do_releases(self) -> None:
        """Close released files (with the lock on the open files held)."""
        while self._releases:
            session = self._releases.pop()
            self._failed.pop(session, None)
            fd = self._fds.pop(session, None)
            if fd is not None:
                os.close(fd)

    def _fd(
        self, session: str, unsynced: dict[str, list[_Append]], failed: dict[str, BaseException]
    ) -> int:
        """The session's open file (the ``max_open`` most recently used stay open). Writer
        thread only."""
        fd = self._fds.pop(session, None)
        if fd is None:
            while len(self._fds) >= self.max_open:
                self._close(next(iter(self._fds)), unsynced, failed)
            flags = os.O_WRONLY | os.O_APPEND
            try:
                fd = _open_log(self.path(session), flags)
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE) or not self._fds:
                    raise
                log.warning("store_out_of_descriptors", open=len(self._fds), session=session)
                for other in list(self._fds):
                    self._close(other, unsynced, failed)
                fd = _open_log(self.path(session), flags)
        self._fds[session] = fd  # most recently used last
        return fd

    def _sync(
        self,
        session: str,
        fd: int,
        unsynced: dict[str, list[_Append]],
        failed: dict[str, BaseException],
    ) -> None:
        """fsync a file written in this batch; a failure fails the appends it was to cover."""
        jobs = unsynced.pop(session, None)
        if not jobs:
            return
        self._synced(session, jobs, _try_datasync(fd), failed)

    def _synced(
        self,
        session: str,
        jobs: list[_Append],
        error: OSError | None,
        failed: dict[str, BaseException],
    ) -> None:
        """Count a sync of ``session``'s file, or fail the appends it was to cover."""
        if error is None:
            self._n_fsyncs += 1
            return
        for job in jobs:
            job.error = error
        failed[session] = error

    def _sync_all(
        self, unsynced: dict[str, list[_Append]], failed: dict[str, BaseException]
    ) -> None:
        """Sync every file the batch wrote, up to :data:`SYNC_THREADS` at once (writer thread)."""
        sessions = list(unsynced)
        if len(sessions) < 2:
            for session in sessions:
                self._sync(session, self._fds[session], unsynced, failed)
            return
        if self._sync_pool is None:
            self._sync_pool = ThreadPoolExecutor(SYNC_THREADS, "gamehost store sync")
        # one task per thread, each syncing its share one after another: as fast as one task
        # per file (the first syncs commit the journal for all), with fewer thread hand-offs
        k = min(SYNC_THREADS, len(sessions))
        shares = [sessions[i::k] for i in range(k)]
        fds = self._fds
        results = self._sync_pool.map(lambda share: [_try_datasync(fds[s]) for s in share], shares)
        for share, errors in zip(shares, results, strict=True):
            for session, error in zip(share, errors, strict=True):
                self._synced(session, unsynced.pop(session), error, failed)

    def _close(
        self, session: str, unsynced: dict[str, list[_Append]], failed: dict[str, BaseException]
    ) -> None:
        """Close a cached file, fsyncing it first if this batch wrote to it. Writer thread."""
        fd = self._fds.pop(session, None)
        if fd is None:
            return
        self._sync(session, fd, unsynced, failed)
        try:
            os.close(fd)
        except OSError as exc:
            log.warning("store_close_failed", session=session, error=str(exc))

    def _write_batch(self, batch: list[_Append]) -> None:
        """Write (and sync) a batch; each failed append gets its ``error``, and its session
        (that opening of it) is marked failed: later appends of it are refused."""
        if self.wal is not None:
            self._write_batch_wal(self.wal, batch)
        else:
            self._write_batch_files(batch)
        for job in batch:
            if job.error is not None:
                self._failed[job.session] = job.opened
        self._n_batches += 1
        self._n_appends += sum(1 for job in batch if job.error is None)

    def _write_batch_wal(self, wal: Wal, batch: list[_Append]) -> None:
        """A batch through the write-ahead log: its lines are written and synced (``batch``:
        once for the whole batch; ``always``: once per append), then each append is written to
        its session file (synced later by a checkpoint) and acknowledged."""
        failed: dict[str, BaseException] = {}
        live: list[_Append] = []
        for job in batch:
            if job.session in failed or self._failed.get(job.session) == job.opened:
                job.error = _not_open(job.session)  # never write after a gap
                continue
            if self.fsync == "always":
                try:
                    wal.write(wal_lines(job.session, job.first, job.lines))
                    began = time.perf_counter()
                    wal.sync()
                    if self.metrics is not None:
                        self.metrics.observe_fsync(time.perf_counter() - began)
                except OSError as exc:
                    job.error = exc
                    failed[job.session] = exc
                    continue
                self._write_file(job, failed)
            live.append(job)
        if self.fsync != "always" and live:
            try:
                wal.write(b"".join(wal_lines(job.session, job.first, job.lines) for job in live))
                began = time.perf_counter()
                pending = wal.sync_start()
            except OSError as exc:
                for job in live:
                    job.error = exc
                    failed[job.session] = exc
            else:
                for job in live:  # while the log syncs
                    if job.session in failed:
                        job.error = _not_open(job.session)
                    else:
                        self._write_file(job, failed)
                try:
                    wal.sync_wait(pending)
                except OSError as exc:
                    self._unwrite(live)
                    for job in live:
                        job.error = exc
                        failed[job.session] = exc
                else:
                    if pending is not None and self.metrics is not None:  # the batch's one sync
                        self.metrics.observe_fsync(time.perf_counter() - began)
        wal.mark(job.session for job in live)
        wal.rotate_if_full()

    def _write_file(self, job: _Append, failed: dict[str, BaseException]) -> None:
        """Write an append to its session file, not synced (the write-ahead log holds it); a
        failure is the append's ``error`` and fails its session for the rest of the batch."""
        try:
            fd = self._fd(job.session, {}, failed)
            job.start = os.lseek(fd, 0, os.SEEK_END)
            _append_all(fd, job.data, job.start)
        except (OSError, CorruptLog) as exc:
            job.error = exc
            failed[job.session] = exc
            self._close(job.session, {}, failed)  # a fresh open after the reload

    def _unwrite(self, jobs: list[_Append]) -> None:
        """Cut the appends of a batch whose log sync failed off their session files again (each
        session from where its first append of the batch began); what cannot be cut stays, as
        records of a failed append may."""
        cut: dict[str, int] = {}
        for job in jobs:
            if job.error is None and job.start >= 0:
                cut.setdefault(job.session, job.start)
        for session, start in cut.items():
            fd = self._fds.get(session)
            try:
                if fd is not None:
                    os.ftruncate(fd, start)
                else:
                    _truncate(self.path(session), start)
            except OSError as exc:
                log.warning("store_append_not_cut", session=session, error=str(exc))

    def _write_batch_files(self, batch: list[_Append]) -> None:
        """A batch written file by file, each file synced (per ``fsync``) before the batch is
        acknowledged (no write-ahead log: a store that does not hold the data dir)."""
        unsynced: dict[str, list[_Append]] = {}  # batch mode: written, fsync still owed
        failed: dict[str, BaseException] = {}
        for job in batch:
            if job.session in failed or self._failed.get(job.session) == job.opened:
                job.error = _not_open(job.session)  # never write after a gap
                continue
            try:
                fd = self._fd(job.session, unsynced, failed)
                _append_all(fd, job.data, os.lseek(fd, 0, os.SEEK_END))
                if self.fsync == "always":
                    began = time.perf_counter()
                    _datasync(fd)
                    self._n_fsyncs += 1
                    if self.metrics is not None:
                        self.metrics.observe_fsync(time.perf_counter() - began)
                elif self.fsync == "batch":
                    unsynced.setdefault(job.session, []).append(job)
            except (OSError, CorruptLog) as exc:
                job.error = exc
                failed[job.session] = exc
                self._close(job.session, unsynced, failed)  # a fresh open after the reload
        if unsynced:
            began = time.perf_counter()
            self._sync_all(unsynced, failed)
            if self.metrics is not None:  # one round: every file the batch wrote, synced
                self.metrics.observe_fsync(time.perf_counter() - began)

    def release(self, session: str) -> None:
        """Close a session's file when it will not be appended to again (it ended). While the
        writer thread works, the file is closed by it once its batch is done. Nothing of the
        session stays in the store's memory (its next seq and opening are forgotten: a later
        :meth:`load` opens it again)."""
        self._next.pop(session, None)
        self._opened.pop(session, None)
        self._releases.add(session)
        if self._fds_lock.acquire(blocking=False):
            try:
                self._do_releases()
            finally:
                self._fds_lock.release()
