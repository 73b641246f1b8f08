"""Over real TCP with the installed games: state pushes (``"view": true`` on join/watch/resume)
and the expected-seq rule for simultaneous moves (``host.table.freshness``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import trio

from host.plugins.contract import game_schema
from host.plugins.registry import load_registry
from tests.conftest import RunningHost, start_host
from tools.client import Client

REGISTRY = load_registry()


async def turn_at(c: Client, seat: int, seq: int) -> dict[str, Any]:
    """The seat's ``turn`` push for ``seq`` (older pushes are skipped)."""
    while True:
        p = await c.next_push()
        assert p is not None, "connection closed"
        if p["push"] == "turn" and p["seq"] == seq:
            assert p["seat"] == seat
            return p
        assert p["push"] != "ended", "the session ended first"


async def seated(host: RunningHost, game: str, seats: int, **options: Any) -> tuple[str, list]:
    lobby = await host.client()
    sid = (await lobby.call("create", game=game, seats=seats, options=options))["session"]
    clients = []
    for seat in range(seats):
        c = await host.client()
        await c.call("join", session=sid, seat=seat, name=f"p{seat}")
        clients.append(c)
    return sid, clients


async def drive(clients: list[Client], sid: str, together: Any) -> None:
    """Play to the end, one change at a time: when one seat is to act it answers its turn;
    when several are, ``together(seq, {seat: turn push})`` answers them all."""
    while True:
        snap = await clients[0].call("view", session=sid)
        if snap["ended"]:
            return
        seq, to_act = snap["seq"], snap["to_act"]
        turns = {s: await turn_at(clients[s], s, seq) for s in to_act}
        if len(to_act) > 1:
            if await together(seq, turns):
                return
            continue
        (s,) = to_act
        await clients[s].call("act", session=sid, action=turns[s]["legal"][0], seq=seq)


async def test_simultaneous_gives_answering_the_same_seq_are_all_accepted(tmp_path: Path) -> None:
    """Around the World, round 2: every seat owing a give answers its turn push of seq E with
    E, one after the other (each answer lands after the previous one moved the session on);
    all are accepted: none gets ``conflict``."""
    answered: list[tuple[int, int, int]] = []  # (expected seq, seat, seq when accepted)

    async def give_all(seq: int, turns: dict[int, dict]) -> bool:
        for seat, turn in turns.items():
            assert turn["legal"][0]["type"] == "give"
            reply = await clients[seat].request(
                "act", session=sid, action=turn["legal"][0], seq=seq
            )
            assert reply["ok"], reply
            answered.append((seq, seat, reply["result"]["seq"]))
        return False

    async with trio.open_nursery() as n:
        host = await start_host(n, tmp_path, REGISTRY, turn_timeout=None)
        for _ in range(10):  # the shoe is random: play until two seats owe gives at once
            sid, clients = await seated(host, "around-the-world", 6)
            await drive(clients, sid, give_all)
            if answered:
                break
        host.host.request_shutdown()
    late = [(e, s, at) for e, s, at in answered if at > e + 2]  # accepted past other records
    assert late, f"no give was answered after another one: {answered}"


async def test_an_answer_after_a_change_to_what_the_seat_may_do_is_a_conflict(
    tmp_path: Path,
) -> None:
    """Seven Twenty-Seven's extra-card vote is simultaneous: once one seat votes no the vote
    is over, so another seat's vote naming the seq before is refused with ``conflict`` (and so
    is a seat's second answer to the same turn in Crazy Eights, after its draw showed it a
    card)."""
    outcomes: list[Any] = []

    async def vote(seq: int, turns: dict[int, dict]) -> bool:
        first, second, *_ = sorted(turns)
        assert {"type": "vote", "yes": False} in turns[first]["legal"]
        await clients[first].call(
            "act", session=sid, action={"type": "vote", "yes": False}, seq=seq
        )
        reply = await clients[second].request(
            "act", session=sid, action={"type": "vote", "yes": True}, seq=seq
        )
        outcomes.append(reply)
        return True

    async with trio.open_nursery() as n:
        host = await start_host(n, tmp_path, REGISTRY, turn_timeout=None)
        sid, clients = await seated(host, "seven-twenty-seven", 4)
        await drive(clients, sid, vote)
        # Crazy Eights: draw, then answer the same turn again
        sid, c8 = await seated(host, "crazy-eights", 2)
        snap = await c8[0].call("view", session=sid)
        (seat,) = snap["to_act"]
        turn = await turn_at(c8[seat], seat, snap["seq"])
        draw = await c8[seat].call("act", session=sid, action={"type": "draw"}, seq=turn["seq"])
        again = await c8[seat].request("act", session=sid, action=turn["legal"][0], seq=turn["seq"])
        host.host.request_shutdown()
    (reply,) = outcomes
    assert reply["error"]["code"] == "conflict", reply
    assert "what this seat may do has changed" in reply["error"]["message"]
    assert again["error"]["code"] == "conflict" and again["error"]["seq"] == draw["seq"]


