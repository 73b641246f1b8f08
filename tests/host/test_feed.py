"""Feeds (notices of new records, leases on host-driven steps) and the host's Follower."""

from __future__ import annotations

import math
import re
from typing import Any

import attrs
import trio
from hypothesis import given
from hypothesis import strategies as st

from host.store.feed import Follower, MemoryHub, Notice, PostgresFeed, channel, owner
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


async def test_memory_notices_reach_only_the_feeds_following_the_session() -> None:
    hub = MemoryHub()
    store_a, store_b = hub.store(), hub.store()
    other = next(f"t{i}" for i in range(100) if channel(f"t{i}") != channel("s1"))
    fa, fb = hub.feed(), hub.feed()
    fa.follow("s1")
    await store_a.create("s1", [rec(0)])
    await store_a.append("s1", 1, [rec(1), rec(2)])
    await store_b.create(other, [rec(0)])
    await store_b.append(other, 1, [rec(1)])  # nobody follows it: nobody hears of it
    store_b.load("s1")
    await store_b.append("s1", 3, [rec(3)])
    fa.unfollow("s1")
    store_a.load("s1")
    await store_a.append("s1", 4, [rec(4)])  # not followed any more
    assert _drain(fa) == [
        Notice("s1", 0, created=True),
        Notice("s1", 2),
        Notice(other, 0, created=True),
        Notice("s1", 3),
    ]
    assert _drain(fb) == [Notice("s1", 0, created=True), Notice(other, 0, created=True)]
    assert [r["seq"] for r in await store_a.read("s1", 0)] == [1, 2, 3, 4]


def _drain(feed: Any) -> list[Notice]:
    got = []
    while True:
        try:
            got.append(feed.notices().receive_nowait())
        except trio.WouldBlock:
            return got


def test_a_channel_is_a_short_identifier_per_bucket() -> None:
    longest = "x" * 64
    assert re.fullmatch(r"gamehost_log_[0-9a-f]{3}", channel(longest))
    assert len(channel(longest)) <= 63
    assert channel("s1") == channel("s1")
    assert len({channel(f"s{i}") for i in range(2000)}) > 1000  # spread over the buckets


@given(
    st.lists(
        st.text("abcdef0123456789", min_size=8, max_size=8), min_size=2, max_size=6, unique=True
    ),
    st.lists(
        st.text("abcdefghij_-", min_size=1, max_size=16), min_size=1, max_size=40, unique=True
    ),
)
def test_rendezvous_moves_only_the_sessions_of_a_host_that_goes(
    hosts: list[str], sessions: list[str]
) -> None:
    before = {s: owner(s, hosts) for s in sessions}
    assert all(o in hosts for o in before.values())
    assert before == {s: owner(s, list(reversed(hosts))) for s in sessions}  # order-free
    gone = hosts[0]
    after = {s: owner(s, hosts[1:]) for s in sessions}
    assert {s for s in sessions if before[s] != after[s]} == {
        s for s in sessions if before[s] == gone
    }


def test_rendezvous_gives_each_host_about_its_share() -> None:
    hosts = ["a1b2c3d4", "0f0f0f0f", "deadbeef"]
    counts = {h: 0 for h in hosts}
    for i in range(3000):
        counts[owner(f"{i:016x}", hosts)] += 1  # type: ignore[index]
    assert all(900 <= n <= 1100 for n in counts.values()), counts
    assert owner("s1", []) is None


@attrs.define(eq=False)
class FakeSession:
    id: str
    ended: bool = False
    driver: bool | None = None
    seen: list = attrs.field(factory=list)
    alive: Any = None
    seated: set[str] = attrs.field(factory=set)  # hosts whose connections hold seats
    let_go_told: bool = False

    def seat_hosts(self) -> set[str]:
        return set(self.seated)

    def let_go(self) -> None:
        self.let_go_told = True

    def notice(self, seq: int | None) -> None:
        self.seen.append(seq)

    def set_driver(self, driver: bool) -> None:
        self.driver = driver

    def set_host_alive(self, alive: Any) -> None:
        self.alive = alive


def _owned_by(host: str, hosts: set[str], n: int, prefix: str = "s") -> list[str]:
    """``n`` session ids whose owner among ``hosts`` is ``host``."""
    out = [f"{prefix}{i}" for i in range(1000) if owner(f"{prefix}{i}", hosts) == host]
    return out[:n]


