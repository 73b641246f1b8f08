"""What every store shares: the :class:`Store` interface every session log goes through, its
errors, its statistics, the checks and encoding every store's appends make, and the writer-thread
life the file and PostgreSQL stores have in common.

A store keeps one append-only log per session: records (JSON objects) with a gapless ``seq``
from 0, the first a header (see ``host.table.engine`` for the record types). The host, ``replay``'s
fork and every other tool write logs only through a :class:`Store`; nothing else writes log files.

Implementations:

- :class:`host.store.file.FileStore`: the embedded default, one JSON-lines file per session, durable
  (per its ``fsync`` mode) and group-committed by one writer thread;
- :class:`host.store.memory.MemoryStore`: the same rules in memory, for tests and tools; nothing
  survives the process. Records are kept as the JSON lines a file would hold, so what is read back
  is a fresh copy, equal to what a :class:`~host.store.file.FileStore` would return;
- :class:`host.store.pg.PostgresStore`: every log as rows of one PostgreSQL database, which many
  hosts can share;
- :func:`host.store.open_store` picks one from a ``--store`` value.
  ``tests/host/test_store_contract.py`` runs one suite against every store; a new store passes it
  by being added to that suite's list.

Shared rules (the contract):

- **Records.** ``create`` and ``append`` take dicts with an int ``seq`` and a str ``type``; the
  store adds ``ts``, the time of the append (ISO 8601, UTC, milliseconds, ``Z``), unless the
  record brings its own. A record is stored as ``{"seq", "ts", **record}`` in that key order and
  read back (``load``, ``read``) as new dicts equal to what was written, JSON-encoded by orjson
  (``TypeError`` for what it cannot encode, before anything is stored).
- **Checksums.** Every record is stored with the CRC32C of its canonical bytes (the orjson
  encoding of ``{"seq", "ts", **record}``, :func:`encode_bodies`): in a log file as the line's
  first key, ``{"crc":"<8 hex>",...`` (:func:`frame`), in PostgreSQL in a ``crc`` column. Every
  ``load`` and ``read`` checks it: a record that does not match is a :class:`CorruptLog` naming
  its seq (``session_damaged``). Records written before checksums (a file line that starts
  ``{"seq":``, a row whose ``crc`` is null) are accepted unchecked; new appends always carry one.
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

import re
import time
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs
import crc32c
import orjson
import trio

from host.errors import BadHeader, BadSessionId, LogError
from host.game import seed_commitment

__all__ = [
    "CHECKSUM_KEY",
    "HEADER_FIELDS",
    "Conflict",
    "CorruptLog",
    "Store",
    "StoreClosed",
    "StoreStatistics",
    "UnknownSession",
    "WriterThreadStore",
    "body_of",
    "check_append",
    "check_record",
    "check_seqs",
    "checksum",
    "creation_records",
    "decode_line",
    "decode_row",
    "encode_bodies",
    "encode_lines",
    "frame",
    "now_ts",
]

CHECKSUM_KEY = "crc"
"""The key of a log line's checksum (first in the line); no record may have it."""
_SUMMED = b'{"crc":"'  # how a checksummed line starts
_UNSUMMED = b'{"seq":'  # how a line written before checksums starts
_BODY = len(b'{"crc":"12345678",')  # where the rest of the canonical bytes starts in a line
_OPEN = crc32c.crc32c(b"{")  # the CRC32C of the canonical bytes' opening brace
_SESSION_ID = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")  # \Z: "$" would let a trailing newline in
HEADER_FIELDS = ("game", "options", "seats", "seed", "seed_commitment")
"""Fields every header record must have (``host.table.engine`` writes more)."""


class Conflict(LogError):
    """An append expected a different next seq, a create found the session already there, or the
    session is not open (never loaded, or an earlier append of it failed: load it again).
    Answered ``unavailable``: the session reloads its log."""


