"""One role per connection per session, the error extras PROTOCOL.md lists, request ids that
can always be matched, and ``seats`` as one shape everywhere (issue 8, items 1-4), over TCP."""

from __future__ import annotations

import tempfile
from pathlib import Path

import orjson
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.framing import LineBuffer
from tests.conftest import start_host
from tools.client import Client


async def new_session(c: Client, seats: int = 2, bots: int = 0, rounds: int = 1) -> str:
    created = await c.call(
        "create", game="high-card", seats=seats, bots=bots, options={"rounds": rounds}
    )
    return created["session"]


def refused(reply: dict, code: str, **extra: object) -> bool:
    """The reply is exactly the error ``code`` with these extra fields (and a message)."""
    assert reply["ok"] is False, reply
    return reply["error"] == {"code": code, "message": reply["error"]["message"], **extra}


async def free_seats(c: Client, sid: str) -> list[int]:
    page = await c.call("sessions")
    return next(s["free"] for s in page["sessions"] if s["session"] == sid)


# -- item 2: one role per connection per session --------------------------------------------------
async def test_a_second_join_is_refused_naming_the_seat_held(toy_host):
    a = await toy_host.client()
    sid = await new_session(a, seats=3)
    ja = await a.call("join", session=sid)
    assert refused(await a.request("join", session=sid), "already_attached", seat=ja["seat"])
    assert await free_seats(a, sid) == [1, 2]  # nothing taken


async def test_watch_on_a_seated_connection_is_refused_and_the_seat_still_acts(toy_host):
    a, b = await toy_host.client(), await toy_host.client()
    sid = await new_session(a)
    ja = await a.call("join", session=sid)
    await b.call("join", session=sid)
    assert refused(await a.request("watch", session=sid), "already_attached", seat=ja["seat"])
    view = await a.call("view", session=sid)
    assert view["view"]["hands"][ja["seat"]] is not None  # the seat's view, not a spectator's
    assert view["to_act"] == [ja["seat"]]
    acted = await a.call("act", session=sid, action={"type": "keep"})
    assert acted["seq"] > view["seq"]


async def test_watch_between_two_joins_does_not_give_a_second_seat(toy_host):
    a = await toy_host.client()
    sid = await new_session(a, seats=3)
    ja = await a.call("join", session=sid)
    assert refused(await a.request("watch", session=sid), "already_attached", seat=ja["seat"])
    assert refused(await a.request("join", session=sid), "already_attached", seat=ja["seat"])
    assert await free_seats(a, sid) == [1, 2]


async def test_join_on_a_watching_connection_is_refused_as_a_spectator(toy_host):
    a = await toy_host.client()
    sid = await new_session(a)
    await a.call("watch", session=sid)
    assert refused(await a.request("join", session=sid), "already_attached", seat=None)
    assert refused(await a.request("watch", session=sid), "already_attached", seat=None)
    assert await free_seats(a, sid) == [0, 1]


async def test_resume_with_another_seats_token_does_not_switch_seats(toy_host):
    a, b = await toy_host.client(), await toy_host.client()
    sid = await new_session(a)
    ja = await a.call("join", session=sid)
    jb = await b.call("join", session=sid)
    r = await a.request("resume", session=sid, token=jb["token"])
    assert refused(r, "already_attached", seat=ja["seat"])
    # b still holds its seat: it is b's turn only after a acts, and a still acts as seat 0
    await a.call("act", session=sid, action={"type": "keep"})
    assert (await b.call("act", session=sid, action={"type": "keep"}))["seq"] > 0


async def test_resume_then_watch_and_resume_twice_are_refused(toy_host):
    a, b = await toy_host.client(), await toy_host.client()
    sid = await new_session(a)
    ja = await a.call("join", session=sid)
    await b.call("resume", session=sid, token=ja["token"])
    assert refused(await b.request("watch", session=sid), "already_attached", seat=ja["seat"])
    r = await b.request("resume", session=sid, token=ja["token"])
    assert refused(r, "already_attached", seat=ja["seat"])


