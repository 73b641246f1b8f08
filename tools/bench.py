"""``gamehost bench``: a load generator with bot clients, and the floor to compare the host with.

Starts a host in its own process (``gamehost serve --port 0``, a fresh data dir; or targets
``--port`` of a running one), then keeps ``--sessions`` tables busy at once over TCP:

- by default one TCP client plays a seat of each table with random legal actions and host bots
  fill the others;
- with ``--all-clients`` every seat is a TCP client (no host bots): the workload users produce.

A table plays one session to its end; with ``--seconds S`` it starts a new one each time one
ends and the run stops after ``S`` seconds (games cut off mid-way), so a run is bounded. Every
connection counts the bytes and lines it sends and receives.

Figures (``--json`` prints them as one JSON object; otherwise a summary, then that object):

- ``actions`` and ``actions_per_s``: every action (bots' included), as seen in the pushes of
  one client per table;
- ``rtt_p50_ms`` / ``rtt_p99_ms`` / ``rtt_p999_ms``: the clients' ``act`` round trip (request
  sent -> reply read), nearest-rank percentiles;
- ``host_cpu_s`` and ``host_cpu_per_action_ms``: the host process's user + system CPU time over
  the run, from ``/proc/<pid>/stat`` (utime + stime in clock ticks, ``SC_CLK_TCK``), and that
  over ``actions``; ``host_peak_rss_mib`` is its ``VmHWM``. Absent with ``--port`` (no pid).
- ``load_cpu_s``: the CPU time the load generator (this process) took meanwhile; near
  ``seconds``, it was the bottleneck, and the round trips include its queueing;
- ``lines_per_action`` and ``bytes_per_line``: every line the host sent to the bench's clients
  (replies and pushes, to all connections) over ``actions``, and their average size (newline
  included); ``request_bytes``: the average size of a line the clients sent.
- ``view_pushes``: whether the clients asked for state pushes (``--view-pushes``: a ``view``
  push after every change); its cost is the difference in the figures above against a run
  without. ``text_pushes`` likewise: whether they asked for each record in words
  (``--text-pushes``: ``"text": true``, a ``text`` field on every event push).

``--baseline`` then measures, in the same run, a bare trio server (:mod:`tools.baseline`, in its
own process too) with the same framing (:class:`protocol.framing.LineBuffer`, orjson, one
writer per connection): for each request line it parses the line and writes
``lines_per_action`` lines of ``bytes_per_line`` bytes — the figures just measured on the host —
spread over the connections of the requester's table. The baseline's load has the host run's
layout: ``--sessions`` tables, as many connections per table as the host run had clients per
table, one request in flight per table (the requesting connection takes turns, as seats do),
each request padded to ``request_bytes``; it runs as long as the host run did. Its CPU is read
from ``/proc`` exactly as the host's. So a baseline request costs what moving one action's
output through the same sockets costs, minus everything the host adds (game rules, the log,
views, sessions). Then:

- ``throughput_ratio`` = ``actions_per_s`` / ``baseline_requests_per_s``;
- ``cpu_ratio`` = ``host_cpu_per_action_ms`` / ``baseline_cpu_per_request_ms``.

``--peer boardgameio`` (with ``--all-clients``) then measures another game server playing the
same Crazy Eights (:mod:`tools.peer`): its figures are ``peer_*``, and ``cpu_per_move_vs_peer``
= ``host_cpu_per_action_ms`` / ``peer_cpu_per_move_ms``.

``--restart N`` measures a restart instead: it makes a data dir of ``N`` unfinished sessions
(:func:`make_restart_data`: a mix of the installed games, about 50 records each, every seat held
by a token the bench knows), starts ``gamehost serve`` on it and, as soon as it listens, sends a
``resume`` with a seat's real token for each of 20 random sessions (at most ``N``), each on its
own connection, the first one first. Figures: ``restart_listening_s`` (process start -> its
``listening`` log line), ``restart_first_resume_s`` (``listening`` -> the first session's
``resume`` answered) and ``restart_all_resumes_s`` (``listening`` -> every one answered); every
answer must name the token's seat.

The load generator runs on the same machine as the servers and takes CPU from them; CPU per
action is the steadier figure, the wall-clock ones move with whatever else runs. A progress bar
(rich, on stderr) shows while a phase has run for more than two seconds, when stderr is a
terminal.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import orjson
import trio

from host.net.client import Client
from host.net.session import hash_token
from host.plugins.registry import load_registry
from host.store.base import Conflict
from host.store.file import FileStore
from host.table.engine import Engine, Record
from tools.autoplay import SeatResult, play_seat
from tools.baseline import pad_for

__all__ = [
    "Counts",
    "CountingStream",
    "Load",
    "RestartSeat",
    "add_parser",
    "baseline_command",
    "cpu_seconds",
    "listening_port",
    "main",
    "make_restart_data",
    "peak_rss_mib",
    "percentile",
    "run_restart",
    "serve_command",
]

PROGRESS_AFTER = 2.0
"""Seconds a phase runs before its progress bar shows."""


def serve_command(fsync: str, data_dir: str) -> list[str]:
    """The command line of a host on any free port that logs JSON (``listening`` has the port)."""
    return [
        sys.executable,
        "-m",
        "tools.cli",
        "serve",
        "--port",
        "0",
        "--data-dir",
        data_dir,
        "--fsync",
        fsync,
        "--log-format",
        "json",
        "--log-level",
        "info",
    ]


def baseline_command(lines: float, line_bytes: int) -> list[str]:
    """The command line of a :mod:`tools.baseline` server on any free port.

    Args:
        lines: lines written per request, on average. line_bytes: bytes per line.
    """
    return [
        sys.executable,
        "-m",
        "tools.baseline",
        "--port",
        "0",
        "--lines",
        repr(lines),
        "--line-bytes",
        str(line_bytes),
    ]


def listening_port(line: bytes) -> int | None:
    """The port of a host's ``listening`` log line, None for any other line."""
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return int(msg["port"]) if isinstance(msg, dict) and msg.get("event") == "listening" else None