class CorruptLog(LogError):
    """A log that cannot be read as a session: damaged, not a regular file, or not foldable.

    ``str()`` is ``"<path>: seq <seq>: <message>"``; the ``session_damaged`` reply says the seq
    and the message, not the path.

    Attributes:
        path: the log file.
        seq: the seq of the first record that is wrong (where it should be; 0 for the header
            or a file that cannot be opened as a log).
        message: what is wrong, in words.
    """

    code = "session_damaged"

    def __init__(self, path: Path | str, seq: int, message: str) -> None:
        super().__init__(message)
        self.args = (path, seq, message)
        self.path = Path(path)
        self.seq = seq

    def __str__(self) -> str:
        return f"{self.path}: seq {self.seq}: {self.message}"

    def reply(self) -> tuple[str, str, dict[str, Any]]:
        """``session_damaged``, naming the seq and what is wrong (not the file)."""
        return self.code, f"the session's log is damaged at seq {self.seq}: {self.message}", {}


class StoreClosed(LogError):
    """The store is shutting down: no new appends (answered ``unavailable``)."""


class UnknownSession(LogError, LookupError):
    """No log of that session in the store (``load``, ``read``, ``truncate``); answered
    ``unknown_session``."""

    code = "unknown_session"


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


_ts_cache: tuple[int, str] = (-1, "")


def now_ts() -> str:
    """The time now as a record's ``ts``: ISO 8601 in UTC to the millisecond with a ``Z``, e.g.
    ``2026-11-30T10:00:00.123Z`` (24 characters). The string is made at most once per
    millisecond and shared by the calls within it."""
    global _ts_cache
    ms = time.time_ns() // 1_000_000
    cached_ms, text = _ts_cache
    if ms != cached_ms:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"
        _ts_cache = (ms, text)
    return text


def _check_header(path: Path, rec: dict[str, Any]) -> None:
    if rec["type"] != "header":
        raise CorruptLog(path, 0, f"the first record is a {rec['type']!r}, not the header")
    missing = [f for f in HEADER_FIELDS if f not in rec]
    if missing:
        raise CorruptLog(path, 0, f"the header lacks {', '.join(missing)}")
    seed, commitment = rec["seed"], rec["seed_commitment"]
    try:
        if not isinstance(seed, str):
            raise ValueError
        raw = bytes.fromhex(seed)
    except ValueError:
        raise CorruptLog(path, 0, "the header's seed is not a hex string") from None
    if not raw or seed_commitment(raw) != commitment:
        raise CorruptLog(path, 0, "the header's seed does not match its seed_commitment")
    if not isinstance(rec["game"], str):
        raise CorruptLog(path, 0, "the header's game is not a string")
    if type(rec["seats"]) is not int or rec["seats"] < 1:
        raise CorruptLog(path, 0, "the header's seats is not a positive integer")


def check_append(
    next_seq: int | None, session: str, expected_seq: int, records: list[dict[str, Any]]
) -> None:
    """The checks every store's append makes before it writes anything: the session is open
    (``next_seq`` is its next seq, None if not), ``expected_seq`` is that seq, and the records'
    seqs run on from it.

    Raises:
        Conflict: any of those does not hold.
    """
    if next_seq is None:
        raise Conflict(f"session {session} is not open in this store")
    if expected_seq != next_seq:
        raise Conflict(f"session {session}: expected seq {expected_seq}, the log is at {next_seq}")
    check_seqs(records, expected_seq)


def check_seqs(records: list[dict[str, Any]], first: int) -> None:
    """Raise :class:`Conflict` unless the records' seqs are ``first``, ``first + 1``, ..."""
    for i, rec in enumerate(records):
        if rec.get("seq") != first + i:
            raise Conflict(f"record {i} has seq {rec.get('seq')}, wanted {first + i}")


def encode_bodies(records: list[dict[str, Any]]) -> list[bytes]:
    """The canonical bytes of records appended together: ``{"seq", "ts", **record}`` each as
    orjson writes it (no newline), one timestamp for all (a record's own ``ts`` wins). Their
    CRC32C is the record's checksum (:func:`checksum`).

    Raises:
        TypeError: a record JSON cannot hold, or one with a key ``crc`` (the store's own).
    """
    ts = now_ts()
    out = []
    for r in records:
        if CHECKSUM_KEY in r:
            raise TypeError(f"record {r.get('seq')!r}: the key {CHECKSUM_KEY!r} is the store's")
        out.append(orjson.dumps({"seq": r["seq"], "ts": ts, **r}))
    return out


