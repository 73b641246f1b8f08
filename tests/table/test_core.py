"""The table core on its own: whole sessions of every game with no trio, no disk and no TCP,
a fake clock, and the rules that make one host, a restarted host and two hosts answer alike
(host/table/core.py)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from host.plugins.registry import load_registry
from host.table.commands import Act, Join, Leave, Resume, View
from host.table.core import ABSENT_AFTER, WINDOW, TableSettings, format_ts, parse_ts
from host.table.engine import Record
from host.table.history import verify_log
from protocol.messages import ErrorCode
from protocol.replies import Accepted, Joined, Refused, Resumed
from tests.table.world import T0, Client, World, new_log

REGISTRY = load_registry()
GAMES = sorted(g for g in REGISTRY.engines if g in REGISTRY.games)
BUILT_IN = ["around-the-world", "crazy-eights", "seven-twenty-seven"]


def engine(game: str):
    return REGISTRY.engines[game]


def join_all(world: World, n: int, host_of=lambda i: 0) -> list[Client]:
    clients = []
    for i in range(n):
        c = world.client(f"p{i}", host_of(i))
        reply = world.command(c, Join(f"p{i}"))
        assert isinstance(reply, Joined), reply
        c.token = reply.token
        c.events[reply.snapshot.seq] = ("joined", None)
        clients.append(c)
    return clients


def play_turn(world: World, clients: list[Client], rng: random.Random) -> bool:
    """One client whose latest turn push is current acts (a random legal action); False when
    nobody can."""
    seq = max(c.last_seq for c in clients)
    ready = [c for c in clients if c.turn is not None and c.turn.seq == seq and c.role != "none"]
    if not ready:
        return False
    c = rng.choice(ready)
    reply = world.command(c, Act(rng.choice(c.turn.legal), expected=c.turn.seq))
    assert isinstance(reply, Accepted), reply
    return True


# -- whole sessions --------------------------------------------------------------------------------
@pytest.mark.parametrize("game", BUILT_IN)
def test_every_game_plays_to_its_end_through_the_table_alone(game: str) -> None:
    e = engine(game)
    seats = max(e.game.info.min_seats, 3)
    world = World(e, new_log(e, seats, bots=1))
    clients = join_all(world, seats - 1)
    rng = random.Random(game)
    for _ in range(20_000):
        if not play_turn(world, clients, rng):
            break
    assert all(len(c.ended) == 1 for c in clients), "every seat saw the end"
    for c in clients:  # gapless from the join on, the last one the ended record
        seqs = sorted(c.events)
        assert seqs == list(range(seqs[0], seqs[-1] + 1))
        assert c.events[seqs[-1]][0] == "ended"
    records = world.records()
    assert records[-1].type == "ended" and records[-1].data["outcome"] is not None
    assert verify_log(e, records) is None


def test_a_bot_table_runs_its_bots_on_the_fake_clock_with_their_delay() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2, bots=1), settings=TableSettings(bot_delay=2.0))
    (c,) = join_all(world, 1)
    moves = 0
    while not c.ended and moves < 2_000:
        if c.turn is not None and c.turn.seq == c.last_seq:
            world.command(c, Act(c.turn.legal[0], expected=c.turn.seq))
            moves += 1
        else:
            before = world.now
            world.advance(2.0)
            assert world.now - before == 2.0
    assert c.ended


# -- who holds a seat is in the log ----------------------------------------------------------------
def test_a_takeover_is_a_record_and_the_replaced_connection_is_told() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2))
    a, b = join_all(world, 2)
    tab = world.client("tab")
    reply = world.command(tab, Resume(a.token, after=a.last_seq))
    assert isinstance(reply, Resumed) and reply.seat == 0
    held = world.records()[-1]
    assert (held.type, held.data["seat"], held.data["holder"]) == ("seat_held", 0, tab.key)
    assert [(d.seat, d.reason) for d in a.detached] == [(0, "resumed")]
    assert b.events[held.seq] == ("seat_held", {"seat": 0})  # everyone else sees it
    refused = world.command(a, Act({"type": "draw"}))
    assert isinstance(refused, Refused) and refused.code is ErrorCode.NOT_SEATED
    before = len(a.events)
    play_turn(world, [tab, b], random.Random(1))
    assert len(a.events) == before  # nothing more reaches the old connection


def test_a_resume_from_a_closing_connection_takes_nothing() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2))
    a, _ = join_all(world, 2)
    n = len(world.log)
    late = world.client("late")
    reply = world.command(late, Resume(a.token, after=0), closing=True)
    assert isinstance(reply, Refused) and reply.code is ErrorCode.UNAVAILABLE
    assert len(world.log) == n and not a.detached
    assert world.hosts[0].table.holders[0] == a.key


def test_a_connection_that_goes_or_leaves_releases_its_seat_by_a_record() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 3))
    a, b, c = join_all(world, 3)
    world.close(a)
    world.command(b, Leave())
    rel = [r for r in world.records() if r.type == "seat_released"]
    assert [(r.data["seat"], r.data["reason"]) for r in rel] == [(0, "gone"), (1, "left")]
    assert c.events[rel[0].seq] == ("seat_released", {"seat": 0})
    assert world.hosts[0].table.holders == [None, None, c.key]


def test_a_restarted_host_releases_the_seats_its_old_connections_held_in_seat_order() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 3))
    join_all(world, 3)
    world.restart()
    rel = [r for r in world.records() if r.type == "seat_released"]
    assert [(r.data["seat"], r.data["reason"]) for r in rel] == [
        (0, "host_gone"),
        (1, "host_gone"),
        (2, "host_gone"),
    ]
    assert world.hosts[0].table.holders == [None, None, None]
    assert verify_log(e, world.records()) is None


# -- timers count from the log ---------------------------------------------------------------------
def test_a_turn_timer_counts_from_the_record_not_from_a_restart() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2, turn_timeout=60.0))
    a, b = join_all(world, 2)
    world.close(a)
    world.close(b)  # nobody holds a seat: a restart releases nothing, the clock runs on
    last_play = max(
        parse_ts(r.ts) for r in world.records() if r.type in ("seat_taken", "action", "event")
    )
    world.advance(50.0)
    world.restart()
    world.advance(9.0)
    assert not any(r.data.get("timed_out") for r in world.records() if r.type == "action")
    world.advance(2.0)
    timed = [r for r in world.records() if r.type == "action" and r.data.get("timed_out")]
    assert timed and parse_ts(timed[0].ts) - last_play == pytest.approx(60.0, abs=0.01)


def test_abandonment_counts_from_the_release_of_the_last_seat() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2), settings=TableSettings(abandon_after=100.0))
    a, b = join_all(world, 2)
    world.advance(500.0)  # attended: not abandoned
    assert not world.hosts[0].table.ended
    world.close(a)
    world.advance(50.0)
    world.close(b)
    released = parse_ts(world.records()[-1].ts)
    world.advance(99.0)
    assert not world.hosts[0].table.ended
    world.advance(2.0)
    last = world.records()[-1]
    assert (last.type, last.data["aborted"]) == ("ended", "abandoned")
    assert parse_ts(last.ts) - released == pytest.approx(100.0, abs=0.01)


def test_an_absent_seat_is_played_at_once_after_three_timeouts_until_resumed() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2, turn_timeout=10.0))
    a, b = join_all(world, 2)
    world.close(b)
    rng = random.Random(3)
    start = world.now
    for _ in range(200):
        if a.turn is not None and a.turn.seq == a.last_seq:
            world.command(a, Act(rng.choice(a.turn.legal), expected=a.turn.seq))
        else:
            world.advance(10.0)
        if world.hosts[0].table.timeouts[1] >= ABSENT_AFTER + 2 or a.ended:
            break
    table = world.hosts[0].table
    assert table.timeouts[1] >= ABSENT_AFTER
    timed = [r for r in world.records() if r.type == "action" and r.data.get("timed_out")]
    gaps = [parse_ts(r.ts) for r in timed]
    assert gaps[0] - start >= 10.0
    b2 = world.client("b2")
    world.command(b2, Resume(b.token))
    assert table.timeouts[1] == 0 and table.holders[1] == b2.key


# -- freshness from the records --------------------------------------------------------------------
def _round_two(world: World, clients: list[Client], rng: random.Random) -> int:
    """Play Around the World until two seats owe a give at the same seq; that seq."""
    for _ in range(500):
        seq = max(c.last_seq for c in clients)
        ready = [c for c in clients if c.turn is not None and c.turn.seq == seq]
        if len(ready) >= 2 and all(
            any(a.get("type") == "give" for a in c.turn.legal) for c in ready
        ):
            return seq
        if not play_turn(world, clients, rng):
            break
    raise AssertionError("no simultaneous gives")


@pytest.mark.parametrize("restart", [False, True])
def test_simultaneous_gives_at_one_seq_are_both_accepted_across_a_restart(restart: bool) -> None:
    e = engine("around-the-world")
    world = World(e, new_log(e, 5, seed=b"\x00" * 32))
    clients = join_all(world, 5)
    seq = _round_two(world, clients, random.Random(5))
    first, second = [c for c in clients if c.turn is not None and c.turn.seq == seq][:2]
    give1, give2 = first.turn.legal[0], second.turn.legal[0]
    assert isinstance(world.command(first, Act(give1, expected=seq)), Accepted)
    if restart:
        world.restart()
        world.reconnect(second)
        resumed = world.command(second, Resume(second.token, after=second.last_seq))
        assert isinstance(resumed, Resumed)
    reply = world.command(second, Act(give2, expected=seq))
    assert isinstance(reply, Accepted), reply


def test_an_act_older_than_the_window_is_a_conflict() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2))
    a, b = join_all(world, 2)
    first = a if a.turn is not None else b
    old = first.turn
    rng = random.Random(8)
    while world.hosts[0].table.seq - old.seq <= WINDOW and not first.ended:
        play_turn(world, [a, b], rng)
    reply = world.command(first, Act(old.legal[0], expected=old.seq))
    assert isinstance(reply, Refused) and reply.code in (
        ErrorCode.CONFLICT,
        ErrorCode.SESSION_ENDED,
    )


# -- one host, a restarted host and two hosts answer alike ----------------------------------------
OPS = st.lists(
    st.tuples(
        st.sampled_from(["act"] * 6 + ["stale", "bounce", "takeover", "leave", "view"]),
        st.integers(0, 5),
    ),
    min_size=1,
    max_size=80,
)


def _script(game: str, ops: list[tuple[str, int]], mode: str, seed: int) -> list[object]:
    """Run ``ops`` on a fresh session of ``game`` and return what every logical client was
    shown. ``mode``: ``one`` host; ``restart`` (a bounce kills and restarts the host); ``two``
    hosts on one log (client i on host i % 2)."""
    e = engine(game)
    hosts = 2 if mode == "two" else 1
    n = max(3, e.game.info.min_seats)
    world = World(e, new_log(e, n, bots=0), hosts=hosts)
    host_of = (lambda i: i % 2) if mode == "two" else (lambda i: 0)
    clients = join_all(world, n, host_of)
    rng = random.Random(seed)
    shown: list[object] = []
    seen_turns: dict[str, list[object]] = {}  # each client's turn pushes current at a step
    for op, i in ops:
        for x in clients:
            mine = seen_turns.setdefault(x.name, [])
            if x.turn is not None and x.turn.seq == x.last_seq and (not mine or mine[-1] != x.turn):
                mine.append(x.turn)
        c = clients[i % n]
        ready = [x for x in clients if x.turn is not None and x.turn.seq == x.last_seq]
        if op == "act" and ready:
            c = ready[i % len(ready)]
            shown.append(
                (
                    c.name,
                    "act",
                    c.turn.seq,
                    world.command(c, Act(rng.choice(c.turn.legal), expected=c.turn.seq)),
                )
            )
        elif op == "stale" and len(seen_turns.get(c.name, ())) > 1 and c.role != "none":
            old = seen_turns[c.name][-2]
            shown.append(
                (
                    c.name,
                    "stale",
                    old.seq,
                    world.command(c, Act(rng.choice(old.legal), expected=old.seq)),
                )
            )
        elif op == "view":
            shown.append((c.name, "view", world.command(c, View())))
        elif op == "leave" and c.role != "none":
            shown.append((c.name, "leave", world.command(c, Leave())))
        elif op == "takeover":
            other = clients[(i + 1) % n]
            if other.token is not None:
                # a second tab of `other`'s player, on c's host
                tab = world.client(f"{other.name}-tab{len(shown)}", c.host)
                got = world.command(tab, Resume(other.token, after=other.last_seq))
                shown.append((tab.name, "takeover", _norm(got)))
                clients[(i + 1) % n] = tab
                tab.token = other.token
                tab.events = {**other.events, **tab.events}
        elif op == "bounce":
            held = sorted(
                (c for c in clients if c.role not in ("none", None)), key=lambda c: c.role
            )
            if mode == "restart":
                world.restart()
            else:
                for c2 in held:
                    world.close(c2)
            for c2 in clients:
                world.reconnect(c2)
                if c2.token is not None:
                    got = world.command(c2, Resume(c2.token, after=c2.last_seq))
                    shown.append((c2.name, "resume", _norm(got)))
        if any(x.ended for x in clients):
            break
    for c in clients:
        shown.append(
            (
                c.name,
                sorted(c.events.items()),
                [(d.seat, d.reason) for d in c.detached],
                len(c.ended),
            )
        )
    return shown


def _norm(outcome: object) -> object:
    if isinstance(outcome, Resumed):
        return ("resumed", outcome.seat, outcome.snapshot)
    return outcome


@settings(max_examples=150)
@given(game=st.sampled_from(BUILT_IN), ops=OPS, seed=st.integers(0, 2**16))
def test_one_host_a_restarted_host_and_two_hosts_answer_alike(game, ops, seed) -> None:
    one = _script(game, ops, "one", seed)
    assert _script(game, ops, "restart", seed) == one
    assert _script(game, ops, "two", seed) == one


def test_format_and_parse_ts_round_trip_to_the_millisecond() -> None:
    for t in (T0, T0 + 0.0004, T0 + 0.9995, T0 + 12.3456):
        text = format_ts(t)
        assert text.endswith("Z") and len(text) == 24
        back = parse_ts(text)
        assert 0 <= back - t < 0.001 + 1e-9
    assert parse_ts(None, 5.0) == 5.0 and parse_ts("garbage", 6.0) == 6.0


def test_presence_records_fold_and_verify() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2))
    a, b = join_all(world, 2)
    tab = world.client("tab")
    world.command(tab, Resume(a.token))
    world.close(tab)
    records = world.records()
    kinds = [r.type for r in records]
    assert "seat_held" in kinds and "seat_released" in kinds
    assert verify_log(e, records) is None
    bad = [*records[:-1], Record(records[-1].seq, "seat_released", {"seat": 0, "reason": "??"})]
    assert verify_log(e, bad) is not None