class _Seen:
    """Counts the ``hosts_seen`` log lines (a host on a shared store saw the hosts running)
    that name at least ``want`` hosts, over every process whose log is drained with it."""

    def __init__(self, want: int) -> None:
        self.want = want
        self.count = 0
        self.lock = threading.Lock()

    def line(self, line: bytes) -> None:
        if b'"hosts_seen"' not in line:
            return
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            return
        if msg.get("event") == "hosts_seen" and int(msg.get("hosts") or 0) >= self.want:
            with self.lock:
                self.count += 1

    def wait(self, hosts: int, timeout: float = 30.0) -> bool:
        """Wait until ``hosts`` lines were counted (each host saw them all), at most
        ``timeout`` seconds; whether they were."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if self.count >= hosts:
                    return True
            time.sleep(0.05)
        return False


def _start_server(
    cmd: list[str], listeners: int = 1, seen: _Seen | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``cmd`` and wait for ``listeners`` ``listening`` lines on stderr (a ``serve
    --workers N``: one per worker, all on one port); the process and the port.

    Raises:
        RuntimeError: it exited before listening.
    """
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    heard = 0
    for line in proc.stderr:
        port = listening_port(line)
        if port is not None:
            heard += 1
            if heard < listeners:
                continue
            # stop reading: let the server write its log to a sink so it never blocks on a pipe
            _drain_in_thread(proc, seen)
            return proc, port
    proc.wait()
    raise RuntimeError(f"{cmd[2]} exited (status {proc.returncode}) before listening")


def _start_host(
    fsync: str,
    data_dir: str,
    extra: tuple[str, ...] = (),
    listeners: int = 1,
    seen: _Seen | None = None,
) -> tuple[subprocess.Popen[bytes], int]:
    return _start_server([*serve_command(fsync, data_dir), *extra], listeners, seen)


def child_pids(pid: int) -> list[int]:
    """The pids of process ``pid``'s children (``/proc/<pid>/task/*/children``), e.g. the
    workers of a ``serve --workers N``; empty if it is gone."""
    out: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return sorted(set(out))


_KEPT_EVENTS = frozenset({"gc_pauses", "gc_frozen"})
"""Log events of a server the bench keeps (the last of each), read by :func:`server_events`."""

_drains: dict[int, tuple[threading.Thread, dict[str, dict[str, Any]]]] = {}


def _drain_in_thread(proc: subprocess.Popen[bytes], seen: _Seen | None = None) -> None:
    """Read the rest of the process's stderr in a thread, keeping only the JSON lines of
    :data:`_KEPT_EVENTS` (and counting its ``hosts_seen`` lines in ``seen``, if given)."""
    kept: dict[str, dict[str, Any]] = {}

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if seen is not None:
                seen.line(line)
            if b'"gc_' not in line:
                continue
            try:
                msg = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(msg, dict) and msg.get("event") in _KEPT_EVENTS:
                kept[msg["event"]] = msg

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    _drains[proc.pid] = (thread, kept)


def server_events(proc: subprocess.Popen[bytes]) -> dict[str, dict[str, Any]]:
    """The kept log events (:data:`_KEPT_EVENTS`) of a server stopped by :func:`_stop`, by
    event name (its last line of each); empty if it logged none."""
    thread, kept = _drains.pop(proc.pid, (None, {}))
    if thread is not None:
        thread.join(timeout=10)
    return kept


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` so far, in seconds (None if it is gone).

    Read from ``/proc/<pid>/stat`` (fields 14 and 15, clock ticks); resolution one tick.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces and parentheses
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float | None:
    """Peak resident memory (``VmHWM``) of process ``pid`` in MiB, None if unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


_peak_rss_mib = peak_rss_mib


def percentile(ordered: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` quantile (0 < q <= 1) of an ascending list; None if it is empty."""
    if not ordered:
        return None
    return ordered[min(len(ordered), max(1, math.ceil(q * len(ordered)))) - 1]


@attrs.define
class Counts:
    """Bytes and lines sent and received over the bench's connections (lines = newlines)."""

    bytes_in: int = 0
    lines_in: int = 0
    bytes_out: int = 0
    lines_out: int = 0


class CountingStream(trio.abc.Stream):
    """A stream that adds what passes through it to a :class:`Counts`.

    Args:
        inner: the stream to wrap. counts: the shared tally.
    """

    def __init__(self, inner: trio.abc.Stream, counts: Counts) -> None:
        self.inner = inner
        self.counts = counts

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.counts.bytes_out += len(data)
        self.counts.lines_out += bytes(data).count(b"\n")
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        self.counts.bytes_in += len(data)
        self.counts.lines_in += data.count(b"\n")
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _connect(port: int, counts: Counts) -> Client:
    return Client(CountingStream(await trio.open_tcp_stream("127.0.0.1", port), counts))


@attrs.define
class Load:
    """What a run plays: ``sessions`` tables of ``game`` with ``seats`` seats, ``clients`` of
    them TCP clients (the rest host bots), for ``seconds`` (None: one session per table);
    ``view_pushes``: the clients join with ``"view": true`` (a view push after every change);
    ``text_pushes``: with ``"text": true`` (every event push carries its text)."""

    sessions: int
    game: str
    seats: int
    clients: int
    seconds: float | None
    seed: int
    view_pushes: bool = False
    text_pushes: bool = False


