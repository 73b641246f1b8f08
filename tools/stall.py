"""``gamehost bench --stall``: does anything one table, request or plugin does stall the host?

Starts ``gamehost serve`` (its own process, a fresh data dir, ``--plugin tools.stall_games``)
on a data dir that already holds one long finished session (``--records``, 500,000 by default:
Crazy Eights played by bots, cut at a cause and ended by the host), then measures, twice for
``--seconds`` each:

- the round trip of a ``ping`` on a connection of its own, every 20 ms;
- the round trip of an ``act`` on a healthy table (Crazy Eights, one client seat, one host bot),
  played for as long as the phase lasts (a new session when one ends).

The first phase is quiet (it starts once the host has answered a ``log`` request for the long
log: its start may still be reading the data dir); during the second, at the same time:

- a ``stall-loop`` table (its host bot loops for ever) and a ``stall-hog`` table (its bot
  allocates without bound) are created at the start: the host's budget must end both
  (``aborted: "game_error"``) — the time until each ``ended`` push is reported;
- a debugger pages the long log (``log``, 1,000 records a page, front to back and again) on one
  connection and asks ``replay`` at seqs near its end on another (the time of each is
  reported; the first replay waits for the log's snapshots to be made);
- 8 ``verify`` requests of the long log run, and run again as each is answered;
- with ``--store URL`` (a PostgreSQL database, ``gamehost db init`` done), a
  ``gamehost import`` of the long log runs too.

The load runs in a process of its own (``python -m tools.stall``), so the measuring clients'
event loop does nothing but ping and play: a host is measured as its users would see it, each in
a process of their own, not slowed by the bench reading a debugger's pages.

**The machine's floor.** In both phases the same measuring process also pings a bare trio echo
server (``python -m tools.baseline --echo``, a process of its own that does nothing else) every
20 ms, through the same client as the host: its round trip is what any server gets on this
machine while the load runs — the load's worker processes and the bench's own clients take cores
too — so a host can do no better. The host's loaded p99 over the floor's loaded p99
(``*_over_floor``) says what the host itself adds.

Figures: ``quiet`` and ``loaded`` p50/p99/max of the three round trips (``ping``, ``act``,
``floor``), their ratios (the target: p99 within 2x), the host's over the floor's, the host's
peak resident memory, the broken tables' ends, the debugger's page and replay times. ``--json``
prints one JSON object.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import trio

from host.net.client import Client
from host.plugins.registry import load_registry
from host.store.file import FileStore
from host.table.engine import Record

__all__ = ["add_arguments", "make_long_log", "run"]


def make_long_log(data_dir: Path, records: int, seed: int = 1) -> str:
    """Write one finished Crazy Eights session of about ``records`` records (bots in every
    seat, a target no one reaches, cut after a whole cause and ended by the host as
    ``too_long``) into ``data_dir``'s file store; its session id."""
    engine = load_registry().engines["crazy-eights"]
    rng = random.Random(seed)
    sid = f"long{seed:012d}"
    opts = engine.codec.options_from_wire({"target": 1_000_000}, 4)
    header = engine.header(sid, opts, 4, [0, 1, 2, 3], rng.randbytes(32))
    header.data["turn_timeout"] = None
    state = engine.initial(header)
    out: list[Record] = [header]
    for seat in range(4):
        new, state = engine.seat_step(state, seat, f"bot{seat}", True, None)
        out += new
    while len(out) < records - 1 and not state.ended:
        seat = engine.bot_seat(state)
        if seat is None:
            break
        new, state = engine.bot_step(state, seat)
        out += new
    if not state.ended:
        out += engine.abort(state, "too_long")
    lines = [r.to_json() for r in out]

    async def write() -> None:
        store = FileStore(data_dir)
        async with trio.open_nursery() as n:
            await n.start(store.run)
            await store.create(sid, lines)
            await store.aclose()

    trio.run(write)
    return sid


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``--stall`` options of ``gamehost bench``."""
    p.add_argument(
        "--stall",
        action="store_true",
        help="the stall benchmark: ping and act round trips, quiet and while broken plugins,"
        " a debugger on a long log, verifies and an import load the host",
    )
    p.add_argument(
        "--records", type=int, default=500_000, help="with --stall: the long log's records"
    )
    p.add_argument(
        "--store",
        help="a PostgreSQL URL: the benched hosts keep their logs in it (made ready with db"
        " init); with --stall: the database the long log is imported into",
    )
    p.add_argument(
        "--heavy-workers",
        type=int,
        default=None,
        help="with --stall: the host's --heavy-workers (default: the host's; 0: on its loop)",
    )
    p.add_argument(
        "--stall-load",
        metavar="PARTS",
        help="with --stall: which loads run in the loaded phase, comma-separated, of"
        f" {','.join(LOADS)} (default: all; import only with --store)",
    )
    p.add_argument(
        "--game-time",
        type=float,
        default=None,
        help="with --stall: the host's --game-time (default: the host's)",
    )


LOADS = ("broken", "pages", "replays", "verify", "import")
"""The parts of the loaded phase (``--stall-load``): the two broken plugin tables, the
debugger's pages, its replays, the 8 verifies, the import (with ``--store``)."""