async def test_after_leave_a_connection_may_take_another_role_with_gapless_pushes(toy_host):
    """Watching, then leaving and joining: the join's snapshot and the pushes after it skip no
    seq (joining while still watching used to leave the spectator's stream with a gap)."""
    a, b = await toy_host.client(), await toy_host.client()
    sid = await new_session(a)
    await a.call("watch", session=sid)
    assert await a.call("leave", session=sid) == {"left": True}
    ja = await a.call("join", session=sid)
    jb = await b.call("join", session=sid)  # starts the session: a sees it all as pushes
    seen = ja["seq"]
    while True:
        p = await a.next_push()
        assert p is not None
        if p["push"] == "event":
            assert p["seq"] == seen + 1
            seen = p["seq"]
        if p["push"] == "turn":
            break
    assert seen == jb["seq"]
    await a.call("leave", session=sid)
    w = await a.call("watch", session=sid)  # and back to watching
    assert w["view"]["hands"] == [None, None]  # a spectator's view
    await a.call("leave", session=sid)
    assert (await a.call("resume", session=sid, token=ja["token"]))["seat"] == ja["seat"]


async def test_a_connection_may_play_in_two_sessions_at_once(toy_host):
    a = await toy_host.client()
    s1, s2 = await new_session(a), await new_session(a)
    assert (await a.call("join", session=s1))["seat"] == 0
    assert (await a.call("join", session=s2))["seat"] == 0


# -- item 1: error extras as the table lists them -------------------------------------------------
async def test_session_full_always_carries_free(toy_host):
    a, b, c = await toy_host.client(), await toy_host.client(), await toy_host.client()
    sid = await new_session(a, seats=3, bots=1)
    await a.call("join", session=sid, seat=1)
    assert refused(await b.request("join", session=sid, seat=1), "session_full", free=[0])
    await b.call("join", session=sid)
    assert refused(await c.request("join", session=sid), "session_full", free=[])


async def test_join_on_an_ended_session_is_session_ended(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path)
        a = await running.client()
        sid = await new_session(a, seats=2, bots=2)  # bots only: it plays to its end
        snap = await a.call("watch", session=sid)
        while not snap["ended"]:
            p = await a.next_push()
            assert p is not None
            snap = p if p["push"] == "ended" else snap
            if p["push"] == "ended":
                break
        b = await running.client()
        assert refused(await b.request("join", session=sid), "session_ended")
        running.host.request_shutdown()
    async with trio.open_nursery() as n:  # answered from its log after a restart
        running = await start_host(n, tmp_path)
        c = await running.client()
        assert refused(await c.request("join", session=sid), "session_ended")
        assert refused(await c.request("leave", session=sid), "session_ended")
        running.host.request_shutdown()


async def test_resume_with_a_negative_after_is_a_bad_request_without_extras(toy_host):
    a, b = await toy_host.client(), await toy_host.client()
    sid = await new_session(a)
    ja = await a.call("join", session=sid)
    assert refused(
        await b.request("resume", session=sid, token=ja["token"], after=-1), "bad_request"
    )


# -- item 4: seats is a list in every reply -------------------------------------------------------
async def test_seats_is_the_same_list_in_create_sessions_and_snapshots(toy_host):
    a = await toy_host.client()
    created = await a.call("create", game="high-card", seats=3, bots=1)
    sid = created["session"]
    expected = [None, None, {"seat": 2, "name": "bot2", "bot": True}]
    assert created["seats"] == expected
    assert created["seq"] == 1  # the header is seq 0, the bot's seat_taken seq 1
    listed = next(s for s in (await a.call("sessions"))["sessions"] if s["session"] == sid)
    assert listed["seats"] == expected
    assert (await a.call("view", session=sid))["seats"] == expected


