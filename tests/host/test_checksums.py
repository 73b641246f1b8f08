"""Every record is checksummed: a flipped bit anywhere in a log written by real play of the three
games is ``session_damaged`` naming the seq of its line — never a log that loads with altered
records, nor a flip taken for a torn tail (the last line's newline and first bytes included).
Logs written before checksums still load; a torn tail is still told from damage."""

from __future__ import annotations

import bisect
import functools
import random
import shutil
import tempfile
from pathlib import Path

import pytest
import trio

from host.plugins.registry import load_registry
from host.store.base import CorruptLog, body_of
from host.store.file import FileStore, fold_log, read_log, scan_bytes, scan_log
from host.table.engine import Record
from host.testing import start_host
from tools.autoplay import play_session

GAMES = {"crazy-eights": 2, "around-the-world": 2, "seven-twenty-seven": 4}
PER_GAME = 2


registry = functools.cache(load_registry)


@functools.cache
def played() -> tuple[Path, dict[str, str]]:
    """A data dir with ``PER_GAME`` ended sessions of each game, played over TCP by clients
    making random legal moves against a host (one bot seat each); session id -> game."""
    data = Path(tempfile.mkdtemp(prefix="gamehost-flips-"))
    games: dict[str, str] = {}

    async def play() -> None:
        async with trio.open_nursery() as n:
            running = await start_host(n, data, registry())
            rng = random.Random(17)
            for game, seats in GAMES.items():
                for _ in range(PER_GAME):
                    sid, _ = await play_session("127.0.0.1", running.port, game, seats, 1, rng)
                    games[sid] = game
            running.host.request_shutdown()

    trio.run(play)
    return data, games


def logs() -> dict[str, bytes]:
    data, games = played()
    return {sid: (data / "sessions" / f"{sid}.jsonl").read_bytes() for sid in games}


def load_like_a_host(path: Path, data: bytes):
    """Read ``data`` as the host loads a log, and fold it with the game its header names
    (an unknown game is what ``unknown_session`` came from)."""
    scan = scan_bytes(path, data)
    engine = registry().engines.get(scan.records[0].get("game"))
    if engine is None:
        raise LookupError(f"no game {scan.records[0].get('game')!r}")
    fold_log(path, engine, [Record.from_json(dict(r)) for r in scan.records])
    return scan


def test_real_logs_carry_a_checksum_on_every_line():
    for data in logs().values():
        lines = data.splitlines()
        assert len(lines) > 20
        assert all(line.startswith(b'{"crc":"') for line in lines)
        assert scan_bytes(Path("x"), data).unchecked == 0


def test_a_flipped_bit_anywhere_is_damage_at_its_seq():
    """In every log: each bit of the first ``token_hash`` (a flip there locked a player out),
    each bit of the last line's first 8 bytes and of its newline (a flip there once looked like
    a torn tail, so an acknowledged record was cut silently), one random bit of each byte of the
    last line, and one random bit of 200 random bytes of the header line and of 500 random
    bytes anywhere. None loads, none is taken for a torn tail."""
    rng = random.Random(20261202)
    failures: list[str] = []
    damaged = 0
    for sid, data in logs().items():
        starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A][:-1]
        token = data.index(b'"token_hash":"') + len(b'"token_hash":"')
        flips = {(byte, bit) for byte in range(token, token + 64) for bit in range(8)}
        edges = [*range(starts[-1], starts[-1] + 8), len(data) - 1]
        flips.update((byte, bit) for byte in edges for bit in range(8))
        flips.update((byte, rng.randrange(8)) for byte in range(starts[-1], len(data)))
        flips.update((rng.randrange(starts[1]), rng.randrange(8)) for _ in range(200))
        flips.update((rng.randrange(len(data)), rng.randrange(8)) for _ in range(500))
        for byte, bit in sorted(flips):
            seq = bisect.bisect_right(starts, byte) - 1
            flipped = data[:byte] + bytes([data[byte] ^ (1 << bit)]) + data[byte + 1 :]
            where = f"{sid}: byte {byte} (seq {seq}) bit {bit}"
            try:
                scan = load_like_a_host(Path(sid), flipped)
            except CorruptLog as exc:
                damaged += 1
                if exc.seq != seq:
                    failures.append(f"{where}: damage named seq {exc.seq}")
                continue
            except Exception as exc:  # noqa: BLE001 - anything else is a failure to report
                failures.append(f"{where}: {type(exc).__name__}: {exc}")
                continue
            what = "taken for a torn tail" if scan.torn_at is not None else "loaded silently"
            failures.append(f"{where}: {what}")
    assert not failures, f"{len(failures)} flips not told: {failures[:10]}"
    assert damaged > 5_000


