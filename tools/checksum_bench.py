"""``python -m tools.checksum_bench``: what the per-record checksum costs (BENCHMARKS.md).

Takes the records of whole games of Crazy Eights (played locally, seeded) and measures, best of
5 rounds in CPU time of this process:

- encoding a record for an append with its checksum (``encode_lines``) and without it (the
  orjson line a log held before checksums);
- reading a log with a checksum on every line (``scan_bytes``: each line checked, then parsed)
  and the same log with its checksums taken out (lines as before checksums: parsed only);
- appending one record at a time through a ``FileStore`` (``--fsync never``, so the disk does not
  hide the CPU) with checksums (as it writes now).

Prints one JSON object: microseconds per record for each, and the checksum's share.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import trio

from host.plugins.registry import load_registry
from host.store.base import body_of, encode_lines
from host.store.file import FileStore, scan_bytes
from host.table.local import play_local


def _records(n: int) -> list[dict[str, Any]]:
    engine = load_registry().engines["crazy-eights"]
    out: list[dict[str, Any]] = []
    seed = 0
    while len(out) < n:
        _, game = play_local(engine.game, {}, 3, seed=seed.to_bytes(32, "big"), engine=engine)
        out.extend(r.to_json() for r in game)
        seed += 1
    return out[:n]


def _best(fn: Callable[[], object], rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def _old_lines(records: list[dict[str, Any]]) -> list[bytes]:
    return [
        orjson.dumps({"seq": r["seq"], "ts": "x", **r}, option=orjson.OPT_APPEND_NEWLINE)
        for r in records
    ]


async def _appends(folder: Path, records: list[dict[str, Any]]) -> float:
    store = FileStore(folder, "never")
    header = {**records[0], "seq": 0}
    async with trio.open_nursery() as n:
        await n.start(store.run)
        await store.create("bench", [header])
        start = time.process_time()
        for seq, r in enumerate(records[1:], 1):
            await store.append("bench", seq, [{**r, "seq": seq}])
        took = time.process_time() - start
        await store.aclose()
    return took


def main(argv: list[str] | None = None) -> int:
    """Run the measurement and print the figures."""
    p = argparse.ArgumentParser(prog="python -m tools.checksum_bench")
    p.add_argument("--records", type=int, default=50_000)
    args = p.parse_args(argv)
    records = _records(args.records)
    n = len(records)
    # one log of one session's worth of valid seqs: the first game's header, then every record
    kept = [records[0]] + [r for r in records[1:] if r["type"] != "header"]
    log_records = [{**r, "seq": i} for i, r in enumerate(kept)]
    new_log = b"".join(encode_lines(log_records))
    old_log = b"".join(body_of(line) + b"\n" for line in new_log.splitlines())
    m = len(log_records)
    enc_new = _best(lambda: encode_lines(records)) / n * 1e6
    enc_old = _best(lambda: _old_lines(records)) / n * 1e6
    read_new = _best(lambda: scan_bytes(Path("bench"), new_log)) / m * 1e6
    read_old = _best(lambda: scan_bytes(Path("bench"), old_log)) / m * 1e6
    with tempfile.TemporaryDirectory() as tmp:
        k = min(m, 5_000)
        append = trio.run(_appends, Path(tmp), log_records[:k]) / (k - 1) * 1e6
    result = {
        "records": n,
        "bytes_per_record": round(len(new_log) / m, 1),
        "checksum_bytes_per_record": round((len(new_log) - len(old_log)) / m, 1),
        "encode_us": round(enc_new, 2),
        "encode_without_checksum_us": round(enc_old, 2),
        "read_us": round(read_new, 2),
        "read_without_checksum_us": round(read_old, 2),
        "append_us": round(append, 1),
        "encode_share": round((enc_new - enc_old) / enc_new, 3),
        "read_share": round((read_new - read_old) / read_new, 3),
    }
    print(orjson.dumps(result).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
