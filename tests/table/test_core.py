"""The table core on its own: whole sessions of every game with no trio, no disk and no TCP,
a fake clock, and the rules that make one host, a restarted host and two hosts answer alike
(host/table/core.py)."""

from __future__ import annotations

import datetime
import math
import random

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from host.plugins.registry import load_registry
from host.table.commands import Act, Join, Leave, Resume, Undo, UndoAnswer, View, Watch
from host.table.core import (
    ABSENT_AFTER,
    RESUME_BURST,
    RESUME_PERIOD,
    SETTLE,
    WINDOW,
    Table,
    TableSettings,
    format_ts,
    hash_token,
    new_token,
    parse_ts,
)
from host.table.engine import Record
from host.table.history import verify_log
from protocol.messages import ErrorCode
from protocol.replies import Accepted, Joined, PresencePush, Refused, Resumed, ViewReply
from tests.table.world import T0, Client, World, new_log

REGISTRY = load_registry()
GAMES = sorted(g for g in REGISTRY.engines if g in REGISTRY.games)
BUILT_IN = ["around-the-world", "crazy-eights", "seven-twenty-seven"]


def test_a_seat_token_never_begins_with_a_dash(monkeypatch):
    """A token beginning with ``-`` is taken for an option by ``gamehost play --resume TOKEN``
    (argparse): such draws are thrown away and drawn again."""
    import secrets

    draws = iter(["-dash0", "-dash1", "kept-one"])
    monkeypatch.setattr(secrets, "token_urlsafe", lambda n: next(draws))
    assert new_token() == "kept-one"
    monkeypatch.undo()
    tokens = [new_token() for _ in range(2000)]  # about 31 of them would begin with "-"
    assert all(t[0] != "-" and len(t) == 32 for t in tokens)
    assert len(set(tokens)) == len(tokens)
    assert len(hash_token(tokens[0])) == 64


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


def _pushes(c: Client) -> list:
    """What a client was shown of the session: its events and presence pushes by seq, its
    ``detached`` pushes."""
    return [sorted(c.events.items()), sorted(c.presence.items()), list(c.detached)]


@pytest.mark.parametrize("how", ["closing", "gone"])
@pytest.mark.parametrize("hosts", [1, 2])
def test_a_resume_whose_connection_closes_before_its_reply_takes_nothing(
    how: str, hosts: int
) -> None:
    """A resume from a connection already closing when the table decides, or that goes away
    once its record is durable (before its reply), takes nothing: its ``seat_held`` is
    followed by one giving the seat straight back; the holder, on this host or another, is
    not told ``detached``, keeps acting, and is shown the same pushes either way."""
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2), hosts=hosts)
    a, b = join_all(world, 2)
    n = len(world.log)
    late = world.client("late", host=hosts - 1)
    reply = world.command(
        late, Resume(a.token, after=0), closing=how == "closing", gone=how == "gone"
    )
    assert isinstance(reply, Refused) and reply.code is ErrorCode.UNAVAILABLE
    held, back = world.records()[n:]
    assert (held.type, held.data["holder"]) == ("seat_held", late.key)
    assert (back.type, back.data) == (
        "seat_held",
        {"seat": 0, "holder": a.key, "returned": held.seq},
    )
    assert not a.detached and a.role == 0
    for h in world.hosts:
        assert h.table.holders[0] == a.key
    assert [p.connected for p in (a.presence[held.seq], a.presence[back.seq])] == [True, True]
    assert b.events[back.seq] == ("seat_held", {"seat": 0})
    assert world.hosts[0].table.resumes[0] and len(world.hosts[0].table.resumes[0]) == 1
    mover = a if a.turn is not None and a.turn.seq == a.last_seq else b
    assert play_turn(world, [mover], random.Random(2))  # the holder still plays
    assert verify_log(e, world.records()) is None


def test_a_closing_resume_of_a_seat_nobody_holds_leaves_it_so() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2))
    a, _ = join_all(world, 2)
    world.close(a)
    n = len(world.log)
    late = world.client("late")
    world.command(late, Resume(a.token), gone=True)
    back = world.records()[n + 1]
    assert (back.type, back.data["reason"], back.data["returned"]) == ("seat_released", "gone", n)
    assert world.hosts[0].table.holders[0] is None


