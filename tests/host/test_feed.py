"""Feeds (notices of new records, leases on host-driven steps) and the host's Follower."""

from __future__ import annotations

import math
from typing import Any

import attrs
import trio

from host.store.feed import Follower, MemoryHub, Notice, PostgresFeed
from tests.host.test_store import rec


async def test_memory_leases_are_exclusive_and_die_with_the_connection() -> None:
    hub = MemoryHub()
    a, b = hub.feed(), hub.feed()
    assert await a.try_leases(["s1", "s2"]) == {"s1", "s2"}
    assert await b.try_leases(["s1", "s2", "s3"]) == {"s3"}
    assert a.holds("s1") and not b.holds("s1")
    await a.release("s1")
    assert await b.try_leases(["s1", "s2"]) == {"s1"}
    a.cut()  # a's connection dies: s2 is free at once, and a is told
    assert not a.holds("s2")
    assert await a.try_leases(["s2"]) == set()  # no connection, no lease
    assert await b.try_leases(["s2"]) == {"s2"}
    assert a.notices().receive_nowait() == Notice(None)
    a.mend()
    assert a.notices().receive_nowait() == Notice(None)
    assert await a.try_leases(["s1", "s2", "s4"]) == {"s4"}  # re-taken only if free


async def test_memory_notices_follow_appends() -> None:
    hub = MemoryHub()
    store_a, store_b = hub.store(), hub.store()
    fa = hub.feed()
    await store_a.create("s1", [rec(0)])
    await store_a.append("s1", 1, [rec(1), rec(2)])
    await store_b.create("s2", [rec(0)])
    store_b.load("s1")
    await store_b.append("s1", 3, [rec(3)])
    got = []
    while True:
        try:
            got.append(fa.notices().receive_nowait())
        except trio.WouldBlock:
            break
    assert got == [Notice("s1", 0), Notice("s1", 2), Notice("s2", 0), Notice("s1", 3)]
    assert [r["seq"] for r in await store_a.read("s1", 0)] == [1, 2, 3]


@attrs.define(eq=False)
class FakeSession:
    id: str
    ended: bool = False
    driver: bool | None = None
    seen: list = attrs.field(factory=list)
    alive: Any = None

    def notice(self, seq: int | None) -> None:
        self.seen.append(seq)

    def set_driver(self, driver: bool) -> None:
        self.driver = driver

    def set_host_alive(self, alive: Any) -> None:
        self.alive = alive


async def test_follower_takes_over_a_dead_hosts_leases(autojump_clock: trio.abc.Clock) -> None:
    hub = MemoryHub()
    live_a = {"s1": FakeSession("s1"), "s2": FakeSession("s2", ended=True)}
    live_b = {"s1": FakeSession("s1"), "s2": FakeSession("s2", ended=True)}
    found: list[str] = []
    fa, fb = hub.feed(), hub.feed()
    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as host_a:
            await host_a.start(fa.run)
            await host_a.start(Follower(fa, live_a).run)
            await Follower(fa, live_a).adopt(live_a["s1"])
            assert live_a["s1"].driver is True
            await outer.start(fb.run)
            follower_b = Follower(fb, live_b, found.append)
            await outer.start(follower_b.run)
            await trio.sleep(3)
            assert live_b["s1"].driver is False  # a holds it
            assert live_b["s2"].driver is None  # ended: nobody drives it
            hub.publish("s1", 8)
            hub.publish("s9", 1)  # not live at b: discovered
            await trio.sleep(0.1)
            assert live_b["s1"].seen == [8] and found == ["s9"]
            died = trio.current_time()
            host_a.cancel_scope.cancel()  # host a dies (its connection with it)
        while not live_b["s1"].driver:
            await trio.sleep(0.01)
        assert trio.current_time() - died <= follower_b.poll + 0.1
        outer.cancel_scope.cancel()


async def test_follower_hears_of_lost_leases(autojump_clock: trio.abc.Clock) -> None:
    hub = MemoryHub()
    live = {"s1": FakeSession("s1")}
    feed = hub.feed()
    async with trio.open_nursery() as n:
        await n.start(feed.run)
        follower = Follower(feed, live, poll=math.inf)
        await n.start(follower.run)
        await follower.adopt(live["s1"])
        assert live["s1"].driver is True
        feed.cut()
        await trio.sleep(0.1)
        assert live["s1"].driver is False and live["s1"].seen == [None]
        n.cancel_scope.cancel()


# -- PostgreSQL ---------------------------------------------------------------------------------
async def _next(feed: PostgresFeed) -> Notice:
    with trio.fail_after(10):
        return await feed.notices().receive()


async def test_postgres_feed_notices_and_leases(pg_dsn: str) -> None:
    import psycopg

    a, b = PostgresFeed(pg_dsn, name="feed-a"), PostgresFeed(pg_dsn, name="feed-b")
    async with trio.open_nursery() as n:
        await n.start(a.run)
        await n.start(b.run)
        assert await _next(a) == Notice(None)  # connected
        assert await _next(b) == Notice(None)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_notify('gamehost_log', 's1 5')")
            assert await _next(a) == Notice("s1", 5)
            assert await _next(b) == Notice("s1", 5)
            assert await a.try_leases(["s1", "s2"]) == {"s1", "s2"}
            assert await a.try_leases(["s1"]) == {"s1"}  # held: not locked twice
            assert await b.try_leases(["s1", "s2", "s3"]) == {"s3"}
            await a.release("s1")
            assert await b.try_leases(["s1", "s2"]) == {"s1"}
            # a's connection dies: its leases go with it, a hears of it, then reconnects
            conn.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                " WHERE application_name = 'feed-a'"
            )
            assert await _next(a) == Notice(None)  # lost
            assert not a.holds("s2")
            assert await b.try_leases(["s2"]) == {"s2"}
            assert await _next(a) == Notice(None)  # back
            assert await a.try_leases(["s1", "s2", "s4"]) == {"s4"}  # only the free ones
        await a.aclose()
        await b.aclose()


async def test_postgres_feed_retries_an_unreachable_server() -> None:
    feed = PostgresFeed("postgresql://nobody@127.0.0.1:1/none", backoff_max=0.2)
    async with trio.open_nursery() as n:
        await n.start(feed.run)
        assert await feed.try_leases(["s1"]) == set()  # no connection: no lease, no wait
        assert not feed.holds("s1")
        await feed.aclose()
