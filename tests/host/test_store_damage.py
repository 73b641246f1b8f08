"""Log damage is told apart from a torn tail, and the store never follows links out of
``sessions/``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import orjson
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host.plugins.registry import load_registry
from host.store.base import CorruptLog
from host.store.file import FileStore, fold_log, read_log
from host.table.engine import Record
from host.table.local import play_local
from tests.host.test_store import rec
from tools.cli import main

REGISTRY = load_registry()
needs_crazy_eights = pytest.mark.skipif(
    "crazy-eights" not in REGISTRY.games, reason="the crazy-eights plugin is not installed"
)


def lines_of(records: list[dict]) -> list[bytes]:
    return [orjson.dumps(r) + b"\n" for r in records]


def write_log(path: Path, records: list[dict]) -> bytes:
    data = b"".join(lines_of(records))
    path.write_bytes(data)
    return data


def crazy_eights_log(path: Path) -> list[dict]:
    """A whole session played by bots, written as the host writes it."""
    engine = REGISTRY.engines["crazy-eights"]
    _, records = play_local(engine.game, {"target": 1}, 3, seed=b"r" * 32, engine=engine)
    raw = [orjson.loads(orjson.dumps(r.to_json())) for r in records]
    write_log(path, raw)
    return raw


def corrupt(path: Path) -> CorruptLog:
    """Load ``path`` (repairing) and return the CorruptLog raised; the file must be unchanged."""
    before = path.read_bytes() if not path.is_symlink() else None
    with pytest.raises(CorruptLog) as info:
        read_log(path, repair=True)
    if before is not None:
        assert path.read_bytes() == before
    assert info.value.path == path
    assert str(info.value).startswith(f"{path}: seq {info.value.seq}: ")
    return info.value


# -- told apart: damage ---------------------------------------------------------------------------
def test_an_empty_file_is_a_corrupt_log_at_seq_0(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_bytes(b"")
    assert corrupt(path).seq == 0


def test_a_file_with_only_a_torn_header_is_a_corrupt_log_at_seq_0(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(rec(0))[:20])
    assert corrupt(path).seq == 0


def test_a_first_record_that_is_not_a_header_is_a_corrupt_log(tmp_path):
    path = tmp_path / "h.jsonl"
    write_log(path, [{"seq": 0, "type": "event"}, rec(1)])
    assert "not the header" in corrupt(path).message


@pytest.mark.parametrize("field", ["game", "options", "seats", "seed", "seed_commitment"])
def test_a_header_without_a_required_field_is_a_corrupt_log(tmp_path, field):
    path = tmp_path / "h.jsonl"
    header = rec(0)
    del header[field]
    write_log(path, [header, rec(1)])
    err = corrupt(path)
    assert err.seq == 0 and field in err.message


@needs_crazy_eights
@pytest.mark.parametrize("flip", [0, 1, 63])
def test_a_flipped_byte_in_the_headers_seed_is_refused_on_load(tmp_path, flip):
    path = tmp_path / "s.jsonl"
    raw = crazy_eights_log(path)
    seed = bytearray(bytes.fromhex(raw[0]["seed"]))
    seed[flip // 2] ^= 0x01 << (flip % 2)
    raw[0]["seed"] = seed.hex()
    write_log(path, raw)
    err = corrupt(path)
    assert err.seq == 0 and "seed_commitment" in err.message
    store = FileStore(tmp_path / "data")
    (store.dir / "s.jsonl").write_bytes(path.read_bytes())
    with pytest.raises(CorruptLog):
        store.load("s")
    assert main(["replay", "--verify", str(path)]) == 2


def test_a_seed_that_is_not_hex_is_a_corrupt_log(tmp_path):
    path = tmp_path / "h.jsonl"
    write_log(path, [rec(0, seed="zz"), rec(1)])
    assert "hex" in corrupt(path).message


def test_a_garbage_line_in_the_middle_is_a_corrupt_log_naming_its_seq(tmp_path):
    path = tmp_path / "g.jsonl"
    data = lines_of([rec(0), rec(1), rec(2), rec(3), rec(4)])
    data[2] = b"\x00\x00garbage\n"
    path.write_bytes(b"".join(data))
    assert corrupt(path).seq == 2


def test_a_line_that_is_not_an_object_is_a_corrupt_log(tmp_path):
    path = tmp_path / "g.jsonl"
    data = lines_of([rec(0), rec(1), rec(2)])
    data[1] = b"[1, 2]\n"
    path.write_bytes(b"".join(data))
    assert corrupt(path).seq == 1


def test_a_seq_gap_is_a_corrupt_log_naming_the_missing_seq(tmp_path):
    path = tmp_path / "gap.jsonl"
    write_log(path, [rec(0), rec(1), rec(3), rec(4)])
    err = corrupt(path)
    assert err.seq == 2 and "gap" in err.message


def test_a_complete_last_record_out_of_order_is_damage_not_a_torn_tail(tmp_path):
    """A log cut in the middle loses records clients saw: its last whole line is not torn."""
    path = tmp_path / "cut.jsonl"
    write_log(path, [rec(0), rec(1), rec(2), rec(5)])
    assert corrupt(path).seq == 3


def test_a_second_header_is_a_corrupt_log(tmp_path):
    path = tmp_path / "hh.jsonl"
    write_log(path, [rec(0), {**rec(0), "seq": 1}, rec(2)])
    assert corrupt(path).seq == 1


@needs_crazy_eights
def test_an_unknown_card_is_one_corrupt_log_error_naming_file_and_seq(tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    raw = crazy_eights_log(path)
    i = next(i for i, r in enumerate(raw) if r["type"] == "event" and "card" in r["event"])
    raw[i]["event"]["card"] = "ZZ"
    write_log(path, raw)
    records = [Record.from_json(r) for r in read_log(path)]  # it reads...
    with pytest.raises(CorruptLog) as info:  # ...but does not fold
        fold_log(path, REGISTRY.engines["crazy-eights"], records)
    assert info.value.seq == i and info.value.path == path
    capsys.readouterr()
    for args in (["replay", str(path)], ["replay", "--verify", str(path)]):
        assert main(args) == 2
        out, err = capsys.readouterr()
        assert err == f"error: {path}: seq {i}: {info.value.message}\n"
        assert "Traceback" not in out + err


@needs_crazy_eights
def test_an_action_without_a_seat_is_a_corrupt_log_in_every_replay_mode(tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    raw = crazy_eights_log(path)
    i = next(i for i, r in enumerate(raw) if r["type"] == "action")
    del raw[i]["seat"]
    write_log(path, raw)
    capsys.readouterr()
    for args in (["--verify"], ["--at", "2"], [], ["--as", "0"]):
        assert main(["replay", str(path), *args]) == 2
        out, err = capsys.readouterr()
        assert err.startswith(f"error: {path}: seq {i}: ") and err.count("\n") == 1


@needs_crazy_eights
def test_a_revealed_seed_that_is_not_hex_differs_without_a_traceback(tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    raw = crazy_eights_log(path)
    raw[-1]["seed"] = "not hex"
    write_log(path, raw)
    capsys.readouterr()
    assert main(["replay", "--verify", str(path)]) == 1
    assert capsys.readouterr().out.startswith(f"DIFFERS at seq {raw[-1]['seq']}: ")


@needs_crazy_eights
def test_fold_log_returns_the_state_of_a_good_log(tmp_path):
    path = tmp_path / "s.jsonl"
    crazy_eights_log(path)
    records = [Record.from_json(r) for r in read_log(path)]
    state = fold_log(path, REGISTRY.engines["crazy-eights"], records)
    assert state.ended and state.seq == records[-1].seq


@needs_crazy_eights
@pytest.mark.parametrize("damage", ["missing_field", "bad_seat", "unknown_type"])
def test_an_inconsistent_record_is_a_corrupt_log_at_its_seq(tmp_path, damage):
    path = tmp_path / "s.jsonl"
    raw = crazy_eights_log(path)
    i = next(i for i, r in enumerate(raw) if r["type"] == "seat_taken")
    if damage == "missing_field":
        del raw[i]["name"]
    elif damage == "bad_seat":
        raw[i]["seat"] = 99
    else:
        raw[i]["type"] = "teleported"
    records = [Record.from_json(r) for r in raw]
    with pytest.raises(CorruptLog) as info:
        fold_log(path, REGISTRY.engines["crazy-eights"], records)
    assert info.value.seq == i


@needs_crazy_eights
def test_replay_of_an_empty_log_is_one_error_line(tmp_path, capsys):
    path = tmp_path / "e.jsonl"
    path.write_bytes(b"")
    assert main(["replay", str(path)]) == 2
    assert (
        capsys.readouterr().err == f"error: {path}: seq 0: the file is empty (no header record)\n"
    )


# -- told apart: a torn tail ----------------------------------------------------------------------
def test_a_torn_last_line_is_still_repaired(tmp_path):
    path = tmp_path / "t.jsonl"
    good = write_log(path, [rec(0), rec(1), rec(2)])
    path.write_bytes(good + orjson.dumps(rec(3))[:-3])
    assert [r["seq"] for r in read_log(path, repair=True)] == [0, 1, 2]
    assert path.read_bytes() == good


def test_an_unparsable_last_line_is_a_torn_tail(tmp_path):
    path = tmp_path / "t.jsonl"
    good = write_log(path, [rec(0), rec(1)])
    path.write_bytes(good + b'{"seq": 2, "ty\x00\x00\n')
    assert [r["seq"] for r in read_log(path, repair=True)] == [0, 1]
    assert path.read_bytes() == good


def test_without_repair_a_torn_tail_is_skipped_and_left(tmp_path):
    path = tmp_path / "t.jsonl"
    good = write_log(path, [rec(0), rec(1)])
    path.write_bytes(good + b'{"seq": 2')
    assert [r["seq"] for r in read_log(path)] == [0, 1]
    assert path.read_bytes() == good + b'{"seq": 2'


LOG = [rec(0)] + [rec(i, x="y" * (i % 7)) for i in range(1, 9)]
DATA = b"".join(lines_of(LOG))


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=len(lines_of(LOG)[0]), max_value=len(DATA)))
def test_a_log_cut_anywhere_keeps_exactly_its_whole_lines(tmp_path, cut):
    path = tmp_path / "cut.jsonl"
    path.write_bytes(DATA[:cut])
    whole = DATA[:cut].count(b"\n")
    assert read_log(path, repair=True) == LOG[:whole]
    assert path.read_bytes() == DATA[: DATA[:cut].rfind(b"\n") + 1]


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_log_missing_any_whole_line_but_the_last_names_the_missing_seq(tmp_path, data):
    lines = lines_of(LOG)
    gone = data.draw(st.integers(min_value=0, max_value=len(lines) - 2))
    path = tmp_path / "gone.jsonl"
    path.write_bytes(b"".join(lines[:gone] + lines[gone + 1 :]))
    assert corrupt(path).seq == gone


# -- links and other non-files --------------------------------------------------------------------
def test_a_symlinked_log_is_refused_and_its_target_left_untouched(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_bytes(orjson.dumps(rec(0)) + b"\n" + b'{"seq": 1, "torn')
    before = outside.read_bytes()
    store = FileStore(tmp_path / "data")
    link = store.path("x")
    link.symlink_to(outside)
    with pytest.raises(CorruptLog) as info:
        store.load("x")
    assert info.value.path == link and "symbolic link" in str(info.value)
    with pytest.raises(CorruptLog):
        store.truncate("x", 1)
    assert outside.read_bytes() == before
    assert store.session_ids() == []


def test_listing_skips_everything_but_regular_log_files(tmp_path):
    store = FileStore(tmp_path / "data")
    write_log(store.path("good"), [rec(0)])
    store.path("link").symlink_to(store.path("good"))
    store.path("folder").mkdir()
    os.mkfifo(store.path("fifo"))
    (store.dir / "notes.txt").write_bytes(b"x")
    (store.dir / "not an id.jsonl").write_bytes(b"x")
    assert store.session_ids() == ["good"]


def test_a_session_id_that_is_not_one_cannot_reach_outside_the_folder(tmp_path):
    outside = tmp_path / "outside.jsonl"
    write_log(outside, [rec(0)])
    store = FileStore(tmp_path / "data")
    for op in (lambda: store.load("../../outside"), lambda: store.truncate("../../outside", 1)):
        with pytest.raises(ValueError, match="bad session id"):
            op()


def test_a_folder_or_fifo_named_like_a_log_is_refused(tmp_path):
    store = FileStore(tmp_path / "data")
    store.path("folder").mkdir()
    os.mkfifo(store.path("fifo"))  # opened without blocking, then refused
    for sid in ("folder", "fifo"):
        with pytest.raises(CorruptLog, match="not a regular file"):
            store.load(sid)


async def test_a_log_swapped_for_a_link_after_load_is_not_appended_through(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"precious\n")
    store = FileStore(tmp_path / "data", "batch", max_open=1)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.create("x", rec(0))
        await store.create("y", rec(0))  # one file open at most: x's is closed
        store.path("x").unlink()
        store.path("x").symlink_to(outside)
        with pytest.raises(CorruptLog):
            await store.append("x", 1, [rec(1)])
        await store.aclose()
    assert outside.read_bytes() == b"precious\n"


def test_an_existing_open_sessions_folder_is_made_private(tmp_path):
    folder = tmp_path / "sessions"
    folder.mkdir()
    folder.chmod(0o755)
    FileStore(tmp_path)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
