"""Crazy Eights: the rule spec's edge cases, options, variants, properties and hidden information.

Rule references are to ``docs/rules/crazy-eights.md``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host.game import Game, IllegalAction, OptionError, Rng
from host.plugins.codec import GameCodec
from host.plugins.registry import load_registry
from host.table.engine import Engine
from host.table.local import play_local, roundtrip
from plugins import cards
from plugins import crazy_eights as ce
from plugins.crazy_eights import CrazyEights, rules
from plugins.crazy_eights.model import (
    DealScored,
    Dealt,
    Draw,
    Drew,
    Options,
    Pass,
    Passed,
    PenaltyTaken,
    Play,
    Played,
    Reshuffled,
    State,
)
from tests.bots import Mixed, RandomLegal

GAME = CrazyEights()
CODEC = GameCodec(GAME)
RNG_SEED = b"\x07" * 32


# -- helpers ------------------------------------------------------------------------------------


def table(
    hands: list[list[str]],
    discard: list[str],
    stock: list[str] | tuple[str, ...] = (),
    options: dict[str, Any] | None = None,
    **fields: Any,
) -> State:
    """A mid-deal state: seat 0 to act, the last seat dealing, the current suit the top's."""
    opts = CODEC.options_from_wire(options or {}, len(hands))
    s = rules.initial_state(opts, len(hands))
    s = attrs.evolve(
        s,
        deal=1,
        dealer=len(hands) - 1,
        hands=tuple(tuple(h) for h in hands),
        stock=tuple(stock),
        discard=tuple(discard),
        current_suit=cards.suit(discard[-1]),
        turn=0,
    )
    return attrs.evolve(s, **fields)


def act(state: State, seat: int, action: Any, seq: int = 1) -> tuple[list[Any], State]:
    """Decide and fold; returns the events and the state after them."""
    events = GAME.decide(state, seat, action, Rng(RNG_SEED, seq))
    for ev in events:
        state = GAME.evolve(state, ev)
    return events, state


def refused(state: State, seat: int, action: Any) -> str:
    with pytest.raises(IllegalAction) as info:
        GAME.decide(state, seat, action, Rng(RNG_SEED, 1))
    return info.value.reason


def plays(state: State, seat: int) -> set[tuple[str, str | None]]:
    return {(a.card, a.suit) for a in GAME.legal_actions(state, seat) if isinstance(a, Play)}


def deal_cards(state: State) -> list[str]:
    return [c for h in state.hands for c in h] + list(state.stock) + list(state.discard)


def shoe_of(state: State) -> Counter[str]:
    return Counter(cards.shoe(rules.deck_count(state.options, state.seats)))


# -- registration, options ----------------------------------------------------------------------


def test_plugin_registers_crazy_eights_through_the_hook() -> None:
    registry = load_registry([("crazy-eights-test", ce)], entrypoints=False)
    game = registry.games["crazy-eights"]
    assert isinstance(game, Game)
    assert (game.info.min_seats, game.info.max_seats) == (2, 7)


def test_option_schema_lists_every_option_with_its_default() -> None:
    schema = {o["name"]: o for o in CODEC.options_schema()}
    assert {k: v["default"] for k, v in schema.items()} == {
        "decks": "auto",
        "hand_size": "auto",
        "starter_eight": "bury",
        "draw_limit": "none",
        "reshuffle": True,
        "blocked_tie": "split",
        "target": "auto",
        "queens_skip": False,
        "aces_reverse": False,
        "draw_two": False,
        "draw_two_stacking": "auto",
        "special_on_last_card": "ignored",
        "special_starter": "applies",
        "countdown": False,
    }
    assert schema["starter_eight"]["choices"] == ["bury", "redraw", "keep"]
    assert all(o["doc"] for o in schema.values())


@pytest.mark.parametrize(
    ("options", "seats", "bad"),
    [
        ({"decks": 3}, 4, "decks"),
        ({"decks": True}, 4, "decks"),
        ({"hand_size": 0}, 4, "hand_size"),
        ({"hand_size": "7"}, 4, "hand_size"),
        ({"hand_size": True}, 4, "hand_size"),
        ({"hand_size": 13}, 4, "hand_size"),
        ({"draw_limit": 0}, 2, "draw_limit"),
        ({"draw_limit": "all"}, 2, "draw_limit"),
        ({"target": -5}, 2, "target"),
        ({"starter_eight": "burn"}, 2, "starter_eight"),
        ({"blocked_tie": "share"}, 2, "blocked_tie"),
        ({"draw_two_stacking": "yes"}, 2, "draw_two_stacking"),
        ({"special_on_last_card": "maybe"}, 2, "special_on_last_card"),
        ({"countdown": True, "decks": 1}, 7, "decks"),
        ({"colour": "red"}, 2, "colour"),
    ],
)
def test_bad_options_are_refused_naming_the_option(
    options: dict[str, Any], seats: int, bad: str
) -> None:
    with pytest.raises(OptionError) as info:
        CODEC.options_from_wire(options, seats)
    assert info.value.option == bad


