"""The host over real TCP (127.0.0.1, port 0) with the test game High Card."""

from __future__ import annotations

import orjson
import trio
import trio.testing

from host.net.server import Connection
from tests.conftest import log_of, start_host
from tools.client import Client


async def new_session(c: Client, seats: int = 2, bots: int = 0, **options) -> str:
    created = await c.call("create", game="high-card", seats=seats, bots=bots, options=options)
    return created["session"]


async def watch_to_end(c: Client, sid: str) -> dict:
    """Watch a session until it has ended; its last snapshot."""
    snap = await c.call("watch", session=sid)
    while not snap["ended"]:
        await c.next_push()
        snap = await c.call("view", session=sid)
    return snap


async def pushes_until(c: Client, kind: str) -> list[dict]:
    out = []
    while True:
        p = await c.next_push()
        assert p is not None, "connection closed"
        out.append(p)
        if p["push"] == kind:
            return out


async def test_hello_answers_the_protocol_ops_and_games(toy_host):
    c = await toy_host.client()
    hello = await c.call("hello", protocol=1, client="t")
    assert hello["protocol"] == 1 and "act" in hello["ops"]
    games = await c.call("games")
    assert [g["id"] for g in games["games"]] == ["high-card"]
    assert games["games"][0]["options"][0]["choices"] == [1, 2]
    bad = await c.request("hello", protocol=2)
    assert bad["error"]["code"] == "unsupported_protocol"


async def test_two_clients_play_a_session_to_its_end_with_gapless_pushes(toy_host):
    a, b = await toy_host.client(), await toy_host.client()
    sid = await new_session(a)
    ja = await a.call("join", session=sid, name="ann")
    jb = await b.call("join", session=sid, name="bob")
    assert (ja["seat"], jb["seat"]) == (0, 1)
    assert jb["started"] and jb["to_act"] == [0]
    seen = {0: ja["seq"], 1: jb["seq"]}
    ended = {}

    async def play(c: Client, seat: int) -> None:
        while True:
            p = await c.next_push()
            assert p is not None
            if p["push"] == "event":
                assert p["seq"] == seen[seat] + 1
                seen[seat] = p["seq"]
            elif p["push"] == "turn" and p["seat"] == seat:
                await c.call("act", session=sid, action=p["legal"][0], seq=p["seq"])
            elif p["push"] == "ended":
                ended[seat] = p
                return

    async with trio.open_nursery() as n:
        n.start_soon(play, a, 0)
        n.start_soon(play, b, 1)
    assert ended[0]["outcome"] == ended[1]["outcome"]
    assert ended[0]["seq"] == seen[0] == seen[1]


async def test_bad_lines_get_typed_errors_and_the_connection_keeps_serving(toy_host):
    c = await toy_host.client()
    await c.send_raw(b"{this is not json\n")
    await c.send_raw(b'{"id": 9, "op": "ping", "pad": "' + b"x" * 70_000 + b'"}\n')
    replies = []
    r = await c.request("no_such_op")
    replies.append(r["error"]["code"])
    r = await c.request("create", game="high-card", seats="two")
    replies.append(r["error"]["code"])
    r = await c.request("create", game="chess")
    replies.append(r["error"]["code"])
    r = await c.request("create", game="high-card", seats=9)
    replies.append(r["error"]["code"])
    r = await c.request("create", game="high-card", options={"rounds": 3})
    replies.append((r["error"]["code"], r["error"]["option"]))
    r = await c.request("act", session="nope", action={"type": "keep"})
    replies.append(r["error"]["code"])
    assert replies == [
        "unknown_op",
        "bad_request",
        "unknown_game",
        "bad_request",
        ("bad_option", "rounds"),
        "unknown_session",
    ]
    assert await c.call("ping") == {"pong": True}


async def test_raw_bad_lines_are_answered_in_order(toy_host):
    s = await trio.open_tcp_stream("127.0.0.1", toy_host.port)
    await s.send_all(b"garbage\n" + b"y" * 70_000 + b"\n" + b'{"id":1,"op":"ping"}\n')
    buf = b""
    while buf.count(b"\n") < 3:
        buf += await s.receive_some()
    lines = [orjson.loads(x) for x in buf.splitlines()]
    assert [x.get("error", {}).get("code") for x in lines] == ["bad_json", "line_too_long", None]
    assert lines[2]["result"] == {"pong": True}
    await s.aclose()