# -- item 3: request ids --------------------------------------------------------------------------
async def exchange(port: int, lines: list[bytes]) -> list[dict]:
    """Send raw lines on a fresh connection; the one reply to each."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    framer = LineBuffer(1 << 20)
    out: list[dict] = []
    async with stream:
        await stream.send_all(b"".join(line + b"\n" for line in lines))
        while len(out) < len(lines):
            data = await stream.receive_some(65536)
            assert data, "the host hung up"
            out += [orjson.loads(x) for x in framer.feed(data)]
    return out


@pytest.mark.parametrize(
    ("line", "rid", "code"),
    [
        (b'{"id": 1.5, "op": "ping"}', 1.5, "bad_request"),
        (b'{"id": true, "op": "ping"}', True, "bad_request"),
        (b'{"id": [1], "op": "ping"}', None, "bad_request"),  # an array is not echoed
        (b'{"id": ' + b"[" * 300 + b"]" * 300 + b', "op": "ping"}', None, "bad_request"),
        (b'{"id": 6, "op": "ping", "x": ' + b"[" * 300 + b"]" * 300 + b"}", 6, "bad_request"),
        (b'{"id": 7, "op": "ping", "x": 1e400}', 7, "bad_json"),
        (
            b'{"id": "deep", "op": "ping", "x": ' + b"[" * 1100 + b"]" * 1100 + b"}",
            "deep",
            "bad_json",
        ),
        (b'{"id": 8, "op": "ping", "x": "\\ud800"}', 8, "bad_json"),
        (b'{"id": "\\ud800", "op": "ping"}', None, "bad_json"),
        (b'{"op": "ping", "id": 9, "x": 1e400}', None, "bad_json"),
        (b"[1, 2]", None, "bad_json"),
    ],
)
async def test_a_refused_request_is_answered_with_the_id_it_could_be_read_with(
    toy_host, line, rid, code
):
    (reply,) = await exchange(toy_host.port, [line])
    assert reply["id"] == rid and type(reply["id"]) is type(rid)
    assert refused(reply, code)


async def test_the_connection_serves_on_after_unreadable_ids(toy_host):
    replies = await exchange(
        toy_host.port, [b'{"id": 1.5, "op": "ping"}', b'{"id": 2, "op": "ping"}']
    )
    assert replies[1] == {"id": 2, "ok": True, "result": {"pong": True}}


# -- the role rule as a property: any sequence of ops on one connection -------------------------
ROLE_OPS = st.lists(
    st.sampled_from(["join", "watch", "resume_mine", "resume_theirs", "leave"]),
    min_size=1,
    max_size=10,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ROLE_OPS)
async def test_any_sequence_of_role_ops_follows_the_one_role_rule(ops):
    """A model of the rule: the connection holds nothing, a seat, or a spectator's place; a
    ``join``/``watch``/``resume`` while it holds one is ``already_attached`` naming it and
    changes nothing; ``leave`` frees it (``not_seated`` when there is nothing to leave)."""
    with tempfile.TemporaryDirectory() as where:
        async with trio.open_nursery() as n:
            running = await start_host(n, Path(where))
            a, b = await running.client(), await running.client()
            sid = await new_session(a, seats=3)
            theirs = await b.call("join", session=sid)  # seat 0
            held: int | None | str = "nothing"  # a seat, None (watching) or "nothing"
            mine: dict[str, int] = {}  # token -> seat, of the seats a took
            free = [1, 2]
            for op in ops:
                if op == "leave":
                    r = await a.request("leave", session=sid)
                    if held == "nothing":
                        assert refused(r, "not_seated")
                    else:
                        assert r["result"] == {"left": True}
                        held = "nothing"
                    continue
                if op == "join":
                    r = await a.request("join", session=sid)
                elif op == "watch":
                    r = await a.request("watch", session=sid)
                elif op == "resume_mine" and mine:
                    r = await a.request("resume", session=sid, token=next(reversed(mine)))
                else:  # resume_theirs (or resume_mine before a took any seat)
                    r = await a.request("resume", session=sid, token=theirs["token"])
                if held != "nothing":
                    assert refused(r, "already_attached", seat=held)
                elif op == "join" and not free:
                    assert refused(r, "session_full", free=[])
                else:
                    assert r["ok"], r
                    held = r["result"].get("seat")
                    if op == "join":
                        assert held == free.pop(0)
                        mine[r["result"]["token"]] = held
                    elif op == "resume_mine" and mine:
                        assert held == mine[next(reversed(mine))]
                    elif op.startswith("resume"):
                        assert held == theirs["seat"]
                view = await a.call("view", session=sid)  # the role held, as `view` sees it
                hands = view["view"]["hands"]
                if isinstance(held, int) and view["started"]:
                    assert hands[held] is not None
                assert free == [i for i, s in enumerate(view["seats"]) if s is None]
            running.host.request_shutdown()