def test_a_takeover_from_another_host_is_told_once_it_stands() -> None:
    """Host 2's resume takes a seat held on host 1 and stands: host 1 holds its connection's
    pushes back and answers its act ``not_seated`` (the log says so), then tells it
    ``detached`` after :data:`SETTLE` seconds, or at once when it sends a command; either way
    it is shown what a connection replaced on one host is: the ``detached`` push alone."""
    e = engine("crazy-eights")
    for by_command in (False, True):
        world = World(e, new_log(e, 2), hosts=2)
        a, b = join_all(world, 2)
        seen = _pushes(a)
        tab = world.client("tab", host=1)
        assert isinstance(world.command(tab, Resume(a.token, after=a.last_seq)), Resumed)
        assert world.hosts[0].table.holders[0] == tab.key and not a.detached
        if by_command:
            refused = world.command(a, Act({"type": "draw"}))
            assert isinstance(refused, Refused) and refused.code is ErrorCode.NOT_SEATED
        else:
            world.advance(SETTLE - 0.01)
            assert not a.detached
            world.advance(0.02)
        assert [(d.seat, d.reason) for d in a.detached] == [(0, "resumed")]
        assert _pushes(a)[:2] == seen[:2] and a.role == "none"
        assert not world.hosts[0].table.subs.get(a.key)


def test_a_given_back_seat_shows_the_holder_the_same_on_one_host_and_across_two() -> None:
    e = engine("crazy-eights")
    shown = []
    for hosts, how in ((1, "gone"), (2, "gone"), (2, "closing")):
        world = World(e, new_log(e, 2), hosts=hosts)
        a, _ = join_all(world, 2)
        late = world.client("late", host=hosts - 1)
        world.command(late, Resume(a.token), closing=how == "closing", gone=how == "gone")
        shown.append(_pushes(a))
    assert shown[0] == shown[1] == shown[2]


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


@pytest.mark.parametrize("restart", [False, True])
def test_a_seat_resumed_too_often_is_refused_for_a_while_by_the_log(restart: bool) -> None:
    """A reconnect storm: 20 resumes of one seat within 60 s, then one more is ``overloaded``
    with ``retry_after`` and writes nothing; a restarted host counts the same from the log."""
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2))
    a, _ = join_all(world, 2)
    for i in range(RESUME_BURST):
        tab = world.client(f"tab{i}")
        assert isinstance(world.command(tab, Resume(a.token)), Resumed)
        world.close(tab)
        world.now += 1.0
    n = len(world.log)
    if restart:
        world.restart()
        n = len(world.log)
    late = world.client("late")
    refused = world.command(late, Resume(a.token))
    assert isinstance(refused, Refused) and refused.code is ErrorCode.OVERLOADED
    assert refused.extra["retry_after"] == pytest.approx(RESUME_PERIOD - RESUME_BURST, abs=0.11)
    assert len(world.log) == n
    world.now += refused.extra["retry_after"]
    assert isinstance(world.command(late, Resume(a.token)), Resumed)


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


def test_a_record_from_this_hosts_future_counts_from_now() -> None:
    """Clock skew: a record whose ``ts`` is ahead of this host's clock (its writer's clock is
    ahead) starts the timers now, not at that future time; one from the past counts as
    written."""
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2, turn_timeout=10.0))
    join_all(world, 2)
    records = world.records()
    for shift, start in ((20.0, T0), (-5.0, T0 - 5.0)):
        moved = [
            Record(r.seq, r.type, r.data, ts=format_ts(parse_ts(r.ts) + shift)) for r in records
        ]
        table = Table(world.sid, e, moved, TableSettings(), now=T0, instance="x")
        assert table.turn_started == pytest.approx(start, abs=0.01)
        assert table.turn_deadline() == pytest.approx(start + 10.0, abs=0.01)


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