def _parts(spec: str | None) -> frozenset[str]:
    """The loads ``--stall-load`` names (all of them when None).

    Raises:
        SystemExit: a name that is not a load (status 2, as argparse)."""
    if spec is None:
        return frozenset(LOADS)
    parts = frozenset(x.strip() for x in spec.split(",") if x.strip())
    if not parts or parts - set(LOADS):
        raise SystemExit(f"--stall-load: name some of {', '.join(LOADS)}, not {spec!r}")
    return parts


class _Times:
    def __init__(self) -> None:
        self.ping: list[float] = []
        self.act: list[float] = []
        self.floor: list[float] = []

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, xs in (("ping", self.ping), ("act", self.act), ("floor", self.floor)):
            s = sorted(xs)
            out[f"{name}_n"] = len(s)
            for q, label in ((0.5, "p50"), (0.99, "p99")):
                out[f"{name}_{label}_ms"] = (
                    round(1000 * s[min(len(s) - 1, math.ceil(q * len(s)) - 1)], 2) if s else None
                )
            out[f"{name}_max_ms"] = round(1000 * s[-1], 2) if s else None
        return out


async def _pinger(port: int, into: list[float], stop: trio.Event) -> None:
    """``ping`` the server on ``port`` every 20 ms until ``stop``, each round trip (seconds)
    appended to ``into``: the host, and the bare echo server (the machine's floor) the same way,
    through the same client."""
    c = await Client.connect("127.0.0.1", port)
    async with trio.open_nursery() as n:
        c.start(n)
        while not stop.is_set():
            t0 = time.monotonic()
            await c.call("ping")
            into.append(time.monotonic() - t0)
            await trio.sleep(0.02)
        await c.aclose()
        n.cancel_scope.cancel()


async def _player(port: int, times: _Times, stop: trio.Event, rng: random.Random) -> None:
    c = await Client.connect("127.0.0.1", port)
    async with trio.open_nursery() as n:
        c.start(n)
        while not stop.is_set():
            sid = (await c.call("create", game="crazy-eights", seats=2, bots=1))["session"]
            await c.call("join", session=sid)
            while not stop.is_set():
                p = await c.next_push()
                if p is None or p["push"] == "ended":
                    break
                if p["push"] == "turn":
                    t0 = time.monotonic()
                    r = await c.request("act", session=sid, action=rng.choice(p["legal"]))
                    if r.get("ok"):
                        times.act.append(time.monotonic() - t0)
            await c.request("leave", session=sid)
        await c.aclose()
        n.cancel_scope.cancel()


async def _broken_table(port: int, game: str, out: dict[str, Any]) -> None:
    c = await Client.connect("127.0.0.1", port)
    async with trio.open_nursery() as n:
        c.start(n)
        t0 = time.monotonic()
        sid = (await c.call("create", game=game, seats=2, bots=2))["session"]
        await c.call("watch", session=sid)
        while True:
            p = await c.next_push()
            if p is None:
                break
            if p["push"] == "ended":
                out[game] = {"aborted": p.get("aborted"), "ended_after_s": time.monotonic() - t0}
                break
        await c.aclose()
        n.cancel_scope.cancel()


