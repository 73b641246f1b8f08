"""Many hosts on one store: following session logs, and leases on host-driven steps.

Hosts that share a store (a PostgreSQL database, or in tests one ``MemoryStore``'s logs) are
*followers of the log*: none owns a session's data. A host keeps a session live (loaded, folded,
caught up with the log) only while it serves it: while one of its own connections uses it, or
while it holds the session's lease. A :class:`Feed` is what a host needs beyond the store for
that:

- **notices**: :meth:`Feed.notices` yields a :class:`Notice` ``(session, last_seq)`` after a
  host (this one too) appended to a session this host *follows* (:meth:`Feed.follow`, called
  before the host reads the session's log; :meth:`Feed.unfollow` once it leaves). For a live
  session the host reads the new records (``store.read(session, after)``), folds them and pushes
  them to its own clients. Every create is announced to every host (``created``), so the host
  that should drive a new session hears of it at once. A notice with ``session=None`` means
  "check every session": the feed lost its connection (all leases went with it) or got it back
  (notices may have been missed meanwhile).
- **leases**: host-driven steps of a session (bots, turn timers, abandonment) run on exactly one
  host, the holder of its lease. :meth:`Feed.try_leases` takes the free ones of some sessions
  (never one another host holds); a lease is held until :meth:`Feed.release`, or until the
  feed's connection dies, which frees every lease it held at once (the database frees the
  advisory locks of a connection that closes, also when its process is killed). A host that
  freezes without dying (SIGSTOP, a hung VM: its kernel still answers TCP keepalives) loses
  them too: the feed connection asks the server to end it when idle for
  :data:`LEASE_TIMEOUT` seconds (``idle_session_timeout``), and a running host's feed sends a
  query every third of that, so only a frozen one goes idle that long.
- **who should drive**: :meth:`Feed.live_hosts` lists the hosts whose feeds are connected. Each
  unfinished session has one *owner* among them, by rendezvous hashing (:func:`owner`: the host
  whose hash of ``(host, session)`` is highest), so each host owns about its share, and when a
  host goes only its sessions move (each to the host that ranks next for it). The owner loads the
  session and takes its lease, unless the seats held are all held from one other running host
  (the log names each holder): that host drives it, where its players are. A host that holds a
  lease it should not (another host joined, the players moved) gives it back, and if the
  session goes back to its owner, says so (:meth:`Feed.announce`).

Notices travel on many channels, not one: a session's appends notify the channel of its bucket
(:func:`channel`: ``gamehost_log_<bucket>``, one of :data:`BUCKETS` by the CRC32C of its id), and
a host listens only to the buckets of the sessions it follows, so it hears of others' sessions
only when they share a bucket (it drops those notices unread). Creates notify
:data:`CREATED_CHANNEL`, which every host listens to.

Implementations: :class:`MemoryFeed` (hosts in one process, over a :class:`MemoryHub`, with a
:class:`PublishingMemoryStore` that announces appends) and :class:`PostgresFeed` (``LISTEN`` and
``pg_try_advisory_lock`` on one dedicated connection per host, in its own thread, reconnecting
with backoff).

:class:`Follower` is the host's side: it routes notices to the live sessions and, every
:data:`LEASE_POLL` seconds, works out which live sessions this host should drive
(:meth:`Follower.driver_for`), gives back the leases it should not hold, takes the free ones it
should and, when the hosts seen change (or every :data:`SCAN_EVERY` rounds), lists the
unfinished sessions of the store and loads the ones it owns that are not live here. So a session
whose lease holder died is taken over by its next owner within about one round plus the time
to read its log. The log stays the one truth throughout: an append names its expected seq, so
two hosts that both believe they may act (a lease lost but not noticed yet, two views of the
live hosts) cannot both win one seq; the loser reads the log and decides again.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import queue
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

import attrs
import crc32c
import orjson
import structlog
import trio

from host.store.memory import MemoryStore

__all__ = [
    "BUCKETS",
    "CREATED_CHANNEL",
    "LEASE_POLL",
    "LEASE_TIMEOUT",
    "SCAN_EVERY",
    "Feed",
    "Followed",
    "Follower",
    "MemoryFeed",
    "MemoryHub",
    "Notice",
    "PostgresFeed",
    "PublishingMemoryStore",
    "channel",
    "owner",
]

log = structlog.get_logger("gamehost.feed")

LEASE_POLL = 1.0
"""Seconds between two lease rounds of a host (a session whose holder died is taken over by its
next owner within about this, plus the time to read its log)."""
SCAN_EVERY = 10
"""Lease rounds between two listings of the store's unfinished sessions when nothing changed
(the hosts seen changing, or the feed reconnecting, lists them at once)."""
OWNER_CACHE = 100_000
"""Sessions whose owner a :class:`Follower` remembers at most (then it forgets them all)."""
HOST_GRACE = 5.0
"""Seconds another host may be missing from the database's connections before the driving host
takes it for gone and releases the seats its connections held (``host_gone``): longer than a
new host takes to connect its feed, about the time a dead host's sessions are taken over."""
LEASE_TIMEOUT = 3.0
"""Seconds a host's feed connection may stay silent before the database ends it, freeing its
leases (a frozen host's sessions are then taken over by another); the feed pings every third."""
CHANNEL = "gamehost_log"
"""The prefix of the PostgreSQL ``LISTEN`` channels of appends (see :func:`channel`); payload
``"<session> <last seq>"``."""
CREATED_CHANNEL = "gamehost_created"
"""The channel every create notifies (payload ``"<session> <last seq>"``); every host listens."""
BUCKETS = 4096
"""Notice channels of appends: a session's is chosen by the CRC32C of its id."""


