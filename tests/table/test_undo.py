"""Undo by consent on the table core alone (host/table/core.py, host/table/engine.py): asked,
refused, accepted, lapsed and expired; from the log alike on one host, a restarted host and two
hosts; and, for every game, an accepted undo gives back the state and every viewer's view."""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from host.errors import UndoRefused
from host.plugins.registry import load_registry
from host.table.commands import Act, Resume, Undo, UndoAnswer, View, Watch
from host.table.core import UNDO_EXPIRES, TableSettings, format_ts, parse_ts
from host.table.engine import BadRecord, Record
from host.table.history import fork_records, verify_log
from protocol.messages import ErrorCode
from protocol.replies import (
    Accepted,
    Refused,
    UndoAskedPush,
    UndoDonePush,
    UndoRefusedPush,
    UndoResult,
)
from tests.table.test_core import BUILT_IN, join_all
from tests.table.world import Client, World, new_log

REGISTRY = load_registry()


def engine(game: str):
    return REGISTRY.engines[game]


def current(c: Client) -> bool:
    return c.turn is not None and c.turn.seq == c.last_seq and c.role != "none"


def to_play(clients: list[Client]) -> Client:
    return next(c for c in clients if current(c))


def first_play(c: Client) -> dict:
    return next(a for a in c.turn.legal if a["type"] == "play")


def two_players(**kw) -> tuple[World, Client, Client]:
    """Crazy Eights for two humans: the seat to act first, then the other."""
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2, **kw))
    a, b = join_all(world, 2)
    first = to_play([a, b])
    return world, first, b if first is a else a


def refused(reply: object, reason: str) -> bool:
    return (
        isinstance(reply, Refused)
        and reply.code is ErrorCode.CANNOT_UNDO
        and reply.extra == {"reason": reason}
    )


def test_asked_refused_asked_again_and_accepted_the_state_is_the_one_before() -> None:
    world, a, b = two_players()
    before = world.command(a, View()).snapshot
    theirs = world.command(b, View()).snapshot
    legal = a.turn.legal
    assert isinstance(world.command(a, Act(first_play(a), expected=a.turn.seq)), Accepted)
    acted = [r for r in world.records() if r.type == "action"][-1]
    assert world.command(a, Undo()) == UndoResult(acted.seq + 2, "asked")
    asked = b.undos[acted.seq + 2]
    assert isinstance(asked, UndoAskedPush) and asked.request.waiting == [b.role]
    assert asked.request.seat == a.role and asked.request.action_seq == acted.seq
    assert world.command(b, View()).snapshot.undo == asked.request  # a resume would see it too
    assert world.command(b, UndoAnswer(False)) == UndoResult(acted.seq + 3, "refused")
    assert a.undos[acted.seq + 3] == UndoRefusedPush(
        world.sid, acted.seq + 3, acted.seq, "refused", b.role
    )
    assert world.command(a, View()).snapshot.undo is None
    assert world.command(a, Undo()) == UndoResult(acted.seq + 4, "asked")
    assert world.command(b, UndoAnswer(True)) == UndoResult(acted.seq + 6, "done")
    assert a.undos[acted.seq + 6] == UndoDonePush(world.sid, acted.seq + 6, a.role, acted.seq)
    kinds = [r.type for r in world.records()[acted.seq :]]
    assert kinds == [
        "action",
        "event",
        "undo_asked",
        "undo_answered",
        "undo_asked",
        "undo_answered",
        "undo",
    ]
    after = world.command(a, View()).snapshot
    assert (after.view, after.to_act) == (before.view, before.to_act)
    assert world.command(b, View()).snapshot.view == theirs.view
    assert current(a) and a.turn.legal == legal  # its turn again, with the same choices
    assert verify_log(world.engine, world.records()) is None
    world.restart()  # the state is the log's: a restarted host folds it the same
    assert world.hosts[0].table.state == world.engine.rebuild(world.records())
    assert (
        world.hosts[0].table.state.game == world.engine.rebuild(world.records()[: acted.seq]).game
    )


