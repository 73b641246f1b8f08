"""Limits that keep one client from exhausting the host: connections, time, bytes, creates."""

from __future__ import annotations

import resource

import orjson
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from host.net.server import MAX_CONNECTIONS, Connection
from host.store.file import MAX_OPEN, read_log
from host.table.lobby import CreateLimiter
from tests.conftest import start_host
from tools.client import Client


async def first_line(stream: trio.abc.Stream) -> dict | None:
    """The first line the host sends on a raw stream (None at end of input)."""
    buf = b""
    while b"\n" not in buf:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buf += data
    return orjson.loads(buf.split(b"\n", 1)[0])


async def test_a_connection_over_the_cap_is_told_why_and_the_host_serves_the_others(tmp_path):
    with trio.fail_after(30):
        async with trio.open_nursery() as n:
            running = await start_host(n, tmp_path, max_connections=2)
            a, b = await running.client(), await running.client()
            assert (await a.call("ping"))["pong"] and (await b.call("ping"))["pong"]
            extra = await trio.open_tcp_stream("127.0.0.1", running.port)
            await extra.send_all(b'{"id": 1, "op": "ping"}\n')
            assert await first_line(extra) == {"push": "closed", "reason": "too_many_connections"}
            assert await extra.receive_some(100) == b""  # and hung up on
            await extra.aclose()
            assert (await a.call("ping"))["pong"]  # the others are served as before
            await a.aclose()
            await b.aclose()
            await running.host.wait_disconnected()
            c = await running.client()  # room again once they left
            assert (await c.call("ping"))["pong"]
            running.host.request_shutdown()


async def test_the_descriptor_limit_is_raised_and_sizes_the_connection_cap(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        async with trio.open_nursery() as n:
            running = await start_host(n, tmp_path)
            now_soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            assert now_soft == hard if hard != resource.RLIM_INFINITY else now_soft > 1024
            assert running.host.max_connections == min(MAX_CONNECTIONS, now_soft - MAX_OPEN - 64)
            running.host.request_shutdown()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_an_idle_lobby_connection_is_closed_but_a_waiting_player_is_not(tmp_path, mock_clock):
    # a clock that moves only when told: the store's threads cannot make it leap
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, idle_timeout=300.0, line_timeout=30.0)
        lobby, player = await running.client(), await running.client()
        created = await player.call("create", game="high-card", seats=2)
        await player.call("join", session=created["session"])  # waits for a second player
        await lobby.call("ping")
        mock_clock.jump(299.0)
        assert (await player.call("ping"))["pong"]
        await trio.testing.wait_all_tasks_blocked()
        assert lobby.pushes.statistics().current_buffer_used == 0  # not yet
        mock_clock.jump(2.0)
        await trio.testing.wait_all_tasks_blocked()
        assert lobby.pushes.receive_nowait() == {"push": "closed", "reason": "idle"}
        mock_clock.jump(3000.0)  # the seated player stays silent far longer
        view = await player.call("view", session=created["session"])
        assert view["seats"][0] is not None and not view["started"]
        running.host.request_shutdown()


async def test_a_line_trickled_byte_by_byte_is_cut_after_the_line_timeout(tmp_path, autojump_clock):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, idle_timeout=300.0, line_timeout=30.0)
        # bounded in virtual time; the host's shutdown (which waits for the store's writer
        # thread in real time, while the autojump clock leaps) stays outside the bound
        with trio.fail_after(10_000):
            stream = await trio.open_tcp_stream("127.0.0.1", running.port)
            t0 = trio.current_time()

            async def trickle() -> None:
                try:
                    while True:  # one byte a second, never a newline (slowloris)
                        await stream.send_all(b" ")
                        await trio.sleep(1)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass

            async with trio.open_nursery() as inner:
                inner.start_soon(trickle)
                assert await first_line(stream) == {"push": "closed", "reason": "line_timeout"}
                assert 30.0 <= trio.current_time() - t0 < 32.0
                inner.cancel_scope.cancel()
            await stream.aclose()
            c = await running.client()
            assert (await c.call("ping"))["pong"]
        running.host.request_shutdown()


