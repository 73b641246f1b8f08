"""``gamehost bench``: a load generator with bot clients.

Starts a host in its own process (``gamehost serve --port 0``; or targets ``--port`` of a running
one), then plays ``--sessions`` sessions at once: in each, one TCP client plays a seat with random
legal actions and host bots fill the others. Reports actions per second (every action, bots'
included, as seen in the pushes), the round trip of the client's actions (send ``act`` -> reply)
at p50 / p99, and the host's peak memory (VmHWM, when it started the host).
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
import trio

from tools.autoplay import play_session

__all__ = ["add_parser", "main"]


def serve_command(fsync: str, data_dir: str) -> list[str]:
    """The command line of a host on any free port that logs JSON (``listening`` has the port)."""
    return [
        sys.executable,
        "-m",
        "tools.cli",
        "serve",
        "--port",
        "0",
        "--data-dir",
        data_dir,
        "--fsync",
        fsync,
        "--log-format",
        "json",
        "--log-level",
        "info",
    ]


def listening_port(line: bytes) -> int | None:
    """The port of a host's ``listening`` log line, None for any other line."""
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return int(msg["port"]) if isinstance(msg, dict) and msg.get("event") == "listening" else None


def _start_host(fsync: str, data_dir: str) -> tuple[subprocess.Popen[bytes], int]:
    proc = subprocess.Popen(serve_command(fsync, data_dir), stderr=subprocess.PIPE)
    assert proc.stderr is not None
    for line in proc.stderr:
        port = listening_port(line)
        if port is not None:
            # stop reading: let the host write its log to a sink so it never blocks on a pipe
            _drain_in_thread(proc)
            return proc, port
    raise RuntimeError("the host exited before listening")


def _drain_in_thread(proc: subprocess.Popen[bytes]) -> None:
    """Read and drop the rest of the host's stderr in a thread."""
    import threading

    def drain() -> None:
        assert proc.stderr is not None
        for _ in proc.stderr:
            pass

    threading.Thread(target=drain, daemon=True).start()


def _peak_rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def run_bench(args: argparse.Namespace, port: int) -> dict[str, float]:
    rng = random.Random(args.seed)
    seats = args.seats
    trips: list[float] = []
    actions = 0
    t0 = time.perf_counter()
    async with trio.open_nursery() as n:

        async def one() -> None:
            nonlocal actions
            _, results = await play_session(
                "127.0.0.1", port, args.game, seats, seats - 1, random.Random(rng.random())
            )
            for r in results:
                trips.extend(r.round_trips)
                actions += r.actions_seen

        for _ in range(args.sessions):
            n.start_soon(one)
    took = time.perf_counter() - t0
    trips.sort()
    q = statistics.quantiles(trips, n=100) if len(trips) > 1 else [0.0] * 99
    return {
        "sessions": args.sessions,
        "seconds": took,
        "actions": actions,
        "actions_per_s": actions / took,
        "client_actions": len(trips),
        "rtt_p50_ms": q[49] * 1000,
        "rtt_p99_ms": q[98] * 1000,
    }


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``bench`` sub-command."""
    p = sub.add_parser("bench", help="load a host with concurrent bot sessions and measure it")
    p.add_argument("--sessions", type=int, default=100)
    p.add_argument("--game", default="crazy-eights")
    p.add_argument("--seats", type=int, default=4, help="seats per session (one is a client)")
    p.add_argument("--fsync", choices=["always", "batch", "never"], default="batch")
    p.add_argument("--port", type=int, help="bench a running host instead of starting one")
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run the benchmark and print its figures (also as one JSON line)."""
    proc = None
    with tempfile.TemporaryDirectory(prefix="gamehost-bench-") as tmp:
        if args.port is None:
            proc, port = _start_host(args.fsync, tmp)
        else:
            port = args.port
        try:
            result = trio.run(run_bench, args, port)
        finally:
            if proc is not None:
                result_rss = _peak_rss_mib(proc.pid)
                proc.terminate()
                proc.wait(timeout=30)
        if proc is not None and result_rss is not None:
            result["host_peak_rss_mib"] = result_rss
    print(
        f"{args.sessions} concurrent {args.game} sessions ({args.seats} seats, 1 client each),"
        f" fsync={args.fsync}: {result['actions']} actions in {result['seconds']:.2f} s ="
        f" {result['actions_per_s']:.0f} actions/s; client act round trip p50"
        f" {result['rtt_p50_ms']:.2f} ms, p99 {result['rtt_p99_ms']:.2f} ms"
        + (
            f"; host peak RSS {result['host_peak_rss_mib']:.0f} MiB"
            if "host_peak_rss_mib" in result
            else ""
        )
    )
    print(orjson.dumps(result).decode())
    return 0
