"""A log read a record at a time (``LogReader``) reads as the whole-log reader does, and a verify
fed from it keeps no more than one cause's records alive (``replay --verify`` of a long log in
the memory of its bytes)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import orjson
import pytest

from host.plugins.registry import load_registry
from host.store.base import CorruptLog, frame
from host.store.file import LogReader, read_log, scan_bytes
from host.table.engine import Record
from host.table.history import verify_log
from host.table.local import play_local

ENGINE = load_registry().engines["crazy-eights"]
LINES = [
    r.to_json()
    for r in play_local(ENGINE.game, {"target": 200}, 3, seed=b"r" * 32, engine=ENGINE)[1]
]


def summed(records: list[dict]) -> bytes:
    return b"".join(frame(orjson.dumps(r)) for r in records)


def outcome(path: Path, data: bytes):
    """(records read, torn_at, unchecked, damage message) of both readers."""
    path.write_bytes(data)
    try:
        scan = scan_bytes(path, data)
        whole = (scan.records, scan.torn_at, scan.unchecked, None)
    except CorruptLog as exc:
        whole = (None, None, None, str(exc))
    reader = LogReader.open(path)
    got: list[dict] = []
    try:
        for rec in reader:
            got.append(rec)
        streamed = (got, reader.torn_at, reader.unchecked, None)
    except CorruptLog as exc:
        streamed = (None, None, None, str(exc))
    return whole, streamed, got


@pytest.mark.parametrize(
    "damage",
    ["none", "torn", "flipped", "garbled_first", "cut_newline", "unsummed", "empty"],
)
def test_a_log_read_a_record_at_a_time_reads_as_the_whole_log_does(tmp_path, damage):
    data = summed(LINES)
    lines = data.splitlines(keepends=True)
    mid = len(lines) // 2
    if damage == "torn":
        data = data + lines[mid][:20]
    elif damage == "flipped":
        bad = bytearray(lines[mid])
        bad[30] ^= 0x04
        data = b"".join([*lines[:mid], bytes(bad), *lines[mid + 1 :]])
    elif damage == "garbled_first":
        data = b"{nope\n" + data
    elif damage == "cut_newline":
        data = data[:-1] + b"x"
    elif damage == "unsummed":
        data = b"".join([*lines[:mid], orjson.dumps(LINES[mid]) + b"\n", *lines[mid + 1 :]])
    elif damage == "empty":
        data = b""
    whole, streamed, got = outcome(tmp_path / "t.jsonl", data)
    assert streamed == whole
    if whole[3] is not None and damage not in ("garbled_first", "empty"):
        assert got == read_log_prefix(tmp_path / "t.jsonl", data, whole[3])  # those before it
    if damage == "torn":
        assert streamed[1] == len(data) - 20 and len(streamed[0]) == len(LINES)
    if damage == "none":
        assert streamed[0] == read_log(tmp_path / "t.jsonl")


def read_log_prefix(path: Path, data: bytes, message: str) -> list[dict]:
    """The records before the damaged one the message names (``seq N``)."""
    seq = int(message.split("seq ")[1].split(":")[0])
    return scan_bytes(path, b"".join(data.splitlines(keepends=True)[:seq])).records


def test_lines_counts_a_log_without_parsing_it(tmp_path):
    data = summed(LINES)
    assert LogReader(tmp_path, data).lines() == len(LINES)
    assert LogReader(tmp_path, data + b'{"crc":"0').lines() == len(LINES) + 1
    assert LogReader(tmp_path, b"").lines() == 0


def test_verify_fed_a_record_at_a_time_keeps_only_a_cause_alive():
    alive: list[weakref.ref] = []
    most = 0

    def records():
        nonlocal most
        for raw in LINES:
            rec = Record.from_json(orjson.loads(orjson.dumps(raw)))
            alive.append(weakref.ref(rec))
            yield rec
            gc.collect(0)
            most = max(most, sum(r() is not None for r in alive))

    assert verify_log(ENGINE, records()) is None
    assert len(alive) == len(LINES) > 200
    assert most <= 12  # the cause being checked, its events, the header and the last action


def test_verify_fed_a_record_at_a_time_gives_the_verdicts_of_a_list():
    def as_records(raws):
        return [Record.from_json(orjson.loads(orjson.dumps(r))) for r in raws]

    cases = [as_records(LINES)]
    seedless = [dict(r) for r in LINES]
    ended = next(r for r in seedless if r["type"] == "ended")
    ended["seed"] = "00" * 32
    cases.append(as_records(seedless))
    both = [dict(r) for r in seedless]  # an early difference and a bad seed: the seed is told
    drew = next(r for r in both if r["type"] == "event" and r["event"]["type"] == "drew")
    both[both.index(drew)] = {**drew, "event": {**drew["event"], "cards": ["ZZ"]}}
    cases.append(as_records(both))
    cases.append(as_records(LINES[: len(LINES) // 2]))
    verdicts = [verify_log(ENGINE, records) for records in cases]
    assert verdicts[0] is None and verdicts[1] is not None and verdicts[2] == verdicts[1]
    assert [verify_log(ENGINE, iter(records)) for records in cases] == verdicts


def run_job(job):
    try:
        while True:
            next(job)
    except StopIteration as done:
        return done.value


def tampered_logs() -> dict[str, list[dict]]:
    """A true log, one with a changed card, one whose seed breaks its commitment after a changed
    card, one with a damaged line after a changed card (raw dicts; GARBLE marks the line)."""
    true = [orjson.loads(orjson.dumps(r)) for r in LINES]
    changed = [orjson.loads(orjson.dumps(r)) for r in LINES]
    drew = next(r for r in changed if r["type"] == "event" and r["event"]["type"] == "drew")
    drew["event"]["cards"] = ["ZZ"]
    seed = [orjson.loads(orjson.dumps(r)) for r in changed]
    seed[-1]["seed"] = "00" * 32
    damaged = [orjson.loads(orjson.dumps(r)) for r in changed]
    damaged[len(damaged) - 5] = {"garble": True}
    return {"true": true, "changed": changed, "seed": seed, "damaged": damaged}


@pytest.mark.parametrize("case", ["true", "changed", "seed", "damaged", "unknown"])
def test_a_hosts_verify_job_reads_as_it_checks_and_answers_as_the_whole_log_did(tmp_path, case):
    from host.net.heavy import verify_job

    raws = tampered_logs().get(case, LINES)
    lines = [b"{nope" if r.get("garble") else frame(orjson.dumps(r))[:-1] for r in raws]
    if case != "unknown":
        (tmp_path / "s1.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    got = run_job(verify_job(("file", str(tmp_path)), ENGINE, "s1", len(raws) - 1))
    if case == "unknown":
        assert got == ("unknown",)
        return
    if case == "damaged":
        bad = len(raws) - 5
        assert got[:2] == ("damaged", bad)
        return
    records = [Record.from_json(r) for r in raws]
    assert got == ("verified", len(raws), verify_log(ENGINE, records), None)
    assert (got[2] is None) == (case == "true")
    if case == "seed":
        assert "seed" in got[2][1]


def test_a_hosts_verify_job_keeps_only_a_cause_alive(monkeypatch):
    import host.net.heavy as heavy

    alive: list[weakref.ref] = []
    most = 0

    def stream(source, sid, first, upto):
        nonlocal most
        for raw in LINES[first : upto + 1]:
            rec = Record.from_json(orjson.loads(orjson.dumps(raw)))
            alive.append(weakref.ref(rec))
            yield rec
            gc.collect(0)
            most = max(most, sum(r() is not None for r in alive))

    monkeypatch.setattr(heavy, "_stream", stream)
    got = run_job(heavy.verify_job(("file", "unused"), ENGINE, "s1", len(LINES) - 1))
    assert got == ("verified", len(LINES), None, None)
    assert most <= 12


def test_a_hosts_verify_job_does_not_blame_the_game_for_a_slow_read(monkeypatch):
    import host.net.heavy as heavy
    from host.plugins.budget import BudgetExceeded

    def stream(source, sid, first, upto):
        for n, raw in enumerate(LINES[first : upto + 1]):
            if n == 30:  # the budget's interruption lands while a record is read
                raise BudgetExceeded("time", "a step ran past 0.5 s of CPU")
            yield Record.from_json(orjson.loads(orjson.dumps(raw)))

    monkeypatch.setattr(heavy, "_stream", stream)
    got = run_job(heavy.verify_job(("file", "unused"), ENGINE, "s1", len(LINES) - 1))
    assert got[0] == "verified" and got[1] == 0
    assert got[2][0] == 0 and got[2][1].startswith("the log could not be read in time")