def test_auto_decks_and_hand_size_follow_the_player_count() -> None:
    assert [rules.deck_count(Options(), n) for n in range(2, 8)] == [1, 1, 1, 1, 2, 2]
    assert [rules.hand_size(Options(), n) for n in range(2, 8)] == [7, 5, 5, 5, 5, 5]
    dealt = GAME.start(GAME.initial_state(Options(), 6), Rng(RNG_SEED, 1))[0]
    assert sum(dealt.hand_sizes) + dealt.stock_size + 1 == 104


def test_target_auto_is_fifty_per_player() -> None:
    assert [rules.target(Options(), n) for n in range(2, 8)] == [100, 150, 200, 250, 300, 350]
    assert rules.target(Options(target=60), 3) == 60


def test_stacking_auto_follows_draw_two() -> None:
    assert rules.stacking(Options(draw_two=True))
    assert not rules.stacking(Options())
    assert not rules.stacking(Options(draw_two=True, draw_two_stacking=False))


# -- setup --------------------------------------------------------------------------------------


def test_first_deal_seat_zero_deals_and_play_starts_at_its_left() -> None:
    initial = GAME.initial_state(Options(), 4)
    dealt = GAME.start(initial, Rng(RNG_SEED, 1))[0]
    state = GAME.evolve(initial, dealt)
    assert dealt.dealer == 0 and dealt.deal == 1
    assert dealt.hand_sizes == (5, 5, 5, 5)
    assert GAME.to_act(state) == (1,)  # no variant is on, so the starter has no effect
    assert Counter(deal_cards(state)) == shoe_of(state)


def test_dealer_rotates_one_seat_each_deal() -> None:
    state = table([["5H"], ["9C"], ["KS"]], ["5C"], ["2D", "3D"])
    assert state.dealer == 2
    _, after = act(state, 0, Play("5H"))
    assert after.deal == 2 and after.dealer == 0 and after.turn == 1
    hands = (("3C",), *after.hands[1:])
    after = attrs.evolve(after, hands=hands, turn=0, current_suit="C")
    _, after = act(after, 0, Play("3C"))
    assert after.deal == 3 and after.dealer == 1 and after.turn == 2


def test_turn_starter_buries_an_eight_somewhere_in_the_middle_half() -> None:
    rest = [f"{r}{s}" for s in "CDHS" for r in ("2", "3", "4", "5", "6", "7")][:20]
    places = set()
    for i in range(200):
        starter, stock, back = rules.turn_starter(
            ["8C", *rest], frozenset({"8"}), "bury", Rng(RNG_SEED, i)
        )
        # 8C leaves 20 cards; it goes back at index 5..15 of them; the first of them is turned
        assert (starter, back) == (rest[0], ("8C",))
        where = (rest[0], *stock).index("8C")
        assert 5 <= where <= 15
        places.add(where)
    assert len(places) >= 8  # not a fixed place anyone could count to