async def test_lines_in_pieces_in_one_send_and_after_replies_are_all_answered_in_order(toy_host):
    # the reader waits for input before reading once a line was answered, and reads at once
    # otherwise: a line in pieces, several lines in one send, and a line right after a reply
    s = await trio.open_tcp_stream("127.0.0.1", toy_host.port)
    got: list[dict] = []
    buf = b""

    async def replies(n: int) -> None:
        nonlocal buf
        while len(got) < n:
            while b"\n" not in buf:
                buf += await s.receive_some()
            line, buf = buf.split(b"\n", 1)
            got.append(orjson.loads(line))

    piece = b'{"id":1,"op":"ping"}\n'
    for i in range(0, len(piece), 5):  # in pieces, each read and waited for
        await s.send_all(piece[i : i + 5])
        await trio.sleep(0.01)
    await replies(1)
    await s.send_all(b"".join(b'{"id":%d,"op":"ping"}\n' % i for i in (2, 3, 4)))
    await replies(4)
    for i in (5, 6):  # one line at a time, each after the reply before it
        await s.send_all(b'{"id":%d,"op":"ping"}\n' % i)
        await replies(i)
    assert [r["id"] for r in got] == [1, 2, 3, 4, 5, 6]
    assert all(r["result"] == {"pong": True} for r in got)
    await s.aclose()


async def test_actions_are_refused_with_typed_codes_and_change_nothing(toy_host):
    a, b, w = await toy_host.client(), await toy_host.client(), await toy_host.client()
    sid = await new_session(a)
    r = await w.request("act", session=sid, action={"type": "keep"})
    assert r["error"]["code"] == "not_seated"
    await a.call("join", session=sid)
    jb = await b.call("join", session=sid)
    seq = jb["seq"]
    r = await b.request("act", session=sid, action={"type": "keep"})
    assert r["error"]["code"] == "not_your_turn"
    r = await a.request("act", session=sid, action={"type": "fly"})
    assert r["error"]["code"] == "bad_action"
    r = await a.request("act", session=sid, action={"type": "keep", "x": 1})
    assert r["error"]["code"] == "bad_action"
    r = await a.request("act", session=sid, action={"type": "keep"}, seq=seq - 1)
    assert r["error"]["code"] == "conflict" and r["error"]["seq"] == seq
    r = await w.request("join", session=sid)
    assert r["error"]["code"] == "session_full"
    view = await a.call("view", session=sid)
    assert view["seq"] == seq
    assert (await a.call("act", session=sid, action={"type": "keep"}, seq=seq))["seq"] == seq + 2


async def test_a_spectator_and_the_other_seat_never_see_a_hidden_card(toy_host):
    a, b, w = await toy_host.client(), await toy_host.client(), await toy_host.client()
    sid = await new_session(a)
    await w.call("watch", session=sid)
    await a.call("join", session=sid)
    jb = await b.call("join", session=sid)
    va = await a.call("view", session=sid)
    assert va["view"]["hands"][0] is not None and va["view"]["hands"][1] is None
    assert jb["view"]["hands"][0] is None and jb["view"]["hands"][1] is not None
    assert (await w.call("view", session=sid))["view"]["hands"] == [None, None]
    spectator = await pushes_until(w, "event")
    spectator += await pushes_until(w, "event")  # seat_taken x2 then the deal
    spectator += await pushes_until(w, "event")
    deal = spectator[-1]
    assert deal["event"]["type"] == "dealt"
    assert deal["event"]["hands"] == [None, None] and deal["event"]["stock"] is None


async def test_resume_pushes_only_the_missed_events(toy_host):
    a, b = await toy_host.client(), await toy_host.client()
    sid = await new_session(a)
    ja = await a.call("join", session=sid)
    jb = await b.call("join", session=sid)
    await a.aclose()  # seat 0 drops: the log says so, and the others are told
    while (p := await b.next_push())["push"] != "event" or p["kind"] != "seat_released":
        pass
    assert p["event"] == {"seat": 0} and p["seq"] == jb["seq"] + 1
    a2 = await toy_host.client()
    r = await a2.request("resume", session=sid, token="wrong")
    assert r["error"]["code"] == "bad_token"
    resumed = await a2.call("resume", session=sid, token=ja["token"], after=ja["seq"])
    assert resumed["seat"] == 0 and resumed["seq"] == jb["seq"] + 2  # released, then held
    missed = []
    while True:
        p = await a2.next_push()
        missed.append(p)
        if p["push"] == "turn":
            break
    events = [p for p in missed if p["push"] == "event"]
    assert [p["seq"] for p in events] == list(range(ja["seq"] + 1, resumed["seq"] + 1))
    assert [p["kind"] for p in events[-2:]] == ["seat_released", "seat_held"]
    await a2.call("act", session=sid, action={"type": "keep"}, seq=missed[-1]["seq"])


