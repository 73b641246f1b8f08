"""The PostgreSQL store: every session log as rows of one database, shared by many hosts.

Schema (made and migrated by :func:`migrate`, i.e. ``gamehost db init --store URL``; versioned in
``gamehost_schema``, one row per migration applied):

- ``gamehost_records(session_id, seq, line, crc)``, primary key ``(session_id, seq)``: one row per
  record; ``line`` is the record's canonical bytes (``host.store.base.encode_bodies``: the JSON a
  :class:`~host.store.file.FileStore` line holds, without its checksum and newline) and ``crc``
  their checksum (:func:`row_checksum`: 2**32 plus the CRC32C of ``<session_id> <seq> `` and the
  line, so a row whose seq or session id changed no longer matches; a log exported to a file is
  byte-equal to one the file store wrote, its lines' checksums those of the canonical bytes).
  Every read checks it, and that each row stands at the seq its place says with none missing
  before the session row's ``last_seq`` (a mismatch is :class:`~host.store.base.CorruptLog`,
  ``session_damaged``). ``crc`` came with migration 2: rows written before it have none (null)
  and are read unchecked; rows written before the checksum covered session id and seq hold the
  CRC32C of the line alone (below 2**32) and are checked against it.
- ``gamehost_sessions(session_id, game, header, last_seq, ended, created_at, updated_at)``: one
  row per session, changed in the same transaction as its records. ``last_seq`` is the seq of
  its last record; ``ended`` is true once a record of type ``ended`` is in the log.

Session ids are compared with the ``C`` collation (byte order, as Python sorts them).

Writing: one long-lived writer thread with its own connection, fed by a thread-safe queue as the
file store's is, takes every create and append queued so far as one batch and writes it as one
transaction (group commit), then acknowledges the batch back in trio with one
``TrioToken.run_sync_soon`` callback. Each session's part of a batch is one statement that
inserts its records only if the session row says the log ends just before them (an append) or
does not exist yet (a create), and moves the row on: the optimistic-concurrency check across
hosts. A host whose copy is behind finds the row moved on by another host (it waits for that
host's transaction first, as row locks do) and gets :class:`~host.store.base.Conflict`; the primary
key refuses a duplicate seq even if the session row were wrong (a unique violation is a
``Conflict`` too). Sessions are written in id order within a batch, so two hosts' batches never
wait for each other in a cycle. Every session written also runs ``pg_notify``, delivered when
the transaction commits: a create on ``gamehost_created`` (every host listens), an append on the
channel of the session's bucket (``host.store.feed.channel``: ``gamehost_log_<3 hex digits>``),
which only the hosts following a session of that bucket listen to; the payload is
``'<session_id> <last_seq>'``.

Reading (``load``, ``read``, ``truncate``, ``session_ids``, :meth:`PostgresStore.session_page`)
uses other connections, kept idle between uses; ``read`` and ``session_page`` run in a worker
thread, the synchronous methods in the calling thread, as the file store's do. The store keeps
those few connections itself (at most 4 idle) rather than in a psycopg-pool pool: one writer
connection and a few readers need no pool's background threads, and a pool's own reconnect
timing would sit beside the back-off below.

Failures: psycopg's sync API is used only from threads (never its asyncio API). A connection
that fails is closed; a new one is made on the next use. After a failed connection attempt the
next one waits — 0.05 s, doubling up to ``retry_max`` seconds (1 s) — so a database that is
down is not flooded with attempts: a caller needing a connection meanwhile waits for the next
attempt, then gets it or :class:`StoreUnavailable` (an ``OSError``, which the host turns into
``unavailable``). The synchronous methods the host calls on its trio thread (``load`` and
``truncate`` of a session not loaded yet) can so hold it up to that long while the database is
down; the host's appends and reads wait in threads. An append whose transaction failed is
answered with ``StoreUnavailable`` and leaves its session not open, as any failed append does:
its records may or may not have been committed (a connection lost during ``COMMIT`` cannot
tell), and ``load`` says which. A batch whose connection turns out to be dead before its
``COMMIT`` was sent is written once more on a new connection (nothing of it can have been
committed), so a database restart costs a host only the appends in flight while the server
was down. No record is acknowledged before its transaction has committed (with the server's
``synchronous_commit``, durable on its disk).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import attrs
import orjson
import psycopg
import psycopg.conninfo
import psycopg.errors
import structlog
import trio

from host.errors import BadSessionId
from host.store.base import (
    _SESSION_ID,
    _STOP,
    Conflict,
    CorruptLog,
    StoreClosed,
    StoreStatistics,
    UnknownSession,
    WriterThreadStore,
    check_append,
    check_record,
    check_seqs,
    checksum,
    creation_records,
    decode_row,
    encode_bodies,
)
from host.store.feed import channel

__all__ = [
    "SCHEMA_VERSION",
    "PostgresStore",
    "SchemaMismatch",
    "StoreUnavailable",
    "import_log",
    "is_postgres_url",
    "migrate",
    "parse_rows",
    "row_checksum",
    "schema_version",
]

log = structlog.get_logger("gamehost.pgstore")
T = TypeVar("T")


_MIGRATION_LOCK = 0x67616D65686F7374  # "gamehost": one ``db init`` at a time per database

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (
        1,
        "tables gamehost_records and gamehost_sessions",
        [
            """CREATE TABLE gamehost_records (
                session_id text COLLATE "C" NOT NULL,
                seq bigint NOT NULL,
                line text NOT NULL,
                PRIMARY KEY (session_id, seq))""",
            """CREATE TABLE gamehost_sessions (
                session_id text COLLATE "C" PRIMARY KEY,
                game text NOT NULL,
                header text NOT NULL,
                last_seq bigint NOT NULL,
                ended boolean NOT NULL DEFAULT false,
                created_at timestamptz NOT NULL DEFAULT now(),
                updated_at timestamptz NOT NULL DEFAULT now())""",
            "CREATE INDEX gamehost_sessions_by_game ON gamehost_sessions (game, session_id)",
        ],
    ),
    (
        2,
        "a crc column in gamehost_records (rows written before it stay unchecked)",
        ["ALTER TABLE gamehost_records ADD COLUMN crc bigint"],
    ),
    (
        3,
        "an index of the unfinished sessions (what hosts list to share out their leases)",
        [
            "CREATE INDEX gamehost_sessions_unfinished ON gamehost_sessions (session_id)"
            " WHERE NOT ended"
        ],
    ),
]
"""Version, what it does, its statements; each runs once, in order, in ``db init``'s
transaction."""

SCHEMA_VERSION = MIGRATIONS[-1][0]
"""The schema version this code reads and writes."""


class StoreUnavailable(OSError):
    """The database cannot be reached or refused the work (a lost connection, a server
    restarting, a bad URL, a missing schema). Nothing acknowledged is affected."""


class SchemaMismatch(StoreUnavailable):
    """The database has no gamehost schema, or not the version this code needs."""


def is_postgres_url(spec: str) -> bool:
    """True for a ``postgresql://`` or ``postgres://`` URL."""
    return spec.startswith(("postgresql://", "postgres://"))