def channel(session: str) -> str:
    """The notice channel of ``session``'s appends: ``gamehost_log_`` and its bucket (the CRC32C
    of the id's UTF-8 bytes modulo :data:`BUCKETS`) in three hex digits, e.g. ``gamehost_log_0a3``
    (a PostgreSQL identifier: at most 63 bytes, which a session id of 64 would not fit)."""
    return f"{CHANNEL}_{crc32c.crc32c(session.encode()) % BUCKETS:03x}"


def _score(host: str, session: str) -> bytes:
    return hashlib.blake2b(f"{host}\0{session}".encode(), digest_size=8).digest()


def owner(session: str, hosts: Iterable[str]) -> str | None:
    """The host (instance id) among ``hosts`` that should drive ``session``: the one with the
    highest BLAKE2b hash of ``(host, session)`` (rendezvous hashing; a tie goes to the greater id).
    None when ``hosts`` is empty. Every host computes the same answer from the same set."""
    best: tuple[bytes, str] | None = None
    for host in hosts:
        key = (_score(host, session), host)
        if best is None or key > best:
            best = key
    return None if best is None else best[1]


@attrs.frozen
class Notice:
    """New records in a session's log: ``session`` and its ``seq`` now (the last record's;
    None: unknown, read to find out). ``created``: the session was just made (every host hears
    of it). ``session`` None: check every session (see the module docstring)."""

    session: str | None
    seq: int | None = None
    created: bool = False


class Feed(Protocol):
    """Notices of new records and leases on sessions, for one host (see the module docstring).

    Lifecycle: start :meth:`run` in a nursery; :meth:`aclose` releases every lease and ends it.
    """

    instance: str

    def notices(self) -> AsyncIterator[Notice]:
        """The notices, in order of arrival; one consumer only."""
        ...

    def follow(self, session: str) -> None:
        """Hear of ``session``'s appends from now on. Call it before reading the log: once the
        feed listens, a notice with the log's last seq follows, so an append made between the
        read and the listening is not missed."""
        ...

    def unfollow(self, session: str) -> None:
        """Stop hearing of ``session``'s appends (the feed may still pass some on: drop them)."""
        ...

    def announce(self, session: str) -> None:
        """Tell every host of ``session`` as of a create (a ``created`` notice without a seq):
        this host gave its lease up, and its owner should drive it."""
        ...

    def holds(self, session: str) -> bool:
        """Whether this feed holds the lease of ``session`` now (as far as it knows)."""
        ...

    async def try_leases(self, sessions: Iterable[str]) -> set[str]:
        """Take the leases of those ``sessions`` that no other host holds; returns every one
        of them this feed holds now (the ones held already included). An empty set when the
        feed has no connection."""
        ...

    async def release(self, session: str) -> None:
        """Give a held lease back (nothing if not held)."""
        ...

    async def live_hosts(self) -> set[str] | None:
        """The instance ids of the hosts whose feeds are connected now (this one's included),
        or None when this feed cannot tell (no connection)."""
        ...

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The feed's own task; returns after :meth:`aclose`."""
        ...

    async def aclose(self) -> None:
        """Release every lease, stop the notices and end :meth:`run`."""
        ...


class _Notices:
    """An unbounded notice queue (notices are small and bounded by the store's write rate)."""

    def __init__(self) -> None:
        self.send, self.recv = trio.open_memory_channel[Notice](math.inf)

    def put(self, notice: Notice) -> None:
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            self.send.send_nowait(notice)


# -- in one process ----------------------------------------------------------------------------
class MemoryHub:
    """What hosts in one process share besides their store's logs: notices and leases.

    ``hub.store()`` makes a store for one host (all on the hub's ``logs``), ``hub.feed()`` its
    feed."""

    def __init__(self, logs: dict[str, list[bytes]] | None = None) -> None:
        self.logs: dict[str, list[bytes]] = {} if logs is None else logs
        self.feeds: set[MemoryFeed] = set()
        self.leases: dict[str, MemoryFeed] = {}

    def store(self) -> PublishingMemoryStore:
        """A new store object on the hub's logs that announces its appends."""
        return PublishingMemoryStore(self, self.logs)

    def feed(self) -> MemoryFeed:
        """A new feed (one per host)."""
        return MemoryFeed(self)

    def publish(self, session: str, seq: int, created: bool = False) -> None:
        """Tell the feeds listening to ``session``'s channel (every feed if ``created``) that
        its log reaches ``seq``."""
        ch = channel(session)
        for f in list(self.feeds):
            if created or ch in f.channels:
                f.deliver(Notice(session, seq, created))


