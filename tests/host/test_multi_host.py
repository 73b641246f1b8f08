"""Two hosts in one process sharing one store: followers of the log, leases.

Each test runs on an in-process hub (``MemoryHub``) and on a throwaway PostgreSQL database (each
host with its own ``PostgresStore`` and ``PostgresFeed``, as separate processes would have).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import orjson
import psycopg
import pytest
import trio

from host.net.server import HostConfig, run_host
from host.store import feed as feed_module
from host.store.feed import MemoryHub, PostgresFeed
from host.store.pg import PostgresStore
from tests.conftest import RunningHost, toy_registry
from tests.host.test_server import new_session
from tools.client import Client


@attrs.define
class Shared:
    """What the hosts of a test share: a hub, or a database."""

    hub: MemoryHub | None = None
    url: str | None = None

    def store(self) -> Any:
        if self.hub is not None:
            return self.hub.store()
        return PostgresStore(self.url)

    def feed(self) -> Any:
        return self.hub.feed() if self.hub is not None else PostgresFeed(self.url, poll=0.02)

    async def records(self, sid: str) -> list[dict[str, Any]]:
        """The session's records as stored."""
        if self.hub is not None:
            return [orjson.loads(line) for line in self.hub.logs[sid]]

        def read() -> list[dict[str, Any]]:
            with psycopg.connect(self.url) as conn:
                rows = conn.execute(
                    "SELECT line FROM gamehost_records WHERE session_id = %s ORDER BY seq", [sid]
                )
                return [orjson.loads(r[0]) for r in rows]

        return await trio.to_thread.run_sync(read)


@pytest.fixture(params=["memory", "postgres"])
def shared(request: pytest.FixtureRequest) -> Shared:
    if request.param == "memory":
        return Shared(hub=MemoryHub())
    return Shared(url=request.getfixturevalue("pg_store_url"))


async def start_shared(
    nursery: trio.Nursery, hub: Shared, data_dir: Path, **config: object
) -> RunningHost:
    """A host on the shared store (its own store object and feed), like one of several hosts
    on one database."""
    config = {"idle_timeout": None, "line_timeout": None, "ping_after": None, **config}
    cfg = HostConfig(data_dir=data_dir, port=0, **config)  # type: ignore[arg-type]
    registry = toy_registry()
    host, port = await nursery.start(
        lambda task_status: run_host(
            cfg,
            registry,
            handle_signals=False,
            store=hub.store(),
            feed=hub.feed(),
            task_status=task_status,
        )
    )
    await host.loaded.wait()
    return RunningHost(host, port, data_dir, nursery)


async def client(nursery: trio.Nursery, h: RunningHost) -> Client:
    c = await Client.connect("127.0.0.1", h.port)
    c.start(nursery)
    return c


async def play_out(c: Client, sid: str, seat: int, last: int) -> list[int]:
    """Act on every turn push for ``seat`` until the session ends; the seqs of every event
    push seen, from ``last`` on (they must be gapless)."""
    seen = []
    while True:
        p = await c.next_push()
        assert p is not None
        if p["push"] == "event":
            seen.append(p["seq"])
            assert p["seq"] == last + 1, f"a gap: {last} then {p['seq']}"
            last = p["seq"]
        elif p["push"] == "turn" and p["seat"] == seat:
            reply = await c.request("act", session=sid, action={"type": "keep"}, seq=p["seq"])
            assert reply["ok"] or reply["error"]["code"] == "conflict", reply
        elif p["push"] == "ended":
            return seen


