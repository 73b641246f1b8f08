"""The trio TCP host: the lobby, connections, and the life of every live session.

Each connection has a reader (lines -> requests) and a writer draining a bounded outbound channel.
Lobby ops (``hello``, ``games``, ``create``, ``sessions``, ``ping``) are answered by the
connection's own task; session ops become typed commands (:mod:`host.table.commands`) submitted to
the session's driver, which answers them. Every reply and push is a typed message
(:mod:`protocol.replies`) until the connection encodes it (:meth:`Connection.answer`,
:meth:`Connection.send`): nothing else in the host builds a line.
No input from one client can crash the host: every request is parsed into a typed request or a
typed error, and an unexpected exception is logged and answered with ``internal``.

Limits, so that no client can exhaust the host (all in :class:`HostConfig`):

- descriptors: at start the soft ``RLIMIT_NOFILE`` is raised to the hard limit, and the number of
  open connections is capped (by default so that the connections, the store's open-file cache and
  a reserve stay under the soft limit). A connection over the cap is accepted, told
  ``{"push": "closed", "reason": "too_many_connections"}`` and closed at once. When ``accept``
  itself fails for want of descriptors (EMFILE, ENFILE, ENOBUFS, ENOMEM), trio's
  ``serve_listeners`` logs it, sleeps 0.1 s and accepts again: the accept loop never dies of it.
  One peer address (an IPv6 /64) may hold ``max_connections_per_address`` of them (TCP and
  WebSocket together; loopback exempt unless ``address_limit_loopback``); one more from it is
  told ``too_many_from_address`` the same way, so one address cannot hold every slot however
  little it sends.
- time: a line once begun must end within ``line_timeout`` seconds (a client trickling bytes is
  closed, reason ``line_timeout``), and a connection that neither plays nor watches a live session
  and sent no complete line for ``idle_timeout`` seconds is closed (reason ``idle``). A seated
  player waiting for its turn is never cut for silence, but it is asked: after ``ping_after``
  seconds of it the host sends a ``ping`` and closes the connection (reason ``unresponsive``)
  when nothing comes within ``ping_timeout`` seconds more, so a frozen or vanished client does
  not hold its seat; every accepted socket has TCP keepalive (``keepalive``), which finds a dead
  network path (see :mod:`host.net.connection`).
- memory: every connection's queued outbound bytes are counted from the moment a line is queued
  until it is written to the socket; past ``outbox_bytes`` (or ``outbox`` lines) the connection is
  dropped as ``slow_consumer``. The budget is strict: a ``resume`` whose missed events alone pass
  it drops the connection too (a client resumes with a recent ``after``, or none: the snapshot).
- ``create``: a token bucket per peer address (``create_burst`` tokens, ``create_rate`` more per
  second; loopback exempt unless ``create_limit_loopback``) and at most ``max_unstarted`` sessions
  per connection that it created and that have not started; past either ``create`` answers
  ``overloaded`` (with ``retry_after`` seconds for the rate).

Start: the host lists the session logs (reading none), listens, then loads the unfinished
sessions one at a time in the background, answering requests in between; each log is read once
and folded once (:func:`host.table.loading.load_steps`: on the event loop a stretch at a time,
each a step of the game budget, or, past :data:`LOAD_IN_WORKER` records, in a heavy-work
process), and progress goes to the host log (``sessions_loading``, ``sessions_load_progress``
about once a second, ``sessions_loaded``). A game that faults loading its session ends it
(``game_error``). A request naming a listed session not loaded yet loads it first (or waits
while the loader does).
On a store shared with other hosts (a ``feed``) nothing is listed: the follower
(``host.store.feed.Follower``) loads the unfinished sessions this host owns, a request naming
any other session loads it from the store, and a session this host neither drives nor serves a
connection of leaves memory after ``linger`` seconds (``session_followed`` /
``session_unfollowed`` in the host log; :attr:`Host.sessions_loaded` counts the loads).

Shutdown (SIGINT/SIGTERM, or :meth:`Host.request_shutdown`): stop accepting, tell every client
``{"push": "closed", "reason": "shutdown"}``, let the session drivers finish the command under way
(so every acknowledged append is on disk) within a grace period, then close the logs.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import secrets
import signal
import stat
import time
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import structlog
import trio

from host import __version__
from host.net import collector, replayops
from host.net.connection import Connection, set_keepalive
from host.net.heavy import Busy, HeavyFailed, HeavyWork, load_job
from host.net.marker import CrashMarker, judge
from host.net.metrics import Metrics, connection_kind, serve_metrics
from host.net.session import Session
from host.net.workers import reuse_port_listeners
from host.plugins.budget import Budget, BudgetExceeded
from host.plugins.faults import notify_isolated
from host.plugins.registry import Registry
from host.store import open_store
from host.store.base import CorruptLog, UnknownSession, now_ts
from host.store.feed import Feed, Follower, PostgresFeed
from host.store.file import MAX_OPEN, FileStore, FsyncMode
from host.table import commands
from host.table.core import (
    GAME_FAULTED_NOW,
    TAIL,
    WINDOW,
    Presence,
    Table,
    TableSettings,
    format_ts,
)
from host.table.engine import BadRecord, Engine, Record, SessionState
from host.table.loading import Loaded
from host.table.lobby import (
    AddressSlots,
    CreateLimiter,
    Lobby,
    PageBuilder,
    address_key,
    plan_create,
    sessions_page,
)
from protocol.framing import MAX_LINE
from protocol.messages import (
    HOST_DEFAULT,
    MAX_SESSIONS_PAGE,
    PROTOCOL_VERSION,
    REQUESTS,
    ErrorCode,
    ProtocolError,
    Request,
)
from protocol.replies import (
    Capabilities,
    ClosedPush,
    Created,
    GamesResult,
    HelloResult,
    Pong,
    Result,
    SessionsPage,
    SessionSummary,
)

__all__ = ["Connection", "Host", "HostConfig", "run_host"]

log = structlog.get_logger("gamehost.server")

LOBBY_SCANS = 10
"""Store pages one ``sessions`` request reads at most on a shared store (ended sessions are
skipped, so a page may take several)."""
LOAD_IN_WORKER = 2_000
"""A log of more records than this is loaded (folded for its table) by a heavy-work process when
the host has them (``host.net.heavy``), not on the event loop."""
OWNED_WAIT = 10.0
"""Seconds a host on a shared store waits at its start for the sessions it owns to load before
it sets ``loaded`` (it answers requests meanwhile; a feed that cannot connect loads none)."""
ENDED_CACHE = 8
"""Ended sessions (no longer live) kept in memory to answer ``resume``/``view``/``watch``; the
others are read again from their logs."""
FAULTS_KEPT = 10_000
"""Sessions over whose game faulted while this host answered them (no record says so: see
:meth:`Host.remember_fault`) that the host remembers, at most (the oldest forgotten first)."""
_SESSION_ID = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")  # \Z: "$" would let a trailing newline in


@attrs.frozen
class HostConfig:
    """How to run a host.

    Attributes:
        data_dir: where ``sessions/*.jsonl`` live.
        port: TCP port (0: any free port).
        bind: the address to listen on.
        fsync: ``always``, ``batch`` or ``never``.
        bot_delay: seconds a host bot waits before acting.
        outbox: lines a connection may have queued before it is dropped as too slow.
        grace: seconds sessions get to finish on shutdown.
        turn_timeout: seconds a human seat may take to act before the host plays the bot's
            choice for it (None or 0: no turn timer); a session's ``create`` may set its own.
        max_sessions: live sessions at most (``create`` answers ``overloaded`` past it).
        max_records: records at most in one session; the host ends it there (``aborted``).
        max_connections: open connections at most (None: the soft descriptor limit less the
            store's open-file cache and a reserve, at most 10,000); one more is told
            ``closed`` / ``too_many_connections`` and hung up on.
        max_connections_per_address: open connections (TCP and WebSocket together) one peer
            address may hold (an IPv6 address's /64 counts as one; loopback exempt unless
            ``address_limit_loopback``); one more from it is told ``closed`` /
            ``too_many_from_address`` and hung up on. None or 0: no limit.
        max_http_requests: HTTP requests (``http_port``) being read or answered at once (a
            WebSocket counts until its handshake is done); see :mod:`host.net.web`.
        max_http_requests_per_address: of those, requests from one peer address at most
            (loopback exempt unless ``address_limit_loopback``). When every slot is held, a
            request from an address holding fewer than the busiest address takes the oldest
            slot of that address (:class:`host.table.lobby.AddressSlots`).
        address_limit_loopback: hold loopback peers (127.0.0.0/8, ::1) to the per-address
            connection and HTTP limits too (off: local tools and a reverse proxy on the same
            machine, whose clients all have its address, are not limited per address).
        idle_timeout: seconds a connection that neither plays nor watches a live session may go
            without sending a complete line before it is closed (``idle``); None: never.
        line_timeout: seconds a begun line may take to end before the connection is closed
            (``line_timeout``); None: never.
        keepalive: seconds an accepted socket (TCP or WebSocket) may carry no traffic before the
            kernel sends its first TCP keepalive probe (then one every 10 s at most; 3 lost
            probes reset it); None or 0: no keepalive.
        ping_after: seconds a connection that plays or watches a live session may send no
            complete line before the host sends it a ``ping`` (a Ping frame over a WebSocket);
            None or 0: no pings.
        ping_timeout: seconds after a ping within which the connection must send something (any
            line; over a WebSocket a Pong too) before it is closed (``unresponsive``); None or
            0: no pings.
        outbox_bytes: bytes a connection may have queued (sent to it but not yet written to its
            socket) before it is dropped as too slow.
        create_burst: ``create`` requests a peer address may make at once (token bucket size).
        create_rate: ``create`` tokens a peer address regains per second.
        create_limit_loopback: apply the per-address ``create`` rate to loopback peers too (off:
            local tools such as ``bench`` and ``demo`` create freely).
        max_unstarted: sessions a connection, and (unless loopback, see
            ``create_limit_loopback``) a peer address, may have created that are live and not
            started.
        abandon_after: seconds a live session with human seats may have none of them held by
            a connection (counted, from the log, from the record after which nobody held one:
            the header, or the last ``seat_released``) before the host ends it with
            ``aborted: "abandoned"`` (None or 0: never). Spectators do not count; a session of
            bots only is never abandoned (its bots end it).
        linger: seconds a finished session stays in memory once idle (its log answers after);
            on a shared store also how long an unfinished one stays once this host neither
            drives it nor has a connection using it (a request naming it loads it again).
        game_time: CPU seconds one step into a game's code may use (a command, a host-driven
            step, the pushes of a change) before it is stopped and the game is at fault (None
            or 0: no limit; a step that blocks is stopped after about 1 s blocked; see
            :mod:`host.plugins.budget`).
        game_memory: MiB the host's resident memory may grow during one such step (None or 0:
            no limit).
        game_hang: seconds after which a step into game code that cannot be interrupted (one
            long call into C, a game that ignores its interruption) ends the host process, whose
            next start ends that session (:mod:`host.net.marker`); None or 0: never. The
            traceback goes to ``host-hang.N.txt`` in the data dir, and to the host log on the
            next start.
        max_memory: MiB of resident memory past which the host stops the game steps that grow
            it and refuses new sessions (``overloaded``); None or 0: no bound. See
            :mod:`host.plugins.budget`.
        crash_marker: keep the crash marker (``host-step.N`` in the data dir, see
            :mod:`host.net.marker`) and judge what it says on start.
        reuse_port: listen with ``SO_REUSEPORT``, so other processes (``serve --workers``)
            can listen on the same port.
        store: a ``postgresql://`` URL: the logs live in that database (``host.store.pg``;
            ``data_dir`` and ``fsync`` are then unused); None: files in ``data_dir``.
        http_port: serve the web client and protocol v1 over a WebSocket on this port too
            (None: no HTTP; 0: any free port, see ``Host.http_port``); see :mod:`host.net.web`.
        http_bind: the address the HTTP listener binds.
        allow_origins: origins (``scheme://host[:port]``) whose pages may open the WebSocket,
            besides ``public_url``'s and the host's own pages on a loopback name (see
            :func:`host.net.web.origin_allowed`).
        public_url: the URL browsers reach the web client at (``https://cards.example``): its
            origin may open the WebSocket, and a loopback listener accepts its host name as
            ``Host`` (a reverse proxy in front); None: loopback names only.
        debug_replay: the replay ops show every seat's view and the full truth of live
            sessions too, and fork them (development only; see :mod:`host.net.replayops`).
        heavy_workers: worker processes for heavy jobs (folding a whole long log for the
            replay ops' snapshots, ``verify``, loading a long unfinished log), at most this
            many at once; 0: on the event loop, a stretch at a time (see
            :mod:`host.net.heavy`).
        metrics_port: serve the Prometheus page (``/metrics``, :mod:`host.net.metrics`) on a
            listener of its own on this port (None: none; 0: any free port, see
            ``Host.metrics_port``).
        metrics_bind: the address the metrics listener binds.
        admin_token: the token the admin view (``/admin.html`` and ``/admin/api/...`` on the
            HTTP listener, and ``/metrics`` there) asks for as ``Authorization: Bearer``;
            None: only requests from loopback that name a loopback host may use it (see
            :mod:`host.net.admin`).
        worker: this process's index under ``serve --workers`` (None: a host alone); a label
            of ``gamehost_host_info``.
    """

    data_dir: Path
    port: int = 7878
    bind: str = "127.0.0.1"
    fsync: FsyncMode = "batch"
    bot_delay: float = 0.0
    outbox: int = 4096
    grace: float = 5.0
    turn_timeout: float | None = 120.0
    max_sessions: int = 10_000
    max_records: int = 500_000
    max_connections: int | None = None
    max_connections_per_address: int | None = 64
    max_http_requests: int = 64
    max_http_requests_per_address: int = 8
    address_limit_loopback: bool = False
    idle_timeout: float | None = 300.0
    line_timeout: float | None = 30.0
    keepalive: float | None = 30.0
    ping_after: float | None = 30.0
    ping_timeout: float | None = 30.0
    outbox_bytes: int = 8 * 1024 * 1024
    create_burst: int = 20
    create_rate: float = 0.5
    create_limit_loopback: bool = False
    max_unstarted: int = 10
    abandon_after: float | None = 600.0
    linger: float = 60.0
    game_time: float | None = 0.5
    game_memory: int | None = 256
    game_hang: float | None = 30.0
    max_memory: int | None = 2048
    crash_marker: bool = True
    reuse_port: bool = False
    store: str | None = None
    http_port: int | None = None
    http_bind: str = "127.0.0.1"
    allow_origins: tuple[str, ...] = ()
    public_url: str | None = None
    debug_replay: bool = False
    heavy_workers: int = 2
    metrics_port: int | None = None
    metrics_bind: str = "127.0.0.1"
    admin_token: str | None = None
    worker: int | None = None


FD_RESERVE = 64
"""Descriptors kept free for listeners, stdio, trio's own and the store beyond its cache."""

MAX_CONNECTIONS = 10_000
"""The most connections the default cap allows, however high the descriptor limit."""


class ListenError(OSError):
    """A listener could not be opened; its ``strerror`` names which one and why
    (``"cannot listen on 127.0.0.1 port 8080 (--http): Address already in use"``)."""


async def _listen(where: str, opening: Any) -> Any:
    """Await ``opening`` (a nursery's ``start`` of a listener), naming ``where`` in the
    :class:`ListenError` it raises for an ``OSError``."""
    try:
        return await opening
    except (OSError, BaseExceptionGroup) as exc:
        cause = exc
        while isinstance(cause, BaseExceptionGroup):  # trio may wrap it, one group per nursery
            found = [e for e in cause.exceptions if isinstance(e, (OSError, BaseExceptionGroup))]
            if not found:
                raise
            cause = found[0]
        err = f"cannot listen on {where}: {cause.strerror or cause}"  # type: ignore[union-attr]
        raise ListenError(cause.errno, err) from exc  # type: ignore[union-attr]


def raise_fd_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (as far as the OS lets); the new soft
    limit (descriptors). Never raises."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return 1024
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft if soft != resource.RLIM_INFINITY else 1 << 20
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        return soft
    log.info("fd_limit_raised", soft=target, was=soft)
    return target


def default_max_connections(fd_limit: int) -> int:
    """Connections that fit in ``fd_limit`` descriptors beside the store's cache and a reserve."""
    return max(16, min(MAX_CONNECTIONS, fd_limit - MAX_OPEN - FD_RESERVE))


class Host:
    """The lobby and the live sessions.

    Args:
        registry: the loaded games.
        store: the event store (its writer running).
        nursery: where session drivers run.
        config: the limits and timers (:class:`HostConfig`).
    """

    def __init__(
        self,
        registry: Registry,
        store: FileStore,
        nursery: trio.Nursery,
        config: HostConfig,
        instance: str = "",
    ) -> None:
        self.registry = registry
        self.store = store
        self.nursery = nursery
        self.config = config
        self.max_connections = (
            default_max_connections(1024)
            if config.max_connections is None
            else config.max_connections
        )
        self._refusing = 0  # connections over the cap being told so
        self.per_address = AddressSlots(
            config.max_connections_per_address, limit_loopback=config.address_limit_loopback
        )
        """Open connections per peer address (``address_key``)."""
        self.instance = instance or secrets.token_hex(4)
        """This host process's id: the first part of every connection's key (a seat's holder
        in the log), so other hosts, and this one after a restart, can tell its connections'
        seats from those of a host that is still running."""
        self._connections_made = 0
        self.clock_base = time.time() - trio.current_time()
        """The host clock is ``clock_base + trio.current_time()`` (:meth:`now`)."""
        self.budget = Budget(
            config.game_time or None,
            (config.game_memory << 20) if config.game_memory else None,
            hang=config.game_hang or None,
            max_memory=(config.max_memory << 20) if config.max_memory else None,
        )
        """The budget of every step into game code (started by :func:`run_host`)."""
        self.table_settings = TableSettings(
            bot_delay=config.bot_delay,
            turn_timeout=config.turn_timeout,
            max_records=config.max_records,
            abandon_after=config.abandon_after,
        )
        self.lobby = Lobby(
            config.max_sessions,
            config.max_unstarted,
            CreateLimiter(config.create_burst, config.create_rate, config.create_limit_loopback),
            config.create_limit_loopback,
        )
        """Who may create now (:class:`host.table.lobby.Lobby`): every session is forgotten
        there when it leaves memory, whoever created it (see ``_run_session``)."""
        self.sessions: dict[str, Session] = {}
        self.connections: set[Connection] = set()
        self._dirty: list[Connection] = []  # connections with output to write (flush_soon)
        self._flusher: Any = None  # the flusher's task while it waits for work
        self._flusher_started = False
        self._flusher_stopped = False  # no connection is left: the flusher ends
        self.shutdown = trio.Event()
        self._games: GamesResult | None = None
        self._conns_changed = trio.Event()
        self._ended: OrderedDict[str, Session] = OrderedDict()
        self._damaged: dict[str, str] = {}  # session id -> what is wrong with its log
        self._faulted: OrderedDict[str, str] = OrderedDict()  # see remember_fault
        self._unloaded: set[str] = set()  # logs listed on start, not loaded yet
        self._loading: dict[str, trio.Event] = {}  # being loaded; set once done
        self._loaded_live = 0
        self.loaded = trio.Event()
        """Set once :meth:`load_sessions` has loaded every log listed on start."""
        self.http_port: int | None = None
        """The port the web client and WebSocket are served on (``serve --http``), or None."""
        self.follower: Follower | None = None
        """Set when this host shares its store with others (``host.store.feed``): its sessions
        follow the log, and only the holder of a session's lease drives it."""
        self._creating: set[str] = set()  # ids of sessions this host is creating
        self._no_game: set[str] = set()  # logs of a game not installed here (not loaded again)
        self.sessions_loaded = 0
        """Sessions this host has read from the store and folded since it started (a start's,
        a request's, a lease's loads; creates not counted)."""
        self.sessions_unloaded = 0
        """Sessions that left this host's memory before they ended (on a shared store: no
        longer served here, see :meth:`host.net.session.Session.unserved_since`)."""
        self.heavy = HeavyWork(registry, store, config.heavy_workers, self.budget)
        """Where heavy jobs run: worker processes, bounded (:mod:`host.net.heavy`)."""
        self.reads = HeavyWork(registry, store, 1 if config.heavy_workers else 0, self.budget)
        """Where ``log`` pages of a file store's logs are read and redacted: one worker process
        of its own (so a page never waits behind a fold or a verify), when :attr:`heavy` has
        workers (:func:`host.net.heavy.page_job`)."""
        self.metrics = Metrics(self, config.worker)
        """This host's metrics (:mod:`host.net.metrics`); the store reports its fsync rounds
        and retries to them too."""
        self.metrics_port: int | None = None
        """The port the metrics page is served on (``serve --metrics``), or None."""
        with contextlib.suppress(AttributeError):  # a store that reports nothing
            store.metrics = self.metrics

    def discover(self, sid: str) -> None:
        """A session this host should drive (it owns it: ``host.store.feed.Follower``) was
        created elsewhere and is not live here: load it in the background (an ended one is not
        kept); it takes its lease once live."""
        if (
            sid in self.sessions
            or sid in self._creating
            or sid in self._loading
            or sid in self._ended
            or sid in self._damaged
            or sid in self._no_game
            or self.shutdown.is_set()
        ):
            return
        self.nursery.start_soon(self._live_session, sid)

    def flush_soon(self, conn: Connection) -> None:
        """``conn`` has output queued: the flusher writes it, with every other connection's,
        once the running task yields, so a batch of pushes costs each connection one write
        (:meth:`Connection.flush`)."""
        self._dirty.append(conn)
        if self._flusher is not None:
            task, self._flusher = self._flusher, None
            trio.lowlevel.reschedule(task)
        elif not self._flusher_started:
            self._flusher_started = True
            self.nursery.start_soon(self._flush_loop)

    async def _flush_loop(self) -> None:
        """The flusher: writes the output of every connection :meth:`flush_soon` names, then
        waits for more (without a timer or an event: :meth:`flush_soon` wakes it)."""

        def abort(_: Any) -> trio.lowlevel.Abort:
            self._flusher = None
            return trio.lowlevel.Abort.SUCCEEDED

        while True:
            if not self._dirty:
                if self._flusher_stopped:
                    return
                self._flusher = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(abort)
            dirty, self._dirty = self._dirty, []
            for conn in dirty:
                conn.flush()
            await trio.lowlevel.checkpoint()

    def stop_flushing(self) -> None:
        """Every connection has ended: the flusher ends once it has written what it holds
        (so the session drivers' nursery does not wait for it)."""
        self._flusher_stopped = True
        if self._flusher is not None:
            task, self._flusher = self._flusher, None
            trio.lowlevel.reschedule(task)

    def now(self) -> float:
        """The host clock: seconds since the epoch (follows trio's clock, so a test's
        ``autojump_clock`` moves it too)."""
        return self.clock_base + trio.current_time()

    def _session(
        self,
        sid: str,
        engine: Engine,
        records: list[Record],
        loaded: tuple[SessionState, list[SessionState]] | None = None,
        live: bool = True,
        presence: Presence | None = None,
    ) -> Session:
        """A session's driver around its table, built from its (whole) log, or from its last
        records with what the whole log says (``loaded``, ``presence``: see :class:`Table`)."""
        table = Table(
            sid,
            engine,
            records,
            self.table_settings,
            now=self.now(),
            instance=self.instance,
            driver=self.follower is None,
            shared=self.follower is not None,
            live=live,
            loaded=loaded,
            presence=presence,
        )
        if self.follower is not None:
            table.host_alive = self.follower.host_alive
        session = Session(
            table,
            self.store,
            self.registry.hook,
            linger=self.config.linger,
            clock_base=self.clock_base,
            budget=self.budget,
            metrics=self.metrics,
        )
        if not live:
            session.retire()
        return session

    async def wait_disconnected(self) -> None:
        """Wait until no connection is open."""
        while self.connections:
            self._conns_changed = trio.Event()
            await self._conns_changed.wait()

    def forget(self, conn: Connection) -> None:
        """Remove a closed connection."""
        if conn in self.connections:
            self.metrics.connections_closed[conn.reason or "client"] += 1
        self.connections.discard(conn)
        self._conns_changed.set()

    def request_shutdown(self) -> None:
        """Begin a clean shutdown (as SIGTERM does)."""
        self.shutdown.set()

    def list_sessions(self) -> int:
        """Note every session log in the store as not loaded yet (cheap: no log is read), so a
        request for one of them loads it first; returns how many. Call before listening.

        On a shared store (``follower`` set) nothing is listed: a request naming a session
        looks in the store, and the follower loads the sessions this host owns."""
        if self.follower is not None:
            return 0
        self._unloaded = set(self.store.session_ids())
        return len(self._unloaded)

    async def load_sessions(self) -> int:
        """Load every unfinished session listed by :meth:`list_sessions` (listing them first if
        nothing is listed) and start its driver, one at a time, serving requests in between;
        returns how many this call started. Progress goes to the host log about once a second;
        :attr:`loaded` is set at the end. Stops early on shutdown.

        A log that cannot be read, or whose game is not installed, is reported and left alone.
        Bot seats the header lists but the log does not seat (a ``create`` cut short) are
        seated by the session's driver before it starts.
        """
        if self.follower is not None:
            return await self._load_owned()
        if not self._unloaded and not self.loaded.is_set():
            self.list_sessions()
        total = len(self._unloaded)
        log.info("sessions_loading", total=total)
        n = 0
        shown = trio.current_time()
        for done, sid in enumerate(sorted(self._unloaded), 1):
            if self.shutdown.is_set():
                break
            n += await self._load_session(sid)
            if trio.current_time() - shown >= 1.0:
                shown = trio.current_time()
                log.info("sessions_load_progress", done=done, total=total, live=self._loaded_live)
            await trio.lowlevel.checkpoint()  # requests are answered between two loads
        self.loaded.set()
        log.info("sessions_loaded", live=self._loaded_live, total=total)
        return n

    async def _load_owned(self) -> int:
        """A shared store's start: wait (at most :data:`OWNED_WAIT` seconds) until the follower
        has listed the store's unfinished sessions and loaded those this host owns; set
        :attr:`loaded`. Returns how many sessions were loaded meanwhile."""
        assert self.follower is not None
        log.info("sessions_loading", owned=True)
        before = self.sessions_loaded
        with trio.move_on_after(OWNED_WAIT):
            await self.follower.scanned.wait()
        self.loaded.set()
        log.info("sessions_loaded", live=len(self.sessions), loaded=self.sessions_loaded - before)
        return self.sessions_loaded - before

    async def _live_session(self, sid: str) -> Session | None:
        """The live session ``sid``, loading it first if its log is listed and not loaded yet
        (or waiting while the loader loads it); None if there is no such live session. On a
        shared store any session id is looked for in the store."""
        for _ in range(4):
            session = self.sessions.get(sid)
            if session is not None and session.leaving:  # on its way out: load it again
                await session.left.wait()
                continue
            if (
                session is None
                and self.follower is not None
                and sid not in self._ended
                and sid not in self._damaged
                and sid not in self._no_game
                and _SESSION_ID.match(sid)
            ):  # not live here: look in the store
                self._unloaded.add(sid)
            if session is None and (sid in self._unloaded or sid in self._loading):
                await self._load_session(sid)
                session = self.sessions.get(sid)
                if session is not None and session.leaving:
                    continue  # loaded, and gone again at once (another host drives it)
            return session
        return self.sessions.get(sid)

    async def _load_session(self, sid: str) -> bool:
        """Load a listed session unless it is loaded or being loaded (then wait for that);
        True if this call started its driver."""
        busy = self._loading.get(sid)
        if busy is not None:
            await busy.wait()
            return False
        if sid not in self._unloaded:
            return False
        self._unloaded.discard(sid)
        done = self._loading[sid] = trio.Event()
        try:
            return await self._load_one(sid)
        finally:
            del self._loading[sid]
            done.set()

    async def _load_one(self, sid: str) -> bool:
        """Read a session's log, fold it once (dropping a half-written last cause) and start
        its driver if the session has not ended; True if started.

        A log whose last record is ``ended`` is not read whole (its session is not live): only
        its last record is, where the store reads ranges; a request for it reads it then.
        The fold runs the game's code within its budget (:meth:`_fold_log`): a game that
        faults there ends the session (:meth:`_end_faulted`) instead of starting it."""
        if self.shutdown.is_set() or await self._ends(sid):
            return False
        if self.follower is not None:  # hear of its appends before reading it
            self.follower.follow(sid)
        started = False
        try:
            started = await self._load_folded(sid)
        finally:
            if self.follower is not None and not started:
                self.follower.unfollow(sid)
        return started

    async def _load_folded(self, sid: str) -> bool:
        """:meth:`_load_one`'s reading and folding, and its start; True if started."""
        try:
            got = await self._fold_log(sid)
            if got is None:
                return False
            engine, n, header, loaded = got
            if isinstance(loaded, tuple):  # ("fault", seq, what, message)
                await self._end_faulted(sid, engine, n, header, loaded[2], loaded[3])
                return False
            if loaded.whole < n:
                log.warning(
                    "half_written_cause_dropped",
                    session=sid,
                    kept=loaded.whole,
                    dropped=n - loaded.whole,
                )
                self.store.truncate(sid, loaded.whole)
            if loaded.state.ended:
                return False
            session = self._session(
                sid,
                engine,
                loaded.tail,
                loaded=(loaded.state, loaded.states),
                presence=loaded.presence,
            )
        except UnknownSession:
            return False
        except CorruptLog as exc:
            self._damage(sid, exc)
            return False
        except BadRecord as exc:  # reads, but does not fold (an unknown card, ...): damage too
            self._damage(sid, CorruptLog(self.store.path(sid), exc.seq, exc.message))
            return False
        except Exception:
            log.exception("session_load_failed", session=sid)
            return False
        if sid in self.sessions or self.shutdown.is_set():  # made here meanwhile, or stopping
            return False
        self.sessions[sid] = session
        self.sessions_loaded += 1
        if self.follower is not None:
            log.info("session_followed", session=sid, seq=session.state.seq)
        await self.nursery.start(self._run_session, session)
        self._loaded_live += 1
        return True

    async def end_crashed(self, marker: CrashMarker) -> str | None:
        """Carry out what the crash marker says of the previous run (:mod:`host.net.marker`),
        before any session is loaded: log how it died, and end the session at fault with its
        ``ended`` record (``aborted: "game_error"``, ``fault``: ``crash`` or ``hang``) when
        :func:`~host.net.marker.judge` says so. No game code runs. Returns the fault written,
        or None.

        Raises:
            OSError: the record could not be written (the marker keeps the suspect, so the
                next start tries again).
        """
        death = marker.death
        if marker.traceback:
            log.error(
                "host_hung",
                session=death.session if death else None,
                seq=death.seq if death else None,
                traceback=marker.traceback,
            )
        if death is None or death.session is None:
            marker.remember(None)
            return None
        sid = death.session
        raw: list[dict[str, Any]] | None = None
        try:
            with contextlib.suppress(UnknownSession, CorruptLog, BadRecord, ValueError):
                raw = self.store.load(sid)  # opens it for appending
            verdict = judge(death, marker.suspect, raw)
            marker.remember(verdict.suspect)
            if verdict.fault is None:
                if verdict.suspect is not None:
                    log.warning(
                        "host_died_in_game",
                        session=sid,
                        seq=death.seq,
                        hint="noted; if the host dies in it again before it moves on, the"
                        " session is ended",
                    )
                return None
            assert raw is not None
            await self._end_at_fault(sid, raw[0], raw[-1]["seq"], verdict.fault)
        finally:
            if raw is not None:
                self.store.release(sid)
        marker.remember(None)
        return verdict.fault

    async def _end_at_fault(self, sid: str, header: dict[str, Any], last: int, fault: str) -> None:
        """Append the ``ended`` record of a session whose game is at fault (``aborted:
        "game_error"``, ``fault``) after seq ``last``, without running any of its game code (no
        fold: its state is not needed). The log must be open in the store (``load``).

        Raises:
            Conflict: the log moved past ``last`` (another host appended).
            OSError: the record could not be written.
        """
        seq = last + 1
        record = {"seq": seq, "ts": now_ts(), "type": "ended", "outcome": None}
        record.update({"aborted": "game_error", "seed": header.get("seed"), "fault": fault})
        await self.store.append(sid, seq, [record])
        game = str(header.get("game"))
        self.metrics.budget_overruns[(game, fault)] += 1
        self.metrics.ended(game, record)
        log.error("session_faulted", session=sid, seq=seq, fault=fault)

    async def _fold_log(
        self, sid: str
    ) -> tuple[Engine, int, dict[str, Any], Loaded | tuple[Any, ...]] | None:
        """Open an unfinished session's log for appends and load it for its table
        (:func:`host.table.loading.load_steps`, re-running its last cause to find a
        half-written one): a log of more than :data:`LOAD_IN_WORKER` records in a heavy-work
        process (when the host has them; the log is opened at its end without reading it
        here), a shorter one on the event loop, a stretch at a time, each a step of the game
        budget. Returns ``(engine, record count, header, loaded)`` — ``loaded`` a
        :class:`Loaded`, or ``("fault", seq, what, message)`` when the game faulted — or None
        (no game installed for it).

        Raises:
            UnknownSession, CorruptLog, BadRecord: no log, a damaged one.
            HeavyFailed: the heavy-work process died or was stopped.
        """
        store = self.store
        heavy = self.heavy
        source: Any = None
        if heavy.in_process and hasattr(store, "open_end"):
            n = await store.record_count(sid)
            if n > LOAD_IN_WORKER:
                first = await store.read_range(sid, 0, 1)
                header = first[0] if first else {}
                engine = self._engine_of(sid, header)
                if engine is None:
                    return None
                n = await store.open_end(sid)
                source = heavy.source
        if source is None:
            records = store.load(sid)  # short: read here (and opened for appends)
            n = len(records)
            header = records[0] if records else {}
            engine = self._engine_of(sid, header)
            if engine is None:
                return None
            got = await heavy.run_here(
                load_job, ("records", records), engine, sid, n - 1, WINDOW, session=sid, seq=n - 1
            )
        else:
            got = await heavy.run(
                load_job,
                source,
                heavy.game(engine),
                sid,
                n - 1,
                WINDOW,
                wait=True,
                session=sid,
                seq=n - 1,
            )
        if isinstance(got, tuple) and got[0] == "unknown":
            raise UnknownSession(f"no session {sid}")
        if isinstance(got, tuple) and got[0] == "damaged":
            raise CorruptLog(store.path(sid), got[1], got[2])
        return engine, n, header, got

    def _engine_of(self, sid: str, header: dict[str, Any]) -> Engine | None:
        engine = self.registry.engines.get(header.get("game", ""))
        if engine is None:
            log.warning("session_game_missing", session=sid, game=header.get("game"))
            self._no_game.add(sid)  # not loaded again
        return engine

    async def _end_faulted(
        self, sid: str, engine: Engine, n: int, header: dict[str, Any], what: str, message: str
    ) -> None:
        """The game faulted loading an unfinished session (its fold or the re-run of its last
        cause ran past its budget or raised): the session ends there, as if its driver had run
        into it — ``ended`` with ``aborted: "game_error"`` and the fault is appended, so a
        restart finds it over and never runs into the same fault again."""
        log.error("game_fault", session=sid, step="load", fault=what, error=message)
        state = SessionState(header, None, (), n - 1)
        stop = engine.abort(state, "game_error", what)
        ts = format_ts(self.now())
        await self.store.append(sid, n, [{"ts": ts, **r.to_json()} for r in stop])
        log.warning("session_aborted", session=sid, reason="game_error", seq=n)

    async def _ends(self, sid: str) -> bool:
        """Whether the last record of a log is ``ended``, read alone (False when the store
        cannot read one record, or the log does not read: loading it tells what is wrong)."""
        store = self.store
        if not (hasattr(store, "record_count") and hasattr(store, "read_range")):
            return False
        try:
            n = await store.record_count(sid)
            last = await store.read_range(sid, n - 1, n) if n > 1 else []
        except Exception:  # noqa: BLE001 - the full load reports it
            return False
        return bool(last) and last[-1].get("type") == "ended"

    async def dispatch(self, conn: Connection, req: Request) -> Result | None:
        """Answer a request; returns the typed result for lobby ops, None when a session (or
        ``create``) answers it on ``conn``. Session ops become :mod:`host.table.commands` for the
        session's driver.

        Raises:
            ProtocolError: the typed error to answer.
        """
        p = req.params
        if req.op == "hello":
            if p.protocol != PROTOCOL_VERSION:
                raise ProtocolError(
                    ErrorCode.UNSUPPORTED_PROTOCOL,
                    f"this host speaks protocol {PROTOCOL_VERSION}",
                    supported=[PROTOCOL_VERSION],
                )
            return HelloResult(
                PROTOCOL_VERSION,
                "gamehost",
                __version__,
                list(REQUESTS),
                Capabilities(MAX_LINE, True, True, True, sorted(self.registry.games)),
            )
        if req.op == "ping":
            return Pong()
        if req.op == "games":
            if self._games is None:
                self._games = GamesResult.from_wire({"games": self.registry.describe()})
            return self._games
        if req.op == "sessions":
            if not 1 <= p.limit <= MAX_SESSIONS_PAGE:
                raise ProtocolError(
                    ErrorCode.BAD_REQUEST, f"limit must be 1 to {MAX_SESSIONS_PAGE}, not {p.limit}"
                )
            if self.follower is not None and hasattr(self.store, "session_page"):
                return await self._shared_sessions_page(p.game, p.after, p.limit)
            return self._sessions_page(p.game, p.after, p.limit)
        if req.op == "create":
            self._check_create(conn)
            made = await self.create(
                conn, req.id, p.game, p.options, p.seats, p.bots, p.turn_timeout
            )
            conn.created = {*conn.created, made.id}  # a new set: most connections share none
            self.lobby.created(conn.address, made.id)
            return None
        if req.op in replayops.OPS:  # log, replay, verify, fork: read the log, not the driver
            return await replayops.dispatch(self, conn, req)
        session = await self._live_session(p.session)
        if session is None:
            ended = await self._ended_session(p.session)
            if ended is None:
                raise ProtocolError(ErrorCode.UNKNOWN_SESSION, f"no session {p.session!r}")
            if req.op == "resume":
                await ended.execute(conn, req.id, commands.Resume(p.token, p.after, text=p.text))
            elif req.op == "watch":
                await ended.execute(conn, req.id, commands.Watch(text=p.text))
            elif req.op == "view":
                await ended.execute(conn, req.id, commands.View())
            else:
                raise ProtocolError(ErrorCode.SESSION_ENDED, "the session is over")
            if ended.table.fault_unrecorded and p.session not in self._faulted:
                self.remember_fault(p.session, "it faulted while its end was answered")
            return None
        command = _command(req)
        if isinstance(command, commands.Join | commands.Watch | commands.Resume):
            conn.joined(session)
        conn.submit(session, req.id, command)
        return None

    async def create(
        self,
        conn: Connection,
        rid: Any,
        game_id: str,
        options: dict[str, Any] | None,
        seats: int | None,
        bots: int,
        turn_timeout: float | None = HOST_DEFAULT,
    ) -> Session:
        """Validate and create a session, answer ``create`` and start its driver.

        The seats ``seats - bots`` .. ``seats - 1`` are the bots'; humans join the lower seats.
        The header, the bots' ``seat_taken`` records (and the opening events if every seat is a
        bot) are written in one append, so a crash never leaves a half-made session.
        ``turn_timeout`` (seconds; None or 0: no timer; left out: the host's) goes into the
        header, which is what a reload reads.

        Raises:
            ProtocolError: ``overloaded``, ``unknown_game``, ``bad_request`` (seats/bots/turn
                timeout), ``bad_option``, ``internal`` (the game failed to start; nothing is
                written) or ``unavailable`` (the log cannot be written).
        """
        self.check_room()
        engine = self.registry.engines.get(game_id)
        if engine is None:
            raise ProtocolError(
                ErrorCode.UNKNOWN_GAME,
                f"no game {game_id!r}; games: {', '.join(sorted(self.registry.engines))}",
            )
        if turn_timeout is HOST_DEFAULT:
            turn_timeout = self.config.turn_timeout
        if self.follower is not None:  # an id this host owns: it drives what it made
            sid = self.follower.new_id(lambda: secrets.token_hex(8))
        else:
            sid = secrets.token_hex(8)
        try:
            with self.budget.step("the start of a session"):
                made = plan_create(
                    engine,
                    sid,
                    secrets.token_bytes(32),
                    options,
                    seats,
                    bots,
                    turn_timeout,
                    self.now(),
                )
        except BudgetExceeded as exc:
            log.error("game_budget_exceeded", fault=exc.what, error=exc.message, game=game_id)
            self.metrics.budget_overruns[(game_id, exc.what)] += 1
            raise ProtocolError(
                ErrorCode.INTERNAL, "internal error: the game failed to start"
            ) from None
        header, records, states = made.records[0], made.records, made.states
        seated, state, bot_seats = records[1:], states[-1], made.bots
        self._creating.add(sid)
        if self.follower is not None:
            self.follower.follow(sid)
        made_it = False
        try:
            await self.store.create(sid, [{"ts": r.ts, **r.to_json()} for r in records])
            made_it = True
        except OSError as exc:
            log.error("create_failed", error=str(exc))
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, "the host cannot write a new log now"
            ) from None
        finally:
            self._creating.discard(sid)
            if self.follower is not None and not made_it:
                self.follower.unfollow(sid)
        session = self._session(sid, engine, records, loaded=(state, states))
        self.sessions[sid] = session
        st = session.state
        conn.answer(
            rid,
            Created(
                sid,
                game_id,
                session.seat_list(),
                bot_seats,
                st.free_seats,
                st.seq,
                st.header["seed_commitment"],
            ),
        )
        collector.made(len(records) + collector.LONG_LIVED)
        structlog.contextvars.bind_contextvars(session=sid)
        log.info("session_created", game=game_id, seats=len(state.seats), bots=bots)
        structlog.contextvars.unbind_contextvars("session")
        self.metrics.sessions_created[game_id] += 1
        if notify_isolated(
            self.registry.hook.gamehost_session_created,
            session=sid,
            game=game_id,
            header=header.to_json(),
        ):
            self.metrics.plugin_faults[(game_id, "observer")] += 1
        await self.nursery.start(self._run_session, session)
        session._observe(seated)  # the bots' records: durable, answered
        return session

    def _running(self) -> int:
        """Live sessions not ended yet (an ended one lingers, but holds no table)."""
        return sum(1 for s in self.sessions.values() if not s.state.ended)

    def check_room(self) -> None:
        """Refuse a new session (``create``, ``fork``) on a host that holds ``max_sessions``,
        or whose resident memory is past ``--max-memory`` (:attr:`Budget.over`).

        Raises:
            ProtocolError: ``overloaded``.
        """
        self.lobby.check_room(len(self.sessions), self._running)
        if self.budget.over:
            raise ProtocolError(
                ErrorCode.OVERLOADED, "this host's memory is past its bound; no new sessions now"
            )

    async def _run_session(
        self, session: Session, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            if self.follower is not None:  # it starts not driving: take its lease meanwhile
                self.nursery.start_soon(self.follower.adopt, session)
            await session.run(task_status=task_status)
        finally:
            if self.sessions.get(session.id) is session:
                del self.sessions[session.id]
                self.lobby.forget(session.id)
            if self.follower is not None:
                self.follower.unfollow(session.id)
            self.store.release(session.id)
            if session.state.ended:  # still answers resume/view/watch for a while
                session.retire()
                self._remember_ended(session)
                if session.table.fault_unrecorded and session.id not in self._faulted:
                    self.remember_fault(session.id, "it faulted while its end was answered")
            else:
                self.sessions_unloaded += 1
                if session.leaving:
                    log.info("session_unfollowed", session=session.id, seq=session.state.seq)
            session.left.set()

    def _remember_ended(self, session: Session) -> None:
        self._ended[session.id] = session
        self._ended.move_to_end(session.id)
        while len(self._ended) > ENDED_CACHE:
            self._ended.popitem(last=False)

    def remember_fault(self, sid: str, message: str) -> None:
        """The game of ``sid``, a session that is over (its log ends, or it is not live), faulted
        in code the host ran to answer a request: no record can say so (nothing is appended
        after ``ended``), so the host remembers it for this run (:data:`FAULTS_KEPT` sessions
        at most) and runs no more of that game's code for it: the next request does not burn
        another budget. A session whose log ends ``aborted: "game_error"`` needs no such note."""
        self._faulted[sid] = message
        self._faulted.move_to_end(sid)
        while len(self._faulted) > FAULTS_KEPT:
            self._faulted.popitem(last=False)
        for session in (self._ended.get(sid), self.sessions.get(sid)):
            if session is not None and session.state.ended:
                session.table.overran("error")

    def fault_of(self, sid: str) -> str | None:
        """What :meth:`remember_fault` noted for ``sid`` (None: nothing)."""
        return self._faulted.get(sid)

    def _damage(self, sid: str, exc: CorruptLog) -> ProtocolError:
        """Note a session whose log is damaged: one error line in the host log (the first time
        this host run meets it), and the ``session_damaged`` error every request for it gets."""
        if sid not in self._damaged:
            log.error(
                "session_log_corrupt",
                session=sid,
                path=str(exc.path),
                seq=exc.seq,
                error=exc.message,
            )
        what = f"the log of session {sid!r} is damaged at seq {exc.seq}: {exc.message}"
        self._damaged[sid] = what
        return ProtocolError(ErrorCode.SESSION_DAMAGED, self._damaged[sid])

    async def _ended_session(self, sid: str) -> Session | None:
        """An ended session that is not live, read from its log (a few stay cached), or None
        if there is no such log or the session in it has not ended.

        Raises:
            ProtocolError: ``session_damaged`` if the log is damaged or not a regular file
                (logged once per host run); ``unavailable`` if it cannot be read now.
        """
        if sid in self._damaged:
            raise ProtocolError(ErrorCode.SESSION_DAMAGED, self._damaged[sid])
        cached = self._ended.get(sid)
        if cached is not None:
            self._ended.move_to_end(sid)
            return cached
        if not _SESSION_ID.match(sid):
            return None
        path = self.store.path(sid)
        if isinstance(self.store, FileStore):  # the file itself (a tool may have put it there)
            try:
                if not stat.S_ISREG(os.lstat(path).st_mode):
                    raise self._damage(sid, CorruptLog(path, 0, "not a regular file"))
            except FileNotFoundError:
                return None
        try:
            meta = await replayops.log_meta(self, sid)
        except ProtocolError as exc:
            if exc.code == ErrorCode.UNKNOWN_SESSION:
                return None
            raise
        if not meta.ended or meta.live or sid in self.sessions:
            return None
        try:
            state, tail = await self._ended_state(sid, meta)
        except UnknownSession:
            return None
        except CorruptLog as exc:
            raise self._damage(sid, exc) from None
        except BadRecord as exc:
            raise self._damage(sid, CorruptLog(path, exc.seq, exc.message)) from None
        except (Busy, HeavyFailed) as exc:
            raise ProtocolError(ErrorCode.UNAVAILABLE, str(exc)) from None
        except ProtocolError:
            raise
        except Exception:
            log.exception("session_log_unreadable", session=sid)
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, f"the log of session {sid!r} cannot be read"
            ) from None
        if sid in self.sessions:
            return None
        session = self._session(
            sid,
            meta.engine,
            tail,
            loaded=(state, [state]),
            presence=Presence.of(len(state.seats)),
            live=False,
        )
        if sid in self._faulted:  # its game faulted answering it: not run again
            session.table.overran("error")
        self._remember_ended(session)
        return session

    async def _ended_state(self, sid: str, meta: Any) -> tuple[SessionState, list[Record]]:
        """The end state and the last records of an ended log (its ``meta``: see
        :func:`host.net.replayops.log_meta`), the game's code run within its budget: a long
        log's by the replay ops' snapshots (folded once by a heavy-work process, kept for later
        ``replay``s), a short one's on the event loop a stretch at a time. A session whose game
        faulted is skimmed: no game code runs, its state holds no game state.

        Raises:
            ProtocolError: ``game_faulted`` (the game faulted: remembered), ``unavailable``,
                ``session_damaged``. UnknownSession, CorruptLog, BadRecord, Busy, HeavyFailed.
        """
        n = meta.last + 1
        heavy = self.heavy
        long = n > LOAD_IN_WORKER and heavy.in_process
        if long and meta.faulted is None:
            folded = await replayops.folded(self, sid, meta)
            raw = await self.store.read_range(sid, max(n - TAIL, 0), n)
            return folded.state_at_end(), [Record.from_json(r) for r in raw]
        skim = meta.faulted is not None
        if long:
            got = await heavy.run(
                load_job, heavy.source, heavy.game(meta.engine), sid, n - 1, WINDOW, False, skim
            )
        else:
            raw = await self.store.read(sid)
            got = await heavy.run_here(
                load_job, ("records", raw), meta.engine, sid, len(raw) - 1, WINDOW, False, skim
            )
        if isinstance(got, tuple) and got[0] == "unknown":
            raise UnknownSession(f"no session {sid}")
        if isinstance(got, tuple) and got[0] == "damaged":
            raise CorruptLog(self.store.path(sid), got[1], got[2])
        if isinstance(got, tuple):  # ("fault", seq, what, message): over, so remembered
            log.error("game_fault", session=sid, step="load", fault=got[2], error=got[3])
            self.remember_fault(sid, got[3])
            raise ProtocolError(ErrorCode.GAME_FAULTED, GAME_FAULTED_NOW)
        return got.state, got.tail

    def _sessions_page(self, game: str | None, after: str | None, limit: int) -> SessionsPage:
        """One page of ``sessions``: live sessions by id, those after ``after``, at most
        ``limit``; ``next`` is the cursor of the following page (None: this is the last)."""

        def summaries() -> Iterator[SessionSummary]:
            for sid in sorted(self.sessions):
                if after is not None and sid <= after:
                    continue
                s = self.sessions[sid]
                if game is None or s.game.info.id == game:
                    yield self._summary(s)

        return sessions_page(summaries(), limit)

    async def _shared_sessions_page(
        self, game: str | None, after: str | None, limit: int
    ) -> SessionsPage:
        """:meth:`_sessions_page` across every host sharing the store: the unfinished sessions
        of the store (read with its ``session_page``; one not live here is loaded, and then
        followed), and the ended ones still live here, by id. At most
        :data:`LOBBY_SCANS` store pages are read per request: past them the reply holds fewer
        than ``limit`` sessions and ``next`` goes on from where the scan stopped."""
        page = PageBuilder(limit)
        cursor = after
        for _ in range(LOBBY_SCANS):
            want = limit + 1 - len(page.entries)
            rows = await self.store.session_page(cursor, want, game)  # type: ignore[attr-defined]
            for row in rows:
                sid = row["session"]
                session = self.sessions.get(sid)
                if session is None and not row["ended"]:
                    session = await self._live_session(sid)
                if session is None:
                    cursor = sid
                    continue
                if not page.add(self._summary(session)):
                    return page.full_page()
                cursor = sid
            if len(rows) < want:
                return page.page(None)
        return page.page(cursor)

    def _check_create(self, conn: Connection) -> None:
        """Refuse a ``create`` past the per-connection or per-address limit (the rules:
        :meth:`host.table.lobby.Lobby.check_create`).

        Raises:
            ProtocolError: ``overloaded`` (with ``retry_after`` seconds for the address rate).
        """
        live = self.sessions

        def unstarted(sid: str) -> bool:
            s = live.get(sid)
            return s is not None and not s.state.started and not s.state.ended

        conn.created = self.lobby.check_create(
            conn.created, conn.address, trio.current_time(), unstarted
        )

    def _summary(self, s: Session) -> SessionSummary:
        st = s.state
        return SessionSummary(
            s.id, s.game.info.id, s.seat_list(), st.free_seats, st.started, st.ended, st.seq
        )

    async def _refuse(
        self, stream: trio.SocketStream, peer: str, reason: str = "too_many_connections"
    ) -> None:
        """Tell a connection over the cap (``reason``: ``too_many_connections``, or
        ``too_many_from_address`` for its address's cap) why it is closed, then close it.

        What the client sent is read and dropped for up to a second: closing a socket with
        unread input would reset it, and the client could lose the ``closed`` push. At most
        ``FD_RESERVE // 2`` refusals linger at once; past that a connection is closed at once.
        """
        log.warning(reason, peer=peer, open=len(self.connections))
        self.metrics.connections_refused[reason] += 1
        try:
            if self._refusing < FD_RESERVE // 2:
                self._refusing += 1
                try:
                    with trio.move_on_after(1):
                        await stream.send_all(ClosedPush(reason).line())
                        await stream.send_eof()
                        while await stream.receive_some(65536):
                            pass
                finally:
                    self._refusing -= 1
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def handle(self, stream: trio.SocketStream) -> None:
        """The per-connection handler given to ``serve_tcp``; never raises."""
        try:
            addr = stream.socket.getpeername()
            peer = f"{addr[0]}:{addr[1]}"
        except OSError:
            peer = "?"
        set_keepalive(stream.socket, self.config.keepalive)
        self._connections_made += 1
        conn = Connection(
            self,
            stream,
            peer,
            self.config.outbox,
            self.config.outbox_bytes,
            key=f"{self.instance}.{self._connections_made}",
        )
        if self.shutdown.is_set():
            await stream.aclose()
            return
        key = address_key(conn.address)
        if len(self.connections) >= self.max_connections:
            # at the cap: an idle connection (no seat, watching nothing, nothing asked) of the
            # address holding the most makes room for one from an address holding fewer
            victim = self.per_address.evictable(key, lambda c: c.evictable())  # type: ignore[attr-defined]
            if victim is None:
                await self._refuse(stream, peer)
                return
            log.info("connection_evicted", peer=victim.peer, to_admit=peer)  # type: ignore[attr-defined]
            victim.close_gracefully("too_many_connections")  # type: ignore[attr-defined]
        if not self.per_address.acquire(key, conn)[0]:
            await self._refuse(stream, peer, "too_many_from_address")
            return
        self.connections.add(conn)
        self.metrics.connections_opened[connection_kind(conn)] += 1
        collector.made(collector.LONG_LIVED)
        try:
            await conn.run()
        except Exception:
            log.exception("connection_failed", peer=peer)
        finally:
            self.per_address.release(key, conn)
            collector.made(collector.LONG_LIVED)  # a close makes objects too (its records, logs)


def _command(req: Request) -> commands.Command:
    """The session command a session request stands for (``join``'s name cleaned: printable
    characters only, at most 64, ``player`` if none is left)."""
    p = req.params
    if req.op == "join":
        name = "".join(ch for ch in (p.name or "") if ch.isprintable())[:64] or "player"
        return commands.Join(name, p.seat, p.view, p.text)
    if req.op == "watch":
        return commands.Watch(p.view, p.text)
    if req.op == "resume":
        return commands.Resume(p.token, p.after, p.view, p.text)
    if req.op == "view":
        return commands.View()
    if req.op == "act":
        return commands.Act(p.action, p.seq)
    if req.op == "undo":
        return commands.Undo()
    if req.op == "undo_answer":
        return commands.UndoAnswer(p.accept)
    if req.op == "leave":
        return commands.Leave()
    raise AssertionError(f"not a session op: {req.op}")


async def _accept(
    host: Host,
    config: HostConfig,
    conns: trio.Nursery,
    scope: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    with scope:
        if config.reuse_port:  # one of several worker processes on one port
            listeners = await reuse_port_listeners(config.bind, config.port)
            await trio.serve_listeners(
                host.handle, listeners, handler_nursery=conns, task_status=task_status
            )
            return
        await trio.serve_tcp(
            host.handle,
            config.port,
            host=config.bind,
            handler_nursery=conns,
            task_status=task_status,
        )


async def _signals(
    host: Host, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """SIGTERM and SIGINT (not in a worker of ``serve --workers``: its supervisor turns
    Ctrl-C into SIGTERM) begin a clean shutdown. The signals stay caught until the host has
    stopped: one more is logged, not fatal."""
    wanted = [signal.SIGTERM]
    if host.config.worker is None:
        wanted.append(signal.SIGINT)
    with trio.open_signal_receiver(*wanted) as sigs:
        task_status.started()  # from here on a signal is a clean shutdown, even mid-start
        async for sig in sigs:
            if host.shutdown.is_set():
                log.info("signal_while_stopping", signal=signal.Signals(sig).name)
                continue
            log.info("signal", signal=signal.Signals(sig).name)
            host.request_shutdown()


def _open_marker(config: HostConfig) -> CrashMarker | None:
    """This process's crash marker in the data dir (None if off, or if it cannot be made:
    logged, and the host runs without it)."""
    if not config.crash_marker:
        return None
    try:
        return CrashMarker.open(config.data_dir)
    except OSError as exc:
        log.warning("crash_marker_off", error=str(exc))
        return None


async def _judge_marker(host: Host, marker: CrashMarker) -> None:
    """Carry out what the marker says of the previous run (:meth:`Host.end_crashed`); a
    failure is logged, and the host starts all the same."""
    try:
        await host.end_crashed(marker)
    except Exception:
        log.exception("crashed_session_not_ended", suspect=marker.suspect)


CLOCK_SKEW_WARN = 1.0
"""Seconds by which a host's clock may differ from its database's before it warns at start."""


async def _keep_time_by(host: Host, store: Any) -> None:
    """A host that shares a PostgreSQL database keeps time by the database server's clock: the
    offset is measured once at start and added to the host clock (:meth:`Host.now`), so hosts
    whose own clocks differ still write records' ``ts`` and run timers alike (each counts from
    records another wrote). An offset past :data:`CLOCK_SKEW_WARN` is logged as a warning
    (``clock_skew``): the machine's clock should be synchronised (NTP). A store without a
    clock of its own (files) keeps the host's. Never raises: the offset stays 0 if the
    database cannot be asked."""
    measure = getattr(store, "clock_offset", None)
    if measure is None:
        return
    try:
        offset = await trio.to_thread.run_sync(measure)
    except Exception as exc:  # noqa: BLE001 - the host runs on its own clock then
        log.warning("clock_offset_unknown", error=str(exc))
        return
    host.clock_base += offset
    event = "clock_skew" if abs(offset) > CLOCK_SKEW_WARN else "clock_offset"
    (log.warning if event == "clock_skew" else log.info)(
        event, database_ahead_seconds=round(offset, 3)
    )


async def _open_store(config: HostConfig) -> Any:
    """The host's store: files in the data dir (held exclusively), or the database of
    ``config.store``, checked at once (reachable, schema at this code's version).

    Raises:
        OSError: the data dir is not usable; ``StoreUnavailable`` for the database.
        ValueError: a URL libpq cannot parse.
    """
    if config.store is None:
        return FileStore(config.data_dir, config.fsync, exclusive=True)
    store = open_store(config.store)
    await trio.to_thread.run_sync(store.check)
    return store


async def run_host(
    config: HostConfig,
    registry: Registry,
    *,
    handle_signals: bool = True,
    store: Any = None,
    feed: Feed | None = None,
    task_status: trio.TaskStatus[tuple[Host, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a host until shutdown. ``task_status.started((host, port))`` once it listens, which
    is before the sessions in the store are loaded: they load in the background (a request for
    one not loaded yet loads it first; ``host.loaded`` is set once all are).

    ``store``: the store to use (a ``host.store.memory.Store``, not started yet; default: a file
    store on ``config.data_dir``). ``feed``: given when other hosts share ``store`` (see
    ``host.store.feed``; not started yet): sessions then follow the log and only the holder of a
    session's lease runs its bots and timers."""
    fd_limit = raise_fd_limit()
    if config.max_connections is None:
        config = attrs.evolve(config, max_connections=default_max_connections(fd_limit))
    log.info(
        "limits",
        fd_limit=fd_limit,
        max_connections=config.max_connections,
        per_address=config.max_connections_per_address or None,
    )
    if store is None:
        store = await _open_store(config)
        if feed is None and config.store is not None:  # other hosts may share the database
            feed = PostgresFeed(config.store)
    instance = secrets.token_hex(4)
    host: Host | None = None
    marker = _open_marker(config)
    async with trio.open_nursery() as outer:
        await outer.start(store.run)
        if feed is not None:
            feed.instance = instance  # type: ignore[attr-defined]
            await outer.start(feed.run)
        try:
            async with trio.open_nursery() as sessions:
                host = Host(registry, store, sessions, config, instance=instance)
                await _keep_time_by(host, store)
                host.budget.marker = marker
                host.budget.start()
                if handle_signals:  # before listening: a SIGTERM right after it stops cleanly
                    await outer.start(_signals, host)
                if marker is not None:  # before any session's code runs (or a follower loads)
                    await _judge_marker(host, marker)
                if feed is not None:
                    host.follower = Follower(
                        feed,
                        host.sessions,
                        host.discover,
                        unfinished=getattr(store, "unfinished_sessions", None),
                        load=host._live_session,
                    )
                    await outer.start(host.follower.run)
                host.list_sessions()
                async with trio.open_nursery() as conns:
                    accepting = trio.CancelScope()
                    listeners = await _listen(
                        f"{config.bind} port {config.port}",
                        conns.start(_accept, host, config, conns, accepting),
                    )
                    port = listeners[0].socket.getsockname()[1]
                    if config.http_port is not None:
                        from host.net.web import serve_http

                        web = await _listen(
                            f"{config.http_bind} port {config.http_port} (--http)",
                            conns.start(
                                serve_http,
                                host,
                                config.http_port,
                                config.http_bind,
                                config.allow_origins,
                                conns,
                                config.public_url,
                            ),
                        )
                        host.http_port = web[0].socket.getsockname()[1]
                    if config.metrics_port is not None:
                        page = await _listen(
                            f"{config.metrics_bind} port {config.metrics_port} (--metrics)",
                            conns.start(
                                serve_metrics,
                                host.metrics,
                                config.metrics_port,
                                config.metrics_bind,
                            ),
                        )
                        host.metrics_port = page[0].socket.getsockname()[1]
                    # logged once every listener is open: a port in use is one error, not a
                    # "listening" line followed by it
                    log.info(
                        "listening",
                        bind=config.bind,
                        port=port,
                        data_dir=str(config.data_dir) if config.store is None else None,
                        store=repr(store) if config.store else None,
                        fsync=config.fsync,
                    )
                    if config.http_port is not None:
                        log.info("listening_http", bind=config.http_bind, port=host.http_port)
                    if config.metrics_port is not None:
                        log.info(
                            "listening_metrics", bind=config.metrics_bind, port=host.metrics_port
                        )
                    sessions.start_soon(host.load_sessions)  # in the background
                    task_status.started((host, port))
                    await host.shutdown.wait()
                    log.info("shutting_down", connections=len(host.connections))
                    host.heavy.close()  # heavy jobs never hold up a shutdown
                    host.reads.close()
                    accepting.cancel()
                    for session in host.sessions.values():  # the host goes, not its players:
                        session.stopping = True  # their seats are released when it is back
                    for conn in list(host.connections):
                        conn.close_gracefully("shutdown")
                    with trio.move_on_after(1):
                        await host.wait_disconnected()
                    conns.cancel_scope.cancel()
                host.stop_flushing()
                for session in host.sessions.values():
                    session.close()
                sessions.cancel_scope.deadline = trio.current_time() + config.grace
        finally:
            if host is not None:
                host.budget.stop()
                host.heavy.close()
                host.reads.close()
            if marker is not None:
                marker.close()
            with trio.CancelScope(shield=True):
                if feed is not None:
                    await feed.aclose()
                await store.aclose()
            outer.cancel_scope.cancel()
    log.info("stopped")