def checksum(body: bytes) -> int:
    """The CRC32C (Castagnoli, as iSCSI and ext4 use it; hardware-accelerated by the ``crc32c``
    package) of a record's canonical bytes, an unsigned 32-bit int."""
    return crc32c.crc32c(body)


def frame(body: bytes, crc: int | None = None) -> bytes:
    """The log line of a record's canonical bytes: ``{"crc":"<8 hex digits>",`` then the bytes
    after their opening brace, then a newline, e.g. ``{"crc":"1f2e3d4c","seq":3,...}\n``.

    Args:
        body: the canonical bytes (:func:`encode_bodies`).
        crc: the checksum to write (a stored one, e.g. a database row's, so a copy keeps what
            was stored); default: :func:`checksum` of ``body``.
    """
    return b'{"crc":"%08x",%b\n' % (checksum(body) if crc is None else crc, body[1:])


def encode_lines(records: list[dict[str, Any]]) -> list[bytes]:
    """The log lines of records appended together (:func:`encode_bodies`, each made a line by
    :func:`frame`): what a log file holds.

    Raises:
        TypeError: see :func:`encode_bodies`.
    """
    return [frame(body) for body in encode_bodies(records)]


def body_of(line: bytes) -> bytes:
    """A log line's canonical bytes (without its newline): the line without its checksum, or
    the line itself if it has none. Unchecked (see :func:`decode_line`)."""
    line = line.rstrip(b"\n")
    if line.startswith(_SUMMED):
        return b"{" + line[_BODY:]
    return line


def decode_line(where: Path, seq: int, data: bytes, start: int = 0, end: int | None = None) -> Any:
    """The JSON value of the log line ``data[start:end]`` (no newline), checked against its
    checksum if it carries one; ``crc`` is taken out of the record.

    A line is either checksummed (it starts with ``{"crc":"``: its 8 lowercase hex digits must
    be the CRC32C of the rest as :func:`frame` wrote it) or written before checksums (it starts
    with ``{"seq":``, as every line the store wrote then did), accepted unchecked. The two
    beginnings differ in at least six bits, so no single flipped bit turns one into the other.

    Raises:
        CorruptLog: the checksum does not match, the line starts with neither, or it is not JSON.
    """
    end = len(data) if end is None else end
    view = memoryview(data)[start:end]
    if data.startswith(_SUMMED, start, end):
        want = b"%08x" % crc32c.crc32c(view[_BODY:], _OPEN)
        if end - start <= _BODY or view[_BODY - 2 : _BODY] != b'",' or view[8:16] != want:
            raise CorruptLog(where, seq, "the record does not match its checksum")
        try:
            rec = orjson.loads(view)
            del rec[CHECKSUM_KEY]
        except (orjson.JSONDecodeError, KeyError, TypeError):  # a line that matches by chance
            raise CorruptLog(where, seq, "the record is not a JSON object") from None
        return rec
    if not data.startswith(_UNSUMMED, start, end):
        raise CorruptLog(where, seq, "the line starts with neither a checksum nor a seq")
    try:
        return orjson.loads(view)
    except orjson.JSONDecodeError as exc:
        raise CorruptLog(where, seq, f"the record is not JSON ({exc})") from None


def decode_row(where: Path, seq: int, line: str, crc: int | None) -> Any:
    """The JSON value of a stored record's canonical text, checked against ``crc`` (None: a row
    written before checksums, unchecked) — the PostgreSQL store's form of :func:`decode_line`.

    Raises:
        CorruptLog: the checksum does not match, or the text is not JSON.
    """
    body = line.encode()
    if crc is not None and checksum(body) != crc:
        raise CorruptLog(where, seq, "the record does not match its checksum")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise CorruptLog(where, seq, f"the record is not JSON ({exc})") from None


