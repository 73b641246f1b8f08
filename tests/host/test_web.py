"""``serve --http``: the web client's files, and protocol v1 over a WebSocket with the limits,
errors and redaction of TCP (the same Connection serves both)."""

from __future__ import annotations

import orjson
import pytest
import trio
import trio.testing

from host.net.web import origin_allowed, origin_of
from protocol.framing import MAX_LINE
from tests.conftest import start_host
from tests.wsclient import LineOverWebSocket, handshake_status, open_ws, ws_client
from tools.client import Client


async def http_get(port: int, path: str, method: str = "GET", host: str = "127.0.0.1") -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        got = b""
        while data := await stream.receive_some(65536):
            got += data
        return got


@pytest.fixture
async def web_host(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, http_port=0)
        yield running
        running.host.request_shutdown()


async def test_the_page_is_served_with_a_strict_policy(web_host):
    port = web_host.host.http_port
    got = await http_get(port, "/")
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"content-security-policy: default-src 'none'; script-src 'self'" in head.lower()
    assert body.startswith(b"<!doctype html>")
    assert (await http_get(port, "/nothing-here")).startswith(b"HTTP/1.1 404")
    assert (await http_get(port, "/../pyproject.toml")).startswith(b"HTTP/1.1 404")
    assert (await http_get(port, "/", method="POST")).startswith(b"HTTP/1.1 405")


async def test_no_http_listener_unless_asked(toy_host):
    assert toy_host.host.http_port is None


async def test_a_session_is_played_over_the_websocket(web_host):
    async with trio.open_nursery() as n:
        c = await ws_client(n, web_host.host.http_port)
        hello = await c.call("hello", protocol=1)
        assert hello["protocol"] == 1
        made = await c.call("create", game="high-card", seats=2, bots=1)
        joined = await c.call("join", session=made["session"], name="ann")
        assert joined["seat"] == 0 and joined["token"]
        # the pushes come, each its own message, until the toy game's turn for seat 0
        while True:
            p = await c.next_push()
            assert p is not None
            if p["push"] == "turn" and p["seat"] == 0:
                break
        done = await c.call("act", session=made["session"], action=p["legal"][0], seq=p["seq"])
        assert done["seq"] > p["seq"]
        n.cancel_scope.cancel()


async def test_errors_and_limits_are_those_of_tcp(web_host):
    async with trio.open_nursery() as n:
        ws = await open_ws(n, web_host.host.http_port)
        await ws.send_message("hello?")
        err = orjson.loads(await ws.get_message())
        assert err["error"]["code"] == "bad_json" and err["id"] is None
        await ws.send_message('{"id": 5, "op": "fly"}')
        assert orjson.loads(await ws.get_message())["error"]["code"] == "unknown_op"
        # one message past 64 KiB: line_too_long, and the connection keeps serving
        big = '{"id": 6, "op": "ping", "pad": "' + "x" * MAX_LINE + '"}'
        await ws.send_message(big)
        err = orjson.loads(await ws.get_message())
        assert err["error"]["code"] == "line_too_long"
        # a pretty-printed request (newlines between tokens) is still one request
        await ws.send_message('{\n  "id": 7,\n  "op": "ping"\n}')
        assert orjson.loads(await ws.get_message()) == {
            "id": 7,
            "ok": True,
            "result": {"pong": True},
        }
        # binary frames are read as text
        await ws.send_message(b'{"id": 8, "op": "ping"}')
        assert orjson.loads(await ws.get_message())["id"] == 8
        await ws.aclose()


async def test_over_the_connection_cap_a_websocket_is_told_so(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, http_port=0, max_connections=1)
        first = await ws_client(n, running.host.http_port)
        await first.call("ping")
        ws = await open_ws(n, running.host.http_port)
        msg = orjson.loads(await ws.get_message())
        assert msg == {"push": "closed", "reason": "too_many_connections"}
        running.host.request_shutdown()


async def test_an_idle_websocket_is_closed_with_the_reason(tmp_path, autojump_clock):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, http_port=0, idle_timeout=10.0)
        ws = await open_ws(n, running.host.http_port)
        msg = orjson.loads(await ws.get_message())
        assert msg == {"push": "closed", "reason": "idle"}
        running.host.request_shutdown()


