"""``gamehost chaos``: a kill loop that checks no acknowledged event is lost and every session ends.

It starts ``gamehost serve --port 0 --fsync batch --log-format json`` on a data dir as a
subprocess (extra ``serve`` flags pass through with ``--serve-arg``), then plays ``--sessions``
tables of the installed games at once. Each table is created over TCP with one to three human
seats, played by clients of this tool with random legal actions (:func:`pick_action`) answered
from their ``turn`` pushes, and host bots in the other seats. Tables are created in waves, one
before each kill and one after the last.

Between waves the host is SIGKILLed at a seeded random moment: a share of the kills
(``create_kills``) land within ``CREATE_KILL_WINDOW`` seconds after a wave's tables start, while
``create`` and ``join`` requests are in flight; the others after a random pause and a random number
of pushes seen since the last restart (both bounded), in mid-play. The host is restarted on the
same data dir on a new port, read from its ``listening`` log line. Every client then reconnects
(bounded backoff while no host is up) and sends ``resume`` with its token and ``after`` = the last
seq it saw. A client whose connection died during ``create`` or ``join`` never got the reply: it
creates or joins again on the restarted host (what the first request left behind is the host's
to end).

Each client keeps a ledger of what the host acknowledged, per session:

- the ``seq`` of a ``create``, ``join`` or ``resume`` reply, the ``seq`` of an ``act`` reply (the
  action and its events up to it are durable), the ``seq`` of every push;
- what every pushed record was (its ``kind`` and the event's ``type``, the acting seat, ...).

After the last kill the clients play on until every session's log ends (played out, or ended by
the host's own rules such as a turn timer or an abandonment rule) or ``--settle-seconds`` pass;
then the host is stopped with SIGTERM and the logs in ``<data-dir>/sessions`` are checked: every
acknowledged seq must be in its session's log, and every record a client was pushed must be the
same record there. ``gamehost replay --verify`` runs on every log. One line per figure is printed,
then ``ok`` or ``FAILED: <reasons>``; exit status 0 or 1.

Bounds: the whole play (kills and settling) stops at ``--max-seconds``; every request waits at most
``REQUEST_TIMEOUT`` seconds, every host start ``START_TIMEOUT`` seconds, the SIGTERM stop
``STOP_TIMEOUT`` seconds (then SIGKILL, reported), each ``replay --verify`` ``VERIFY_TIMEOUT``
seconds. Everything runs on 127.0.0.1.

Hosts are a list (:class:`HostProcess`) and clients connect to whichever host is up. By
default one host runs on the file store and its JSONL logs are read (:func:`check_logs`). With
``--store postgresql://...`` and ``--hosts N`` the tool starts N hosts on that database (which
must hold no sessions yet): each kill SIGKILLs one of the hosts that are up, clients resume on
any host that is up, and the records are read from the database (:func:`read_database`), then
exported to JSONL files for ``replay --verify``. Each host logs ``lease_taken`` when it starts
driving a session (bots, timers); for every session the killed host drove, the *takeover time* is
the time from the kill to the next ``lease_taken`` of that session by a host that is up, each of
which must be at most :data:`TAKEOVER_LIMIT` seconds (a session that ended without one needed
none).
"""

from __future__ import annotations

import argparse
import math
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs
import orjson
import trio

from host import logs
from host.store.base import CorruptLog, body_of, frame
from host.store.file import read_log
from tools.bench import listening_port, serve_command
from tools.client import Client
from tools.progress import Progress

__all__ = [
    "GAMES",
    "ChaosConfig",
    "ChaosReport",
    "HostProcess",
    "Ledger",
    "add_parser",
    "chaos",
    "check_logs",
    "check_records",
    "describe",
    "main",
    "pick_action",
    "run_chaos",
]

GAMES: dict[str, tuple[int, int, dict[str, Any]]] = {
    "crazy-eights": (2, 4, {"target": 30}),
    "around-the-world": (2, 4, {}),
    "seven-twenty-seven": (4, 5, {"hands": 4}),
}
"""Per game: fewest and most seats of a table, and the options (short matches)."""

CREATE_KILL_WINDOW = 0.05
"""Seconds after a wave starts within which a kill "while a wave is created" lands."""
REQUEST_TIMEOUT = 20.0
"""Seconds a client waits for a reply before it treats the connection as dead."""
START_TIMEOUT = 60.0
"""Seconds a host has to print its ``listening`` line."""
STOP_TIMEOUT = 30.0
"""Seconds a host has to exit after SIGTERM before it is SIGKILLed."""
VERIFY_TIMEOUT = 120.0
"""Seconds one ``replay --verify`` may take."""
TAKEOVER_LIMIT = 5.0
"""Seconds within which another host must take over the sessions a killed host drove."""
BACKOFF = (0.05, 1.0)
"""First and longest pause, in seconds, between a client's reconnection attempts."""
MAX_CONNECTIONS = 1000
"""Connections one human client opens at most (each kill costs it one or two)."""
_LINK_ERRORS = (OSError, trio.BrokenResourceError, trio.ClosedResourceError)
_TRANSIENT = ("unavailable", "overloaded", "conflict")  # conflict: a join lost twice
T = TypeVar("T")


class HostFailed(Exception):
    """A host did not start (it exited, or printed no ``listening`` line in time)."""


class _Disconnected(Exception):
    """The connection to the host ended (EOF, reset, ``closed`` push or a request timed out)."""