@pytest.mark.parametrize("bounce", ["none", "restart", "reconnect"])
def test_presence_records_do_not_use_up_the_freshness_window(bounce: str) -> None:
    """16 players of Around the World: a restart between two gives at one seq writes 16
    releases and 16 resumes (so do 16 reconnects on one host), more than the window's 32
    records; the second give, naming the older seq, is accepted all the same."""
    e = engine("around-the-world")
    world = World(e, new_log(e, 16, seed=b"\x00" * 32))
    clients = join_all(world, 16)
    seq = _round_two(world, clients, random.Random(5))
    first, second = [c for c in clients if c.turn is not None and c.turn.seq == seq][:2]
    give1, give2 = first.turn.legal[0], second.turn.legal[0]
    assert isinstance(world.command(first, Act(give1, expected=seq)), Accepted)
    before = world.hosts[0].table.seq
    if bounce == "restart":
        world.restart()
    elif bounce == "reconnect":
        for c in clients:
            world.close(c)
    if bounce != "none":
        for c in clients:
            world.reconnect(c)
            assert isinstance(world.command(c, Resume(c.token, after=c.last_seq)), Resumed)
        assert world.hosts[0].table.seq - before == 32  # 16 releases, 16 resumes
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
        st.sampled_from(
            ["act"] * 6 + ["stale", "bounce", "takeover", "leave", "view", "undo", "answer"]
        ),
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
        elif op == "undo" and c.role != "none":
            # the seat of the last action asks (any other is refused: acted_since)
            last = next((r for r in reversed(world.records()) if r.type == "action"), None)
            asker = next((x for x in clients if last and x.role == last.data["seat"]), c)
            if asker.role != "none":
                shown.append((asker.name, "undo", world.command(asker, Undo())))
                ask = world.hosts[asker.host].table.state.undo_ask
                for x in clients:  # half the time the others answer at once
                    if ask and i % 2 == 0 and x.role in ask.waiting:
                        reply = world.command(x, UndoAnswer(i % 4 == 0))
                        shown.append((x.name, "answer", reply))
        elif op == "answer" and c.role != "none":
            ask = world.hosts[c.host].table.state.undo_ask
            waiting = [x for x in clients if ask and x.role in ask.waiting and x.role != "none"]
            who = waiting[0] if waiting else c
            shown.append((who.name, "answer", world.command(who, UndoAnswer(i % 3 != 0))))
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
                sorted((seq, _presence(p)) for seq, p in c.presence.items()),
                sorted(c.undos.items()),
            )
        )
    return shown


def _presence(p: PresencePush) -> tuple[int, bool, str]:
    """A presence push as compared across modes: a bounce releases seats as ``gone`` when one
    host sees their connections close, as ``host_gone`` when a restarted host finds them held
    by its previous run (each mode says what happened; both are a connection lost)."""
    return p.seat, p.connected, "gone" if p.reason == "host_gone" else p.reason


def _norm(outcome: object) -> object:
    if isinstance(outcome, Resumed):
        return ("resumed", outcome.seat, outcome.snapshot)
    return outcome


@settings(max_examples=150)
@given(game=st.sampled_from(BUILT_IN), ops=OPS, seed=st.integers(0, 2**16))
def test_one_host_a_restarted_host_and_two_hosts_answer_alike(game, ops, seed) -> None:
    one = _script(game, ops, "one", seed)
    for entry in one:
        if len(entry) == 3 and entry[1] in ("undo", "answer"):
            reply = entry[2]
            event(f"{entry[1]}: {getattr(reply, 'status', None) or reply.extra.get('reason')}")
    assert _script(game, ops, "restart", seed) == one
    assert _script(game, ops, "two", seed) == one


def test_format_and_parse_ts_round_trip_to_the_millisecond() -> None:
    for t in (T0, T0 + 0.0004, T0 + 0.9995, T0 + 12.3456):
        text = format_ts(t)
        assert text.endswith("Z") and len(text) == 24
        back = parse_ts(text)
        assert 0 <= back - t < 0.001 + 1e-9
    assert parse_ts(None, 5.0) == 5.0 and parse_ts("garbage", 6.0) == 6.0


@given(st.lists(st.floats(0, 4e9, allow_nan=False), min_size=1, max_size=20))
def test_format_ts_is_the_utc_time_rounded_up_to_the_millisecond(times) -> None:
    # near times share their second's cached text, so neighbours are drawn as well
    for t in [x for near in times for x in (near, near + 0.0007, near + 0.5)]:
        ms = math.ceil(round(t * 1000, 3))
        stamp = datetime.datetime.fromtimestamp(ms // 1000, datetime.UTC)
        assert format_ts(t) == stamp.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


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


# -- presence and the turn deadline, from the log --------------------------------------------------
def _seen(c: Client) -> list[tuple[int, int, bool, str]]:
    return [(seq, p.seat, p.connected, p.reason) for seq, p in sorted(c.presence.items())]


def test_presence_pushes_follow_their_records_and_snapshots_show_who_is_connected() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 4, bots=1))
    a, b, c = join_all(world, 3)
    w = world.client("w")
    watching = world.command(w, Watch(view=True))
    assert watching.snapshot.connected == [True, True, True, True]  # the bot's seat too
    start = world.hosts[0].table.seq
    world.close(b)  # seq start + 1
    world.command(c, Leave())  # start + 2
    b2 = world.client("b2")
    world.command(b2, Resume(b.token))  # start + 3
    assert _seen(w) == [
        (start + 1, 1, False, "gone"),
        (start + 2, 2, False, "left"),
        (start + 3, 1, True, "resumed"),
    ]
    assert _seen(a)[-3:] == _seen(w)  # every subscriber gets them, each after its event push
    assert [(s, p) for s, p, *_ in _seen(a)[:2]] == [(3, 1), (4, 2)]  # the joins before
    view = world.command(a, View())
    assert isinstance(view, ViewReply)
    assert view.snapshot.connected == [True, True, False, True]
    assert w.views[-1].connected == [True, True, False, True]
    # a resume that catches up is pushed the presence pushes of the records it missed
    c2 = world.client("c2")
    world.command(c2, Resume(c.token, after=start))
    assert _seen(c2) == [*_seen(w)[:3], (start + 4, 2, True, "resumed")]
    world.restart()  # every seat's connection died with the host: released, host_gone
    rel = [r for r in world.records() if r.type == "seat_released" and r.seq > start + 4]
    assert [r.data["reason"] for r in rel] == ["host_gone"] * 3
    a2 = world.client("a2")
    resumed = world.command(a2, Resume(a.token, after=start + 4))
    assert resumed.snapshot.connected == [True, False, False, True]
    assert _seen(a2)[:3] == [(r.seq, r.data["seat"], False, "host_gone") for r in rel]


