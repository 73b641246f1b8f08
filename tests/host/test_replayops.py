"""The replay ops: ``log``, ``replay``, ``verify`` and ``fork`` (PROTOCOL.md, "Replay ops").

What a connection may see: a spectator's view always, a seat's with its token, the full truth
and ``fork`` only once the session ended and its game reveals the seed, or on a debug host."""

from __future__ import annotations

import orjson
import pytest
import trio
import trio.testing

from host.store.base import body_of, frame
from host.store.file import read_log
from host.table.engine import Record
from tests.conftest import start_host
from tools.client import Client, HostError


async def play_to_the_end(c: Client, sid: str, seat: int) -> int:
    """Answer every turn of ``seat`` with its first legal action; the session's last seq."""
    while True:
        p = await c.next_push()
        assert p is not None
        if p["push"] == "turn" and p["seat"] == seat:
            await c.call("act", session=sid, action=p["legal"][0], seq=p["seq"])
        elif p["push"] == "ended":
            return p["seq"]


async def a_session(host, *, finish: bool) -> tuple[Client, str, str, int]:
    """A two-seat High Card session, seat 0 ours (played to the end with ``finish``)."""
    c = await host.client()
    sid = (await c.call("create", game="high-card", seats=2, bots=1))["session"]
    joined = await c.call("join", session=sid, name="ann")
    last = await play_to_the_end(c, sid, 0) if finish else joined["seq"]
    return c, sid, joined["token"], last


async def error_code(c: Client, op: str, **params) -> str:
    with pytest.raises(HostError) as err:
        await c.call(op, **params)
    return err.value.code


async def test_a_live_log_shows_what_a_spectator_sees_and_no_secret(toy_host):
    c, sid, token, _ = await a_session(toy_host, finish=False)
    other = await toy_host.client()
    got = await other.call("log", session=sid)
    assert got["live"] and not got["ended"] and not got["open"]
    types = [r["type"] for r in got["records"]]
    assert types[0] == "header" and "seat_taken" in types
    assert got["records"][0]["seed"] is None
    text = orjson.dumps(got)
    assert b"token_hash" not in text
    assert b'"holder"' not in text  # which connection holds a seat is never shown
    assert all("ts" in r for r in got["records"][1:])  # every record's time, as documented
    dealt = next(r for r in got["records"] if r["type"] == "event")
    assert dealt["event"]["hands"] == [None, None]  # the spectator sees no card
    # a seat's view needs its token; the truth is hidden while the session is live
    assert await error_code(other, "log", session=sid, seat=0) == "hidden"
    assert await error_code(other, "log", session=sid, seat=0, token="nope") == "hidden"
    assert await error_code(other, "log", session=sid, seat=1, token=token) == "hidden"
    assert await error_code(other, "log", session=sid, truth=True) == "hidden"
    assert await error_code(other, "replay", session=sid, seq=3, truth=True) == "hidden"
    assert await error_code(other, "fork", session=sid, seq=3) == "hidden"
    mine = await other.call("log", session=sid, seat=0, token=token)
    dealt = next(r for r in mine["records"] if r["type"] == "event")
    assert dealt["event"]["hands"][0] is not None and dealt["event"]["hands"][1] is None
    assert await error_code(other, "log", session="nosuch") == "unknown_session"
    assert await error_code(other, "log", session=sid, limit=0) == "bad_request"
    for after in (-1, -2):  # null asks from the header; no negative seq stands for it
        assert await error_code(other, "log", session=sid, after=after) == "bad_request"
    assert await error_code(other, "replay", session=sid, seq=10_000) == "bad_request"


async def test_log_pages_follow_one_another(toy_host):
    c, sid, _, last = await a_session(toy_host, finish=True)
    seen, after = [], None
    while True:
        page = await c.call("log", session=sid, after=after, limit=3)
        seen += [r["seq"] for r in page["records"]]
        if page["next"] is None:
            break
        after = page["next"]
    assert seen == list(range(last + 1))


async def test_a_log_page_ends_before_the_line_limit(toy_host, monkeypatch):
    """A page of ``limit`` records is cut short where its records would pass the line limit
    (``PAGE_BYTES``; 1,000 records of a long Crazy Eights log take about 90 KB), and ``next``
    goes on from there."""
    import host.net.replayops

    monkeypatch.setattr(host.net.replayops, "PAGE_BYTES", 600, raising=False)
    c, sid, _, last = await a_session(toy_host, finish=True)
    seen, after, pages = [], None, 0
    while True:
        page = await c.call("log", session=sid, after=after, limit=1000)
        pages += 1
        assert page["records"]
        assert sum(len(orjson.dumps(r)) + 1 for r in page["records"]) <= 600 or (
            len(page["records"]) == 1
        )
        seen += [r["seq"] for r in page["records"]]
        if page["next"] is None:
            break
        after = page["next"]
    assert seen == list(range(last + 1))
    assert pages > 1


