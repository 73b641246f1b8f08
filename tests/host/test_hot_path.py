"""The session's hot path: each event folded once in live play, ``turn`` legal lists computed once
per state and seat, sessions loaded in the background on restart, and records not held in memory
by a live session (``resume`` reads the missed ones from the store)."""

from __future__ import annotations

import gc
from typing import Any

import attrs
import trio

from host.game import hookimpl
from host.net.server import Host
from host.plugins.registry import Registry, load_registry
from host.store.file import read_log
from host.table.engine import Record
from tests.conftest import start_host
from tests.toy import HighCard, Plugin


class Counted(HighCard):
    """High Card counting its ``evolve`` and ``legal_actions`` calls."""

    info = attrs.evolve(HighCard.info, id="counted")

    def __init__(self) -> None:
        self.evolved = 0
        self.legal: list[tuple[int, int]] = []  # (turn, seat) per call

    def evolve(self, state: Any, event: Any) -> Any:
        self.evolved += 1
        return super().evolve(state, event)

    def legal_actions(self, state: Any, seat: int) -> list:
        self.legal.append((state.turn, seat))
        return super().legal_actions(state, seat)


HELD = 64
"""Records a live session may hold in memory at most (its tail, with some slack), in these tests."""


def counted_registry(game: Counted) -> Registry:
    class Extra:
        @hookimpl
        def gamehost_register_games(self) -> list:
            return [game]

    return load_registry([("toy", Plugin()), ("extra", Extra())], entrypoints=False)


def event_records(data_dir: Any, sid: str) -> int:
    return sum(1 for r in read_log(data_dir / "sessions" / f"{sid}.jsonl") if r["type"] == "event")


async def wait_ended(client: Any) -> dict[str, Any]:
    while True:
        p = await client.next_push()
        assert p is not None, "the host hung up"
        if p["push"] == "ended":
            return p


async def next_turn(client: Any) -> dict[str, Any]:
    while True:
        p = await client.next_push()
        assert p is not None, "the host hung up"
        assert p["push"] != "ended", "the session ended: no turn will come"
        if p["push"] == "turn":
            return p


async def test_each_event_is_folded_once_in_live_play_over_tcp(tmp_path, autojump_clock):
    game = Counted()
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, counted_registry(game))
        c = await running.client()
        sids = []
        # every seat a bot: the opening and all moves are host-driven (create, bot steps)
        sid = (await c.call("create", game="counted", seats=3, bots=3, options={"rounds": 2}))[
            "session"
        ]
        await c.call("watch", session=sid)
        await wait_ended(c)
        sids.append(sid)
        # a human with a bot: the opening follows the join; the human's moves are actions
        p = await running.client()
        sid = (await p.call("create", game="counted", seats=2, bots=1, options={"rounds": 2}))[
            "session"
        ]
        await p.call("join", session=sid)
        sids.append(sid)
        while True:
            push = await p.next_push()
            assert push is not None
            if push["push"] == "ended":
                break
            if push["push"] == "turn":
                await p.call("act", session=sid, action={"type": "keep"})
        # a human who never acts: the turn timer plays for it
        q = await running.client()
        sid = (
            await q.call(
                "create", game="counted", seats=2, bots=1, options={"rounds": 2}, turn_timeout=5
            )
        )["session"]
        await q.call("join", session=sid)
        await wait_ended(q)
        sids.append(sid)
        assert game.evolved == sum(event_records(tmp_path, s) for s in sids) > 10
        running.host.request_shutdown()


async def test_turn_legal_lists_are_computed_once_per_state_and_seat(tmp_path):
    game = Counted()
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, counted_registry(game))
        a, b = await running.client(), await running.client()
        sid = (await a.call("create", game="counted", seats=2, options={"rounds": 2}))["session"]
        token = (await a.call("join", session=sid))["token"]
        await b.call("join", session=sid)  # the game starts: seat 0 gets a turn push
        turns = [await next_turn(a)]
        for _ in range(3):  # each resume at the same seq sends seat 0 its turn again
            await a.call("leave", session=sid)  # one role per connection: leave, then resume
            await a.call("resume", session=sid, token=token)
            turns.append(await next_turn(a))
        # each leave and resume is a record (the seq moves on), the game's state is the same
        assert len(turns) == 4 and all(t["legal"] == turns[0]["legal"] for t in turns)
        assert [t["seq"] - turns[0]["seq"] for t in turns] == [0, 2, 4, 6]
        assert turns[0]["legal"] == [{"type": "keep"}, {"type": "swap"}]
        assert game.legal == [(0, 0)]  # one game state, one seat: computed once
        running.host.request_shutdown()


