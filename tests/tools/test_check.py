"""``gamehost check``: lists the damaged logs of a data dir or a database with their seq, tells
torn tails apart, counts records without a checksum, and exits 1 when anything is damaged."""

from __future__ import annotations

from pathlib import Path

import psycopg
import trio

from host.store.base import body_of
from tests.tools.test_db_tools import write_logs
from tools.cli import main


async def cli(*argv: str) -> int:
    return await trio.to_thread.run_sync(main, list(argv))


def flip(path: Path, line: int, offset: int = 30) -> None:
    """Flip one bit of byte ``offset`` of line ``line`` (from 0) of a log."""
    data = bytearray(path.read_bytes())
    at = sum(len(x) + 1 for x in data.split(b"\n")[:line]) + offset
    data[at] ^= 0x04
    path.write_bytes(bytes(data))


async def test_check_lists_damaged_and_torn_logs_and_counts_old_records(tmp_path, capsys):
    sessions = tmp_path / "data" / "sessions"
    files = await write_logs(sessions)
    assert await cli("check", "--data-dir", str(tmp_path / "data")) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("not folded: odd: its game is not installed")  # read, checked
    assert out[1].startswith("checked 2 sessions (") and "0 damaged, 0 with a torn tail;" in out[1]
    assert "0 records without a checksum" in out[1]

    game, odd = files  # game1.jsonl, odd.jsonl
    flip(game, 5)
    data = odd.read_bytes()
    odd.write_bytes(data + data.splitlines()[-1][:20])  # a torn append
    old = b"".join(body_of(line) + b"\n" for line in data.splitlines())
    (sessions / "old.jsonl").write_bytes(old)  # written before checksums
    assert await cli("check", "--store", str(tmp_path / "data")) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "damaged: game1: seq 5: the line at byte " + lines[0].split("byte ")[1]
    assert lines[0].endswith(": the record does not match its checksum")
    assert lines[1] == (
        f"torn: odd: a torn last line at byte {len(data)} (never acknowledged; a host cuts it off)"
    )
    assert lines[2:4] == [
        f"not folded: {sid}: its game is not installed (served with --plugin? give it here)"
        for sid in ("odd", "old")
    ]
    assert lines[-1].endswith(
        f"1 damaged, 1 with a torn tail; {len(old.splitlines())} records"
        " without a checksum (written before checksums)"
    )
    assert odd.read_bytes().endswith(data.splitlines()[-1][:20])  # nothing was changed


async def test_check_of_a_database_names_the_damaged_row(pg_store_url, tmp_path, capsys):
    files = await write_logs(tmp_path / "in")
    assert await cli("import", "--store", pg_store_url, *map(str, files)) == 0
    assert await cli("check", "--store", pg_store_url) == 0
    assert "checked 2 sessions" in capsys.readouterr().out
    with psycopg.connect(pg_store_url) as conn:
        conn.execute(
            "UPDATE gamehost_records SET line = replace(line, '\"seq\":2,', '\"seq\":2, ')"
            " WHERE session_id = 'odd' AND seq = 2"
        )
    assert await cli("check", "--store", pg_store_url) == 1
    out = capsys.readouterr().out
    assert "damaged: odd: seq 2: the record does not match its checksum\n" in out
    with psycopg.connect(pg_store_url) as conn:  # the last row of game1 moved to another session
        last = conn.execute(
            "UPDATE gamehost_records SET session_id = 'game3' WHERE session_id = 'game1'"
            " AND seq = (SELECT last_seq FROM gamehost_sessions WHERE session_id = 'game1')"
            " RETURNING seq"
        ).fetchone()[0]
    assert await cli("check", "--store", pg_store_url) == 1
    out = capsys.readouterr().out
    assert (
        f"damaged: game1: seq {last}: no row at seq {last}, though the session's row says its log"
        f" ends at seq {last}\n" in out
    )


async def test_check_of_no_data_dir_is_status_2(tmp_path, capsys):
    assert await cli("check", "--data-dir", str(tmp_path / "nope")) == 2
    assert capsys.readouterr().err.startswith("gamehost check: error: no data dir ")