async def test_a_client_that_never_reads_resumes_is_dropped_within_its_byte_budget(toy_host):
    host = toy_host.host
    budget = 64 * 1024
    a = await toy_host.client()
    sid = (await a.call("create", game="high-card", seats=2, bots=1, options={"rounds": 2}))[
        "session"
    ]
    token = (await a.call("join", session=sid))["token"]
    server_side, client_side = trio.testing.lockstep_stream_pair()
    conn = Connection(host, server_side, "lockstep", outbox=4096, outbox_bytes=budget)
    line = orjson.dumps({"op": "resume", "session": sid, "token": token, "after": 0}) + b"\n"
    line += orjson.dumps({"op": "leave", "session": sid}) + b"\n"  # so the next resume is taken
    sent = 0
    async with trio.open_nursery() as n:
        n.start_soon(conn.run)
        try:
            for _ in range(500):  # about 1 MB of missed events asked for, a few lines each
                await client_side.send_all(line)
                sent += 1
                await trio.testing.wait_all_tasks_blocked()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        await trio.testing.wait_all_tasks_blocked()
        assert conn.dead and conn.reason == "slow_consumer"
        assert sent < 500
        assert 0 < conn.queued_peak <= budget
        assert conn not in host.sessions[sid].subscribers
        n.cancel_scope.cancel()
    assert (await a.call("view", session=sid))["session"] == sid  # the host goes on


async def test_sessions_pages_list_every_session_exactly_once(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, max_unstarted=100)
        c = await running.client()
        sids = {(await c.call("create", game="high-card", seats=2))["session"] for _ in range(23)}
        seen: list[str] = []
        after = None
        pages = 0
        while True:
            page = await c.call("sessions", limit=5, after=after, game="high-card")
            assert len(page["sessions"]) <= 5
            seen += [s["session"] for s in page["sessions"]]
            pages += 1
            after = page["next"]
            if after is None:
                break
        assert sorted(seen) == seen and set(seen) == sids and len(seen) == len(sids)
        assert pages == 5
        whole = await c.call("sessions")
        assert len(whole["sessions"]) == 23 and whole["next"] is None
        assert (await c.call("sessions", game="other"))["sessions"] == []
        for bad in (0, 501):
            r = await c.request("sessions", limit=bad)
            assert r["error"]["code"] == "bad_request"
        running.host.request_shutdown()


async def _client_from(running, address: str, nursery: trio.Nursery) -> Client:
    c = Client(await trio.open_tcp_stream("127.0.0.1", running.port, local_address=address))
    c.start(nursery)
    return c


async def test_creates_past_an_address_rate_are_overloaded_and_other_peers_are_not(
    tmp_path, mock_clock
):
    async with trio.open_nursery() as n:
        running = await start_host(
            n,
            tmp_path,
            create_limit_loopback=True,
            create_burst=3,
            create_rate=0.5,
            max_unstarted=100,
        )
        a, b = await running.client(), await running.client()
        for c in (a, b, a):  # the bucket is the address's, not the connection's
            await c.call("create", game="high-card", seats=2)
        r = await b.request("create", game="high-card", seats=2)
        assert r["error"]["code"] == "overloaded"
        assert r["error"]["retry_after"] == 2.0
        sessions = len(running.host.sessions)
        other = await _client_from(running, "127.0.0.2", n)
        await other.call("create", game="high-card", seats=2)  # another peer is not affected
        assert len(running.host.sessions) == sessions + 1
        mock_clock.jump(1.9)
        r = await a.request("create", game="high-card", seats=2)
        assert r["error"]["code"] == "overloaded"
        assert r["error"]["retry_after"] == 0.1
        mock_clock.jump(0.1)
        await a.call("create", game="high-card", seats=2)  # a token is back
        running.host.request_shutdown()


async def test_loopback_creates_freely_by_default(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, create_burst=1)
        for _ in range(4):  # as bench and demo do: a new lobby connection per session
            c = await running.client()
            await c.call("create", game="high-card", seats=2)
            await c.aclose()
        assert len(running.host.sessions) == 4
        running.host.request_shutdown()


async def test_a_connection_may_hold_only_so_many_sessions_that_have_not_started(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, max_unstarted=2)
        a, b = await running.client(), await running.client()
        first = (await a.call("create", game="high-card", seats=2, bots=1))["session"]
        await a.call("create", game="high-card", seats=2)
        r = await a.request("create", game="high-card", seats=2)
        assert r["error"]["code"] == "overloaded" and "waiting for players" in r["error"]["message"]
        assert len(running.host.sessions) == 2
        await b.call("create", game="high-card", seats=2)  # another connection is not affected
        joined = await b.call("join", session=first)  # the first one starts
        assert joined["started"]
        await a.call("create", game="high-card", seats=2)
        running.host.request_shutdown()


