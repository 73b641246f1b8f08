"""Undo by consent over TCP, as two players would do it: one asks to take back a card it
played, the other refuses, it asks again and the other accepts; an undo is refused after a
draw; ``gamehost replay --verify`` passes on the log and tells the undo in words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from host.plugins.registry import load_registry
from tests.conftest import start_host
from tools.cli import main
from tools.client import Client

REGISTRY = load_registry()
pytestmark = pytest.mark.skipif(
    "crazy-eights" not in REGISTRY.games, reason="the crazy-eights plugin is not installed"
)


async def until(c: Client, push: str, **match: Any) -> dict[str, Any]:
    """The next push named ``push`` whose fields match (others are skipped)."""
    while True:
        p = await c.next_push()
        assert p is not None, f"the connection ended before a {push} push"
        if p["push"] == push and all(p.get(k) == v for k, v in match.items()):
            return p


async def test_refused_then_accepted_and_refused_after_a_draw(tmp_path: Path, capsys) -> None:
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path / "data", REGISTRY)
        lobby = await Client.connect("127.0.0.1", running.port)
        lobby.start(n)
        made = await lobby.call("create", game="crazy-eights", seats=2, options={"target": 30})
        sid = made["session"]
        ann = await Client.connect("127.0.0.1", running.port)
        bob = await Client.connect("127.0.0.1", running.port)
        for c in (ann, bob):
            c.start(n)
        await ann.call("join", session=sid, name="ann", seat=0, text=True)
        await bob.call("join", session=sid, name="bob", seat=1, text=True)
        first = await until(ann, "event", kind="event")  # the deal
        assert first["event"]["type"] == "dealt"
        seats = {0: ann, 1: bob}
        to_act = (await ann.call("view", session=sid))["to_act"][0]
        me, other = seats[to_act], seats[1 - to_act]
        turn = await until(me, "turn")
        # a draw shows a card: it is never taken back
        drew = await me.call("act", session=sid, action={"type": "draw"}, seq=turn["seq"])
        refused = await me.request("undo", session=sid)
        assert refused["error"]["code"] == "cannot_undo"
        assert refused["error"]["reason"] == "not_undoable"
        turn = await until(me, "turn", seq=drew["seq"])
        while not any(a["type"] == "play" for a in turn["legal"]):
            done = await me.call("act", session=sid, action={"type": "draw"}, seq=turn["seq"])
            turn = await until(me, "turn", seq=done["seq"])
        before = await me.call("view", session=sid)
        play = next(a for a in turn["legal"] if a["type"] == "play")
        played = await me.call("act", session=sid, action=play, seq=turn["seq"])
        # the first request: the other player refuses
        asked = await me.call("undo", session=sid)
        assert asked == {"seq": played["seq"] + 1, "status": "asked"}
        prompt = await until(other, "undo_asked")
        assert prompt["waiting"] == [1 - to_act] and prompt["action"]["card"] == play["card"]
        assert prompt["expires"]["seconds_left"] == pytest.approx(30.0, abs=1.0)
        no = await other.call("undo_answer", session=sid, accept=False)
        assert no["status"] == "refused"
        told = await until(me, "undo_refused")
        assert (told["reason"], told["by"]) == ("refused", 1 - to_act)
        # asked again: accepted
        await me.call("undo", session=sid)
        await until(other, "undo_asked")
        yes = await other.call("undo_answer", session=sid, accept=True)
        assert yes["status"] == "done"
        done = await until(me, "undo_done")
        assert done["action_seq"] == played["seq"] - 1
        again = await until(me, "turn", seq=done["seq"])
        assert again["legal"] == turn["legal"]
        after = await me.call("view", session=sid)
        assert after["view"] == before["view"] and after["to_act"] == before["to_act"]
        for c in (ann, bob, lobby):
            await c.aclose()
        running.host.request_shutdown()
    log = tmp_path / "data" / "sessions" / f"{sid}.jsonl"
    capsys.readouterr()
    assert main(["replay", "--verify", str(log)]) == 0
    assert "ok" in capsys.readouterr().out
    assert main(["replay", str(log), "--width", "200"]) == 0
    timeline = capsys.readouterr().out
    name = ["ann", "bob"][to_act]
    assert f"{name} asked to take back play {play['card']}" in timeline
    assert "refused: the move stands" in timeline
    assert f"{name} took back play {play['card']}" in timeline
