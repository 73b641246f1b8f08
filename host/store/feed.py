"""Many hosts on one store: following session logs, and leases on host-driven steps.

Hosts that share a store (a PostgreSQL database, or in tests one ``MemoryStore``'s logs) are
*followers of the log*: none owns a session. Each host keeps its own copy of every session it has
live and keeps it caught up with the log; a client may connect to and resume on any host. A
:class:`Feed` is what a host needs beyond the store for that:

- **notices**: :meth:`Feed.notices` yields a :class:`Notice` ``(session, last_seq)`` after
  any host (this one too) created or appended to a session. For a session live here the host
  reads the new records (``store.read(session, after)``), folds them and pushes them to its own
  clients; a session it does not have live it loads (so every host follows every unfinished
  session, and can take over any of them). A notice with ``session=None`` means "check every
  session": the feed lost its connection (all leases went with it) or got it back (notices may
  have been missed meanwhile).
- **leases**: host-driven steps of a session (bots, turn timers, abandonment) run on exactly one
  host, the holder of its lease. :meth:`Feed.try_leases` takes the free ones of some sessions
  (never one another host holds); a lease is held until :meth:`Feed.release`, or until the
  feed's connection dies, which frees every lease it held at once (the database frees the
  advisory locks of a connection that closes, also when its process is killed). A host that
  freezes without dying (SIGSTOP, a hung VM: its kernel still answers TCP keepalives) loses
  them too: the feed connection asks the server to end it when idle for
  :data:`LEASE_TIMEOUT` seconds (``idle_session_timeout``), and a running host's feed sends a
  query every third of that, so only a frozen one goes idle that long.

Implementations: :class:`MemoryFeed` (hosts in one process, over a :class:`MemoryHub`, with a
:class:`PublishingMemoryStore` that announces appends) and :class:`PostgresFeed` (``LISTEN
gamehost_log`` and ``pg_try_advisory_lock`` on one dedicated connection per host, in its own
thread, reconnecting with backoff).

:class:`Follower` is the host's side: it routes notices to the live sessions and polls for
leases every :data:`LEASE_POLL` seconds, so a session whose lease holder died is taken over by
another host with it live within about that time. The log stays the one truth throughout: an
append names its expected seq, so two hosts that both believe they may act (a lease lost but
not noticed yet) cannot both win one seq; the loser reads the log and decides again.
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Protocol

import attrs
import orjson
import structlog
import trio

from host.store.memory import MemoryStore

__all__ = [
    "LEASE_POLL",
    "LEASE_TIMEOUT",
    "Feed",
    "Followed",
    "Follower",
    "MemoryFeed",
    "MemoryHub",
    "Notice",
    "PostgresFeed",
    "PublishingMemoryStore",
]

log = structlog.get_logger("gamehost.feed")

LEASE_POLL = 1.0
"""Seconds between two rounds of taking the free leases of a host's live sessions (a session
whose holder died is taken over within about this, plus the time to read its log)."""
HOST_GRACE = 5.0
"""Seconds another host may be missing from the database's connections before the driving host
takes it for gone and releases the seats its connections held (``host_gone``): longer than a
new host takes to connect its feed, about the time a dead host's sessions are taken over."""
LEASE_TIMEOUT = 3.0
"""Seconds a host's feed connection may stay silent before the database ends it, freeing its
leases (a frozen host's sessions are then taken over by another); the feed pings every third."""
CHANNEL = "gamehost_log"
"""The PostgreSQL ``LISTEN`` channel; payload ``"<session> <last seq>"``."""


@attrs.frozen
class Notice:
    """New records in a session's log: ``session`` and its ``seq`` now (the last record's).
    ``session`` None: check every session (see the module docstring)."""

    session: str | None
    seq: int | None = None


class Feed(Protocol):
    """Notices of new records and leases on sessions, for one host (see the module docstring).

    Lifecycle: start :meth:`run` in a nursery; :meth:`aclose` releases every lease and ends it.
    """

    def notices(self) -> AsyncIterator[Notice]:
        """The notices, in order of arrival; one consumer only."""
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

    def publish(self, session: str, seq: int) -> None:
        """Tell every feed that ``session``'s log reaches ``seq``."""
        for f in list(self.feeds):
            f.deliver(Notice(session, seq))


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

    def follow(self, session: str, next_seq: int) -> None:
        """As ``PostgresStore.follow``: open ``session`` for appends at ``next_seq``, which the
        caller has read up to; an append still fails if the log has moved on."""
        self._lines(session)
        self._next[session] = next_seq

    async def append(self, session: str, expected_seq: int, records: list[dict[str, Any]]) -> None:
        """See :meth:`host.store.base.Store.append` (``create`` goes through it too); then a
        notice, if anything was written."""
        await super().append(session, expected_seq, records)
        if records:
            self.hub.publish(session, expected_seq + len(records) - 1)


class MemoryFeed:
    """A :class:`Feed` over a :class:`MemoryHub`. :meth:`cut` models its connection dying."""

    def __init__(self, hub: MemoryHub) -> None:
        self.hub = hub
        self.instance = ""  # the host's instance id (set by the host before run)
        self.connected = True
        self._q = _Notices()
        hub.feeds.add(self)

    def deliver(self, notice: Notice) -> None:
        """Queue a notice, unless the connection is cut (called by the hub)."""
        if self.connected:
            self._q.put(notice)

    def notices(self) -> AsyncIterator[Notice]:
        return self._q.recv

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
_LIVE = "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE %s"