async def test_a_host_answers_session_damaged_for_a_flipped_token_hash_or_renamed_key(tmp_path):
    """The two flips the issue found: a ``token_hash`` (which locked a player out) and a
    header key renamed (``game`` to ``gama``: ``unknown_session`` before checksums)."""
    data, games = played()
    one, two = sorted(games)[:2]
    (tmp_path / "sessions").mkdir(mode=0o700)
    for sid, old, new in ((one, b'"token_hash":"', b'"token_hash":"'), (two, b'"game"', b'"gama"')):
        raw = (data / "sessions" / f"{sid}.jsonl").read_bytes()
        at = raw.index(old) + len(old)
        if old == new:  # flip one bit of the hash's first hex digit
            raw = raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1 :]
        else:
            raw = raw.replace(old, new, 1)
        (tmp_path / "sessions" / f"{sid}.jsonl").write_bytes(raw)
    token_seq = next(
        i
        for i, line in enumerate((tmp_path / "sessions" / f"{one}.jsonl").read_bytes().split(b"\n"))
        if b'"token_hash":"' in line
    )
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry())
        c = await running.client()
        for sid, seq in ((one, token_seq), (two, 0)):
            for op, extra in (("view", {}), ("watch", {}), ("resume", {"token": "x"})):
                r = await c.request(op, session=sid, **extra)
                assert r["error"]["code"] == "session_damaged", (sid, op, r)
                assert f"at seq {seq}: " in r["error"]["message"]
                assert "checksum" in r["error"]["message"]
        running.host.request_shutdown()


def test_a_log_written_before_checksums_loads_and_new_appends_carry_one(tmp_path):
    sid, data = next(iter(logs().items()))
    old = b"".join(body_of(line) + b"\n" for line in data.splitlines())  # no crc: as before
    (tmp_path / "sessions").mkdir(mode=0o700)
    path = tmp_path / "sessions" / f"{sid}.jsonl"
    path.write_bytes(old)
    assert read_log(path) == scan_bytes(path, data).records
    assert scan_log(path).unchecked == len(data.splitlines())

    async def append() -> None:
        store = FileStore(tmp_path)
        async with trio.open_nursery() as n:
            await n.start(store.run)
            n_old = len(store.load(sid))
            await store.append(sid, n_old, [{"seq": n_old, "type": "note", "text": "new"}])
            await store.aclose()

    trio.run(append)
    lines = path.read_bytes().splitlines()
    assert lines[-1].startswith(b'{"crc":"') and not lines[-2].startswith(b'{"crc":"')
    assert read_log(path)[-1]["text"] == "new"
    flipped = bytearray(path.read_bytes())
    flipped[-5] ^= 0x02  # in the new, checksummed record
    path.write_bytes(bytes(flipped))
    with pytest.raises(CorruptLog, match=f"seq {len(lines) - 1}: .*checksum"):
        read_log(path)


def test_a_torn_tail_is_still_cut_and_a_complete_bad_last_line_is_damage(tmp_path):
    sid, data = next(iter(logs().items()))
    path = tmp_path / f"{sid}.jsonl"
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: last + 30])  # a crash in the middle of the last append
    records = read_log(path, repair=True)
    assert len(records) == data.count(b"\n") - 1 and path.read_bytes() == data[:last]
    bad = bytearray(data)
    bad[last + 40] ^= 0x01  # the last line is whole (with its newline): damage, not torn
    path.write_bytes(bytes(bad))
    with pytest.raises(CorruptLog, match="checksum"):
        read_log(path, repair=True)
    assert path.read_bytes() == bytes(bad)  # and nothing was cut


@pytest.fixture(scope="module", autouse=True)
def _cleanup():
    yield
    if played.cache_info().currsize:
        shutil.rmtree(played()[0], ignore_errors=True)
        played.cache_clear()