def test_an_undo_is_refused_after_a_draw_and_when_another_action_came_since() -> None:
    world, a, b = two_players()
    n = len(world.log)
    assert refused(world.command(a, Undo()), "nothing_to_undo")
    world.command(a, Act({"type": "draw"}, expected=a.turn.seq))
    assert refused(world.command(a, Undo()), "not_undoable")  # a card from the stock was shown
    assert refused(world.command(b, Undo()), "acted_since")  # the last action is a's
    assert refused(world.command(b, UndoAnswer(True)), "no_request")
    assert len(world.log) == n + 2  # the draw and its event: the refusals appended nothing
    while not any(a.turn.legal[i]["type"] == "play" for i in range(len(a.turn.legal))):
        world.command(a, Act({"type": "draw"}, expected=a.turn.seq))
    world.command(a, Act(first_play(a), expected=a.turn.seq))
    assert isinstance(world.command(a, Undo()), UndoResult)
    assert refused(world.command(a, Undo()), "pending")
    assert refused(world.command(a, UndoAnswer(True)), "not_asked")  # its own request
    watcher = world.client("w")
    world.command(watcher, Watch())
    assert isinstance(world.command(watcher, Undo()), Refused)  # a spectator holds no seat


def test_the_seat_to_act_answers_by_playing_on_the_request_lapses_in_the_same_append() -> None:
    world, a, b = two_players()
    world.command(a, Act(first_play(a), expected=a.turn.seq))
    world.command(a, Undo())
    assert current(b)
    reply = world.command(b, Act(b.turn.legal[-1], expected=b.turn.seq - 1))  # before the ask
    assert isinstance(reply, Accepted)  # the ask changed nothing b may do: still fresh
    records = world.records()
    lapse = next(r for r in records if r.type == "undo_refused")
    assert lapse.data["reason"] == "acted" and records[lapse.seq + 1].type == "action"
    assert lapse.ts == records[lapse.seq + 1].ts  # one append
    assert a.undos[lapse.seq] == UndoRefusedPush(world.sid, lapse.seq, lapse.data["action_seq"],
                                                 "acted", None)  # fmt: skip
    assert verify_log(world.engine, records) is None


@pytest.mark.parametrize("restart", [False, True])
def test_an_unanswered_request_expires_thirty_seconds_after_its_record(restart: bool) -> None:
    world, a, b = two_players()
    world.command(a, Act(first_play(a), expected=a.turn.seq))
    world.command(a, Undo())
    asked = world.records()[-1]
    assert b.undos[asked.seq].request.expires.at == format_ts(parse_ts(asked.ts) + UNDO_EXPIRES)
    world.advance(UNDO_EXPIRES - 10)
    if restart:
        world.restart()  # the request and its time are read from the log
        world.reconnect(b)
        world.command(b, Resume(b.token))
    world.advance(9.9)
    assert world.records()[-1].type != "undo_refused"
    world.advance(0.2)
    last = world.records()[-1]
    assert (last.type, last.data["reason"]) == ("undo_refused", "expired")
    assert parse_ts(last.ts) - parse_ts(asked.ts) == pytest.approx(UNDO_EXPIRES, abs=0.01)
    assert refused(world.command(b, UndoAnswer(True)), "no_request")


def test_two_hosts_agree_the_driver_expires_a_request_asked_on_the_other() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2), hosts=2)
    a, b = join_all(world, 2, host_of=lambda i: i)
    first, other = (a, b) if current(a) else (b, a)
    world.command(first, Act(first_play(first), expected=first.turn.seq))
    world.command(first, Undo())
    snaps = [world.command(c, View()).snapshot.undo for c in (a, b)]
    assert snaps[0] == snaps[1] is not None  # the same expiry, read from the record's ts
    world.advance(UNDO_EXPIRES + 1)
    assert [r.data.get("reason") for r in world.records() if r.type == "undo_refused"] == [
        "expired"
    ]
    assert first.undos == other.undos  # every host pushed the same