@attrs.define
class _Tally:
    counts: Counts = attrs.field(factory=Counts)
    seats: list[SeatResult] = attrs.field(factory=list)
    counting: list[SeatResult] = attrs.field(factory=list)  # one seat per session
    by_host: dict[int, list[SeatResult]] = attrs.field(factory=dict)  # host index -> counting
    round_trips: list[float] = attrs.field(factory=list)  # the baseline's
    sessions_started: int = 0
    sessions_ended: int = 0

    def actions(self) -> int:
        return sum(r.actions_seen for r in self.counting)

    def actions_by_host(self, hosts: int) -> list[int]:
        return [sum(r.actions_seen for r in self.by_host.get(i, ())) for i in range(hosts)]


@attrs.frozen
class _Snapshot:
    seconds: float
    cpu_s: float | None
    cpus: list[float | None]  # per process measured (several hosts or workers)
    actions_by_host: list[int]
    load_cpu_s: float
    counts: Counts
    round_trips: list[float]
    actions: int
    requests: int
    sessions_started: int
    sessions_ended: int


class _Window:
    """The measured part of a phase: from :meth:`open` to the first :meth:`close`."""

    def __init__(
        self, tally: _Tally, pid: int | list[int] | None, host_run: bool, hosts: int = 1
    ) -> None:
        self.tally = tally
        self.pids = [] if pid is None else [pid] if isinstance(pid, int) else list(pid)
        self.host_run = host_run
        self.hosts = hosts
        self.snapshot: _Snapshot | None = None

    def open(self) -> None:
        self.t0 = time.perf_counter()
        self.cpus0 = [cpu_seconds(p) for p in self.pids]
        self.load0 = time.process_time()

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def close(self) -> None:
        if self.snapshot is not None:
            return
        t = self.tally
        cpus = [
            None if b is None or a is None else b - a
            for a, b in zip(self.cpus0, [cpu_seconds(p) for p in self.pids], strict=True)
        ]
        trips = (
            [x for r in t.seats for x in r.round_trips] if self.host_run else list(t.round_trips)
        )
        self.snapshot = _Snapshot(
            seconds=self.elapsed(),
            cpu_s=None if not cpus or None in cpus else sum(c for c in cpus if c is not None),
            cpus=cpus,
            actions_by_host=t.actions_by_host(self.hosts),
            load_cpu_s=time.process_time() - self.load0,
            counts=attrs.evolve(t.counts),
            round_trips=sorted(trips),
            actions=t.actions() if self.host_run else len(trips),
            requests=len(trips),
            sessions_started=t.sessions_started,
            sessions_ended=t.sessions_ended,
        )


async def _progress(
    label: str,
    total: float,
    done: Callable[[], float],
    status: Callable[[], str],
    *,
    console: Any = None,
    delay: float = PROGRESS_AFTER,
) -> None:
    """Show a progress bar after ``delay`` seconds, until cancelled; nothing unless a terminal.

    Args:
        label: the bar's title. total: the value of ``done()`` at the end. status: a short text
        shown beside the bar. console: a :class:`rich.console.Console` (default: on stderr).
    """
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    console = console if console is not None else Console(stderr=True)
    if not console.is_terminal:
        return
    await trio.sleep(delay)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[status]}"),
        console=console,
        transient=True,
        auto_refresh=False,
    ) as bar:
        task = bar.add_task(label, total=total, status=status())
        while True:
            bar.update(task, completed=done(), status=status())
            bar.refresh()
            await trio.sleep(0.25)


async def _measure(
    window: _Window,
    tables: list[Callable[[], Awaitable[None]]],
    seconds: float | None,
    label: str,
    total: float,
    done: Callable[[], float],
    status: Callable[[], str],
) -> _Snapshot:
    """Run ``tables`` until they end or ``seconds`` pass; the window's snapshot.

    A connection that breaks once the window is closed is torn down by the stop itself (a
    client's reader may see the cancellation before its player does): not an error.
    """

    async def guarded(table: Callable[[], Awaitable[None]]) -> None:
        try:
            await table()
        except* (ConnectionError, trio.BrokenResourceError, trio.ClosedResourceError):
            if window.snapshot is None:
                raise

    async with trio.open_nursery() as outer:

        def finish() -> None:
            window.close()
            outer.cancel_scope.cancel()

        window.open()
        if seconds is not None:

            async def stopper() -> None:
                await trio.sleep(seconds)
                finish()

            outer.start_soon(stopper)
        outer.start_soon(lambda: _progress(label, total, done, status))
        async with trio.open_nursery() as inner:
            for table in tables:
                inner.start_soon(guarded, table)
        finish()
    assert window.snapshot is not None
    return window.snapshot


