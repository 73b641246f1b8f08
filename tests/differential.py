"""The differential harness: one scenario played on three topologies of ``gamehost serve``.

The project promises that every session is rebuilt from its log, so one host, that host after a
SIGKILL and a restart, and two hosts on one PostgreSQL database must answer the same commands
alike. This module holds the host to that as a user would run it: real ``gamehost serve``
processes (``python -m tools.cli serve``) over TCP, each on ``--port 0``, the port read from its
``listening`` JSON log line.

**A scenario** (:class:`Scenario`) is a session (:class:`Table`: game, seats, bots, options)
and a list of :class:`Step` for *logical connections* L0..Lk, each assigned a host slot (0 or
1). Steps: ``join`` a seat (the token is kept), ``act`` (answer the connection's latest ``turn``
push with an action drawn by a seeded RNG from its ``legal``, naming its ``seq``), ``stale``
(the same, but naming the seq of the turn push the connection held at an earlier step),
``resume`` a seat by its token with ``after`` = the last seq the connection saw (from another
connection than the holder's: a takeover), ``resume_close`` (the same, sent together with the
connection's FIN; then the connection is gone), ``leave``, ``watch``, ``view``, ``bounce``,
``undo`` (ask to take back the seat's last action) and ``accept`` / ``refuse`` (answer the
request that waits: ``undo_answer``).
A scenario's steps are a fixed list, or made step by step by a *driver* that looks at what
topology A has seen so far (then B and C run the steps A's driver chose, in lockstep).

**The topologies** (:class:`Topology`):

- ``A``: one host on a file data dir; every slot maps to it.
- ``B``: the same, but a ``bounce`` SIGKILLs the host and restarts it on the same data dir.
- ``C``: two hosts on one PostgreSQL database (``--store postgresql://...``); slot 0 -> host 1,
  slot 1 -> host 2.

The session exists in all three with the same id and seed: its log (header with
``turn_timeout`` null, then the bots' ``seat_taken`` records, as ``create`` writes them) is
written through the store API before the hosts start. The hosts serve with
``--turn-timeout 0 --abandon-after 0 --idle-timeout 0``, so no timer fires.

A ``bounce`` in A and C closes every logical connection one at a time, seated ones in seat
order, then spectators and seatless ones by index: the client half-closes, reads to the host's
EOF (the host has dropped the connection by then), and for a seated connection waits until the
host has logged the ``seat_released`` record the close causes (unless the session has ended:
nothing follows its end). In B it is a SIGKILL and a
restart, nothing else. Then in all three every logical connection is reopened in that same
order: a new TCP connection, ``hello``, then ``resume`` (token, ``after`` = the last seq it saw)
if it held a seat, or ``watch`` if it watched. These reopen requests are part of every
topology's transcript.

**Quiet**: after each step the harness waits, event-driven, until the table is quiet before the
next step. One *monitor* connection per host watches the session (it is never compared): the
step is settled when every monitor's ``view`` has reached the highest seq any connection has
seen, no bot is in ``to_act`` (bots act at once), and every connection that plays or watches
has been pushed every record up to that seq, plus a ``turn`` push at that seq if its seat is to
act (and the ``ended`` push once the session is over). A wait that passes :data:`WAIT_TIMEOUT`
seconds is noted in the transcript (a difference in itself); after :data:`MAX_TIMEOUTS` of them
a topology stops playing.

**Compared per logical connection** (:func:`compare`; tokens replaced by placeholders): (1) the
reply to each of its steps, in order; (2) the event pushes it was shown, merged across its
reconnects (each seq once, in seq order; a record pushed twice must be pushed alike): ``seq``,
``kind`` and ``event``; (3) at each step it takes, the latest ``turn`` push it holds (``seq``,
``legal``, ``to_act``, ``deadline``) when that is at the table's seq as the step begins, else
null (which turn pushes a seat got for a state that did not last, bots moving on at once,
depends on a host that follows another's appends: it pushes what it read in one go as one
change); (4) its other pushes (``presence``, ``undo_asked``, ``detached``, ``ended``, ...) in
order, ``closed`` excepted; and the harness's notes (waits that timed out). An undo request's
``expires`` (its record's time plus 30 s, so another moment in each topology) is compared as a
placeholder; each topology's hosts must give one ``at`` per request (:attr:`Topology.expiries`).
Replies carry snapshots, so their ``connected`` flags and ``deadline`` are compared too. A
spectator that watches again after a bounce was not shown the records between the last seq it
saw before the bounce and its new ``watch`` snapshot (``watch`` takes no ``after``): the event
and presence pushes of that window are left out of (2) and (4) in every topology. A bounce
releases the seats it cuts off as ``gone`` in A and C (their connections closed) and as
``host_gone`` in B (the host died): each topology says what happened to it, so a presence push's
``host_gone`` is compared as ``gone``.

:func:`run_scenario` runs a scenario on the three topologies and returns an :class:`Outcome`;
:meth:`Outcome.report` says where they first differ (the logical connection, the step, what
each topology gave) and lists every difference, the steps, and where the whole transcripts
were written.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import random
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import orjson
import trio

from host.net.session import seat_bots_step
from host.plugins.registry import Registry, load_registry
from host.store.file import FileStore
from host.store.pg import PostgresStore
from protocol.framing import LineBuffer, LineTooLong
from tools.chaos import HostProcess

__all__ = [
    "OPS",
    "TOPOLOGIES",
    "Logical",
    "Outcome",
    "RandomDriver",
    "Scenario",
    "Step",
    "Table",
    "Topology",
    "compare",
    "run_scenario",
    "session_records",
]

WAIT_TIMEOUT = 10.0
"""Seconds any one wait (a reply, pushes, a close, the table settling) may take before the
harness notes it and goes on."""
MAX_TIMEOUTS = 3
"""Waits that timed out after which a topology stops playing its scenario."""
START_TIMEOUT = 60.0
"""Seconds a host has to print its ``listening`` line."""
WATCH = "watch"
"""A logical connection's role while it watches the session."""
OPS = (
    "join",
    "act",
    "stale",
    "resume",
    "resume_close",
    "leave",
    "watch",
    "view",
    "bounce",
    "undo",
    "accept",
    "refuse",
)
"""The step kinds."""
TOPOLOGIES = {
    "A": "one host",
    "B": "one host, SIGKILLed and restarted at each bounce",
    "C": "two hosts on one PostgreSQL database",
}
"""The topologies' names and what each is."""