async def test_an_act_does_not_ask_whether_its_client_is_closing(tmp_path, monkeypatch):
    # whether a client closed its side is a system call (a peek at its socket); only a join or
    # a resume uses the answer, so only they ask it
    import host.net.session as session_module

    asked: list[object] = []
    real = session_module.peer_closed

    def counting(conn: object) -> bool | None:
        asked.append(conn)
        return real(conn)

    monkeypatch.setattr(session_module, "peer_closed", counting)
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, counted_registry(Counted()))
        a, b = await running.client(), await running.client()
        sid = (await a.call("create", game="counted", seats=2, options={"rounds": 2}))["session"]
        await a.call("join", session=sid)
        await b.call("join", session=sid)
        assert len(asked) == 2
        acts = 0
        while True:  # seat 0 (a) acts first, then they alternate
            push = await (a, b)[acts % 2].next_push()
            assert push is not None
            if push["push"] == "ended":
                break
            if push["push"] == "turn":
                await (a, b)[acts % 2].call("act", session=sid, action={"type": "keep"})
                acts += 1
        assert acts >= 4 and len(asked) == 2
        running.host.request_shutdown()


async def test_a_live_session_holds_few_records_and_resume_reads_the_rest_from_the_log(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, load_registry([("toy", Plugin())]))
        try:
            await _play_a_long_log_then_resume(running, tmp_path)
        finally:  # a failed assertion must not leave the host running (the test would hang)
            running.host.request_shutdown()


def _records_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Record))


async def _play_a_long_log_then_resume(running: Any, tmp_path: Any) -> None:
    """Play one Crazy Eights table until its log holds three times what a session keeps, then
    resume from seq 0: the missed records come from the log, in order."""
    before = _records_alive()  # whatever earlier tests in this process still hold
    a = await running.client()
    # a high target: the match must outlast the long log (at the default one in ten ended first)
    sid = (await a.call("create", game="crazy-eights", seats=2, bots=1, options={"target": 2000}))[
        "session"
    ]
    token = (await a.call("join", session=sid))["token"]
    seq = 0
    while seq < 3 * HELD:  # play the first legal action until the log is long
        push = await next_turn(a)
        seq = (await a.call("act", session=sid, action=push["legal"][0]))["seq"]
    held = _records_alive() - before
    assert held <= HELD  # bounded, though the log holds three times as many
    b = await running.client()
    got = await b.call("resume", session=sid, token=token, after=0)
    pushed = []
    while len(pushed) < got["seq"]:
        push = await b.next_push()
        assert push is not None
        if push["push"] == "event":
            pushed.append(push)
    logged = read_log(tmp_path / "sessions" / f"{sid}.jsonl")
    assert [p["seq"] for p in pushed] == [r["seq"] for r in logged[1 : got["seq"] + 1]]
    assert [p["kind"] for p in pushed] == [r["type"] for r in logged[1 : got["seq"] + 1]]


async def played_sessions(running: Any, count: int) -> dict[str, tuple[str, int]]:
    """``count`` unfinished sessions, each with a human seat that has acted once:
    ``{sid: (token, seq)}``."""
    out = {}
    for _ in range(count):
        c = await running.client()
        sid = (await c.call("create", game="high-card", seats=2, bots=1, options={"rounds": 2}))[
            "session"
        ]
        token = (await c.call("join", session=sid))["token"]
        await next_turn(c)
        seq = (await c.call("act", session=sid, action={"type": "keep"}))["seq"]
        out[sid] = (token, seq)
    return out


async def test_the_host_listens_before_it_has_loaded_every_session(tmp_path):
    async with trio.open_nursery() as n:
        first = await start_host(n, tmp_path)
        made = await played_sessions(first, 20)
        first.host.request_shutdown()
    async with trio.open_nursery() as n:
        second = await start_host(n, tmp_path, wait_loaded=False)
        assert len(second.host.sessions) < len(made)  # answering already, still loading
        await second.host.loaded.wait()
        assert sorted(second.host.sessions) == sorted(made)
        second.host.request_shutdown()


async def test_a_request_for_a_session_not_loaded_yet_loads_it_first(tmp_path, monkeypatch):
    async with trio.open_nursery() as n:
        first = await start_host(n, tmp_path)
        made = await played_sessions(first, 3)
        first.host.request_shutdown()

    async def stalled(self: Host) -> int:  # the background loader never gets anywhere
        await self.shutdown.wait()
        return 0

    monkeypatch.setattr(Host, "load_sessions", stalled)
    async with trio.open_nursery() as n:
        with trio.fail_after(30):  # a hang guard: the old host never listened here
            second = await start_host(n, tmp_path, wait_loaded=False)
        assert second.host.sessions == {}
        c = await second.client()
        for sid, (token, seq) in made.items():
            got = await c.call("resume", session=sid, token=token)
            assert (got["session"], got["ended"]) == (sid, False) and got["seq"] >= seq
        assert sorted(second.host.sessions) == sorted(made)
        missing = await c.request("resume", session="nosuchsession", token="x")
        assert missing["error"]["code"] == "unknown_session"
        second.host.request_shutdown()
