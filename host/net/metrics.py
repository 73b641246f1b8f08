"""The host's metrics in the Prometheus text format (``serve --metrics PORT``).

Every :class:`host.net.server.Host` keeps one :class:`Metrics`: a registry of its own
(``prometheus_client.CollectorRegistry``, never the library's global one, so several hosts in
one process keep theirs apart) holding

- two histograms of the library, observed where the time is spent: ``gamehost_append_seconds``
  (a session's append, from the driver's call until the records are durable, whatever the store)
  and ``gamehost_store_fsync_seconds`` (the file store: one ``fdatasync`` round of a group
  commit, all the files of a batch; PostgreSQL: one batch's transaction, writes and ``COMMIT``,
  which waits for the server's WAL flush). The file store's rounds run in its writer thread: the
  library's histograms are thread-safe;
- plain integer counters bumped by the code that sees the event (the trio loop is one thread,
  so ``+= 1`` on a dict is all a counter costs on the hot path), turned into metric families
  only when the page is scraped (:class:`_Collector`);
- gauges read from the host's own state at scrape time (live sessions by game, open connections
  by kind, queued outbound bytes, leases held): nothing to keep up to date;
- the library's process collector (CPU seconds, resident memory, open descriptors).

The page is served by :func:`serve_metrics` on a listener of its own (``--metrics PORT``, bound
to ``--metrics-bind``, 127.0.0.1 by default), and on the ``--http`` listener at ``/metrics`` to
whoever may use the admin view (:mod:`host.net.web`). With ``serve --workers N`` each worker is
a process with its own registry and listens on ``PORT + i`` (worker ``i``); see
docs/operations.md for why it is not the library's multiprocess mode.

:meth:`Metrics.summary` is what the admin view shows at a glance (a JSON object).
"""

from __future__ import annotations

import bisect
import time
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import h11
import structlog
import trio
from prometheus_client import CollectorRegistry, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from host import __version__

if TYPE_CHECKING:
    from host.net.server import Host

__all__ = [
    "CONTENT_TYPE",
    "LATENCY_BUCKETS",
    "Metrics",
    "serve_metrics",
]