async def test_players_on_two_hosts_play_one_session(tmp_path: Path, shared: Shared) -> None:
    hub = shared
    async with trio.open_nursery() as n:
        a = await start_shared(n, hub, tmp_path / "a")
        b = await start_shared(n, hub, tmp_path / "b")
        ca, cb = await client(n, a), await client(n, b)
        sid = await new_session(ca, seats=2, rounds=2)
        ja = await ca.call("join", session=sid, name="ann")
        jb = await cb.call("join", session=sid, name="bob")  # b loads it from the store
        assert (ja["seat"], jb["seat"]) == (0, 1)
        assert jb["started"] and jb["to_act"] == [0]
        results: dict[int, list[int]] = {}

        async def player(c: Client, seat: int, last: int) -> None:
            results[seat] = await play_out(c, sid, seat, last)

        async with trio.open_nursery() as players:
            players.start_soon(player, ca, 0, ja["seq"])  # bob's join reaches ann through a
            players.start_soon(player, cb, 1, jb["seq"])
        recs = await hub.records(sid)
        end = len(recs) - 1
        assert [r["seq"] for r in recs] == list(range(end + 1))
        # each host pushed every record to its own client, gapless, to the end
        assert results[0] == list(range(ja["seq"] + 1, end + 1))
        assert results[1] == list(range(jb["seq"] + 1, end + 1))
        view_a = await ca.call("view", session=sid)
        view_b = await cb.call("view", session=sid)
        assert view_a["ended"] and view_b["ended"] and view_a["seq"] == view_b["seq"] == end
        a.host.request_shutdown()
        b.host.request_shutdown()


async def test_a_lost_race_for_a_seq_is_decided_again(tmp_path: Path, shared: Shared) -> None:
    """Two hosts append to one session at once: each seq is won once, the log stays gapless,
    and the loser decides again on the caught-up copy (a join then gets the next seat)."""
    hub = shared
    async with trio.open_nursery() as n:
        a = await start_shared(n, hub, tmp_path / "a")
        b = await start_shared(n, hub, tmp_path / "b")
        ca = await client(n, a)
        sid = await new_session(ca, seats=4)
        await (await client(n, b)).call("view", session=sid)  # b has it live
        joiners = [await client(n, h) for h in (a, b, a, b)]
        seats: list[int] = []

        async def join(c: Client) -> None:
            while True:  # a join that lost twice in a row is answered conflict: ask again
                reply = await c.request("join", session=sid, name="p")
                if reply["ok"]:
                    seats.append(reply["result"]["seat"])
                    return
                assert reply["error"]["code"] == "conflict", reply

        async with trio.open_nursery() as racers:
            for c in joiners:
                racers.start_soon(join, c)
        assert sorted(seats) == [0, 1, 2, 3]
        recs = await hub.records(sid)
        assert [r["seq"] for r in recs] == list(range(len(recs)))
        assert sorted(r["seat"] for r in recs if r["type"] == "seat_taken") == [0, 1, 2, 3]
        a.host.request_shutdown()
        b.host.request_shutdown()


async def test_acts_on_two_hosts_take_turns_by_seq(tmp_path: Path, shared: Shared) -> None:
    """An act naming a seq the answering host has not read yet waits for it (the client saw it
    through the other host); one naming a seq the session has moved past is ``conflict``."""
    hub = shared
    async with trio.open_nursery() as n:
        a = await start_shared(n, hub, tmp_path / "a")
        b = await start_shared(n, hub, tmp_path / "b")
        ca, cb = await client(n, a), await client(n, b)
        sid = await new_session(ca, seats=2, rounds=2)
        await ca.call("join", session=sid, name="ann")
        jb = await cb.call("join", session=sid, name="bob")
        first = await ca.call("act", session=sid, action={"type": "keep"}, seq=jb["seq"])
        # bob answers at once on host b, naming the seq host a acknowledged
        second = await cb.call("act", session=sid, action={"type": "keep"}, seq=first["seq"])
        assert second["seq"] > first["seq"]
        stale = await ca.request("act", session=sid, action={"type": "keep"}, seq=jb["seq"])
        assert stale["error"]["code"] == "conflict"
        assert stale["error"]["seq"] >= first["seq"]
        recs = await hub.records(sid)
        assert len(recs) == second["seq"] + 1
        acts = [r for r in recs if r["type"] == "action"]
        assert [r["seat"] for r in acts] == [0, 1]
        a.host.request_shutdown()
        b.host.request_shutdown()


