"""Table cores driven with no trio, no disk and no socket: an in-memory log, a fake clock.

A :class:`World` is what the host's drivers would be, reduced to their duties: one log (a list
of records, read back through JSON as a store would give them), one or more :class:`Host`\\ s each
holding a :class:`~host.table.core.Table` of the session, and the clock. A command goes to one
host's table; its step is appended if the log still ends where the step expects (else the host
follows the log and decides again, as a lost race does), committed, and the other hosts follow.
Due host steps run on the host that drives (holds the lease), as often as they are due.

Logical connections (:class:`Client`) keep what they were shown: replies, event pushes (by seq),
presence and undo pushes (by seq: each must come right after its record's event push), their
latest turn push, ``detached`` and ``ended`` pushes.
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson

from host.table.commands import Command
from host.table.core import (
    Attach,
    Backfill,
    Detach,
    Observe,
    Reply,
    Send,
    SendMany,
    Step,
    Table,
    TableSettings,
    format_ts,
)
from host.table.engine import Engine, Record
from protocol.replies import (
    DetachedPush,
    EndedPush,
    EventPush,
    PresencePush,
    TurnPush,
    UndoAskedPush,
    UndoDonePush,
    UndoRefusedPush,
    ViewPush,
)

T0 = 1_800_000_000.0
"""The fake clock's start (seconds since the epoch)."""


@attrs.define
class Client:
    """A logical connection: what it was shown, kept as a client would keep it."""

    name: str
    key: str = ""
    host: int = 0
    replies: list[Any] = attrs.Factory(list)
    events: dict[int, tuple[str, Any]] = attrs.Factory(dict)
    turn: TurnPush | None = None
    turns: list[TurnPush] = attrs.Factory(list)
    detached: list[DetachedPush] = attrs.Factory(list)
    ended: list[EndedPush] = attrs.Factory(list)
    views: list[ViewPush] = attrs.Factory(list)
    presence: dict[int, PresencePush] = attrs.Factory(dict)
    undos: dict[int, Any] = attrs.Factory(dict)  # seq -> its undo push
    role: Any = "none"  # a seat, None (watching) or "none"
    token: str | None = None
    previous: Any = None  # the push before the latest one

    @property
    def last_seq(self) -> int:
        return max(self.events, default=-1)

    def take(self, push: Any) -> None:
        previous, self.previous = self.previous, push
        if isinstance(push, EventPush):
            assert push.seq not in self.events or self.events[push.seq] == (
                push.kind,
                push.event,
            ), f"{self.name}: seq {push.seq} shown twice, differently"
            self.events[push.seq] = (push.kind, push.event)
        elif isinstance(push, TurnPush):
            self.turn = push
            self.turns.append(push)
        elif isinstance(push, DetachedPush):
            self.detached.append(push)
        elif isinstance(push, EndedPush):
            self.ended.append(push)
        elif isinstance(push, ViewPush):
            self.views.append(push)
        elif isinstance(push, PresencePush):
            assert isinstance(previous, EventPush) and previous.seq == push.seq, (
                f"{self.name}: the presence push of seq {push.seq} after {previous!r}"
            )
            assert push.seq not in self.presence or self.presence[push.seq] == push
            self.presence[push.seq] = push
        elif isinstance(push, UndoAskedPush | UndoDonePush | UndoRefusedPush):
            assert isinstance(previous, EventPush) and previous.seq == push.seq, (
                f"{self.name}: the undo push of seq {push.seq} after {previous!r}"
            )
            self.undos[push.seq] = push
        else:  # pragma: no cover - a push kind this world does not know
            raise AssertionError(f"unexpected push {push!r}")


class Host:
    """One host's table of the session (``instance`` names its connections' keys)."""

    def __init__(self, world: World, instance: str, driver: bool) -> None:
        self.world = world
        self.instance = instance
        self.table = Table(
            world.sid,
            world.engine,
            world.records(),
            world.settings,
            now=world.now,
            instance=instance,
            driver=driver,
            shared=len(world.hosts) > 0 or world.shared,
        )
        self.table.host_alive = lambda inst: any(h.instance == inst for h in world.hosts)
        self.made = 0

    def key(self) -> str:
        self.made += 1
        return f"{self.instance}.{self.made}"