@given(
    burst=st.integers(1, 20),
    rate=st.floats(0.01, 10.0),
    gaps=st.lists(st.floats(0.0, 5.0), max_size=200),
)
def test_the_create_bucket_never_grants_more_than_burst_plus_rate_times_time(burst, rate, gaps):
    limiter = CreateLimiter(burst, rate, loopback=True)
    now = 0.0
    granted = 0
    for gap in gaps:
        now += gap
        wait = limiter.take("10.0.0.1", now)
        assert wait >= 0.0
        if wait == 0.0:
            granted += 1
        else:  # after the wait it says, a token is there
            assert limiter.take("10.0.0.1", now + wait + 1e-9) == 0.0
            granted += 1
            now += wait + 1e-9
    assert granted <= burst + rate * now + 1e-6
    assert limiter.take("10.0.0.2", now) == 0.0  # another address has its own bucket


def test_the_create_buckets_of_many_addresses_are_forgotten_once_full():
    limiter = CreateLimiter(burst=2, rate=1.0, loopback=True)
    for i in range(20_000):
        assert limiter.take(f"10.{i // 65536}.{i // 256 % 256}.{i % 256}", 0.0) == 0.0
    assert limiter.take("10.0.0.1", 0.0) == 0.0 and limiter.take("10.0.0.1", 0.0) > 0
    for i in range(50):  # later, every other bucket has filled up again
        limiter.take(f"192.168.0.{i}", 100.0)
    assert len(limiter._buckets) < 100  # memory held by the limiter follows recent use only
    assert limiter.take("10.0.0.1", 100.0) == 0.0


async def test_a_resume_whose_missed_events_pass_the_byte_budget_drops_the_connection(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, outbox_bytes=1024)
        a, b = await running.client(), await running.client()
        sid = (await a.call("create", game="high-card", seats=2, bots=1, options={"rounds": 2}))[
            "session"
        ]
        joined = await a.call("join", session=sid)
        session = running.host.sessions[sid]
        logged = read_log(tmp_path / "sessions" / f"{sid}.jsonl")
        assert sum(len(orjson.dumps(r)) for r in logged) > 1024
        r = await b.request("resume", session=sid, token=joined["token"], after=session.state.seq)
        assert r["ok"]  # nothing missed but its own seat_held record: well within the budget
        held = r["result"]["seq"]
        await b.call("leave", session=sid)  # one role per connection: leave, then resume again
        try:
            await b.request("resume", session=sid, token=joined["token"], after=0)
            raise AssertionError("the connection should have been dropped")
        except ConnectionError:
            pass
        pushes = []
        while (p := await b.next_push()) is not None:
            pushes.append(p)
        assert pushes[-1] == {"push": "closed", "reason": "slow_consumer"}
        events = [p["seq"] for p in pushes if p["push"] == "event"]
        assert events == [held]  # the first resume's own record; none of the refused ones
        assert (await a.call("view", session=sid))["session"] == sid  # the others go on
        running.host.request_shutdown()


async def test_reconnecting_does_not_get_round_the_cap_on_sessions_waiting_for_players(tmp_path):
    """The cap on created, unstarted sessions holds per peer address too (loopback included
    with ``create_limit_loopback``), so a client cannot fill ``--max-sessions`` by reconnecting;
    without the flag loopback is exempt, as local tools need."""
    async with trio.open_nursery() as n:
        running = await start_host(
            n, tmp_path, max_unstarted=2, create_limit_loopback=True, create_burst=100
        )
        made = []
        for _ in range(2):
            c = await running.client()
            made.append((await c.call("create", game="high-card", seats=2))["session"])
            await c.aclose()
        again = await running.client()
        r = await again.request("create", game="high-card", seats=2)
        assert r["error"]["code"] == "overloaded"
        assert "created from 127.0.0.1" in r["error"]["message"]
        assert sorted(running.host.sessions) == sorted(made)
        running.host.request_shutdown()
    async with trio.open_nursery() as n:  # loopback is exempt by default
        running = await start_host(n, tmp_path / "b", max_unstarted=2)
        for _ in range(3):
            c = await running.client()
            await c.call("create", game="high-card", seats=2)
            await c.aclose()
        assert len(running.host.sessions) == 3
        running.host.request_shutdown()
