"""The operator's view (``host.net.admin``): who may use it, the session list, and ending a
session through its table core (a logged, replayable ``aborted: "admin"``), on one host and from
the host that does not drive a shared session."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import trio

from host.net import admin
from host.store.feed import MemoryHub
from host.store.file import read_log
from host.table.engine import Record
from host.table.history import verify_log
from protocol.messages import ProtocolError
from tests.conftest import start_host, toy_registry
from tests.host.test_multi_host import Shared, client, start_shared
from tests.host.test_server import new_session

LOCAL = {"host": "127.0.0.1:8080"}


@pytest.fixture(params=["memory", "postgres"])
def shared(request: pytest.FixtureRequest) -> Shared:
    """Two hosts' store: an in-process hub, or a throwaway PostgreSQL database."""
    if request.param == "memory":
        return Shared(hub=MemoryHub())
    return Shared(url=request.getfixturevalue("pg_store_url"))


def test_without_a_token_only_loopback_peers_naming_a_loopback_host_may():
    assert admin.refusal(token=None, peer="127.0.0.1", headers=LOCAL, method="GET") is None
    assert admin.refusal(token=None, peer="::1", headers={"host": "[::1]:80"}, method="GET") is None
    assert (
        admin.refusal(token=None, peer="127.0.0.1", headers={"host": "localhost"}, method="GET")
        is None
    )
    far = admin.refusal(token=None, peer="192.0.2.7", headers=LOCAL, method="GET")
    assert far is not None and far[0] == 403 and "--admin-token" in far[1]
    # a rebinding name (or a reverse proxy passing the public one) is not loopback
    named = admin.refusal(
        token=None, peer="127.0.0.1", headers={"host": "cards.example"}, method="GET"
    )
    assert named is not None and named[0] == 403


def test_with_a_token_every_request_must_carry_it_wherever_it_comes_from():
    def ask(auth: str | None, peer: str = "127.0.0.1") -> int | None:
        headers = dict(LOCAL) if auth is None else {**LOCAL, "authorization": auth}
        why = admin.refusal(token="s3cret", peer=peer, headers=headers, method="GET")
        return None if why is None else why[0]

    assert ask(None) == 401
    assert ask("Bearer wrong") == 401
    assert ask("Basic s3cret") == 401
    assert ask("Bearer s3cret") is None
    assert ask("bearer s3cret", peer="198.51.100.4") is None  # from anywhere, with the token


def test_a_post_from_another_sites_page_is_refused():
    post = {**LOCAL, "origin": "http://evil.example"}
    why = admin.refusal(token=None, peer="127.0.0.1", headers=post, method="POST")
    assert why is not None and why[0] == 403
    own = {**LOCAL, "origin": "http://127.0.0.1:8080"}
    assert admin.refusal(token=None, peer="127.0.0.1", headers=own, method="POST") is None
    public = {**LOCAL, "origin": "https://cards.example"}
    allowed = frozenset({"https://cards.example"})
    assert (
        admin.refusal(token=None, peer="127.0.0.1", headers=public, method="POST", origins=allowed)
        is None
    )
    assert admin.refusal(token=None, peer="127.0.0.1", headers=LOCAL, method="POST") is None


async def _pushes_until_ended(c) -> list[dict]:
    out = []
    with trio.fail_after(10):
        while True:
            p = await c.next_push()
            assert p is not None
            out.append(p)
            if p["push"] == "ended":
                return out


async def test_the_operator_ends_a_session_every_subscriber_is_told_and_it_verifies(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path)
        host = running.host
        player, watcher = await running.client(), await running.client()
        sid = await new_session(player, seats=2)
        await player.call("join", session=sid, name="ann")
        await watcher.call("watch", session=sid)
        listed = await admin.session_list(host, None)
        [entry] = listed["sessions"]
        assert listed["next"] is None
        assert entry["session"] == sid and entry["state"] == "waiting"
        assert entry["seats"][0]["name"] == "ann" and entry["seats"][0]["held"]
        assert entry["seats"][0]["peer"].startswith("127.0.0.1:")
        assert entry["seats"][1] == {"seat": 1, "free": True}
        assert (entry["spectators"], entry["connections"]) == (1, 2)

        done = await admin.end_session(host, sid, "127.0.0.1")
        for c in (player, watcher):
            pushes = await _pushes_until_ended(c)
            event = [p for p in pushes if p["push"] == "event"][-1]
            assert event["kind"] == "ended" and event["seq"] == done["seq"]
            assert event["event"]["outcome"] is None
            assert pushes[-1] == {
                "push": "ended",
                "session": sid,
                "seq": done["seq"],
                "outcome": None,
                "aborted": "admin",
            }
        with pytest.raises(ProtocolError) as again:
            await admin.end_session(host, sid, "127.0.0.1")
        assert again.value.code.value == "session_ended"
        with pytest.raises(ProtocolError) as unknown:
            await admin.end_session(host, "nosuchsession", "127.0.0.1")
        assert unknown.value.code.value == "unknown_session"
        assert host.metrics.sessions_ended[("high-card", "admin")] == 1
        host.request_shutdown()
    records = [Record.from_json(r) for r in read_log(tmp_path / "sessions" / f"{sid}.jsonl")]
    assert records[-1].type == "ended" and records[-1].seq == done["seq"]
    assert records[-1].data["aborted"] == "admin" and records[-1].data["outcome"] is None
    assert verify_log(toy_registry().engines["high-card"], records) is None


