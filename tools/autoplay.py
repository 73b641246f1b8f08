"""Clients that play whole sessions with random legal actions: for ``demo``, ``bench`` and tests."""

from __future__ import annotations

import random
import time
from typing import Any

import attrs
import trio

from host.net.client import Client

__all__ = ["SeatResult", "play_seat", "play_session"]


@attrs.define
class SeatResult:
    """One seat's client: seat, actions sent, round trips (seconds), pushes seen, outcome."""

    seat: int
    actions: int = 0
    round_trips: list[float] = attrs.field(factory=list)
    actions_seen: int = 0
    events_seen: int = 0
    outcome: Any = None


async def play_seat(
    c: Client,
    sid: str,
    joined: dict[str, Any],
    rng: random.Random,
    res: SeatResult | None = None,
) -> SeatResult:
    """Answer every ``turn`` push for the joined seat with a random legal action until ``ended``.

    ``res``, if given, is the result to fill as the game goes (the caller sees the counts and
    round trips so far even if it cancels the game); it is also returned.

    Raises:
        ConnectionError: the host hung up before the end.
    """
    seat = joined["seat"]
    if res is None:
        res = SeatResult(seat)
    while True:
        p = await c.next_push()
        if p is None or p["push"] == "closed":
            raise ConnectionError(f"session {sid} seat {seat}: connection closed before the end")
        if p.get("session") != sid:
            continue
        if p["push"] == "event":
            res.events_seen += 1
            res.actions_seen += p.get("kind") == "action"
        elif p["push"] == "turn" and p["seat"] == seat:
            action = rng.choice(p["legal"])
            t0 = time.perf_counter()
            reply = await c.request("act", session=sid, action=action, seq=p["seq"])
            res.round_trips.append(time.perf_counter() - t0)
            if reply.get("ok"):
                res.actions += 1
            elif (reply.get("error") or {}).get("code") not in ("conflict", "not_your_turn"):
                raise RuntimeError(f"session {sid} seat {seat}: refused {action}: {reply}")
        elif p["push"] == "ended":
            res.outcome = p["outcome"]
            return res


async def play_session(
    host: str,
    port: int,
    game: str,
    seats: int,
    bots: int,
    rng: random.Random,
    options: dict[str, Any] | None = None,
) -> tuple[str, list[SeatResult]]:
    """Create a session and play its human seats (``seats - bots`` clients) to the end.

    Returns:
        The session id and one result per human seat.
    """
    results: list[SeatResult] = []
    async with await Client.connect(host, port) as lobby:
        created = await lobby.call(
            "create", game=game, seats=seats, bots=bots, options=options or {}
        )
    sid = created["session"]

    async def seat_task(
        i: int, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with await Client.connect(host, port) as c:
            await c.call("hello", protocol=1, client=f"autoplay-{i}")
            joined = await c.call("join", session=sid, name=f"auto{i}")
            task_status.started()
            results.append(await play_seat(c, sid, joined, random.Random(rng.random())))

    async with trio.open_nursery() as n:
        for i in range(seats - bots):
            await n.start(seat_task, i)
    if seats == bots:
        async with await Client.connect(host, port) as c:
            snap = await c.call("watch", session=sid)
            while not snap["ended"]:
                p = await c.next_push()
                if p is None or p["push"] == "ended":
                    break
    return sid, results