def check_url(url: str) -> str:
    """Return ``url`` if it is a PostgreSQL URL libpq can parse.

    Raises:
        ValueError: not a ``postgresql://`` / ``postgres://`` URL, or one libpq refuses.
    """
    if not is_postgres_url(url):
        raise ValueError(f"not a postgresql:// URL: {url!r}")
    try:
        psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise ValueError(f"bad database URL: {_first_line(exc)}") from None
    return url


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _redacted(url: str) -> str:
    """``url`` without a password (for messages and logs)."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "the database"
    host = info.get("host") or "localhost"
    port = info.get("port") or "5432"
    return f"{host}:{port}/{info.get('dbname') or info.get('user') or ''}"


LIVENESS = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "3",
    "keepalives_count": "3",
    "tcp_user_timeout": "20000",
}
"""libpq settings every connection gets unless its URL sets them: a server that vanishes
without closing its sockets (a dead machine, a cut network) fails the query waiting on it
within about 20 s, so an append is answered ``unavailable`` instead of hanging."""


IDLE_IN_TRANSACTION = 10.0
"""Seconds a connection may sit inside a transaction saying nothing before the server ends it
(``idle_in_transaction_session_timeout``, set unless the URL sets ``options``): a host frozen
mid-batch (SIGSTOP, a hung machine) would otherwise hold its sessions' rows locked, and every
other host's appends to them (its whole writer batch) would wait for ever."""


def _connect(url: str, connect_timeout: float) -> psycopg.Connection[Any]:
    """A new autocommit connection (with :data:`LIVENESS` and :data:`IDLE_IN_TRANSACTION`
    where the URL does not say).

    Raises:
        StoreUnavailable: it cannot be made (one line naming the server and libpq's reason).
    """
    try:
        given = psycopg.conninfo.conninfo_to_dict(url)
        extra = {k: v for k, v in LIVENESS.items() if k not in given}
        if "options" not in given:
            ms = max(1, round(IDLE_IN_TRANSACTION * 1000))
            extra["options"] = f"-c idle_in_transaction_session_timeout={ms}"
        return psycopg.connect(
            url, autocommit=True, connect_timeout=max(1, round(connect_timeout)), **extra
        )
    except psycopg.Error as exc:
        raise StoreUnavailable(
            f"cannot connect to PostgreSQL at {_redacted(url)}: {_first_line(exc)}"
        ) from exc


# -- schema --------------------------------------------------------------------------------------
def schema_version(conn: psycopg.Connection[Any]) -> int:
    """The schema version of the connection's database (0: none)."""
    found = conn.execute("SELECT to_regclass('gamehost_schema') IS NOT NULL").fetchone()
    if not found or not found[0]:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM gamehost_schema").fetchone()
    return int(row[0]) if row else 0


def migrate(url: str, *, connect_timeout: float = 5.0) -> tuple[int, list[str]]:
    """Create or migrate the gamehost schema, idempotently: each migration above the
    database's version runs once, all in one transaction (concurrent calls wait for each other).

    Returns:
        ``(version before, [description of each migration applied])`` (empty: nothing to do).

    Raises:
        StoreUnavailable: the database cannot be reached or refused a statement.
        SchemaMismatch: the database's schema is newer than this code knows.
    """
    with contextlib.closing(_connect(url, connect_timeout)) as conn:
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", [_MIGRATION_LOCK])
                conn.execute("CREATE TABLE IF NOT EXISTS gamehost_schema (version int NOT NULL)")
                before = schema_version(conn)
                if before > SCHEMA_VERSION:
                    raise SchemaMismatch(
                        f"the database's gamehost schema is version {before}, newer than this"
                        f" gamehost's {SCHEMA_VERSION}: upgrade gamehost"
                    )
                done = []
                for version, what, statements in MIGRATIONS:
                    if version <= before:
                        continue
                    for statement in statements:
                        conn.execute(statement)
                    conn.execute("INSERT INTO gamehost_schema (version) VALUES (%s)", [version])
                    done.append(f"migration {version}: {what}")
        except psycopg.Error as exc:
            raise StoreUnavailable(f"db init failed: {_first_line(exc)}") from exc
    return before, done