async def test_a_host_appends_after_following_without_a_conflict(
    tmp_path: Path, shared: Shared
) -> None:
    """Once a host has folded another host's records it appends at the next seq straight away
    (the store is told where the log is), instead of losing a race against its own stale view
    and reading the whole log again."""
    hub = shared
    async with trio.open_nursery() as n:
        a = await start_shared(n, hub, tmp_path / "a")
        b = await start_shared(n, hub, tmp_path / "b")
        ca, cb = await client(n, a), await client(n, b)
        sid = await new_session(ca, seats=2, rounds=2)
        await ca.call("join", session=sid, name="ann")
        seq = (await cb.call("join", session=sid, name="bob"))["seq"]
        lost = [h.host.sessions[sid].lost_races for h in (a, b)]
        for c in (ca, cb, ca, cb):  # the seats take turns, each on its own host
            seq = (await c.call("act", session=sid, action={"type": "keep"}, seq=seq))["seq"]
        assert [h.host.sessions[sid].lost_races for h in (a, b)] == lost
        recs = await hub.records(sid)
        assert [r["seat"] for r in recs if r["type"] == "action"] == [0, 1, 0, 1]
        assert recs[-1]["type"] == "ended"
        a.host.request_shutdown()
        b.host.request_shutdown()


async def test_resume_on_the_other_host_with_token_and_seq(tmp_path: Path, shared: Shared) -> None:
    hub = shared
    async with trio.open_nursery() as n:
        a = await start_shared(n, hub, tmp_path / "a")
        b = await start_shared(n, hub, tmp_path / "b")
        ca = await client(n, a)
        sid = await new_session(ca, seats=2, bots=1, rounds=2)
        ja = await ca.call("join", session=sid, name="ann")
        done = await ca.call("act", session=sid, action={"type": "keep"}, seq=ja["seq"])
        await ca.aclose()
        cb = await client(n, b)  # ann comes back on the other host, with what she saw
        resumed = await cb.call("resume", session=sid, token=ja["token"], after=ja["seq"])
        assert resumed["seat"] == 0 and resumed["seq"] >= done["seq"]
        pushed = []
        while len(pushed) < resumed["seq"] - ja["seq"]:
            p = await cb.next_push()
            assert p is not None
            if p["push"] == "event":
                pushed.append(p["seq"])
        assert pushed == list(range(ja["seq"] + 1, resumed["seq"] + 1))
        a.host.request_shutdown()
        b.host.request_shutdown()


async def test_bots_of_a_dead_host_are_taken_over(tmp_path: Path, shared: Shared) -> None:
    """Bots run on one host only (the lease holder); when it dies, the other host with the
    session live takes over, from the log (within the lease poll: see test_feed for the
    timing, under a virtual clock)."""
    hub = shared
    async with trio.open_nursery() as n:
        nurseries, hosts, watchers = [], [], []
        for name in "ab":
            nurseries.append(await n.start(_host_nursery))
            hosts.append(await start_shared(nurseries[-1], hub, tmp_path / name, bot_delay=0.2))
        sid = await new_session(await client(n, hosts[0]), seats=3, bots=3, rounds=2)
        for h in hosts:
            c = await client(n, h)
            watched = await c.call("watch", session=sid)
            watchers.append((c, watched["seq"]))
        for c, seq in watchers:  # a bot moved: one host drives
            p = await c.next_push()
            assert p["push"] == "event" and p["seq"] == seq + 1
        drivers = [i for i, h in enumerate(hosts) if h.host.sessions[sid].driver]
        assert len(drivers) == 1
        dead, alive = drivers[0], 1 - drivers[0]
        nurseries[dead].cancel_scope.cancel()  # the driver dies: its feed (and lease) with it
        before = len(await hub.records(sid))
        c = watchers[alive][0]
        while True:  # the other host's bots play the session to its end
            p = await c.next_push()
            assert p is not None
            if p["push"] == "ended":
                break
        assert hosts[alive].host.sessions[sid].driver
        recs = await hub.records(sid)
        assert [r["seq"] for r in recs] == list(range(len(recs)))
        assert len(recs) > before and recs[-1]["type"] == "ended"
        assert recs[-1]["outcome"] is not None  # played out, not aborted
        n.cancel_scope.cancel()


