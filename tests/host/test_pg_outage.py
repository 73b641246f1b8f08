"""A host on PostgreSQL while its database restarts under load: clients playing over TCP get
``unavailable`` for what cannot be made durable, nothing acknowledged is lost, play resumes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import orjson
import psycopg
import pytest
import trio

from host.store.pg import migrate
from tests import pg
from tests.conftest import start_host
from tools.client import Client, HostError


@pytest.fixture
def own_cluster(pg_dsn: str) -> Iterator[pg.Cluster]:
    """A cluster of this test's own (it is stopped and restarted)."""
    cluster = pg.Cluster().start()
    try:
        yield cluster
    finally:
        cluster.destroy()


@attrs.define
class Load:
    """What the playing clients saw."""

    up: trio.Event  # the database is up (replaced by an unset one while it is down)
    unavailable: int = 0  # `unavailable` answers
    refused: trio.Event = attrs.Factory(trio.Event)  # set at the first `unavailable`
    refused_while_up: int = 0  # `unavailable` answers to a request sent while it was up
    up_at: float = 0.0  # trio time the database was last said to be up
    acked: dict[str, dict[int, dict[str, Any]]] = attrs.Factory(dict)  # session -> seq -> push
    games_done: int = 0
    progress: trio.Event = attrs.Factory(trio.Event)  # set on each finished game
    stop: bool = False


async def request(c: Client, load: Load, op: str, **params: Any) -> dict[str, Any] | None:
    """``op``'s result; on ``unavailable``, wait until the database is up and send it again.
    None for an answer in ``allow`` (the state moved on: the caller looks again)."""
    while True:
        up = load.up
        sent_while_up = up.is_set()
        reply = await c.request(op, **params)
        if reply.get("ok"):
            return reply["result"]
        code = reply["error"]["code"]
        if code == "unavailable":
            load.unavailable += 1
            load.refused.set()
            load.refused_while_up += sent_while_up
            # a session retries its store at most once a second (PROTOCOL.md, `stalled`): a
            # request may be refused for that long after the database is back, not longer
            # (the slack: the store's own reconnect backoff)
            late = trio.current_time() - load.up_at
            assert not sent_while_up or late < 5.0, f"still unavailable {late:.1f} s after"
            await up.wait()
            await trio.sleep(0.05)  # as a client should: no tight loop on `unavailable`
            continue
        if code in ("not_your_turn", "conflict", "stale_seq"):
            return None
        raise HostError(reply["error"])


async def play_seat(c: Client, load: Load, sid: str, seat: int) -> None:
    """Play ``seat`` of ``sid`` to the end, noting every event pushed (acknowledged)."""
    while True:
        snap = await request(c, load, "view", session=sid)
        assert snap is not None
        if snap["ended"]:
            return
        if seat in snap["to_act"]:
            await request(c, load, "act", session=sid, action={"type": "keep"}, seq=snap["seq"])
            continue
        while True:  # wait for the table to move on
            push = await c.next_push()
            assert push is not None, "the host hung up"
            if push.get("session") != sid:
                continue
            if push["push"] == "event":
                load.acked.setdefault(sid, {})[push["seq"]] = push
            if push["push"] in ("event", "turn", "ended"):
                break


async def play_pair(host_client: Any, load: Load) -> None:
    """Two clients play one High Card table after another until told to stop."""
    a, b = await host_client(), await host_client()
    while not load.stop:
        created = await request(a, load, "create", game="high-card", seats=2, options={"rounds": 2})
        sid = created["session"]
        for c in (a, b):
            await request(c, load, "join", session=sid, name="p")
        async with trio.open_nursery() as n:
            n.start_soon(play_seat, a, load, sid, 0)
            n.start_soon(play_seat, b, load, sid, 1)
        load.games_done += 1
        load.progress.set()
        load.progress = trio.Event()


async def games_reach(load: Load, n: int) -> None:
    while load.games_done < n:
        await load.progress.wait()


async def test_a_database_restart_under_load_loses_nothing_acknowledged(own_cluster, tmp_path):
    url = own_cluster.new_database(schema=False)
    migrate(url)
    load = Load(up=trio.Event(), up_at=trio.current_time())
    load.up.set()
    pairs = 4
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, store=url)
        async with trio.open_nursery() as players:
            for _ in range(pairs):
                players.start_soon(play_pair, running.client, load)
            await games_reach(load, pairs)

            # 1: the server stops; clients are refused until it is back
            load.up = trio.Event()
            await trio.to_thread.run_sync(own_cluster.stop, "fast")
            await load.refused.wait()
            await trio.to_thread.run_sync(own_cluster.start)
            load.up_at = trio.current_time()
            load.up.set()
            before = load.games_done
            await games_reach(load, before + pairs)

            # 2: pg_ctl restart -m fast in the middle of play
            load.up = trio.Event()
            await trio.to_thread.run_sync(own_cluster.restart)
            load.up_at = trio.current_time()
            load.up.set()
            before = load.games_done
            await games_reach(load, before + 2 * pairs)  # play resumed
            load.stop = True
        running.host.request_shutdown()

    assert load.unavailable >= 1
    with psycopg.connect(url) as conn:
        stored: dict[str, list[tuple[int, str]]] = {}
        for sid, seq, line in conn.execute(
            "SELECT session_id, seq, line FROM gamehost_records ORDER BY session_id, seq"
        ):
            stored.setdefault(sid, []).append((seq, line))
    assert set(load.acked) <= set(stored)
    for sid, acked in load.acked.items():
        records = [orjson.loads(line) for _, line in stored[sid]]
        assert [r["seq"] for r in records] == list(range(len(records)))  # gapless
        for seq, push in acked.items():  # every record a client was sent is in the database
            assert seq < len(records), (sid, seq)
            rec = records[seq]
            assert rec["type"] == push["kind"]
            if rec["type"] == "event":
                assert rec["event"]["type"] == push["event"]["type"]
            if rec["type"] == "action":
                assert {"seat": rec["seat"], "action": rec["action"]} == push["event"]