@attrs.frozen
class ChaosConfig:
    """One chaos run.

    Attributes:
        sessions: tables to create (at least 1).
        kills: SIGKILLs of a host (at least 0).
        seed: seeds the plan (games, seats, kill moments, moves); timing still varies.
        data_dir: the host's data dir (logs in ``data_dir/sessions``, host output in
            ``data_dir/host.log``).
        games: the game ids tables are spread over.
        serve_args: extra ``gamehost serve`` arguments (``--turn-timeout=2``, ...).
        fsync: the host's ``--fsync`` mode.
        max_seconds: bound on the whole play (kills and settling), seconds.
        settle_seconds: after the last kill, how long sessions get to end, seconds.
        think: a human client waits up to this long before each action, seconds.
        kill_pause: bounds (seconds) of the random pause before each kill.
        kill_pushes: a kill also waits for up to this many pushes (random) after the restart.
        down_seconds: a killed host stays down up to this long (random) before its restart.
        create_kills: the share of kills (rounded; at least one of two or more) sent at most
            ``CREATE_KILL_WINDOW`` seconds after a wave's tables start (so ``create`` and
            ``join`` replies get lost); the others wait for a pause and some pushes (mid-play).
    """

    sessions: int = 50
    kills: int = 10
    seed: int = 1
    data_dir: Path = Path("chaos-data")
    games: tuple[str, ...] = tuple(GAMES)
    serve_args: tuple[str, ...] = ()
    fsync: str = "batch"
    max_seconds: float = 240.0
    settle_seconds: float = 90.0
    think: float = 0.03
    kill_pause: tuple[float, float] = (0.2, 2.0)
    kill_pushes: int = 150
    down_seconds: float = 0.5
    create_kills: float = 0.3
    hosts: int = 1
    store: str | None = None


