"""A torn tail is only ever an append a crash cut short: a prefix of its line, with no newline.
A whole line whose newline or first bytes took a flipped bit, or whose checksum was removed,
is damage (``session_damaged`` naming its seq) — never cut as if it were torn, since it may be
an acknowledged record. With the write-ahead log, a record it still holds is restored from it."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from host.store.base import CorruptLog, body_of, encode_lines
from host.store.file import FileStore, read_log
from host.store.wal import recover
from tests.host.test_store import rec
from tests.host.test_wal import _stage, crash

RECORDS = [rec(0)] + [rec(i, v=i) for i in range(1, 5)]


def summed_log(path: Path) -> bytes:
    """A log as the store writes it (every line checksummed); its bytes."""
    data = b"".join(encode_lines(RECORDS))
    path.write_bytes(data)
    return data


def flipped(data: bytes, at: int, bit: int) -> bytes:
    return data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1 :]


def last_line_start(data: bytes) -> int:
    return data.rindex(b"\n", 0, len(data) - 1) + 1


@pytest.mark.parametrize("bit", range(8))
def test_a_last_line_whose_newline_took_a_flipped_bit_is_damage_not_torn(tmp_path, bit):
    path = tmp_path / "s.jsonl"
    bad = flipped(summed_log(path), len(path.read_bytes()) - 1, bit)
    path.write_bytes(bad)
    with pytest.raises(CorruptLog, match=r"seq 4: .*where its newline belongs"):
        read_log(path, repair=True)
    assert path.read_bytes() == bad  # nothing was cut


@pytest.mark.parametrize("byte", range(8))
def test_a_last_line_whose_first_bytes_took_a_flipped_bit_is_damage_not_torn(tmp_path, byte):
    path = tmp_path / "s.jsonl"
    data = summed_log(path)
    for bit in range(8):
        bad = flipped(data, last_line_start(data) + byte, bit)
        path.write_bytes(bad)
        with pytest.raises(CorruptLog) as caught:
            read_log(path, repair=True)
        assert caught.value.seq == 4, (byte, bit, caught.value)
        assert path.read_bytes() == bad


def test_in_an_upgraded_log_a_checksummed_last_line_with_a_flipped_first_byte_is_damage(tmp_path):
    """Old lines (no checksum) then one the store wrote since: the last line's 8 hex digits and
    ``",`` still say it was checksummed, though its first bytes no longer do."""
    path = tmp_path / "s.jsonl"
    lines = encode_lines(RECORDS)
    old = b"".join(body_of(line[:-1]) + b"\n" for line in lines[:-1])
    for byte in (0, 1, 5, 6, 7):  # where a flip leaves a line that is not JSON
        bad = old + flipped(lines[-1], byte, 3)
        path.write_bytes(bad)
        with pytest.raises(CorruptLog) as caught:
            read_log(path, repair=True)
        assert caught.value.seq == 4, byte
    path.write_bytes(old + b'{"seq": 4, "ty\x00\x00\n')  # before checksums: still a torn tail
    assert len(read_log(path, repair=True)) == 4


@pytest.mark.parametrize("seq", [2, 4])
def test_a_line_whose_checksum_was_removed_is_damage_in_a_checksummed_log(tmp_path, seq):
    path = tmp_path / "s.jsonl"
    lines = encode_lines(RECORDS)
    lines[seq] = body_of(lines[seq][:-1]) + b"\n"  # {"seq":...} as before checksums
    path.write_bytes(b"".join(lines))
    with pytest.raises(CorruptLog, match=f"seq {seq}: .*carries no checksum"):
        read_log(path)


def test_a_torn_append_is_still_cut_even_one_byte_short_of_its_line(tmp_path):
    path = tmp_path / "s.jsonl"
    data = summed_log(path)
    start = last_line_start(data)
    for cut in (start + 1, start + 20, len(data) - 2, len(data) - 1):  # the last: no newline
        path.write_bytes(data[:cut])
        assert len(read_log(path, repair=True)) == 4
        assert path.read_bytes() == data[:start]


async def test_open_end_refuses_a_damaged_newline_and_still_cuts_a_torn_tail(tmp_path):
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    data = summed_log(sessions / "s1.jsonl")
    start = last_line_start(data)
    for bad in (flipped(data, len(data) - 1, 0), flipped(data, start, 5)):  # `{` -> `[`
        (sessions / "s1.jsonl").write_bytes(bad)
        with pytest.raises(CorruptLog, match="seq 4"):
            await FileStore(tmp_path).open_end("s1")
        assert (sessions / "s1.jsonl").read_bytes() == bad
    (sessions / "s1.jsonl").write_bytes(data[:-1])  # torn: the whole line but its newline
    assert await FileStore(tmp_path).open_end("s1") == 4
    assert (sessions / "s1.jsonl").read_bytes() == data[:start]


# -- with the write-ahead log ---------------------------------------------------------------------
def test_recovery_restores_a_logged_last_line_whose_newline_was_damaged(tmp_path):
    _stage(tmp_path, {"s1": [0, 1, 2]}, [("s1", 1), ("s1", 2)])
    path = tmp_path / "sessions" / "s1.jsonl"
    good = path.read_bytes()
    for at in (len(good) - 1, last_line_start(good)):  # its newline, its first byte
        path.write_bytes(flipped(good, at, 1))
        recover(tmp_path / "wal", tmp_path / "sessions")
        assert path.read_bytes() == good


async def test_an_acknowledged_record_the_log_holds_survives_a_damaged_newline(
    tmp_path, monkeypatch
):
    """A host appends, crashes (the log not yet checkpointed), the session file's last newline
    takes a flipped bit: the next start restores the record from the log."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    crash(monkeypatch)
    store = FileStore(tmp_path, "batch", exclusive=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.create("s1", RECORDS[:3])
        await store.append("s1", 3, RECORDS[3:])
        await store.aclose()
    path = sessions / "s1.jsonl"
    good = path.read_bytes()
    path.write_bytes(flipped(good, len(good) - 1, 2))
    again = FileStore(tmp_path, "batch", exclusive=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(again.run)
        assert [r["seq"] for r in again.load("s1")] == [0, 1, 2, 3, 4]
        assert path.read_bytes() == good
        await again.aclose()


async def test_a_checkpointed_record_with_a_damaged_newline_is_session_damaged(tmp_path):
    """Once the log is retired the session file is the only copy: its damage is reported."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    store = FileStore(tmp_path, "batch", exclusive=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.create("s1", RECORDS)
        await store.aclose()  # checkpointed: no segment left
    assert not list((tmp_path / "wal").glob("*.seg"))
    path = sessions / "s1.jsonl"
    bad = flipped(path.read_bytes(), len(path.read_bytes()) - 1, 4)
    path.write_bytes(bad)
    again = FileStore(tmp_path, "batch", exclusive=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(again.run)
        with pytest.raises(CorruptLog, match="seq 4"):
            again.load("s1")
        assert path.read_bytes() == bad
        await again.aclose()
