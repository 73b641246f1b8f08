"""``gamehost chaos``: a short kill loop against a real host subprocess, and its log checker."""

from __future__ import annotations

import random
from pathlib import Path

import orjson

from host.game import seed_commitment
from tools.chaos import ChaosConfig, ChaosReport, Ledger, chaos, check_logs, pick_action


async def test_a_short_kill_loop_loses_no_acknowledged_event(tmp_path: Path) -> None:
    cfg = ChaosConfig(
        sessions=4,
        kills=2,
        seed=3,
        data_dir=tmp_path,
        max_seconds=45,
        settle_seconds=6,
        think=0.05,
        kill_pause=(0.1, 0.5),
        kill_pushes=30,
    )
    report = await chaos(cfg)
    text = "\n".join(report.lines())
    assert report.kills == 2, text
    assert report.restarts == 2, text
    assert report.sessions_created == 4, text
    assert report.lost == 0, text
    assert 0 < report.acknowledged <= report.found, text
    assert report.logs >= 4, text
    assert report.verify_ok + len(report.verify_failed) == report.logs, text
    # every kill waits for pushes after the previous restart, so seated clients were cut off
    # and came back with their tokens
    assert report.resumes_ok >= 1, text
    assert report.push_gaps == 0, text
    # The full acceptance (issue 7) also expects, with 50 sessions and 10 kills:
    #   report.not_ended == [], report.verify_failed == [], not report.resumes_failed,
    #   i.e. report.ok. The host cannot do that yet (a create or join whose reply is lost
    #   strands its session), so only the no-loss half is asserted here.
    assert report.lines()[-1] == ("ok" if report.ok else "FAILED: " + "; ".join(report.failures()))


def _write_log(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))


def test_check_logs_counts_acknowledged_records_missing_or_different(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    seed = bytes(32)
    header = {
        "seq": 0,
        "type": "header",
        "game": "toy",
        "options": {},
        "seats": 1,
        "seed": seed.hex(),
        "seed_commitment": seed_commitment(seed),
    }
    _write_log(
        sessions / "a.jsonl",
        [
            header,
            {"seq": 1, "type": "seat_taken", "seat": 0, "name": "x", "bot": False},
            {"seq": 2, "type": "action", "seat": 0, "action": {"type": "draw"}},
            {"seq": 3, "type": "event", "v": 1, "event": {"type": "drew", "seat": 0}},
        ],
    )
    _write_log(
        sessions / "b.jsonl",
        [header, {"seq": 1, "type": "ended", "outcome": None, "aborted": "abandoned"}],
    )
    _write_log(sessions / "c.jsonl", [header, {"seq": 1, "type": "ended", "outcome": {}}])
    a = Ledger("a", "toy")
    a.saw(1, "seat_taken:seat 0")
    a.saw(2, "action:seat 0:draw")
    a.saw(3, "event:played")  # the log has "drew" there: a different record
    a.ack(5)  # seqs 4 and 5 are not in the log
    b = Ledger("b", "toy")
    b.ack(1)
    gone = Ledger("gone", "toy")
    gone.ack(2)  # no log at all: 3 records lost

    report = ChaosReport(3, 0, tmp_path)
    check_logs(report, {"a": a, "b": b, "gone": gone}, sessions)

    assert report.logs == 3
    assert report.acknowledged == 6 + 2 + 3
    assert report.found == 4 + 2
    assert report.lost == 2 + 1 + 3
    assert len(report.lost_detail) == 3
    assert report.played_out == 1
    assert report.aborted == {"abandoned": 1}
    assert report.not_ended == ["a (4 records)"]
    assert report.orphans == ["c"]
    assert "6 acknowledged events lost" in report.failures()


def test_a_ledger_notes_two_different_records_pushed_at_one_seq() -> None:
    ledger = Ledger("s", "toy")
    ledger.saw(4, "event:played")
    ledger.saw(4, "event:played")
    ledger.saw(4, "event:drew")
    ledger.ack(2)
    assert ledger.max_seq == 4
    assert ledger.clashes == ["seq 4: pushed as event:played and as event:drew"]


def test_pick_action_still_draws_when_nothing_else_is_legal() -> None:
    rng = random.Random(1)
    assert pick_action([{"type": "draw"}], rng) == {"type": "draw"}
    legal = [{"type": "draw"}, {"type": "play", "card": "5C"}]
    picks = [pick_action(legal, rng) for _ in range(400)]
    draws = sum(p["type"] == "draw" for p in picks)
    assert 0 < draws < 200