class FakeHost:
    """A host's live sessions and what its Follower made it load or discover."""

    def __init__(self, hub: MemoryHub, instance: str, unfinished: list[str]) -> None:
        self.feed = hub.feed()
        self.feed.instance = instance
        self.live: dict[str, FakeSession] = {}
        self.loaded: list[str] = []
        self.found: list[str] = []
        self._unfinished = unfinished

        async def listing() -> list[str]:
            await trio.lowlevel.checkpoint()
            return list(self._unfinished)

        async def load(sid: str) -> None:
            await trio.lowlevel.checkpoint()
            self.loaded.append(sid)
            self.live[sid] = FakeSession(sid)
            await self.follower.adopt(self.live[sid])

        self.follower = Follower(
            self.feed, self.live, self.found.append, unfinished=listing, load=load
        )

    async def start(self, nursery: trio.Nursery) -> None:
        await nursery.start(self.feed.run)
        await nursery.start(self.follower.run)


async def test_follower_takes_over_a_dead_hosts_leases(autojump_clock: trio.abc.Clock) -> None:
    hub = MemoryHub()
    both = {"a", "b"}
    shared, a_only = _owned_by("a", both, 2)
    unfinished = [shared, a_only, "done"]
    a, b = FakeHost(hub, "a", unfinished), FakeHost(hub, "b", unfinished)
    a.live.update({shared: FakeSession(shared), "done": FakeSession("done", ended=True)})
    b.live.update({shared: FakeSession(shared), "done": FakeSession("done", ended=True)})
    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as host_a:
            await a.start(host_a)
            await trio.sleep(0.1)
            await b.start(outer)
            await trio.sleep(3)
            assert a.live[shared].driver is True and b.live[shared].driver is False
            assert b.live["done"].driver is None  # ended: nobody drives it
            assert a.loaded == [a_only] and b.loaded == []  # each loads only what it owns
            assert a.live[a_only].driver is True
            hub.publish(shared, 8)
            mine, theirs = _owned_by("b", both, 1, "n")[0], _owned_by("a", both, 1, "n")[0]
            hub.publish(mine, 0, created=True)  # made elsewhere, b's to drive: discovered
            hub.publish(theirs, 0, created=True)  # a's: b leaves it alone
            hub.publish("x", 1)  # not followed by b: not heard at all
            await trio.sleep(0.1)
            assert b.live[shared].seen == [] and b.found == [mine]  # b does not follow it
            b.feed.follow(shared)
            hub.publish(shared, 9)
            await trio.sleep(0.1)
            assert b.live[shared].seen == [9]
            died = trio.current_time()
            host_a.cancel_scope.cancel()  # host a dies (its connection with it)
        while not (b.live[shared].driver and a_only in b.live and b.live[a_only].driver):
            await trio.sleep(0.01)
        assert trio.current_time() - died <= b.follower.poll + 0.1
        assert b.loaded == [a_only]  # loaded only once it was b's
        outer.cancel_scope.cancel()


async def test_a_host_that_joins_takes_its_share(autojump_clock: trio.abc.Clock) -> None:
    hub = MemoryHub()
    ids = [f"t{i}" for i in range(40)]
    a = FakeHost(hub, "a", ids)
    async with trio.open_nursery() as n:
        await a.start(n)
        await trio.sleep(0.5)
        assert sorted(a.loaded) == sorted(ids) and all(s.driver for s in a.live.values())
        b = FakeHost(hub, "b", ids)  # its feed connects: a sees it at its next round
        await b.start(n)
        await trio.sleep(5)
        theirs = {sid for sid in ids if owner(sid, {"a", "b"}) == "b"}
        assert 10 <= len(theirs) <= 30
        assert set(b.loaded) == theirs
        assert {sid for sid, s in b.live.items() if s.driver} == theirs
        assert {sid for sid, s in a.live.items() if s.driver} == set(ids) - theirs
        assert {sid for sid, f in hub.leases.items() if f is b.feed} == theirs
        n.cancel_scope.cancel()