def test_with_only_bots_to_ask_the_action_is_taken_back_at_once() -> None:
    e = engine("crazy-eights")
    world = World(e, new_log(e, 2, bots=1), settings=TableSettings(bot_delay=5.0))
    (c,) = join_all(world, 1)
    if not current(c):
        world.advance(5.0)
    before = world.command(c, View()).snapshot
    while not any(x["type"] == "play" for x in c.turn.legal):
        world.command(c, Act({"type": "draw"}, expected=c.turn.seq))
        before = world.command(c, View()).snapshot
    world.command(c, Act(first_play(c), expected=c.turn.seq))
    reply = world.command(c, Undo())
    assert isinstance(reply, UndoResult) and reply.status == "done"
    assert [r.type for r in world.records()[-2:]] == ["undo_asked", "undo"]
    assert world.records()[-2].data["waiting"] == []
    assert world.command(c, View()).snapshot.view == before.view


def test_an_undo_restarts_the_turn_timer_and_makes_older_turn_pushes_stale() -> None:
    world, a, b = two_players(turn_timeout=60.0)
    old = a.turn
    world.command(a, Act(first_play(a), expected=a.turn.seq))
    theirs = b.turn
    world.advance(20.0)
    world.command(a, Undo())
    world.advance(5.0)
    world.command(b, UndoAnswer(True))
    undo = world.records()[-1]
    assert undo.type == "undo"
    due = world.command(a, View()).snapshot.deadline
    assert due.at == format_ts(parse_ts(undo.ts) + 60.0)  # counted from the undo record
    assert a.turn.deadline == due and a.turn.legal == old.legal
    stale = world.command(b, Act(theirs.legal[0], expected=theirs.seq))
    assert isinstance(stale, Refused) and stale.code in (ErrorCode.CONFLICT,)
    assert "taken back" in stale.message


def test_undo_records_that_do_not_fit_do_not_fold() -> None:
    world, a, b = two_players()
    world.command(a, Act(first_play(a), expected=a.turn.seq))
    records = world.records()
    last = records[-1].seq
    e = world.engine
    acted = records[-2]
    bad = [
        Record(last + 1, "undo", {"seat": a.role, "action_seq": acted.seq}),  # nobody asked
        Record(last + 1, "undo_asked", {"seat": b.role, "action_seq": acted.seq, "waiting": []}),
        Record(
            last + 1, "undo_answered", {"seat": b.role, "action_seq": acted.seq, "accept": True}
        ),  # fmt: skip
    ]
    for rec in bad:
        with pytest.raises(BadRecord):
            e.rebuild([*records, rec])
    # a request its game refuses is a difference to verify, though it folds
    world, a, b = two_players()
    world.command(a, Act({"type": "draw"}, expected=a.turn.seq))
    records = world.records()
    drew = [r for r in records if r.type == "action"][-1]
    forged = Record(
        records[-1].seq + 1,
        "undo_asked",
        {"seat": a.role, "action_seq": drew.seq, "action": {"type": "draw"}, "waiting": []},
    )
    done = Record(forged.seq + 1, "undo", {"seat": a.role, "action_seq": drew.seq})
    assert e.rebuild([*records, forged, done]).game == e.rebuild(records[: drew.seq]).game
    diff = verify_log(e, [*records, forged, done])
    assert diff is not None and diff[0] == forged.seq and "revealed" in diff[1], diff


def test_a_fork_copies_the_undo_records_and_plays_on() -> None:
    world, a, b = two_players()
    world.command(a, Act(first_play(a), expected=a.turn.seq))
    world.command(a, Undo())
    world.command(b, UndoAnswer(True))
    records = world.records()
    lines = fork_records(records, records[-1].seq, "s0000000000000002")
    fork = [Record.from_json(x) for x in lines]
    assert [r.type for r in fork[-3:]] == ["undo_asked", "undo_answered", "undo"]
    assert world.engine.rebuild(fork).game == world.engine.rebuild(records).game
    with pytest.raises(ValueError, match="inside a cause"):
        fork_records(records, records[-2].seq, "s0000000000000003")