async def test_a_log_page_reads_only_its_records(toy_host, monkeypatch):
    """A page of records [a, b) reads those records (and the header and the last record),
    never the whole log; a log that changes is seen changed."""
    c, sid, _, last = await a_session(toy_host, finish=True)
    store = toy_host.host.store
    ranges = []
    real = store.read_range

    async def whole(session, after=None):
        raise AssertionError("a page read the whole log")

    async def counted(session, first, stop):
        ranges.append((first, stop))
        return await real(session, first, stop)

    monkeypatch.setattr(store, "read", whole)
    monkeypatch.setattr(store, "read_range", counted)
    after, pages = None, 0
    while True:
        ranges.clear()
        page = await c.call("log", session=sid, after=after, limit=2)
        start = 0 if after is None else after + 1
        assert (start, min(start + 2, last + 1)) in ranges
        assert all(b - a <= 2 for a, b in ranges)  # the header, the last record, the page
        pages += 1
        if page["next"] is None:
            break
        after = page["next"]
    assert pages > 2


async def test_a_live_log_that_grows_is_paged_and_replayed_to_its_new_end(toy_host):
    c, sid, _, seq = await a_session(toy_host, finish=False)
    page = await c.call("log", session=sid, limit=1000)
    assert page["seq"] == seq and page["live"] and page["next"] is None
    first = await c.call("replay", session=sid, seq=seq)
    assert first["seq"] == seq
    last = await play_to_the_end(c, sid, 0)
    assert last > seq
    more = await c.call("log", session=sid, after=seq, limit=1000)
    assert [r["seq"] for r in more["records"]] == list(range(seq + 1, last + 1))
    other = await toy_host.client()  # a connection of its own: from the snapshots, not its last
    end = await other.call("replay", session=sid, seq=last, truth=True)
    assert end["ended"] and end["seq"] == last


async def test_an_ended_session_shows_the_truth_at_every_seq(toy_host):
    c, sid, _, last = await a_session(toy_host, finish=True)
    other = await toy_host.client()
    records = [
        Record.from_json(r) for r in read_log(toy_host.data_dir / "sessions" / f"{sid}.jsonl")
    ]
    engine = toy_host.host.registry.engines["high-card"]
    got = await other.call("log", session=sid, truth=True)
    assert got["open"] and got["ended"]
    assert got["records"][0]["seed"] == records[0].data["seed"]  # public once ended
    # forward, then back: each state is the fold of the records up to it
    for seq in [*range(last + 1), *range(last, -1, -1)]:
        at = await other.call("replay", session=sid, seq=seq, truth=True)
        want = engine.codec.to_wire(engine.rebuild(records[: seq + 1]).game)
        assert at["seq"] == seq
        assert at["state"] == orjson.loads(orjson.dumps(want))
    spect = await other.call("replay", session=sid, seq=last, seat=1)
    assert spect["view"]["hands"][1] is not None  # open: any seat's view


async def test_truth_of_a_live_session_on_a_debug_host(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, debug_replay=True)
        c, sid, _, seq = await a_session(running, finish=False)
        at = await c.call("replay", session=sid, seq=seq, truth=True)
        assert all(h is not None for h in at["state"]["hands"])
        running.host.request_shutdown()


async def test_verify_names_the_first_record_that_differs(toy_host):
    c, sid, _, last = await a_session(toy_host, finish=True)
    assert (await c.call("verify", session=sid))["ok"] is True
    # tamper with the first deal in the log (a host restart would not notice: it folds)
    path = toy_host.data_dir / "sessions" / f"{sid}.jsonl"
    lines = path.read_bytes().splitlines()
    at = next(i for i, line in enumerate(lines) if b'"dealt"' in line)
    rec = orjson.loads(body_of(lines[at]))
    rec["event"]["stock"] = rec["event"]["stock"][1:]  # (the file's size changes too)
    lines[at] = frame(orjson.dumps(rec))[:-1]  # checksummed anew: a log that reads
    path.write_bytes(b"\n".join(lines) + b"\n")
    toy_host.host._ended.pop(sid, None)
    got = await c.call("verify", session=sid)
    assert got["ok"] is False and got["seq"] == rec["seq"]
    assert "recorded" in got["explanation"]  # open (ended, seed revealed): the explanation


