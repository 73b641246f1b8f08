"""Per-address limits: one peer address (or a few) cannot hold every connection slot or every
HTTP request slot. The rules are :class:`host.table.lobby.AddressSlots` (pure, tested here
directly); over the wire the test connections come from several loopback addresses
(127.0.0.2, 127.0.0.3, ... which Linux routes to lo) with ``address_limit_loopback`` on."""

from __future__ import annotations

import orjson
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from host.table.lobby import AddressSlots, address_key
from tests.conftest import start_host
from tools.client import Client

# -- the pure rules ------------------------------------------------------------------------------


def test_address_keys():
    assert address_key("203.0.113.7") == "203.0.113.7"
    assert address_key("::ffff:203.0.113.7") == "203.0.113.7"
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::9")
    assert address_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")
    assert address_key("::1") == "::1"  # loopback stays loopback
    assert address_key("?") == "?"


def test_one_address_holds_at_most_its_share_and_loopback_is_exempt_unless_asked():
    slots = AddressSlots(2)
    assert slots.acquire("10.0.0.1", "a") == (True, None)
    assert slots.acquire("10.0.0.1", "b") == (True, None)
    assert slots.acquire("10.0.0.1", "c") == (False, None)
    assert slots.acquire("10.0.0.2", "d") == (True, None)
    slots.release("10.0.0.1", "a")
    slots.release("10.0.0.1", "a")  # twice: nothing more
    assert slots.held("10.0.0.1") == 1 and len(slots) == 2
    assert slots.acquire("10.0.0.1", "c") == (True, None)
    assert all(slots.acquire("127.0.0.1", i)[0] for i in range(10))  # exempt
    assert all(slots.acquire("::1", i)[0] for i in range(10))
    strict = AddressSlots(2, limit_loopback=True)
    assert [strict.acquire("127.0.0.2", i)[0] for i in range(3)] == [True, True, False]
    assert all(AddressSlots(None).acquire("10.0.0.1", i)[0] for i in range(100))
    assert all(AddressSlots(0).acquire("10.0.0.1", i)[0] for i in range(100))  # 0: no limit


def test_when_every_slot_is_held_a_lighter_address_takes_the_busiest_ones_oldest():
    slots = AddressSlots(3, 6, fair=True)
    for i in range(3):
        slots.acquire("10.0.0.1", f"a{i}")
    for i in range(3):
        slots.acquire("10.0.0.2", f"b{i}")
    assert slots.acquire("10.0.0.3", "c0") == (True, "a0")  # the oldest of a busiest one
    assert slots.held("10.0.0.1") == 2 and len(slots) == 6
    assert slots.acquire("10.0.0.3", "c1") == (True, "b0")
    assert slots.acquire("10.0.0.3", "c2") == (False, None)  # 2 + 1 is not fewer than 2
    assert slots.acquire("10.0.0.1", "a9") == (False, None)
    slots.release("10.0.0.1", "a0")  # the evicted one's own release later: nothing
    assert len(slots) == 6
    assert AddressSlots(3, 6).acquire("x", 1) == (True, None)
    unfair = AddressSlots(None, 1)
    unfair.acquire("10.0.0.1", 1)
    assert unfair.acquire("10.0.0.2", 2) == (False, None)


def test_as_many_addresses_as_slots_holding_one_each_still_let_a_newcomer_in():
    """64 addresses with one slowloris head each fill 64 slots: a 65th address holds fewer
    (none) than the busiest (one), so it takes the oldest slot; the addresses pushed out do the
    same in turn, oldest first, so a request that ends quickly is never the one pushed out."""
    slots = AddressSlots(8, 64, fair=True)
    for i in range(64):
        assert slots.acquire(f"10.0.1.{i}", f"h{i}") == (True, None)
    assert slots.acquire("10.0.2.1", "newcomer") == (True, "h0")
    assert slots.acquire("10.0.1.0", "h0-again") == (True, "h1")  # the oldest of the busiest
    assert slots.held("10.0.2.1") == 1 and len(slots) == 64
    assert slots.acquire("10.0.1.2", "second") == (False, None)  # 1 is not fewer than 1
    busy = AddressSlots(8, 4, fair=True)
    for h in ("a1", "a2"):
        busy.acquire("10.0.0.1", h)
    for h in ("b1", "b2"):
        busy.acquire("10.0.0.2", h)
    assert busy.acquire("10.0.0.2", "b3") == (False, None)  # as many as the busiest
    assert busy.acquire("10.0.0.3", "c1") == (True, "a1")  # ties: the oldest slot


def test_the_evictable_holder_is_the_oldest_that_fits_at_the_busiest_addresses():
    slots = AddressSlots(None)
    for h in ("a1", "a2", "a3"):
        slots.acquire("10.0.0.1", h)
    slots.acquire("10.0.0.2", "b1")
    assert slots.evictable("10.0.0.9") == "a1"
    assert slots.evictable("10.0.0.9", lambda h: h != "a1") == "a2"
    # none of the busiest fits: the next busiest that holds more than the newcomer
    assert slots.evictable("10.0.0.9", lambda h: h.startswith("b")) == "b1"
    assert slots.evictable("10.0.0.2", lambda h: h.startswith("b")) is None
    assert slots.evictable("10.0.0.1") is None  # nobody holds more than it