async def test_other_origins_are_refused(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(
            n, tmp_path, http_port=0, allow_origins=("https://tables.example",)
        )
        port = running.host.http_port
        here = f"127.0.0.1:{port}"
        assert await handshake_status(port, here, None) == 101  # not a browser
        assert await handshake_status(port, here, f"http://{here}") == 101  # same origin
        assert await handshake_status(port, f"localhost:{port}", f"http://localhost:{port}") == 101
        assert await handshake_status(port, here, "https://tables.example") == 101
        assert await handshake_status(port, here, "http://evil.example") == 403
        assert await handshake_status(port, here, f"http://127.0.0.1:{port + 1}") == 403
        # a page of another site whose name resolves to 127.0.0.1 (DNS rebinding)
        evil = f"evil.example:{port}"
        assert await handshake_status(port, evil, f"http://{evil}") == 403
        running.host.request_shutdown()


def test_origin_rules():
    none: frozenset[str] = frozenset()
    assert origin_allowed(None, "127.0.0.1:1", none, loopback=True)
    assert not origin_allowed(None, None, none, loopback=True)
    assert origin_allowed("http://[::1]:8", "[::1]:8", none, loopback=True)
    assert not origin_allowed("http://a.example:8", "a.example:8", none, loopback=True)
    assert not origin_allowed("http://b.example:8", "a.example:8", none, loopback=False)
    assert origin_allowed(
        "HTTP://B.example:8/", "a.example:8", frozenset({"http://b.example:8"}), False
    )


def test_off_loopback_only_configured_origins_open_the_websocket():
    """DNS rebinding: a page of any site whose name resolves to the host sends its own name as
    both Origin and Host; off loopback that is refused, whatever the name."""
    none: frozenset[str] = frozenset()
    assert not origin_allowed("http://evil.example:8080", "evil.example:8080", none, False)
    assert not origin_allowed("http://10.0.0.5:8080", "10.0.0.5:8080", none, loopback=False)
    assert not origin_allowed("https://cards.example", "cards.example", none, loopback=False)
    cards = frozenset({"https://cards.example"})
    assert origin_allowed("https://cards.example", "cards.example", cards, loopback=False)
    assert origin_allowed("https://cards.example", "10.0.0.5:8080", cards, loopback=False)
    assert not origin_allowed("http://cards.example", "cards.example", cards, loopback=False)
    assert not origin_allowed("http://evil.example", "evil.example", cards, loopback=False)
    # the host's own page on a loopback name stays same-origin on any bind (0.0.0.0 too)
    assert origin_allowed("http://localhost:8080", "localhost:8080", none, loopback=False)
    assert origin_allowed("http://127.0.0.1:8080", "127.0.0.1:8080", none, loopback=False)
    assert not origin_allowed("http://localhost:8081", "localhost:8080", none, loopback=False)
    assert origin_allowed(None, "evil.example", none, loopback=False)  # not a browser


def test_a_loopback_listener_behind_a_proxy_accepts_the_public_name_only():
    cards, hosts = frozenset({"https://cards.example"}), frozenset({"cards.example"})
    assert origin_allowed("https://cards.example", "cards.example", cards, True, hosts)
    assert not origin_allowed("https://cards.example", "evil.example", cards, True, hosts)
    assert not origin_allowed("http://cards.example", "cards.example", cards, True, hosts)
    assert not origin_allowed("http://evil.example", "evil.example", cards, True, hosts)


@pytest.mark.parametrize(
    ("url", "origin", "host"),
    [
        ("https://Cards.Example/", "https://cards.example", "cards.example"),
        ("https://cards.example:443/play", "https://cards.example", "cards.example"),
        ("http://10.0.0.5:8080", "http://10.0.0.5:8080", "10.0.0.5:8080"),
        ("http://[2001:db8::1]:80", "http://[2001:db8::1]", "[2001:db8::1]"),
    ],
)
def test_public_url_gives_its_origin_and_host(url, origin, host):
    assert origin_of(url) == (origin, host)


@pytest.mark.parametrize(
    "url", ["cards.example", "ftp://cards.example", "https://", "http://a:99999"]
)
def test_a_bad_public_url_is_refused(url):
    with pytest.raises(ValueError):
        origin_of(url)


async def test_off_loopback_the_hosts_own_name_is_not_enough(tmp_path):
    """Over the wire: bound to 0.0.0.0, a rebinding page (Origin = Host = its name) is refused,
    the configured public URL is admitted, a loopback name's own page still is."""
    async with trio.open_nursery() as n:
        running = await start_host(
            n, tmp_path, http_port=0, http_bind="0.0.0.0", public_url="https://cards.example"
        )
        port = running.host.http_port
        evil = f"evil.example:{port}"
        assert await handshake_status(port, evil, f"http://{evil}") == 403
        assert await handshake_status(port, f"10.0.0.5:{port}", f"http://10.0.0.5:{port}") == 403
        assert await handshake_status(port, "cards.example", "https://cards.example") == 101
        here = f"localhost:{port}"
        assert await handshake_status(port, here, f"http://{here}") == 101
        assert await handshake_status(port, evil, None) == 101  # not a browser
        running.host.request_shutdown()


async def test_no_card_a_seat_may_not_see_reaches_it_over_the_websocket(tmp_path):
    from tests.host.test_acceptance import REGISTRY, assert_no_card_leaked, play_ce_sessions

    if "crazy-eights" not in REGISTRY.games:
        pytest.skip("the crazy-eights plugin is not installed")
    seen: dict = {}
    sids: list = []
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, REGISTRY, http_port=0)
        port = running.host.http_port

        async def connect() -> Client:
            return Client(LineOverWebSocket(await open_ws(n, port)))

        await play_ce_sessions(port, 4, 3, 0, seen, sids, options={"target": 1}, connect=connect)
        await play_ce_sessions(port, 2, 5, 2, seen, sids, options={"target": 1}, connect=connect)
        # the history a table fetches when it opens (the log op with the seat's token) is
        # redacted for that seat as its pushes were
        async with await connect() as c:
            for (sid, seat), got in seen.items():
                token = orjson.loads(got[0][2])["token"]
                after = 0
                while after is not None:
                    page = await c.call("log", session=sid, after=after, seat=seat, token=token)
                    for r in page["records"]:  # as the table lists it: a push's shape
                        seq, kind = r.pop("seq"), r.pop("type")
                        event = r["event"] if kind == "event" else r
                        push = {"push": "event", "seq": seq, "kind": kind, "event": event}
                        got.append(("event", seq, orjson.dumps(push)))
                    after = page["next"]
        running.host.request_shutdown()
    assert len(sids) == 6
    assert_no_card_leaked(tmp_path, sids, seen)