class PostgresFeed:
    """A :class:`Feed` on PostgreSQL: one dedicated connection per host, owned by one thread.

    The thread ``LISTEN``s on :data:`CHANNEL` and waits for notifications at most ``poll``
    seconds at a time, between which it runs the lease queries trio queued (session-level
    ``pg_try_advisory_lock(hashtextextended(session, 0))``, so the locks die with the
    connection). Notices and answers go to trio through ``trio.from_thread``.

    When the connection fails, every lease is marked lost at once and trio is told
    (``Notice(None)``); the thread reconnects with a delay doubling from 0.1 s to ``backoff_max``
    seconds, listens again and says so (``Notice(None)`` again: check every session). Leases are
    not re-taken by the feed: the :class:`Follower`'s next round takes those still free.

    Args:
        dsn: a libpq connection string or ``postgresql://`` URL.
        poll: seconds the thread waits for a notification before it looks at the lease queue
            (the latency of a lease request).
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
        ``application_name`` is ``"<name> <instance>"``, which is how the other hosts see that
        this one runs (:meth:`live_hosts`)."""
        self.poll = poll
        self.backoff_max = backoff_max
        self.held: set[str] = set()
        self._asking: set[str] = set()  # lock requests under way (never two for one session)
        self.connected = False
        self._q = _Notices()
        self._requests: queue.SimpleQueue[tuple[str, Any, trio.Event, list[Any]]] = (
            queue.SimpleQueue()
        )
        self._stop = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._thread: threading.Thread | None = None
        self._done = trio.Event()

    # -- trio side ---------------------------------------------------------------------------
    def notices(self) -> AsyncIterator[Notice]:
        return self._q.recv

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

    def _notify(self, payloads: list[str]) -> None:
        for payload in payloads:
            sid, _, seq = payload.partition(" ")
            try:
                self._q.put(Notice(sid, int(seq)))
            except ValueError:
                self._q.put(Notice(sid))

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
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._from_thread(self._found)
                    self._serve(conn)
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

    def _serve(self, conn: Any) -> None:
        ping_every = self.lease_timeout / 3
        last = time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() - last >= ping_every:
                conn.execute("SELECT 1")  # not idle: this host is running
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
                    else:
                        conn.execute(_UNLOCK, (arg,))
                    last = time.monotonic()
                finally:
                    self._from_thread(done.set)
            got = [n.payload for n in conn.notifies(timeout=self.poll)]
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


class Follower:
    """Connects a host's live sessions to its :class:`Feed`.

    Args:
        feed: this host's feed (its :meth:`Feed.run` started by the caller).
        sessions: the host's live sessions by id (read, never changed).
        discover: called with the id of a session a notice names that is not in ``sessions``
            (the host loads it, unless it ended); None: such notices are dropped.
        poll: seconds between two lease rounds (:data:`LEASE_POLL`).
    """

    def __init__(
        self,
        feed: Feed,
        sessions: Mapping[str, Followed],
        discover: Callable[[str], None] | None = None,
        poll: float = LEASE_POLL,
    ) -> None:
        self.feed = feed
        self.sessions = sessions
        self.discover = discover
        self.poll = poll
        self._held: set[str] = set()  # leases taken (as far as the last round knows)
        self._live: set[str] | None = None  # the hosts seen running at the last round
        self._missing: dict[str, float] = {}  # a host not seen running -> since when
        self._announced: set[str] = set()  # missing hosts the sessions were told are gone

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
        """A session went live here: try its lease at once."""
        got = await self.feed.try_leases([session.id])
        if session.id in got:
            self._held.add(session.id)
        session.set_driver(session.id in got)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Route notices and poll for leases until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._notices)
            nursery.start_soon(self._leases)
            task_status.started()

    async def _notices(self) -> None:
        async for n in self.feed.notices():
            if n.session is None:  # leases lost, or the connection is back: check everything
                for sid, s in list(self.sessions.items()):
                    s.set_driver(self.feed.holds(sid))
                    s.notice(None)
                continue
            s = self.sessions.get(n.session)
            if s is not None:
                s.notice(n.seq)
            elif self.discover is not None:
                self.discover(n.session)

    async def lease_round(self) -> None:
        """One round: give back the leases of sessions that ended or left the live list, take
        the free leases of the others, and tell each session whether it drives."""
        live = dict(self.sessions)
        want = [sid for sid, s in live.items() if not s.ended]
        for sid in sorted(self._held - set(want)):
            self._held.discard(sid)
            await self.feed.release(sid)
        before, self._live = self._live, await self.feed.live_hosts()
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
        for sid in want:
            s = live[sid]
            if self.sessions.get(sid) is s:
                s.set_driver(sid in got)
                if news and sid in got:  # seats of a host found gone: the driver releases them
                    s.set_host_alive(self.host_alive)

    async def _leases(self) -> None:
        while True:
            await self.lease_round()
            await trio.sleep(self.poll)
