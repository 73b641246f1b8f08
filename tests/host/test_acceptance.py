"""Issue acceptance over TCP with the installed Crazy Eights plugin:

- SIGKILL the host while sessions are played: every log opens, its seq is gapless, and every
  event any client was sent is in it (as that client saw it);
- no push a seat received before the first deal was scored names a card it could not see.
"""

from __future__ import annotations

import functools
import random
import re
import signal
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
import pytest
import trio

from host import logs
from host.plugins.registry import load_registry
from host.store.file import FileStore, read_log
from host.table.engine import Record
from tests.conftest import start_host
from tools.bench import listening_port, serve_command
from tools.client import Client

REGISTRY = load_registry()
pytestmark = pytest.mark.skipif(
    "crazy-eights" not in REGISTRY.games, reason="the crazy-eights plugin is not installed"
)
CARD = re.compile(rb'"((?:10|[2-9JQKA])[CDHS])"')


class Busy:
    """Counts pushes received; ``reached`` is set at ``target``."""

    def __init__(self, target: int) -> None:
        self.n = 0
        self.target = target
        self.reached = trio.Event()

    def tick(self) -> None:
        self.n += 1
        if self.n >= self.target:
            self.reached.set()


async def collect_seat(
    c: Client, sid: str, joined: dict, rng: random.Random, seen: list, busy: Busy
) -> None:
    """Play random legal actions; keep every push (and the join snapshot) in ``seen``."""
    try:
        await _collect(c, sid, joined, rng, seen, busy)
    finally:
        await c.aclose()


async def _collect(
    c: Client, sid: str, joined: dict, rng: random.Random, seen: list, busy: Busy
) -> None:
    seen.append(("join", joined["seq"], orjson.dumps(joined)))
    seat = joined["seat"]
    while True:
        p = await c.next_push()
        if p is None:
            return
        busy.tick()
        seen.append((p["push"], p.get("seq"), orjson.dumps(p), p))
        if p["push"] == "turn" and p["seat"] == seat:
            try:
                await c.request("act", session=sid, action=rng.choice(p["legal"]), seq=p["seq"])
            except ConnectionError:
                return
        elif p["push"] in ("ended", "closed"):
            return


async def play_ce_sessions(
    port: int,
    sessions: int,
    seats: int,
    bots: int,
    seen: dict,
    sids: list,
    busy: Busy | None = None,
    options: dict | None = None,
    connect: Callable[[], Awaitable[Client]] | None = None,
) -> None:
    """Play ``sessions`` tables; ``connect`` opens a client not started yet (default: TCP)."""
    busy = busy or Busy(10**9)
    rng = random.Random(7)
    connect = connect or functools.partial(Client.connect, "127.0.0.1", port)

    async def one(k: int) -> None:
        async with await connect() as lobby:
            sid = (
                await lobby.call(
                    "create", game="crazy-eights", seats=seats, bots=bots, options=options or {}
                )
            )["session"]
        sids.append(sid)
        async with trio.open_nursery() as n:
            for i in range(seats - bots):
                c = await connect()
                c.start(n)
                joined = await c.call("join", session=sid, name=f"p{k}.{i}")
                log = seen.setdefault((sid, joined["seat"]), [])
                n.start_soon(collect_seat, c, sid, joined, random.Random(rng.random()), log, busy)

    async with trio.open_nursery() as n:
        for k in range(sessions):
            n.start_soon(one, k)


def records_of(path: Path) -> list[Record]:
    return [Record.from_json(r) for r in read_log(path)]