def check_record(where: Path, seq: int, rec: Any) -> dict[str, Any]:
    """``rec`` (a decoded line) if it may stand at ``seq`` of a log: a JSON object with that
    int ``seq`` and a str ``type``, a valid header at seq 0 and no header elsewhere.

    Raises:
        CorruptLog: naming ``where`` and ``seq``.
    """
    if not isinstance(rec, dict):
        raise CorruptLog(where, seq, "the record is not a JSON object")
    got = rec.get("seq")
    if type(got) is not int or got != seq:
        raise CorruptLog(where, seq, f"found seq {got!r} where seq {seq} belongs (a gap)")
    if not isinstance(rec.get("type"), str):
        raise CorruptLog(where, seq, "the record has no type")
    if seq == 0:
        _check_header(where, rec)
    elif rec["type"] == "header":
        raise CorruptLog(where, seq, "a second header record")
    return rec


def creation_records(
    session: str, records: dict[str, Any] | list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The records a store's ``create`` writes: one header dict, or a list of records from seq 0
    with the header first (the stores check their seqs as any append's).

    Raises:
        BadSessionId: a bad session id.
        BadHeader: no records, or a first record that is not a valid header (the checks
            :func:`read_log` makes on load; the seed must match its commitment).
        (Both are ``ValueError`` subclasses, as the errors they replace were.)
    """
    if not _SESSION_ID.match(session):
        raise BadSessionId(f"bad session id {session!r}")
    records = [records] if isinstance(records, dict) else list(records)
    if not records or not isinstance(records[0], dict):
        raise BadHeader(f"session {session}: create needs a header record first")
    try:
        _check_header(Path(session), {"type": None, **records[0]})
    except CorruptLog as exc:
        raise BadHeader(f"session {session}: {exc.message}") from None
    return records


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
                header (:func:`creation_records`). TypeError: not JSON-encodable.
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
        """Let go of everything the store holds for a session (it ended, or its driver left
        memory): an open file, its next seq. An append then needs :meth:`load` (or a shared
        store's ``follow``) first, as after a failed append (``Conflict`` until then); reading
        works as before. Releasing twice, or a session not open, is fine."""
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


_STOP = object()
"""Put on the writer's queue, last: write what came before, close the files, end the thread."""


class WriterThreadStore:
    """The life of a store whose writes go through one writer thread fed by a queue (the file
    store and the PostgreSQL store): :meth:`run` runs :meth:`_writer` in a trio worker thread
    until :meth:`aclose` or cancellation puts ``_STOP`` on the queue; the writer then writes what
    is queued before it and ends. A subclass sets ``_queue`` and calls :meth:`_init_lifecycle`
    in its ``__init__``, implements ``_writer`` (sets ``_thread_started``, takes batches until
    ``_STOP``) and may add to :meth:`_stop` and :meth:`_after_writer`."""

    _thread_name = "gamehost store writer"
    _queue: Any
    metrics: Any = None
    """The host's :class:`host.net.metrics.Metrics`, set by the host (None: nothing is
    counted): the writer thread tells it each durability round's time (``observe_fsync``) and
    each batch written again after a lost connection (``store_retry``)."""

    def _init_lifecycle(self) -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        self._thread_started = False
        self._closed = False
        self._stop_sent = self._stop_taken = False
        self._stopped = trio.Event()

    def _writer(self) -> None:
        raise NotImplementedError

    def _after_writer(self) -> None:
        """What to free once the writer has ended (files, connections)."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the writer thread until :meth:`aclose` (or until cancelled), then let it write
        what is queued and end; returns once it has ended."""
        self._token = trio.lowlevel.current_trio_token()
        task_status.started()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._stop_when_cancelled)
                await trio.to_thread.run_sync(
                    self._writer, thread_name=self._thread_name, abandon_on_cancel=False
                )
                nursery.cancel_scope.cancel()
        finally:
            if not self._thread_started:  # cancelled before the thread began: drain it here
                self._stop()
                self._writer()
            self._after_writer()
            self._stopped.set()

    async def _stop_when_cancelled(self) -> None:
        try:
            await trio.sleep_forever()
        finally:
            self._stop()

    def _stop(self) -> None:
        """Refuse new writes; the writer ends after those already queued."""
        self._closed = True
        if not self._stop_sent:
            self._stop_sent = True
            self._queue.put(_STOP)

    async def aclose(self) -> None:
        """Refuse new writes, let the writer write the queued ones and end; returns once
        :meth:`run` has ended."""
        self._stop()
        await self._stopped.wait()
