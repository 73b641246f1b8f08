"""``"text": true``: event and ``ended`` pushes, the records a ``resume`` catches up on and ``log``
pages carry each record in words for their viewer; a connection that did not ask gets the very
same pushes as before (no ``text`` field)."""

from __future__ import annotations

import random
from typing import Any

import trio

from host.plugins.registry import load_registry
from host.table.words import Words, display_names
from host.testing import cards_in_text
from tests.conftest import start_host

REGISTRY = load_registry()
ENGINE = REGISTRY.engines["crazy-eights"]
PUSH_KEYS = {"push", "session", "seq", "kind", "event"}


async def _play_to_the_end(clients: dict[int, Any], sid: str, seen: dict[int, list]) -> None:
    """Both seats answer their turns with random legal actions until the session ends; every
    push each client gets goes to ``seen[seat]``."""
    rng = random.Random(7)
    async with trio.open_nursery() as n:

        async def seat(s: int) -> None:
            c = clients[s]
            while (p := await c.next_push()) is not None:
                seen[s].append(p)
                if p["push"] == "ended":
                    return
                if p["push"] == "turn" and p["seat"] == s:
                    await c.request("act", session=sid, action=rng.choice(p["legal"]), seq=p["seq"])

        for s in clients:
            n.start_soon(seat, s)


async def test_text_pushes_tell_each_viewer_only_what_its_pushes_show(tmp_path):
    async with trio.open_nursery() as nursery:
        running = await start_host(nursery, tmp_path, REGISTRY, turn_timeout=None)
        ann, bob, eve = [await running.client() for _ in range(3)]
        sid = (await ann.call("create", game="crazy-eights", seats=2, options={"target": 10}))[
            "session"
        ]
        watched = await eve.call("watch", session=sid, text=True)
        joined = await ann.call("join", session=sid, name="Ann", text=True)
        await bob.call("join", session=sid, name="Bob")  # asks for no text
        seen: dict[int, list] = {0: [], 1: []}
        watcher: list = []

        async def watch() -> None:
            while (p := await eve.next_push()) is not None:
                watcher.append(p)
                if p["push"] == "ended":
                    return

        async with trio.open_nursery() as n:
            n.start_soon(watch)
            await _play_to_the_end({0: ann, 1: bob}, sid, seen)

        names = display_names(["Ann", "Bob"])
        words = Words(ENGINE.game)
        mine = [p for p in seen[0] if p["push"] == "event"]
        theirs = [p for p in seen[1] if p["push"] == "event"]
        assert len(mine) > 20 and len(theirs) > 20
        # the seat that did not ask: the pushes as before, byte for byte the same fields
        assert all(set(p) == PUSH_KEYS for p in theirs)
        assert "text" not in seen[1][-1]
        # the seat that asked: every event push has its text, made from that push's own body
        for p in mine:
            assert set(p) == PUSH_KEYS | {"text"}
            assert p["text"] == words.record(p["kind"], p["event"], 0, names)
        drew = [p for p in mine if p["kind"] == "event" and p["event"]["type"] == "drew"]
        own = [p for p in drew if p["event"]["seat"] == 0]
        other = [p for p in drew if p["event"]["seat"] == 1]
        assert own and other
        for p in own:
            assert p["text"].startswith("You drew ")
            assert cards_in_text(p["text"]) == set(p["event"]["cards"])
        for p in other:
            assert p["text"] in ("Bob drew a card", f"Bob drew {p['event']['count']} cards")
        actions = [p for p in mine if p["kind"] == "action"]
        assert actions and all(p["text"] == "" for p in actions)  # the events tell them
        # the spectator's texts name no card its pushes did not show
        told = [p for p in watcher if p["push"] == "event" and p["kind"] == "event"]
        assert told and all(cards_in_text(p["text"]) <= _cards(p["event"]) for p in told)
        assert any(p["text"] == "Bob drew a card" for p in told)
        # the end: the winners and the scores, on the ended push and the ended record alike
        end_mine, end_theirs = seen[0][-1], seen[1][-1]
        assert end_mine["push"] == end_theirs["push"] == "ended"
        outcome = end_mine["outcome"]
        text = ENGINE.game.describe_outcome(outcome, names)
        assert end_mine["text"] == text == mine[-1]["text"]
        assert (
            text.splitlines()[1]
            == f"Scores: Ann {outcome['scores'][0]}, Bob {outcome['scores'][1]}"
        )
        assert watcher[-1]["text"] == text
        assert watched["seq"] < mine[0]["seq"]

        # a resume catching up with `after` gets the missed records with their text, too
        back = await running.client()
        after = joined["seq"]
        await back.call("resume", session=sid, token=joined["token"], after=after, text=True)
        caught = []
        while (p := await back.next_push())["push"] != "ended":
            if p["push"] == "event":  # (presence pushes follow seat records, with their seq)
                caught.append(p)
        assert [p["seq"] for p in caught] == list(range(after + 1, outcome_seq(mine) + 1))
        by_seq = {p["seq"]: p["text"] for p in mine}
        assert all(p["text"] == by_seq[p["seq"]] for p in caught if p["seq"] in by_seq)
        assert p["text"] == text

        # log pages: "text" on each record when asked (the same as the pushes), else none
        told_log = await _whole_log(ann, sid, joined["token"], text=True)
        plain = await _whole_log(ann, sid, joined["token"])
        assert told_log[0]["text"] == "A session of Crazy Eights (version 1) for 2 seats"
        for r in told_log:
            if r["seq"] in by_seq:
                assert r["text"] == by_seq[r["seq"]]
        assert all("text" not in r for r in plain)
        assert [{k: v for k, v in r.items() if k != "text"} for r in told_log] == plain
        running.host.request_shutdown()