async def _host_session(
    port: int, sid: str, load: Load, rng: random.Random, t: _Tally, host: int = 0
) -> None:
    async def seat_task(
        i: int, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        seat_rng = random.Random(rng.random())
        async with await _connect(port, t.counts) as c:
            await c.call("hello", protocol=1, client=f"bench-{i}")
            views = {"view": True} if load.view_pushes else {}
            if load.text_pushes:
                views["text"] = True
            joined = await c.call("join", session=sid, name=f"bench{i}", **views)
            res = SeatResult(joined["seat"])
            t.seats.append(res)
            if i == 0:
                t.counting.append(res)
                t.by_host.setdefault(host, []).append(res)
            task_status.started()
            await play_seat(c, sid, joined, seat_rng, res)

    async with trio.open_nursery() as n:
        for i in range(load.clients):
            await n.start(seat_task, i)


async def _host_table(port: int, load: Load, rng: random.Random, t: _Tally, host: int = 0) -> None:
    async with await _connect(port, t.counts) as lobby:
        while True:
            created = await lobby.call(
                "create",
                game=load.game,
                seats=load.seats,
                bots=load.seats - load.clients,
                options={},
            )
            t.sessions_started += 1
            await _host_session(port, created["session"], load, rng, t, host)
            t.sessions_ended += 1
            if load.seconds is None:
                return


async def run_host_load(
    load: Load, port: int | list[int], pid: int | list[int] | None
) -> dict[str, Any]:
    """Play ``load`` against the host on ``port``; the host figures (see the module doc).

    With several ports (hosts on one database) table ``k`` plays on host ``k % len(port)``,
    and the figures say each host's share (``hosts_*``); several pids (the hosts', or a
    ``serve --workers N``'s processes) are each measured (``processes_cpu_s``) and summed."""
    ports = [port] if isinstance(port, int) else list(port)
    rng = random.Random(load.seed)
    t = _Tally()
    window = _Window(t, pid, host_run=True, hosts=len(ports))

    tables = [
        partial(
            _host_table, ports[k % len(ports)], load, random.Random(rng.random()), t, k % len(ports)
        )
        for k in range(load.sessions)
    ]

    if load.seconds is None:
        total, done = float(load.sessions), lambda: float(t.sessions_ended)
    else:
        total, done = load.seconds, window.elapsed
    snap = await _measure(
        window,
        tables,
        load.seconds,
        "host",
        total,
        done,
        lambda: f"{window.elapsed():.0f} s, {t.actions()} actions, {t.sessions_ended} sessions",
    )
    c = snap.counts
    out: dict[str, Any] = {
        "sessions": load.sessions,
        "game": load.game,
        "seats": load.seats,
        "clients_per_table": load.clients,
        "all_clients": load.clients == load.seats,
        "view_pushes": load.view_pushes,
        "text_pushes": load.text_pushes,
        "seconds": snap.seconds,
        "actions": snap.actions,
        "actions_per_s": snap.actions / snap.seconds,
        "client_actions": snap.requests,
        "sessions_started": snap.sessions_started,
        "sessions_ended": snap.sessions_ended,
        **_rtt("rtt", snap.round_trips),
        "host_cpu_s": snap.cpu_s,
        "host_cpu_per_action_ms": _per_ms(snap.cpu_s, snap.actions),
        "load_cpu_s": snap.load_cpu_s,
        "lines_per_action": c.lines_in / snap.actions if snap.actions else None,
        "bytes_per_line": c.bytes_in / c.lines_in if c.lines_in else None,
        "request_bytes": c.bytes_out / c.lines_out if c.lines_out else None,
    }
    if len(snap.cpus) > 1:
        out["processes_cpu_s"] = snap.cpus
    if len(ports) > 1:
        out["hosts"] = len(ports)
        out["hosts_actions"] = snap.actions_by_host
        if len(snap.cpus) == len(ports):
            out["hosts_cpu_s"] = snap.cpus
            out["hosts_cpu_per_action_ms"] = [
                _per_ms(c, n) for c, n in zip(snap.cpus, snap.actions_by_host, strict=True)
            ]
    return out


async def _baseline_table(port: int, table: int, clients: int, request_pad: str, t: _Tally) -> None:
    async def drain(c: Client) -> None:
        async for _ in c.pushes:
            pass

    conns: list[Client] = []
    try:
        async with trio.open_nursery() as n:
            for _ in range(clients):
                c = await _connect(port, t.counts)
                conns.append(c)
                c.start(n)
                n.start_soon(drain, c)
            for c in conns:
                await c.call("join", table=f"t{table}")
            for turn in itertools.count():
                c = conns[turn % clients]
                t0 = time.perf_counter()
                reply = await c.request("act", table=f"t{table}", pad=request_pad)
                t.round_trips.append(time.perf_counter() - t0)
                if not reply.get("ok"):
                    raise RuntimeError(f"the baseline refused a request: {reply}")
    finally:
        with trio.CancelScope(shield=True):
            for c in conns:
                await c.aclose()


async def run_baseline_load(
    port: int, pid: int | None, sessions: int, clients: int, seconds: float, request_bytes: int
) -> dict[str, Any]:
    """Drive the baseline server on ``port`` for ``seconds``; its figures, keys ``baseline_*``.

    Args:
        sessions: tables. clients: connections per table. request_bytes: size of a request line.
    """
    t = _Tally()
    window = _Window(t, pid, host_run=False)
    shape = {"id": 1000, "op": "act", "table": f"t{sessions}", "pad": ""}
    request_pad = pad_for(shape, request_bytes)

    tables = [partial(_baseline_table, port, k, clients, request_pad, t) for k in range(sessions)]

    snap = await _measure(
        window,
        tables,
        seconds,
        "baseline",
        seconds,
        window.elapsed,
        lambda: f"{window.elapsed():.0f} s, {len(t.round_trips)} requests",
    )
    c = snap.counts
    return {
        "baseline_seconds": snap.seconds,
        "baseline_requests": snap.requests,
        "baseline_requests_per_s": snap.requests / snap.seconds,
        **_rtt("baseline_rtt", snap.round_trips),
        "baseline_cpu_s": snap.cpu_s,
        "baseline_cpu_per_request_ms": _per_ms(snap.cpu_s, snap.requests),
        "baseline_load_cpu_s": snap.load_cpu_s,
        "baseline_lines_per_request": c.lines_in / snap.requests if snap.requests else None,
        "baseline_bytes_per_line": c.bytes_in / c.lines_in if c.lines_in else None,
        "baseline_request_bytes": c.bytes_out / c.lines_out if c.lines_out else None,
    }


def _rtt(prefix: str, ordered: list[float]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999)):
        v = percentile(ordered, q)
        out[f"{prefix}_{name}_ms"] = None if v is None else v * 1000
    return out