async def test_a_client_that_does_not_read_is_dropped_and_the_table_goes_on(toy_host):
    host = toy_host.host
    server_side, client_side = trio.testing.lockstep_stream_pair()
    conn = Connection(host, server_side, "lockstep", outbox=2)
    a = await toy_host.client()
    sid = await new_session(a, seats=2, bots=1, rounds=2)
    async with trio.open_nursery() as n:
        n.start_soon(conn.run)
        await client_side.send_all(b'{"id": 1, "op": "watch", "session": "%s"}\n' % sid.encode())
        await a.call("join", session=sid)  # the deal, turns and bot moves fill the outbox
        while True:
            p = await a.next_push()
            assert p is not None
            if p["push"] == "turn":
                await a.call("act", session=sid, action=p["legal"][0], seq=p["seq"])
            elif p["push"] == "ended":
                break
        assert conn.dead and conn.reason == "slow_consumer"
        assert conn not in host.sessions[sid].subscribers
        n.cancel_scope.cancel()


async def test_a_session_is_rebuilt_from_its_log_exactly_as_the_live_host_held_it(tmp_path):
    async with trio.open_nursery() as n:
        first = await start_host(n, tmp_path)
        a = await first.client()
        sid = await new_session(a, seats=3, bots=1, rounds=2)
        ja = await a.call("join", session=sid)
        again = await a.request("join", session=sid)
        assert again["error"] == {  # one seat per connection
            "code": "already_attached",
            "message": again["error"]["message"],
            "seat": ja["seat"],
        }
        await (await first.client()).call("join", session=sid)
        live = first.host.sessions[sid].state
        first.host.request_shutdown()
    logged = log_of(tmp_path, sid)
    assert logged[-1].seq == live.seq  # a host that stops releases no seat itself
    async with trio.open_nursery() as n:
        second = await start_host(n, tmp_path)
        engine = second.host.registry.engines["high-card"]
        assert engine.rebuild(logged) == live
        c = await second.client()
        resumed = await c.call("resume", session=sid, token=ja["token"])
        second.host.request_shutdown()
    # the new host released the seats the old one's connections held, then seat 0 was resumed
    after = log_of(tmp_path, sid)[live.seq + 1 :]
    assert [(r.type, r.data["seat"]) for r in after] == [
        ("seat_released", 0),
        ("seat_released", 1),
        ("seat_held", 0),
    ]
    assert after[0].data["reason"] == "host_gone" and resumed["seq"] == after[-1].seq


async def test_shutdown_tells_clients_why_they_are_closed(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path)
        c = await running.client()
        await c.call("ping")
        running.host.request_shutdown()
        p = await c.next_push()
        assert p == {"push": "closed", "reason": "shutdown"}


async def test_a_turn_timer_plays_for_a_seat_that_does_not_act(tmp_path, autojump_clock):
    from host.store.file import read_log
    from host.table.engine import Record
    from host.table.history import verify_log

    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, turn_timeout=30.0)
        a, b = await running.client(), await running.client()
        sid = await new_session(a, rounds=2)
        await a.call("join", session=sid)
        await b.call("join", session=sid)
        t0 = trio.current_time()
        ended = await pushes_until(a, "ended")  # nobody acts: the timer plays every turn
        assert trio.current_time() - t0 >= 4 * 30.0
        actions = [p for p in ended if p["push"] == "event" and p["kind"] == "action"]
        assert len(actions) == 4
        running.host.request_shutdown()
    records = [Record.from_json(r) for r in read_log(tmp_path / "sessions" / f"{sid}.jsonl")]
    assert [r.data.get("timed_out") for r in records if r.type == "action"] == [True] * 4
    engine = running.host.registry.engines["high-card"]
    assert verify_log(engine, records) is None


async def test_a_game_that_keeps_its_seed_secret_never_sends_it(tmp_path):
    import attrs

    from host.plugins.registry import load_registry
    from tests.toy import HighCard

    class SecretHighCard(HighCard):
        info = attrs.evolve(HighCard.info, id="secret-high-card", reveal_seed=False)

    class Plugin:
        from host.game import hookimpl

        @hookimpl
        def gamehost_register_games(self):
            return [SecretHighCard()]

    registry = load_registry([("secret", Plugin())], entrypoints=False)
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry)
        c = await running.client()
        sid = (await c.call("create", game="secret-high-card", seats=2, bots=2))["session"]
        snap = await watch_to_end(c, sid)
        assert snap["seed"] is None and len(snap["seed_commitment"]) == 64
        log = (tmp_path / "sessions" / f"{sid}.jsonl").read_bytes().splitlines()
        assert orjson.loads(log[-1])["seed"] == orjson.loads(log[0])["seed"]  # kept for audit
        running.host.request_shutdown()