async def _whole_log(c: Any, sid: str, token: str, **text: bool) -> list[dict[str, Any]]:
    """Every record of the log as seat 0 sees it, page by page (a page with texts may hold
    fewer records: it ends where the next would pass the line limit)."""
    out: list[dict[str, Any]] = []
    after = None
    while True:
        page = await c.call("log", session=sid, seat=0, token=token, after=after, **text)
        out += page["records"]
        if page["next"] is None:
            return out
        after = page["next"]


def outcome_seq(pushes: list[dict[str, Any]]) -> int:
    return max(p["seq"] for p in pushes)


def _cards(value: Any) -> set[str]:
    """The card strings inside a JSON value."""
    if isinstance(value, str):
        return cards_in_text(value) if len(value) <= 3 else set()
    if isinstance(value, dict):
        return set().union(set(), *map(_cards, value.values()))
    if isinstance(value, list):
        return set().union(set(), *map(_cards, value))
    return set()


async def test_an_ended_session_answered_from_its_log_tells_its_end_in_words(tmp_path):
    async with trio.open_nursery() as n:
        first = await start_host(n, tmp_path, REGISTRY)
        a = await first.client()
        sid = (await a.call("create", game="crazy-eights", seats=2, bots=1, options={"target": 1}))[
            "session"
        ]
        joined = await a.call("join", session=sid, name="Ann")
        rng = random.Random(3)
        while (p := await a.next_push())["push"] != "ended":
            if p["push"] == "turn":
                await a.request("act", session=sid, action=rng.choice(p["legal"]), seq=p["seq"])
        outcome = p["outcome"]
        first.host.request_shutdown()
    async with trio.open_nursery() as n:
        second = await start_host(n, tmp_path, REGISTRY)
        assert sid not in second.host.sessions  # answered from the log
        c = await second.client()
        r = await c.call(
            "resume", session=sid, token=joined["token"], after=joined["seq"], text=True
        )
        pushes = []
        while (p := await c.next_push())["push"] != "ended":
            pushes.append(p)
        text = ENGINE.game.describe_outcome(outcome, ["Ann", "bot1"])
        assert p["text"] == text and pushes[-1]["text"] == text
        assert all(isinstance(q.get("text"), str) for q in pushes)
        assert r["ended"]
        w = await second.client()
        await w.call("watch", session=sid, text=True)
        assert (await w.next_push())["text"] == text
        w2 = await second.client()
        await w2.call("watch", session=sid)
        assert "text" not in await w2.next_push()
        # a log page of a log no host runs: the names from its seat_taken records
        page = await c.call("log", session=sid, after=2, limit=5, text=True)
        assert any(r["text"].startswith(("Ann ", "You ", "bot1 ")) for r in page["records"])
        second.host.request_shutdown()


async def test_a_lost_connection_is_told_alike_live_on_resume_and_in_the_log(tmp_path):
    # a new user's finding: the live push said "Bob left" where the log page said "Bob lost
    # the connection" (the push's event is only {"seat": 1}; the reason is in the presence
    # push that follows, and now in the text too)
    async with trio.open_nursery() as nursery:
        running = await start_host(nursery, tmp_path, REGISTRY, turn_timeout=None)
        ann, bob, eve = [await running.client() for _ in range(3)]
        sid = (await ann.call("create", game="crazy-eights", seats=2))["session"]
        await ann.call("join", session=sid, name="Ann")
        joined = await bob.call("join", session=sid, name="Bob")
        await eve.call("watch", session=sid, text=True)
        await bob.aclose()  # Bob's connection drops
        while (p := await eve.next_push())["push"] != "event" or p["kind"] != "seat_released":
            pass
        assert p["text"] == "Bob lost the connection" and p["event"] == {"seat": 1}
        presence = await eve.next_push()
        assert presence["push"] == "presence" and presence["reason"] == "gone"
        back = await running.client()
        await back.call(
            "resume", session=sid, token=joined["token"], after=joined["seq"], text=True
        )
        caught = [await back.next_push() for _ in range(2)]
        told = [q["text"] for q in caught if q.get("kind") == "seat_released"]
        assert told == ["You lost the connection"]
        page = await eve.call("log", session=sid, after=p["seq"] - 1, limit=1, text=True)
        assert page["records"][0]["text"] == "Bob lost the connection"
        running.host.request_shutdown()