def _per_ms(cpu_s: float | None, n: int) -> float | None:
    return None if cpu_s is None or not n else cpu_s * 1000 / n


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``bench`` sub-command."""
    p = sub.add_parser("bench", help="load a host with concurrent bot sessions and measure it")
    p.add_argument("--sessions", type=int, default=100, help="tables played at once")
    p.add_argument("--game", default="crazy-eights")
    p.add_argument(
        "--seats", type=int, default=4, help="seats per session (one is a client by default)"
    )
    p.add_argument("--fsync", choices=["always", "batch", "never"], default="batch")
    p.add_argument("--port", type=int, help="bench a running host instead of starting one")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--all-clients",
        action="store_true",
        help="every seat is a TCP client (no host bots)",
    )
    p.add_argument(
        "--seconds",
        type=float,
        help="run this long, starting a new session whenever one ends"
        " (default: each table plays one session to its end)",
    )
    p.add_argument(
        "--baseline",
        action="store_true",
        help="also measure a bare trio JSON-lines server with the same output per request,"
        " and print the host's ratios to it",
    )
    p.add_argument(
        "--restart",
        type=int,
        metavar="N",
        help="measure a restart instead: a data dir of N unfinished sessions, the time to"
        " listening and to the first resumes answered",
    )
    p.add_argument(
        "--view-pushes",
        action="store_true",
        help="the clients ask for a view push after every change (join with view: true);"
        " compare lines_per_action, bytes_per_line and CPU per action with a run without",
    )
    p.add_argument(
        "--text-pushes",
        action="store_true",
        help="the clients ask for each record in words (join with text: true); compare"
        " bytes_per_line and CPU per action with a run without",
    )
    p.add_argument(
        "--no-budget",
        action="store_true",
        help="start the host without the game budget (--game-time 0 --game-memory 0"
        " --game-hang 0 --max-memory 0: no watchdog, no crash marker), to measure what the"
        " budget costs per action",
    )
    p.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="pass ARG to the gamehost serve it starts (repeatable; write"
        " --serve-arg=--metrics=9100)",
    )
    p.add_argument(
        "--hosts",
        type=int,
        default=1,
        help="hosts to start on the --store database; table k plays on host k mod N, and the"
        " figures give each host's CPU and actions",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="start the host as serve --workers N on the --store database (one port; the"
        " kernel spreads the connections); the CPU of every process is summed",
    )
    p.add_argument(
        "--idle",
        type=int,
        metavar="N",
        help="measure idle connections instead: the host's resident memory growth per"
        " connection for N connections that sent hello and stay silent, beside a bare trio"
        " server's",
    )
    p.add_argument(
        "--peer",
        choices=["boardgameio"],
        help="also measure a peer, another game server playing the same Crazy Eights with"
        " every seat a client, after the host (needs --all-clients; boardgame.io, installed"
        " with npm into --peer-cache on first use)",
    )
    p.add_argument(
        "--peer-cache",
        metavar="DIR",
        help="where --peer installs its npm package (default: $XDG_CACHE_HOME/gamehost/peers,"
        " else ~/.cache/gamehost/peers)",
    )
    p.add_argument("--json", action="store_true", help="print only one JSON object")
    from tools import stall

    stall.add_arguments(p)
    p.set_defaults(func=main)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark for parsed ``bench`` arguments; every figure (see the module doc).

    Raises:
        ValueError: an argument is out of range. RuntimeError: a server did not start, or the
            ``--peer`` cannot be installed.
    """
    if args.restart is not None:
        return run_restart(args)
    if getattr(args, "idle", None) is not None:
        from tools import idle

        return idle.run(args)
    if args.sessions < 1 or args.seats < 1:
        raise ValueError("--sessions and --seats must be at least 1")
    if args.seconds is not None and not args.seconds > 0:
        raise ValueError("--seconds must be more than 0")
    peer = getattr(args, "peer", None)
    if peer:
        wrong = [
            *([] if args.all_clients else ["give --all-clients"]),
            *([] if args.game == "crazy-eights" else [f"--game is {args.game}, not crazy-eights"]),
            *([] if 2 <= args.seats <= 5 else [f"--seats is {args.seats}, not 2-5"]),
        ]
        if wrong:
            raise ValueError(
                "--peer compares a Crazy Eights move with every seat a client: " + "; ".join(wrong)
            )
        from tools import peer as peers

        # installed (or found) before the host runs: a setup that cannot work says so at once
        peer_folder = peers.install(
            peer,
            peers.cache_dir(getattr(args, "peer_cache", None)),
            lambda text: print(f"gamehost bench: {text}", file=sys.stderr),
        )
    load = Load(
        sessions=args.sessions,
        game=args.game,
        seats=args.seats,
        clients=args.seats if args.all_clients else 1,
        seconds=args.seconds,
        seed=args.seed,
        view_pushes=args.view_pushes,
        text_pushes=args.text_pushes,
    )
    hosts, workers = getattr(args, "hosts", 1), getattr(args, "workers", 1)
    store = getattr(args, "store", None)
    if hosts < 1 or workers < 1:
        raise ValueError("--hosts and --workers must be at least 1")
    if (hosts > 1 or workers > 1) and not store:
        raise ValueError("--hosts and --workers need --store postgresql://... (a shared store)")
    if hosts > 1 and workers > 1:
        raise ValueError("give --hosts or --workers, not both")
    if (hosts > 1 or workers > 1) and args.port is not None:
        raise ValueError("--hosts and --workers start hosts: not with --port")
    result: dict[str, Any] = {"fsync": args.fsync}
    if store:
        from host.store.pg import migrate

        migrate(store)  # the schema, if the database has none yet
        result["store"] = "postgresql"
    with tempfile.TemporaryDirectory(prefix="gamehost-bench-") as tmp:
        procs: list[subprocess.Popen[bytes]] = []
        ports: list[int] = []
        try:
            if args.port is None:
                extra: tuple[str, ...] = (
                    ("--game-time", "0", "--game-memory", "0", "--game-hang", "0")
                    + ("--max-memory", "0")
                    if getattr(args, "no_budget", False)
                    else ()
                )
                extra += tuple(getattr(args, "serve_arg", ()))
                if store:
                    extra += ("--store", store)
                if workers > 1:
                    extra += ("--workers", str(workers))
                seen = _Seen(hosts * workers)
                for i in range(hosts):
                    data = str(Path(tmp) / f"host{i}")
                    proc, port = _start_host(args.fsync, data, extra, workers, seen)
                    procs.append(proc)
                    ports.append(port)
                # each host creates sessions under ids it owns among the hosts it sees: the
                # load starts once every host has seen them all
                if store and not seen.wait(hosts * workers):
                    print("gamehost bench: the hosts did not all see each other", file=sys.stderr)
            else:
                ports = [args.port]
            pids: list[int] | int | None = [p.pid for p in procs] or None
            if workers > 1:  # the supervisor and its workers
                pids = [procs[0].pid, *child_pids(procs[0].pid)]
                result["workers"] = workers
            result.update(trio.run(run_host_load, load, ports, pids))
            peaks = [peak_rss_mib(p) for p in (pids if isinstance(pids, list) else [])]
            result["host_peak_rss_mib"] = max((m for m in peaks if m is not None), default=None)
        finally:
            for proc in procs:
                _stop(proc)
        events = [server_events(p) for p in procs]
        if events:  # the collector of the first host started (each host logs its own)
            result.update(_gc_figures(events[0]))
    if args.baseline:
        lines = result["lines_per_action"] or 1.0
        line_bytes = round(result["bytes_per_line"] or 100)
        bproc, bport = _start_server(baseline_command(lines, line_bytes))
        try:
            result.update(
                trio.run(
                    run_baseline_load,
                    bport,
                    bproc.pid,
                    load.sessions,
                    load.clients,
                    load.seconds or result["seconds"],
                    round(result["request_bytes"] or 0),
                )
            )
            result["baseline_peak_rss_mib"] = peak_rss_mib(bproc.pid)
        finally:
            _stop(bproc)
        result["throughput_ratio"] = _ratio(
            result["actions_per_s"], result["baseline_requests_per_s"]
        )
        result["cpu_ratio"] = _ratio(
            result["host_cpu_per_action_ms"], result["baseline_cpu_per_request_ms"]
        )
    if peer:
        try:
            result.update(
                peers.run_peer(
                    peer,
                    peer_folder,
                    load.sessions,
                    load.seats,
                    load.seconds or result["seconds"],
                    load.seed,
                )
            )
            result["cpu_per_move_vs_peer"] = _ratio(
                result["host_cpu_per_action_ms"], result["peer_cpu_per_move_ms"]
            )
        except RuntimeError as exc:
            result["peer_error"] = str(exc)
    return result