async def test_requests_read_at_once_are_capped(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, http_port=0, max_http_requests=2)
        port = running.host.http_port
        silent = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(2)]
        await silent[1].send_all(b"GET / HTTP/1.1\r\n")  # a head begun, never ended
        await trio.testing.wait_all_tasks_blocked()  # both are being read
        extra = await trio.open_tcp_stream("127.0.0.1", port)
        await extra.send_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert await extra.receive_some(100) == b""  # closed unanswered (no fairer to take one)
        for s in silent:
            await s.aclose()
        await extra.aclose()
        got = b""
        while not got.startswith(b"HTTP/1.1 200"):  # the slots come back as the handlers end
            got = await http_get(port, "/")
        running.host.request_shutdown()


async def begin_heads(port: int, address: str, count: int) -> list[trio.SocketStream]:
    """``count`` connections from ``address`` that begin a request head and never end it."""
    out = []
    for _ in range(count):
        s = await trio.open_tcp_stream("127.0.0.1", port, local_address=address)
        await s.send_all(b"GET / HTTP/1.1\r\n")
        out.append(s)
    await trio.testing.wait_all_tasks_blocked()
    return out


async def get_from(port: int, address: str) -> bytes:
    """A whole ``GET /`` answer to a connection from ``address`` (b"" when closed unanswered)."""
    async with await trio.open_tcp_stream("127.0.0.1", port, local_address=address) as s:
        await s.send_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        got = b""
        while data := await s.receive_some(65536):
            got += data
    return got


async def test_slowloris_from_a_few_addresses_cannot_take_every_request_slot(tmp_path):
    """Heads begun and never ended: one address holds at most its per-address share, and when
    a few addresses together hold every slot, a request from another address takes the oldest
    slot of the busiest ones, so it is served. Linux routes all of 127.0.0.0/8 to lo, so each
    127.0.0.x is an address of its own."""
    with trio.fail_after(30):
        async with trio.open_nursery() as n:
            running = await start_host(
                n,
                tmp_path,
                http_port=0,
                max_http_requests=8,
                max_http_requests_per_address=3,
                address_limit_loopback=True,
            )
            port = running.host.http_port
            held = []
            for i in range(2, 5):  # 3 addresses x 3 heads, 8 slots: .4's third takes .2's first
                held += await begin_heads(port, f"127.0.0.{i}", 3)
            assert await get_from(port, "127.0.0.4") == b""  # at its per-address share
            for _ in range(3):  # another address is served each time, the attackers refilling
                assert (await get_from(port, "127.0.0.9")).startswith(b"HTTP/1.1 200")
                held += await begin_heads(port, "127.0.0.3", 1)
            for s in held:
                await s.aclose()
            running.host.request_shutdown()