async def test_fork_starts_a_live_session_the_forker_can_resume(toy_host):
    c, sid, _, last = await a_session(toy_host, finish=True)
    records = (await c.call("log", session=sid, truth=True))["records"]
    inside = next(r["seq"] for r in records if r["type"] == "action")  # next is its event
    assert await error_code(c, "fork", session=sid, seq=inside) == "bad_request"
    at = inside - 1  # the end of the cause before that action
    fork = await c.call("fork", session=sid, seq=at)
    assert fork["forked_from"] == {"session": sid, "seq": at}
    assert fork["seq"] == at and set(fork["tokens"]) == {"0"}
    new = await toy_host.client()
    snap = await new.call("resume", session=fork["session"], token=fork["tokens"]["0"])
    assert snap["seat"] == 0 and not snap["ended"]
    assert await play_to_the_end(new, fork["session"], 0) > at
    assert (await new.call("verify", session=fork["session"]))["ok"] is True


async def test_a_game_that_keeps_its_seed_shows_no_hidden_card_even_once_ended(tmp_path):
    from host.plugins.registry import load_registry

    registry = load_registry()
    if "seven-twenty-seven" not in registry.games:
        pytest.skip("the seven-twenty-seven plugin is not installed")
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry)
        c = await running.client()
        made = await c.call(
            "create", game="seven-twenty-seven", seats=4, bots=4, options={"hands": 1}
        )
        sid = made["session"]
        snap = await c.call("watch", session=sid)
        while not snap["ended"]:
            p = await c.next_push()
            if p["push"] == "ended":
                break
        got = await c.call("log", session=sid)
        assert got["ended"] and not got["open"]
        assert got["records"][-1]["type"] == "ended" and got["records"][-1]["seed"] is None
        assert await error_code(c, "log", session=sid, truth=True) == "hidden"
        assert await error_code(c, "replay", session=sid, seq=5, seat=1) == "hidden"
        assert await error_code(c, "fork", session=sid, seq=4) == "hidden"
        # what the spectator got holds no face-down card that was never shown
        path = tmp_path / "sessions" / f"{sid}.jsonl"
        dealt = next(
            r for r in read_log(path) if r["type"] == "event" and r["event"]["type"] == "dealt"
        )
        down = {card for hand in dealt["event"]["down"] for card in hand}
        shown = orjson.dumps(got["records"][: dealt["seq"] + 1])
        assert not any(f'"{card}"'.encode() in shown for card in down)
        assert (await c.call("verify", session=sid))["ok"] is True
        running.host.request_shutdown()


async def test_verify_requests_waiting_for_a_worker_are_bounded(toy_host):
    from host.net import heavy

    c, sid, _, _ = await a_session(toy_host, finish=True)
    work = toy_host.host.heavy
    holders = [object() for _ in range(int(work.limiter.total_tokens))]
    for holder in holders:  # every heavy-work slot of the host is busy
        await work.limiter.acquire_on_behalf_of(holder)
    async with trio.open_nursery() as n:
        for _ in range(heavy.MAX_WAITING):
            n.start_soon(work.run, int)
        with trio.fail_after(30):  # wait for the condition: every one of them queued
            while work.limiter.statistics().tasks_waiting < heavy.MAX_WAITING:
                await trio.testing.wait_all_tasks_blocked(0.01)
        assert await error_code(c, "verify", session=sid) == "unavailable"
        for holder in holders:  # the waiting ones are then answered
            work.limiter.release_on_behalf_of(holder)
    assert (await c.call("verify", session=sid))["ok"] is True


async def test_verifies_of_one_log_asked_together_share_one_job(toy_host, monkeypatch):
    c, sid, _, _ = await a_session(toy_host, finish=True)
    work = toy_host.host.heavy
    jobs = []
    real = work.run

    async def counted(fn, *args):
        jobs.append(fn.__name__)
        return await real(fn, *args)

    monkeypatch.setattr(work, "run", counted)
    holders = [object() for _ in range(int(work.limiter.total_tokens))]
    for holder in holders:  # held: the first verify waits, the others join it
        await work.limiter.acquire_on_behalf_of(holder)
    clients = [await toy_host.client() for _ in range(5)]
    answers = []

    async def ask(client):
        answers.append(await client.call("verify", session=sid))

    async with trio.open_nursery() as n:
        for other in clients:
            n.start_soon(ask, other)
        from host.net import replayops

        with trio.fail_after(30):  # wait for the condition: one job, the others joined it
            while not any(
                job.waiters == 4 for job in replayops._verifying.get(toy_host.host, {}).values()
            ):
                await trio.sleep(0.01)
        for holder in holders:
            work.limiter.release_on_behalf_of(holder)
    assert jobs == ["verify_job"] and len(answers) == 5
    assert all(a["ok"] for a in answers)