@attrs.define(eq=False)
class HostProcess:
    """One ``gamehost serve`` subprocess, restartable on the same data dir.

    ``port`` is None while it is down. Its stderr (JSON log lines) is appended to ``log_path``;
    ``warnings`` and ``errors`` count its lines of those levels by event name. ``exits`` lists
    the statuses of exits nobody asked for (a crash), noticed when its stderr closes.
    """

    name: str
    argv: list[str]
    log_path: Path
    proc: trio.Process | None = None
    port: int | None = None
    starts: int = 0
    warnings: Counter[str] = attrs.field(factory=Counter)
    errors: Counter[str] = attrs.field(factory=Counter)
    exits: list[int | None] = attrs.field(factory=list)
    leases: list[tuple[float, str, str]] = attrs.field(factory=list)
    started_at: float = 0.0
    _stopping: bool = False

    def driving(self) -> set[str]:
        """The sessions this host drives now, by its ``lease_taken`` / ``lease_lost`` lines
        since its last start."""
        held: set[str] = set()
        for at, event, sid in self.leases:
            if at >= self.started_at:
                (held.add if event == "lease_taken" else held.discard)(sid)
        return held

    async def start(self, nursery: trio.Nursery, timeout: float = START_TIMEOUT) -> int:
        """Start the process and wait for its ``listening`` line; return the port.

        Raises:
            HostFailed: it exited first, or printed no such line within ``timeout`` seconds.
        """
        proc = await trio.lowlevel.open_process(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self.proc = proc
        self._stopping = False
        self.starts += 1
        self.started_at = time.monotonic()
        listening: trio.MemorySendChannel[int]
        listening, got = trio.open_memory_channel[int](1)
        nursery.start_soon(self._pump, proc, listening)
        with trio.move_on_after(timeout):
            try:
                self.port = await got.receive()
            except trio.EndOfChannel:
                self._stopping = True  # reported here, not as an exit nobody asked for
                await proc.wait()
                raise HostFailed(
                    f"{self.name} exited with status {proc.returncode} before listening"
                    f" (see {self.log_path})"
                ) from None
            return self.port
        proc.kill()
        await proc.wait()
        raise HostFailed(f"{self.name} printed no listening line in {timeout:.0f} s")

    async def _pump(self, proc: trio.Process, listening: trio.MemorySendChannel[int]) -> None:
        """Copy the host's stderr to the log file, report its port, count its warnings."""
        assert proc.stderr is not None
        buf = b""
        with open(self.log_path, "ab") as out, listening:
            while True:
                try:
                    chunk = await proc.stderr.receive_some(65536)
                except trio.ClosedResourceError:
                    break
                if not chunk:
                    break
                out.write(chunk)
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    self._note(line, listening)
            out.flush()
        if not self._stopping and self.proc is proc:
            await proc.wait()
            if not self._stopping and self.proc is proc:
                self.port = None
                self.exits.append(proc.returncode)

    def _note(self, line: bytes, listening: trio.MemorySendChannel[int]) -> None:
        port = listening_port(line)
        if port is not None:
            listening.send_nowait(port)
            return
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            if line.strip():
                self.errors["non-JSON output (a traceback?)"] += 1
            return
        if isinstance(msg, dict):
            if msg.get("event") in ("lease_taken", "lease_lost"):
                self.leases.append((time.monotonic(), msg["event"], str(msg.get("session"))))
            level = msg.get("level")
            if level == "warning":
                self.warnings[str(msg.get("event"))] += 1
            elif level in ("error", "critical"):
                self.errors[str(msg.get("event"))] += 1

    async def kill(self) -> None:
        """SIGKILL the process and wait for it."""
        assert self.proc is not None
        self.port = None
        self._stopping = True
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def stop(self, timeout: float = STOP_TIMEOUT) -> tuple[int | None, float]:
        """SIGTERM the process; SIGKILL it after ``timeout`` seconds.

        Returns:
            Its exit status (None if it had to be SIGKILLed) and the seconds it took.
        """
        if self.proc is None or self.proc.returncode is not None:
            return (None if self.proc is None else self.proc.returncode), 0.0
        self.port = None
        self._stopping = True
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        with trio.move_on_after(timeout):
            await self.proc.wait()
            return self.proc.returncode, time.monotonic() - t0
        self.proc.kill()
        await self.proc.wait()
        return None, time.monotonic() - t0


@attrs.define
class Ledger:
    """What the host acknowledged for one session, as its clients saw it.

    Attributes:
        session: the session id.
        game: its game id.
        max_seq: the highest seq acknowledged (a reply's or a push's seq).
        pushed: seq -> a short description of the record pushed there (see :func:`describe`).
        clashes: two pushes of one seq that described different records.
        ended: a client was told the session ended (for the progress).
    """

    session: str
    game: str
    max_seq: int = -1
    pushed: dict[int, str] = attrs.field(factory=dict)
    clashes: list[str] = attrs.field(factory=list)
    ended: bool = False

    def ack(self, seq: int | None) -> None:
        """The host acknowledged records up to ``seq``."""
        if isinstance(seq, int):
            self.max_seq = max(self.max_seq, seq)

    def saw(self, seq: int, description: str) -> None:
        """A client was pushed the record ``seq``, described by ``description``."""
        self.ack(seq)
        old = self.pushed.setdefault(seq, description)
        if old != description:
            self.clashes.append(f"seq {seq}: pushed as {old} and as {description}")


def describe(kind: str, body: dict[str, Any]) -> str:
    """A short, viewer-independent description of a record: its type and what redaction keeps.

    Args:
        kind: the record type (a push's ``kind``).
        body: the push's ``event`` object, or the log record's fields.
    """
    if kind == "event":
        inner = body.get("event")
        return f"event:{inner.get('type') if isinstance(inner, dict) else '?'}"
    if kind == "action":
        action = body.get("action")
        kind_of = action.get("type") if isinstance(action, dict) else "?"
        return f"action:seat {body.get('seat')}:{kind_of}"
    if kind == "seat_taken":
        return f"seat_taken:seat {body.get('seat')}"
    if kind == "ended":
        return f"ended:{body.get('aborted') or 'played'}"
    return kind


def _push_body(push: dict[str, Any]) -> dict[str, Any]:
    """A push's record in the shape of a log record's fields (an event push wraps the event)."""
    ev = push.get("event")
    if push.get("kind") == "event":
        return {"event": ev}
    return ev if isinstance(ev, dict) else {}


@attrs.define
class ChaosReport:
    """What a chaos run found. ``lines()`` is its printout, ``ok`` its verdict.

    Attributes:
        sessions_requested: tables the run meant to create.
        sessions_created: ``create`` requests answered with a session.
        creates_lost: ``create`` requests whose connection died before the reply.
        logs: session logs found in the data dir afterwards.
        kills: SIGKILLs sent.
        kill_moments: kills by when they landed (while a wave was created, in mid-play).
        restarts: host starts after a kill that printed ``listening``.
        acknowledged: per acknowledged session, records 0 .. its highest acknowledged seq, summed.
        found: records in those sessions' logs afterwards.
        lost: acknowledged records missing from their log, or found there different.
        lost_detail: the first few of those, one line each.
        played_out: logs ending with a played-out ``ended`` record.
        aborted: logs ending with ``ended`` with ``aborted`` set, by reason.
        not_ended: the sessions whose log does not end with ``ended``: id (records, and
            whether any client was told of it).
        orphans: sessions with a log that no client was told of (its ``create`` reply was lost).
        unreadable: logs that could not be read, with the error.
        resumes_ok: ``resume`` requests answered with the seat.
        resumes_failed: ``resume`` requests refused (transient refusals retried), by error code.
        joins_ok: ``join`` requests answered with a seat.
        joins_lost: ``join`` requests whose connection died before the reply (the client then
            joins again: the seat the lost reply held, if it was taken, has no client).
        joins_refused: ``join`` requests refused for good, by code (``session_full``: a lost
            join reply had taken the last free seat).
        seats_unfinished: human clients that held a seat but never saw their session end.
        act_errors: ``act`` refusals other than ``conflict`` / ``not_your_turn``, by code.
        timeouts: requests that waited ``REQUEST_TIMEOUT`` seconds without a reply.
        push_gaps: pushed seqs that skipped records a client had not seen.
        verify_ok: logs ``gamehost replay --verify`` accepted.
        verify_failed: the others, with the first line of its output.
        stop_status: the host's exit status after SIGTERM (None: it had to be SIGKILLed).
        stop_seconds: how long the SIGTERM stop took, seconds.
        host_warnings: warning lines in the host's log, by event.
        host_errors: error lines (and non-JSON lines) in the host's log, by event.
        problems: what went wrong in the run itself (a host that did not restart, a deadline).
        takeovers: seconds from a kill to another host's ``lease_taken``, one per session the
            killed host drove (several hosts only).
        takeovers_missing: sessions a killed host drove that no host took over and that did
            not end.
        seconds: wall time of the run, seconds.
        data_dir: where the logs and ``host.log`` are.
    """

    sessions_requested: int
    kills_requested: int
    data_dir: Path
    sessions_created: int = 0
    creates_lost: int = 0
    logs: int = 0
    kills: int = 0
    kill_moments: Counter[str] = attrs.field(factory=Counter)
    restarts: int = 0
    acknowledged: int = 0
    found: int = 0
    lost: int = 0
    lost_detail: list[str] = attrs.field(factory=list)
    played_out: int = 0
    aborted: Counter[str] = attrs.field(factory=Counter)
    not_ended: list[str] = attrs.field(factory=list)
    orphans: list[str] = attrs.field(factory=list)
    unreadable: list[str] = attrs.field(factory=list)
    resumes_ok: int = 0
    resumes_failed: Counter[str] = attrs.field(factory=Counter)
    joins_ok: int = 0
    joins_lost: int = 0
    joins_refused: Counter[str] = attrs.field(factory=Counter)
    seats_unfinished: int = 0
    act_errors: Counter[str] = attrs.field(factory=Counter)
    timeouts: int = 0
    push_gaps: int = 0
    verify_ok: int = 0
    verify_failed: list[str] = attrs.field(factory=list)
    stop_status: int | None = None
    stop_seconds: float = 0.0
    host_warnings: Counter[str] = attrs.field(factory=Counter)
    host_errors: Counter[str] = attrs.field(factory=Counter)
    problems: list[str] = attrs.field(factory=list)
    takeovers: list[float] = attrs.field(factory=list)
    takeovers_missing: list[str] = attrs.field(factory=list)
    hosts: int = 1
    seconds: float = 0.0

    @property
    def ended(self) -> int:
        """Logs that end with an ``ended`` record."""
        return self.played_out + sum(self.aborted.values())

    def failures(self) -> list[str]:
        """Why the run fails its acceptance; empty when it passes."""
        out = list(self.problems)
        if self.kills < self.kills_requested:
            out.append(f"{self.kills} of {self.kills_requested} kills done")
        if self.lost:
            out.append(f"{self.lost} acknowledged events lost")
        if self.not_ended:
            out.append(f"{len(self.not_ended)} sessions not ended")
        if self.unreadable:
            out.append(f"{len(self.unreadable)} logs unreadable")
        if self.verify_failed:
            out.append(f"{len(self.verify_failed)} logs failed replay --verify")
        if self.resumes_failed:
            out.append(f"{sum(self.resumes_failed.values())} resumes failed")
        if self.push_gaps:
            out.append(f"{self.push_gaps} gaps in pushed seqs")
        if self.stop_status != 0:
            out.append(f"the host's SIGTERM stop ended with status {self.stop_status}")
        slow = [t for t in self.takeovers if t > TAKEOVER_LIMIT]
        if slow:
            out.append(f"{len(slow)} takeovers took more than {TAKEOVER_LIMIT:g} s")
        if self.takeovers_missing:
            out.append(f"{len(self.takeovers_missing)} sessions of a killed host not taken over")
        return out

    @property
    def ok(self) -> bool:
        """True when :meth:`failures` is empty."""
        return not self.failures()

    def lines(self) -> list[str]:
        """The printout: one figure per line, the verdict last."""

        def counts(c: Counter[str]) -> str:
            return ", ".join(f"{k} x{n}" for k, n in c.most_common()) or "none"

        aborted = sum(self.aborted.values())
        out = [
            f"sessions: {self.sessions_requested} requested, {self.sessions_created} created"
            f" ({self.creates_lost} create replies lost), {self.logs} logs"
            f" ({len(self.orphans)} no client was told of)",
            f"kills: {self.kills} SIGKILLs ({self.kills_requested} requested;"
            f" {counts(self.kill_moments)})",
            f"restarts: {self.restarts}" + (f" ({self.hosts} hosts)" if self.hosts > 1 else ""),
            f"events acknowledged: {self.acknowledged} (records 0..highest acknowledged seq,"
            " per session, summed)",
            f"events found in the logs afterwards: {self.found} (same sessions)",
            f"lost acknowledged events: {self.lost}",
            *(f"  lost: {d}" for d in self.lost_detail),
            f"sessions ended: {self.ended} ({self.played_out} played out, {aborted} aborted:"
            f" {counts(self.aborted)})",
            f"sessions NOT ended: {len(self.not_ended)}"
            + (f": {', '.join(self.not_ended)}" if self.not_ended else ""),
            f"resumes: {self.resumes_ok} worked, {sum(self.resumes_failed.values())} failed"
            f" ({counts(self.resumes_failed)})",
            f"joins: {self.joins_ok} answered, {self.joins_lost} replies lost,"
            f" refused: {counts(self.joins_refused)};"
            f" {self.seats_unfinished} seated clients never saw their session end",
            f"client anomalies: {self.push_gaps} push gaps, {self.timeouts} request timeouts,"
            f" act refusals: {counts(self.act_errors)}",
            *(
                [
                    f"bot takeovers: {len(self.takeovers)}"
                    + (
                        f", {min(self.takeovers):.2f} to {max(self.takeovers):.2f} s (limit"
                        f" {TAKEOVER_LIMIT:g} s)"
                        if self.takeovers
                        else ""
                    )
                    + f"; {len(self.takeovers_missing)} not taken over"
                ]
                if self.hosts > 1
                else []
            ),
            f"replay --verify: {self.verify_ok} ok, {len(self.verify_failed)} failed",
            *(f"  verify failed: {v}" for v in self.verify_failed[:10]),
            *(f"  unreadable: {u}" for u in self.unreadable[:10]),
            f"host stop (SIGTERM): status {self.stop_status} after {self.stop_seconds:.1f} s;"
            f" host log {self.data_dir / ('host*.log' if self.hosts > 1 else 'host.log')}:"
            f" {sum(self.host_errors.values())} errors"
            f" ({counts(self.host_errors)}), {sum(self.host_warnings.values())} warnings"
            f" ({counts(self.host_warnings)})",
            f"run time: {self.seconds:.1f} s",
        ]
        fails = self.failures()
        out.append("ok" if not fails else "FAILED: " + "; ".join(fails))
        return out


class _Progress:
    """Counts pushes seen by every client; a task can wait for a count (the kill moments)."""

    def __init__(self) -> None:
        self.n = 0
        self._waiters: list[tuple[int, trio.Event]] = []

    def tick(self) -> None:
        self.n += 1
        for target, ev in self._waiters:
            if self.n >= target:
                ev.set()

    async def wait_for(self, target: int) -> None:
        if self.n >= target:
            return
        ev = trio.Event()
        self._waiters.append((target, ev))
        try:
            await ev.wait()
        finally:
            self._waiters.remove((target, ev))


@attrs.define(eq=False)
class _Run:
    """The state shared by the tasks of one run."""

    cfg: ChaosConfig
    report: ChaosReport
    hosts: list[HostProcess]
    rng: random.Random
    ledgers: dict[str, Ledger] = attrs.field(factory=dict)
    progress: _Progress = attrs.field(factory=_Progress)
    seats_running: int = 0
    changed: trio.Event = attrs.field(factory=trio.Event)
    procs: trio.Nursery | None = None
    killed: list[tuple[float, set[str]]] = attrs.field(factory=list)  # when; sessions it drove
    creating: int = 0  # tables whose create has not been answered yet

    def hosts_changed(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def connect(self, rng: random.Random) -> Client:
        """A connection to a host that is up, retried with a bounded backoff until one is."""
        pause = BACKOFF[0]
        while True:
            ports = [h.port for h in self.hosts if h.port is not None]
            if ports:
                try:
                    return await Client.connect("127.0.0.1", rng.choice(ports))
                except OSError:
                    pass
            with trio.move_on_after(pause * (0.5 + rng.random())):
                await self.changed.wait()
            pause = min(BACKOFF[1], pause * 2)


async def _request(c: Client, op: str, **params: Any) -> dict[str, Any]:
    """A request bounded by ``REQUEST_TIMEOUT``.

    Raises:
        _Disconnected: the connection died or the reply did not come in time.
    """
    with trio.move_on_after(REQUEST_TIMEOUT):
        try:
            return await c.request(op, **params)
        except _LINK_ERRORS as exc:
            raise _Disconnected(f"{op}: {exc}") from None
    raise _Disconnected(f"{op}: no reply in {REQUEST_TIMEOUT:.0f} s")


def _code(reply: dict[str, Any]) -> str:
    return str((reply.get("error") or {}).get("code"))


async def _with_connection(
    run: _Run, rng: random.Random, body: Callable[[Client], Awaitable[T]]
) -> T:
    """Run ``body`` on a new connection to a host that is up, then hang up.

    Raises:
        _Disconnected: the connection ended before ``body`` did.
    """
    c = await run.connect(rng)
    lost: _Disconnected | None = None
    try:
        async with trio.open_nursery() as n:
            c.start(n)
            try:
                result = await body(c)
            except _Disconnected as exc:
                lost = exc
            n.cancel_scope.cancel()
    finally:
        await c.aclose()
    if lost is not None:
        raise lost
    return result


async def _table(run: _Run, k: int, rng: random.Random, nursery: trio.Nursery) -> None:
    """Create table ``k`` (again if the reply was lost) and start its human clients."""
    game = run.cfg.games[k % len(run.cfg.games)]
    low, high, options = GAMES.get(game, (2, 4, {}))
    seats = rng.randint(low, high)
    humans = rng.randint(1, min(3, seats))

    async def create(c: Client) -> dict[str, Any]:
        return await _request(
            c, "create", game=game, seats=seats, bots=seats - humans, options=options
        )

    reply: dict[str, Any] | None = None
    try:  # run.creating was counted up when this task was started
        for _ in range(20):
            try:
                reply = await _with_connection(run, rng, create)
            except _Disconnected:
                run.report.creates_lost += 1
                continue
            if reply.get("ok") or _code(reply) not in _TRANSIENT:
                break
            await trio.sleep(rng.uniform(*BACKOFF))
    finally:
        run.creating -= 1
    if reply is None or not reply.get("ok"):
        run.report.problems.append(f"table {k} ({game}): create failed: {reply}")
        return
    sid = reply["result"]["session"]
    run.report.sessions_created += 1
    ledger = run.ledgers[sid] = Ledger(sid, game)
    ledger.ack(reply["result"].get("seq"))
    for i in range(humans):
        run.seats_running += 1
        nursery.start_soon(_human, run, ledger, f"t{k}h{i}", random.Random(rng.getrandbits(64)))


@attrs.define
class _Seat:
    """A human client's memory: its seat and token, the last seq it saw, whether it is done."""

    name: str
    token: str | None = None
    seat: int | None = None
    last_seq: int = -1
    ended: bool = False
    gave_up: bool = False


async def _human(run: _Run, ledger: Ledger, name: str, rng: random.Random) -> None:
    """One human client: join, play random legal actions, resume after every disconnection."""
    st = _Seat(name)
    try:
        for _ in range(MAX_CONNECTIONS):
            if st.ended or st.gave_up:
                return
            try:
                await _with_connection(run, rng, lambda c: _seat_on(c, run, ledger, rng, st))
            except _Disconnected:
                if st.token is None:
                    run.report.joins_lost += 1
    finally:
        run.seats_running -= 1
        if st.token is not None and not st.ended:
            run.report.seats_unfinished += 1


async def _refused(
    reply: dict[str, Any], refusals: Counter[str], st: _Seat, rng: random.Random
) -> None:
    """A refused ``join``/``resume``: back off and let the caller try again if the refusal is
    transient (the host restarting), else count it in ``refusals`` and give the seat up."""
    code = _code(reply)
    if code in _TRANSIENT:
        await trio.sleep(rng.uniform(*BACKOFF))
    else:
        refusals[code] += 1
        st.gave_up = True


async def _seat_on(c: Client, run: _Run, ledger: Ledger, rng: random.Random, st: _Seat) -> None:
    """On one connection: join (or resume the seat), then play until the session ends.

    Raises:
        _Disconnected: the connection ended first.
    """
    if st.token is None:
        reply = await _request(c, "join", session=ledger.session, name=st.name)
        if not reply.get("ok"):
            await _refused(reply, run.report.joins_refused, st, rng)
            return
        run.report.joins_ok += 1
        res = reply["result"]
        st.token, st.seat, st.last_seq = res["token"], res["seat"], res["seq"]
    else:
        reply = await _request(
            c, "resume", session=ledger.session, token=st.token, after=st.last_seq
        )
        if not reply.get("ok"):
            await _refused(reply, run.report.resumes_failed, st, rng)
            return
        run.report.resumes_ok += 1
        res = reply["result"]
    ledger.ack(res.get("seq"))
    st.ended = bool(res.get("ended"))
    ledger.ended = ledger.ended or st.ended
    sid = ledger.session
    while True:
        if st.ended:  # what was pushed before the end still goes into the ledger
            try:
                p = c.pushes.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                return
        else:
            p = await c.next_push()
            if p is None:
                raise _Disconnected("EOF")
        kind = p.get("push")
        if kind == "closed":
            raise _Disconnected(f"closed: {p.get('reason')}")
        if p.get("session") != sid:
            continue
        seq = p.get("seq")
        run.progress.tick()
        if kind == "event" and isinstance(seq, int):
            if seq > st.last_seq + 1:
                run.report.push_gaps += 1
            st.last_seq = max(st.last_seq, seq)
            ledger.saw(seq, describe(str(p.get("kind")), _push_body(p)))
        elif kind == "ended":
            ledger.ack(seq)
            st.ended = ledger.ended = True
        elif kind == "turn" and p.get("seat") == st.seat and p.get("legal") and not st.ended:
            ledger.ack(seq)
            await trio.sleep(rng.uniform(0, run.cfg.think))
            action = pick_action(p["legal"], rng)
            reply = await _request(c, "act", session=sid, action=action, seq=seq)
            if reply.get("ok"):
                ledger.ack(reply["result"].get("seq"))
            elif _code(reply) not in ("conflict", "not_your_turn"):
                run.report.act_errors[_code(reply)] += 1


def pick_action(legal: list[dict[str, Any]], rng: random.Random) -> dict[str, Any]:
    """A random legal action; ``draw`` only a quarter of the time something else is legal.

    Uniform play draws so often that a Crazy Eights match can run past ten thousand records;
    this keeps sessions to seconds and still plays every kind of action.
    """
    others = [a for a in legal if a.get("type") != "draw"]
    if others and rng.random() < 0.75:
        return rng.choice(others)
    return rng.choice(legal)


def _last_type(path: Path) -> str | None:
    """The ``type`` of a log's last complete line, None if unreadable (cheap: reads the tail)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 8192))
            tail = f.read()
    except OSError:
        return None
    lines = tail.split(b"\n")
    for line in reversed(lines[:-1] if not tail.endswith(b"\n") else lines):
        if line.strip():
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                return None
            return rec.get("type") if isinstance(rec, dict) else None
    return None


def _all_ended(sessions_dir: Path) -> bool:
    paths = list(sessions_dir.glob("*.jsonl"))
    return bool(paths) and all(_last_type(p) == "ended" for p in paths)


async def _kill_loop(run: _Run, tables: trio.Nursery, waves: list[list[int]]) -> None:
    """Create each wave of tables, then kill and restart a host at a random moment."""
    cfg = run.cfg
    share = round(cfg.kills * cfg.create_kills)
    if cfg.create_kills > 0 and cfg.kills >= 2:
        share = max(1, share)
    during_create = set(run.rng.sample(range(cfg.kills), min(cfg.kills, share)))
    for i, wave in enumerate(waves):
        for k in wave:
            run.creating += 1  # the run does not settle while a table is still being created
            tables.start_soon(_table, run, k, random.Random(run.rng.getrandbits(64)), tables)
        if i == len(waves) - 1:
            return
        if i in during_create:
            moment = "while a wave is created"
            await trio.sleep(run.rng.uniform(0, CREATE_KILL_WINDOW))
        else:
            moment = "in mid-play"
            await trio.sleep(run.rng.uniform(*cfg.kill_pause))
            with trio.move_on_after(cfg.kill_pause[1] * 3):
                await run.progress.wait_for(run.progress.n + run.rng.randint(1, cfg.kill_pushes))
        assert run.procs is not None
        for h in run.hosts:
            if h.port is None and h.proc is not None and h.proc.returncode is not None:
                await h.start(run.procs)  # it exited by itself (reported): bring it back
                run.report.restarts += 1
                run.hosts_changed()
        host = run.rng.choice([h for h in run.hosts if h.port is not None])
        drove = host.driving()
        await host.kill()
        run.killed.append((time.monotonic(), drove))
        run.report.kills += 1
        run.report.kill_moments[moment] += 1
        run.hosts_changed()
        await trio.sleep(run.rng.uniform(0, cfg.down_seconds))
        await host.start(run.procs)
        run.report.restarts += 1
        run.hosts_changed()


async def _settle(run: _Run, sessions_dir: Path) -> None:
    """Wait (polling the logs, bounded by the caller) until every session has ended."""
    store = run.cfg.store
    while True:
        if run.seats_running == 0 and run.creating == 0:
            if store is None:
                if _all_ended(sessions_dir):
                    return
            elif await trio.to_thread.run_sync(_all_ended_in_database, store):
                return
        await trio.sleep(0.5)


def _all_ended_in_database(dsn: str) -> bool:
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE NOT ended) FROM gamehost_sessions"
        ).fetchone()
    return row is not None and row[0] > 0 and row[1] == 0


def _check_database(dsn: str) -> str | None:
    """Create the schema if needed (``gamehost db init``); what is wrong with ``dsn`` for a
    chaos run (unreachable, sessions in it already), or None."""
    import psycopg

    done = subprocess.run(
        [sys.executable, "-m", "tools.cli", "db", "init", "--store", dsn],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["db init failed"])[-1]
    try:
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SELECT count(*) FROM gamehost_sessions").fetchone()
    except psycopg.Error as exc:
        return str(exc).strip()
    if row and row[0]:
        return f"the database holds {row[0]} sessions already: use a fresh one"
    return None


def read_database(dsn: str) -> dict[str, list[bytes]]:
    """Every session's records in a PostgreSQL store: session id -> its lines, in seq order
    (each the exact JSON line a file store would hold, with the stored checksum, without the
    newline; a row whose checksum covers its session id and seq as well gets the line's own)."""
    import psycopg

    from host.store.pg import ROW_CRC_V2

    out: dict[str, list[bytes]] = {}
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT session_id, line, crc FROM gamehost_records ORDER BY session_id, seq"
        )
        for sid, line, crc in rows:
            body = line.encode()
            if crc is not None:
                body = frame(body, None if crc >= ROW_CRC_V2 else crc)[:-1]
            out.setdefault(sid, []).append(body)
    return out


def _takeovers(run: _Run, ended: set[str]) -> None:
    """Fill the report's takeover figures from the kills and every host's lease lines."""
    taken: dict[str, list[float]] = {}
    for h in run.hosts:
        for at, event, sid in h.leases:
            if event == "lease_taken":
                taken.setdefault(sid, []).append(at)
    for when, drove in run.killed:
        for sid in sorted(drove):
            later = [at for at in taken.get(sid, ()) if at >= when]
            if later:
                run.report.takeovers.append(min(later) - when)
            elif sid not in ended:
                run.report.takeovers_missing.append(sid)


def check_logs(report: ChaosReport, ledgers: dict[str, Ledger], sessions_dir: Path) -> None:
    """Compare the ledgers with the logs in ``sessions_dir`` and fill ``report``'s figures.

    Every acknowledged seq must be in its session's log, and every record a client was pushed
    must be described the same way by the log (:func:`describe`). Sets ``logs``,
    ``acknowledged``, ``found``, ``lost``, ``lost_detail``, ``played_out``, ``aborted``,
    ``not_ended``, ``orphans`` and ``unreadable``.
    """
    records: dict[str, list[dict[str, Any]]] = {}
    paths = sorted(sessions_dir.glob("*.jsonl"))
    for path in paths:
        try:
            records[path.stem] = read_log(path)
        except (OSError, CorruptLog, ValueError, KeyError) as exc:
            report.unreadable.append(f"{path.name}: {type(exc).__name__}: {exc}")
    report.logs = len(paths)
    check_records(report, ledgers, records)


def check_records(
    report: ChaosReport, ledgers: dict[str, Ledger], records: dict[str, list[dict[str, Any]]]
) -> None:
    """:func:`check_logs` on records already read: session id -> its records as dicts, in seq
    order (from any store)."""

    def lose(n: int, why: str) -> None:
        report.lost += n
        if len(report.lost_detail) < 10:
            report.lost_detail.append(why)

    for sid, ledger in sorted(ledgers.items()):
        if ledger.max_seq < 0:
            continue
        report.acknowledged += ledger.max_seq + 1
        recs = records.get(sid)
        if recs is None:
            lose(ledger.max_seq + 1, f"{sid}: no readable log, {ledger.max_seq + 1} acknowledged")
            continue
        report.found += len(recs)
        if ledger.max_seq >= len(recs):
            lose(
                ledger.max_seq + 1 - len(recs),
                f"{sid}: acknowledged up to seq {ledger.max_seq}, the log ends at {len(recs) - 1}",
            )
        for seq, seen in sorted(ledger.pushed.items()):
            if seq < len(recs):
                rec = recs[seq]
                there = describe(str(rec.get("type")), rec)
                if there != seen:
                    lose(1, f"{sid}: seq {seq} was pushed as {seen}, the log has {there}")
        for clash in ledger.clashes:
            lose(1, f"{sid}: {clash}")
    for sid, recs in sorted(records.items()):
        if sid not in ledgers:
            report.orphans.append(sid)
        last = recs[-1] if recs else {}
        if last.get("type") != "ended":
            told = "" if sid in ledgers else ", no client was told of it"
            report.not_ended.append(f"{sid} ({len(recs)} records{told})")
        elif last.get("outcome") is None and last.get("aborted"):
            report.aborted[str(last["aborted"])] += 1
        else:
            report.played_out += 1


async def _verify_all(
    report: ChaosReport,
    sessions_dir: Path,
    parallel: int = 2,
    progress: Progress | None = None,
) -> None:
    """Run ``gamehost replay --verify`` on every log, ``parallel`` at a time (``progress``
    told of each log done)."""
    limit = trio.CapacityLimiter(parallel)
    paths = sorted(sessions_dir.glob("*.jsonl"))
    if progress is not None:
        progress.update(0, total=len(paths))

    async def one(path: Path) -> None:
        async with limit:
            try:
                await check(path)
            finally:
                if progress is not None:
                    failed = len(report.verify_failed)
                    progress.advance(status=f"{failed} failed" if failed else "")

    async def check(path: Path) -> None:
        argv = [sys.executable, "-m", "tools.cli", "replay", "--verify", str(path)]
        with trio.move_on_after(VERIFY_TIMEOUT):
            done = await trio.run_process(
                argv, capture_stdout=True, capture_stderr=True, check=False
            )
            if done.returncode == 0:
                report.verify_ok += 1
                return
            text = (done.stdout + done.stderr).decode(errors="replace").strip()
            tail = text.splitlines()[-1] if text else ""
            report.verify_failed.append(f"{path.name}: status {done.returncode}: {tail}")
            return
        report.verify_failed.append(f"{path.name}: no answer in {VERIFY_TIMEOUT:.0f} s")

    async with trio.open_nursery() as n:
        for path in paths:
            n.start_soon(one, path)


def _waves(sessions: int, kills: int) -> list[list[int]]:
    """Table numbers by wave: one wave before each kill and one after the last."""
    count = kills + 1
    return [list(range(sessions))[i::count] for i in range(count)]


CHAOS_TIMERS = ("--turn-timeout=5", "--abandon-after=10")
"""The host's timers in a kill loop unless ``--serve-arg`` sets others (the last flag wins)."""


async def chaos(cfg: ChaosConfig, progress: bool = False) -> ChaosReport:
    """Run the kill loop and check its logs (see the module docstring). With ``progress``, the
    play's progress (sessions ended, kills, seats playing, pushes) and then the verification's
    (logs verified) show on stdout (:mod:`tools.progress`).

    Returns:
        The report; its ``ok`` is the verdict.
    """
    t0 = time.monotonic()
    data_dir = cfg.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    sessions_dir = data_dir / "sessions"
    report = ChaosReport(cfg.sessions, cfg.kills, data_dir)
    report.hosts = cfg.hosts
    # timers short enough to end, within the settle window, a table whose create or join reply
    # a kill swallowed (its client asks again; the orphan is abandoned); --serve-arg overrides
    if cfg.store is None:
        argv = [*serve_command(cfg.fsync, str(data_dir)), *CHAOS_TIMERS, *cfg.serve_args]
        hosts = [HostProcess("host", argv, data_dir / "host.log")]
    else:  # several hosts on one database
        hosts = []
        for i in range(cfg.hosts):
            own = data_dir / f"host{i}"
            argv = [*serve_command(cfg.fsync, str(own)), "--store", cfg.store]
            argv += [*CHAOS_TIMERS, *cfg.serve_args]
            hosts.append(HostProcess(f"host{i}", argv, data_dir / f"host{i}.log"))
    run = _Run(cfg, report, hosts, random.Random(cfg.seed))
    deadline = trio.current_time() + cfg.max_seconds
    async with trio.open_nursery() as procs:
        run.procs = procs
        showing = trio.CancelScope()
        if progress:
            procs.start_soon(_show_play, run, showing)
        try:
            with trio.move_on_at(deadline) as play:
                async with trio.open_nursery() as tables:
                    try:
                        for h in hosts:
                            await h.start(procs)
                        run.hosts_changed()
                        await _kill_loop(run, tables, _waves(cfg.sessions, cfg.kills))
                        with trio.move_on_after(cfg.settle_seconds):
                            await _settle(run, sessions_dir)
                    except HostFailed as exc:
                        report.problems.append(str(exc))
                    tables.cancel_scope.cancel()
            if play.cancelled_caught:
                report.problems.append(f"the play reached --max-seconds ({cfg.max_seconds:.0f} s)")
        finally:
            showing.cancel()
            with trio.CancelScope(shield=True):
                report.stop_status = 0
                for h in hosts:
                    status, took = await h.stop()
                    if status != 0:
                        report.stop_status = status
                    report.stop_seconds = max(report.stop_seconds, took)
    for h in hosts:
        report.host_warnings.update(h.warnings)
        report.host_errors.update(h.errors)
        report.problems.extend(
            f"{h.name} exited by itself with status {status}" for status in h.exits
        )
    if cfg.store is None:
        check_logs(report, run.ledgers, sessions_dir)
    else:  # read the database, then export it as JSONL for replay --verify
        lines = await trio.to_thread.run_sync(read_database, cfg.store)
        records = {sid: [orjson.loads(body_of(line)) for line in ls] for sid, ls in lines.items()}
        report.logs = len(records)
        check_records(report, run.ledgers, records)
        ended = {sid for sid, recs in records.items() if recs and recs[-1]["type"] == "ended"}
        _takeovers(run, ended)
        sessions_dir.mkdir(parents=True, exist_ok=True)
        for sid, ls in lines.items():
            (sessions_dir / f"{sid}.jsonl").write_bytes(b"".join(line + b"\n" for line in ls))
    if progress:
        with Progress("chaos: replay --verify", unit="logs") as shown:
            await _verify_all(report, sessions_dir, progress=shown)
    else:
        await _verify_all(report, sessions_dir)
    report.seconds = time.monotonic() - t0
    return report


async def _show_play(run: _Run, scope: trio.CancelScope) -> None:
    """The play's progress until ``scope`` is cancelled (the play is over): sessions whose end
    a client saw, of those to create; kills done; seats still playing; pushes seen."""
    cfg = run.cfg
    with scope, Progress("chaos: play", cfg.sessions, "sessions ended") as shown:
        while True:
            ended = sum(1 for ledger in run.ledgers.values() if ledger.ended)
            shown.update(
                ended,
                status=f"kills {run.report.kills}/{cfg.kills}, {run.seats_running} seats"
                f" playing, {run.progress.n:,} pushes",
            )
            await trio.sleep(0.5)


def run_chaos(cfg: ChaosConfig, progress: bool = False) -> ChaosReport:
    """:func:`chaos` in a new trio run (for the CLI)."""
    return trio.run(chaos, cfg, progress)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``chaos`` sub-command."""
    p = sub.add_parser(
        "chaos", help="SIGKILL a host under load; check nothing acknowledged is lost"
    )
    p.add_argument("--sessions", type=int, default=50, help="tables to create")
    p.add_argument("--kills", type=int, default=10, help="SIGKILLs of the host")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data-dir", type=Path, help="the host's data dir (default: a new temp dir)")
    p.add_argument("--game", default="all", help="a game id, or all (the default)")
    p.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="pass ARG to gamehost serve (repeatable; write --serve-arg=--turn-timeout=2)",
    )
    p.add_argument("--fsync", choices=["always", "batch", "never"], default="batch")
    p.add_argument("--max-seconds", type=float, default=240.0, help="bound on the whole play")
    p.add_argument(
        "--settle-seconds",
        type=float,
        default=90.0,
        help="after the last kill, seconds the sessions get to end",
    )
    p.add_argument(
        "--think", type=float, default=0.03, help="seconds a client waits at most before acting"
    )
    p.add_argument(
        "--store",
        help="a PostgreSQL URL (postgresql://...) with no sessions yet: the hosts share it"
        " (default: one host on the file store in --data-dir)",
    )
    p.add_argument(
        "--hosts", type=int, default=1, help="hosts on the --store database (each kill hits one)"
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run the loop, print the report; exit status 0 (ok), 1 (failed) or 2 (bad arguments)."""
    games = tuple(GAMES) if args.game == "all" else (args.game,)
    if args.sessions < 1 or args.kills < 0 or not 0 < args.max_seconds < math.inf:
        print("error: --sessions must be >= 1, --kills >= 0, --max-seconds > 0", file=sys.stderr)
        return 2
    if args.hosts < 1 or (args.hosts > 1 and not args.store):
        print("error: --hosts must be >= 1; more than 1 needs --store", file=sys.stderr)
        return 2
    if args.store:
        problem = _check_database(args.store)
        if problem:
            print(f"error: --store: {problem}", file=sys.stderr)
            return 2
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="gamehost-chaos-"))
    if (data_dir / "sessions").exists() and any((data_dir / "sessions").iterdir()):
        print(f"error: {data_dir}/sessions is not empty: use a fresh data dir", file=sys.stderr)
        return 2
    cfg = ChaosConfig(
        sessions=args.sessions,
        kills=args.kills,
        seed=args.seed,
        data_dir=data_dir,
        games=games,
        serve_args=tuple(args.serve_arg),
        fsync=args.fsync,
        max_seconds=args.max_seconds,
        settle_seconds=args.settle_seconds,
        think=args.think,
        hosts=args.hosts,
        store=args.store,
    )
    logs.configure(json=False, level="warning")  # the checker's own findings, on stderr
    print(f"chaos: {cfg.sessions} sessions, {cfg.kills} kills, seed {cfg.seed}, data in {data_dir}")
    report = run_chaos(cfg, progress=True)
    for line in report.lines():
        print(line)
    return 0 if report.ok else 1