async def test_replay_verify_names_a_checksum_mismatch(tmp_path, capsys):
    game, _ = await write_logs(tmp_path)
    flip(game, 3)
    assert await cli("replay", "--verify", str(game)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {game}: seq 3: the line at byte ")
    assert err.endswith("the record does not match its checksum\n")


async def test_check_reads_the_write_ahead_log_and_says_what_a_start_would_replay(tmp_path, capsys):
    from host.store.wal import MAGIC
    from tests.host.test_wal import _stage

    data = tmp_path / "data"
    segment = _stage(data, {"s1": [0]}, [("s1", 1), ("s1", 2)])  # as a crash left it
    good = segment.read_bytes()
    before = (data / "sessions" / "s1.jsonl").read_bytes()
    assert await cli("check", "--data-dir", str(data)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == (
        "write-ahead log: 1 segment not yet retired (2 records); a host's start would add 2"
        " records to session files"
    )
    segment.write_bytes(good[:-9])  # a torn tail: no damage
    assert await cli("check", "--data-dir", str(data)) == 0
    lines = capsys.readouterr().out.splitlines()
    at = good.rindex(b"\n", 0, len(good) - 1) + 1
    assert (
        f"torn: wal/{segment.name}: a torn last line at byte {at} (a host drops it; what of it"
        " reached its session files stays there)" in lines
    )
    assert lines[-1].endswith("(1 records); a host's start would add 1 records to session files")
    damaged = bytearray(good)
    damaged[len(MAGIC) + 12] ^= 0x04
    segment.write_bytes(bytes(damaged))
    assert await cli("check", "--data-dir", str(data)) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        f"damaged: wal/{segment.name}: byte {len(MAGIC)}: a line that does not match its"
        " checksum (a host refuses to start)"
    )
    assert segment.read_bytes() == bytes(damaged)  # nothing was changed
    assert (data / "sessions" / "s1.jsonl").read_bytes() == before


async def test_check_tells_damage_the_write_ahead_log_restores_from_damage(tmp_path, capsys):
    """A session file damaged where the write-ahead log still holds its records is what a
    host's start repairs: ``restored on start``, exit status 0, as the host would serve it;
    once the log no longer holds them it is damage (exit status 1)."""
    from tests.host.test_wal import _stage

    data = tmp_path / "data"
    segment = _stage(data, {"s1": [0, 1, 2]}, [("s1", 1), ("s1", 2)])
    log = data / "sessions" / "s1.jsonl"
    lines = log.read_bytes().split(b"\n")
    flipped = bytearray(lines[2])
    flipped[len(flipped) // 2] ^= 0x01
    log.write_bytes(b"\n".join([*lines[:2], bytes(flipped), *lines[3:]]))
    assert await cli("check", "--data-dir", str(data)) == 0
    out = capsys.readouterr()
    restored = [line for line in out.out.splitlines() if line.startswith("restored on start: s1")]
    assert len(restored) == 1 and restored[0].startswith("restored on start: s1: seq 2: ")
    assert "from seq 2: a host's start rewrites them" in restored[0]
    assert "wal_session_repaired" not in out.err  # a dry run says nothing as the host would
    segment.unlink()
    assert await cli("check", "--data-dir", str(data)) == 1
    assert capsys.readouterr().out.startswith("damaged: s1: seq 2: ")


async def test_check_calls_a_last_line_with_a_damaged_newline_damage_not_torn(tmp_path, capsys):
    """A flipped bit in the last record's newline once read as a torn tail ("never
    acknowledged"): the record may well have been acknowledged, so it is damage."""
    sessions = tmp_path / "data" / "sessions"
    game, _ = await write_logs(sessions)
    data = game.read_bytes()
    last = data.rindex(b"\n", 0, len(data) - 1) + 1
    game.write_bytes(data[:-1] + b"\x0b")  # the newline, one bit flipped
    assert await cli("check", "--data-dir", str(tmp_path / "data")) == 1
    lines = capsys.readouterr().out.splitlines()
    seq = data.count(b"\n") - 1
    assert lines[0] == (
        f"damaged: game1: seq {seq}: the line at byte {last} ends with byte 0x0b where its"
        " newline belongs (damaged, not torn)"
    )
    assert not any(line.startswith("torn:") for line in lines)
    assert game.read_bytes() == data[:-1] + b"\x0b"  # nothing was changed