class World:
    """One session's log and the hosts that serve it (see the module docstring).

    Args:
        engine: the game's engine.
        records: the log so far (header first), e.g. from :func:`new_log`.
        hosts: how many hosts share the log (the first drives).
        settings: the tables' settings.
    """

    def __init__(
        self,
        engine: Engine,
        records: list[Record],
        hosts: int = 1,
        settings: TableSettings | None = None,
        now: float = T0,
    ) -> None:
        self.engine = engine
        self.sid = records[0].data["session"]
        self.settings = settings or TableSettings()
        self.now = now
        self.shared = hosts > 1
        self.log: list[bytes] = [self._line(r.to_json(), format_ts(now)) for r in records]
        self.hosts: list[Host] = []
        for i in range(hosts):
            self.hosts.append(Host(self, f"h{i + 1}", driver=i == 0))
        self.clients: dict[str, Client] = {}
        self.restarts = 0
        self.observed: list[Record] = []

    # -- the log -------------------------------------------------------------------------------
    @staticmethod
    def _line(raw: dict[str, Any], ts: str) -> bytes:
        return orjson.dumps({"seq": raw["seq"], "ts": ts, **raw})

    def records(self) -> list[Record]:
        """The log as a store reads it back."""
        return [Record.from_json(orjson.loads(line)) for line in self.log]

    def append(self, step: Step) -> bool:
        """Append ``step``'s records if the log ends where it expects (else False: a lost
        race)."""
        if step.expected != len(self.log):
            return False
        for raw in step.to_store():
            self.log.append(orjson.dumps(raw))
        return True

    # -- clients -------------------------------------------------------------------------------
    def client(self, name: str, host: int = 0) -> Client:
        """A new logical connection on ``host``."""
        c = Client(name, self.hosts[host].key(), host)
        self.clients[name] = c
        return c

    def _route(self, host: Host, effects: list[Any]) -> None:
        by_key = {c.key: c for c in self.clients.values() if c.host == self.hosts.index(host)}
        for e in effects:
            if isinstance(e, Send):
                c = by_key.get(e.conn)
                if c is not None:
                    c.take(e.push)
            elif isinstance(e, SendMany):
                for p in e.pushes:
                    by_key[e.conn].take(p)
            elif isinstance(e, Backfill):
                recs = [r for r in self.records() if e.after < r.seq <= e.upto]
                for p in host.table.pushes_for(recs, e.viewer):
                    by_key[e.conn].take(p)
            elif isinstance(e, Reply):
                by_key[e.conn].replies.append(e.outcome)
            elif isinstance(e, Attach):
                by_key[e.conn].role = e.viewer
            elif isinstance(e, Detach):
                c = by_key.get(e.conn)
                if c is not None:
                    c.role = "none"
            elif isinstance(e, Observe):
                self.observed.extend(e.records)

    def _follow_all(self, except_host: Host | None = None) -> None:
        for h in self.hosts:
            if h is not except_host and h.table.seq < len(self.log) - 1:
                new = self.records()[h.table.seq + 1 :]
                self._route(h, h.table.follow(new, self.now))

    def run(self, host: Host, decide: Any, gone: bool = False) -> None:
        """Carry out one step of ``host``'s table as a driver would. ``gone``: the requester
        went away once its records were durable, before its reply (a resume then takes
        nothing: the driver gives the seat back)."""
        caught_up = False
        for _ in range(3):
            step = decide(caught_up)
            if step is None:
                return
            if step.first:
                self._route(host, step.first)
                step.first = []
            if step.follow_first and not caught_up:
                self._follow_all()
                caught_up = True
                continue
            if not step.records:
                self._route(host, step.effects)
                return
            if not self.append(step):  # another host appended first: follow, decide again
                self._follow_all()
                caught_up = True
                continue
            self._route(host, host.table.commit(step, closed=gone))
            self._follow_all(except_host=host)
            if gone and step.what == "resume":
                self.run(host, lambda caught_up, s=step: host.table.give_back(s, self.now))
            return
        self._route(host, host.table.conflicted(step))

    def command(
        self, client: Client, cmd: Command, closing: bool = False, gone: bool = False
    ) -> Any:
        """``client`` sends ``cmd`` to its host; the reply (then the due steps are run).
        ``closing``: its connection has closed its side when the table decides; ``gone``: it
        goes away once the step's records are durable, before the reply (see :meth:`run`)."""
        host = self.hosts[client.host]
        before = len(client.replies)
        key = client.key

        def decide(caught_up: bool) -> Step:
            return host.table.command(
                key, before, cmd, self.now, closing=closing, caught_up=caught_up
            )

        self.run(host, decide, gone=gone)
        if gone:
            self.close(client)
        self.settle()
        return client.replies[before] if len(client.replies) > before else None

    def close(self, client: Client, reason: str = "gone") -> None:
        """``client``'s connection goes away."""
        host = self.hosts[client.host]
        step = host.table.drop(client.key, self.now, reason)
        client.role = "none"
        if step is not None:
            self.run(host, lambda caught_up: step if not caught_up else None)
        self.settle()

    def settle(self, limit: int = 10_000) -> None:
        """Run every host step that is due now (bots, timers, releases), on whichever host
        would run it."""
        for _ in range(limit):
            for h in self.hosts:
                when, _ = h.table.next_due()
                if when <= self.now:
                    self.run(h, lambda caught_up, h=h: h.table.due(self.now, caught_up))
                    break
            else:
                return
        raise AssertionError("host steps never settled")

    def advance(self, seconds: float) -> None:
        """Let time pass, running each host step when it falls due."""
        end = self.now + seconds
        while True:
            due = min(h.table.next_due()[0] for h in self.hosts)
            if due > end:
                break
            self.now = max(self.now, due)
            self.settle()
        self.now = end
        self.settle()

    def restart(self, host: int = 0) -> None:
        """The host process dies and starts again: its connections are gone, its table is
        rebuilt from the log (with a new instance id)."""
        self.restarts += 1
        old = self.hosts[host]
        for c in self.clients.values():
            if c.host == host:
                c.key = ""  # its connection died with the process
                c.role = "none"
        fresh = Host(self, f"{old.instance}r{self.restarts}", driver=old.table.driver)
        self.hosts[host] = fresh
        self.settle()

    def reconnect(self, client: Client, host: int | None = None) -> None:
        """A new connection for ``client`` (after its old one died), on ``host``."""
        client.host = client.host if host is None else host
        client.key = self.hosts[client.host].key()


def new_log(
    engine: Engine,
    seats: int,
    bots: int = 0,
    seed: bytes = b"\x07" * 32,
    options: dict[str, Any] | None = None,
    sid: str = "s0000000000000001",
    turn_timeout: float | None = None,
) -> list[Record]:
    """A new session's records as ``create`` writes them (the header, the bots' seats: the last
    ``bots`` seats), with a fixed seed."""
    opts = engine.codec.options_from_wire(options or {}, seats)
    bot_seats = list(range(seats - bots, seats))
    header = engine.header(sid, opts, seats, bot_seats, seed)
    header.data["turn_timeout"] = turn_timeout
    state = engine.initial(header)
    out = [header]
    for seat in bot_seats:
        new, state = engine.seat_step(state, seat, f"bot{seat}", True, None)
        out += new
    return out