async def test_view_pushes_follow_every_change_and_hide_what_a_spectator_may_not_see(
    tmp_path: Path,
) -> None:
    """With ``"view": true`` a seat and a spectator get ``{"push": "view", "seq", "view"}``
    after every change, equal to what ``view`` answers then; the spectator's never holds a
    hand. A seat that did not ask gets none."""
    schema = game_schema(REGISTRY.games["crazy-eights"])["view"]
    as_seat = jsonschema.Draft202012Validator(schema["seat"])
    as_spectator = jsonschema.Draft202012Validator(schema["spectator"])
    async with trio.open_nursery() as n:
        host = await start_host(n, tmp_path, REGISTRY, turn_timeout=None)
        lobby = await host.client()
        sid = (await lobby.call("create", game="crazy-eights", seats=2))["session"]
        spectator = await host.client()
        watched = await spectator.call("watch", session=sid, view=True)
        a, b = await host.client(), await host.client()
        ja = await a.call("join", session=sid, name="ann", view=True)
        await b.call("join", session=sid, name="bob")
        pushes: dict[str, list[dict]] = {"seat": [], "spectator": [], "plain": []}

        async def collect(c: Client, key: str, start: int) -> None:
            last = start
            while True:
                p = await c.next_push()
                if p is None or p["push"] == "ended":
                    return
                pushes[key].append(p)
                if p["push"] == "event":
                    last = p["seq"]
                if p["push"] == "view":
                    assert p["seq"] == last and p["session"] == sid

        async def draw(c: Client, seat: int, moves: int) -> None:
            """Seat 1 opens and draws ``moves`` times (a draw keeps it to act)."""
            for _ in range(moves):
                snap = await c.call("view", session=sid)
                assert snap["to_act"] == [seat]
                while True:
                    p = await c.next_push()
                    assert p is not None
                    pushes["plain"].append(p)
                    if p["push"] == "turn" and p["seq"] == snap["seq"]:
                        break
                assert p["legal"][-1] == {"type": "draw"}
                await c.call("act", session=sid, action={"type": "draw"}, seq=snap["seq"])

        n.start_soon(collect, spectator, "spectator", watched["seq"])
        n.start_soon(collect, a, "seat", ja["seq"])
        await draw(b, 1, 3)
        final_a = await a.call("view", session=sid)
        final_s = await spectator.call("view", session=sid)
        host.host.request_shutdown()
    seat_views = [p for p in pushes["seat"] if p["push"] == "view"]
    spec_views = [p for p in pushes["spectator"] if p["push"] == "view"]
    assert seat_views and spec_views
    assert seat_views[-1]["seq"] == final_a["seq"] and seat_views[-1]["view"] == final_a["view"]
    assert spec_views[-1]["view"] == final_s["view"]
    for p in seat_views:
        assert not list(as_seat.iter_errors(p["view"]))
    for p in spec_views:
        assert p["view"]["hand"] is None
        assert not list(as_spectator.iter_errors(p["view"]))
    assert seat_views[-1]["view"]["hand"]  # the seat sees its own cards
    # one per change: the spectator saw both joins (the second dealt) and three draws; ann
    # joined first, so she saw bob's join and the draws
    assert (len(spec_views), len(seat_views)) == (5, 4)
    assert pushes["plain"] and not [p for p in pushes["plain"] if p["push"] == "view"]
