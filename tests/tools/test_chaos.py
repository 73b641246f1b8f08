"""``gamehost chaos``: a short kill loop against a real host subprocess, and its log checker."""

from __future__ import annotations

import random
from pathlib import Path

import orjson

from host.game import seed_commitment
from tools.chaos import (
    ChaosConfig,
    ChaosReport,
    HostProcess,
    Ledger,
    _Run,
    _takeovers,
    chaos,
    check_logs,
    pick_action,
)


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


async def test_two_hosts_on_one_database_are_killed_in_turn(
    tmp_path: Path, pg_store_url: str
) -> None:
    cfg = ChaosConfig(
        sessions=4,
        kills=2,
        seed=5,
        data_dir=tmp_path,
        max_seconds=60,
        settle_seconds=30,
        think=0.05,
        kill_pause=(0.2, 0.6),
        kill_pushes=30,
        hosts=2,
        store=pg_store_url,
    )
    report = await chaos(cfg)
    text = "\n".join(report.lines())
    assert report.kills == 2 and report.restarts == 2, text
    assert report.lost == 0 and report.acknowledged == report.found > 0, text
    assert report.logs == report.verify_ok >= 4, text
    assert all(t <= 5.0 for t in report.takeovers), text
    assert report.takeovers_missing == [], text
    assert any(line.startswith("bot takeovers: ") for line in report.lines()), text
    assert report.ok, text


def test_takeovers_are_timed_from_the_kill_to_the_next_lease_taken(tmp_path: Path) -> None:
    dead = HostProcess("host0", [], tmp_path / "0.log")
    alive = HostProcess("host1", [], tmp_path / "1.log")
    dead.started_at = 10.0
    dead.leases += [(11.0, "lease_taken", "s1"), (11.5, "lease_taken", "s2")]
    dead.leases += [(12.0, "lease_taken", "s3"), (12.5, "lease_lost", "s3")]
    assert dead.driving() == {"s1", "s2"}
    alive.leases += [(5.0, "lease_taken", "s1"), (21.0, "lease_taken", "s1")]
    alive.leases += [(27.0, "lease_taken", "s2")]
    report = ChaosReport(3, 1, tmp_path, hosts=2)
    run = _Run(ChaosConfig(), report, [dead, alive], random.Random(1))
    run.killed.append((20.0, dead.driving() | {"s4", "s5"}))
    _takeovers(run, ended={"s4"})  # s4 ended: it needed nobody; s5 was never taken over
    assert report.takeovers == [1.0, 7.0]
    assert report.takeovers_missing == ["s5"]
    assert "1 takeovers took more than 5 s" in report.failures()
    assert "1 sessions of a killed host not taken over" in report.failures()
