"""The file store's write-ahead log (``host.store.wal``): one sync per batch for every session,
session files byte for byte as without it, segments retired once their records are durable, and
recovery after a crash at any point — a writer process killed at random, killed between the
log's sync and the session files' writes, or during a checkpoint, with the session files' unsynced
tails then thrown away as a power cut would — losing no acknowledged append, never duplicating
one, changing nothing when run again; torn tails dropped, damage refused naming the segment."""

from __future__ import annotations

import errno
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host.store import wal as wal_module
from host.store.base import Conflict
from host.store.file import DataDirInUse, FileStore, read_log
from host.store.wal import (
    MAGIC,
    Wal,
    WalDamaged,
    recover,
    scan_segment,
    segment_name,
    segment_numbers,
)
from tests.host.test_store import rec
from tests.host.test_store_descriptors import REAL_FSYNC, REAL_WRITE, make_logs, target

ROOT = Path(__file__).resolve().parents[2]


def segments(root: Path) -> list[Path]:
    return [root / "wal" / segment_name(n) for n in segment_numbers(root / "wal")]


def wal_entries(root: Path) -> list[wal_module.WalEntry]:
    paths = segments(root)
    out = []
    for i, path in enumerate(paths):
        out += scan_segment(path, path.read_bytes(), newest=i == len(paths) - 1).entries
    return out


def crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, a store's end leaves its write-ahead log as a crash would once the
    checkpoint thread is done with what it was given: the open segment and any left stay,
    nothing more is synced."""

    def close(self: Wal) -> None:
        if self._checkpointer is not None:
            self._checkpoints.put(None)
            self._checkpointer.join()
            self._checkpointer = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    monkeypatch.setattr(Wal, "close", close)


def power_cut(root: Path, rng: random.Random) -> dict[str, int]:
    """Throw away what a power cut may take from the session files: for each session the
    write-ahead log names, every line from a random one at or after its first seq there (the
    lines before it were synced by a checkpoint or a create), sometimes leaving half a line.
    Returns each cut session's records left."""
    first: dict[str, int] = {}
    for entry in wal_entries(root):
        first.setdefault(entry.session, entry.seq)
    left = {}
    for sid, seq in first.items():
        path = root / "sessions" / f"{sid}.jsonl"
        data = path.read_bytes()
        lines = data.split(b"\n")[:-1]
        keep = rng.randint(min(seq, len(lines)), len(lines))
        cut = sum(len(line) + 1 for line in lines[:keep])
        if keep < len(lines) and rng.random() < 0.5:
            cut += rng.randint(1, len(lines[keep]))  # a torn line
        path.write_bytes(data[:cut])
        left[sid] = keep
    return left


def files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "sessions").glob("*.jsonl"))}


# -- the format and the one sync ----------------------------------------------------------------
async def test_a_batch_of_many_sessions_costs_one_sync_of_the_log(tmp_path, monkeypatch):
    ids = await make_logs(tmp_path, 50)
    store = FileStore(tmp_path, "batch", exclusive=True)
    for sid in ids:
        store.load(sid)
    synced: list[str | None] = []

    def sync(fd: int) -> None:
        synced.append(target(fd))
        REAL_FSYNC(fd)

    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.append(ids[0], 1, [rec(1)])  # opens the first segment
        monkeypatch.setattr(os, "fdatasync", sync)
        monkeypatch.setattr(os, "fsync", sync)
        before = store.statistics()
        async with trio.open_nursery() as appenders:
            for sid in ids:
                seq = 2 if sid == ids[0] else 1
                appenders.start_soon(store.append, sid, seq, [rec(seq)])
        after = store.statistics()
        assert after.batches - before.batches == 1
        assert after.fsyncs - before.fsyncs == 1
        assert synced == [str(segments(tmp_path)[0])]  # the log, not one of the 50 files
        await store.aclose()
    assert segments(tmp_path) == []  # the last checkpoint retired every segment