async def test_a_takeover_on_one_host_detaches_the_seat_on_the_other(
    tmp_path: Path, shared: Shared
) -> None:
    async with trio.open_nursery() as n:
        a = await start_shared(n, shared, tmp_path / "a")
        b = await start_shared(n, shared, tmp_path / "b")
        ca, cb = await client(n, a), await client(n, b)
        sid = await new_session(ca, seats=2, bots=1)
        joined = await ca.call("join", session=sid, name="ann")
        tab = await client(n, b)  # ann's second tab, on the other host
        resumed = await tab.call("resume", session=sid, token=joined["token"])
        while (p := await ca.next_push())["push"] != "detached":
            pass
        assert p == {"push": "detached", "session": sid, "seat": 0, "reason": "resumed"}
        refused = await ca.request("act", session=sid, action={"type": "keep"})
        assert refused["error"]["code"] == "not_seated"
        recs = await shared.records(sid)
        assert recs[resumed["seq"]]["type"] == "seat_held"
        del cb
        n.cancel_scope.cancel()


async def test_the_seats_of_a_dead_host_are_released_by_the_one_that_drives(
    tmp_path: Path, shared: Shared, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feed_module, "HOST_GRACE", 0.5)
    async with trio.open_nursery() as n:
        nurseries, hosts = [], []
        for name in "ab":
            nurseries.append(await n.start(_host_nursery))
            hosts.append(await start_shared(nurseries[-1], shared, tmp_path / name))
        c0 = await client(n, hosts[0])
        sid = await new_session(c0, seats=2)
        await client(n, hosts[1])
        # ann plays on whichever host does not drive; bob on the driver
        with trio.fail_after(20):
            while not any(h.host.sessions.get(sid) and h.host.sessions[sid].driver for h in hosts):
                await c0.call("view", session=sid)
        driver = next(i for i, h in enumerate(hosts) if h.host.sessions[sid].driver)
        ann = await client(nurseries[1 - driver], hosts[1 - driver])
        bob = await client(n, hosts[driver])
        await ann.call("join", session=sid, name="ann")
        await bob.call("join", session=sid, name="bob")
        nurseries[1 - driver].cancel_scope.cancel()  # ann's host dies with its connections
        with trio.fail_after(30):
            while True:
                p = await bob.next_push()
                assert p is not None
                if p["push"] == "event" and p["kind"] == "seat_released":
                    break
        assert p["event"] == {"seat": 0}
        recs = await shared.records(sid)
        assert recs[p["seq"]]["reason"] == "host_gone"
        n.cancel_scope.cancel()


async def _host_nursery(*, task_status: trio.TaskStatus[trio.Nursery]) -> None:
    async with trio.open_nursery() as nursery:
        task_status.started(nursery)
        await trio.sleep_forever()


async def test_the_lobby_lists_sessions_of_every_host(tmp_path: Path, shared: Shared) -> None:
    hub = shared
    async with trio.open_nursery() as n:
        a = await start_shared(n, hub, tmp_path / "a")
        b = await start_shared(n, hub, tmp_path / "b")
        ca, cb = await client(n, a), await client(n, b)
        made = sorted([await new_session(ca) for _ in range(3)] + [await new_session(cb)])
        listed, after = [], None
        while True:
            page = await cb.call("sessions", limit=2, after=after)
            listed += [s["session"] for s in page["sessions"]]
            assert all(s["seats"] == [None, None] for s in page["sessions"])
            after = page["next"]
            if after is None:
                break
        assert listed == made
        a.host.request_shutdown()
        b.host.request_shutdown()


async def _all_see(hosts: list[RunningHost], n: int) -> None:
    """Wait until every host's lease round has seen ``n`` hosts (so ownership is settled)."""
    with trio.fail_after(20):
        while not all(
            h.host.follower is not None
            and (seen := h.host.follower.hosts) is not None
            and len(seen) == n
            for h in hosts
        ):
            await trio.sleep(0.02)