class PublishingMemoryStore(MemoryStore):
    """A :class:`~host.store.memory.MemoryStore` that tells its hub of every create and append (as
    the PostgreSQL store's ``pg_notify`` does, once the records are stored)."""

    def __init__(self, hub: MemoryHub, logs: dict[str, list[bytes]]) -> None:
        super().__init__(logs)
        self.hub = hub

    async def session_page(
        self, after: str | None, limit: int, game: str | None = None
    ) -> list[dict[str, Any]]:
        """Like the PostgreSQL store's: up to ``limit`` sessions with ids above ``after`` (of
        ``game`` only, if given), by id, each ``{"session", "game", "last_seq", "ended",
        "header"}``."""
        await trio.lowlevel.checkpoint()
        out: list[dict[str, Any]] = []
        for sid in sorted(self.logs):
            lines = self.logs[sid]
            if (after is not None and sid <= after) or not lines:
                continue
            head = orjson.loads(lines[0])
            if game is not None and head.get("game") != game:
                continue
            last = orjson.loads(lines[-1])
            out.append(
                {
                    "session": sid,
                    "game": head.get("game"),
                    "last_seq": len(lines) - 1,
                    "ended": last.get("type") == "ended",
                    "header": lines[0].rstrip(b"\n").decode(),
                }
            )
            if len(out) == limit:
                break
        return out

    async def unfinished_sessions(self) -> list[str]:
        """Like the PostgreSQL store's: the ids of the sessions whose log does not end with an
        ``ended`` record, sorted."""
        await trio.lowlevel.checkpoint()
        return [
            sid
            for sid in sorted(self.logs)
            if self.logs[sid] and orjson.loads(self.logs[sid][-1]).get("type") != "ended"
        ]

    def follow(self, session: str, next_seq: int) -> None:
        """As ``PostgresStore.follow``: open ``session`` for appends at ``next_seq``, which the
        caller has read up to; an append still fails if the log has moved on."""
        self._lines(session)
        self._next[session] = next_seq

    async def append(self, session: str, expected_seq: int, records: list[dict[str, Any]]) -> None:
        """See :meth:`host.store.base.Store.append` (``create`` goes through it too, with
        ``expected_seq`` 0: announced as created); then a notice, if anything was written."""
        await super().append(session, expected_seq, records)
        if records:
            self.hub.publish(session, expected_seq + len(records) - 1, created=expected_seq == 0)


class MemoryFeed:
    """A :class:`Feed` over a :class:`MemoryHub`. :meth:`cut` models its connection dying."""

    def __init__(self, hub: MemoryHub) -> None:
        self.hub = hub
        self.instance = ""  # the host's instance id (set by the host before run)
        self.connected = True
        self.followed: dict[str, int] = {}  # session -> follow calls not undone yet
        self.channels: dict[str, int] = {}  # channel -> sessions followed on it
        self._q = _Notices()
        hub.feeds.add(self)

    def deliver(self, notice: Notice) -> None:
        """Queue a notice, unless the connection is cut (called by the hub)."""
        if self.connected:
            self._q.put(notice)

    def notices(self) -> AsyncIterator[Notice]:
        return self._q.recv

    def follow(self, session: str) -> None:
        n = self.followed.get(session, 0)
        self.followed[session] = n + 1
        if not n:
            ch = channel(session)
            self.channels[ch] = self.channels.get(ch, 0) + 1

    def unfollow(self, session: str) -> None:
        n = self.followed.get(session, 0)
        if n > 1:
            self.followed[session] = n - 1
        elif n == 1:
            del self.followed[session]
            ch = channel(session)
            left = self.channels[ch] - 1
            if left:
                self.channels[ch] = left
            else:
                del self.channels[ch]

    def announce(self, session: str) -> None:
        if self.connected:
            for f in list(self.hub.feeds):
                f.deliver(Notice(session, None, True))

    def holds(self, session: str) -> bool:
        return self.connected and self.hub.leases.get(session) is self

    async def try_leases(self, sessions: Iterable[str]) -> set[str]:
        await trio.lowlevel.checkpoint()
        if not self.connected:
            return set()
        got = set()
        for sid in sessions:
            if self.hub.leases.setdefault(sid, self) is self:
                got.add(sid)
        return got

    async def release(self, session: str) -> None:
        await trio.lowlevel.checkpoint()
        if self.hub.leases.get(session) is self:
            del self.hub.leases[session]

    async def live_hosts(self) -> set[str] | None:
        await trio.lowlevel.checkpoint()
        if not self.connected:
            return None
        return {f.instance for f in self.hub.feeds if f.connected}

    def _drop_leases(self) -> None:
        for sid in [s for s, f in self.hub.leases.items() if f is self]:
            del self.hub.leases[sid]

    def cut(self) -> None:
        """The connection dies: every lease is freed, and this host is told (``Notice(None)``);
        no notices or leases until :meth:`mend`."""
        self._drop_leases()
        self._q.put(Notice(None))
        self.connected = False

    def mend(self) -> None:
        """The connection is back: notices flow again (and this host checks every session)."""
        self.connected = True
        self._q.put(Notice(None))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:  # the process is gone: so is its connection, and its leases with it
            self._drop_leases()
            self.hub.feeds.discard(self)

    async def aclose(self) -> None:
        self._drop_leases()
        self.hub.feeds.discard(self)
        self._q.send.close()
        await trio.lowlevel.checkpoint()