_registry: Registry | None = None


def registry() -> Registry:
    """The installed games (loaded once)."""
    global _registry
    if _registry is None:
        _registry = load_registry()
    return _registry


# -- scenarios --------------------------------------------------------------------------------
@attrs.frozen
class Table:
    """The session of a scenario: ``game`` id, ``seats``, ``bots`` (the last seats, as
    ``create`` seats them) and the game's ``options`` (wire form)."""

    game: str
    seats: int
    bots: int = 0
    options: dict[str, Any] = attrs.field(factory=dict)

    @property
    def bot_seats(self) -> list[int]:
        """The bots' seats."""
        return list(range(self.seats - self.bots, self.seats))

    @property
    def humans(self) -> list[int]:
        """The seats the logical connections may take."""
        return list(range(self.seats - self.bots))


@attrs.frozen
class Step:
    """One step of a scenario: ``op`` (one of :data:`OPS`), the logical connection ``conn``
    taking it (None for ``bounce``), the ``seat`` of a ``join``/``resume``/``resume_close``,
    and for ``stale`` the earlier step ``ref`` whose held turn push's seq it names."""

    op: str
    conn: int | None = None
    seat: int | None = None
    ref: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"no step {self.op!r}; steps: {', '.join(OPS)}")
        if (self.op == "bounce") != (self.conn is None):
            raise ValueError(f"{self.op}: a bounce names no connection, every other step one")

    def describe(self) -> str:
        """The step in a few words (``act L2``, ``resume L1 seat 0``, ``bounce``)."""
        if self.conn is None:
            return self.op
        text = f"{self.op} L{self.conn}"
        if self.seat is not None:
            text += f" seat {self.seat}"
        if self.ref is not None:
            text += f" (the seq of its turn push at step {self.ref})"
        return text


Driver = Callable[["Topology", int], "Step | None"]
"""Makes step ``i`` of a scenario from what topology A has seen (None: the scenario ends)."""


@attrs.frozen
class Scenario:
    """A session and the steps played on it.

    Attributes:
        name: names the session (its id and seed are derived from it) and the RNG draws.
        table: the session.
        slots: the host slot (0 or 1) of each logical connection L0, L1, ...
        steps: the fixed steps, or None when ``driver`` makes them.
        driver: called before each step with topology A and the step's index.
    """

    name: str
    table: Table
    slots: tuple[int, ...]
    steps: tuple[Step, ...] | None = None
    driver: Driver | None = None

    @property
    def session(self) -> str:
        """The session id (16 hex digits)."""
        return hashlib.sha256(f"differential-id:{self.name}".encode()).hexdigest()[:16]

    @property
    def seed(self) -> bytes:
        """The session's 32-byte seed (the same in every topology)."""
        return hashlib.sha256(f"differential:{self.name}".encode()).digest()

    def rng(self, step: int) -> random.Random:
        """The RNG of step ``step``'s action draw (the same in every topology)."""
        return random.Random(f"{self.name}:{step}")


def session_records(table: Table, sid: str, seed: bytes) -> list[dict[str, Any]]:
    """The records ``create`` would write for ``table`` (the header, ``turn_timeout`` null,
    then the bots' ``seat_taken`` records), with the given id and 32-byte seed.

    Raises:
        KeyError: the game is not installed. OptionError: a bad option.
    """
    engine = registry().engines[table.game]
    options = engine.codec.options_from_wire(table.options, table.seats)
    header = engine.header(sid, options, table.seats, table.bot_seats, seed)
    header.data["turn_timeout"] = None
    seated, _ = seat_bots_step(engine, engine.initial(header), table.bot_seats)
    return [r.to_json() for r in [header, *seated]]


async def write_log(
    store: FileStore | PostgresStore, sid: str, records: list[dict[str, Any]]
) -> None:
    """Create the session's log in ``store`` (its writer is run for the while)."""
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        try:
            await store.create(sid, records)
        finally:
            await store.aclose()