log = structlog.get_logger("gamehost.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text format's content type."""

LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""Upper bounds (seconds) of the latency histograms' buckets."""


def connection_kind(conn: Any) -> str:
    """``"websocket"`` for a connection whose stream is a WebSocket, else ``"tcp"``."""
    return "websocket" if hasattr(conn.stream, "on_pong") else "tcp"


class Metrics:
    """One host's metrics (see the module docstring).

    Args:
        host: the host whose state the gauges read (None: counters and histograms only).
        worker: the worker's index under ``serve --workers`` (None: a host alone), a label of
            ``gamehost_host_info``.
        process: also export the process's CPU, memory and descriptors.
    """

    def __init__(
        self, host: Host | None = None, worker: int | None = None, *, process: bool = True
    ) -> None:
        self.host = host
        self.worker = worker
        self.started = time.time()
        self.registry = CollectorRegistry()
        self.append_seconds = Histogram(
            "gamehost_append_seconds",
            "Seconds a session's append took, from the driver's call until its records were"
            " durable",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.fsync_seconds = Histogram(
            "gamehost_store_fsync_seconds",
            "Seconds one durability round of the store took (file: the fdatasync of a batch's"
            " files; PostgreSQL: a batch's transaction and COMMIT)",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        # plain counters (one thread bumps them: the trio loop; the store's writer thread only
        # touches store_retries, with += on an int, atomic enough under the GIL for a count)
        self.actions: Counter[str] = Counter()  # game -> actions (bots' and timed out ones too)
        self.sessions_created: Counter[str] = Counter()  # game
        self.sessions_ended: Counter[tuple[str, str]] = Counter()  # (game, how)
        self.connections_opened: Counter[str] = Counter()  # kind
        self.connections_closed: Counter[str] = Counter()  # reason
        self.connections_refused: Counter[str] = Counter()  # reason
        self.plugin_faults: Counter[tuple[str, str]] = Counter()  # (game, where)
        self.budget_overruns: Counter[tuple[str, str]] = Counter()  # (game, budget)
        self.store_errors: Counter[str] = Counter()  # op: append, reload, follow, backfill
        self.store_retries: Counter[str] = Counter()  # where: session, store
        self.append_conflicts = 0
        self.leases_taken = 0
        self.lease_takeovers = 0
        self.leases_lost = 0
        self.admin_ends = 0
        self.registry.register(_Collector(self))
        if process:
            ProcessCollector(registry=self.registry)

    # -- what the host's code tells ---------------------------------------------------------
    def observe_fsync(self, seconds: float) -> None:
        """A store's durability round took ``seconds`` (any thread)."""
        self.fsync_seconds.observe(seconds)

    def store_retry(self, where: str = "store") -> None:
        """A store wrote a batch again after a lost connection (``store``), or a session read
        its log again after a failed append (``session``)."""
        self.store_retries[where] += 1

    def ended(self, game: str, data: dict[str, Any]) -> None:
        """A session ended here (its ``ended`` record's fields ``data``)."""
        how = data.get("aborted") or "played"
        self.sessions_ended[(game, str(how))] += 1
        if how == "game_error":
            self.plugin_faults[(game, "session")] += 1
        elif how == "admin":
            self.admin_ends += 1

    # -- reading ----------------------------------------------------------------------------
    def page(self) -> bytes:
        """The whole page in the Prometheus text format."""
        return generate_latest(self.registry)

    def summary(self) -> dict[str, Any]:
        """What the admin view shows at a glance: counts now, counters since the start, and the
        append latency's p50/p99 (seconds, estimated from the histogram's buckets; None
        before the first append)."""
        state = _host_state(self.host)
        return {
            "uptime": round(time.time() - self.started, 1),
            "worker": self.worker,
            "sessions_live": state["sessions"],
            "connections": state["connections"],
            "outbox_bytes": state["outbox_bytes"],
            "actions": sum(self.actions.values()),
            "sessions_created": sum(self.sessions_created.values()),
            "sessions_ended": sum(self.sessions_ended.values()),
            "plugin_faults": sum(self.plugin_faults.values()),
            "budget_overruns": sum(self.budget_overruns.values()),
            "store_errors": sum(self.store_errors.values()),
            "store_retries": sum(self.store_retries.values()),
            "lease_takeovers": self.lease_takeovers,
            "append_p50": _quantile(self.append_seconds, 0.5),
            "append_p99": _quantile(self.append_seconds, 0.99),
            "fsync_p99": _quantile(self.fsync_seconds, 0.99),
        }


def _quantile(hist: Histogram, q: float) -> float | None:
    """An estimate of quantile ``q`` of a histogram: the upper bound of the bucket that holds
    it (the largest finite bound if it is in the last one); None while it is empty."""
    buckets: list[tuple[float, float]] = []
    for metric in hist.collect():
        for s in metric.samples:
            if s.name.endswith("_bucket"):
                buckets.append((float(s.labels["le"]), s.value))
    if not buckets or buckets[-1][1] == 0:
        return None
    bounds = [b for b, _ in buckets]
    counts = [c for _, c in buckets]
    rank = q * counts[-1]
    i = bisect.bisect_left(counts, rank)
    bound = bounds[min(i, len(bounds) - 1)]
    return bound if bound != float("inf") else bounds[-2]


def _host_state(host: Host | None) -> dict[str, Any]:
    """Counts read from the host now: live sessions by game (not ended), connections by kind,
    queued outbound bytes, sessions driven here."""
    sessions: Counter[str] = Counter()
    connections: Counter[str] = Counter({"tcp": 0, "websocket": 0})
    outbox = 0
    driving = 0
    if host is not None:
        for s in list(host.sessions.values()):
            if not s.state.ended:
                sessions[s.game.info.id] += 1
                driving += s.driver
        for conn in list(host.connections):
            connections[connection_kind(conn)] += 1
            outbox += conn.queued
    return {
        "sessions": dict(sessions),
        "connections": dict(connections),
        "outbox_bytes": outbox,
        "driving": driving,
    }


class _Collector:
    """Turns the plain counters and the host's state into metric families at scrape time."""

    def __init__(self, metrics: Metrics) -> None:
        self.m = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.m
        host = m.host
        state = _host_state(host)
        info = GaugeMetricFamily(
            "gamehost_host_info",
            "This host process: its instance id (the first part of its connections' keys),"
            " version and worker index",
            labels=["instance", "version", "worker"],
        )
        instance = getattr(host, "instance", "") if host is not None else ""
        worker = "" if m.worker is None else str(m.worker)
        info.add_metric([instance, __version__, worker], 1)
        yield info

        live = GaugeMetricFamily(
            "gamehost_sessions_live", "Live sessions that have not ended, by game", labels=["game"]
        )
        games = sorted(host.registry.games) if host is not None else []
        for game in sorted(set(games) | set(state["sessions"])):
            live.add_metric([game], state["sessions"].get(game, 0))
        yield live
        if host is not None and getattr(host, "follower", None) is not None:
            yield GaugeMetricFamily(
                "gamehost_sessions_driven",
                "Live sessions whose lease this host holds (it runs their bots and timers)",
                value=state["driving"],
            )
        conns = GaugeMetricFamily(
            "gamehost_connections", "Open client connections, by kind", labels=["kind"]
        )
        for kind, n in sorted(state["connections"].items()):
            conns.add_metric([kind], n)
        yield conns
        yield GaugeMetricFamily(
            "gamehost_outbox_bytes",
            "Bytes queued to all connections and not yet written to their sockets",
            value=state["outbox_bytes"],
        )
        yield _counter(
            "gamehost_connections_opened",
            "Connections accepted, by kind",
            ["kind"],
            {(k,): n for k, n in m.connections_opened.items()},
            [("tcp",), ("websocket",)],
        )
        yield _counter(
            "gamehost_connections_closed",
            "Connections closed, by reason (client: the client hung up)",
            ["reason"],
            {(r,): n for r, n in m.connections_closed.items()},
        )
        yield _counter(
            "gamehost_connections_refused",
            "Connections refused at accept, by reason",
            ["reason"],
            {(r,): n for r, n in m.connections_refused.items()},
        )
        yield _counter(
            "gamehost_actions",
            "Actions appended by this host (players', bots' and timed-out turns'), by game",
            ["game"],
            {(g,): n for g, n in m.actions.items()},
            [(g,) for g in games],
        )
        yield _counter(
            "gamehost_sessions_created",
            "Sessions created on this host, by game",
            ["game"],
            {(g,): n for g, n in m.sessions_created.items()},
            [(g,) for g in games],
        )
        yield _counter(
            "gamehost_sessions_ended",
            "Sessions this host ended, by game and how (played, or the host's reason:"
            " abandoned, too_long, game_error, admin)",
            ["game", "how"],
            {k: n for k, n in m.sessions_ended.items()},
        )
        yield _counter(
            "gamehost_plugin_faults",
            "Faults of a game's code, by game and where (command: a command answered"
            " internal; session: a session ended as game_error; observer: an observer hook"
            " raised)",
            ["game", "where"],
            {k: n for k, n in m.plugin_faults.items()},
            [(g, w) for g in games for w in ("command", "observer", "session")],
        )
        yield _counter(
            "gamehost_game_budget_overruns",
            "Steps into a game's code stopped for running past its budget, by game and budget"
            " (time, memory)",
            ["game", "budget"],
            {k: n for k, n in m.budget_overruns.items()},
            [(g, b) for g in games for b in ("memory", "time")],
        )
        yield _counter(
            "gamehost_store_errors",
            "Failed store operations of sessions, by operation (append, reload, follow, backfill)",
            ["op"],
            {(o,): n for o, n in m.store_errors.items()},
            [("append",)],
        )
        yield _counter(
            "gamehost_store_retries",
            "Store work done again after a failure (store: a batch written again on a new"
            " database connection; session: a log read again after a failed append)",
            ["where"],
            {(w,): n for w, n in m.store_retries.items()},
            [("session",), ("store",)],
        )
        yield _counter(
            "gamehost_append_conflicts",
            "Appends that lost the race for their seq to another host sharing the store",
            [],
            {(): m.append_conflicts},
        )
        yield _counter(
            "gamehost_leases_taken",
            "Session leases this host took (it began running their bots and timers)",
            [],
            {(): m.leases_taken},
        )
        yield _counter(
            "gamehost_lease_takeovers",
            "Session leases taken from another host (one that held it was gone or lost it)",
            [],
            {(): m.lease_takeovers},
        )
        yield _counter(
            "gamehost_leases_lost", "Session leases this host lost", [], {(): m.leases_lost}
        )


def _counter(
    name: str,
    doc: str,
    labels: list[str],
    values: dict[tuple[str, ...], int],
    always: list[tuple[str, ...]] = (),  # type: ignore[assignment]
) -> CounterMetricFamily:
    """A counter family of ``values`` (label values -> count), with the label sets of
    ``always`` at 0 when not counted yet (so a dashboard's rate() has a series from the
    start)."""
    family = CounterMetricFamily(name, doc, labels=labels)
    for key in sorted(set(values) | set(always)):
        family.add_metric(list(key), values.get(key, 0))
    return family


# -- the listener --------------------------------------------------------------------------------
MAX_HEAD = 8 * 1024
"""The largest request head the metrics listener reads, bytes."""


async def _answer(stream: trio.SocketStream, metrics: Metrics, timeout: float = 10.0) -> None:
    """Answer one HTTP request on the metrics listener: ``GET /metrics`` (or ``/``), 404 for
    other paths, 405 for other methods; then close."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    with trio.move_on_after(timeout):
        event: Any = h11.NEED_DATA
        while event is h11.NEED_DATA:
            data = await stream.receive_some(MAX_HEAD)
            conn.receive_data(data)
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:
                return
            if not data and event is h11.NEED_DATA:
                return
        if not isinstance(event, h11.Request):
            return
        target = event.target.decode("latin-1").split("?", 1)[0]
        if event.method not in (b"GET", b"HEAD"):
            status, body, kind = 405, b"method not allowed\n", "text/plain; charset=utf-8"
        elif target in ("/metrics", "/"):
            status, body, kind = 200, metrics.page(), CONTENT_TYPE
        else:
            status, body, kind = 404, b"not found: the page is /metrics\n", "text/plain"
        headers = [
            ("content-type", kind),
            ("content-length", str(len(body))),
            ("cache-control", "no-store"),
            ("connection", "close"),
        ]
        out = conn.send(h11.Response(status_code=status, headers=headers))
        if event.method != b"HEAD":
            out += conn.send(h11.Data(data=body))
        out += conn.send(h11.EndOfMessage())
        await stream.send_all(out)


async def _handle(metrics: Metrics, stream: trio.SocketStream) -> None:
    try:
        await _answer(stream, metrics)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    except Exception:
        log.exception("metrics_request_failed")
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


MAX_REQUESTS = 16
"""Metrics requests answered at once (more wait for the kernel's backlog)."""


async def serve_metrics(
    metrics: Metrics,
    port: int,
    bind: str,
    *,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``GET /metrics`` on ``bind``:``port`` (0: any free port) until cancelled;
    ``task_status.started`` with the listeners. At most :data:`MAX_REQUESTS` are answered at
    once, each within 10 s.

    Raises:
        OSError: the address cannot be bound.
    """
    limit = trio.CapacityLimiter(MAX_REQUESTS)

    async def handler(stream: trio.SocketStream) -> None:
        async with limit:
            await _handle(metrics, stream)

    await trio.serve_tcp(handler, port, host=bind, task_status=task_status)