# -- PostgreSQL --------------------------------------------------------------------------------
_LOCK = "SELECT s FROM unnest(%s::text[]) AS s WHERE pg_try_advisory_lock(hashtextextended(s, 0))"
_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"
_LIVE = (
    "SELECT application_name FROM pg_stat_activity"
    " WHERE datname = current_database() AND application_name LIKE %s"
)
_WHERE = "SELECT session_id, last_seq FROM gamehost_sessions WHERE session_id = ANY(%s)"


class PostgresFeed:
    """A :class:`Feed` on PostgreSQL: one dedicated connection per host, owned by one thread.

    The thread ``LISTEN``s on :data:`CREATED_CHANNEL` and on the channel (:func:`channel`) of
    every session followed, and waits for notifications at most ``poll`` seconds at a time,
    between which it runs the lease queries trio queued (session-level
    ``pg_try_advisory_lock(hashtextextended(session, 0))``, so the locks die with the
    connection) and brings its ``LISTEN``s in line with the sessions followed (``UNLISTEN`` for a
    channel no followed session uses any more). Once it listens on new channels it reads the
    ``last_seq`` of the sessions followed on them and passes each on as a notice (the records a
    host may have missed between reading a log and listening). Notices and answers go to trio
    through ``trio.from_thread``.

    When the connection fails, every lease is marked lost at once and trio is told
    (``Notice(None)``); the thread reconnects with a delay doubling from 0.1 s to ``backoff_max``
    seconds, listens again and says so (``Notice(None)`` again: check every session). Leases are
    not re-taken by the feed: the :class:`Follower`'s next round takes those it owns and finds
    free.

    Args:
        dsn: a libpq connection string or ``postgresql://`` URL.
        poll: seconds the thread waits for a notification before it looks at the lease queue
            and the sessions followed (the latency of a lease request or a new ``LISTEN``).
        backoff_max: the longest delay between two connection attempts, seconds.
        name: the connection's ``application_name`` (what ``pg_stat_activity`` shows).
        lease_timeout: seconds of silence after which the server ends the connection and frees
            its leases (``idle_session_timeout``; the thread pings every third of it; a server
            older than PostgreSQL 14 ignores it, with a warning).
    """

    def __init__(
        self,
        dsn: str,
        *,
        poll: float = 0.05,
        backoff_max: float = 5.0,
        name: str = "gamehost-feed",
        lease_timeout: float = LEASE_TIMEOUT,
    ) -> None:
        self.dsn = dsn
        self.lease_timeout = lease_timeout
        self.name = name
        self.instance = ""
        """The host's instance id (set by the host before :meth:`run`): the connection's
        ``application_name`` is ``"<name> <instance>"``, which is how the other hosts on the
        same database see that this one runs (:meth:`live_hosts`)."""
        self.poll = poll
        self.backoff_max = backoff_max
        self.held: set[str] = set()
        self._asking: set[str] = set()  # lock requests under way (never two for one session)
        self.connected = False
        self._q = _Notices()
        self._requests: queue.SimpleQueue[tuple[str, Any, trio.Event, list[Any]]] = (
            queue.SimpleQueue()
        )
        self._followed: dict[str, int] = {}  # session -> follow calls not undone yet
        self._lock = threading.Lock()  # guards _channels (trio writes, the thread reads)
        self._channels: dict[str, set[str]] = {}  # channel -> the sessions followed on it
        self._changed = threading.Event()  # _channels changed since the thread looked
        self._stop = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._thread: threading.Thread | None = None
        self._done = trio.Event()

    # -- trio side ---------------------------------------------------------------------------
    def notices(self) -> AsyncIterator[Notice]:
        return self._q.recv

    def follow(self, session: str) -> None:
        n = self._followed.get(session, 0)
        self._followed[session] = n + 1
        if n:
            return
        ch = channel(session)
        with self._lock:
            sessions = self._channels.get(ch)
            if sessions is None:
                self._channels[ch] = {session}
                self._changed.set()
                return
            sessions.add(session)
        # the channel is listened to already (or will be with the others): where does it stand?
        self._requests.put(("where", [session], trio.Event(), []))

    def unfollow(self, session: str) -> None:
        n = self._followed.get(session, 0)
        if n > 1:
            self._followed[session] = n - 1
            return
        if n == 0:
            return
        del self._followed[session]
        ch = channel(session)
        with self._lock:
            sessions = self._channels.get(ch)
            if sessions is not None:
                sessions.discard(session)
                if not sessions:
                    del self._channels[ch]
                    self._changed.set()

    @property
    def channels(self) -> set[str]:
        """The channels of the sessions followed now (listened to, or about to be)."""
        with self._lock:
            return set(self._channels)

    def announce(self, session: str) -> None:
        self._requests.put(("announce", session, trio.Event(), []))

    def holds(self, session: str) -> bool:
        return session in self.held

    async def _ask(self, op: str, arg: Any) -> Any:
        if self._thread is None or not self.connected or self._stop.is_set():
            await trio.lowlevel.checkpoint()
            return None
        done, box = trio.Event(), []
        self._requests.put((op, arg, done, box))
        # the answer changes `held`: wait for it, but not for ever (the thread may be stopping)
        with trio.CancelScope(shield=True), trio.move_on_after(10 + self.poll):
            await done.wait()
        return box[0] if box else None

    async def try_leases(self, sessions: Iterable[str]) -> set[str]:
        sessions = list(sessions)
        # a second lock of one session would need two unlocks: never ask twice at once
        want = [s for s in sessions if s not in self.held and s not in self._asking]
        if want:
            self._asking.update(want)
            try:
                got = await self._ask("lock", want)
            finally:
                self._asking.difference_update(want)
            if got and self.connected:
                self.held.update(got)
        return {s for s in sessions if s in self.held}

    async def release(self, session: str) -> None:
        if session in self.held:
            self.held.discard(session)
            await self._ask("unlock", session)

    async def live_hosts(self) -> set[str] | None:
        got = await self._ask("live", None)
        return None if got is None else set(got)

    def _from_thread(self, fn: Any, *args: Any) -> None:
        try:
            trio.from_thread.run_sync(fn, *args, trio_token=self._token)
        except trio.RunFinishedError:
            self._stop.set()

    def _lost(self) -> None:
        if (self.connected or self.held) and not self._stop.is_set():  # not when closing
            log.warning("feed_connection_lost", leases=len(self.held))
        self.connected = False
        self.held.clear()
        self._q.put(Notice(None))

    def _found(self) -> None:
        self.connected = True
        log.info("feed_connected")
        self._q.put(Notice(None))

    def _notify(self, got: list[tuple[str, str]]) -> None:
        for ch, payload in got:
            sid, _, seq = payload.partition(" ")
            created = ch == CREATED_CHANNEL
            try:
                self._q.put(Notice(sid, int(seq), created))
            except ValueError:
                self._q.put(Notice(sid, None, created))

    def _where(self, rows: list[tuple[str, int]]) -> None:
        for sid, seq in rows:
            if sid in self._followed:
                self._q.put(Notice(sid, int(seq)))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the connection's thread (it connects in the background); returns once it has
        stopped (after :meth:`aclose`, or cancelled: then it is told to stop and not waited
        for, and its connection closes within ``poll`` seconds)."""
        self._token = trio.lowlevel.current_trio_token()
        self._thread = threading.Thread(target=self._main, name="gamehost-feed", daemon=True)
        self._thread.start()
        task_status.started()
        try:
            await self._done.wait()
        finally:
            self._stop.set()

    async def aclose(self) -> None:
        self._stop.set()
        if self._thread is not None:
            await trio.to_thread.run_sync(self._thread.join)
        self.held.clear()
        self._q.send.close()
        self._done.set()

    # -- the connection's thread ---------------------------------------------------------------
    def _main(self) -> None:
        import psycopg

        delay = 0.1
        while not self._stop.is_set():
            try:
                conn = psycopg.connect(
                    self.dsn,
                    autocommit=True,
                    connect_timeout=5,
                    keepalives=1,
                    keepalives_idle=5,
                    keepalives_interval=2,
                    keepalives_count=2,
                    application_name=f"{self.name} {self.instance}".strip(),
                )
            except psycopg.Error as exc:
                log.warning("feed_connect_failed", error=str(exc).strip(), retry_in=delay)
                self._stop.wait(delay)
                delay = min(self.backoff_max, delay * 2)
                continue
            delay = 0.1
            try:
                with conn:
                    self._set_idle_timeout(conn)
                    conn.execute(f"LISTEN {CREATED_CHANNEL}")
                    listening: set[str] = set()
                    self._listen(conn, listening, tell=False)
                    self._from_thread(self._found)  # check every session: notices were missed
                    self._serve(conn, listening)
            except psycopg.Error as exc:
                log.warning("feed_connection_failed", error=str(exc).strip())
            finally:
                self._answer_pending()
                self._from_thread(self._lost)

    def _set_idle_timeout(self, conn: Any) -> None:
        import psycopg

        ms = str(max(1, round(self.lease_timeout * 1000)))
        try:
            conn.execute("SELECT set_config('idle_session_timeout', %s, false)", [ms])
        except psycopg.errors.UndefinedObject:  # before PostgreSQL 14
            log.warning("feed_no_idle_session_timeout", note="a frozen host keeps its leases")

    def _listen(self, conn: Any, listening: set[str], tell: bool = True) -> None:
        """Make ``listening`` (the channels this connection listens to) the channels of the
        sessions followed; with ``tell``, pass on where the sessions of the new ones stand."""
        self._changed.clear()
        with self._lock:
            wanted = set(self._channels)
        gone, new = listening - wanted, wanted - listening
        if gone:  # channel names are ours (prefix and hex digits): no quoting needed
            conn.execute("; ".join(f"UNLISTEN {ch}" for ch in sorted(gone)))
            listening -= gone
        if new:
            conn.execute("; ".join(f"LISTEN {ch}" for ch in sorted(new)))
            listening |= new
            if tell:
                with self._lock:
                    sessions = [s for ch in new for s in self._channels.get(ch, ())]
                self._tell_where(conn, sessions)

    def _tell_where(self, conn: Any, sessions: list[str]) -> None:
        if sessions:
            rows = conn.execute(_WHERE, (sessions,)).fetchall()
            if rows:
                self._from_thread(self._where, [(r[0], r[1]) for r in rows])

    def _serve(self, conn: Any, listening: set[str]) -> None:
        ping_every = self.lease_timeout / 3
        last = time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() - last >= ping_every:
                conn.execute("SELECT 1")  # not idle: this host is running
                last = time.monotonic()
            if self._changed.is_set():
                self._listen(conn, listening)
                last = time.monotonic()
            while True:
                try:
                    op, arg, done, box = self._requests.get_nowait()
                except queue.Empty:
                    break
                try:
                    if op == "lock":
                        box.append({row[0] for row in conn.execute(_LOCK, (arg,)).fetchall()})
                    elif op == "live":
                        rows = conn.execute(_LIVE, (f"{self.name} %",)).fetchall()
                        box.append({row[0].split(" ", 1)[1] for row in rows})
                    elif op == "where":
                        self._tell_where(conn, arg)
                    elif op == "announce":
                        conn.execute("SELECT pg_notify(%s, %s)", (CREATED_CHANNEL, arg))
                    else:
                        conn.execute(_UNLOCK, (arg,))
                    last = time.monotonic()
                finally:
                    self._from_thread(done.set)
            got = [(n.channel, n.payload) for n in conn.notifies(timeout=self.poll)]
            if got:
                self._from_thread(self._notify, got)

    def _answer_pending(self) -> None:
        """Answer every queued lease request with nothing (the connection is gone)."""
        while True:
            try:
                _, _, done, _ = self._requests.get_nowait()
            except queue.Empty:
                return
            self._from_thread(done.set)


# -- the host's side ---------------------------------------------------------------------------
class Followed(Protocol):
    """What :class:`Follower` needs of a live session (``host.net.session.Session``)."""

    id: str

    @property
    def ended(self) -> bool:
        """The session has ended (no host-driven steps left)."""
        ...

    def notice(self, seq: int | None) -> None:
        """The log reaches ``seq`` (None: it may have grown): catch up if behind."""
        ...

    def set_driver(self, driver: bool) -> None:
        """Run host-driven steps (True: this host holds the lease) or not."""
        ...

    def set_host_alive(self, alive: Callable[[str], bool]) -> None:
        """How to tell whether another host (by instance id) runs; look at the seats again."""
        ...

    def seat_hosts(self) -> set[str]:
        """The instance ids of the hosts whose connections hold its seats, per the log."""
        ...

    def let_go(self) -> None:
        """This host keeps it for its own connections only: once none uses it, it leaves at
        once (not after the linger)."""
        ...


class Follower:
    """Connects a host's live sessions to its :class:`Feed`: notices, ownership and leases.

    Args:
        feed: this host's feed (its :meth:`Feed.run` started by the caller; its ``instance``
            set).
        sessions: the host's live sessions by id (read, never changed).
        discover: called with the id of a session this host owns and does not have live, which
            a ``created`` notice names (the host loads it in the background); None: dropped.
        poll: seconds between two lease rounds (:data:`LEASE_POLL`).
        unfinished: lists the store's unfinished sessions (``store.unfinished_sessions``); None:
            this host loads no session by itself (only what its clients name).
        load: loads a session this host owns, found by listing the store (the host's
            ``_live_session``; awaited, one at a time); None: ``discover`` is used.
        scan_every: lease rounds between two listings when nothing changed (:data:`SCAN_EVERY`).
    """

    def __init__(
        self,
        feed: Feed,
        sessions: Mapping[str, Followed],
        discover: Callable[[str], None] | None = None,
        poll: float = LEASE_POLL,
        *,
        unfinished: Callable[[], Awaitable[list[str]]] | None = None,
        load: Callable[[str], Awaitable[object]] | None = None,
        scan_every: int = SCAN_EVERY,
    ) -> None:
        self.feed = feed
        self.sessions = sessions
        self.discover = discover
        self.poll = poll
        self.unfinished = unfinished
        self.load = load
        self.scan_every = scan_every
        self.scanned = trio.Event()
        """Set once the store's unfinished sessions were listed and those this host owns loaded
        (at once when ``unfinished`` is None)."""
        if unfinished is None:
            self.scanned.set()
        self.scans = 0
        """How many times the store's unfinished sessions were listed."""
        self._held: set[str] = set()  # leases taken (as far as the last round knows)
        self._live: set[str] | None = None  # the hosts seen running at the last round
        self._owners: dict[str, str | None] = {}  # session -> its owner among _live (a cache)
        self._missing: dict[str, float] = {}  # a host not seen running -> since when
        self._announced: set[str] = set()  # missing hosts the sessions were told are gone
        self._fetched: set[str] = set()  # loaded by this follower (as their owner), not live yet
        self._elsewhere: dict[str, str] = {}  # owned, driven where its players are: that host
        self._rescan = True  # list the store's unfinished sessions at the next round
        self._rounds = 0  # rounds since the last listing
        self._wake = trio.Event()  # a round now (the feed connected: the hosts may have changed)

    @property
    def instance(self) -> str:
        """This host's instance id (its feed's)."""
        return getattr(self.feed, "instance", "")

    @property
    def hosts(self) -> set[str] | None:
        """The hosts seen running at the last lease round (None: not known yet)."""
        return None if self._live is None else set(self._live)

    def owner_of(self, session: str) -> str | None:
        """The owner (:func:`owner`) of ``session`` among the hosts seen at the last lease
        round (None while they are not known)."""
        if self._live is None:
            return None
        who = self._owners.get(session, "")
        if who == "":
            if len(self._owners) >= OWNER_CACHE:  # every create is asked about: stay bounded
                self._owners.clear()
            who = self._owners[session] = owner(session, self._live)
        return who

    def owns(self, session: str) -> bool:
        """Whether this host is the owner of ``session`` among the hosts seen at the last
        lease round; True while they are not known yet."""
        return self._live is None or self.owner_of(session) == self.instance

    def driver_for(self, session: Followed) -> str | None:
        """The host that should drive a live session: the one running host whose connections
        hold its seats (per the log), if all its held seats are held from one host, so a table
        is driven where its players are; else its owner. None while the hosts are not known."""
        if self._live is None:
            return None
        hosts = session.seat_hosts() & self._live
        if len(hosts) == 1:
            return next(iter(hosts))
        return self.owner_of(session.id)

    def drives(self, session: Followed) -> bool:
        """Whether this host should drive the live ``session`` (:meth:`driver_for`); True
        while the hosts are not known yet."""
        return self._live is None or self.driver_for(session) == self.instance

    def new_id(self, make: Callable[[], str], tries: int = 64) -> str:
        """A new session id this host owns, so the session is driven where it was made and its
        clients, who reach this host, find it live here (``make()`` called until it gives one,
        at most ``tries`` times; then the last one). Any id while the hosts are not known."""
        sid = make()
        for _ in range(tries - 1):
            if self.owns(sid):
                break
            sid = make()
        return sid

    def follow(self, session: str) -> None:
        """Hear of the session's appends from now on (before reading its log)."""
        self.feed.follow(session)

    def unfollow(self, session: str) -> None:
        """It left this host: stop hearing of it."""
        self.feed.unfollow(session)

    def host_alive(self, instance: str) -> bool:
        """Whether the host whose instance id is ``instance`` still runs, as far as this host
        can tell, so the seats its connections hold are held: its feed was connected at the
        last lease round, or it has been missing for less than :data:`HOST_GRACE` seconds (a
        host just started may not have connected yet), or this feed cannot tell."""
        if self._live is None or instance in self._live:
            return True
        now = trio.current_time()
        first = self._missing.setdefault(instance, now)
        return now - first < HOST_GRACE

    async def adopt(self, session: Followed) -> None:
        """A session went live here: try its lease at once if this host should drive it. One
        this host loaded by itself (as its owner) that another host's players hold is let go
        (that host drives it)."""
        fetched = session.id in self._fetched
        self._fetched.discard(session.id)
        if not self.drives(session):
            session.set_driver(False)
            if fetched:
                session.let_go()
                target = self.driver_for(session)
                if target is not None:
                    self._elsewhere[session.id] = target
            return
        got = await self.feed.try_leases([session.id])
        if self.sessions.get(session.id) is not session:
            return  # it left meanwhile: the next round gives the lease back
        if session.id in got:
            self._held.add(session.id)
        session.set_driver(session.id in got)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Route notices and run lease rounds until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._notices)
            nursery.start_soon(self._leases)
            task_status.started()

    async def _notices(self) -> None:
        async for n in self.feed.notices():
            if n.session is None:  # leases lost, or the connection is back: check everything
                self._rescan = True
                self._wake.set()
                for sid, s in list(self.sessions.items()):
                    s.set_driver(self.feed.holds(sid))
                    s.notice(None)
                continue
            s = self.sessions.get(n.session)
            if s is not None:
                s.notice(n.seq)
            elif (
                n.created
                and self.discover is not None
                and self._live is not None
                and self.owns(n.session)
            ):  # made elsewhere (or given back by the host of its players): this host's
                self._elsewhere.pop(n.session, None)
                self._fetched.add(n.session)
                self.discover(n.session)

    async def lease_round(self) -> None:
        """One round: learn which hosts run; stop driving and give back the leases of sessions
        that ended, left the live list or are another host's now; take the free leases of the
        sessions this host owns; tell each session whether it drives; and when the hosts seen
        changed (or every ``scan_every`` rounds) list the store's unfinished sessions and load
        those this host owns and does not have live."""
        before, self._live = self._live, await self.feed.live_hosts()
        if self._live != before:
            self._owners.clear()  # (_elsewhere is kept: the listing drops its gone hosts)
            if self._live is not None:
                log.info(
                    "hosts_seen", hosts=len(self._live), was=None if before is None else len(before)
                )
                self._rescan = True
        live = dict(self.sessions)
        want = [sid for sid, s in live.items() if not s.ended and self.drives(s)]
        wanted = set(want)
        for sid in sorted(self._held - wanted):
            s = live.get(sid)
            self._held.discard(sid)
            if s is None or s.ended:
                await self.feed.release(sid)
                if s is None and not self.owns(sid):  # it left here unended: to its owner
                    self.feed.announce(sid)
                continue
            s.set_driver(False)  # before the lease goes: never two drivers by our doing
            s.let_go()  # another host drives it now: kept only while a connection here uses it
            target = self.driver_for(s)
            await self.feed.release(sid)
            if target is not None and target == self.owner_of(sid):
                self.feed.announce(sid)  # back to its owner, which may not have it live
            elif target is not None and self.owns(sid):
                self._elsewhere[sid] = target  # its players' host drives it
        got = await self.feed.try_leases(want) if want else set()  # last await before set_driver
        self._held = (self._held - set(live)) | got  # adopted meanwhile: kept
        now = trio.current_time()
        if self._live is not None:
            for instance in [i for i in self._missing if i in self._live]:
                del self._missing[instance]
                self._announced.discard(instance)
            for instance in (before or set()) - self._live:  # a host went away just now
                self._missing.setdefault(instance, now)
        gone = {i for i, since in self._missing.items() if now - since >= HOST_GRACE}
        # the hosts seen changed, or one was just found gone: the driven sessions look again
        # at who holds their seats (a session asks host_alive, which notes a missing host)
        news = bool(gone - self._announced) or before != self._live
        self._announced |= gone
        for sid, s in live.items():
            if self.sessions.get(sid) is not s or s.ended:
                continue
            s.set_driver(sid in got)
            if news and sid in got:  # seats of a host found gone: the driver releases them
                s.set_host_alive(self.host_alive)
        self._rounds += 1
        if self._live is not None and (self._rescan or self._rounds >= self.scan_every):
            await self._scan()

    async def _scan(self) -> None:
        """List the store's unfinished sessions; load each one this host owns and does not
        have live (one at a time: a load takes its lease at once)."""
        if self.unfinished is None:
            self.scanned.set()
            return
        try:
            ids = await self.unfinished()
        except Exception as exc:  # noqa: BLE001 - the store is down: the next round tries again
            log.warning("unfinished_sessions_unreadable", error=str(exc) or repr(exc))
            return
        self._rescan = False
        self._rounds = 0
        self.scans += 1
        live, unfinished = self._live or set(), set(ids)
        self._elsewhere = {
            sid: host for sid, host in self._elsewhere.items() if host in live and sid in unfinished
        }
        mine = [
            sid
            for sid in ids
            if sid not in self.sessions and sid not in self._elsewhere and self.owns(sid)
        ]
        if mine:
            log.info("sessions_owned_found", sessions=len(mine), unfinished=len(ids))
        for sid in mine:
            if sid in self.sessions or not self.owns(sid):
                continue
            self._fetched.add(sid)
            if self.load is not None:
                try:
                    await self.load(sid)
                except Exception:  # noqa: BLE001 - one log that does not load stops no other
                    log.exception("session_load_failed", session=sid)
                if sid not in self.sessions:
                    self._fetched.discard(sid)
            elif self.discover is not None:
                self.discover(sid)
        self.scanned.set()

    async def _leases(self) -> None:
        while True:
            await self.lease_round()
            with trio.move_on_after(self.poll):
                await self._wake.wait()
            self._wake = trio.Event()