async def test_an_end_on_the_host_that_does_not_drive_reaches_the_other_hosts_players(
    tmp_path: Path, shared: Shared
) -> None:
    async with trio.open_nursery() as n:
        a = await start_shared(n, shared, tmp_path / "a")
        b = await start_shared(n, shared, tmp_path / "b")
        ca = await client(n, a)
        sid = await new_session(ca, seats=2)
        await ca.call("join", session=sid, name="ann")
        with trio.fail_after(10):  # a created it: a takes its lease
            while not a.host.sessions[sid].driver:
                await trio.sleep(0.01)
        # the operator uses b, which has never seen the session: it is listed from the store
        page = await admin.session_list(b.host, None)
        assert [s["session"] for s in page["sessions"]] == [sid]
        assert not page["sessions"][0]["driven"]
        done = await admin.end_session(b.host, sid, "127.0.0.1")
        pushes = await _pushes_until_ended(ca)  # a's player, told by a following the log
        assert pushes[-1]["aborted"] == "admin" and pushes[-1]["seq"] == done["seq"]
        records = await shared.records(sid)
        assert records[-1]["seq"] == done["seq"] and records[-1]["aborted"] == "admin"
        engine = toy_registry().engines["high-card"]
        plain = [{k: v for k, v in r.items() if k != "crc"} for r in records]
        assert verify_log(engine, [Record.from_json(r) for r in plain]) is None
        n.cancel_scope.cancel()


async def _http(
    port: int, method: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request; its status, headers (lower case) and body."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Length: 0"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    async with stream:
        await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode())
        got = b""
        while data := await stream.receive_some(65536):
            got += data
    head, _, body = got.partition(b"\r\n\r\n")
    status_line, *fields = head.decode().split("\r\n")
    parsed = {k.lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
    return int(status_line.split()[1]), parsed, body


async def test_the_admin_api_answers_loopback_lists_ends_and_serves_metrics(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, http_port=0)
        port = running.host.http_port
        c = await running.client()
        sid = await new_session(c, seats=2)
        status, _, body = await _http(port, "GET", "/admin/api/sessions")
        assert status == 200
        assert [s["session"] for s in orjson.loads(body)["sessions"]] == [sid]
        status, _, body = await _http(port, "GET", "/admin/api/metrics")
        assert status == 200 and orjson.loads(body)["sessions_live"] == {"high-card": 1}
        status, headers, body = await _http(port, "GET", "/metrics")
        assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
        assert b'gamehost_sessions_live{game="high-card"} 1.0' in body
        assert (await _http(port, "GET", f"/admin/api/end?session={sid}"))[0] == 405
        assert (await _http(port, "POST", "/admin/api/sessions"))[0] == 405
        assert (await _http(port, "GET", "/admin/api/nothing"))[0] == 404
        foreign = {"Origin": "http://evil.example"}
        assert (await _http(port, "POST", f"/admin/api/end?session={sid}", foreign))[0] == 403
        assert (await _http(port, "POST", "/admin/api/end?session=nope"))[0] == 404
        status, _, body = await _http(port, "POST", f"/admin/api/end?session={sid}")
        assert status == 200 and orjson.loads(body)["session"] == sid
        status, _, body = await _http(port, "POST", f"/admin/api/end?session={sid}")
        assert status == 409 and orjson.loads(body)["error"]["code"] == "session_ended"
        running.host.request_shutdown()


async def test_with_a_token_the_admin_api_and_metrics_ask_for_it(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, http_port=0, admin_token="s3cret")
        port = running.host.http_port
        status, headers, _ = await _http(port, "GET", "/admin/api/sessions")
        assert status == 401 and headers["www-authenticate"] == "Bearer"
        assert (await _http(port, "GET", "/metrics"))[0] == 401
        bad = {"Authorization": "Bearer nope"}
        assert (await _http(port, "GET", "/admin/api/metrics", bad))[0] == 401
        good = {"Authorization": "Bearer s3cret"}
        assert (await _http(port, "GET", "/admin/api/metrics", good))[0] == 200
        assert (await _http(port, "GET", "/metrics", good))[0] == 200
        # the page itself holds no data: anyone may load it
        assert (await _http(port, "GET", "/admin.html"))[0] == 200
        running.host.request_shutdown()
