"""``python -m tools.wal_bench``: how long the file store's recovery takes for a write-ahead log
of a given size (BENCHMARKS.md).

Writes ``--sessions`` session logs through a ``FileStore`` holding the data dir (``--fsync
batch``, one segment large enough for everything, records of 3-seat Crazy Eights games played
locally, appended one at a time round the sessions) until the log holds ``--mib`` MiB, then
leaves it as a crash would (no checkpoint). Then it times opening the data dir as a host does
(``FileStore(..., exclusive=True)``: recovery, the session files' syncs, the segment's
retirement), twice over:

- ``intact``: the session files hold everything (a crash of the host process: the kernel still
  had the files' writes), so recovery compares and syncs;
- ``lost``: every session file is cut back to its header first (a power cut that took every
  unsynced write, the worst case), so recovery appends every record of the log.

Prints one JSON object: the log's size and records, and for each case the seconds it took (wall
clock, and CPU time of this process: the steadier figure on a shared machine) and the records
appended.

``--appends SECONDS`` measures the store alone instead: ``--sessions`` sessions each append one
record (the size of a Crazy Eights event) after another for that long, all at once, through a
``FileStore`` holding the data dir (``--fsync batch``), and prints appends per second, CPU time
of this process per append (µs), the append round trip's p50 / p99 / max (ms), batches and
fsyncs (the log's, its checkpoints' and the creates'). ``--no-wal`` writes file by file instead,
each touched file synced once per batch (the store before the write-ahead log), for an A/B run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import trio

from host.plugins.registry import load_registry
from host.store.file import FileStore
from host.store.wal import Wal, segment_numbers
from host.table.local import play_local


def _games(n: int) -> list[list[dict[str, Any]]]:
    engine = load_registry().engines["crazy-eights"]
    out = []
    for seed in range(n):
        _, game = play_local(engine.game, {}, 3, seed=seed.to_bytes(32, "big"), engine=engine)
        out.append([r.to_json() for r in game])
    return out


async def _write(root: Path, sessions: int, mib: float) -> int:
    """Fill the log with ``mib`` MiB; returns the records appended."""
    games = _games(min(sessions, 50))
    store = FileStore(root, "batch", exclusive=True, segment_bytes=1 << 40)
    records = 0
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        nxt = {}
        for i in range(sessions):
            game = games[i % len(games)]
            await store.create(f"t{i:05d}", [game[0]])
            nxt[f"t{i:05d}"] = 1
        assert store.wal is not None
        while store.wal.size < mib * (1 << 20):
            async with trio.open_nursery() as tables:
                for i, sid in enumerate(nxt):
                    game = games[i % len(games)]
                    seq = nxt[sid]
                    if seq >= len(game):  # a game ended: go on with its moves again, renumbered
                        rec = {**game[1 + seq % (len(game) - 2)], "seq": seq}
                    else:
                        rec = game[seq]
                    tables.start_soon(store.append, sid, seq, [rec])
                    nxt[sid] = seq + 1
                    records += 1
        Wal.close = lambda self: None  # type: ignore[method-assign]  # a crash: no checkpoint
        await store.aclose()
    return records


def _time_open(root: Path) -> tuple[float, float, int]:
    start, cpu = time.perf_counter(), time.process_time()
    store = FileStore(root, "batch", exclusive=True)
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert store.recovery is not None
    assert segment_numbers(root / "wal") == []
    return took, cpu, store.recovery.appended


async def _appends(root: Path, sessions: int, seconds: float, wal: bool) -> dict[str, Any]:
    """``--appends``: the store's append figures (see the module docstring)."""
    game = _games(1)[0]
    store = FileStore(root, "batch", exclusive=True, wal=wal)
    times: list[float] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        for i in range(sessions):
            await store.create(f"t{i:05d}", [game[0]])
        start, cpu = time.perf_counter(), time.process_time()
        stop = start + seconds

        async def table(sid: str) -> None:
            seq = 1
            while time.perf_counter() < stop:
                rec = {**game[1 + seq % (len(game) - 2)], "seq": seq}
                sent = time.perf_counter()
                await store.append(sid, seq, [rec])
                times.append(time.perf_counter() - sent)
                seq += 1

        async with trio.open_nursery() as tables:
            for i in range(sessions):
                tables.start_soon(table, f"t{i:05d}")
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        stats = store.statistics()
        await store.aclose()
    times.sort()
    n = len(times)
    return {
        "sessions": sessions,
        "wal": wal,
        "appends": n,
        "appends_per_s": round(n / wall),
        "cpu_us_per_append": round(cpu / n * 1e6, 1),
        "p50_ms": round(times[n // 2] * 1e3, 2),
        "p99_ms": round(times[int(n * 0.99)] * 1e3, 2),
        "max_ms": round(times[-1] * 1e3, 1),
        "batches": stats.batches,
        "fsyncs": stats.fsyncs,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the measurement and print its JSON object; exit status 0."""
    p = argparse.ArgumentParser(prog="python -m tools.wal_bench", description=__doc__)
    p.add_argument("--mib", type=float, default=16.0, help="the log's size (MiB; default 16)")
    p.add_argument("--sessions", type=int, default=100, help="sessions written (default 100)")
    p.add_argument("--appends", type=float, metavar="SECONDS", help="measure appends instead")
    p.add_argument("--no-wal", action="store_true", help="with --appends: file by file")
    args = p.parse_args(argv)
    if args.appends is not None:
        with tempfile.TemporaryDirectory() as tmp:
            out = trio.run(_appends, Path(tmp), args.sessions, args.appends, not args.no_wal)
        print(orjson.dumps(out).decode())
        return 0
    result: dict[str, Any] = {"mib": args.mib, "sessions": args.sessions}
    real_close = Wal.close
    with tempfile.TemporaryDirectory() as tmp:
        for case in ("intact", "lost"):
            root = Path(tmp) / case
            Wal.close = real_close  # type: ignore[method-assign]
            result["records"] = trio.run(_write, root, args.sessions, args.mib)
            Wal.close = real_close  # type: ignore[method-assign]
            result["wal_bytes"] = sum(p.stat().st_size for p in (root / "wal").iterdir())
            if case == "lost":
                for path in (root / "sessions").glob("*.jsonl"):
                    data = path.read_bytes()
                    path.write_bytes(data[: data.index(b"\n") + 1])
            took, cpu, appended = _time_open(root)
            result[f"{case}_s"] = round(took, 3)
            result[f"{case}_cpu_s"] = round(cpu, 3)
            result[f"{case}_appended"] = appended
    print(orjson.dumps(result).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
