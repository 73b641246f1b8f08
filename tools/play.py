"""``gamehost play``: a terminal client.

It creates a session (``--game``, ``--seats``, ``--bots``, ``--option k=v``) or joins one
(``--session``), then shows the player's view and the legal actions each turn and reads the
choice from the keyboard (a number, or a JSON action object for forms the list only samples).
``--auto`` picks random legal actions instead (for scripts). A game that offers
``render(view, viewer)`` and ``describe(action)`` is drawn its own way; any other as JSON.
"""

from __future__ import annotations

import argparse
import random
import sys
from typing import Any

import orjson
import trio

from host.cli import non_negative_int, port_number, positive_int
from host.registry import load_registry
from tools.client import Client, HostError

__all__ = ["add_parser", "main"]


def _parse_option(text: str) -> tuple[str, Any]:
    key, eq, value = text.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(f"--option wants K=V, not {text!r}")
    try:
        return key, orjson.loads(value)
    except orjson.JSONDecodeError:
        return key, value


class Renderer:
    """Draws views and actions with the game's own ``render``/``describe`` when installed."""

    def __init__(self, game_id: str) -> None:
        try:
            self.game = load_registry().games.get(game_id)
        except Exception:  # noqa: BLE001 - a broken local plugin must not stop the client
            self.game = None

    def view(self, snapshot: dict[str, Any], seat: int | None) -> str:
        render = getattr(self.game, "render", None)
        names = ", ".join(
            f"{s['seat']}:{s['name']}{'*' if s['bot'] else ''}"
            for s in snapshot.get("seats", [])
            if s
        )
        head = f"--- seq {snapshot['seq']}  seats {names}  to act {snapshot.get('to_act')}"
        body = (
            render(snapshot["view"], seat)
            if render
            else orjson.dumps(snapshot["view"], option=orjson.OPT_INDENT_2).decode()
        )
        return f"{head}\n{body}"

    def action(self, action: dict[str, Any]) -> str:
        describe = getattr(self.game, "describe", None)
        return describe(action) if describe else orjson.dumps(action).decode()

    def event(self, push: dict[str, Any]) -> str | None:
        kind, ev = push.get("kind"), push.get("event") or {}
        if kind == "action":
            late = "  [timed out: played by the host]" if ev.get("timed_out") else ""
            return f"  seat {ev['seat']}: {self.action(ev['action'])}{late}"
        if kind == "seat_taken":
            return f"  seat {ev['seat']} taken by {ev['name']}"
        if kind == "event":
            return f"  · {orjson.dumps(ev).decode()[:150]}"
        return None


async def _choose(legal: list[dict[str, Any]], r: Renderer, auto: bool, rng: random.Random) -> Any:
    if auto:
        return rng.choice(legal)
    for i, a in enumerate(legal):
        print(f"  [{i}] {r.action(a)}")
    while True:
        try:
            text = await trio.to_thread.run_sync(input, "your move> ", abandon_on_cancel=True)
        except EOFError:
            raise KeyboardInterrupt from None
        text = text.strip()
        if text.isdigit() and int(text) < len(legal):
            return legal[int(text)]
        if text.startswith("{"):
            try:
                return orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                print(f"not JSON: {exc}")
                continue
        print(f"type a number 0..{len(legal) - 1}, or a JSON action object")


async def play(args: argparse.Namespace) -> int:
    """Create or join, then play until the session ends. Returns the exit status."""
    rng = random.Random(args.seed)
    async with await Client.connect(args.host, args.port) as c:
        await c.call("hello", protocol=1, client="gamehost-play")
        sid = args.session
        if sid is None:
            options = dict(args.option)
            seats = args.seats if args.seats is not None else args.bots + 1
            listed = {g["id"]: g for g in (await c.call("games"))["games"]}
            if args.game in listed and args.seats is None:
                seats = max(seats, listed[args.game]["min_seats"])
            created = await c.call(
                "create", game=args.game, seats=seats, bots=args.bots, options=options
            )
            sid = created["session"]
            print(f"created session {sid} ({args.game}, {seats} seats, {args.bots} bots)")
        joined = await c.call("join", session=sid, name=args.name)
        seat = joined["seat"]
        r = Renderer(joined["game"])
        print(f"you are seat {seat}; token {joined['token']} (use it to resume)")
        free = [i for i, s in enumerate(joined["seats"]) if s is None]
        if free:
            print(f"waiting for {len(free)} more player(s): gamehost play --session {sid}")
        while True:
            p = await c.next_push()
            if p is None:
                print("the host closed the connection")
                return 1
            if p["push"] == "event" and not args.quiet and (args.events or p["kind"] != "event"):
                line = r.event(p)
                if line:
                    print(line)
            elif p["push"] == "turn" and p.get("seat") == seat:
                snap = await c.call("view", session=sid)
                if snap["seq"] != p["seq"]:
                    continue  # a newer turn push follows
                if not args.quiet:
                    print(r.view(snap, seat))
                while True:
                    action = await _choose(p["legal"], r, args.auto, rng)
                    reply = await c.request("act", session=sid, action=action, seq=p["seq"])
                    if reply.get("ok"):
                        break
                    error = reply.get("error") or {}
                    print(f"refused: {error.get('code')}: {error.get('message')}")
                    if error.get("code") in ("conflict", "not_your_turn"):
                        break  # the table moved on: a newer turn push follows
            elif p["push"] == "ended":
                snap = await c.call("view", session=sid)
                print(r.view(snap, seat))
                print("ended:", orjson.dumps(p["outcome"]).decode())
                return 0
            elif p["push"] == "closed":
                print(f"closed by the host: {p.get('reason')}")
                return 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``play`` sub-command."""
    p = sub.add_parser("play", help="play in a terminal against other clients or host bots")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=port_number, default=7878)
    p.add_argument("--game", default="crazy-eights")
    p.add_argument("--seats", type=positive_int, help="seats (default: bots + 1)")
    p.add_argument("--bots", type=non_negative_int, default=3, help="seats filled by host bots")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        type=_parse_option,
        metavar="K=V",
        help="a game option (V is JSON, or else a string)",
    )
    p.add_argument("--session", help="join this session instead of creating one")
    p.add_argument("--name", default="player")
    p.add_argument("--auto", action="store_true", help="pick random legal actions")
    p.add_argument("--quiet", action="store_true", help="print only the end")
    p.add_argument("--events", action="store_true", help="also print each game event as JSON")
    p.add_argument("--seed", type=int, default=None, help="seed of --auto's choices")
    p.set_defaults(func=main)


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def main(args: argparse.Namespace) -> int:
    """Run the client; exit status 0 when the session ended, 1 otherwise (130 on Ctrl-C/D)."""
    try:
        return trio.run(play, args)
    except BaseException as exc:  # noqa: BLE001 - trio wraps what the client raised in groups
        leaf = _leaf(exc)
        if isinstance(leaf, KeyboardInterrupt):
            print("\nbye: your seat stays yours; resume it with the token printed above")
            return 130
        if isinstance(leaf, HostError):
            print(f"error from the host: {leaf}", file=sys.stderr)
            return 1
        if isinstance(leaf, OSError | ConnectionError):
            print(f"cannot talk to {args.host}:{args.port}: {leaf}", file=sys.stderr)
            return 1
        raise