def test_a_game_without_undoable_takes_nothing_back() -> None:
    from host.table.engine import Engine
    from tests.toy import HighCard

    e = Engine(HighCard())
    state = e.rebuild(new_log(e, 2))
    for seat in (0, 1):
        _, state = e.seat_step(state, seat, f"p{seat}", False, "h")
    with pytest.raises(UndoRefused) as no:
        e.ask_undo(state, 0)
    assert no.value.reason == "not_undoable"


# -- for every game: an accepted undo gives back the state before the action ----------------------
def _play_one(world: World, clients: list[Client], rng: random.Random) -> Client | None:
    ready = [c for c in clients if current(c)]
    if not ready:
        return None
    c = rng.choice(ready)
    reply = world.command(c, Act(rng.choice(c.turn.legal), expected=c.turn.seq))
    assert isinstance(reply, Accepted), reply
    return c


def _tail(world: World, n: int = 40) -> list[Record]:
    """The last ``n`` records of the log (parsing the whole log at every step is slow)."""
    return [Record.from_json(orjson.loads(line)) for line in world.log[-n:]]


def _seen(world: World, viewers: list[Client]) -> dict[str, tuple]:
    """What each viewer is shown now: its view, whose turn, and its current turn's choices."""
    out = {}
    for c in viewers:
        s = world.command(c, View()).snapshot
        legal = c.turn.legal if current(c) else None
        out[c.name] = (s.view, s.to_act, s.started, s.ended, legal)
    return out


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(game=st.sampled_from(BUILT_IN), seed=st.integers(0, 2**16), every=st.integers(1, 4))
def test_an_accepted_undo_gives_back_the_state_and_every_view_before_the_action(
    game: str, seed: int, every: int
) -> None:
    e = engine(game)
    n = max(3, e.game.info.min_seats)
    world = World(e, new_log(e, n, seed=seed.to_bytes(32, "big")))
    clients = join_all(world, n)
    watcher = world.client("w")
    world.command(watcher, Watch())
    viewers = [*clients, watcher]
    viewers_of = [*range(n), None]
    rng = random.Random(seed)
    undone = 0
    for k in range(100):
        if any(c.ended for c in clients):
            break
        state_before = world.hosts[0].table.state.game
        seen_before = _seen(world, viewers)
        c = _play_one(world, clients, rng)
        if c is None or k % every:
            continue
        acted = next(r for r in reversed(_tail(world)) if r.type == "action")
        reply = world.command(c, Undo())
        if isinstance(reply, Refused):
            assert reply.code in (ErrorCode.CANNOT_UNDO, ErrorCode.SESSION_ENDED), reply
            continue
        for x in clients:
            if x is not c and x.role in world.hosts[0].table.state.undo_ask.waiting:
                world.command(x, UndoAnswer(True))
        assert _tail(world)[-1].type == "undo"
        undone += 1
        assert world.hosts[0].table.state.game == state_before
        assert _seen(world, viewers) == seen_before
        # what the game let be taken back showed every viewer the same: nothing was hidden
        for rec in (r for r in _tail(world) if r.seq > acted.seq):
            if rec.type == "event":
                shown = [orjson.loads(orjson.dumps(e.redacted_wire(rec, v))) for v in viewers_of]
                assert all(x == rec.data["event"] for x in shown), (game, shown)
    event(f"{game}: {'some' if undone else 'no'} action taken back")
    records = world.records()
    assert verify_log(e, records) is None
    assert e.rebuild(records) == world.hosts[0].table.state
    if undone:
        world.restart()  # (which appends the releases of the seats its connections held)
        assert world.hosts[0].table.state.game == e.rebuild(records).game