async def test_a_table_is_driven_where_its_players_are(autojump_clock: trio.abc.Clock) -> None:
    """The owner drives a session until its seats are held from one other host, which then
    drives it; the owner lets it go, and gets it back (told) once the players have gone."""
    hub = MemoryHub()
    sid = _owned_by("a", {"a", "b"}, 1)[0]
    a, b = FakeHost(hub, "a", [sid]), FakeHost(hub, "b", [sid])
    async with trio.open_nursery() as n:
        await a.start(n)
        await b.start(n)
        await trio.sleep(2)
        assert a.loaded == [sid] and a.live[sid].driver and sid not in b.live
        b.live[sid] = FakeSession(sid)  # a player of host b joins: the log says so everywhere
        a.live[sid].seated = b.live[sid].seated = {"b"}
        await b.follower.adopt(b.live[sid])
        await trio.sleep(2.5)
        assert b.live[sid].driver and not a.live[sid].driver and a.live[sid].let_go_told
        assert hub.leases[sid] is b.feed
        del a.live[sid]  # a lets it go (nobody of a's uses it)
        await trio.sleep(11)  # a's listing of the store leaves it alone: b drives it
        assert a.loaded == [sid] and a.found == []
        b.live[sid].seated = set()  # the player leaves: it goes back to its owner, told so
        await trio.sleep(2.5)
        assert not b.live[sid].driver and a.found == [sid]
        n.cancel_scope.cancel()


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


async def test_postgres_feed_notices_and_leases(pg_store_url: str) -> None:
    import psycopg

    url = pg_store_url
    a, b = PostgresFeed(url, name="feed-a"), PostgresFeed(url, name="feed-b")
    a.instance = "ia"
    s1, s2, s3 = "s1", "s2", next(f"s3{i}" for i in range(99) if channel(f"s3{i}") != channel("s1"))
    async with trio.open_nursery() as n:
        await n.start(a.run)
        await n.start(b.run)
        assert await _next(a) == Notice(None)  # connected
        assert await _next(b) == Notice(None)
        with psycopg.connect(url, autocommit=True) as conn:

            def row(sid: str, last: int) -> None:
                conn.execute(
                    "INSERT INTO gamehost_sessions (session_id, game, header, last_seq)"
                    " VALUES (%s, 'g', '{}', %s)",
                    [sid, last],
                )

            row(s2, 7)
            a.follow(s1)  # no such session yet: nothing to tell
            a.follow(s2)  # once listening, a hears where its log stands
            assert await _next(a) == Notice(s2, 7)
            conn.execute("SELECT pg_notify(%s, 's1 5')", [channel(s1)])
            assert await _next(a) == Notice(s1, 5)
            conn.execute("SELECT pg_notify('gamehost_created', 's9 0')")
            assert await _next(a) == Notice("s9", 0, created=True)
            assert await _next(b) == Notice("s9", 0, created=True)  # b heard nothing of s1
            a.unfollow(s1)
            row(s3, 2)
            a.follow(s3)
            assert await _next(a) == Notice(s3, 2)  # listening on s3's, not on s1's any more
            conn.execute("SELECT pg_notify(%s, 's1 6')", [channel(s1)])
            conn.execute("SELECT pg_notify('gamehost_created', 's10 0')")
            assert await _next(a) == Notice("s10", 0, created=True)
            assert await a.live_hosts() == {"ia"}  # the feeds of this name on this database
            assert await a.try_leases(["s1", "s2"]) == {"s1", "s2"}
            assert await a.try_leases(["s1"]) == {"s1"}  # held: not locked twice
            assert await b.try_leases(["s1", "s2", "s3"]) == {"s3"}
            await a.release("s1")
            assert await b.try_leases(["s1", "s2"]) == {"s1"}
            # a's connection dies: its leases go with it, a hears of it, then reconnects
            conn.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                " WHERE application_name = 'feed-a ia'"
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


async def test_postgres_live_hosts_are_those_of_the_same_database(pg_store_url: str) -> None:
    from tests import pg

    other_db = pg.fresh_url()
    here, there = PostgresFeed(pg_store_url), PostgresFeed(other_db)
    here.instance, there.instance = "here", "there"
    async with trio.open_nursery() as n:
        await n.start(here.run)
        await n.start(there.run)
        assert await _next(here) == Notice(None)
        assert await _next(there) == Notice(None)
        assert await here.live_hosts() == {"here"}
        assert await there.live_hosts() == {"there"}
        await here.aclose()
        await there.aclose()
