"""``gamehost demo``: the main job, end to end.

Starts a host on the embedded file store (a fresh data dir), plays whole sessions of every
installed game over TCP (random-legal clients in some seats, host bots in the rest, a few seat
counts each), shuts the host down cleanly, then replays and verifies every log it wrote.
Exit status 0 when every session ended and every log verified.

A failure is reported by its first real error (the innermost exception under trio's exception
groups, not "Exceptions from Trio nursery") with the game, the seat count and the session it
came from; the demo then goes on with the next session.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import trio

from host import logs
from host.cli import count, port_number
from host.net.server import HostConfig, run_host
from host.plugins.registry import load_registry
from host.table.history import verify_log
from tools.autoplay import play_session
from tools.replay import load

__all__ = ["add_parser", "main"]


def seat_plan(min_seats: int, max_seats: int, games: int) -> list[tuple[int, int]]:
    """``(seats, bots)`` for each demo session: from the fewest seats to the most, with at least
    one session of two human clients."""
    plan = []
    for i in range(games):
        seats = min_seats + (max_seats - min_seats) * i // max(1, games - 1)
        humans = 2 if i == 0 else 1
        plan.append((seats, max(0, seats - humans)))
    return plan


async def run_demo(args: argparse.Namespace) -> int:
    registry = load_registry()
    config = HostConfig(data_dir=args.data_dir, port=args.port, fsync=args.fsync)
    rng = random.Random(args.seed)
    failures = 0
    async with trio.open_nursery() as n:
        host, port = await n.start(run_host, config, registry)
        print(f"host listening on 127.0.0.1:{port}, logs in {args.data_dir}/sessions")
        for gid in sorted(registry.games):
            info = registry.games[gid].info
            for seats, bots in seat_plan(info.min_seats, min(info.max_seats, 12), args.games):
                t0 = time.perf_counter()
                before = set(host.sessions)
                try:
                    sid, results = await play_session("127.0.0.1", port, gid, seats, bots, rng)
                except Exception as exc:  # noqa: BLE001 - report and go on with the next
                    failures += 1
                    new = sorted(set(host.sessions) - before)
                    where = f"session {new[0]}" if new else "no session created"
                    print(f"  FAILED {gid} seats={seats} ({where}): {describe_error(exc)}")
                    continue
                acts = max((r.actions_seen for r in results), default=0)
                print(
                    f"  {gid:<20} session {sid}  seats={seats:<2} bots={bots:<2}"
                    f" {acts:>5} actions  {time.perf_counter() - t0:6.2f} s  ended"
                )
        host.request_shutdown()
    print("host stopped; replaying every log with the current code:")
    paths = sorted((args.data_dir / "sessions").glob("*.jsonl"))
    for path in paths:
        try:
            engine, records = load(path, registry.engines.get(_game_of(path)))
            diff = verify_log(engine, records)
        except Exception as exc:  # noqa: BLE001 - report and go on with the next log
            failures += 1
            print(f"  FAILED {path.name} (session {path.stem}): {describe_error(exc)}")
            continue
        ended = records[-1].type == "ended"
        status = "ok" if diff is None and ended else f"DIFFERS at {diff}" if diff else "NOT ENDED"
        if status != "ok":
            failures += 1
        print(f"  {status:<3} {path.name}  {engine.game.info.id:<20} {len(records):>5} records")
    print(
        f"demo: {len(paths)} sessions played over TCP and verified from their logs,"
        f" {failures} failures"
    )
    return 1 if failures else 0


def first_error(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups that is not a trio cancellation."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [first_error(e) for e in exc.exceptions]
        real = [e for e in leaves if not isinstance(e, trio.Cancelled)]
        return (real or leaves)[0]
    return exc


def describe_error(exc: BaseException) -> str:
    """``Type: message`` of :func:`first_error`."""
    leaf = first_error(exc)
    return f"{type(leaf).__name__}: {leaf}"


def _game_of(path: Path) -> str:
    import orjson

    with path.open("rb") as f:
        return orjson.loads(f.readline())["game"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``demo`` sub-command."""
    p = sub.add_parser("demo", help="host + full sessions of every game over TCP + replay")
    p.add_argument("--data-dir", type=Path, help="default: a new folder under ./demo-data")
    p.add_argument("--games", type=count, default=3, help="sessions per game")
    p.add_argument("--port", type=port_number, default=0)
    p.add_argument("--fsync", choices=["always", "batch", "never"], default="batch")
    p.add_argument("--seed", type=int, default=None)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run the demo; exit status 0 when everything held."""
    logs.configure(json=False, level="warning")
    if args.data_dir is None:
        args.data_dir = Path("demo-data") / time.strftime("%Y%m%d-%H%M%S")
    if args.data_dir.exists() and any(args.data_dir.glob("sessions/*.jsonl")):
        print(f"error: {args.data_dir} already holds sessions; pick a new --data-dir")
        return 2
    try:
        return trio.run(run_demo, args)
    except Exception as exc:  # noqa: BLE001 - e.g. the host itself failed: say why, in one line
        print(f"demo failed: {describe_error(exc)}", file=sys.stderr)
        return 1