async def _debugger(
    port: int, sid: str, stop: trio.Event, out: dict[str, list[float]], parts: frozenset[str]
) -> None:
    """A debugger tab: one connection pages the log front to back (and again) while another
    asks ``replay`` at seqs near its end (the first waits for the log's snapshots)."""

    async def pager(c: Client) -> None:
        after = None
        while not stop.is_set():
            t0 = time.monotonic()
            page = await c.call("log", session=sid, after=after, limit=1000)
            out["page_s"].append(time.monotonic() - t0)
            after = page["next"]

    async def replayer(c: Client) -> None:
        last = (await c.call("log", session=sid, limit=1))["seq"]
        while not stop.is_set():
            t0 = time.monotonic()
            seq = max(0, last - 10_000 + 37 * len(out["replay_s"]) % 10_000)
            await c.request("replay", session=sid, seq=seq)
            out["replay_s"].append(time.monotonic() - t0)

    a = await Client.connect("127.0.0.1", port)
    b = await Client.connect("127.0.0.1", port)
    async with trio.open_nursery() as n:
        a.start(n)
        b.start(n)
        async with trio.open_nursery() as both:
            if "pages" in parts:
                both.start_soon(pager, a)
            if "replays" in parts:
                both.start_soon(replayer, b)
        await a.aclose()
        await b.aclose()
        n.cancel_scope.cancel()


async def _verifier(port: int, sid: str, stop: trio.Event, out: dict[str, list[float]]) -> None:
    c = await Client.connect("127.0.0.1", port)
    async with trio.open_nursery() as n:
        c.start(n)
        while not stop.is_set():
            t0 = time.monotonic()
            r = await c.request("verify", session=sid)
            if r.get("ok"):
                out["verify_s"].append(time.monotonic() - t0)
            else:
                out["verify_refused"].append(time.monotonic() - t0)
                await trio.sleep(0.5)
        await c.aclose()
        n.cancel_scope.cancel()