def _gc_figures(events: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The host's collector figures from its ``gc_pauses`` line (see
    :mod:`host.net.collector`): ``gc_collections`` and ``gc_longest_ms`` by generation,
    ``gc_max_ms`` (the longest pause of any), ``gc_total_ms`` (all pauses added up), the same
    in the collecting thread's CPU time (``gc_cpu_longest_ms``, ``gc_cpu_max_ms``,
    ``gc_cpu_total_ms``: what the collector itself cost, without the waits for a core),
    ``gc_slow`` and ``gc_cpu_slow`` (collections over 10 ms, wall clock and CPU), ``gc_full_ms``
    (each full collection a tuned host made because frozen objects piled up),
    ``gc_thresholds``, ``gc_frozen`` (objects frozen after loading); empty without the line."""
    p = events.get("gc_pauses")
    if p is None:
        return {}
    return {
        "gc_collections": p.get("collections"),
        "gc_longest_ms": p.get("longest_ms"),
        "gc_max_ms": p.get("max_ms"),
        "gc_total_ms": round(sum(p.get("total_ms") or []), 3),
        "gc_cpu_longest_ms": p.get("cpu_longest_ms"),
        "gc_cpu_max_ms": p.get("cpu_max_ms"),
        "gc_cpu_total_ms": round(sum(p.get("cpu_total_ms") or []), 3),
        "gc_slow": sum(p.get("slow") or []),
        "gc_cpu_slow": sum(p.get("cpu_slow") or []),
        "gc_full_ms": p.get("full_ms"),
        "gc_thresholds": p.get("thresholds"),
        "gc_frozen": p.get("frozen"),
    }


def _ms(v: float | None) -> str:
    return "?" if v is None else f"{v:.2f} ms"


def _summary(args: argparse.Namespace, r: dict[str, Any]) -> list[str]:
    if "restart_sessions" in r:
        return _restart_summary(r)
    if "idle_connections" in r:
        from tools import idle

        return idle.summary(r)
    clients = r["clients_per_table"]
    lines = [
        f"{args.sessions} concurrent {args.game} sessions ({args.seats} seats,"
        f" {clients} client{'s' if clients > 1 else ''} each"
        + (", view pushes on" if r.get("view_pushes") else "")
        + (", text pushes on" if r.get("text_pushes") else "")
        + "),"
        f" fsync={args.fsync}: {r['actions']} actions in {r['seconds']:.2f} s ="
        f" {r['actions_per_s']:.0f} actions/s; client act round trip p50"
        f" {_ms(r['rtt_p50_ms'])}, p99 {_ms(r['rtt_p99_ms'])}"
        + (
            f"; host peak RSS {r['host_peak_rss_mib']:.0f} MiB"
            if r.get("host_peak_rss_mib") is not None
            else ""
        )
    ]
    if r["host_cpu_s"] is not None:
        lines.append(
            f"host CPU {r['host_cpu_s']:.2f} s = {_ms(r['host_cpu_per_action_ms'])} per action"
            f" (load generator CPU {r['load_cpu_s']:.2f} s);"
            f" act round trip p99.9 {_ms(r['rtt_p999_ms'])}"
        )
    if r.get("gc_max_ms") is not None:
        n = r["gc_collections"]
        lines.append(
            f"host garbage collector (thresholds {r['gc_thresholds']}): {n[0]} / {n[1]} / {n[2]}"
            f" collections of generations 0 / 1 / 2, longest pause {r['gc_max_ms']:.1f} ms"
            f" ({r['gc_cpu_max_ms']:.1f} ms of CPU), {r['gc_total_ms']:.0f} ms in all"
            f" ({r['gc_cpu_total_ms']:.0f} ms of CPU); {r['gc_slow']} over 10 ms"
            f" ({r['gc_cpu_slow']} by CPU)"
        )
    if r.get("hosts_cpu_s"):
        shares = ", ".join(
            f"{c:.2f} s / {n} actions = {_ms(m)}"
            for c, n, m in zip(
                r["hosts_cpu_s"], r["hosts_actions"], r["hosts_cpu_per_action_ms"], strict=True
            )
        )
        lines.append(f"{r['hosts']} hosts on one database, each: {shares}")
    if r.get("workers"):
        cpus = ", ".join(f"{c:.2f}" for c in r.get("processes_cpu_s") or [] if c is not None)
        lines.append(
            f"serve --workers {r['workers']}: CPU s of the supervisor, then each worker: {cpus}"
        )
    if r["lines_per_action"] is not None:
        lines.append(
            f"host output: {r['lines_per_action']:.2f} lines of {r['bytes_per_line']:.0f} B"
            f" per action (all connections); requests of {r['request_bytes']:.0f} B"
        )
    if "baseline_requests" in r:
        lines.append(
            f"baseline (bare trio JSON-lines server, same layout and output per request):"
            f" {r['baseline_requests']} requests in {r['baseline_seconds']:.2f} s ="
            f" {r['baseline_requests_per_s']:.0f} requests/s, CPU"
            f" {_ms(r['baseline_cpu_per_request_ms'])} per request; round trip p50"
            f" {_ms(r['baseline_rtt_p50_ms'])}, p99 {_ms(r['baseline_rtt_p99_ms'])},"
            f" p99.9 {_ms(r['baseline_rtt_p999_ms'])}"
        )
        tr, cr = r["throughput_ratio"], r["cpu_ratio"]
        lines.append(
            "ratios: actions/s / baseline requests/s = "
            + ("?" if tr is None else f"{tr:.2f}")
            + "; host CPU per action / baseline CPU per request = "
            + ("?" if cr is None else f"{cr:.2f}x")
        )
    if "peer" in r or "peer_error" in r:
        from tools import peer

        lines += peer.summary(r)
    return lines


def main(args: argparse.Namespace) -> int:
    """Run the benchmark and print its figures (the summary, then one JSON line). Exit status
    0; 2 for bad arguments; 1 when a server did not start, or when the ``--peer`` asked for could
    not be installed (before the host runs) or measured (after it: the host's figures are
    printed all the same)."""
    if getattr(args, "peer", None) and (
        getattr(args, "stall", False)
        or getattr(args, "restart", None) is not None
        or getattr(args, "idle", None) is not None
    ):
        print(
            "gamehost bench: --peer compares moves: not with --stall, --restart or --idle",
            file=sys.stderr,
        )
        return 2
    if getattr(args, "stall", False):
        from tools import stall

        return stall.main(args)
    try:
        result = run(args)
    except ValueError as exc:
        print(f"gamehost bench: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # a server that did not start, a peer that cannot be installed
        print(f"gamehost bench: {exc}", file=sys.stderr)
        return 1
    if not args.json:
        for line in _summary(args, result):
            print(line)
    print(orjson.dumps(result).decode())
    if "peer_error" in result:  # the host was measured, the comparison asked for was not
        print(f"gamehost bench: the peer was not measured: {result['peer_error']}", file=sys.stderr)
        return 1
    return 0


# -- --restart: a data dir of unfinished sessions, and how soon a restarted host answers --------
RESTART_RECORDS = 50
"""Records a ``--restart`` session is played to (fewer if its game would end sooner)."""
RESTART_RESUMES = 20
"""Sessions ``--restart`` resumes after the host listens (at most all of them)."""


@attrs.frozen
class RestartSeat:
    """A seat of a session :func:`make_restart_data` made, and the token that holds it."""

    session: str
    game: str
    seat: int
    token: str


def _restart_session(
    sid: str, engine: Engine, rng: random.Random, records: int = RESTART_RECORDS
) -> tuple[list[Record], list[RestartSeat]]:
    """One session of :func:`make_restart_data`: its records and its seats with their tokens."""
    info = engine.game.info
    n = max(info.min_seats, min(4, info.max_seats))
    opts = engine.codec.options_from_wire({}, n)
    header = engine.header(sid, opts, n, (), rng.randbytes(32))
    log_records = [header]
    state = engine.initial(header)
    seats = []
    for seat in range(n):
        token = f"{sid}-{seat}-{rng.randbytes(12).hex()}"
        seats.append(RestartSeat(sid, info.id, seat, token))
        new = engine.take_seat(state, seat, f"player{seat}", False, hash_token(token))
        log_records += new
        state = engine.apply_all(state, new)
    while len(log_records) < records:
        to_act = engine.to_act(state)
        if not to_act:
            break
        new = engine.bot_act(state, to_act[0])
        after = engine.apply_all(state, new)
        if after.ended:
            break
        log_records += new
        state = after
    return log_records, seats


async def make_restart_data(
    data_dir: Path | str, sessions: int, seed: int = 1, records: int = RESTART_RECORDS
) -> list[list[RestartSeat]]:
    """Write ``sessions`` unfinished sessions into a data dir, through :class:`FileStore` only.

    Session ``i`` (id ``r00000``, ``r00001``, ...) plays the ``i % k``-th of the ``k``
    installed games (sorted by id) with 4 seats, or the game's bounds, every seat taken by a
    human whose token is known; its actions are the game's bot choices for whoever is to act
    (:class:`host.table.engine.Engine`, as ``host.table.local`` plays), stopped at ``records``
    records or just before the action that would end the game. Deterministic for a ``seed``.

    Returns:
        For each session, in order, its seats with their tokens.

    Raises:
        Conflict: a session of that id exists in ``data_dir`` already.
    """
    rng = random.Random(seed)
    registry = load_registry()
    engines: list[Engine] = [registry.engines[gid] for gid in sorted(registry.engines)]
    made: list[list[RestartSeat]] = []
    store = FileStore(data_dir, "never")
    refused: Exception | None = None
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        try:
            for i in range(sessions):
                sid = f"r{i:05d}"
                log_records, seats = _restart_session(sid, engines[i % len(engines)], rng, records)
                await store.create(sid, [r.to_json() for r in log_records])
                made.append(seats)
        except Conflict as exc:
            refused = exc
        await store.aclose()
    if refused is not None:
        raise refused
    return made


async def _resume_all(
    port: int, picks: list[RestartSeat], listening: float
) -> tuple[list[float], list[dict[str, Any]]]:
    """Resume every pick at once, each on its own connection, the first one first; the seconds
    from ``listening`` (a ``time.perf_counter``) to each answer, and each answer."""
    times: list[float] = [math.nan] * len(picks)
    replies: list[dict[str, Any]] = [{}] * len(picks)

    async def one(i: int, pick: RestartSeat, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with await Client.connect("127.0.0.1", port) as client:
            task_status.started()
            reply = await client.request("resume", session=pick.session, token=pick.token)
            times[i] = time.perf_counter() - listening
            replies[i] = reply

    async with trio.open_nursery() as nursery:
        for i, pick in enumerate(picks):  # each connects, then sends while the next connects
            await nursery.start(one, i, pick)
    return times, replies


def run_restart(args: argparse.Namespace) -> dict[str, Any]:
    """``bench --restart N``: make the data dir, start a host on it, resume 20 random sessions;
    the figures (see the module docstring), in seconds.

    Raises:
        ValueError: N below 1. RuntimeError: the host did not start, or a resume was refused
            or answered with another seat.
    """
    n = args.restart
    if n < 1:
        raise ValueError("--restart must be at least 1")
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="gamehost-restart-") as tmp:
        made = trio.run(make_restart_data, tmp, n, args.seed)
        picks = [rng.choice(seats) for seats in rng.sample(made, min(RESTART_RESUMES, n))]
        t0 = time.perf_counter()
        proc, port = _start_host(args.fsync, tmp)
        listening = time.perf_counter()
        try:
            times, replies = trio.run(_resume_all, port, picks, listening)
        finally:
            _stop(proc)
    for pick, reply in zip(picks, replies, strict=True):
        seat = (reply.get("result") or {}).get("seat")
        if not reply.get("ok") or seat != pick.seat:
            raise RuntimeError(
                f"resume of {pick.session} seat {pick.seat} was answered with {reply!r}"
            )
    return {
        "fsync": args.fsync,
        "restart_sessions": n,
        "restart_games": sorted({seats[0].game for seats in made}),
        "restart_listening_s": listening - t0,
        "restart_first_resume_s": times[0],
        "restart_all_resumes_s": max(times),
        "restart_resumes": len(picks),
        "restart_resumed": [[p.session, p.seat] for p in picks],
    }


def _restart_summary(r: dict[str, Any]) -> list[str]:
    return [
        f"restart with {r['restart_sessions']} unfinished sessions"
        f" ({', '.join(r['restart_games'])}), fsync={r['fsync']}:"
        f" listening after {r['restart_listening_s']:.2f} s; then the first resume answered in"
        f" {r['restart_first_resume_s']:.2f} s, all {r['restart_resumes']} in"
        f" {r['restart_all_resumes_s']:.2f} s"
    ]