# -- connections ---------------------------------------------------------------------------------
class _Connections:
    """Connections to one database for any thread: idle ones kept for reuse, new ones made on
    demand, with a back-off after a failed attempt (during which a request fails at once)."""

    def __init__(self, url: str, connect_timeout: float, retry_max: float) -> None:
        self.url = url
        self.connect_timeout = connect_timeout
        self.retry_max = retry_max
        self._idle: list[psycopg.Connection[Any]] = []
        self._lock = threading.Lock()
        self._delay = 0.0
        self._retry_at = 0.0
        self._last_error = ""
        self.closed = False

    def connect(self) -> psycopg.Connection[Any]:
        """A new connection (not kept idle by this object). After a failed attempt the next
        is not made before the back-off has passed: the caller waits for it (at most
        ``retry_max`` seconds), then tries once.

        Raises:
            StoreUnavailable: it cannot be made.
        """
        with self._lock:
            wait = self._retry_at - time.monotonic()
        if wait > 0:
            time.sleep(wait)  # the back-off between attempts, on this caller's thread
        try:
            conn = _connect(self.url, self.connect_timeout)
        except StoreUnavailable as exc:
            with self._lock:
                self._delay = min(self.retry_max, max(0.05, self._delay * 2))
                self._retry_at = time.monotonic() + self._delay
                self._last_error = str(exc)
            log.warning("database_unreachable", error=str(exc), retry_in=self._delay)
            raise
        with self._lock:
            if self._delay:
                log.info("database_reconnected")
            self._delay = 0.0
        return conn

    def run(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``fn(conn)`` on an idle connection or a new one; once more on a new connection if a
        kept one turns out dead (a server restarted since it was used).

        Raises:
            StoreUnavailable: no connection, or ``fn`` failed on it with a database error.
            Whatever else ``fn`` raises (the connection is kept).
        """
        for attempt in (0, 1):
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            reused = conn is not None
            if conn is None:
                conn = self.connect()
            try:
                result = fn(conn)
            except psycopg.Error as exc:
                dead = conn.broken or isinstance(exc, psycopg.OperationalError)
                if dead:
                    conn.close()
                    if reused and attempt == 0:
                        self._close_idle()  # they were made before the same failure
                        continue
                else:
                    self._put(conn)
                raise StoreUnavailable(f"the database failed: {_first_line(exc)}") from exc
            except BaseException:
                conn.close()
                raise
            self._put(conn)
            return result
        raise AssertionError("unreachable")

    def _put(self, conn: psycopg.Connection[Any]) -> None:
        with self._lock:
            if not self.closed and not conn.closed and len(self._idle) < 4:
                self._idle.append(conn)
                return
        conn.close()

    def _close_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def close(self) -> None:
        self.closed = True
        self._close_idle()


# -- the store -----------------------------------------------------------------------------------
@attrs.define
class _Job:
    """A create or an append queued for the writer thread."""

    session: str
    create: bool
    first: int  # seq of its first record
    lines: list[str]
    crcs: list[int]
    ended: bool
    opened: int  # which opening of the session it belongs to (0 for a create)
    done: trio.Event = attrs.field(factory=trio.Event)
    error: BaseException | None = None


# One statement per session per batch: a create inserts the session row unless it exists, an
# append moves the row on if it ends just before the records; the records go in only then.
_WRITE = """
WITH made AS (
    INSERT INTO gamehost_sessions (session_id, game, header, last_seq, ended)
    SELECT %(s)s, %(game)s, %(header)s, %(last)s, %(ended)s WHERE %(create)s
    ON CONFLICT (session_id) DO NOTHING
    RETURNING pg_notify('gamehost_created', session_id || ' ' || last_seq)
), moved AS (
    UPDATE gamehost_sessions
    SET last_seq = %(last)s, ended = ended OR %(ended)s, updated_at = now()
    WHERE NOT %(create)s AND session_id = %(s)s AND last_seq = %(first)s - 1
    RETURNING pg_notify(%(channel)s, session_id || ' ' || last_seq)
)
INSERT INTO gamehost_records (session_id, seq, line, crc)
SELECT %(s)s, %(first)s + t.i - 1, t.line, t.crc
FROM unnest(%(lines)s::text[], %(crcs)s::bigint[]) WITH ORDINALITY AS t(line, crc, i)
WHERE EXISTS (SELECT FROM made) OR EXISTS (SELECT FROM moved)
"""


@attrs.define
class _Group:
    """One session's jobs in a batch, written by one statement: all or none."""

    session: str
    create: bool
    first: int
    lines: list[str]
    crcs: list[int]
    ended: bool
    jobs: list[_Job]

    def params(self) -> dict[str, Any]:
        header = self.lines[0] if self.create else None
        game = orjson.loads(header).get("game") if header is not None else None
        return {
            "s": self.session,
            "channel": channel(self.session),
            "game": game,
            "header": header,
            "create": self.create,
            "first": self.first,
            "last": self.first + len(self.lines) - 1,
            "ended": self.ended,
            "lines": self.lines,
            "crcs": self.crcs,
        }


def _groups(jobs: list[_Job]) -> list[_Group]:
    """Jobs merged per session (consecutive appends of one session become one group), sorted
    by session id (a stable sort: a session's own order stays)."""
    groups: list[_Group] = []
    last: dict[str, _Group] = {}
    for job in jobs:
        g = last.get(job.session)
        if g is not None and not job.create and g.first + len(g.lines) == job.first:
            g.lines.extend(job.lines)
            g.crcs.extend(job.crcs)
            g.ended = g.ended or job.ended
            g.jobs.append(job)
            continue
        g = _Group(
            job.session, job.create, job.first, list(job.lines), list(job.crcs), job.ended, [job]
        )
        groups.append(g)
        last[job.session] = g
    groups.sort(key=lambda g: g.session)
    return groups


def _own(exc: BaseException) -> BaseException:
    """A copy of ``exc`` for one of the jobs it failed: each appender raises its own (one
    instance raised in many tasks would collect all their tracebacks)."""
    try:
        copy = type(exc)(*exc.args)
    except Exception:  # noqa: BLE001 - an exception that cannot be remade: share it
        return exc
    copy.__cause__ = exc.__cause__ or exc
    return copy


ROW_CRC_V2 = 1 << 32
"""Set in a row's ``crc`` (a bigint) when the checksum covers the row's session id and seq as
well as its line (:func:`row_checksum`); rows written before it hold the CRC32C of the line
alone (below 2**32) and are still read so."""


def row_checksum(session: str, seq: int, body: bytes) -> int:
    """The ``crc`` of a row written now: :data:`ROW_CRC_V2` plus the CRC32C of
    ``b"<session> <seq> " + body`` (body: the record's canonical bytes), so a row whose
    ``session_id`` or ``seq`` changed no longer matches."""
    return ROW_CRC_V2 | checksum(b"%b %d %b" % (session.encode(), seq, body))


def parse_rows(
    where: Path, rows: list[tuple[str, int | None]], first: int = 0, *, session: str
) -> list[dict[str, Any]]:
    """Records from a session's rows ``(line, crc)`` starting at seq ``first``, checked as a file
    store checks a log (each against its checksum unless it has none — a checksum of
    :func:`row_checksum` against ``session`` and the row's seq, an older one against the line
    alone —, JSON objects, gapless seqs, a valid header at seq 0, no second header).

    Raises:
        CorruptLog: naming the session and the first wrong seq.
    """
    out = []
    for seq, (line, crc) in enumerate(rows, first):
        if crc is not None and crc >= ROW_CRC_V2:
            if row_checksum(session, seq, line.encode()) != crc:
                raise CorruptLog(where, seq, "the record does not match its checksum")
            crc = None  # checked
        out.append(check_record(where, seq, decode_row(where, seq, line, crc)))
    return out


_ROWS = """
SELECT r.seq, r.line, r.crc, s.last_seq,
       EXISTS (SELECT 1 FROM gamehost_records WHERE session_id = %(s)s)
FROM (SELECT (SELECT last_seq FROM gamehost_sessions WHERE session_id = %(s)s) AS last_seq) AS s
LEFT JOIN gamehost_records AS r
    ON r.session_id = %(s)s AND r.seq >= %(lo)s AND r.seq < %(hi)s
ORDER BY r.seq
"""
"""A session's rows with ``lo <= seq < hi``, each with the session row's ``last_seq`` and
whether the session has any row: one statement, so one snapshot (at least one result row)."""
_NO_END = 1 << 62


def _fetch_rows(
    conn: psycopg.Connection[Any], session: str, lo: int, hi: int
) -> list[tuple[Any, ...]]:
    return conn.execute(_ROWS, {"s": session, "lo": lo, "hi": hi}).fetchall()


def _checked_rows(
    where: Path, fetched: list[tuple[Any, ...]], lo: int, hi: int
) -> list[tuple[str, int | None]] | None:
    """The ``(line, crc)`` of rows :data:`_ROWS` fetched, their stored seqs checked: each row
    where its place says (``lo``, ``lo + 1``, ...), and none missing before the session row's
    ``last_seq`` (a row whose seq or session id changed is not where it belongs). None: no such
    session.

    Raises:
        CorruptLog: naming the first seq whose row is missing or stored at another seq.
    """
    last_seq, known = fetched[0][3], fetched[0][4]
    rows = [] if fetched[0][0] is None else fetched
    if not rows and not known:
        return None
    out: list[tuple[str, int | None]] = []
    for want, (seq, line, crc, *_) in enumerate(rows, lo):
        if seq != want:
            raise CorruptLog(where, want, f"no row at seq {want}: the next row is at seq {seq}")
        out.append((line, crc))
    end = lo + len(out)
    if last_seq is not None and end < min(hi, last_seq + 1):
        raise CorruptLog(
            where,
            end,
            f"no row at seq {end}, though the session's row says its log ends at seq {last_seq}",
        )
    return out


class PostgresStore(WriterThreadStore):
    """A :class:`host.store.base.Store` in a PostgreSQL database (see the module docstring).

    Args:
        url: a ``postgresql://`` URL (libpq's URL form; its query may carry any libpq
            parameter, e.g. ``?sslmode=require``).
        connect_timeout: seconds a connection attempt may take (at least 1).
        retry_max: the longest wait in seconds between connection attempts while the database
            is unreachable (the wait starts at 0.05 s and doubles).

    Nothing connects until first used; :meth:`check` connects at once and checks the schema.
    Start :meth:`run` in a nursery before creating or appending.

    Raises:
        ValueError: ``url`` is not a PostgreSQL URL libpq can parse.
    """

    def __init__(self, url: str, *, connect_timeout: float = 5.0, retry_max: float = 1.0) -> None:
        self.url = check_url(url)
        self._conns = _Connections(url, connect_timeout, retry_max)
        # trio side: as the file store's
        self._next: dict[str, int] = {}
        self._opened: dict[str, int] = {}
        self._openings = 0
        self._pending: dict[str, int] = {}
        self._held: set[str] = set()
        self._queue: queue.SimpleQueue[_Job | object] = queue.SimpleQueue()
        # writer side: the sessions whose append failed, by opening
        self._failed: dict[str, int] = {}
        self._init_lifecycle()
        self._n_appends = self._n_records = self._n_batches = self._n_commits = 0

    def __repr__(self) -> str:
        return f"PostgresStore({_redacted(self.url)!r})"

    def path(self, session: str) -> Path:
        """A name for the session's log in messages (:class:`CorruptLog`): not a file."""
        return Path(f"postgresql:{session}")

    def check(self) -> None:
        """Connect now and check the schema version (a host's start-up check).

        Raises:
            StoreUnavailable: the database cannot be reached.
            SchemaMismatch: no schema (run ``gamehost db init``) or another version.
        """
        version = self._conns.run(schema_version)
        if version != SCHEMA_VERSION:
            what = "no gamehost schema" if version == 0 else f"gamehost schema {version}"
            raise SchemaMismatch(
                f"{_redacted(self.url)} has {what}, this gamehost needs version"
                f" {SCHEMA_VERSION}: run `gamehost db init --store URL`"
            )

    def clock_offset(self) -> float:
        """Seconds the database server's clock is ahead of this process's (``time.time()``;
        negative: behind), measured with one query, to within half its round trip: hosts that
        share the database keep their records' time by it (see ``host.net.server.run_host``).

        Raises:
            StoreUnavailable: the database cannot be reached.
        """

        def measure(conn: psycopg.Connection[Any]) -> tuple[float, float]:
            sent = time.time()
            row = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
            back = time.time()
            assert row is not None
            return back - sent, float(row[0]) - (sent + back) / 2

        return min(self._conns.run(measure) for _ in range(3))[1]  # the quickest round trip

    # -- reading -------------------------------------------------------------------------------
    @staticmethod
    def _checked(session: str) -> str:
        if not isinstance(session, str) or not _SESSION_ID.match(session):
            raise BadSessionId(f"bad session id {session!r}")
        return session

    def _check_idle(self, session: str) -> None:
        if self._pending.get(session):
            raise Conflict(f"session {session} has appends in progress")

    def _open(self, session: str, next_seq: int) -> None:
        self._openings += 1
        self._opened[session] = self._openings
        self._next[session] = next_seq

    def session_ids(self) -> list[str]:
        """Every session in the database, sorted.

        Raises:
            StoreUnavailable: the database failed.
        """

        def ids(conn: psycopg.Connection[Any]) -> list[str]:
            rows = conn.execute("SELECT session_id FROM gamehost_sessions ORDER BY session_id")
            return [r[0] for r in rows]

        return self._conns.run(ids)

    def disconnect(self) -> None:
        """Close the idle reading connections (a tool done with a store it never ran)."""
        self._conns.close()

    def read_rows(self, session: str, after: int = -1) -> list[tuple[str, int | None]]:
        """The stored rows ``(line, crc)`` of the session's records with a seq above ``after``
        (``line``: canonical JSON, no newline; ``crc``: its CRC32C, None for a row written before
        checksums), in seq order, each stored at the seq its place says (their checksums are
        checked by :func:`parse_rows`); blocking (for tools: ``export``, ``replay``, ``check``).

        Raises:
            UnknownSession: no such session. ValueError: a bad session id.
            CorruptLog: a row missing or stored at another seq.
            StoreUnavailable: the database failed.
        """
        return self._lines(self._checked(session), after)

    def _lines(self, session: str, after: int) -> list[tuple[str, int | None]]:
        """The rows ``(line, crc)`` of seq above ``after``, in seq order (blocking); each row's
        stored seq checked against its place, none missing before the session's ``last_seq``.

        Raises:
            UnknownSession: no such session. StoreUnavailable: the database failed.
            CorruptLog: a row missing or stored at another seq.
        """
        fetched = self._conns.run(lambda conn: _fetch_rows(conn, session, after + 1, _NO_END))
        rows = _checked_rows(self.path(session), fetched, after + 1, _NO_END)
        if rows is None:
            raise UnknownSession(f"no session {session}")
        return rows

    def _exists(self, session: str) -> bool:
        def exists(conn: psycopg.Connection[Any]) -> bool:
            return bool(
                conn.execute(
                    "SELECT 1 FROM gamehost_sessions WHERE session_id = %s", [session]
                ).fetchone()
            )

        return self._conns.run(exists)

    def load(self, session: str) -> list[dict[str, Any]]:
        """See :meth:`host.store.base.Store.load` (no torn tail here: a transaction is whole).

        Raises:
            Conflict: appends of it are in progress. UnknownSession: no such session.
            CorruptLog: its records do not read as a log. ValueError: a bad session id.
            StoreUnavailable: the database failed (the session stays not open).
        """
        self._checked(session)
        self._check_idle(session)
        self._next.pop(session, None)
        records = parse_rows(self.path(session), self._lines(session, -1), 0, session=session)
        self._open(session, len(records))
        return records

    async def open_end(self, session: str) -> int:
        """Make a session appendable after its last record without reading its records (as
        :meth:`load` does after reading them); its record count.

        Raises:
            Conflict: appends of it are in progress. UnknownSession: no such session.
            ValueError: a bad session id. StoreUnavailable: the database failed.
        """
        self._checked(session)
        self._check_idle(session)
        self._next.pop(session, None)
        count = await self.record_count(session)
        self._open(session, count)
        return count

    async def read(self, session: str, after: int | None = None) -> list[dict[str, Any]]:
        """See :meth:`host.store.base.Store.read`; in a worker thread.

        Raises:
            UnknownSession, CorruptLog, ValueError, StoreUnavailable: as :meth:`load`.
        """
        self._checked(session)
        start = -1 if after is None else max(after, -1)
        rows = await trio.to_thread.run_sync(self._lines, session, start)
        return parse_rows(self.path(session), rows, start + 1, session=session)

    async def record_count(self, session: str) -> int:
        """How many records the session holds (one look at the primary key's index).

        Raises:
            UnknownSession: no such session. ValueError: a bad session id.
            StoreUnavailable: the database failed.
        """
        self._checked(session)

        def count(conn: psycopg.Connection[Any]) -> int | None:
            row = conn.execute(
                "SELECT max(seq) FROM gamehost_records WHERE session_id = %s", [session]
            ).fetchone()
            return None if row is None or row[0] is None else int(row[0]) + 1

        n = await trio.to_thread.run_sync(self._conns.run, count)
        if n is None:
            raise UnknownSession(f"no session {session}")
        return n

    async def read_range(self, session: str, first: int, stop: int) -> list[dict[str, Any]]:
        """The records with ``first <= seq < stop`` (fewer when the log ends before ``stop``):
        one ``WHERE seq >= first AND seq < stop`` query, checked as :meth:`read` checks.

        Raises:
            UnknownSession: no such session (nothing in the range of an unknown session).
            CorruptLog, ValueError, StoreUnavailable: as :meth:`load`.
        """
        self._checked(session)
        first = max(first, 0)

        def fetch(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            return _fetch_rows(conn, session, first, stop)

        fetched = await trio.to_thread.run_sync(self._conns.run, fetch)
        rows = _checked_rows(self.path(session), fetched, first, stop)
        if rows is None:
            raise UnknownSession(f"no session {session}")
        return parse_rows(self.path(session), rows, first, session=session)

    def truncate(self, session: str, keep: int) -> None:
        """See :meth:`host.store.base.Store.truncate`: one transaction deletes the later records
        and moves the session row back (notifying as an append does).

        Raises:
            Conflict: appends of it are in progress. UnknownSession: no such session.
            CorruptLog: fewer than ``keep`` records. ValueError: a bad session id.
            StoreUnavailable: the database failed.
        """
        self._checked(session)
        self._check_idle(session)

        def cut(conn: psycopg.Connection[Any]) -> int | None:
            with conn.transaction():
                row = conn.execute(
                    "SELECT last_seq FROM gamehost_sessions WHERE session_id = %s FOR UPDATE",
                    [session],
                ).fetchone()
                if row is None:
                    return None
                if row[0] + 1 < keep:
                    return row[0] + 1
                conn.execute(
                    "DELETE FROM gamehost_records WHERE session_id = %s AND seq >= %s",
                    [session, keep],
                )
                ended = any(
                    orjson.loads(line).get("type") == "ended"
                    for (line,) in conn.execute(
                        "SELECT line FROM gamehost_records WHERE session_id = %s"
                        ' AND line LIKE \'%%"type":"ended"%%\'',
                        [session],
                    )
                )
                conn.execute(
                    "UPDATE gamehost_sessions SET last_seq = %s, ended = %s, updated_at = now()"
                    " WHERE session_id = %s RETURNING pg_notify(%s, session_id || ' ' || last_seq)",
                    [keep - 1, ended, session, channel(session)],
                )
                return keep

        have = self._conns.run(cut)
        if have is None:
            raise UnknownSession(f"no session {session}")
        if have < keep:
            raise CorruptLog(self.path(session), have, f"cannot keep {keep} records")
        self._open(session, keep)

    async def session_page(
        self, after: str | None, limit: int, game: str | None = None
    ) -> list[dict[str, Any]]:
        """One page of the sessions in the database, by id: those with an id above ``after``
        (all with None), of ``game`` if given, at most ``limit``; in a worker thread.

        Returns:
            ``[{"session": str, "game": str, "last_seq": int, "ended": bool, "header": dict}]``
            (``header`` is the session's header record as ``load`` returns it).

        Raises:
            StoreUnavailable: the database failed.
        """

        def page(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            return conn.execute(
                "SELECT session_id, game, last_seq, ended, header FROM gamehost_sessions"
                " WHERE session_id > %s AND (%s::text IS NULL OR game = %s)"
                " ORDER BY session_id LIMIT %s",
                [after or "", game, game, max(0, limit)],
            ).fetchall()

        rows = await trio.to_thread.run_sync(self._conns.run, page)
        return [
            {"session": s, "game": g, "last_seq": n, "ended": e, "header": orjson.loads(h)}
            for s, g, n, e, h in rows
        ]

    async def unfinished_sessions(self) -> list[str]:
        """The ids of the sessions whose log has no ``ended`` record, sorted (one look at the
        index of unfinished sessions); in a worker thread. Hosts list them to find the sessions
        they should drive (``host.store.feed.Follower``).

        Raises:
            StoreUnavailable: the database failed.
        """

        def ids(conn: psycopg.Connection[Any]) -> list[str]:
            rows = conn.execute(
                "SELECT session_id FROM gamehost_sessions WHERE NOT ended ORDER BY session_id"
            )
            return [r[0] for r in rows]

        return await trio.to_thread.run_sync(self._conns.run, ids)

    # -- writing -------------------------------------------------------------------------------
    async def _write(self, job: _Job) -> None:
        self._pending[job.session] = self._pending.get(job.session, 0) + 1
        self._queue.put(job)
        await job.done.wait()
        if job.error is not None:
            raise job.error

    async def create(self, session: str, records: dict[str, Any] | list[dict[str, Any]]) -> None:
        """See :meth:`host.store.base.Store.create`: one row per record and the session row, in
        one transaction of the writer's batch.

        Raises:
            Conflict: the session exists (here or made by another host), or bad seqs.
            ValueError: see :func:`host.store.base.creation_records`. TypeError: not JSON.
            StoreClosed: the store is closing. StoreUnavailable: the database failed (the
                session may or may not exist: ``load`` tells).
        """
        if self._closed:
            raise StoreClosed("the store is closed")
        records = creation_records(session, records)
        check_seqs(records, 0)
        try:
            bodies = encode_bodies(records)
        except TypeError:
            if await trio.to_thread.run_sync(self._exists, session):
                raise Conflict(f"session {session} exists") from None
            raise
        if self._pending.get(session):
            raise Conflict(f"session {session} is being created")
        ended = any(r.get("type") == "ended" for r in records)
        lines = [b.decode() for b in bodies]
        crcs = [row_checksum(session, seq, b) for seq, b in enumerate(bodies)]
        await self._write(_Job(session, True, 0, lines, crcs, ended, 0))
        self._open(session, len(records))
        self._held.add(session)

    async def append(self, session: str, expected_seq: int, records: list[dict[str, Any]]) -> None:
        """See :meth:`host.store.base.Store.append`; returns once the writer's transaction with
        these records has committed.

        Raises:
            Conflict: the expected seq is not this store's next seq for the session, bad seqs,
                the session not open, or another host appended first (then load it again).
                Nothing was written.
            TypeError: not JSON. StoreClosed: the store is closing.
            StoreUnavailable: the database failed; the session is not open until ``load``,
                which tells whether the records were committed.
        """
        if self._closed:
            raise StoreClosed("the store is closed")
        check_append(self._next.get(session), session, expected_seq, records)
        if not records:
            return
        bodies = encode_bodies(records)
        lines = [b.decode() for b in bodies]
        crcs = [row_checksum(session, seq, b) for seq, b in enumerate(bodies, expected_seq)]
        ended = any(r.get("type") == "ended" for r in records)
        self._next[session] = expected_seq + len(records)
        self._held.add(session)
        self._n_records += len(records)
        opened = self._opened[session]
        await self._write(_Job(session, False, expected_seq, lines, crcs, ended, opened))

    def follow(self, session: str, next_seq: int) -> None:
        """Open ``session`` for appends at ``next_seq`` without reading it: the caller has
        read (``read``) and folded the records before it, which another host appended (see
        ``host.store.feed``). The database still refuses an append if the log has moved on.

        Raises:
            Conflict: appends of it are in progress here. ValueError: a bad session id.
        """
        self._checked(session)
        self._check_idle(session)
        self._open(session, next_seq)

    def release(self, session: str) -> None:
        """Nothing is held open per session (rows need no descriptor): the session's next seq
        and opening are forgotten (a later ``load`` or ``follow`` opens it again)."""
        self._held.discard(session)
        self._next.pop(session, None)
        self._opened.pop(session, None)

    _thread_name = "gamehost pg writer"

    def _after_writer(self) -> None:
        self._conns.close()

    def statistics(self) -> StoreStatistics:
        """Counters; ``batches`` are transactions committed, ``fsyncs`` is 0 (the server's)."""
        return StoreStatistics(
            len(self._held),
            self._n_appends,
            self._n_records,
            self._n_batches,
            0,
            self._queue.qsize() - (self._stop_sent and not self._stop_taken),
        )

    # -- the writer thread ---------------------------------------------------------------------
    def _writer(self) -> None:
        """Take every queued job as one batch, write it in one transaction, hand the outcomes
        to trio; until ``_STOP``."""
        self._thread_started = True
        conn: psycopg.Connection[Any] | None = None
        try:
            stop = False
            while not stop:
                batch = [self._queue.get()]
                with contextlib.suppress(queue.Empty):
                    while True:
                        batch.append(self._queue.get_nowait())
                stop = self._stop_taken = batch[-1] is _STOP
                jobs = [job for job in batch if isinstance(job, _Job)]
                if not jobs:
                    continue
                try:
                    conn = self._commit(conn, jobs)
                except Exception as exc:  # noqa: BLE001 - a bug here must not hang appenders
                    log.exception("store_batch_failed")
                    for job in jobs:
                        job.error = job.error or _own(exc)
                for job in jobs:
                    if job.error is not None and not job.create:
                        self._failed[job.session] = job.opened
                if self._token is not None:
                    self._token.run_sync_soon(self._finish, jobs)
                else:
                    self._finish(jobs)
        finally:
            if conn is not None:
                conn.close()

    def _finish(self, jobs: list[_Job]) -> None:
        """Acknowledge a written batch (in trio): wake its writers; a session whose append
        failed is no longer open (unless it was opened again meanwhile)."""
        for job in jobs:
            if job.error is None:
                if not job.create:
                    self._n_appends += 1
            elif not job.create and self._opened.get(job.session) == job.opened:
                self._next.pop(job.session, None)
            left = self._pending[job.session] - 1
            if left:
                self._pending[job.session] = left
            else:
                del self._pending[job.session]
            job.done.set()
        if jobs and any(job.create and job.error is None for job in jobs):
            created = [job for job in jobs if job.create and job.error is None]
            self._n_appends += len(created)
            self._n_records += sum(len(job.lines) for job in created)

    def _commit(
        self, conn: psycopg.Connection[Any] | None, jobs: list[_Job]
    ) -> psycopg.Connection[Any] | None:
        """Write a batch; each job that fails gets its ``error``. Returns the connection to
        keep for the next batch (None: make a new one)."""
        live = []
        for job in jobs:
            opening = self._failed.get(job.session)
            if opening is not None and (job.create or job.opened > opening):
                del self._failed[job.session]  # opened again since: that failure is over
            if not job.create and self._failed.get(job.session) == job.opened:
                job.error = Conflict(
                    f"session {job.session} is not open in this store (an earlier append of it"
                    " failed: load it again)"
                )
            else:
                live.append(job)
        if not live:
            return conn
        groups = _groups(live)
        for attempt in (0, 1):
            reused = conn is not None
            if conn is None:
                try:
                    conn = self._conns.connect()
                except StoreUnavailable as exc:
                    for job in live:
                        job.error = _own(exc)
                    return None
            committing = False
            try:
                began = time.perf_counter()
                with conn.transaction():
                    self._run_groups(conn, groups)
                    committing = True
                self._n_batches += 1
                if self.metrics is not None:
                    self.metrics.observe_fsync(time.perf_counter() - began)
                return conn
            except (psycopg.errors.IntegrityError, psycopg.errors.TransactionRollback):
                # a duplicate seq despite the session row, or a deadlock with a foreign writer:
                # nothing of the batch was committed; write each session alone to tell them apart
                for group in groups:
                    group_error = None
                    try:
                        with conn.transaction():
                            self._run_groups(conn, [group])
                        self._n_batches += 1
                    except psycopg.errors.IntegrityError as exc:
                        group_error = Conflict(
                            f"session {group.session}: seq taken ({_first_line(exc)})"
                        )
                    except psycopg.Error as exc:
                        group_error = StoreUnavailable(f"the database failed: {_first_line(exc)}")
                    if group_error is not None:
                        for job in group.jobs:
                            job.error = _own(group_error)
                return None if conn.broken else conn
            except psycopg.Error as exc:
                conn.close()
                conn = None
                if reused and not committing and attempt == 0:
                    log.warning("store_reconnecting", error=_first_line(exc))
                    if self.metrics is not None:
                        self.metrics.store_retry("store")
                    continue  # dead before COMMIT was sent: nothing committed, write again
                error = StoreUnavailable(
                    f"the database failed{' during COMMIT' if committing else ''}:"
                    f" {_first_line(exc)}"
                )
                for job in live:
                    if job.error is None or isinstance(job.error, Conflict):
                        job.error = _own(error)
                return None
        return conn

    def _run_groups(self, conn: psycopg.Connection[Any], groups: list[_Group]) -> None:
        """Run the groups' statements in the open transaction (pipelined); a group whose check
        fails (the session exists, or its row is not where the append expected it) gets a
        :class:`Conflict` on its jobs."""
        with conn.cursor() as cur:
            cur.executemany(_WRITE, [g.params() for g in groups], returning=True)
            for i, group in enumerate(groups):
                if i:
                    cur.nextset()
                if cur.rowcount != len(group.lines):
                    what = (
                        "exists"
                        if group.create
                        else "was appended to elsewhere (or is not where this store had it):"
                        " load it again"
                    )
                    for job in group.jobs:
                        job.error = Conflict(f"session {group.session} {what}")
                else:
                    for job in group.jobs:
                        job.error = None


# -- import --------------------------------------------------------------------------------------
def import_log(
    url: str, session: str, batches: Iterable[list[str]], *, connect_timeout: float = 5.0
) -> int:
    """Create ``session`` from its log lines, given in batches, all in one transaction on a
    connection of its own (``gamehost import``): the session row first (so an existing session
    is refused before anything is sent), then one ``COPY`` per batch, then the row's
    ``last_seq`` and ``ended`` and the notice, and ``COMMIT``. Nothing is visible to anyone
    else before the commit; a failure anywhere (the database, or the iteration of ``batches``
    raising) leaves nothing of it.

    While the caller makes the next batch the connection is idle in its transaction, which the
    server allows for ``idle_in_transaction_session_timeout`` (:data:`IDLE_IN_TRANSACTION`,
    10 s, unless the URL sets ``options``): a batch must take well under that to make. An
    importer frozen between batches so loses its transaction instead of holding it open.

    Args:
        url: the database. session: the session id.
        batches: lists of lines (JSON, no newline), in seq order from seq 0, already checked
            to be the session's log (the first line its header); an empty list is skipped.
        connect_timeout: seconds the connection attempt may take.

    Returns:
        The number of records written.

    Raises:
        Conflict: the session exists (nothing written).
        ValueError: ``batches`` holds no line.
        StoreUnavailable: the database failed or the connection was lost, naming the seq the
            import had reached (nothing committed; if during ``COMMIT``, ``load`` tells).
        Whatever iterating ``batches`` raises (nothing written).
    """
    conn = _connect(url, connect_timeout)
    seq = 0
    step = "the import"
    timeout = "?"
    ended = False
    try:
        row = conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()
        timeout = str(row[0]) if row else timeout
        with conn.transaction():
            for lines in batches:
                if not lines:
                    continue
                if seq == 0:
                    header = orjson.loads(lines[0])
                    made = conn.execute(
                        "INSERT INTO gamehost_sessions (session_id, game, header, last_seq)"
                        " VALUES (%s, %s, %s, -1) ON CONFLICT (session_id) DO NOTHING RETURNING 1",
                        [session, header.get("game"), lines[0]],
                    ).fetchone()
                    if made is None:
                        raise Conflict(f"session {session} exists")
                with (
                    conn.cursor() as cur,
                    cur.copy(
                        "COPY gamehost_records (session_id, seq, line, crc) FROM STDIN"
                    ) as copy,
                ):
                    for line in lines:
                        copy.write_row(
                            (session, seq, line, row_checksum(session, seq, line.encode()))
                        )
                        seq += 1
                        ended = ended or ('"type":"ended"' in line and _is_ended(line))
            if seq == 0:
                raise ValueError(f"session {session}: no records to import")
            conn.execute(
                "UPDATE gamehost_sessions SET last_seq = %s, ended = %s, updated_at = now()"
                " WHERE session_id = %s RETURNING pg_notify('gamehost_created',"
                " session_id || ' ' || last_seq)",
                [seq - 1, ended, session],
            )
            step = "COMMIT"
    except psycopg.Error as exc:
        if step == "COMMIT":
            raise StoreUnavailable(
                f"the database failed during COMMIT of session {session} ({seq} records):"
                f" {_first_line(exc)}; it may or may not have been committed"
            ) from exc
        hint = (
            f" (the connection was lost; the server ends a transaction idle for longer than its"
            f" idle_in_transaction_session_timeout, {timeout}: a smaller batch is made sooner)"
            if conn.broken
            else ""
        )
        raise StoreUnavailable(
            f"the database failed importing session {session} at seq {seq}:"
            f" {_first_line(exc)}{hint}; nothing of it was committed"
        ) from exc
    finally:
        conn.close()
    return seq


def _is_ended(line: str) -> bool:
    return orjson.loads(line).get("type") == "ended"