async def _load(
    port: int, sid: str, store: str | None, log: Path, parts: frozenset[str]
) -> dict[str, Any]:
    """The load of the second phase (run in a process of its own, :func:`_load_main`): until a
    line comes on standard input, then the summary of what it did."""
    stop = trio.Event()
    busy: dict[str, list[float]] = {
        "page_s": [],
        "replay_s": [],
        "verify_s": [],
        "verify_refused": [],
    }
    ends: dict[str, Any] = {}
    importer = None
    async with trio.open_nursery() as n:
        if "broken" in parts:
            n.start_soon(_broken_table, port, "stall-loop", ends)
            n.start_soon(_broken_table, port, "stall-hog", ends)
        if "pages" in parts or "replays" in parts:
            n.start_soon(_debugger, port, sid, stop, busy, parts)
        for _ in range(8 if "verify" in parts else 0):
            n.start_soon(_verifier, port, sid, stop, busy)
        if store and "import" in parts:
            importer = subprocess.Popen(
                [sys.executable, "-m", "tools.cli", "import", str(log), "--store", store],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        print("started", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)
        stop.set()
        with trio.move_on_after(60):
            while "broken" in parts and len(ends) < 2:
                await trio.sleep(0.1)
        n.cancel_scope.deadline = trio.current_time() + 30
    out: dict[str, Any] = {"broken_tables": ends}
    for k, xs in busy.items():
        out[k] = {
            "n": len(xs),
            "max": round(max(xs), 3) if xs else None,
            "median": round(sorted(xs)[len(xs) // 2], 3) if xs else None,
            "first": round(xs[0], 3) if xs else None,
            "median_after_first": round(sorted(xs[1:])[len(xs[1:]) // 2], 3)
            if len(xs) > 1
            else None,
        }
    if importer is not None:
        _, err = importer.communicate(timeout=600)
        out["import_status"] = importer.returncode
        out["import_error"] = err.decode()[-300:] if importer.returncode else None
    return out


def _load_main(argv: list[str]) -> int:
    """``python -m tools.stall PORT SID LOG PARTS [STORE]``: :func:`_load`, its summary printed
    as one JSON line on standard output."""
    port, sid, log, parts, *store = argv
    out = trio.run(
        _load, int(port), sid, store[0] if store else None, Path(log), frozenset(parts.split(","))
    )
    print(orjson.dumps(out).decode(), flush=True)
    return 0


async def _phase(
    port: int,
    seconds: float,
    loaded: bool,
    sid: str,
    extra: dict[str, Any],
    log: Path,
    parts: frozenset[str] = frozenset(LOADS),
) -> dict[str, Any]:
    """``seconds`` of pings and acts measured in this process (and pings of the echo server
    on port ``extra["floor"]``, when given); when ``loaded``, the load runs meanwhile in a
    process of its own, so the time this process spends reading the load's answers (a
    debugger's pages of 1,000 records) is not counted in the host's round trips."""
    times = _Times()
    stop = trio.Event()
    loader = None
    if loaded:
        loader = subprocess.Popen(
            [sys.executable, "-m", "tools.stall", str(port), sid, str(log), ",".join(parts)]
            + ([extra["store"]] if extra.get("store") else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert loader.stdout is not None
        started = await trio.to_thread.run_sync(loader.stdout.readline)
        if started.strip() != b"started":
            loader.kill()
            raise RuntimeError(f"the load process did not start: {started!r}")
    try:
        async with trio.open_nursery() as n:
            n.start_soon(_pinger, port, times.ping, stop)
            if extra.get("floor"):
                n.start_soon(_pinger, extra["floor"], times.floor, stop)
            n.start_soon(_player, port, times, stop, random.Random(7))
            await trio.sleep(seconds)
            stop.set()
            n.cancel_scope.deadline = trio.current_time() + 30
        out = times.summary()
        if loader is not None:
            got, _ = await trio.to_thread.run_sync(lambda: loader.communicate(b"stop\n", 700))
            out.update(orjson.loads(got.splitlines()[-1]))
            loader = None
    finally:
        if loader is not None:
            loader.kill()
            loader.wait()
    return out


def _rss_mib(pid: int) -> dict[str, float]:
    got: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmHWM:", "VmRSS:")):
            got[line.split(":")[0]] = int(line.split()[1]) / 1024
    return got


def _children_rss_mib(pid: int) -> dict[str, float]:
    """The summed resident memory now and peaks of the host's child processes (its heavy-work
    workers)."""
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with_kids = (task / "children").read_text().split()
        kids += [int(k) for k in with_kids]
    out = {"VmRSS": 0.0, "VmHWM": 0.0, "n": float(len(kids))}
    for kid in kids:
        try:
            got = _rss_mib(kid)
        except OSError:
            continue
        out["VmRSS"] += got.get("VmRSS", 0.0)
        out["VmHWM"] += got.get("VmHWM", 0.0)
    return out


async def _warm_up(port: int, sid: str) -> None:
    """Wait until the host answers for the long log (it may still be loading its data dir)."""
    c = await Client.connect("127.0.0.1", port)
    async with trio.open_nursery() as n:
        c.start(n)
        await c.call("log", session=sid, limit=1)
        await c.aclose()
        n.cancel_scope.cancel()


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The stall benchmark (see the module docstring)."""
    from tools.bench import _start_server, _stop, baseline_command, serve_command

    seconds = args.seconds or 20.0
    parts = _parts(getattr(args, "stall_load", None))
    with tempfile.TemporaryDirectory(prefix="gamehost-stall-") as tmp:
        data = Path(tmp)
        t0 = time.monotonic()
        sid = make_long_log(data, args.records)
        made_s = time.monotonic() - t0
        log = data / "sessions" / f"{sid}.jsonl"
        cmd = serve_command(args.fsync, str(data)) + ["--plugin", "tools.stall_games"]
        cmd += ["--turn-timeout", "0"]
        if args.game_time is not None:
            cmd += ["--game-time", str(args.game_time)]
        if getattr(args, "heavy_workers", None) is not None:
            cmd += ["--heavy-workers", str(args.heavy_workers)]
        proc, port = _start_server(cmd)
        echo = None
        try:
            echo, floor = _start_server(baseline_command(1, 100) + ["--echo"])
            t0 = time.monotonic()
            trio.run(_warm_up, port, sid)
            warm_s = time.monotonic() - t0
            quiet = trio.run(_phase, port, seconds, False, sid, {"floor": floor}, log)
            before = _rss_mib(proc.pid)
            loaded = trio.run(
                _phase, port, seconds, True, sid, {"store": args.store, "floor": floor}, log, parts
            )
            after = _rss_mib(proc.pid)
            workers = _children_rss_mib(proc.pid)
        finally:
            try:
                _stop(proc)
            finally:  # even when stopping the host was interrupted
                if echo is not None:
                    _stop(echo)
    ratios = {
        f"{k}_ratio": (round(loaded[k] / quiet[k], 2) if quiet.get(k) and loaded.get(k) else None)
        for k in ("ping_p99_ms", "act_p99_ms", "floor_p99_ms")
    }
    over = {
        f"{k}_p99_over_floor": (
            round(loaded[f"{k}_p99_ms"] / loaded["floor_p99_ms"], 2)
            if loaded.get(f"{k}_p99_ms") and loaded.get("floor_p99_ms")
            else None
        )
        for k in ("ping", "act")
    }
    return {
        "records": args.records,
        "loads": sorted(parts),
        "heavy_workers": getattr(args, "heavy_workers", None),
        "log_made_s": round(made_s, 1),
        "seconds": seconds,
        "quiet": quiet,
        "loaded": loaded,
        **ratios,
        **over,
        "rss_mib_before_load": before.get("VmRSS"),
        "rss_mib_after_load": after.get("VmRSS"),
        "peak_rss_mib": after.get("VmHWM"),
        "workers": int(workers["n"]),
        "workers_rss_mib": round(workers["VmRSS"], 1),
        "workers_peak_rss_mib": round(workers["VmHWM"], 1),
        "first_answer_s": round(warm_s, 3),
        "pid_cpu_count": os.cpu_count(),
    }


def summary(r: dict[str, Any]) -> list[str]:
    """Lines for a person."""
    q, ld = r["quiet"], r["loaded"]
    lines = [
        f"stall bench: a {r['records']}-record log, {r['seconds']:g} s quiet then loaded",
        f"  ping p99 {q['ping_p99_ms']} -> {ld['ping_p99_ms']} ms (x{r['ping_p99_ms_ratio']}),"
        f" max {ld['ping_max_ms']} ms",
        f"  act  p99 {q['act_p99_ms']} -> {ld['act_p99_ms']} ms (x{r['act_p99_ms_ratio']}),"
        f" max {ld['act_max_ms']} ms",
        f"  floor (a bare echo server's ping) p99 {q['floor_p99_ms']} -> {ld['floor_p99_ms']} ms"
        f" (x{r['floor_p99_ms_ratio']}); loaded, the host's over the floor's: ping"
        f" x{r['ping_p99_over_floor']}, act x{r['act_p99_over_floor']}",
    ]
    for game, end in sorted(ld.get("broken_tables", {}).items()):
        lines.append(f"  {game}: {end['aborted']} after {end['ended_after_s']:.2f} s")
    for k in ("page_s", "replay_s", "verify_s"):
        v = ld.get(k, {})
        lines.append(
            f"  {k[:-2]}: {v.get('n')} done, first {v.get('first')} s, median"
            f" {v.get('median')} s (after the first {v.get('median_after_first')} s),"
            f" max {v.get('max')} s"
        )
    lines.append(
        f"  host memory: {r['rss_mib_before_load']:.0f} -> {r['rss_mib_after_load']:.0f} MiB,"
        f" peak {r['peak_rss_mib']:.0f} MiB; {r['workers']} worker processes"
        f" {r['workers_rss_mib']:.0f} MiB, peaks summed {r['workers_peak_rss_mib']:.0f} MiB"
    )
    if "import_status" in ld:
        lines.append(f"  import: status {ld['import_status']} {ld.get('import_error') or ''}")
    return lines


def main(args: argparse.Namespace) -> int:
    r = run(args)
    if getattr(args, "json", False):
        print(orjson.dumps(r).decode())
    else:
        print("\n".join(summary(r)))
        print(orjson.dumps(r).decode())
    return 0


if __name__ == "__main__":
    sys.exit(_load_main(sys.argv[1:]))