async def test_session_files_hold_the_same_bytes_with_and_without_the_log(tmp_path):
    async def write(root: Path, wal: bool) -> dict[str, bytes]:
        store = FileStore(root, "batch", wal=wal)
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run)
            assert (store.wal is not None) is wal
            await store.create("a", [{**rec(0), "ts": "t"}, {**rec(1, x=[1, "é"]), "ts": "t"}])
            await store.append("a", 2, [{**rec(2, y={"z": None}), "ts": "t"}])
            await store.append(
                "a", 3, [{**rec(3), "ts": "t"}, {**rec(4, big="x" * 5000), "ts": "t"}]
            )
            await store.aclose()
        return files(root)

    assert await write(tmp_path / "wal", True) == await write(tmp_path / "files", False)


async def test_a_log_line_names_its_session_and_seq_and_holds_the_session_files_line(
    tmp_path, monkeypatch
):
    crash(monkeypatch)
    store = FileStore(tmp_path, "batch", exclusive=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.create("s1", [rec(0)])
        await store.append("s1", 1, [rec(1, x=1), rec(2)])
        store.truncate("s1", 2)
        await store.aclose()
    (path,) = segments(tmp_path)
    data = path.read_bytes()
    assert data.startswith(MAGIC)
    lines = (tmp_path / "sessions" / "s1.jsonl").read_bytes().split(b"\n")
    entries = scan_segment(path, data, newest=True).entries
    assert [(e.session, e.seq) for e in entries] == [("s1", 1), ("s1", 2), ("s1", 2)]
    assert entries[0].line == lines[1]
    assert entries[2].line is None  # the cut
    assert data.splitlines()[-1].endswith(b" s1 2 cut")


async def test_reads_see_an_append_as_soon_as_it_is_acknowledged(tmp_path):
    store = FileStore(tmp_path, "batch", exclusive=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.create("s1", [rec(0)])
        for seq in range(1, 30):
            await store.append("s1", seq, [rec(seq)])
            assert await store.record_count("s1") == seq + 1
            assert [r["seq"] for r in await store.read_range("s1", seq, seq + 1)] == [seq]
            assert (await store.read("s1", seq - 1))[0]["seq"] == seq
            assert [r["seq"] for r in read_log(store.path("s1"))][-1] == seq
        await store.aclose()


async def test_never_writes_no_log(tmp_path):
    store = FileStore(tmp_path, "never", exclusive=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.create("s1", [rec(0)])
        await store.append("s1", 1, [rec(1)])
        assert store.wal is None
        assert segments(tmp_path) == []
        await store.aclose()


async def test_always_syncs_the_log_once_per_append(tmp_path):
    ids = await make_logs(tmp_path, 5)
    store = FileStore(tmp_path, "always", exclusive=True)
    for sid in ids:
        store.load(sid)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.append(ids[0], 1, [rec(1)])
        before = store.statistics()
        async with trio.open_nursery() as appenders:
            for sid in ids[1:]:
                appenders.start_soon(store.append, sid, 1, [rec(1)])
        after = store.statistics()
        assert after.fsyncs - before.fsyncs == 4
        await store.aclose()


async def test_a_store_beside_the_host_writes_file_by_file(tmp_path):
    host = FileStore(tmp_path, "batch", exclusive=True)
    tool = FileStore(tmp_path, "batch")
    async with trio.open_nursery() as nursery:
        await nursery.start(host.run)
        await nursery.start(tool.run)
        assert host.wal is not None and tool.wal is None
        await tool.create("t", [rec(0)])
        await tool.append("t", 1, [rec(1)])
        await host.aclose()
        await tool.aclose()
    alone = FileStore(tmp_path, "batch")  # a tool's store on a free data dir holds it while it runs
    async with trio.open_nursery() as nursery:
        await nursery.start(alone.run)
        assert alone.wal is not None
        with pytest.raises(DataDirInUse):
            FileStore(tmp_path, exclusive=True)
        await alone.aclose()
    FileStore(tmp_path, exclusive=True)  # let go when it ended


# -- segments and checkpoints -------------------------------------------------------------------
async def test_full_segments_are_retired_once_their_session_files_are_synced(tmp_path, monkeypatch):
    ids = await make_logs(tmp_path, 3)
    store = FileStore(tmp_path, "batch", exclusive=True, segment_bytes=2000)
    for sid in ids:
        store.load(sid)
    events: list[tuple[str, str | None]] = []
    real_unlink = os.unlink

    def sync(fd: int) -> None:
        events.append(("sync", target(fd)))
        REAL_FSYNC(fd)

    def unlink(path: Any, *args: Any, **kw: Any) -> None:
        events.append(("retire", os.fspath(path)))
        real_unlink(path, *args, **kw)

    monkeypatch.setattr(os, "fdatasync", sync)
    monkeypatch.setattr(os, "unlink", unlink)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        for seq in range(1, 60):
            for sid in ids:
                await store.append(sid, seq, [rec(seq, pad="x" * 40)])
        await store.aclose()
    retired = [i for i, e in enumerate(events) if e[0] == "retire" and e[1].endswith(".seg")]
    assert len(retired) > 10
    for i in retired:  # before each segment went, every session file was synced after its writes
        assert {p for kind, p in events[:i] if kind == "sync"} >= {
            str(store.path(sid)) for sid in ids
        }
    assert segments(tmp_path) == []
    for sid in ids:
        assert [r["seq"] for r in read_log(store.path(sid))] == list(range(60))


async def test_recovery_retires_the_segments_left_and_the_log_numbers_on(tmp_path):
    (tmp_path / "wal").mkdir()
    for n in (7, 8):
        (tmp_path / "wal" / segment_name(n)).write_bytes(MAGIC)
    store = FileStore(tmp_path, exclusive=True)
    assert store.recovery is not None and store.recovery.segments == 2
    assert segments(tmp_path) == []
    assert store.wal is not None
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.create("s1", [rec(0)])
        await store.append("s1", 1, [rec(1)])
        assert [p.name for p in segments(tmp_path)] == [segment_name(9)]
        await store.aclose()


# -- a crash in-process, then a power cut --------------------------------------------------------
async def test_recovery_rebuilds_what_a_power_cut_took_from_the_session_files(
    tmp_path, monkeypatch
):
    crash(monkeypatch)
    ids = await make_logs(tmp_path, 4)
    store = FileStore(tmp_path, "batch", exclusive=True)
    async with trio.open_nursery() as nursery:
        for sid in ids:
            store.load(sid)
        await nursery.start(store.run)
        for seq in range(1, 40):
            async with trio.open_nursery() as appenders:
                for sid in ids:
                    appenders.start_soon(store.append, sid, seq, [rec(seq, v=seq)])
        await store.aclose()
    before = files(tmp_path)
    for sid in ids:  # every line since the header lost, and half a line left
        data = before[f"{sid}.jsonl"]
        (tmp_path / "sessions" / f"{sid}.jsonl").write_bytes(data[: data.index(b"\n") + 30])
    again = FileStore(tmp_path, "batch", exclusive=True)
    assert again.recovery is not None and again.recovery.appended > 0
    assert files(tmp_path) == before
    assert segments(tmp_path) == []


async def test_a_truncation_survives_recovery_and_what_it_cut_stays_cut(tmp_path, monkeypatch):
    crash(monkeypatch)
    store = FileStore(tmp_path, "batch", exclusive=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.create("s1", [rec(0)])
        await store.append("s1", 1, [rec(1), rec(2), rec(3)])
        old = store.path("s1").read_bytes()
        store.truncate("s1", 2)  # a half-written cause dropped
        await store.aclose()
    kept = files(tmp_path)
    store.path("s1").write_bytes(old)  # as if the cut had not reached the disk
    assert recover(tmp_path / "wal", tmp_path / "sessions", apply=False).dropped == 2
    again = FileStore(tmp_path, "batch", exclusive=True)
    assert again.recovery is not None and again.recovery.entries == 4
    assert files(tmp_path) == kept
    assert [r["seq"] for r in again.load("s1")] == [0, 1]


async def test_an_append_after_a_truncation_replaces_the_old_records_on_recovery(
    tmp_path, monkeypatch
):
    crash(monkeypatch)
    store = FileStore(tmp_path, "batch", exclusive=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.create("s1", [rec(0)])
        await store.append("s1", 1, [rec(1, old=True), rec(2, old=True), rec(3, old=True)])
        store.truncate("s1", 2)
        await store.append("s1", 2, [rec(2, new=True)])
        await store.aclose()
    want = files(tmp_path)
    path = tmp_path / "sessions" / "s1.jsonl"
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(lines[:2]) + b"\n")  # the new record lost
    FileStore(tmp_path, "batch", exclusive=True)
    assert files(tmp_path) == want
    assert [r.get("new") for r in read_log(path)] == [None, None, True]


def test_a_session_line_that_differs_from_the_log_is_rewritten_from_it(tmp_path):
    _stage(tmp_path, {"s1": [0, 1, 2]}, [("s1", 1), ("s1", 2)])
    path = tmp_path / "sessions" / "s1.jsonl"
    good = path.read_bytes()
    lines = good.split(b"\n")
    lines[1] = lines[1].replace(b'"v":1', b'"v":7')  # damaged: no longer its checksum
    path.write_bytes(b"\n".join(lines))
    report = recover(tmp_path / "wal", tmp_path / "sessions")
    assert (report.appended, report.dropped) == (2, 2)
    assert path.read_bytes() == good


def test_a_session_file_ahead_of_the_log_is_left_as_it_is(tmp_path):
    _stage(tmp_path, {"s1": [0, 1, 2, 3]}, [("s1", 1), ("s1", 2)])  # 3: its log line was lost
    before = files(tmp_path)
    report = recover(tmp_path / "wal", tmp_path / "sessions")
    assert (report.appended, report.dropped) == (0, 0)
    assert files(tmp_path) == before


def test_a_session_file_behind_what_was_durable_is_refused(tmp_path):
    _stage(tmp_path, {"s1": [0]}, [("s1", 3)])
    with pytest.raises(WalDamaged, match="s1: its log ends at seq 0"):
        recover(tmp_path / "wal", tmp_path / "sessions")


def test_a_session_the_log_names_but_whose_file_is_gone_is_skipped(tmp_path):
    _stage(tmp_path, {"s1": [0]}, [("s1", 1), ("gone", 5)])
    report = recover(tmp_path / "wal", tmp_path / "sessions")
    assert report.missing == ["gone"]
    assert [r["seq"] for r in read_log(tmp_path / "sessions" / "s1.jsonl")] == [0, 1]


def _stage(root: Path, have: dict[str, list[int]], logged: list[tuple[str, int]]) -> Path:
    """Session files holding records ``have`` and one segment holding ``logged`` (records
    ``{"v": seq}`` of the same timestamp, so a line is the same in both)."""
    from host.store.base import encode_lines
    from host.store.wal import wal_lines

    (root / "sessions").mkdir(parents=True, exist_ok=True)
    (root / "wal").mkdir(exist_ok=True)

    def line(seq: int) -> bytes:
        (out,) = encode_lines([{**(rec(0) if seq == 0 else rec(seq, v=seq)), "ts": "t"}])
        return out

    for sid, seqs in have.items():
        (root / "sessions" / f"{sid}.jsonl").write_bytes(b"".join(line(s) for s in seqs))
    path = root / "wal" / segment_name(1)
    path.write_bytes(MAGIC + b"".join(wal_lines(sid, seq, [line(seq)]) for sid, seq in logged))
    return path


# -- torn tails and damage -------------------------------------------------------------------
def test_a_torn_last_line_of_the_newest_segment_is_dropped(tmp_path):
    path = _stage(tmp_path, {"s1": [0]}, [("s1", 1), ("s1", 2)])
    data = path.read_bytes()
    last = data.rindex(b"\n", 0, len(data) - 1) + 1
    for torn, at, kept in [
        (data[:-7], last, 1),  # no newline
        (data[:-20] + b"\n", last, 1),  # a newline, but not its checksum
        (data + b"0000", len(data), 2),
        (data + b"\0" * 100, len(data), 2),
        (MAGIC[:5], 0, 0),  # a segment begun, its first line cut
    ]:
        scan = scan_segment(path, torn, newest=True)
        assert (scan.torn_at, len(scan.entries)) == (at, kept)
    path.write_bytes(data[:-7])
    report = recover(tmp_path / "wal", tmp_path / "sessions")
    assert (report.torn, report.appended) == (1, 1)
    assert [r["seq"] for r in read_log(tmp_path / "sessions" / "s1.jsonl")] == [0, 1]


@pytest.mark.parametrize("where", ["first", "middle"])
def test_a_damaged_line_is_refused_naming_the_segment_and_changes_nothing(tmp_path, where):
    path = _stage(tmp_path, {"s1": [0]}, [("s1", 1), ("s1", 2), ("s1", 3)])
    data = bytearray(path.read_bytes())
    at = len(MAGIC) + (20 if where == "first" else data.index(b" s1 2 ") + 30)
    data[at] ^= 0x01  # one flipped bit
    path.write_bytes(bytes(data))
    before = files(tmp_path)
    with pytest.raises(WalDamaged, match=f"{path.name}: byte .*does not match its checksum"):
        FileStore(tmp_path, exclusive=True)
    assert files(tmp_path) == before
    assert path.exists()
    (tmp_path / "wal" / path.name).unlink()  # whoever looks at it decides; the lock was let go
    FileStore(tmp_path, exclusive=True)


def test_a_torn_line_in_an_older_segment_is_damage(tmp_path):
    path = _stage(tmp_path, {"s1": [0]}, [("s1", 1)])
    path.write_bytes(path.read_bytes()[:-5])
    (tmp_path / "wal" / segment_name(2)).write_bytes(MAGIC)
    with pytest.raises(WalDamaged, match="not the newest"):
        recover(tmp_path / "wal", tmp_path / "sessions")


def test_a_segment_that_is_not_one_is_refused(tmp_path):
    (tmp_path / "wal").mkdir()
    (tmp_path / "wal" / segment_name(1)).write_bytes(b"something else\n")
    with pytest.raises(WalDamaged, match="not a write-ahead log segment"):
        recover(tmp_path / "wal", tmp_path / "sessions")


def test_a_gap_in_a_session_is_refused(tmp_path):
    _stage(tmp_path, {"s1": [0, 1]}, [("s1", 1), ("s1", 3)])
    with pytest.raises(WalDamaged, match="seq 3 follows seq 1"):
        recover(tmp_path / "wal", tmp_path / "sessions")


def test_a_host_refused_for_a_damaged_log_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    from tools.cli import main

    monkeypatch.setattr("host.cli.logs.configure", lambda *args, **kw: None)
    path = _stage(tmp_path, {"s1": [0]}, [("s1", 1), ("s1", 2)])
    data = bytearray(path.read_bytes())
    data[len(MAGIC) + 3] ^= 0x04
    path.write_bytes(bytes(data))
    assert main(["serve", "--port", "0", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"gamehost serve: error: {path}: byte {len(MAGIC)}: a line that does not match" in err


# -- failures while writing ------------------------------------------------------------------
@pytest.mark.parametrize("fault", ["write", "half", "sync"])
async def test_a_failed_log_write_or_sync_fails_the_batch_and_is_cut_off(
    tmp_path, monkeypatch, fault
):
    ids = await make_logs(tmp_path, 2)
    store = FileStore(tmp_path, "batch", exclusive=True)
    for sid in ids:
        store.load(sid)
    armed = [False]

    def write(fd: int, data: bytes) -> int:
        if armed[0] and (target(fd) or "").endswith(".seg") and fault in ("write", "half"):
            armed[0] = False
            if fault == "half":
                REAL_WRITE(fd, bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return REAL_WRITE(fd, data)

    def sync(fd: int) -> None:
        if armed[0] and (target(fd) or "").endswith(".seg") and fault == "sync":
            armed[0] = False
            raise OSError(errno.EIO, "Input/output error")
        REAL_FSYNC(fd)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fdatasync", sync)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.append(ids[0], 1, [rec(1)])
        size = segments(tmp_path)[0].stat().st_size
        armed[0] = True
        results = []

        async def one(sid: str) -> None:
            try:
                seq = 2 if sid == ids[0] else 1
                await store.append(sid, seq, [rec(seq)])
                results.append("ok")
            except OSError as exc:
                results.append(exc.errno)

        async with trio.open_nursery() as appenders:
            for sid in ids:
                appenders.start_soon(one, sid)
        assert results == [errno.EIO if fault == "sync" else errno.ENOSPC] * 2
        assert segments(tmp_path)[0].stat().st_size == size  # cut off again
        for sid in ids:  # not open until loaded again, then it carries on
            with pytest.raises(Conflict, match="not open"):
                await store.append(sid, 9, [rec(9)])
        assert [len(store.load(sid)) for sid in ids] == [2, 1]
        await store.append(ids[0], 2, [rec(2)])
        await store.append(ids[1], 1, [rec(1)])
        await store.aclose()
    for sid in ids:
        assert [r["seq"] for r in read_log(store.path(sid))] == list(
            range(3 if sid == ids[0] else 2)
        )


async def test_a_log_that_cannot_be_cut_off_again_fails_every_later_append(tmp_path, monkeypatch):
    (sid,) = await make_logs(tmp_path, 1)
    store = FileStore(tmp_path, "batch", exclusive=True)
    store.load(sid)
    real_truncate = os.ftruncate

    def sync(fd: int) -> None:
        if (target(fd) or "").endswith(".seg"):
            raise OSError(errno.EIO, "Input/output error")
        REAL_FSYNC(fd)

    def ftruncate(fd: int, size: int) -> None:
        if (target(fd) or "").endswith(".seg"):
            raise OSError(errno.EIO, "cannot cut")
        real_truncate(fd, size)

    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.append(sid, 1, [rec(1)])
        monkeypatch.setattr(os, "fdatasync", sync)
        monkeypatch.setattr(os, "ftruncate", ftruncate)
        with pytest.raises(OSError, match="Input/output error"):
            await store.append(sid, 2, [rec(2)])
        monkeypatch.undo()
        store.load(sid)
        with pytest.raises(OSError, match="cannot cut"):  # broken until the store is opened again
            await store.append(sid, 2, [rec(2)])
        await store.aclose()
    again = FileStore(tmp_path, "batch", exclusive=True)  # recovery: the written line is whole
    assert [r["seq"] for r in again.load(sid)] in ([0, 1], [0, 1, 2])


# -- kill -9 at random points ----------------------------------------------------------------
def _kill_rounds(root: Path, seed: int, rounds: int, kills: list[str | None]) -> None:
    """Run the writer process ``rounds`` times on ``root``, each killed (by itself at a
    ``kills`` point, or by this test after a random number of acknowledgements), each kill
    followed by a power cut of the session files; then recover and check every acknowledged
    record is there once, in order, as written."""
    rng = random.Random(seed)
    acked: dict[str, int] = {}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for i in range(rounds):
        kill = kills[i % len(kills)]
        argv = [
            sys.executable,
            "-m",
            "tests.host.wal_writer",
            str(root),
            "5",
            str(rng.getrandbits(32)),
        ]
        proc = subprocess.Popen(
            argv + ([kill] if kill else []), stdout=subprocess.PIPE, cwd=ROOT, env=env
        )
        assert proc.stdout is not None
        stop_after = rng.randint(5, 300) if kill is None else 5000
        seen = 0
        for line in proc.stdout:
            if not line.startswith(b"ack "):
                continue  # the store's own log lines
            _, sid, seq = line.split()
            acked[sid.decode()] = max(acked.get(sid.decode(), -1), int(seq))
            seen += 1
            if seen == stop_after:
                proc.kill()
        proc.wait(timeout=60)
        assert proc.returncode == -9, f"round {i} ({kill}): exit status {proc.returncode}"
        power_cut(root, rng)
    store = FileStore(root, exclusive=True)
    once = files(root)
    for sid, last in acked.items():
        records = read_log(root / "sessions" / f"{sid}.jsonl")
        assert len(records) > last, f"{sid}: acknowledged up to seq {last}, log has {len(records)}"
        assert [r.get("v") for r in records[1:]] == [f"{sid}:{s}" for s in range(1, len(records))]
    assert store.recovery is not None and segments(root) == []
    assert recover(root / "wal", root / "sessions").entries == 0
    assert files(root) == once  # recovery again changes nothing


def test_a_writer_killed_at_random_loses_no_acknowledged_append(tmp_path):
    _kill_rounds(tmp_path, 11, 4, [None])


def test_a_writer_killed_between_the_log_sync_and_the_session_files_loses_nothing(tmp_path):
    _kill_rounds(tmp_path, 12, 4, ["after_sync", "mid_files"])


def test_a_writer_killed_during_a_checkpoint_loses_nothing(tmp_path):
    _kill_rounds(tmp_path, 13, 3, ["checkpoint", None])


# -- the model: any history, a crash, any power cut, recovery (twice) ---------------------------
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.sampled_from("ab"), st.integers(1, 3)),
        st.tuples(st.just("truncate"), st.sampled_from("ab"), st.integers(0, 3)),
        st.tuples(st.just("reopen")),
    ),
    max_size=20,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=OPS, seed=st.integers(0, 2**32), segment=st.sampled_from([300, 1000, 1 << 20]))
def test_recovery_after_any_history_and_any_power_cut_gives_the_acknowledged_logs(
    monkeypatch, ops, seed, segment
):
    with tempfile.TemporaryDirectory() as root, monkeypatch.context() as m:
        trio.run(_model_run, Path(root), m, ops, seed, segment)


async def _model_run(root: Path, m: pytest.MonkeyPatch, ops, seed: int, segment: int) -> None:
    model: dict[str, list[dict[str, Any]]] = {}
    async with trio.open_nursery() as nursery:
        store = FileStore(root, "batch", exclusive=True, segment_bytes=segment)
        await nursery.start(store.run)
        for op in ops:
            if op[0] == "reopen":  # a clean stop, retiring the log, and a start
                await store.aclose()
                store = FileStore(root, "batch", exclusive=True, segment_bytes=segment)
                await nursery.start(store.run)
                continue
            _, sid, n = op
            if sid not in model:
                await store.create(sid, [rec(0)])
                model[sid] = [rec(0)]
            else:
                store.load(sid)
            if op[0] == "append":
                first = len(model[sid])
                new = [rec(s, v=f"{sid}{s}") for s in range(first, first + n)]
                await store.append(sid, first, new)
                model[sid] += new
            else:
                keep = max(1, len(model[sid]) - n)
                store.truncate(sid, keep)
                del model[sid][keep:]
        crash(m)
        await store.aclose()
    m.undo()
    power_cut(root, random.Random(seed))
    again = FileStore(root, exclusive=True)
    for sid, want in model.items():
        got = [{k: v for k, v in r.items() if k != "ts"} for r in again.load(sid)]
        assert got == want
    once = files(root)
    assert recover(root / "wal", root / "sessions").appended == 0
    assert files(root) == once
