"""The expected-seq rule (``host.table.freshness``): an ``act`` naming an older seq is refused only
if
something since changed what the seat may do or what it alone may see. Properties over real
games, driven through the engine (the TCP side is in ``test_server_freshness``)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, note, settings
from hypothesis import strategies as st

from host.game import Rng
from host.plugins.registry import load_registry
from host.table.engine import Engine, Record, SessionState
from host.table.freshness import stale_reason

REGISTRY = load_registry()


def started(gid: str, seats: int, seed: int, options: dict[str, Any] | None = None) -> tuple:
    engine = REGISTRY.engines[gid]
    opts = engine.codec.options_from_wire(options or {}, seats)
    header = engine.header("s", opts, seats, [], seed.to_bytes(32, "big"))
    state = engine.initial(header)
    for seat in range(seats):
        _, state = engine.seat_step(state, seat, f"p{seat}", False, None)
    return engine, state


def legal(engine: Engine, state: SessionState, seat: int) -> list[Any]:
    """The wire legal list a ``turn`` push would carry (empty when the seat is not to act)."""
    if seat not in engine.game.to_act(state.game) or state.ended:
        return []
    return [engine.codec.action_to_wire(a) for a in engine.game.legal_actions(state.game, seat)]


@settings(max_examples=25, deadline=None)
@given(
    seats=st.integers(4, 9),
    seed=st.integers(0, 2**32),
    order=st.randoms(use_true_random=False),
    options=st.sampled_from([{}, {"row_values": "beer", "face_double": True}, {"end_cards": True}]),
)
def test_simultaneous_gives_answering_the_same_seq_are_all_fresh(
    seats: int, seed: int, order: Any, options: dict[str, Any]
) -> None:
    """Around the World, round 2: whenever several seats owe a give at seq E, each answers with
    E in any order, and every answer is fresh and accepted."""
    engine, state = started("around-the-world", seats, seed, options)
    pick = Rng(seed.to_bytes(32, "big"), 0, "test")
    together = 0
    while not state.ended:
        to_act = list(engine.game.to_act(state.game))
        if len(to_act) >= 2:
            together += 1
            expected = state.seq
            then = {s: legal(engine, state, s) for s in to_act}
            order.shuffle(to_act)
            since: list[Record] = []
            for seat in to_act:
                assert (
                    stale_reason(engine, seat, since, then[seat], legal(engine, state, seat))
                    is None
                )
                wire = pick.choice(then[seat])
                recs, state = engine.step(state, seat, engine.codec.action_from_wire(wire))
                since += recs
            assert state.seq > expected
            continue
        seat = to_act[0]
        action = pick.choice(engine.game.legal_actions(state.game, seat))
        _, state = engine.step(state, seat, action)
    note(f"simultaneous phases: {together}")


@settings(max_examples=30, deadline=None)
@given(
    gid=st.sampled_from(sorted(REGISTRY.games)),
    seed=st.integers(0, 2**32),
    lag=st.integers(1, 4),
    steps=st.integers(1, 120),
)
def test_a_fresh_answer_is_one_the_rules_still_accept_and_a_resend_is_stale(
    gid: str, seed: int, lag: int, steps: int
) -> None:
    """Anywhere in a random playout: a seat that was to act at seq E answers after ``lag`` more
    actions by anyone. If the rule calls the answer fresh, the game accepts it now; if the seat
    itself acted since, or its legal actions changed, it is stale."""
    info = REGISTRY.games[gid].info
    engine, state = started(gid, max(info.min_seats, 3), seed)
    pick = Rng(seed.to_bytes(32, "big"), 0, "test")
    for _ in range(steps):  # somewhere into the game
        if state.ended:
            return
        seat = pick.choice(engine.game.to_act(state.game))
        _, state = engine.step(
            state, seat, pick.choice(engine.game.legal_actions(state.game, seat))
        )
    if state.ended:
        return
    waiting = pick.choice(engine.game.to_act(state.game))
    then = legal(engine, state, waiting)
    since: list[Record] = []
    for _ in range(lag):
        if state.ended:
            return
        seat = pick.choice(engine.game.to_act(state.game))
        recs, state = engine.step(
            state, seat, pick.choice(engine.game.legal_actions(state.game, seat))
        )
        since += recs
    if state.ended:
        return
    now = legal(engine, state, waiting)
    reason = stale_reason(engine, waiting, since, then, now)
    acted = any(r.type == "action" and r.data["seat"] == waiting for r in since)
    if acted or then != now:
        assert reason is not None
    if reason is None:
        engine.step(state, waiting, engine.codec.action_from_wire(pick.choice(then)))


def test_a_private_event_since_makes_the_answer_stale() -> None:
    """Crazy Eights: a ``drew`` event shows the drawer its card and nobody else: for the drawer
    it is news (stale, even with the same legal list), for the other seat it is not."""
    engine, state = started("crazy-eights", 2, 5)
    seat = engine.game.to_act(state.game)[0]
    then = legal(engine, state, seat)
    recs, after = engine.step(state, seat, engine.codec.action_from_wire({"type": "draw"}))
    events = [r for r in recs if r.type == "event"]
    assert [r.data["event"]["type"] for r in events] == ["drew"]
    assert stale_reason(engine, seat, events, then, then) == (
        f"this seat was shown something new since (seq {events[0].seq})"
    )
    assert stale_reason(engine, seat, recs, then, legal(engine, after, seat)) == (
        f"this seat acted since (seq {recs[0].seq})"
    )
    assert stale_reason(engine, 1 - seat, events, [], []) is None


def test_an_unknown_turn_is_stale() -> None:
    engine, state = started("crazy-eights", 2, 5)
    seat = engine.game.to_act(state.game)[0]
    now = legal(engine, state, seat)
    assert stale_reason(engine, seat, [], None, now) == (
        "this seat had no turn at that seq (or it is too old to check)"
    )
    assert stale_reason(engine, seat, [], now, now) is None