# -- connections ------------------------------------------------------------------------------
class Link:
    """One TCP connection to a host: a reader task hands each push to ``on_push`` and files
    each reply by its ``id``.

    Args:
        topology: the topology it belongs to (told of every line, for the waits).
        stream: the connected stream.
        on_push: called with each push (a dict).
    """

    def __init__(
        self,
        topology: Topology,
        stream: trio.SocketStream,
        on_push: Callable[[dict[str, Any]], None],
    ) -> None:
        self.topology = topology
        self.stream = stream
        self.on_push = on_push
        self.replies: dict[int, dict[str, Any]] = {}
        self.arrived: dict[int, int] = {}  # request id -> the line number of its reply
        self.closed = False  # the host's side ended (EOF or reset)
        self.answered_at = 0  # the line number of the last reply request() returned
        self._ids = itertools.count(1)

    async def reader(self) -> None:
        """Read until the host's side ends."""
        framer = LineBuffer(16 * 1024 * 1024)
        try:
            while True:
                data = await self.stream.receive_some(65536)
                if not data:
                    break
                for line in framer.feed(data):
                    if isinstance(line, LineTooLong):
                        continue
                    msg = orjson.loads(line)
                    self.topology.lines += 1
                    if "push" in msg:
                        self.on_push(msg)
                    elif isinstance(msg.get("id"), int):
                        self.replies[msg["id"]] = msg
                        self.arrived[msg["id"]] = self.topology.lines
                    self.topology.poke()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            self.closed = True
            self.topology.poke()

    def line(self, op: str, **params: Any) -> tuple[int, bytes]:
        """A request's id and line."""
        rid = next(self._ids)
        return rid, orjson.dumps({"id": rid, "op": op, **params}) + b"\n"

    async def request(self, op: str, **params: Any) -> dict[str, Any] | None:
        """Send a request and wait for its reply (None: the connection ended first, or no
        reply within :data:`WAIT_TIMEOUT`)."""
        if self.closed:
            return None
        rid, line = self.line(op, **params)
        try:
            await self.stream.send_all(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return None
        await self.topology.until(lambda: rid in self.replies or self.closed)
        self.answered_at = self.arrived.pop(rid, 0)
        return self.replies.pop(rid, None)

    async def half_close(self) -> bool:
        """Send FIN and read on until the host closes too (it has dropped the connection
        then); False if it did not within :data:`WAIT_TIMEOUT`."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await self.stream.send_eof()
        return await self.topology.until(lambda: self.closed)

    async def aclose(self) -> None:
        """Close the socket."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await self.stream.aclose()


EXPIRES = "<30 s after its undo_asked record>"
"""What an undo request's ``expires`` is compared as."""


def _timeless(value: Any, seen: dict[int, set[str]] | None = None, seq: Any = None) -> Any:
    """``value`` with each undo request's ``expires`` replaced by :data:`EXPIRES` (its ``at``
    noted in ``seen`` under the request's seq, when known)."""
    if isinstance(value, list):
        return [_timeless(v, seen) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for k, v in value.items():
        if k == "expires" and isinstance(v, dict) and "at" in v:
            if seen is not None and isinstance(seq, int):
                seen.setdefault(seq, set()).add(v["at"])
            out[k] = EXPIRES
        else:
            out[k] = _timeless(v, seen)
    return out


def _placeholders(value: Any, tokens: dict[str, str]) -> Any:
    """``value`` with every token string replaced by its placeholder."""
    if isinstance(value, str):
        return tokens.get(value, value)
    if isinstance(value, list):
        return [_placeholders(v, tokens) for v in value]
    if isinstance(value, dict):
        return {k: _placeholders(v, tokens) for k, v in value.items()}
    return value


@attrs.define(eq=False)
class Logical:
    """A logical connection: its host slot, its current TCP connection, its role as the harness
    understands it, and its transcript.

    Attributes:
        index: N of LN.
        slot: its host slot.
        link: its current TCP connection (None once closed for good).
        role: the seat it holds, :data:`WATCH`, or None.
        seen: the last seq it saw (an event push, or a join/watch/resume snapshot).
        turn: its latest ``turn`` push.
        replies: ``(step, label, reply)`` for each request it sent (tokens as placeholders).
        events: seq -> ``(step it came in, kind, event)`` of its event pushes.
        clashes: ``(step, seq, first, again)``: a seq pushed twice, differently.
        others: ``(step, push)`` of its pushes other than ``event``, ``turn`` and ``closed``.
        turns: ``(step, [seq, legal, to_act, deadline] or None)``: at each step it takes, its
            latest turn push if
            that is at the table's seq (else None: an older one depends on how a host that
            follows another's appends batched them, see the module docstring).
        acts: ``(step, seq named, its latest turn's seq, reply)`` of its ``act``/``stale``.
        notes: ``(step, text)``: waits of the harness that timed out on it.
        hidden: ``(after, upto)``: seq windows it was not shown (a watch again after a bounce).
    """

    index: int
    slot: int
    link: Link | None = None
    role: int | str | None = None
    seen: int | None = None
    turn: dict[str, Any] | None = None
    replies: list[tuple[int, str, Any]] = attrs.field(factory=list)
    events: dict[int, tuple[int, str, Any]] = attrs.field(factory=dict)
    clashes: list[tuple[int, int, Any, Any]] = attrs.field(factory=list)
    others: list[tuple[int, dict[str, Any]]] = attrs.field(factory=list)
    turns: list[tuple[int, Any]] = attrs.field(factory=list)
    acts: list[tuple[int, int | None, int | None, Any]] = attrs.field(factory=list)
    notes: list[tuple[int, str]] = attrs.field(factory=list)
    hidden: list[tuple[int, int]] = attrs.field(factory=list)
    ended_at: int = -1  # the line number of its last ended push
    subscribed_at: int = 0  # the line number of its last join/watch/resume reply (ok)

    @property
    def name(self) -> str:
        """``L<index>``."""
        return f"L{self.index}"

    @property
    def connected(self) -> bool:
        """It has an open TCP connection."""
        return self.link is not None and not self.link.closed

    def saw(self, seq: Any) -> None:
        """It saw records up to ``seq``."""
        if isinstance(seq, int) and (self.seen is None or seq > self.seen):
            self.seen = seq

    def held_turn(self) -> list[Any] | None:
        """``[seq, legal, to_act, deadline]`` of its latest turn push, or None."""
        t = self.turn
        return None if t is None else [t["seq"], t["legal"], t["to_act"], t["deadline"]]

    def transcript(self) -> dict[str, Any]:
        """What is compared (plain JSON values; event pushes in the hidden windows left out)."""

        def shown(seq: int) -> bool:
            return not any(lo < seq <= hi for lo, hi in self.hidden)

        others = []
        for step, push in self.others:
            if push.get("push") == "presence":
                if not shown(push["seq"]):
                    continue
                if push["reason"] == "host_gone":
                    push = {**push, "reason": "gone"}
            others.append([step, push])
        return {
            "replies": [list(r) for r in self.replies],
            "events": {seq: list(self.events[seq]) for seq in sorted(self.events) if shown(seq)},
            "turns": [list(t) for t in self.turns],
            "others": others,
            "notes": [list(n) for n in self.notes],
            "clashes": [list(c) for c in self.clashes],
        }


# -- topologies -------------------------------------------------------------------------------
def serve_argv(data_dir: Path, store: str | None = None) -> list[str]:
    """``gamehost serve`` on any free port, JSON logs, no timers (turn, abandonment, idle)."""
    argv = [sys.executable, "-m", "tools.cli", "serve", "--port", "0", "--data-dir", str(data_dir)]
    argv += ["--store", store] if store else []
    return argv + [
        "--log-format", "json", "--log-level", "info",
        "--turn-timeout", "0", "--abandon-after", "0", "--idle-timeout", "0",
    ]  # fmt: skip


class Topology:
    """One topology playing one scenario (see the module docstring).

    Args:
        name: ``A``, ``B`` or ``C``.
        scenario: what it plays.
        hosts: its host processes (C: two; else one).
        nursery: where readers and host pumps run.
    """

    def __init__(
        self, name: str, scenario: Scenario, hosts: list[HostProcess], nursery: trio.Nursery
    ) -> None:
        self.name = name
        self.scenario = scenario
        self.sid = scenario.session
        self.hosts = hosts
        self.nursery = nursery
        self.conns = [Logical(i, slot) for i, slot in enumerate(scenario.slots)]
        self.monitors: list[Link | None] = [None] * len(hosts)
        self.monitor_events: dict[int, tuple[str, Any]] = {}
        self.monitor_seen = [-1] * len(hosts)
        self.snap: dict[str, Any] = {}  # the monitor's view once the last step settled
        self.tokens: dict[int, str] = {}  # seat -> its token (from the latest join)
        self.held: list[dict[int, list[Any] | None]] = []  # per step: L -> its held turn
        self.snaps: list[dict[str, Any]] = []  # per step: the table when it began
        self.expiries: dict[int, set[str]] = {}  # undo_asked seq -> the expiry times pushed
        self.step = -1
        self.timeouts = 0
        self.stopped: str | None = None  # why it stopped playing, if it did
        self.closing = False  # the play is over: what the teardown causes is not compared
        self._news = trio.Event()
        self.lines = 0  # lines received on every link, numbered in the order they came

    # -- waiting ----------------------------------------------------------------------------
    def poke(self) -> None:
        """Something came in: wake the waits."""
        self._news.set()
        self._news = trio.Event()

    async def until(self, condition: Callable[[], bool], timeout: float = WAIT_TIMEOUT) -> bool:
        """Wait until ``condition()`` holds (checked after every line that comes in); False if
        it did not within ``timeout`` seconds."""
        with trio.move_on_after(timeout):
            while not condition():
                await self._news.wait()
            return True
        return condition()

    def _timed_out(self, conn: Logical | None, what: str) -> None:
        self.timeouts += 1
        for c in [conn] if conn is not None else self.conns:
            c.notes.append((self.step, f"timed out: {what}"))
        if self.timeouts >= MAX_TIMEOUTS and self.stopped is None:
            self.stopped = f"stopped at step {self.step}: {MAX_TIMEOUTS} waits timed out"

    # -- hosts and links --------------------------------------------------------------------
    def host_of(self, slot: int) -> int:
        """The index of the host serving ``slot``."""
        return slot if len(self.hosts) > 1 else 0

    async def _connect(self, host: int, on_push: Callable[[dict[str, Any]], None]) -> Link:
        port = self.hosts[host].port
        assert port is not None, f"{self.name}: host {host + 1} is down"
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        link = Link(self, stream, on_push)
        self.nursery.start_soon(link.reader)
        return link

    async def start(self) -> None:
        """Start the hosts, open the monitors and every logical connection (``hello``)."""
        async with trio.open_nursery() as starting:
            for h in self.hosts:
                starting.start_soon(h.start, self.nursery, START_TIMEOUT)
        await self._open_monitors()
        for conn in self.conns:
            await self._open(conn, "open")
        await self.settle()

    async def _open_monitors(self) -> None:
        for i in range(len(self.hosts)):
            link = await self._connect(i, lambda push, i=i: self._monitor_push(i, push))
            self.monitors[i] = link
            await link.request("hello", protocol=1)
            reply = await link.request("watch", session=self.sid)
            if reply is None or not reply.get("ok"):
                raise AssertionError(f"{self.name}: the monitor cannot watch: {reply}")
            self.monitor_seen[i] = max(self.monitor_seen[i], reply["result"]["seq"])

    def _monitor_push(self, host: int, push: dict[str, Any]) -> None:
        if push.get("push") == "event" and push.get("session") == self.sid:
            self.monitor_events.setdefault(push["seq"], (push["kind"], push["event"]))
            self.monitor_seen[host] = max(self.monitor_seen[host], push["seq"])

    async def _open(self, conn: Logical, label: str) -> None:
        conn.link = await self._connect(
            self.host_of(conn.slot), lambda push: self._push(conn, push)
        )
        self._reply(conn, f"{label} hello", await conn.link.request("hello", protocol=1))

    def _push(self, conn: Logical, push: dict[str, Any]) -> None:
        if self.closing:  # a seat released as the connections close one by one at the end
            return
        kind = push.get("push")
        if kind == "closed":
            return
        if push.get("session") not in (None, self.sid):
            return
        if kind == "event":
            seq = push["seq"]
            got = (push["kind"], push["event"])
            first = conn.events.get(seq)
            if first is None:
                conn.events[seq] = (self.step, *got)
            elif list(first[1:]) != list(got):
                conn.clashes.append((self.step, seq, list(first[1:]), list(got)))
            conn.saw(seq)
        elif kind == "turn":
            conn.turn = push
        else:
            conn.others.append((self.step, _timeless(push, self.expiries, push.get("seq"))))
            if kind == "detached":
                conn.role = None
            elif kind == "ended":
                conn.ended_at = self.lines

    def _reply(self, conn: Logical, label: str, reply: dict[str, Any] | None) -> Any:
        """File a reply in the transcript (without its id, tokens as placeholders)."""
        if reply is None:
            shown: Any = {"no reply": "the connection ended" if conn.connected else "timed out"}
            if conn.connected:
                self._timed_out(conn, f"no reply to {label}")
        else:
            shown = _timeless({k: v for k, v in reply.items() if k != "id"})
            shown = _placeholders(
                shown, {t: f"<token of seat {s}>" for s, t in self.tokens.items()}
            )
        conn.replies.append((self.step, label, shown))
        return shown

    # -- steps ------------------------------------------------------------------------------
    async def run_step(self, i: int, step: Step) -> None:
        """Play step ``i`` and wait until the table is quiet."""
        self.step = i
        self.held.append({c.index: c.held_turn() for c in self.conns})
        self.snaps.append(self.snap)
        if self.stopped is not None:
            return
        if step.op == "bounce":
            await self._bounce()
        else:
            conn = self.conns[step.conn]  # type: ignore[index]
            held = conn.held_turn()
            fresh = held is not None and held[0] == self.snap.get("seq")
            conn.turns.append((i, held if fresh else None))
            await getattr(self, f"_{step.op}")(conn, step)
        await self.settle()

    async def _request(self, conn: Logical, label: str, op: str, **params: Any) -> Any:
        reply = None if conn.link is None else await conn.link.request(op, **params)
        if op == "join" and reply is not None and reply.get("ok"):
            self.tokens[reply["result"]["seat"]] = reply["result"]["token"]
        self._reply(conn, label, reply)
        return reply

    async def _join(self, conn: Logical, step: Step) -> None:
        reply = await self._request(
            conn, "join", "join", session=self.sid, name=conn.name, seat=step.seat
        )
        if reply is not None and reply.get("ok"):
            conn.role = reply["result"]["seat"]
            conn.subscribed_at = conn.link.answered_at if conn.link else 0
            conn.saw(reply["result"]["seq"])

    async def _act(self, conn: Logical, step: Step, seq: int | None = None) -> None:
        rng = self.scenario.rng(self.step)
        turn = conn.turn
        action = rng.choice(turn["legal"]) if turn and turn["legal"] else {"type": "none"}
        if step.op == "act":
            seq = turn["seq"] if turn else None
        reply = await self._request(conn, step.op, "act", session=self.sid, action=action, seq=seq)
        conn.acts.append((self.step, seq, turn["seq"] if turn else None, reply))

    async def _stale(self, conn: Logical, step: Step) -> None:
        ref = self.held[step.ref][conn.index] if step.ref is not None else None
        # without a turn push then: a seq just before its latest one
        seq = ref[0] if ref is not None else (conn.turn["seq"] - 1 if conn.turn else 0)
        await self._act(conn, step, seq)

    async def _resume(self, conn: Logical, step: Step, label: str = "resume") -> None:
        token = self.tokens.get(step.seat, "no-such-token")  # type: ignore[arg-type]
        reply = await self._request(
            conn, label, "resume", session=self.sid, token=token, after=conn.seen
        )
        if reply is not None and reply.get("ok"):
            seat = reply["result"]["seat"]
            for other in self.conns:  # the last resume wins: the other holder has no seat
                if other is not conn and other.role == seat:
                    other.role = None
            conn.role = seat
            conn.subscribed_at = conn.link.answered_at if conn.link else 0
            conn.saw(reply["result"]["seq"])
        elif reply is not None and label.startswith("reopen"):
            conn.role = None

    async def _resume_close(self, conn: Logical, step: Step) -> None:
        """``resume`` sent with the connection's FIN (corked into one segment where the OS
        allows), then read to the host's EOF. The reply is not compared; the connection is
        gone afterwards (a bounce reopens it)."""
        link = conn.link
        if link is None or link.closed:
            conn.replies.append((self.step, "resume_close", {"no reply": "not connected"}))
            return
        token = self.tokens.get(step.seat, "no-such-token")  # type: ignore[arg-type]
        _, line = link.line("resume", session=self.sid, token=token, after=conn.seen)
        sock = link.stream.socket
        cork = getattr(socket, "TCP_CORK", None)
        if cork is not None:
            sock.setsockopt(socket.IPPROTO_TCP, cork, 1)
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await link.stream.send_all(line)
            sock.shutdown(socket.SHUT_WR)  # the FIN goes with the corked line
        if not await self.until(lambda: link.closed):
            self._timed_out(conn, "the host did not close after resume + FIN")
        link.replies.clear()  # its reply, if any, is not compared
        await link.aclose()
        conn.link = None
        conn.role = None

    async def _leave(self, conn: Logical, step: Step) -> None:
        reply = await self._request(conn, "leave", "leave", session=self.sid)
        if reply is not None and reply.get("ok"):
            conn.role = None

    async def _watch(self, conn: Logical, step: Step, label: str = "watch") -> Any:
        reply = await self._request(conn, label, "watch", session=self.sid)
        if reply is not None and reply.get("ok"):
            conn.role = WATCH
            conn.subscribed_at = conn.link.answered_at if conn.link else 0
            conn.saw(reply["result"]["seq"])
        return reply

    async def _view(self, conn: Logical, step: Step) -> None:
        await self._request(conn, "view", "view", session=self.sid)

    async def _undo(self, conn: Logical, step: Step) -> None:
        await self._request(conn, "undo", "undo", session=self.sid)

    async def _accept(self, conn: Logical, step: Step) -> None:
        await self._request(conn, "accept", "undo_answer", session=self.sid, accept=True)

    async def _refuse(self, conn: Logical, step: Step) -> None:
        await self._request(conn, "refuse", "undo_answer", session=self.sid, accept=False)

    # -- bounce -----------------------------------------------------------------------------
    def bounce_order(self) -> list[Logical]:
        """Seated connections by seat, then spectators and seatless ones by index."""
        seated = sorted((c for c in self.conns if isinstance(c.role, int)), key=lambda c: c.role)
        return seated + [c for c in self.conns if not isinstance(c.role, int)]

    async def _bounce(self) -> None:
        order = self.bounce_order()
        before = {c.index: c.seen for c in order}
        start = max(self.monitor_seen)
        if self.name == "B":
            await self._kill_and_restart()
        else:
            for conn in order:
                await self._close(conn, start)
        for conn in order:
            await self._reopen(conn, before[conn.index])

    async def _close(self, conn: Logical, start: int) -> None:
        """Close one logical connection; for a seated one, wait for its ``seat_released`` (none
        comes once the session has ended: nothing is appended after its end)."""
        link = conn.link
        if link is None:
            return
        if not await link.half_close():
            self._timed_out(conn, "the host did not close after FIN")
        await link.aclose()
        conn.link = None
        ended = any(kind == "ended" for kind, _ in self.monitor_events.values())
        if not isinstance(conn.role, int) or ended:
            return
        seat = conn.role

        def released() -> bool:
            return any(
                kind == "seat_released" and isinstance(ev, dict) and ev.get("seat") == seat
                for seq, (kind, ev) in self.monitor_events.items()
                if seq > start
            ) and all(s >= max(self.monitor_events, default=-1) for s in self.monitor_seen)

        if not await self.until(released, WAIT_TIMEOUT):
            self._timed_out(conn, f"no seat_released for seat {seat} after its close")

    async def _kill_and_restart(self) -> None:
        for h in self.hosts:
            await h.kill()
        links = [c.link for c in self.conns if c.link is not None]
        links += [m for m in self.monitors if m is not None]
        if not await self.until(lambda: all(link.closed for link in links)):
            self._timed_out(None, "connections of the killed host did not end")
        for link in links:
            await link.aclose()
        for c in self.conns:
            c.link = None
        for h in self.hosts:
            await h.start(self.nursery, START_TIMEOUT)
        await self._open_monitors()

    async def _reopen(self, conn: Logical, seen_before: int | None) -> None:
        await self._open(conn, "reopen")
        if isinstance(conn.role, int):
            await self._resume(conn, Step("resume", conn.index, conn.role), "reopen resume")
        elif conn.role == WATCH:
            reply = await self._watch(conn, Step("watch", conn.index), "reopen watch")
            if reply is not None and reply.get("ok") and seen_before is not None:
                conn.hidden.append((seen_before, reply["result"]["seq"]))

    # -- quiet ------------------------------------------------------------------------------
    async def settle(self) -> None:
        """Wait until the table is quiet (see the module docstring); the monitor's snapshot
        then is :attr:`snap`."""
        for _ in range(10_000):  # each round waits for something new: bounded by the timeouts
            if self.stopped is not None or await self._settled():
                return
        self._timed_out(None, "the table never settled")

    async def _settled(self) -> bool:
        """One round of :meth:`settle`: True once quiet (or given up on: noted), False when
        something moved meanwhile (after waiting for it)."""
        snaps = []
        for i, m in enumerate(self.monitors):
            reply = None if m is None else await m.request("view", session=self.sid)
            if reply is None or not reply.get("ok"):
                self._timed_out(None, f"the monitor of host {i + 1} gave no view: {reply}")
                return True
            snaps.append(reply["result"])
        marks = [s["seq"] for s in snaps]
        top = max(marks + [c.seen for c in self.conns if c.seen is not None])
        behind = [i for i, seq in enumerate(marks) if seq < top]
        snap = snaps[0]
        bots = {s["seat"] for s in snap["seats"] if s is not None and s["bot"]}
        if behind or (not snap["ended"] and bots & set(snap["to_act"])):

            def moved() -> bool:
                if behind:  # a host has not read the records a connection saw yet
                    return all(self.monitor_seen[i] >= top for i in behind)
                return any(seen > m for seen, m in zip(self.monitor_seen, marks, strict=True))

            if not await self.until(moved):
                self._timed_out(None, f"the table did not settle (hosts at {marks}, {top})")
                return True
            return False
        waiting = [c for c in self.conns if c.connected and c.role is not None]

        def caught_up(c: Logical) -> bool:
            if not c.connected:
                return True
            if c.seen is None or c.seen < snap["seq"]:
                return False
            if snap["ended"]:
                return c.ended_at > c.subscribed_at
            if isinstance(c.role, int) and c.role in snap["to_act"]:
                return c.turn is not None and c.turn["seq"] == snap["seq"]
            return True

        if not await self.until(lambda: all(caught_up(c) for c in waiting)):
            for c in waiting:
                if not caught_up(c):
                    turn = c.turn["seq"] if c.turn else None
                    self._timed_out(
                        c,
                        f"pushes up to seq {snap['seq']} (it saw {c.seen}, its turn push"
                        f" {turn}, role {c.role})",
                    )
            return True
        if all(c.seen == snap["seq"] for c in waiting if c.connected) and len(set(marks)) == 1:
            self.snap = snap
            return True
        return False

    async def stop(self) -> None:
        """Close every connection and stop the hosts (SIGTERM). Pushes that come meanwhile (the
        release of a seat whose connection closed first, to those not closed yet) are not
        recorded: they depend on how fast each host notices each close."""
        self.closing = True
        for link in [c.link for c in self.conns] + list(self.monitors):
            if link is not None:
                await link.aclose()
        for h in self.hosts:
            await h.stop()

    def transcript(self) -> dict[str, Any]:
        """Every logical connection's transcript, by name."""
        return {c.name: c.transcript() for c in self.conns}


# -- running ----------------------------------------------------------------------------------
@attrs.frozen
class Outcome:
    """What a scenario gave on each topology.

    Attributes:
        scenario: what was played.
        steps: the steps, as played (a driver's choices included).
        topologies: name -> the topology after the play (its connections hold the transcripts).
        dump: where the transcripts were written (JSON).
    """

    scenario: Scenario
    steps: list[Step]
    topologies: dict[str, Topology]
    dump: Path

    def conn(self, topology: str, index: int) -> Logical:
        """Logical connection ``index`` of ``topology``."""
        return self.topologies[topology].conns[index]

    def report(self) -> str | None:
        """Where the topologies differ (None: nowhere). See :func:`compare`."""
        return compare(
            {name: t.transcript() for name, t in self.topologies.items()},
            self.steps,
            self.describe(),
            self.dump,
            {name: t.stopped for name, t in self.topologies.items()},
            {name: _host_errors(t) for name, t in self.topologies.items()},
        )

    def describe(self) -> str:
        """The scenario in one line."""
        t = self.scenario.table
        slots = ", ".join(f"L{i} slot {s}" for i, s in enumerate(self.scenario.slots))
        return (
            f"scenario {self.scenario.name!r}: {t.game}, {t.seats} seats ({t.bots} bots),"
            f" options {orjson.dumps(t.options).decode()}; {slots}"
        )


def _host_errors(t: Topology) -> dict[str, int]:
    out: dict[str, int] = {}
    for h in t.hosts:
        for event, n in h.errors.items():
            out[f"{h.name}: {event}"] = n
    return out


async def run_scenario(scenario: Scenario, tmp: Path, pg_url: str) -> Outcome:
    """Play ``scenario`` on topologies A and B (file data dirs under ``tmp``) and C (two hosts
    on the PostgreSQL database ``pg_url``, which must hold no session yet), in lockstep; the
    hosts are stopped at the end (killed if anything failed). The transcripts are written to
    ``tmp/transcripts.json``.

    Raises:
        AssertionError: a host did not start, or a monitor could not watch the session.
        HostFailed: a host exited before listening.
    """
    if (scenario.steps is None) == (scenario.driver is None):
        raise ValueError("a scenario has fixed steps or a driver, not both and not neither")
    sid = scenario.session
    records = session_records(scenario.table, sid, scenario.seed)
    hosts: dict[str, list[HostProcess]] = {}
    for name in ("A", "B"):
        data = tmp / name
        await write_log(FileStore(data), sid, records)
        hosts[name] = [HostProcess(f"{name}", serve_argv(data), tmp / f"{name}.log")]
    await write_log(PostgresStore(pg_url), sid, records)
    hosts["C"] = [
        HostProcess(f"C{i}", serve_argv(tmp / f"C{i}", pg_url), tmp / f"C{i}.log") for i in (1, 2)
    ]
    steps: list[Step] = []
    topologies: dict[str, Topology] = {}
    try:
        async with trio.open_nursery() as nursery:
            topologies = {name: Topology(name, scenario, hosts[name], nursery) for name in hosts}
            async with trio.open_nursery() as starting:
                for t in topologies.values():
                    starting.start_soon(t.start)
            for i in itertools.count():
                if scenario.steps is not None:
                    step = scenario.steps[i] if i < len(scenario.steps) else None
                else:
                    step = scenario.driver(topologies["A"], i)  # type: ignore[misc]
                if step is None:
                    break
                steps.append(step)
                async with trio.open_nursery() as playing:
                    for t in topologies.values():
                        playing.start_soon(t.run_step, i, step)
            async with trio.open_nursery() as stopping:
                for t in topologies.values():
                    stopping.start_soon(t.stop)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            for group in hosts.values():
                for h in group:
                    if h.proc is not None and h.proc.returncode is None:
                        h.proc.kill()
                        await h.proc.wait()
    dump = tmp / "transcripts.json"
    dump.write_bytes(
        orjson.dumps(
            {
                "scenario": scenario.name,
                "steps": [s.describe() for s in steps],
                "topologies": {name: t.transcript() for name, t in topologies.items()},
            },
            option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
        )
    )
    return Outcome(scenario, steps, topologies, dump)


# -- comparing --------------------------------------------------------------------------------
@attrs.frozen
class Difference:
    """One aspect of one logical connection on which a topology differs from A.

    Attributes:
        step: the step at which it first shows.
        conn: the logical connection's name.
        aspect: ``replies``, ``events``, ``turns``, ``others``, ``notes`` or ``clashes``.
        where: what differs (``its reply to act``, ``the event push of seq 14``, ...).
        gave: topology -> what it gave there (``_NOTHING``: nothing).
    """

    step: int
    conn: str
    aspect: str
    where: str
    gave: dict[str, Any]


ASPECTS = ("replies", "notes", "others", "turns", "events", "clashes")
"""The aspects of a transcript compared, in the order a report names differences of one step
(after those of the connection that took the step)."""
_NOTHING = object()


def _key(value: Any) -> str:
    """A value as compared: its whole JSON."""
    if value is _NOTHING:
        return "(nothing)"
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _short(value: Any, limit: int = 400) -> str:
    """A value as reported: its JSON, cut at ``limit`` characters."""
    text = _key(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_difference(conn: str, aspect: str, mine: dict[str, Any]) -> Difference | None:
    """The first place where the topologies' ``aspect`` of ``conn`` differ (``mine``:
    topology -> that aspect of its transcript)."""
    names = list(mine)
    if aspect == "events":
        seqs = sorted({seq for t in names for seq in mine[t]})
        for seq in seqs:
            got = {t: mine[t].get(seq) for t in names}
            bodies = {t: None if g is None else g[1:] for t, g in got.items()}
            if len({_key(b) for b in bodies.values()}) > 1:
                step = min(g[0] for g in got.values() if g is not None)
                shown = {
                    t: _NOTHING if b is None else {"kind": b[0], "event": b[1]}
                    for t, b in bodies.items()
                }
                return Difference(step, conn, aspect, f"the event push of seq {seq}", shown)
        return None
    longest = max(len(mine[t]) for t in names)
    for k in range(longest):
        got = {t: mine[t][k] if k < len(mine[t]) else _NOTHING for t in names}
        # what is compared: all but the step a push came in at (a host following another's
        # appends may push a little later); the step still says where it shows
        keys = {
            t: _key(g if g is _NOTHING or aspect != "others" else g[1:]) for t, g in got.items()
        }
        if len(set(keys.values())) > 1:
            step = min(g[0] for g in got.values() if g is not _NOTHING)
            first = next(g for g in got.values() if g is not _NOTHING)
            label = {
                "replies": f"reply to {first[1]}",
                "turns": "latest turn push ([seq, legal, to_act, deadline] at the table's seq,"
                " or null) at its step",
                "others": "push other than event and turn",
                "notes": "harness note",
                "clashes": "record pushed twice, differently",
            }[aspect]
            body = {t: g if g is _NOTHING else g[-1] for t, g in got.items()}
            return Difference(step, conn, aspect, f"its {label} #{k + 1}", body)
    return None


def compare(
    transcripts: dict[str, dict[str, Any]],
    steps: list[Step],
    title: str = "a scenario",
    dump: Path | None = None,
    stopped: dict[str, str | None] | None = None,
    host_errors: dict[str, dict[str, int]] | None = None,
) -> str | None:
    """Compare the topologies' transcripts (topology -> logical connection -> transcript, see
    :meth:`Logical.transcript`); None when they agree, else a report: the first difference
    (the logical connection, the step, what each topology gave), every difference per
    connection and aspect, the steps, and where the whole transcripts are. A record pushed
    twice to one connection with different bodies is reported even when all topologies agree."""
    diffs: list[Difference] = []
    names = list(transcripts)
    conns = sorted({c for t in names for c in transcripts[t]}, key=lambda c: int(c[1:]))
    for conn in conns:
        for aspect in ASPECTS:
            mine = {t: transcripts[t].get(conn, {}).get(aspect, [] if aspect != "events" else {})
                    for t in names}  # fmt: skip
            d = _first_difference(conn, aspect, mine)
            if d is not None:
                diffs.append(d)
            elif aspect == "clashes" and any(mine[t] for t in names):
                first = mine[names[0]][0]
                diffs.append(
                    Difference(first[0], conn, aspect, f"seq {first[1]} pushed twice", {
                        t: mine[t][0][2:] if mine[t] else _NOTHING for t in names
                    })
                )  # fmt: skip
    stopped = {k: v for k, v in (stopped or {}).items() if v}
    if not diffs and not stopped:
        return None
    lines = [f"differential: {title}"]
    if stopped:
        lines += [f"  topology {t} {why}" for t, why in stopped.items()]
    if diffs:
        ranks = {a: r for r, a in enumerate(ASPECTS)}

        def order(d: Difference) -> tuple[int, int, int, int]:
            actor = 0 <= d.step < len(steps) and steps[d.step].conn == int(d.conn[1:])
            return d.step, 0 if actor else 1, ranks[d.aspect], int(d.conn[1:])

        diffs.sort(key=order)
        first = diffs[0]
        lines.append(
            f"first difference: {first.conn} at step {first.step}"
            f" ({_step_text(steps, first.step)}): {first.where}"
        )
        for t, value in first.gave.items():
            same = next((u for u in names if u < t and _key(first.gave[u]) == _key(value)), None)
            shown = f"same as {same}" if same else _short(value)
            lines.append(f"  {t} ({TOPOLOGIES.get(t, t)}): {shown}")
        lines.append("every difference (connection, aspect: first step, what):")
        for d in sorted(diffs, key=lambda d: (int(d.conn[1:]), d.step)):
            agree = [t for t in names if _key(d.gave[t]) == _key(d.gave[names[0]])]
            lines.append(
                f"  {d.conn} {d.aspect}: step {d.step} ({_step_text(steps, d.step)}), {d.where};"
                f" {'/'.join(agree)} agree, {'/'.join(t for t in names if t not in agree)} differ"
            )
    errors = {t: e for t, e in (host_errors or {}).items() if e}
    if errors:
        lines.append(f"host log errors: {errors}")
    lines.append("steps:")
    lines += [f"  {i:3} {s.describe()}" for i, s in enumerate(steps)]
    if dump is not None:
        lines.append(f"transcripts: {dump}")
    return "\n".join(lines)


def _step_text(steps: list[Step], i: int) -> str:
    if i < 0:
        return "opening the connections"
    return steps[i].describe() if i < len(steps) else "after the last step"


# -- the random driver --------------------------------------------------------------------------
class RandomDriver:
    """Makes a scenario's steps at random (seeded) from what topology A has seen: joins until
    every human seat is taken, then mostly ``act`` for a seat to act, and now and then a stale
    act, a takeover, a resume of a seat nobody holds, a leave, a watch, a view or a bounce.
    Each of ``bounce``, ``stale``, ``takeover``, ``leave`` and ``watch`` (:attr:`WANTED`) is
    made likelier once a few steps are played, and the only choice in the last steps, until it
    has happened (``todo`` holds those that have not).

    Args:
        seed: seeds the choices.
        max_steps: the scenario's length at most.
        max_bounces: bounces at most.
        avoid: kinds of step never made (``stale``, ``takeover``, ``leave``, ...).
    """

    WANTED = ("bounce", "stale", "takeover", "leave", "watch")
    EXTRA = 20
    """Steps a scenario may run past ``max_steps`` while a wanted kind has not happened."""

    def __init__(
        self,
        seed: int,
        max_steps: int = 60,
        max_bounces: int = 2,
        avoid: frozenset[str] = frozenset(),
    ) -> None:
        self.rng = random.Random(seed)
        self.max_steps = max_steps
        self.max_bounces = max_bounces
        self.avoid = avoid
        self.bounces = 0
        self.todo = set(self.WANTED) - avoid
        self.done = False

    def __call__(self, t: Topology, i: int) -> Step | None:
        """Step ``i``, or None: the scenario ends."""
        if self.done or i >= self.max_steps + (self.EXTRA if self.todo else 0):
            return None
        snap = t.snap
        if snap.get("ended"):  # once more through a bounce, then a last look
            self.done = True
            if self.bounces < self.max_bounces:
                self.bounces += 1
                return Step("bounce")
            return Step("view", 0)
        options: list[tuple[float, str, Step]] = []
        conns = [c for c in t.conns if c.connected]
        seatless = [c for c in conns if c.role is None]
        holders = {c.role: c for c in conns if isinstance(c.role, int)}
        to_act = set(snap.get("to_act", []))
        humans = t.scenario.table.humans
        unjoined = [s for s in humans if s not in t.tokens]
        if unjoined and seatless:
            c = self.rng.choice(seatless)
            options.append((20.0, "join", Step("join", c.index, self.rng.choice(unjoined))))
        for seat, c in holders.items():
            if seat in to_act and c.turn is not None and c.turn["seq"] == snap.get("seq"):
                options.append((10.0, "act", Step("act", c.index)))
                refs = [j for j in range(max(0, i - 12), i) if self._asked(t, j, seat, c)]
                if refs:
                    options.append(
                        (1.5, "stale", Step("stale", c.index, ref=self.rng.choice(refs)))
                    )
        for seat in humans:
            if seat in t.tokens and seat not in holders and seatless:
                c = self.rng.choice(seatless)
                weight = 8.0 if seat in to_act else 1.5
                options.append((weight, "resume", Step("resume", c.index, seat)))
        if holders and seatless:
            seat = self.rng.choice(sorted(holders))
            options.append((1.0, "takeover", Step("resume", self.rng.choice(seatless).index, seat)))
        for c in conns:
            if c.role is not None:
                options.append((0.6 / len(conns), "leave", Step("leave", c.index)))
            options.append((0.5 / len(conns), "view", Step("view", c.index)))
        for c in seatless:
            options.append((0.6 / len(seatless), "watch", Step("watch", c.index)))
        if self.bounces < self.max_bounces and snap.get("started"):
            options.append((0.5, "bounce", Step("bounce")))
        options = [o for o in options if o[1] not in self.avoid]
        if i >= 8:
            options = [(w * (8.0 if k in self.todo else 1.0), k, s) for w, k, s in options]
        if i >= self.max_steps - 10 and any(k in self.todo for _, k, _ in options):
            options = [o for o in options if o[1] in self.todo]  # the last chance for them
        if not options:
            return None
        weights = [w for w, _, _ in options]
        _, kind, step = self.rng.choices(options, weights)[0]
        self.todo.discard(kind)
        if kind == "bounce":
            self.bounces += 1
        return step

    @staticmethod
    def _asked(t: Topology, j: int, seat: int, c: Logical) -> bool:
        """Whether ``c`` held ``seat`` and a turn push at the table's seq when step ``j``
        began, older than its turn push now (a seq a stale act may name: which turn pushes a
        connection got while its seat was not to act when the table settled depends on how a
        following host batched the appends)."""
        held, snap = t.held[j].get(c.index), t.snaps[j]
        return (
            held is not None
            and c.turn is not None
            and held[0] == snap.get("seq")
            and seat in snap.get("to_act", ())
            and held[0] < c.turn["seq"]
        )