async def test_three_hosts_each_fold_only_what_they_serve(tmp_path: Path, shared: Shared) -> None:
    """Sessions are driven (and folded) only where they were made; a host whose client takes a
    seat of another's session drives it from then on (the other lets it go); a dead host's
    sessions are loaded by their next owner only, one host each."""
    async with trio.open_nursery() as n:
        nurseries, hosts = [], []
        for name in "abc":
            nurseries.append(await n.start(_host_nursery))
            hosts.append(await start_shared(nurseries[-1], shared, tmp_path / name, linger=0.5))
        await _all_see(hosts, 3)
        made: list[list[str]] = []
        for h in hosts:
            c = await client(n, h)
            made.append([await new_session(c, seats=3, bots=2) for _ in range(6)])  # waiting
        assert len({sid for ids in made for sid in ids}) == 18
        for h, ids in zip(hosts, made, strict=True):
            with trio.fail_after(20):  # each takes the leases of what it made
                while not all(h.host.sessions[sid].driver for sid in ids):
                    await trio.sleep(0.02)
        for h, ids in zip(hosts, made, strict=True):
            assert set(h.host.sessions) == set(ids)  # each host has only its own live
            assert h.host.sessions_loaded == 0  # and has folded nothing from the store
        a, b, c = hosts
        ann = await client(n, a)  # a client of host a joins a session made on host b
        theirs = made[1][0]
        await ann.call("join", session=theirs, name="ann")
        with trio.fail_after(20):  # the table is driven where its player is; b lets it go
            while not (a.host.sessions[theirs].driver and theirs not in b.host.sessions):
                await trio.sleep(0.05)
        assert theirs not in c.host.sessions
        assert (a.host.sessions_loaded, b.host.sessions_loaded, c.host.sessions_loaded) == (1, 0, 0)
        assert b.host.sessions_unloaded == 1
        nurseries[2].cancel_scope.cancel()  # host c dies: a and b share out its sessions
        survivors = {a.host.instance, b.host.instance}
        with trio.fail_after(20):
            while not all(
                any(sid in h.host.sessions and h.host.sessions[sid].driver for h in (a, b))
                for sid in made[2]
            ):
                await trio.sleep(0.05)
        for sid in made[2]:
            new_owner = feed_module.owner(sid, survivors)
            holders = [h for h in (a, b) if sid in h.host.sessions]
            assert [h.host.instance for h in holders] == [new_owner], sid
        taken = {h.host.instance: len(set(h.host.sessions) & set(made[2])) for h in (a, b)}
        assert a.host.sessions_loaded == 1 + taken[a.host.instance]
        assert b.host.sessions_loaded == taken[b.host.instance]
        await ann.aclose()  # ann goes: the session goes back to its owner, and leaves host a
        with trio.fail_after(20):
            while theirs in a.host.sessions or not (
                theirs in b.host.sessions and b.host.sessions[theirs].driver
            ):
                await trio.sleep(0.05)
        assert a.host.sessions_unloaded == 1
        assert b.host.sessions_loaded == 1 + taken[b.host.instance]  # b loaded it back
        recs = await shared.records(theirs)
        assert (recs[-1]["type"], recs[-1]["reason"]) == ("seat_released", "gone")
        n.cancel_scope.cancel()


async def test_a_session_nobody_follows_is_loaded_where_a_client_names_it(
    tmp_path: Path, shared: Shared
) -> None:
    async with trio.open_nursery() as n:
        a = await start_shared(n, shared, tmp_path / "a")
        b = await start_shared(n, shared, tmp_path / "b")
        await _all_see([a, b], 2)
        sid = await new_session(await client(n, a), seats=2)
        assert sid not in b.host.sessions
        cb = await client(n, b)
        view = await cb.call("view", session=sid)  # b reads it from the store on demand
        assert view["seq"] == a.host.sessions[sid].state.seq
        assert sid in b.host.sessions and not b.host.sessions[sid].driver
        assert b.host.sessions_loaded == 1
        n.cancel_scope.cancel()