async def test_sigkill_loses_no_event_a_client_was_sent(tmp_path):
    proc = await trio.lowlevel.open_process(
        serve_command("batch", str(tmp_path)), stderr=subprocess.PIPE
    )
    port = None
    buf = b""
    while port is None:
        chunk = await proc.stderr.receive_some()
        assert chunk, "the host exited before listening"
        buf += chunk
        *lines, buf = buf.split(b"\n")
        port = next((p for p in map(listening_port, lines) if p is not None), None)

    async def drain() -> None:
        while await proc.stderr.receive_some():
            pass

    seen: dict = {}
    sids: list = []
    busy = Busy(600)
    async with trio.open_nursery() as n:
        n.start_soon(drain)
        n.start_soon(play_ce_sessions, port, 6, 3, 1, seen, sids, busy)
        await busy.reached.wait()  # kill once the tables are busy
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    assert proc.returncode == -signal.SIGKILL

    engine = REGISTRY.engines["crazy-eights"]
    store = FileStore(tmp_path)
    checked = 0
    for sid in store.session_ids():
        raw = store.load(sid)  # repairs a torn tail, raises on a corrupt middle
        assert [r["seq"] for r in raw] == list(range(len(raw)))
        records = records_of(store.path(sid))
        for (s, seat), pushes in seen.items():
            if s != sid:
                continue
            for kind, seq, _, *rest in pushes:
                if kind != "event":
                    continue
                push = rest[0]
                assert seq < len(records), f"{sid}: seat {seat} was sent seq {seq}, log ends"
                rec = records[seq]
                assert rec.type == push["kind"]
                if rec.type == "event":
                    ev = engine.codec.event_from_wire(rec.data["event"], rec.data["v"])
                    want = engine.codec.event_to_wire(engine.game.redact(ev, seat))
                    assert orjson.loads(orjson.dumps(want)) == push["event"]
                elif rec.type == "action":
                    assert rec.data["action"] == push["event"]["action"]
                checked += 1
    assert checked > 300


async def test_no_push_before_the_deal_is_scored_names_a_card_the_seat_could_not_see(tmp_path):
    logs.configure(json=True, level="warning")
    seen: dict = {}
    sids: list = []
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, REGISTRY)
        port = running.port
        # one deck (up to 5 seats): every card is unique; only the first deal is checked, so a
        # match of one deal (target 1) is enough
        await play_ce_sessions(port, 6, 3, 0, seen, sids, options={"target": 1})
        await play_ce_sessions(port, 4, 5, 2, seen, sids, options={"target": 1})
        running.host.request_shutdown()
    assert_no_card_leaked(tmp_path, sids, seen)


def assert_no_card_leaked(data_dir: Path, sids: list, seen: dict) -> None:
    """No push a seat received before the first deal was scored (``seen``, as kept by
    :func:`play_ce_sessions`) names a card that seat could not see then."""
    engine = REGISTRY.engines["crazy-eights"]
    pushes_checked = 0
    for sid in sids:
        records = records_of(data_dir / "sessions" / f"{sid}.jsonl")
        scored = next(
            r.seq for r in records if r.type == "event" and r.data["event"]["type"] == "deal_scored"
        )
        first_deal = next(
            r for r in records if r.type == "event" and r.data["event"]["type"] == "dealt"
        )
        turned_up = set(first_deal.data["event"]["turned_back"])
        states = {}
        state = engine.initial(records[0])
        for rec in records[1:scored]:
            state = engine.apply(state, rec)
            states[rec.seq] = state
        for (s, seat), pushes in seen.items():
            if s != sid:
                continue
            for kind, seq, line, *_ in pushes:
                if seq is None or seq >= scored or seq not in states:
                    continue
                # an action names the card it plays; the card leaves the hand in the next record
                is_action = kind == "event" and b'"kind":"action"' in line
                game = states.get(seq + 1, states[seq]).game if is_action else states[seq].game
                hidden = set(game.stock)
                for other, hand in enumerate(game.hands):
                    if other != seat:
                        hidden |= set(hand)
                hidden -= turned_up  # 8s turned as starter and buried were seen by all
                named = {m.decode() for m in CARD.findall(line)}
                leaked = named & hidden
                assert not leaked, (
                    f"{kind} at seq {seq} showed seat {seat} {leaked}: {line[:600]!r}"
                )
                pushes_checked += 1
    assert pushes_checked > 100