def test_starter_eight_bury_never_starts_with_a_wild_card() -> None:
    found = 0
    for i in range(300):
        dealt = GAME.start(
            GAME.initial_state(Options(), 2), Rng(bytes([i % 256, i // 256]) * 16, 1)
        )[0]
        assert cards.rank(dealt.starter) != "8"
        if dealt.turned_back:
            found += 1
            assert all(c in dealt.stock for c in dealt.turned_back)
    assert found > 0


def test_starter_eight_redraw_shuffles_it_back() -> None:
    starter, stock, back = rules.turn_starter(
        ["8C", "8D", "3D", "4H"], frozenset({"8"}), "redraw", Rng(RNG_SEED, 1)
    )
    assert cards.rank(starter) != "8"
    assert back[0] == "8C"
    assert sorted([starter, *stock]) == sorted(["8C", "8D", "3D", "4H"])


def test_starter_eight_keep_lets_the_first_player_play_any_card() -> None:
    opts = CODEC.options_from_wire({"starter_eight": "keep"}, 3)
    starter, stock, back = rules.turn_starter(
        ["8C", "3D"], frozenset({"8"}), "keep", Rng(RNG_SEED, 1)
    )
    assert (starter, back) == ("8C", ())
    dealt = Dealt(1, 0, (("3D", "KH"), ("4S", "9H"), ("5C", "6C")), (2, 2, 2), stock, 1, "8C")
    state = GAME.evolve(GAME.initial_state(opts, 3), dealt)
    assert state.current_suit is None and state.turn == 1
    assert plays(state, 1) == {("4S", None), ("9H", None)}


def test_burying_that_goes_round_the_stock_keeps_the_card() -> None:
    starter, stock, back = rules.turn_starter(
        ["8C", "8D", "8H", "8S"], frozenset({"8"}), "bury", Rng(RNG_SEED, 1)
    )
    assert cards.rank(starter) == "8"  # only wild cards: the loop gives up and keeps one
    assert sorted([starter, *stock]) == ["8C", "8D", "8H", "8S"]
    assert len(back) >= 3


# -- a turn: the spec's edge cases --------------------------------------------------------------


def test_named_suit_after_an_eight_governs_play() -> None:
    """Edge case 1: top 8S with hearts named."""
    state = table([["9S", "3H", "8D", "KC"], ["2C"]], ["4S", "8S"], ["5C"], current_suit="H")
    assert refused(state, 0, Play("9S")) == "card_does_not_match"
    assert ("3H", None) in plays(state, 0)
    assert {("8D", s) for s in "CDHS"} <= plays(state, 0)
    _, after = act(state, 0, Play("8D", "C"))
    assert after.current_suit == "C" and after.discard[-1] == "8D"


def test_rank_or_suit_matches_and_eights_are_always_legal() -> None:
    """Edge case 2: top KH."""
    state = table([["KC", "2H", "8S", "5C"], ["2C"]], ["KH"], ["5D"])
    assert plays(state, 0) == {("KC", None), ("2H", None)} | {("8S", s) for s in "CDHS"}
    assert refused(state, 0, Play("5C")) == "card_does_not_match"


def test_drawing_with_a_playable_card_keeps_the_turn() -> None:
    """Edge case 3: P holds 7H, draws QH, may play QH or 7H or draw again."""
    state = table([["7H", "3C"], ["2C"]], ["9H"], ["QH", "4D", "5D"])
    assert Draw() in GAME.legal_actions(state, 0)
    events, after = act(state, 0, Draw())
    assert events == [Drew(0, ("QH",), 1)]
    assert after.turn == 0 and after.draws == 1
    assert {("7H", None), ("QH", None)} <= plays(after, 0)
    assert Draw() in GAME.legal_actions(after, 0)


def test_reshuffle_keeps_the_top_card_and_the_named_suit() -> None:
    """Edge case 4: discards 4D 9D 9S 8C (top), diamonds named, stock empty."""
    state = table([["3C", "5S"], ["2C"]], ["4D", "9D", "9S", "8C"], [], current_suit="D")
    events, after = act(state, 0, Draw())
    assert isinstance(events[0], Reshuffled)
    assert sorted(events[0].stock or ()) == ["4D", "9D", "9S"]
    assert isinstance(events[1], Drew) and events[1].cards == events[0].stock[:1]
    assert after.discard == ("8C",) and after.current_suit == "D"
    assert len(after.stock) == 2


def test_no_draw_possible_players_pass_and_a_full_round_blocks_the_deal() -> None:
    """Edge case 5: stock empty and the discard pile only the top card."""
    state = table([["3C", "4C"], ["5C", "2S"], ["KC"]], ["9D"], [])
    assert GAME.legal_actions(state, 0) == [Pass()]
    assert refused(state, 0, Draw()) == "cannot_draw"
    _, state = act(state, 0, Pass())
    _, state = act(state, 1, Pass())
    assert state.turn == 2 and state.passes == 2
    events, state = act(state, 2, Pass())
    scored = events[1]
    assert isinstance(scored, DealScored) and scored.result == "blocked"
    # points 7, 7, 10: 0 and 1 tie lowest and split the total of 3 (remainder dropped)
    assert scored.points == (7, 7, 10) and scored.gains == (1, 1, 0)
    assert isinstance(events[2], Dealt) and state.deal == 2


def test_going_out_scores_the_points_left_in_opponents_hands() -> None:
    """Edge case 6: opponents hold {8D, QC, AS, 7H} = 68 and {10S} = 10."""
    state = table([["5H"], ["8D", "QC", "AS", "7H"], ["10S"]], ["5C"], ["2D"])
    events, after = act(state, 0, Play("5H"))
    scored = events[1]
    assert isinstance(scored, DealScored)
    assert (scored.result, scored.winner, scored.gains) == ("out", 0, (78, 0, 0))
    assert scored.hands == ((), ("8D", "QC", "AS", "7H"), ("10S",))
    assert after.scores == (78, 0, 0) and after.last_deal == scored
    last = GAME.view(after, 2)["last_deal"]
    assert last["hands"][1] == ["8D", "QC", "AS", "7H"] and last["gains"] == [78, 0, 0]


def test_two_players_an_ace_reverse_lets_the_same_player_move_again() -> None:
    """Edge case 7."""
    state = table([["AH", "3H"], ["2C"]], ["9H"], ["5D"], {"aces_reverse": True})
    _, after = act(state, 0, Play("AH"))
    assert after.turn == 0 and after.direction == 1


def test_draw_two_stacking_the_third_player_draws_four_and_loses_the_turn() -> None:
    """Edge case 8."""
    state = table(
        [["2C", "9S"], ["2H", "KD"], ["7C", "JD", "4S"]],
        ["5C"],
        ["3D", "4D", "5D", "6D", "7D"],
        {"draw_two": True},
    )
    _, state = act(state, 0, Play("2C"))
    assert state.penalty == 2 and state.turn == 1
    _, state = act(state, 1, Play("2H"))
    assert state.penalty == 4 and state.turn == 2
    assert refused(state, 2, Play("7C")) == "draw_two_pending"
    assert GAME.legal_actions(state, 2) == [Draw()]
    events, state = act(state, 2, Draw())
    assert events == [Drew(2, ("3D", "4D", "5D", "6D"), 4), PenaltyTaken(2, 4, 0)]
    assert state.turn == 0 and state.penalty == 0 and len(state.hands[2]) == 7


def test_draw_limit_three_then_the_player_passes_with_cards_in_stock() -> None:
    """Edge case 9."""
    state = table([["3C", "4C"], ["2C"]], ["9D"], ["5S", "6S", "7S", "JD"], {"draw_limit": 3})
    for _ in range(3):
        assert Pass() not in GAME.legal_actions(state, 0)
        _, state = act(state, 0, Draw())
    assert state.draws == 3 and state.stock == ("JD",)
    assert refused(state, 0, Draw()) == "cannot_draw"
    assert GAME.legal_actions(state, 0) == [Pass()]
    _, state = act(state, 0, Pass())
    assert state.turn == 1 and state.draws == 0 and state.passes == 0


def test_draw_limit_allows_passing_even_with_a_legal_play() -> None:
    state = table([["9C", "4C"], ["2C"]], ["9D"], ["5S"], {"draw_limit": 1})
    _, state = act(state, 0, Draw())
    assert Pass() in GAME.legal_actions(state, 0)
    assert ("9C", None) in plays(state, 0)


# -- a turn: refusals ---------------------------------------------------------------------------


def test_only_the_seat_to_act_may_act() -> None:
    state = table([["3C"], ["4C"]], ["9C"], ["5D"])
    assert refused(state, 1, Play("4C")) == "not_your_turn"
    assert GAME.legal_actions(state, 1) == []


def test_a_card_not_in_hand_is_refused() -> None:
    state = table([["3C", "5D"], ["4C"]], ["9C"], ["5H"])
    assert refused(state, 0, Play("4C")) == "card_not_in_hand"
    assert refused(state, 0, Play("XX")) == "card_not_in_hand"


def test_an_eight_requires_a_suit_and_other_cards_refuse_one() -> None:
    state = table([["8C", "3C"], ["4C"]], ["9C"], ["5D"])
    assert refused(state, 0, Play("8C")) == "suit_required"
    assert refused(state, 0, Play("8C", "X")) == "unknown_suit"
    assert refused(state, 0, Play("3C", "H")) == "suit_not_allowed"


def test_eight_as_last_card_names_no_suit() -> None:
    state = table([["8C"], ["4C"]], ["9D"], ["5D"])
    assert plays(state, 0) == {("8C", None)}
    assert refused(state, 0, Play("8C", "H")) == "suit_not_allowed"
    events, _ = act(state, 0, Play("8C"))
    assert events[0] == Played(0, "8C", None)
    assert isinstance(events[1], DealScored) and events[1].gains == (4, 0)


def test_cannot_pass_while_a_card_can_be_drawn() -> None:
    state = table([["3C"], ["4C"]], ["9D"], ["5D"])
    assert refused(state, 0, Pass()) == "cannot_pass"


def test_cannot_pass_holding_a_legal_play_without_draw_limit() -> None:
    state = table([["3D", "5C"], ["4C"]], ["9D"], [])
    assert refused(state, 0, Pass()) == "cannot_pass"
    assert GAME.legal_actions(state, 0) == [Play("3D")]


def test_without_reshuffle_an_empty_stock_cannot_be_drawn() -> None:
    state = table([["3C"], ["4C"]], ["5S", "6S", "9D"], [], {"reshuffle": False})
    assert refused(state, 0, Draw()) == "cannot_draw"
    assert GAME.legal_actions(state, 0) == [Pass()]


def test_a_pass_after_drawing_does_not_count_toward_a_block() -> None:
    state = table([["3C"], ["4C"]], ["9D"], ["5S"], {"draw_limit": 1}, passes=1)
    _, state = act(state, 0, Draw())
    _, state = act(state, 0, Pass())
    assert state.passes == 0 and state.turn == 1


def test_a_play_breaks_a_round_of_passes() -> None:
    state = table([["3C", "9C"], ["4C"], ["KS"]], ["9D"], [], passes=2)
    _, state = act(state, 0, Play("9C"))
    assert state.passes == 0 and state.turn == 1


# -- variants -----------------------------------------------------------------------------------


def test_queen_makes_the_next_player_lose_their_turn() -> None:
    state = table([["QH", "3C"], ["4C"], ["5C"]], ["9H"], ["5D"], {"queens_skip": True})
    _, after = act(state, 0, Play("QH"))
    assert after.turn == 2


def test_queens_are_ordinary_without_the_variant() -> None:
    state = table([["QH", "3C"], ["4C"], ["5C"]], ["9H"], ["5D"])
    _, after = act(state, 0, Play("QH"))
    assert after.turn == 1


def test_ace_reverses_direction_with_three_players() -> None:
    state = table(
        [["AH", "3C"], ["4C", "6C"], ["5C", "7C"]], ["9H"], ["5H"], {"aces_reverse": True}
    )
    _, state = act(state, 0, Play("AH"))
    assert state.turn == 2 and state.direction == -1
    _, state = act(state, 2, Draw())
    _, state = act(state, 2, Play("5H"))
    assert state.turn == 1


def test_draw_two_without_stacking_a_two_passes_on_two() -> None:
    state = table(
        [["2C", "9S"], ["2H", "KD"], ["7C", "JD"]],
        ["5C"],
        ["3D", "4D", "5D"],
        {"draw_two": True, "draw_two_stacking": False},
    )
    _, state = act(state, 0, Play("2C"))
    _, state = act(state, 1, Play("2H"))
    assert state.penalty == 2
    events, state = act(state, 2, Draw())
    assert events[-1] == PenaltyTaken(2, 2, 0)


def test_a_penalty_the_stock_cannot_cover_is_reshuffled_then_forgiven() -> None:
    state = table([["9S", "3C"], ["KD"]], ["6D", "2C"], ["3D"], {"draw_two": True}, penalty=4)
    events, state = act(state, 0, Draw())
    assert [type(e) for e in events] == [Drew, Reshuffled, Drew, PenaltyTaken]
    assert events[-1] == PenaltyTaken(0, 2, 2)
    assert len(state.hands[0]) == 4 and state.turn == 1 and state.penalty == 0


def test_a_penalty_with_nothing_to_draw_lapses_on_a_pass() -> None:
    state = table([["9S"], ["KD"]], ["2C"], [], {"draw_two": True}, penalty=2)
    assert GAME.legal_actions(state, 0) == [Pass()]
    _, state = act(state, 0, Pass())
    assert state.penalty == 0 and state.turn == 1


def test_a_special_last_card_is_ignored_by_default() -> None:
    state = table([["2C"], ["KD"]], ["5C"], ["3D", "4D"], {"draw_two": True})
    events, _ = act(state, 0, Play("2C"))
    assert [type(e) for e in events] == [Played, DealScored, Dealt]
    assert events[1].gains == (10, 0)


def test_a_special_last_card_applied_makes_the_next_player_draw_before_scoring() -> None:
    state = table(
        [["2C"], ["KD"]],
        ["5C"],
        ["3D", "4D"],
        {"draw_two": True, "special_on_last_card": "applied"},
    )
    events, _ = act(state, 0, Play("2C"))
    assert [type(e) for e in events] == [Played, Drew, PenaltyTaken, DealScored, Dealt]
    assert events[3].hands[1] == ("KD", "3D", "4D") and events[3].gains == (17, 0)


def test_an_applied_last_two_passes_on_the_stacked_total() -> None:
    opts = {"draw_two": True, "special_on_last_card": "applied"}
    state = table([["2C"], ["KD"]], ["2H"], ["3D", "4D", "5D", "6D"], opts, penalty=2)
    events, _ = act(state, 0, Play("2C"))
    assert events[1] == Drew(1, ("3D", "4D", "5D", "6D"), 4)


def test_special_starter_applies_as_if_the_dealer_played_it() -> None:
    hands = (("3D", "KH"), ("4S", "9H"), ("5C", "6C"))
    for starter, opts, turn, direction, penalty in [
        ("QH", {"queens_skip": True}, 2, 1, 0),
        ("AH", {"aces_reverse": True}, 2, -1, 0),
        ("2H", {"draw_two": True}, 1, 1, 2),
        ("QH", {"queens_skip": True, "special_starter": "ignored"}, 1, 1, 0),
        ("2H", {"draw_two": True, "special_starter": "ignored"}, 1, 1, 0),
    ]:
        options = CODEC.options_from_wire(opts, 3)
        dealt = Dealt(1, 0, hands, (2, 2, 2), ("7S",), 1, starter)
        state = GAME.evolve(GAME.initial_state(options, 3), dealt)
        assert (state.turn, state.direction, state.penalty) == (turn, direction, penalty), starter


def test_an_ace_starter_with_two_players_lets_the_dealer_play_first() -> None:
    options = CODEC.options_from_wire({"aces_reverse": True}, 2)
    dealt = Dealt(1, 0, (("3D",), ("4S",)), (1, 1), ("7S",), 1, "AH")
    assert GAME.evolve(GAME.initial_state(options, 2), dealt).turn == 0


# -- scoring and the match ----------------------------------------------------------------------


def test_blocked_the_lowest_hand_scores_the_differences() -> None:
    state = table([["3C"], ["KS", "5S"], ["8S"]], ["9D"], [], passes=2)
    events, _ = act(state, 0, Pass())
    scored = events[1]
    assert scored.points == (3, 15, 50) and scored.gains == (12 + 47, 0, 0)


def test_blocked_tie_none_scores_nothing() -> None:
    state = table([["3C"], ["3S"], ["8S"]], ["9D"], [], {"blocked_tie": "none"}, passes=2)
    events, _ = act(state, 0, Pass())
    assert events[1].gains == (0, 0, 0)


def test_the_match_ends_at_the_target_and_the_highest_total_wins() -> None:
    state = table([["5H"], ["KD"], ["10S"]], ["5C"], ["2D"], scores=(140, 145, 0))
    events, after = act(state, 0, Play("5H"))
    assert [type(e) for e in events] == [Played, DealScored]
    assert after.over and after.winners == (0,) and GAME.to_act(after) == ()
    assert GAME.outcome(after) == {
        "scores": [160, 145, 0],
        "winners": [0],
        "deals": 1,
        "countdown": False,
    }


def test_equal_totals_at_the_end_share_the_win() -> None:
    state = table([["3C"], ["3S"], ["8S", "8H"]], ["9D"], [], passes=2, scores=(110, 110, 0))
    _, after = act(state, 0, Pass())
    assert after.winners == (0, 1) and after.scores == (158, 158, 0)


# -- countdown ----------------------------------------------------------------------------------


def countdown_table(numbers: tuple[int, ...], hands: list[list[str]], top: str) -> State:
    return table(hands, [top], ["4D", "5D"], {"countdown": True}, numbers=numbers)


def test_countdown_deals_each_player_as_many_cards_as_their_number() -> None:
    state = attrs.evolve(
        GAME.initial_state(Options(countdown=True), 3), numbers=(8, 7, 1), deal=3, dealer=1
    )
    dealt = rules.next_deal(state, Rng(RNG_SEED, 1))
    assert dealt.dealer == 2 and dealt.hand_sizes == (8, 7, 1)
    assert cards.rank(dealt.starter) not in {"8", "7", "A"}


def test_countdown_a_number_makes_its_rank_wild_for_that_player_only() -> None:
    state = countdown_table((8, 7), [["8D", "7C", "3S"], ["8C", "7S", "9S"]], "5H")
    assert {("8D", s) for s in "CDHS"} <= plays(state, 0)
    assert not any(c == "7C" for c, _ in plays(state, 0))
    state = attrs.evolve(state, turn=1)
    assert {("7S", s) for s in "CDHS"} <= plays(state, 1)
    assert refused(state, 1, Play("8C")) == "card_does_not_match"


def test_countdown_another_players_wild_rank_is_an_ordinary_card() -> None:
    state = countdown_table((7, 8), [["8C", "3S"], ["9S"]], "8S")
    assert refused(state, 0, Play("8C", "H")) == "suit_not_allowed"
    _, after = act(state, 0, Play("8C"))
    assert after.current_suit == "C"


def test_countdown_at_one_aces_are_wild() -> None:
    state = countdown_table((1, 8), [["AC", "3S"], ["9S"]], "5H")
    assert rules.wild_rank(state, 0) == "A"
    _, after = act(state, 0, Play("AC", "S"))
    assert after.current_suit == "S"


def test_countdown_going_out_drops_the_number_by_one() -> None:
    state = countdown_table((8, 8), [["5S"], ["9S"]], "5H")
    events, after = act(state, 0, Play("5S"))
    assert events[1].numbers == (7, 8) and events[1].gains == (0, 0)
    assert after.numbers == (7, 8) and not after.over
    assert events[2].hand_sizes == (7, 8)
    assert after.scores == (0, 0)


def test_countdown_the_first_to_go_out_at_one_wins() -> None:
    state = countdown_table((1, 3), [["5S"], ["9S"]], "5H")
    _, after = act(state, 0, Play("5S"))
    assert after.over and after.winners == (0,)
    assert GAME.outcome(after) == {
        "scores": [0, 3],
        "winners": [0],
        "deals": 1,
        "countdown": True,
    }


def test_countdown_a_blocked_deal_changes_no_number() -> None:
    state = table([["3C"], ["4C"]], ["9D"], [], {"countdown": True}, numbers=(5, 6), passes=1)
    events, after = act(state, 0, Pass())
    assert events[1].result == "blocked" and after.numbers == (5, 6)


# -- bots, views, text --------------------------------------------------------------------------


def test_bot_prefers_playing_and_keeps_eights() -> None:
    state = table([["8C", "3H", "KH", "4S"], ["2C"]], ["9H"], ["5D"])
    for i in range(10):
        action = GAME.bot_action(state, 0, Rng(RNG_SEED, i, "bot"))
        assert action in (Play("3H"), Play("KH"))
    state = table([["8C", "3S", "4S"], ["2C"]], ["9H"], ["5D"])
    assert GAME.bot_action(state, 0, Rng(RNG_SEED, 1)) == Play("8C", "S")


def test_bots_do_not_pass_the_four_eights_round_for_ever() -> None:
    # found by a breaker: four bots, the whole stock the four 8s, each seat lacking the suit
    # the one before it held most. Naming that suit always, they drew and played 8s to the
    # host's record limit; a suit drawn from the rest of the hand ends the round of 8s
    rows = (
        "AC 2S QC 6C KS QS 9C AS 10C 3C KC 2C 4H 5H 5S 6S 7C JS 4C 7H 9H 3H QH",
        "AH KH 4S 2H 10S JH 9D",
        "3S 7S 9S",
        "4D 6D 2D JD KD QD AD JC 6H 3D 10D 5D 5C 10H 7D",
    )
    hands = [row.split() for row in rows]
    state = table(hands, ["8H", "8S"], ["8D", "8C"], current_suit="D")
    played: list[str] = []
    for seq in range(1, 400):
        if state.turn is None:
            break
        seat = state.turn
        action = GAME.bot_action(state, seat, Rng(RNG_SEED, seq, "bot"))
        if isinstance(action, Play):
            played.append(action.card)
        _, state = act(state, seat, action, seq)
    assert any(card[0] != "8" for card in played), "only 8s were played"


def test_view_shows_the_table_to_its_owner_only() -> None:
    state = table([["3C", "8S"], ["4C"]], ["9C"], ["5D", "6D"], penalty=0, draws=1)
    view = GAME.view(state, 0)
    assert view["hand"] == ["3C", "8S"] and view["hand_sizes"] == [2, 1]
    assert view["top"] == "9C" and view["current_suit"] == "C" and view["stock_size"] == 2
    assert view["turn"] == 0 and view["dealer"] == 1 and view["deal"] == 1
    assert view["draws_this_turn"] == 1 and view["direction"] == "clockwise"
    assert view["scores"] == [0, 0] and view["target"] == 100 and view["last_deal"] is None
    assert GAME.view(state, None)["hand"] is None
    assert "5D" not in str(GAME.view(state, 1)) and "3C" not in str(GAME.view(state, 1))


def test_render_and_describe_use_wire_data() -> None:
    state = table([["5H"], ["8D", "QC"]], ["5C"], ["2D"])
    _, after = act(state, 0, Play("5H"))
    view = orjson.loads(orjson.dumps(GAME.view(after, 1)))
    text = GAME.render(view, 1)
    assert "seat 0 went out" in text and "seat 1 (you)" in text and "8D QC" in text
    assert GAME.describe({"type": "play", "card": "8C", "suit": "H"}) == "play 8C, name hearts"
    assert GAME.describe({"type": "play", "card": "7H", "suit": None}) == "play 7H"
    assert GAME.describe({"type": "draw"}) == "draw"
    assert GAME.describe({"type": "pass"}) == "pass"


def test_redact_hides_other_hands_stock_and_drawn_cards() -> None:
    dealt = Dealt(1, 0, (("3D",), ("4S",)), (1, 1), ("7S", "9S"), 2, "KH")
    assert GAME.redact(dealt, 1) == attrs.evolve(dealt, hands=(None, ("4S",)), stock=None)
    assert GAME.redact(Drew(0, ("QH",), 1), 1) == Drew(0, None, 1)
    assert GAME.redact(Drew(0, ("QH",), 1), 0) == Drew(0, ("QH",), 1)
    assert GAME.redact(Reshuffled(("4D",), 1), None) == Reshuffled(None, 1)
    assert GAME.redact(Passed(0), None) == Passed(0)


# -- whole sessions -----------------------------------------------------------------------------

OPTION_SETS = st.fixed_dictionaries(
    {},
    optional={
        "starter_eight": st.sampled_from(["bury", "redraw", "keep"]),
        "draw_limit": st.sampled_from(["none", 1, 3]),
        "reshuffle": st.booleans(),
        "blocked_tie": st.sampled_from(["split", "none"]),
        "queens_skip": st.booleans(),
        "aces_reverse": st.booleans(),
        "draw_two": st.booleans(),
        "draw_two_stacking": st.sampled_from(["auto", True, False]),
        "special_on_last_card": st.sampled_from(["ignored", "applied"]),
        "special_starter": st.sampled_from(["applies", "ignored"]),
        "hand_size": st.sampled_from(["auto", 1, 3, 7]),
        "decks": st.sampled_from(["auto", 2]),
    },
)


def check_session(game: Any, options: dict[str, Any], seats: int, seed: bytes) -> State:
    engine = Engine(GAME)
    final, records = play_local(game, options, seats, seed, max_actions=200_000, engine=engine)
    state = engine.initial(records[0])
    for rec in records[1:]:
        state = engine.apply(state, rec)
        g = state.game
        if g.deal:
            assert Counter(deal_cards(g)) == shoe_of(g), f"cards not conserved at {rec.seq}"
    assert GAME.outcome(final.game) is not None and final.ended
    again = roundtrip(records)
    assert engine.verify(again) is None
    assert engine.rebuild(again).game == final.game
    return final.game


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    options=OPTION_SETS,
    seats=st.integers(2, 7),
    countdown=st.booleans(),
    seed=st.binary(min_size=32, max_size=32),
)
def test_random_sessions_end_conserve_cards_and_replay(
    options: dict[str, Any], seats: int, countdown: bool, seed: bytes
) -> None:
    options = {**options, "target": 50}
    if countdown:
        options = {**options, "countdown": True, "target": "auto"}
        options.pop("hand_size", None)
        if seats >= 6:
            options.pop("decks", None)
    try:
        CODEC.options_from_wire(options, seats)
    except OptionError:
        options.pop("hand_size", None)
    final = check_session(Mixed(GAME), options, seats, seed)
    assert final.winners
    if countdown:
        assert final.numbers.count(0) == 1
    else:
        assert max(final.scores) >= 50


@pytest.mark.parametrize(("seats", "seed"), [(2, 1), (4, 2), (7, 3)])
def test_random_legal_bots_finish_default_matches(seats: int, seed: int) -> None:
    final = check_session(RandomLegal(GAME), {}, seats, bytes([seed]) * 32)
    assert max(final.scores) >= 50 * seats


def test_random_legal_bots_finish_a_countdown_match() -> None:
    final = check_session(RandomLegal(GAME), {"countdown": True}, 2, b"\x05" * 32)
    assert final.numbers.count(0) == 1


def test_host_bots_finish_quickly() -> None:
    _, records = play_local(GAME, {}, 4, b"\x09" * 32)
    assert len(records) < 3000


# -- hidden information -------------------------------------------------------------------------


def card_names(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value} if cards.is_card(value) else set()
    if isinstance(value, dict):
        return set().union(*(card_names(v) for v in value.values())) if value else set()
    if isinstance(value, list | tuple):
        return set().union(*(card_names(v) for v in value)) if value else set()
    return set()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    options=OPTION_SETS.filter(lambda o: o.get("hand_size", "auto") in ("auto", 3)),
    seats=st.integers(2, 5),
    countdown=st.booleans(),
    seed=st.binary(min_size=32, max_size=32),
)
def test_no_view_or_redacted_event_names_a_card_its_viewer_may_not_see(
    options: dict[str, Any], seats: int, countdown: bool, seed: bytes
) -> None:
    engine = Engine(GAME)
    options = {**options, "target": 30}
    if countdown:
        options = {**options, "countdown": True, "target": "auto", "hand_size": "auto"}
    _, records = play_local(Mixed(GAME), options, seats, seed, engine=engine)
    for viewer in [*range(seats), None]:
        state = engine.initial(records[0])
        public: set[str] = set()
        for rec in records[1:1500]:  # a few deals; long countdown matches add nothing new
            state = engine.apply(state, rec)
            g: State = state.game
            if rec.type != "event":
                continue
            event = rec.obj
            if isinstance(event, Dealt):
                public = set(event.turned_back)
            own = set(g.hands[viewer]) if viewer is not None else set()
            seen = own | set(g.discard) | public
            others = [h for s, h in enumerate(g.hands) if s != viewer]
            hidden = {c for h in others for c in h} | set(g.stock)
            hidden -= seen
            wire = CODEC.event_to_wire(GAME.redact(event, viewer))
            if not isinstance(event, DealScored):
                assert not card_names(wire) & hidden, (viewer, wire)
            if g.last_deal is None or g.last_deal.deal != g.deal:
                view = dict(GAME.view(g, viewer))
                view.pop("last_deal")
                assert not card_names(view) & hidden, (viewer, rec.seq)
            if isinstance(event, Drew) and event.seat != viewer:
                assert wire["cards"] is None and wire["count"] == event.count