async def test_a_half_written_last_cause_is_dropped_on_restart(tmp_path):
    from host.store.file import read_log

    async with trio.open_nursery() as n:
        first = await start_host(n, tmp_path)
        a, b = await first.client(), await first.client()
        sid = await new_session(a)
        ja = await a.call("join", session=sid)
        jb = await b.call("join", session=sid)
        await a.call("act", session=sid, action={"type": "swap"}, seq=jb["seq"])
        first.host.request_shutdown()
    path = tmp_path / "sessions" / f"{sid}.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    assert orjson.loads(lines[-2])["type"] == "action"
    path.write_bytes(b"".join(lines[:-1]))  # the crash lost the action's event
    async with trio.open_nursery() as n:
        second = await start_host(n, tmp_path)
        c = await second.client()
        resumed = await c.call("resume", session=sid, token=ja["token"])
        kept = read_log(path)  # back to before the unacknowledged action, then the releases
        assert [r["type"] for r in kept[jb["seq"] + 1 :]] == [
            "seat_released",
            "seat_released",
            "seat_held",
        ]
        done = await c.call("act", session=sid, action={"type": "keep"}, seq=jb["seq"])
        assert done["seq"] == resumed["seq"] + 2
        second.host.request_shutdown()


async def test_the_host_ends_a_session_that_reaches_its_record_limit(tmp_path):
    from host.store.file import read_log
    from host.table.engine import Record
    from host.table.history import verify_log

    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, max_records=12)
        c = await running.client()
        sid = await new_session(c, seats=4, bots=4, rounds=2)  # 4 seats + deal + 8 moves > 12
        snap = await watch_to_end(c, sid)
        assert snap["outcome"] is None and snap["seq"] == 12  # 12 records, then the end
        running.host.request_shutdown()
    records = [Record.from_json(r) for r in read_log(tmp_path / "sessions" / f"{sid}.jsonl")]
    assert records[-1].data["aborted"] == "too_long"
    assert verify_log(running.host.registry.engines["high-card"], records) is None


async def test_names_lose_control_characters_and_seats_out_of_range_are_bad_requests(toy_host):
    c = await toy_host.client()
    sid = await new_session(c)
    r = await c.request("join", session=sid, seat=7)
    assert r["error"]["code"] == "bad_request"
    joined = await c.call("join", session=sid, name="\x1b[2J\x1b[31mEVIL\x07")
    assert joined["seats"][0]["name"] == "[2J[31mEVIL"


async def test_a_finished_session_leaves_the_live_list_once_idle(tmp_path, autojump_clock):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path)
        c = await running.client()
        sid = await new_session(c, bots=2)
        last = await watch_to_end(c, sid)
        assert sid in running.host.sessions
        await trio.sleep(61)  # the linger time passes (autojump clock: no real wait)
        assert sid not in running.host.sessions
        again = await c.call("view", session=sid)  # answered from its log
        assert (again["ended"], again["seq"], again["outcome"]) == (
            True,
            last["seq"],
            last["outcome"],
        )
        r = await c.request("join", session=sid)
        assert r["error"]["code"] == "session_ended"
        r = await c.request("view", session="0123456789abcdef")
        assert r["error"]["code"] == "unknown_session"
        running.host.request_shutdown()


async def test_a_client_that_closes_its_side_still_gets_its_answers(toy_host):
    c = await toy_host.client()
    sid = await new_session(c)
    s = await trio.open_tcp_stream("127.0.0.1", toy_host.port)
    # the last request has no newline: the end of input ends the line
    await s.send_all(
        b'{"id": 1, "op": "join", "session": "%s"}\n{"id": 2, "op": "ping"}' % sid.encode()
    )
    await s.send_eof()
    buf = b""
    while chunk := await s.receive_some():
        buf += chunk
    replies = {m["id"]: m for m in map(orjson.loads, buf.splitlines()) if "id" in m}
    assert replies[1]["ok"] and replies[1]["result"]["token"]
    assert replies[2]["result"] == {"pong": True}
    await s.aclose()


async def test_the_host_writes_its_record_limit_stop_with_the_action_that_reached_it(tmp_path):
    """The ``too_long`` stop is appended together with the records that reach the limit: if
    that append fails, neither is acknowledged (the action is not left durable but unanswered)."""
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, max_records=4)
        c = await running.client()
        sid = await new_session(c, seats=2, bots=1, rounds=2)  # seq 1: the bot's seat
        store = running.host.store
        before = store.statistics()
        joined = await c.call("join", session=sid)  # seat 2, deal 3: the limit, stop 4
        after = store.statistics()
        assert joined["ended"] and joined["seq"] == 4
        assert after.appends - before.appends == 1  # the join's records and the stop at once
        assert after.records - before.records == joined["seq"] - 1
        running.host.request_shutdown()
