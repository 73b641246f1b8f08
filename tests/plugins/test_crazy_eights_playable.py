"""Crazy Eights' ``playable_cards`` (worked out once per hand) lists exactly the cards
``matches`` allows, in hand order, once each: in every state real play reaches."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from host.plugins.registry import load_registry
from host.table.local import play_local
from plugins.crazy_eights import rules

ENGINE = load_registry().engines["crazy-eights"]


def by_matches(state, seat: int) -> list[str]:
    out: list[str] = []
    for card in state.hands[seat]:
        if card not in out and rules.matches(state, seat, card):
            out.append(card)
    return out


@settings(max_examples=12, deadline=None)
@given(
    seed=st.binary(min_size=32, max_size=32),
    seats=st.integers(2, 5),
    options=st.fixed_dictionaries(
        {"target": st.just(60)},
        optional={
            "countdown": st.booleans(),
            "draw_two": st.booleans(),
            "starter_eight": st.sampled_from(["bury", "redraw", "keep"]),
        },
    ),
)
def test_playable_cards_are_the_cards_matches_allows(seed, seats, options):
    _, records = play_local(ENGINE.game, options, seats, seed=seed, engine=ENGINE)
    state = ENGINE.initial(records[0])
    checked = 0
    for rec in records[1:]:
        state = ENGINE.apply(state, rec)
        game = state.game
        if not game.hands:
            continue
        for seat in range(game.seats):
            assert rules.playable_cards(game, seat) == by_matches(game, seat)
            checked += 1
    assert checked > 0
