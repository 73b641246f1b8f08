"""The differential test: one host (A), one host SIGKILLed and restarted between commands (B) and
two hosts on one PostgreSQL database (C) must answer the same commands alike.

Each test plays a scenario on the three topologies of real ``gamehost serve`` processes over TCP
and compares, per logical connection, its replies, the event pushes it was shown, its latest
``turn`` push at each of its steps and its other pushes (``tests/differential.py`` says how).
The hand-written cases also check what the protocol promises there (takeover, a resume that
closes at once, simultaneous gives across a bounce), in every topology.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from host.table.history import verify_log
from tests.differential import (
    TOPOLOGIES,
    Logical,
    Outcome,
    RandomDriver,
    Scenario,
    Step,
    Table,
    Topology,
    compare,
    run_scenario,
)
from tools.replay import load

Expect = Callable[[Outcome, str], list[str]]
"""What a hand-written case promises, checked on one topology: the problems found."""


def play(scenario: Scenario, tmp: Path, pg_url: str) -> Outcome:
    """Run the scenario (:func:`run_scenario`) in a trio run of its own, so that a failure is
    reported as itself, not inside an exception group."""
    return trio.run(run_scenario, scenario, tmp, pg_url)


def check(outcome: Outcome, expect: Expect | None = None) -> None:
    """Fail with the differential report and the broken promises, if any."""
    report = outcome.report()
    broken = []
    if expect is not None:
        for name in TOPOLOGIES:
            broken += [f"  {name} ({TOPOLOGIES[name]}): {p}" for p in expect(outcome, name)]
    if report or broken:
        text = report or f"differential: {outcome.describe()}: the topologies agree"
        if broken:
            text += "\nnot as the protocol promises:\n" + "\n".join(broken)
        pytest.fail(text, pytrace=False)


def _code(reply: Any) -> str:
    """``ok`` or the error code of a raw reply (``none``: no reply)."""
    if not isinstance(reply, dict):
        return "none"
    if reply.get("ok"):
        return "ok"
    return str(reply.get("error", {}).get("code"))


def _reply(outcome: Outcome, name: str, conn: int, step: int) -> Any:
    """The (filed) reply of ``conn`` to step ``step``."""
    for at, _, reply in outcome.conn(name, conn).replies:
        if at == step:
            return reply
    return None


# -- 1. takeover across slots -------------------------------------------------------------------
TAKEOVER = Scenario(
    "takeover across slots",
    Table("crazy-eights", 2, 1, {"target": 30}),
    slots=(0, 1),
    steps=(
        Step("join", 0, 0),
        Step("resume", 1, 0),  # step 1: L1 takes seat 0 over, on the other slot
        Step("act", 0),  # step 2: L0 holds nothing any more
        Step("view", 0),
        Step("act", 1),
        Step("act", 1),
        Step("bounce"),
        Step("act", 1),
        Step("act", 1),
        Step("view", 1),
    ),
)


def takeover_promises(outcome: Outcome, name: str) -> list[str]:
    sid = outcome.scenario.session
    l0, l1 = outcome.conn(name, 0), outcome.conn(name, 1)
    problems = []
    resumed = _reply(outcome, name, 1, 1)
    if _code(resumed) != "ok":
        return [f"L1's resume of seat 0 was answered {resumed}"]
    at = resumed["result"]["seq"]
    if _code(_reply(outcome, name, 0, 2)) != "not_seated":
        problems.append(
            f"L0's act after the takeover: {_reply(outcome, name, 0, 2)}, not not_seated"
        )
    detached = {"push": "detached", "session": sid, "seat": 0, "reason": "resumed"}
    if [p for _, p in l0.others if p.get("push") == "detached"] != [detached]:
        problems.append(f"L0's pushes other than events and turns: {[p for _, p in l0.others]}")
    later = [seq for seq in l0.events if seq > at]
    if later:
        problems.append(f"L0 was pushed seqs {later} after L1's resume at seq {at}")
    late_turns = [t for step, t in l0.turns if step > 1 and t is not None and t[0] > at]
    if late_turns:
        problems.append(f"L0 held turn pushes after the takeover: {late_turns}")
    codes = [_code(reply) for _, _, _, reply in l1.acts]
    if codes != ["ok"] * len(codes):
        problems.append(f"L1's acts were answered {codes}")
    # L1 resumed with nothing seen (no catch-up, so no presence push of its own resume); the
    # bounce cut it off and its reopening resume caught up on its seat's release and return
    presence = [
        (p["seat"], p["connected"], p["reason"])
        for _, p in l1.transcript()["others"]
        if p.get("push") == "presence"
    ]
    if presence != [(0, False, "gone"), (0, True, "resumed")]:
        problems.append(f"L1's presence pushes: {presence}")
    snap = _reply(outcome, name, 1, 9)  # L1's view at the end: its seat held, the bot's too
    if _code(snap) != "ok" or snap["result"]["connected"] != [True, True]:
        problems.append(f"L1's last view: {snap}")
    return problems


def test_takeover_across_slots(tmp_path: Path, pg_store_url: str) -> None:
    check(play(TAKEOVER, tmp_path, pg_store_url), takeover_promises)


# -- 2. a resume sent with the connection's FIN takes nothing -----------------------------------
RESUME_AND_CLOSE = Scenario(
    "resume and close at once",
    Table("crazy-eights", 2, 1, {"target": 30}),
    slots=(0, 1, 0, 1, 1),
    steps=(
        Step("join", 0, 0),
        Step("watch", 3),  # L3 watches from the other slot
        Step("resume_close", 1, 0),  # step 2: L1, other slot: resume seat 0 + FIN at once
        Step("act", 0),  # step 3: L0 still holds seat 0
        Step("resume_close", 2, 0),  # step 4: L2, L0's own slot, the same
        Step("act", 0),
        Step("leave", 0),  # step 6: nobody holds seat 0 now
        Step("resume_close", 4, 0),  # step 7: a resume that closes leaves it so
        Step("bounce"),
        Step("act", 0),
        Step("view", 3),
    ),
)


def resume_and_close_promises(outcome: Outcome, name: str) -> list[str]:
    """Each resume that closes at once takes nothing: its ``seat_held`` is followed by the
    record giving the seat back — to L0 while it holds it (L0 is never detached and plays on),
    to nobody once it has left — as the watcher L3 is shown."""
    l0, l3 = outcome.conn(name, 0), outcome.conn(name, 3)
    problems = []
    for step in (3, 5):
        if _code(_reply(outcome, name, 0, step)) != "ok":
            problems.append(f"L0's act at step {step}: {_reply(outcome, name, 0, step)}")
    detached = [p for _, p in l0.others if p.get("push") == "detached"]
    if detached:
        problems.append(f"L0 got {detached}")
    presence = [
        (p["seat"], p["connected"], p["reason"])
        for step, p in l3.others
        if p.get("push") == "presence" and step in (2, 4, 6, 7)
    ]
    want = [(0, True, "resumed")] * 4 + [(0, False, "left"), (0, True, "resumed")]
    want.append((0, False, "gone"))
    if presence != want:
        problems.append(f"L3's presence pushes at the resumes: {presence}")
    kinds = [kind for _, (step, kind, _) in sorted(l3.events.items()) if step in (2, 4, 7)]
    if kinds != ["seat_held"] * 5 + ["seat_released"]:
        problems.append(f"L3's event pushes at the resumes: {kinds}")
    return problems


def test_a_resume_sent_with_the_fin_takes_nothing(tmp_path: Path, pg_store_url: str) -> None:
    check(play(RESUME_AND_CLOSE, tmp_path, pg_store_url), resume_and_close_promises)


# -- 3. simultaneous gives across a bounce ------------------------------------------------------
class GivesDriver:
    """Around the World: L0..L2 take seats 0..2, L3 watches; the seat to act that is lowest is
    played (by the scenario's seeded draws) until seats 1 and 2 are both asked at one seq
    (round 2: both owe a give); then L1 gives with that seq, a bounce, and L2 gives naming the
    same (now older) seq; then a few more moves."""

    def __init__(self, max_steps: int = 150, after: int = 4) -> None:
        self.max_steps = max_steps
        self.after = after
        self.at: int | None = None  # the step of seat 1's give
        self.plan: list[Step] = []

    def __call__(self, t: Topology, i: int) -> Step | None:
        if i < 3:
            return Step("join", i, i)
        if i == 3:
            return Step("watch", 3)
        if self.plan:
            return self.plan.pop(0)
        snap = t.snap
        if i >= self.max_steps or snap.get("ended") or (self.at is not None and not self.after):
            return None
        to_act = [s for s in snap.get("to_act", []) if s in t.scenario.table.humans]
        if not to_act:
            return None
        if self.at is None:
            turns = [t.conns[s].turn for s in (1, 2)]
            if {1, 2} <= set(to_act) and all(x and x["seq"] == snap["seq"] for x in turns):
                self.at = i
                self.plan = [Step("bounce"), Step("stale", 2, ref=i)]
                return Step("act", 1)
        else:
            self.after -= 1
        return Step("act", min(to_act))


GIVES = Table("around-the-world", 4, 1)


def gives_promises(outcome: Outcome, name: str) -> list[str]:
    at = outcome.scenario.driver.at  # type: ignore[union-attr]
    if at is None:
        return ["the seeded play never had seats 1 and 2 asked at one seq: pick another name"]
    problems = []
    l1, l2 = outcome.conn(name, 1), outcome.conn(name, 2)
    give = next((a for a in l1.acts if a[0] == at), None)
    stale = next((a for a in l2.acts if a[0] == at + 2), None)
    if give is None or _code(give[3]) != "ok":
        problems.append(f"seat 1's give at step {at}: {give}")
    if stale is None:
        return [*problems, f"seat 2 did not give at step {at + 2}"]
    for conn, step in ((l1, at), (l2, at + 2)):
        held = next((turn for s, turn in conn.turns if s == step), None)
        if held is None or {a["type"] for a in held[1]} != {"give"}:
            problems.append(f"{conn.name} did not owe a give at step {step}: {held}")
    if give is not None and stale[1] != give[1]:
        problems.append(f"seat 2 named seq {stale[1]}, seat 1 gave with seq {give[1]}")
    if stale[2] is None or stale[1] is None or stale[1] >= stale[2]:
        problems.append(f"seat 2's seq {stale[1]} is not older than its turn push's {stale[2]}")
    if _code(stale[3]) != "ok":
        problems.append(f"seat 2's give naming seq {stale[1]} after the bounce: {stale[3]}")
    return problems


def test_simultaneous_gives_across_a_bounce(tmp_path: Path, pg_store_url: str) -> None:
    scenario = Scenario("gives across a bounce 3", GIVES, slots=(0, 0, 1, 1), driver=GivesDriver())
    check(play(scenario, tmp_path, pg_store_url), gives_promises)


# -- 4. random scenarios ------------------------------------------------------------------------
RANDOM_TABLES = {
    "crazy-eights": Table("crazy-eights", 3, 1, {"target": 30}),
    "around-the-world": Table("around-the-world", 3, 1),
    "seven-twenty-seven": Table("seven-twenty-seven", 4, 2, {"hands": 4}),
}
SEEDS = (1, 2, 3)


def random_scenario(game: str, seed: int, avoid: frozenset[str] = frozenset()) -> Scenario:
    """A random scenario of ``game``: its humans and two more logical connections, L0 on slot 0,
    L1 on slot 1, the others on either; ``avoid``: kinds of step left out."""
    table = RANDOM_TABLES[game]
    rng = random.Random(f"{game}:{seed}")
    n = len(table.humans) + 2
    slots = (0, 1, *(rng.choice((0, 1)) for _ in range(n - 2)))
    name = f"{game} {seed}" + "".join(f" no {kind}" for kind in sorted(avoid))
    return Scenario(name, table, slots, driver=RandomDriver(seed, avoid=avoid))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("game", sorted(RANDOM_TABLES))
def test_random_scenarios(game: str, seed: int, tmp_path: Path, pg_store_url: str) -> None:
    scenario = random_scenario(game, seed)
    outcome = play(scenario, tmp_path, pg_store_url)
    check(outcome)
    missed = scenario.driver.todo  # type: ignore[union-attr]
    assert not missed, f"{outcome.describe()} made no {missed} step: try other seeds"


@pytest.mark.parametrize("game", sorted(RANDOM_TABLES))
def test_random_scenarios_without_takeovers_or_stale_acts(
    game: str, tmp_path: Path, pg_store_url: str
) -> None:
    """Joins, acts, leaves, watches, resumes of free seats and bounces only: what the host kept
    alike before seat records and the freshness rule on records (so a harness that saw
    differences where there are none would fail here)."""
    outcome = play(
        random_scenario(game, 1, frozenset({"takeover", "stale"})), tmp_path, pg_store_url
    )
    check(outcome)
    assert "bounce" in {s.op for s in outcome.steps}


# -- the comparison itself ----------------------------------------------------------------------
def _transcript(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "replies": [[0, "join", {"ok": True, "result": {"seat": 0}}], [1, "act", {"ok": True}]],
        "events": {4: [0, "seat_taken", {"seat": 0}], 5: [1, "action", {"seat": 0}]},
        "turns": [[1, [4, [{"type": "draw"}]]]],
        "others": [],
        "notes": [],
        "clashes": [],
    }
    return {**base, **changes}


def test_agreeing_transcripts_give_no_report() -> None:
    same = {"L0": _transcript(), "L1": _transcript()}
    assert compare({"A": same, "B": same, "C": same}, [Step("join", 0, 0), Step("act", 0)]) is None


def test_the_report_names_the_first_difference() -> None:
    steps = [Step("join", 0, 0), Step("act", 1), Step("bounce")]
    refused = {"ok": False, "error": {"code": "not_seated"}}
    a = {"L0": _transcript(), "L1": _transcript()}
    c = {
        "L0": _transcript(events={4: [0, "seat_taken", {"seat": 0}], 6: [2, "x", {}]}),
        "L1": _transcript(
            replies=[[0, "join", {"ok": True, "result": {"seat": 0}}], [1, "act", refused]]
        ),  # fmt: skip
    }
    report = compare({"A": a, "B": a, "C": c}, steps, "a test")
    assert report is not None
    lines = report.splitlines()
    assert lines[1] == "first difference: L1 at step 1 (act L1): its reply to act #2"
    assert (
        lines[2].startswith("  A (one host): {")
        and lines[3].startswith("  B (")
        and (lines[3].endswith("same as A"))
    )
    assert "not_seated" in lines[4]
    assert "L0 events: step 1 (act L1), the event push of seq 5; A/B agree, C differ" in report


def test_a_record_pushed_twice_differently_is_reported() -> None:
    clash = _transcript(clashes=[[3, 5, ["action", {}], ["action", {"seat": 1}]]])
    same = {"L0": clash}
    report = compare({"A": same, "B": same, "C": same}, [Step("view", 0)] * 4)
    assert report is not None and "L0 clashes: step 3" in report


def test_values_that_differ_past_the_reports_cut_still_differ() -> None:
    long_a = {"ok": True, "result": {"view": "x" * 1000 + "a"}}
    long_b = {"ok": True, "result": {"view": "x" * 1000 + "b"}}
    a = {"L0": _transcript(replies=[[0, "view", long_a]])}
    b = {"L0": _transcript(replies=[[0, "view", long_b]])}
    report = compare({"A": a, "B": a, "C": b}, [Step("view", 0)])
    assert report is not None and "L0 replies: step 0" in report


def test_a_push_compares_without_the_step_it_came_in() -> None:
    """A host that follows another's appends may push a ``detached`` a step later."""
    detached = {"push": "detached", "session": "s", "seat": 0, "reason": "resumed"}
    a = {"L0": _transcript(others=[[1, detached]])}
    c = {"L0": _transcript(others=[[2, detached]])}
    assert compare({"A": a, "B": a, "C": c}, [Step("view", 0)] * 3) is None
    c = {"L0": _transcript(others=[[1, {**detached, "seat": 1}]])}
    assert compare({"A": a, "B": a, "C": c}, [Step("view", 0)] * 3) is not None


def test_what_a_spectator_was_not_shown_across_a_bounce_is_left_out() -> None:
    watcher = Logical(0, 0)
    for seq in (3, 4, 5, 6):
        watcher.events[seq] = (0, "seat_released", {"seat": seq})
    watcher.hidden.append((3, 5))  # it saw seq 3, closed, watched again at seq 5
    assert sorted(watcher.transcript()["events"]) == [3, 6]


# -- 5. undo by consent, across a bounce --------------------------------------------------------
class UndoDriver:
    """Crazy Eights for two: L0 and L1 take seats 0 and 1, L2 watches; the seat to act plays
    (the scenario's seeded draws). After the first draw its seat asks to take it back (refused:
    it showed a card). After the first play that drew nothing, its seat asks, the other refuses,
    it asks again, a bounce (the request waits in the log), the other accepts. After the next
    such play its seat asks and the other plays on (the request lapses). Then a few more
    moves."""

    def __init__(self, max_steps: int = 120, after: int = 3) -> None:
        self.max_steps = max_steps
        self.after = after
        self.plan: list[Step] = []
        self.acted_at = -1
        self.drew: int | None = None  # the step of the undo after a draw
        self.first: int | None = None  # the step of the first undo of a play
        self.second: int | None = None  # the step of the undo that lapses

    @staticmethod
    def last_action(t: Topology) -> tuple[int, str, bool] | None:
        """The seat and type of the last action topology A's monitor saw, and whether its
        events are plays only (nothing drawn, the deal not over)."""
        events = t.monitor_events
        seqs = [s for s in sorted(events) if events[s][0] == "action"]
        if not seqs:
            return None
        at = seqs[-1]
        kind, body = events[at]
        after = [events[s] for s in sorted(events) if s > at]
        clean = all(k == "event" and e.get("type") == "played" for k, e in after)
        return body["seat"], body["action"]["type"], clean

    def __call__(self, t: Topology, i: int) -> Step | None:
        if i < 2:
            return Step("join", i, i)
        if i == 2:
            return Step("watch", 2)
        if self.plan:
            return self.plan.pop(0)
        snap = t.snap
        if snap.get("ended") or i >= self.max_steps:
            return None
        if self.second is not None and self.drew is not None:
            if not self.after:
                return None
            self.after -= 1
        last = self.last_action(t) if self.acted_at == i - 1 else None
        if last is not None:
            seat, kind, clean = last
            if kind == "draw" and self.drew is None:
                self.drew = i
                return Step("undo", seat)
            if kind == "play" and clean and self.first is None:
                self.first = i
                other = 1 - seat
                self.plan = [
                    Step("refuse", other),
                    Step("undo", seat),
                    Step("bounce"),
                    Step("accept", other),
                ]
                return Step("undo", seat)
            if kind == "play" and clean and self.second is None and self.first is not None:
                self.second = i
                return Step("undo", seat)  # the other seat, to act, plays on next
        to_act = snap.get("to_act", [])
        if not to_act:
            return None
        self.acted_at = i
        return Step("act", to_act[0])


def undo_promises(outcome: Outcome, name: str) -> list[str]:
    d: UndoDriver = outcome.scenario.driver  # type: ignore[assignment]
    if d.drew is None or d.first is None or d.second is None:
        return [f"the seeded play never made every undo case ({d.drew}, {d.first}, {d.second})"]
    problems = []

    def result(conn: int, step: int) -> Any:
        return _reply(outcome, name, conn, step)

    drew = result(outcome.steps[d.drew].conn, d.drew)  # type: ignore[arg-type]
    if _code(drew) != "cannot_undo" or drew["error"]["reason"] != "not_undoable":
        problems.append(f"an undo after a draw was answered {drew}")
    seat = outcome.steps[d.first].conn
    other = 1 - seat  # type: ignore[operator]
    want = [
        (seat, d.first, "asked"),
        (other, d.first + 1, "refused"),
        (seat, d.first + 2, "asked"),
        (other, d.first + 4, "done"),
        (outcome.steps[d.second].conn, d.second, "asked"),
    ]
    for conn, step, status in want:
        got = result(conn, step)
        if _code(got) != "ok" or got["result"]["status"] != status:
            problems.append(f"L{conn} at step {step}: {got}, not {status}")
    lapsed = [p for _, p in outcome.conn(name, 2).others if p.get("push") == "undo_refused"]
    if [p["reason"] for p in lapsed] != ["refused", "acted"]:
        problems.append(f"the spectator's undo_refused pushes: {lapsed}")
    done = [p for _, p in outcome.conn(name, 2).others if p.get("push") == "undo_done"]
    if len(done) != 1:
        problems.append(f"the spectator's undo_done pushes: {done}")
    expiries = outcome.topologies[name].expiries
    if not expiries or any(len(ats) != 1 for ats in expiries.values()):
        problems.append(f"the hosts gave these expiry times per request: {expiries}")
    return problems


def test_undo_by_consent_across_a_bounce(tmp_path: Path, pg_store_url: str) -> None:
    scenario = Scenario(
        "undo by consent 1",
        Table("crazy-eights", 2, 0, {"target": 30}),
        slots=(0, 1, 1),
        driver=UndoDriver(),
    )
    outcome = play(scenario, tmp_path, pg_store_url)
    check(outcome, undo_promises)
    engine, records = load(tmp_path / "A" / "sessions" / f"{scenario.session}.jsonl")
    assert [r.type for r in records].count("undo") == 1
    assert verify_log(engine, records) is None