def test_the_turn_deadline_is_read_from_the_log_alike_on_every_host() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2, turn_timeout=60.0), hosts=2)
    a = world.client("a", 0)
    b = world.client("b", 1)
    for c in (a, b):
        joined = world.command(c, Join(c.name, view=True))
        c.token = joined.token
    play = max(parse_ts(r.ts) for r in world.records() if r.type in ("seat_taken", "event"))
    first = a if a.turn is not None else b
    other = b if first is a else a
    due = first.turn.deadline
    assert due is not None and due.at == format_ts(play + 60.0)
    assert due.seconds_left == 60.0 and first.turn.to_act == [first.turn.seat]
    assert other.views[-1].deadline == due and other.views[-1].to_act == first.turn.to_act
    world.advance(20.0)
    snaps = [world.command(c, View()).snapshot for c in (a, b)]  # one on each host
    assert [s.deadline.at for s in snaps] == [due.at, due.at]
    assert [s.deadline.seconds_left for s in snaps] == [40.0, 40.0]
    world.close(other)  # a presence record: the turn timer does not move
    assert world.command(first, View()).snapshot.deadline.at == due.at
    world.restart(first.host)  # its seat is released as host_gone: its timer starts again
    gone = world.records()[-1]
    assert (gone.type, gone.data["reason"]) == ("seat_released", "host_gone")
    again = format_ts(parse_ts(gone.ts) + 60.0)
    world.reconnect(first)
    resumed = world.command(first, Resume(first.token, after=first.last_seq))
    assert resumed.snapshot.deadline.at == again  # read from the records, on the new host
    assert first.turn.deadline.at == again and first.turn.deadline.seconds_left == 60.0
    other.key = world.hosts[other.host].key()
    theirs = world.command(other, Resume(other.token)).snapshot.deadline
    assert theirs is not None and theirs.at == again  # and on the other host
    world.advance(5.0)
    world.command(first, Act(first.turn.legal[0], expected=first.turn.seq))
    acted = next(r for r in reversed(world.records()) if r.type == "action")
    now = world.command(first, View()).snapshot.deadline
    assert now is not None and now.at == format_ts(parse_ts(acted.ts) + 60.0)  # a record of play
    assert now.at != again


def test_no_deadline_without_a_timer_or_while_a_bot_is_to_act() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2))
    a, b = join_all(world, 2)
    turn = a.turn or b.turn
    assert turn.deadline is None and turn.to_act == [turn.seat]
    assert world.command(a, View()).snapshot.timers.turn_timeout is None
    slow = World(e, new_log(e, 2, bots=1, turn_timeout=30.0), settings=TableSettings(bot_delay=5.0))
    (c,) = join_all(slow, 1)
    snap = slow.command(c, View()).snapshot
    if snap.to_act == [1]:  # the bot is to act: it moves by itself
        assert snap.deadline is None
        slow.advance(5.0)
        snap = slow.command(c, View()).snapshot
    assert snap.to_act == [0] and snap.deadline is not None
    assert snap.timers.turn_timeout == 30.0 and snap.timers.absent_after == ABSENT_AFTER
    assert snap.options == e.codec.options_to_wire(e.codec.options_from_wire({}, 2))