async def test_as_many_slowloris_addresses_as_slots_still_let_a_newcomer_in(tmp_path):
    """One slow head from each of 16 addresses fills all 16 slots: a 17th address is served
    (it takes the oldest slot), again and again while the attackers come back."""
    with trio.fail_after(60):
        async with trio.open_nursery() as n:
            running = await start_host(
                n, tmp_path, http_port=0, max_http_requests=16, address_limit_loopback=True
            )
            port = running.host.http_port
            held = []
            for i in range(16):
                held += await begin_heads(port, f"127.0.0.{10 + i}", 1)
            for i in range(3):
                assert (await get_from(port, "127.0.0.99")).startswith(b"HTTP/1.1 200")
                held += await begin_heads(port, f"127.0.0.{10 + i}", 1)  # back again
            for s in held:
                await s.aclose()
            running.host.request_shutdown()


async def test_without_the_flag_loopback_has_no_per_address_share(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(
            n, tmp_path, http_port=0, max_http_requests=8, max_http_requests_per_address=1
        )
        port = running.host.http_port
        held = await begin_heads(port, "127.0.0.2", 4)
        assert (await get_from(port, "127.0.0.2")).startswith(b"HTTP/1.1 200")
        for s in held:
            await s.aclose()
        running.host.request_shutdown()


def test_serve_flags_reach_the_host_config(monkeypatch, tmp_path):
    import host.cli
    from tools.cli import main

    seen = []
    monkeypatch.setattr(host.cli.trio, "run", lambda fn, config, *rest: seen.append(config))
    monkeypatch.setattr(host.cli.logs, "configure", lambda *a, **k: None)  # keep the tests' own
    args = ["serve", "--data-dir", str(tmp_path), "--http", "8080", "--http-bind", "0.0.0.0"]
    args += ["--allow-origin", "https://a.example", "--allow-origin", "http://b.example:9"]
    assert main([*args, "--debug-replay", "--public-url", "https://cards.example"]) == 0
    cfg = seen[0]
    assert (cfg.http_port, cfg.http_bind, cfg.debug_replay) == (8080, "0.0.0.0", True)
    assert cfg.allow_origins == ("https://a.example", "http://b.example:9")
    assert cfg.public_url == "https://cards.example"
    assert main(["serve", "--data-dir", str(tmp_path)]) == 0
    assert (seen[1].http_port, seen[1].allow_origins, seen[1].debug_replay) == (None, (), False)
    assert seen[1].public_url is None
    with pytest.raises(SystemExit):
        main(["serve", "--data-dir", str(tmp_path), "--public-url", "cards.example"])


async def test_every_games_contract_is_served_for_the_lobby_forms(web_host):
    from host.plugins.contract import game_schema

    got = await http_get(web_host.host.http_port, "/schema.json")
    head, _, body = got.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower()
    games = orjson.loads(body)["games"]
    want = game_schema(web_host.host.registry.games["high-card"])
    assert games == {"high-card": orjson.loads(orjson.dumps(want))}
    assert games["high-card"]["options"]["properties"]["rounds"]["enum"] == [1, 2]


def test_a_game_whose_schema_fails_is_left_out(monkeypatch):
    import host.plugins.contract
    from host.net.web import schema_file
    from tests.conftest import toy_registry

    def broken(game):
        raise host.plugins.contract.SchemaError("cannot describe it")

    monkeypatch.setattr(host.plugins.contract, "game_schema", broken)
    assert orjson.loads(schema_file(toy_registry())) == {"games": {}}


async def test_workers_share_the_http_port(tmp_path):
    from host.net.workers import reserve_port

    reserved = reserve_port("127.0.0.1", 0)  # held, not listening, as the supervisor does
    http = reserved.getsockname()[1]
    try:
        async with trio.open_nursery() as n:
            hosts = [
                await start_host(n, tmp_path / name, reuse_port=True, http_port=http)
                for name in ("a", "b")
            ]
            assert [h.host.http_port for h in hosts] == [http, http]
            got = await http_get(http, "/")
            assert got.startswith(b"HTTP/1.1 200")
            for h in hosts:
                h.host.request_shutdown()
    finally:
        reserved.close()


def test_workers_need_an_http_port_number(capsys, monkeypatch, tmp_path):
    import host.cli
    from tools.cli import main

    monkeypatch.setattr(host.cli.logs, "configure", lambda *a, **k: None)  # keep the tests' own

    args = ["serve", "--workers", "2", "--store", "postgresql://nowhere/x", "--http", "0"]
    assert main([*args, "--data-dir", str(tmp_path)]) == 2
    assert "--http needs a port number" in capsys.readouterr().err