@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 5), st.integers(0, 30)), max_size=200),
    st.integers(1, 4),
    st.integers(1, 12),
)
def test_slots_stay_within_their_limits_and_a_newcomer_always_gets_one(ops, share, total):
    """Whatever the order of takes and releases: no address passes its share, the total is
    never passed, the count is exact, an address holding nothing is never refused, and a slot
    is taken only from an address that held more than the taker."""
    slots = AddressSlots(share, total, fair=True)
    held: dict[int, str] = {}  # holder -> address, as the caller sees it
    for take, who, holder in ops:
        address = f"10.0.0.{who}"
        if take and holder not in held:
            before = slots.held(address)
            busiest = max((slots.held(f"10.0.0.{i}") for i in range(6)), default=0)
            granted, evicted = slots.acquire(address, holder)
            if granted:
                held[holder] = address
            if evicted is not None:
                del held[evicted]  # type: ignore[arg-type]
            if before == 0:
                assert granted
            if evicted is not None:
                assert before < busiest
        elif holder in held:
            slots.release(held.pop(holder), holder)
        assert len(slots) == len(held) <= total
        for i in range(6):
            assert slots.held(f"10.0.0.{i}") == sum(a == f"10.0.0.{i}" for a in held.values())
            assert slots.held(f"10.0.0.{i}") <= share


# -- over the wire -------------------------------------------------------------------------------


async def first_line(stream: trio.abc.Stream) -> dict | None:
    buf = b""
    while b"\n" not in buf:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buf += data
    return orjson.loads(buf.split(b"\n", 1)[0])


async def client_from(port: int, address: str, nursery: trio.Nursery) -> Client:
    c = Client(await trio.open_tcp_stream("127.0.0.1", port, local_address=address))
    c.start(nursery)
    return c


async def ws_refusal_from(port: int, address: str) -> bytes:
    """Open a WebSocket from ``address`` (a raw handshake); what the host sends after it."""
    stream = await trio.open_tcp_stream("127.0.0.1", port, local_address=address)
    async with stream:
        await stream.send_all(
            b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade"
            b"\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        got = b""
        while data := await stream.receive_some(65536):
            got += data
        return got


async def test_one_address_cannot_hold_every_connection_slot(tmp_path):
    """TCP and WebSocket connections count together per address; one more from it is told
    ``too_many_from_address`` and hung up on, while other addresses are served."""
    with trio.fail_after(30):
        async with trio.open_nursery() as n:
            running = await start_host(
                n,
                tmp_path,
                http_port=0,
                max_connections_per_address=2,
                address_limit_loopback=True,
            )
            port = running.port
            a = await client_from(port, "127.0.0.2", n)
            b = await client_from(port, "127.0.0.2", n)
            assert (await a.call("ping"))["pong"] and (await b.call("ping"))["pong"]
            extra = await trio.open_tcp_stream("127.0.0.1", port, local_address="127.0.0.2")
            await extra.send_all(b'{"id": 1, "op": "ping"}\n')
            assert await first_line(extra) == {"push": "closed", "reason": "too_many_from_address"}
            assert await extra.receive_some(100) == b""
            await extra.aclose()
            ws = await ws_refusal_from(running.host.http_port, "127.0.0.2")
            assert ws.startswith(b"HTTP/1.1 101") and b"too_many_from_address" in ws
            other = await client_from(port, "127.0.0.3", n)  # another address is served
            assert (await other.call("ping"))["pong"]
            await a.aclose()
            while len(running.host.connections) > 2:  # a's slot comes back once it is gone
                await trio.testing.wait_all_tasks_blocked()
            again = await client_from(port, "127.0.0.2", n)
            assert (await again.call("ping"))["pong"]
            for c in (b, other, again):
                await c.aclose()
            running.host.request_shutdown()


async def test_loopback_is_not_limited_per_address_by_default(tmp_path):
    with trio.fail_after(30):
        async with trio.open_nursery() as n:
            running = await start_host(n, tmp_path, max_connections_per_address=1)
            clients = [await client_from(running.port, "127.0.0.1", n) for _ in range(5)]
            for c in clients:
                assert (await c.call("ping"))["pong"]
                await c.aclose()
            running.host.request_shutdown()


async def test_at_the_connection_cap_an_idle_connection_of_the_busiest_address_makes_room(
    tmp_path,
):
    """At ``max_connections``, a connection from an address holding fewer than the busiest is
    let in, and the oldest idle connection (no seat, watching nothing) of the busiest address
    is closed (``too_many_connections``); one that watches a session is left alone."""
    with trio.fail_after(30):
        async with trio.open_nursery() as n:
            running = await start_host(n, tmp_path, max_connections=3)
            port = running.port
            watcher = await client_from(port, "127.0.0.2", n)
            sid = (await watcher.call("create", game="high-card", seats=2))["session"]
            await watcher.call("watch", session=sid)
            idle = await trio.open_tcp_stream("127.0.0.1", port, local_address="127.0.0.2")
            await idle.send_all(b'{"id": 1, "op": "ping"}\n')
            assert (await first_line(idle))["result"] == {"pong": True}
            other = await client_from(port, "127.0.0.3", n)
            assert (await other.call("ping"))["pong"]
            newcomer = await client_from(port, "127.0.0.4", n)
            assert (await newcomer.call("ping"))["pong"]
            assert await first_line(idle) == {"push": "closed", "reason": "too_many_connections"}
            assert (await watcher.call("view", session=sid))["session"] == sid
            late = await trio.open_tcp_stream("127.0.0.1", port, local_address="127.0.0.4")
            await late.send_all(b'{"id": 1, "op": "ping"}\n')  # .4 holds as many as any now
            assert await first_line(late) == {"push": "closed", "reason": "too_many_connections"}
            for c in (watcher, other, newcomer):
                await c.aclose()
            for s in (idle, late):
                await s.aclose()
            running.host.request_shutdown()
