"""Seven Twenty-Seven: the rule spec's edge cases, chips and pots, options, properties, secrecy.

Rule references are to ``docs/rules/seven-twenty-seven.md``. Values are in half-points.
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
from host.table.engine import Engine, Record
from host.table.local import play_local, roundtrip
from plugins import cards
from plugins import seven_twenty_seven as stt
from plugins.seven_twenty_seven import SevenTwentySeven
from plugins.seven_twenty_seven import hands as hv
from plugins.seven_twenty_seven import rules as flow
from plugins.seven_twenty_seven.model import (
    Bet,
    BetMade,
    BetReturned,
    Busted,
    Call,
    Called,
    CardDrawn,
    Check,
    Dealt,
    Draw,
    Fold,
    Folded,
    HandEnded,
    HandStarted,
    PhaseStarted,
    PotAwarded,
    Raise,
    SessionEnded,
    Showdown,
    Stand,
    State,
    StockRanOut,
    Vote,
    VoteDecided,
)
from plugins.seven_twenty_seven.pots import Pot, build_pots, from_left, share
from tests.bots import Mixed, RandomLegal

GAME = SevenTwentySeven()
CODEC = GameCodec(GAME)
SEED = b"\x27" * 32


# -- helpers ------------------------------------------------------------------------------------


def table(
    hands: list[list[str] | None],
    stock: list[str] | None = None,
    *,
    dealer: int = 0,
    stacks: list[int] | None = None,
    **options: Any,
) -> State:
    """A hand just dealt: ``hands[seat]`` = [up card, down cards...] (None: not dealt in).

    The stock is ``stock`` followed by the rest of the deck; the first draw round has begun.
    """
    n = len(hands)
    opts = CODEC.options_from_wire(options, n)
    s = GAME.initial_state(opts, n)
    if stacks is not None:
        s = attrs.evolve(s, stacks=tuple(stacks))
    used = [c for h in hands if h for c in h] + list(stock or [])
    rest = [c for c in cards.deck() if c not in used]
    s = GAME.evolve(s, HandStarted(1, dealer, tuple(opts.ante if h else 0 for h in hands)))
    s = GAME.evolve(
        s,
        Dealt(
            tuple(h[0] if h else None for h in hands),
            tuple(tuple(h[1:]) if h else () for h in hands),
            tuple(list(stock or []) + rest),
        ),
    )
    for e in flow.advance(s, Rng(SEED, 0)):
        s = GAME.evolve(s, e)
    return s


def act(s: State, seat: int, action: Any) -> tuple[list[Any], State]:
    events = GAME.decide(s, seat, action, Rng(SEED, 1))
    for e in events:
        s = GAME.evolve(s, e)
    return events, s


def run(s: State, *moves: tuple[int, Any]) -> tuple[list[Any], State]:
    """Play several moves; returns every event and the final state."""
    out: list[Any] = []
    for seat, action in moves:
        assert GAME.to_act(s)[:1] == (seat,) or seat in GAME.to_act(s), (seat, GAME.to_act(s))
        events, s = act(s, seat, action)
        out += events
    return out, s


def refused(s: State, seat: int, action: Any) -> str:
    with pytest.raises(IllegalAction) as info:
        GAME.decide(s, seat, action, Rng(SEED, 1))
    return info.value.reason


def this_hand(events: list[Any]) -> list[Any]:
    """The events up to and including the first ``hand_ended``."""
    for i, e in enumerate(events):
        if isinstance(e, HandEnded):
            return events[: i + 1]
    return events


def awards(events: list[Any]) -> list[PotAwarded]:
    return [e for e in this_hand(events) if isinstance(e, PotAwarded)]


def chips(s: State) -> int:
    return sum(s.stacks) + s.pot_total


FOUR_STAND = ((1, Stand()), (2, Stand()), (3, Stand()), (0, Stand()))
FOUR_CHECK = ((1, Check()), (2, Check()), (3, Check()), (0, Check()))


def showdown_of(hands: list[list[str]], **options: Any) -> tuple[list[Any], State]:
    """Four seats stand, check, vote no: the hand goes to showdown with a pot of 4 antes."""
    s = table(hands, **options)
    return run(s, *FOUR_STAND, *FOUR_CHECK, (1, Vote(False)))


# -- registration, options ----------------------------------------------------------------------


def test_plugin_registers_seven_twenty_seven_through_the_hook() -> None:
    registry = load_registry([("seven-twenty-seven-test", stt)], entrypoints=False)
    game = registry.games["seven-twenty-seven"]
    assert isinstance(game, Game)
    assert (game.info.min_seats, game.info.max_seats) == (4, 10)


def test_option_schema_lists_every_option_with_its_default() -> None:
    schema = {o["name"]: o for o in CODEC.options_schema()}
    assert {k: v["default"] for k, v in schema.items()} == {
        "stack": 100,
        "ante": 1,
        "min_bet": 1,
        "max_bet": 10,
        "max_raises": 3,
        "hands": "unlimited",
        "deal": "up_down",
        "draw_rounds": "seed",
        "extra_card_face": "down",
        "pot": "single",
        "equidistant": "share",
        "bust_over_27": False,
    }
    assert schema["deal"]["choices"] == ["up_down", "up_down_down"]
    assert schema["pot"]["choices"] == ["single", "split"]
    assert all(o["doc"] for o in schema.values())


@pytest.mark.parametrize(
    ("options", "seats", "bad"),
    [
        ({}, 3, "seats"),
        ({}, 11, "seats"),
        ({"stack": 0}, 4, "stack"),
        ({"ante": 0}, 4, "ante"),
        ({"ante": 11, "stack": 10}, 4, "ante"),
        ({"min_bet": 0}, 4, "min_bet"),
        ({"min_bet": 5, "max_bet": 4}, 4, "max_bet"),
        ({"max_raises": -1}, 4, "max_raises"),
        ({"hands": 0}, 4, "hands"),
        ({"hands": "forever"}, 4, "hands"),
        ({"deal": "down_up"}, 4, "deal"),
        ({"draw_rounds": "never"}, 4, "draw_rounds"),
        ({"pot": "triple"}, 4, "pot"),
        ({"equidistant": "over_wins"}, 4, "equidistant"),
        ({"extra_card_face": "sideways"}, 4, "extra_card_face"),
        ({"bust_over_27": "yes"}, 4, "bust_over_27"),
        ({"stack": "100"}, 4, "stack"),
        ({"blinds": 2}, 4, "blinds"),
    ],
)
def test_bad_options_are_refused_naming_the_option(
    options: dict[str, Any], seats: int, bad: str
) -> None:
    with pytest.raises(OptionError) as info:
        CODEC.options_from_wire(options, seats)
    assert info.value.option == bad


def test_hands_takes_a_number_or_unlimited() -> None:
    assert CODEC.options_from_wire({"hands": 5}, 4).hands == 5
    assert CODEC.options_from_wire({"hands": "unlimited"}, 4).hands == "unlimited"


# -- values (edge cases 1-3) --------------------------------------------------------------------


def test_five_ace_ace_is_seven_and_twenty_seven_at_once() -> None:
    assert hv.totals(["5H", "AC", "AD"]) == (14, 34, 54)
    assert hv.distance(["5H", "AC", "AD"]) == 0


def test_three_aces_and_a_jack_is_three_and_a_half_away() -> None:
    assert hv.totals(["AH", "AC", "AD", "JS"]) == (7, 27, 47, 67)
    assert hv.distance(["AH", "AC", "AD", "JS"]) == 7


def test_ace_six_is_seven_with_the_ace_low_never_one_ace_value_for_the_hand() -> None:
    assert hv.distance(["AH", "6C"]) == 0
    # 6-A-A: 8 (two low) is 1 from 7, 28 (one high) is 1 from 27: each ace chosen apart.
    assert hv.totals(["6H", "AC", "AD"]) == (16, 36, 56)
    assert hv.distance(["6H", "AC", "AD"]) == 2


def test_face_cards_count_half_a_point() -> None:
    assert hv.totals(["JH", "QC", "KD"]) == (3,)
    assert hv.fmt_half_points(13) == "6½" and hv.fmt_half_points(14) == "7"


def test_a_hand_with_n_aces_has_n_plus_one_totals() -> None:
    assert len(hv.totals(["AH", "AC", "AD", "AS"])) == 5
    assert len(hv.totals(["2H", "3C"])) == 1


# -- the deal, draw and betting -----------------------------------------------------------------


def test_first_hand_everyone_antes_seat_zero_deals_one_up_one_down() -> None:
    s = GAME.initial_state(CODEC.options_from_wire({}, 5), 5)
    events = GAME.start(s, Rng(SEED, 1))
    started, dealt = events[0], events[1]
    assert isinstance(started, HandStarted) and started.dealer == 0
    assert started.antes == (1,) * 5
    assert isinstance(dealt, Dealt) and all(len(d) == 1 for d in dealt.down)
    assert events[2] == PhaseStarted("draw", 1, (1, 2, 3, 4, 0))
    for e in events:
        s = GAME.evolve(s, e)
    assert s.faces[0] == (True, False) and chips(s) == 500


def test_deal_up_down_down_gives_one_up_and_two_down() -> None:
    s = GAME.initial_state(CODEC.options_from_wire({"deal": "up_down_down"}, 4), 4)
    for e in GAME.start(s, Rng(SEED, 1)):
        s = GAME.evolve(s, e)
    assert all(f == (True, False, False) for f in s.faces)


def test_draw_round_from_the_dealers_left_takes_a_face_down_card_or_stands() -> None:
    s = table([["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]], ["KS"], dealer=2)
    assert GAME.to_act(s) == (3,)
    events, s = act(s, 3, Draw())
    assert events == [CardDrawn(3, "KS", "down")]
    assert s.hands[3] == ("8H", "9H", "KS") and s.faces[3] == (True, False, False)
    assert GAME.to_act(s) == (0,)
    assert refused(s, 0, Check()) == "wrong_phase"


def test_only_the_seat_to_act_may_act() -> None:
    s = table([["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]])
    assert refused(s, 2, Stand()) == "not_your_turn"
    assert GAME.legal_actions(s, 2) == []


def test_betting_check_or_bet_while_nobody_has_bet_then_fold_call_or_raise() -> None:
    s = table([["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]])
    _, s = run(s, *FOUR_STAND)
    assert s.phase == "betting" and GAME.to_act(s) == (1,)
    assert refused(s, 1, Fold()) == "no_bet_to_fold"
    assert refused(s, 1, Call()) == "nothing_to_call"
    assert refused(s, 1, Raise(2)) == "nothing_to_raise"
    assert refused(s, 1, Bet(11)) == "bad_amount"
    assert refused(s, 1, Bet(0)) == "bad_amount"
    _, s = run(s, (1, Check()), (2, Bet(3)))
    assert refused(s, 3, Check()) == "bet_to_call"
    assert refused(s, 3, Bet(3)) == "already_bet"
    assert {type(a) for a in GAME.legal_actions(s, 3)} == {Fold, Call, Raise}
    events, s = run(s, (3, Call()), (0, Raise(2)))
    assert events[0] == Called(3, 3, False)
    assert GAME.to_act(s) == (1,) and flow.to_call(s, 1) == 5
    _, s = run(s, (1, Fold()), (2, Call()), (3, Call()))
    assert s.phase == "vote" and s.contrib == (6, 1, 6, 6)


def test_max_raises_per_betting_round() -> None:
    s = table([["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]], max_raises=2)
    _, s = run(s, *FOUR_STAND, (1, Bet(1)), (2, Raise(1)), (3, Raise(1)))
    assert refused(s, 0, Raise(1)) == "raise_limit"
    assert not any(isinstance(a, Raise) for a in GAME.legal_actions(s, 0))
    _, s = run(s, (0, Call()), (1, Call()), (2, Call()))
    assert s.phase == "vote"


def test_a_player_who_cannot_cover_a_call_goes_all_in() -> None:
    s = table([["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]], stacks=[50, 50, 4, 50])
    _, s = run(s, *FOUR_STAND, (1, Bet(8)))
    events, s = act(s, 2, Call())
    assert events == [Called(2, 3, True)]
    assert s.stacks[2] == 0 and s.all_in(2)
    view = GAME.view(s, 2)
    assert view["players"][2]["all_in"] and not view["players"][2]["out"]


def test_no_bet_or_raise_all_in_for_less_than_min_bet() -> None:
    # Seat 2 has 4 chips left after the ante: calling 3 leaves 1, below min_bet 2.
    s = table(
        [["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]],
        stacks=[50, 50, 5, 50],
        min_bet=2,
    )
    _, s = run(s, *FOUR_STAND, (1, Bet(3)))
    assert refused(s, 2, Raise(1)) == "bad_amount"
    assert refused(s, 2, Raise(2)) == "not_enough_chips"
    assert not any(isinstance(a, Raise) for a in GAME.legal_actions(s, 2))
    assert Call() in GAME.legal_actions(s, 2)


def test_a_bet_of_the_whole_stack_is_all_in_and_nobody_bets_against_all_ins() -> None:
    s = table([["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]], stacks=[3, 3, 3, 50])
    _, s = run(s, *FOUR_STAND)
    events, s = act(s, 1, Bet(2))
    assert events == [BetMade(1, 2, True)]
    _, s = run(s, (2, Call()), (3, Call()))
    # seat 0 (2 chips) calls all-in; seat 3 is then alone with chips: no more betting.
    _, s = act(s, 0, Call())
    assert s.phase == "vote"
    events, s = run(s, (1, Vote(True)), (2, Vote(True)), (3, Vote(True)), (0, Vote(True)))
    assert PhaseStarted("betting", 2, ()) in events
    assert any(isinstance(e, Showdown) for e in events)


def test_nobody_may_raise_when_every_other_player_still_in_is_all_in() -> None:
    s = table([["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]], stacks=[50, 3, 3, 50])
    _, s = run(s, *FOUR_STAND, (1, Bet(2)), (2, Call()), (3, Fold()))
    assert refused(s, 0, Raise(1)) == "nobody_to_bet_against"
    assert GAME.legal_actions(s, 0) == [Fold(), Call()]


def test_uncalled_part_of_a_bet_goes_back() -> None:
    s = table([["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]], stacks=[50, 50, 3, 50])
    _, s = run(s, *FOUR_STAND, (1, Bet(10)), (2, Call()), (3, Fold()))
    events, s = act(s, 0, Fold())
    assert BetReturned(1, 8) in events
    assert s.contrib == (1, 3, 3, 1) and s.stacks[1] == 47


def test_side_pots_are_formed_and_paid_exactly_as_in_poker() -> None:
    # Stacks after the ante: 19, 2, 5, 19. Seat 1 bets 2 all-in, seat 2 raises 3 all-in,
    # seat 3 raises 4 (puts in 9), seat 0 calls 9.
    hands = [["10H", "10C"], ["5H", "2C"], ["4H", "2D"], ["9H", "10D"]]
    s = table(hands, stacks=[20, 3, 6, 20])
    _, s = run(s, *FOUR_STAND, (1, Bet(2)), (2, Raise(3)), (3, Raise(4)), (0, Call()))
    assert s.contrib == (10, 3, 6, 10)
    assert build_pots(s.contrib, s.live) == (
        Pot(12, (0, 1, 2, 3)),
        Pot(9, (0, 2, 3)),
        Pot(8, (0, 3)),
    )
    view = GAME.view(s, None)
    assert view["pots"] == [
        {"amount": 12, "eligible": [0, 1, 2, 3]},
        {"amount": 9, "eligible": [0, 2, 3]},
        {"amount": 8, "eligible": [0, 3]},
    ]
    assert chips(s) == 49
    # seat 1 has 7 (distance 0), seat 2 has 6 (2), seat 3 has 19 (16), seat 0 has 20 (14).
    events, s = act(s, 1, Vote(False))
    got = [(a.pot, a.amount, a.winners, a.shares) for a in awards(events)]
    assert got == [(0, 12, (1,), (12,)), (1, 9, (2,), (9,)), (2, 8, (0,), (8,))]
    ended = next(e for e in events if isinstance(e, HandEnded))
    assert ended.stacks == (18, 12, 9, 10)


def test_folded_chips_stay_in_the_pot_for_the_eligible_seats() -> None:
    pots = build_pots([5, 3, 15, 15], live=[1, 2, 3])
    assert pots == (Pot(12, (1, 2, 3)), Pot(26, (2, 3)))


# -- folding and showdown (edge cases 4-5) ------------------------------------------------------


def test_all_but_one_fold_the_pot_is_paid_without_evaluating_or_revealing() -> None:
    s = table([["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]])
    events, s = run(s, *FOUR_STAND, (1, Bet(1)), (2, Fold()), (3, Fold()), (0, Fold()))
    hand = this_hand(events)
    assert not any(isinstance(e, Showdown) for e in hand)
    assert awards(events) == [PotAwarded(0, "all", 5, (1,), (5,), True)]
    assert s.last is not None and s.last.shown == ()
    assert s.stacks[1] == 103 - 1  # won 5, antes 1 for the next hand
    assert GAME.view(s, None)["last_hand"]["shown"] == []


def test_showdown_turns_up_the_remaining_hands_and_closest_wins() -> None:
    events, _ = showdown_of([["10H", "10C"], ["5H", "2C"], ["4H", "2D"], ["9H", "10D"]])
    shown = next(e for e in events if isinstance(e, Showdown))
    assert [h.seat for h in shown.hands] == [1, 2, 3, 0]
    assert shown.hands[0].cards == ("5H", "2C") and shown.hands[0].distance == 0
    assert awards(events) == [PotAwarded(0, "all", 4, (1,), (4,), False)]


def test_a_pot_of_seven_shared_by_two_equal_hands_four_to_the_nearer_dealers_left() -> None:
    assert share(7, (3, 1)) == (4, 3)
    # Dealer seat 2: the left is seat 3, then 0, 1. Seats 0 and 1 tie at 7; seat 0 is nearer.
    hands = [["5H", "2C"], ["4S", "3D"], ["9H", "10C"], ["10S", "8D"]]
    s = table(hands, dealer=2)
    _, s = run(s, (3, Stand()), (0, Stand()), (1, Stand()), (2, Stand()))
    # pot 4 antes + 3: seat 3 bets 1, seat 0 and 1 call, seat 2 folds.
    events, s = run(s, (3, Bet(1)), (0, Call()), (1, Call()), (2, Fold()), (3, Vote(False)))
    assert awards(events) == [PotAwarded(0, "all", 7, (0, 1), (4, 3), False)]


def test_equal_distances_to_seven_and_twenty_seven_share() -> None:
    events, _ = showdown_of([["10H", "10C"], ["5H", "2C"], ["10S", "10D"], ["9H", "8D"]])
    # 20 (7 away) and 5+2 = 7: seat 1 alone.
    assert awards(events)[0].winners == (1,)
    events, _ = showdown_of([["10H", "10C"], ["6H", "JC"], ["7S", "JD"], ["9H", "8D"]])
    assert awards(events) == [PotAwarded(0, "all", 4, (1, 2), (2, 2), False)]


def test_under_wins_six_and_a_half_beats_seven_and_a_half() -> None:
    events, _ = showdown_of(
        [["10H", "10C"], ["6H", "JC"], ["7S", "JD"], ["9H", "8D"]], equidistant="under_wins"
    )
    assert awards(events) == [PotAwarded(0, "all", 4, (1,), (4,), False)]
    events, _ = showdown_of(
        [["10H", "8C", "10D"], ["10S", "9C", "7D"], ["2S", "2D", "10C"], ["3H", "3D", "9H"]],
        deal="up_down_down",
        equidistant="under_wins",
    )
    # 28 vs 26: 26 wins.
    assert awards(events)[0].winners == (1,)


# -- split pot (edge case 6) --------------------------------------------------------------------


def test_split_pot_under_wins_six_and_a_half_takes_the_seven_half() -> None:
    events, _ = showdown_of(
        [["10H", "10C"], ["6H", "JC"], ["7S", "JD"], ["9H", "8D"]],
        pot="split",
        equidistant="under_wins",
    )
    # Low half 2 to 6½ (seat 1); high half: 20 (seat 0) is 7 away from 27, 17 (seat 3) 10.
    assert awards(events) == [
        PotAwarded(0, "seven", 2, (1,), (2,), False),
        PotAwarded(0, "twenty_seven", 2, (0,), (2,), False),
    ]


def test_split_pot_one_hand_may_win_both_halves() -> None:
    events, _ = showdown_of(
        [["10H", "10C"], ["5H", "AC", "AD"], ["7S", "JD", "2C"], ["9H", "8D", "2D"]],
        pot="split",
        deal="up_down_down",
    )
    assert [(a.half, a.winners) for a in awards(events)] == [
        ("seven", (1,)),
        ("twenty_seven", (1,)),
    ]


def test_split_pot_no_hand_qualifies_for_a_half_the_other_half_takes_all() -> None:
    events, _ = showdown_of([["2H", "3C"], ["5H", "2C"], ["4S", "JD"], ["3D", "2D"]], pot="split")
    assert awards(events) == [PotAwarded(0, "seven", 4, (1,), (4,), False)]


def test_split_pot_odd_chip_goes_to_the_winner_nearest_the_dealers_left() -> None:
    hands = [["10H", "10C"], ["5H", "2C"], ["4S", "JD"], ["3D", "2D"]]
    s = table(hands, pot="split")
    # seat 1 bets 1, seat 2 folds, seats 3 and 0 call: pot 7, low seat 1, high seat 0.
    events, _ = run(
        s, *FOUR_STAND, (1, Bet(1)), (2, Fold()), (3, Call()), (0, Call()), (1, Vote(False))
    )
    assert awards(events) == [
        PotAwarded(0, "seven", 4, (1,), (4,), False),
        PotAwarded(0, "twenty_seven", 3, (0,), (3,), False),
    ]


# -- extra card ---------------------------------------------------------------------------------


def test_extra_card_needs_every_remaining_player_to_agree() -> None:
    s = table([["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]])
    _, s = run(s, *FOUR_STAND, *FOUR_CHECK)
    assert set(GAME.to_act(s)) == {0, 1, 2, 3}
    events, s2 = run(s, (2, Vote(True)), (0, Vote(False)))
    assert VoteDecided(False) in events and any(isinstance(e, Showdown) for e in events)
    assert all(len(h) <= 2 for h in this_hand_hands(events))
    events, s3 = run(s, (2, Vote(True)), (0, Vote(True)), (1, Vote(True)), (3, Vote(True)))
    drawn = [e for e in events if isinstance(e, CardDrawn)]
    assert [e.seat for e in drawn] == [1, 2, 3, 0] and {e.face for e in drawn} == {"down"}
    assert s3.phase == "betting" and s3.round == 2 and GAME.to_act(s3) == (1,)
    events, _ = run(s3, *FOUR_CHECK)
    assert any(isinstance(e, Showdown) for e in events)


def this_hand_hands(events: list[Any]) -> list[tuple[str, ...]]:
    shown = next(e for e in events if isinstance(e, Showdown))
    return [h.cards for h in shown.hands]


def test_extra_card_face_up_is_public() -> None:
    s = table(
        [["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]], ["QS"], extra_card_face="up"
    )
    _, s = run(s, *FOUR_STAND, *FOUR_CHECK)
    events, s = run(s, (1, Vote(True)), (2, Vote(True)), (3, Vote(True)), (0, Vote(True)))
    first = next(e for e in events if isinstance(e, CardDrawn))
    assert first == CardDrawn(1, "QS", "up")
    assert GAME.redact(first, 3) == first
    assert GAME.view(s, 3)["players"][1]["cards"] == ["4H", None, "QS"]


# -- bust_over_27 -------------------------------------------------------------------------------


def test_bust_over_27_is_out_at_once_unseen_and_its_chips_stay() -> None:
    s = table([["2H", "3H"], ["10H", "10C"], ["6H", "7H"], ["8H", "9H"]], ["9S"], bust_over_27=True)
    events, s = act(s, 1, Draw())
    assert events == [CardDrawn(1, "9S", "down"), Busted(1)]
    assert s.folded[1] and s.busted[1] and s.contrib[1] == 1
    assert GAME.to_act(s) == (2,)
    assert GAME.view(s, 0)["players"][1]["cards"] == ["10H", None, None]
    events, s = run(
        s,
        (2, Stand()),
        (3, Stand()),
        (0, Stand()),
        (2, Check()),
        (3, Check()),
        (0, Check()),
        (2, Vote(False)),
    )
    shown = next(e for e in events if isinstance(e, Showdown))
    assert 1 not in [h.seat for h in shown.hands]
    assert sum(a.amount for a in awards(events)) == 4


def test_without_bust_over_27_a_high_hand_plays_on() -> None:
    s = table([["2H", "3H"], ["10H", "10C"], ["6H", "7H"], ["8H", "9H"]], ["9S"])
    events, s = act(s, 1, Draw())
    assert not any(isinstance(e, Busted) for e in events) and not s.folded[1]


def test_bust_leaving_one_player_pays_at_once() -> None:
    s = table([["10D", "10S"], ["10H", "10C"], None, None], ["9S", "8S"], bust_over_27=True)
    events, s = act(s, 1, Draw())
    assert awards(events) == [PotAwarded(0, "all", 2, (0,), (2,), True)]


# -- until_all_stand (edge case 7) --------------------------------------------------------------


def test_until_all_stand_a_player_who_stood_may_draw_again_and_no_draws_ends() -> None:
    s = table(
        [["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]],
        ["JS", "QS"],
        draw_rounds="until_all_stand",
    )
    _, s = run(s, (1, Stand()), (2, Draw()), (3, Stand()), (0, Stand()), *FOUR_CHECK)
    assert s.phase == "draw" and s.round == 2
    _, s = run(s, (1, Draw()))
    assert s.hands[1] == ("4H", "5H", "QS")
    events, s = run(s, (2, Stand()), (3, Stand()), (0, Stand()), *FOUR_CHECK)
    assert s.phase == "draw" and s.round == 3
    events, s = run(s, *FOUR_STAND, *FOUR_CHECK)
    assert any(isinstance(e, Showdown) for e in events)
    assert not any(isinstance(e, PhaseStarted) and e.phase == "vote" for e in events)


def test_until_all_stand_ten_players_the_stock_runs_out_then_showdown() -> None:
    hands = [[cards.deck()[2 * i], cards.deck()[2 * i + 1]] for i in range(10)]
    s = table(hands, draw_rounds="until_all_stand")
    order = list(range(1, 10)) + [0]
    all_events: list[Any] = []
    while s.phase == "draw" and len(s.stock) >= 10:
        events, s = run(s, *((x, Draw()) for x in order), *((x, Check()) for x in order))
        all_events += events
    assert s.phase == "draw" and len(s.stock) == 2
    events, s = run(s, (1, Draw()), (2, Draw()))
    assert events[-2:] == [StockRanOut(), PhaseStarted("betting", 4, tuple(order))]
    assert not s.stock
    assert s.phase == "betting" and GAME.legal_actions(s, 1) == [Check()] + [
        Bet(a) for a in (1, 5, 10)
    ]
    events, _ = run(s, *((x, Check()) for x in order))
    shown = next(e for e in events if isinstance(e, Showdown))
    assert sum(len(h.cards) for h in shown.hands) == 52
    assert not any(isinstance(e, StockRanOut) for e in all_events)


# -- table, dealer and session end --------------------------------------------------------------


def test_a_player_who_cannot_post_the_ante_sits_the_hand_out() -> None:
    s = GAME.initial_state(CODEC.options_from_wire({"ante": 2}, 4), 4)
    s = attrs.evolve(s, stacks=(50, 1, 50, 50))
    events = GAME.start(s, Rng(SEED, 1))
    assert events[0] == HandStarted(1, 0, (2, 0, 2, 2))
    for e in events:
        s = GAME.evolve(s, e)
    assert s.pending == (2, 3, 0)
    assert GAME.view(s, None)["players"][1]["sitting_out"]


def test_a_player_with_no_chips_is_out_and_the_dealer_skips_them() -> None:
    s = GAME.initial_state(CODEC.options_from_wire({}, 5), 5)
    s = attrs.evolve(s, stacks=(100, 0, 100, 100, 100), hand_no=3, dealer=0)
    events = flow.advance(s, Rng(SEED, 1))
    assert events[0] == HandStarted(4, 2, (1, 0, 1, 1, 1))
    for e in events:
        s = GAME.evolve(s, e)
    assert GAME.view(s, None)["players"][1]["out"]


def test_dealer_rotates_clockwise_each_hand() -> None:
    s = table([["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]])
    events, s = run(s, *FOUR_STAND, (1, Bet(1)), (2, Fold()), (3, Fold()), (0, Fold()))
    assert HandStarted(2, 1, (1, 1, 1, 1)) in events and s.dealer == 1
    assert GAME.to_act(s) == (2,)


def test_session_ends_when_one_player_holds_every_chip() -> None:
    s = table([["2H", "3H"], ["4H", "5H"], ["6H", "7H"], ["5S", "2S"]], stacks=[1, 1, 1, 50])
    events, s = run(s, *FOUR_STAND)
    # every seat but 3 is all-in after the ante: no betting round at all.
    assert events[-1] == PhaseStarted("vote", 1, (1, 2, 3, 0))
    events, s = run(s, (1, Vote(False)))
    assert awards(events) == [PotAwarded(0, "all", 4, (3,), (4,), False)]
    assert events[-1] == SessionEnded("one_player_left", (0, 0, 0, 53))
    assert GAME.outcome(s) == {
        "reason": "one_player_left",
        "hands": 1,
        "stacks": [0, 0, 0, 53],
        "net": [-100, -100, -100, -47],
        "winners": [3],
    }
    assert GAME.to_act(s) == () and GAME.view(s, None)["over"]


def test_session_ends_after_the_hands_option() -> None:
    final, records = play_local(GAME, {"hands": 3}, 4, SEED)
    assert final.game.hand_no == 3 and final.game.end_reason == "hands_played"
    assert sum(final.game.stacks) == 400
    assert GAME.outcome(final.game)["hands"] == 3


def test_session_ends_when_fewer_than_two_can_post_the_ante() -> None:
    s = GAME.initial_state(CODEC.options_from_wire({"ante": 5}, 4), 4)
    s = attrs.evolve(s, stacks=(3, 4, 2, 391), hand_no=9)
    assert flow.advance(s, Rng(SEED, 1)) == [SessionEnded("too_few_can_ante", (3, 4, 2, 391))]


# -- bots, view, render -------------------------------------------------------------------------


def test_bot_stands_near_a_target_and_draws_far_from_one() -> None:
    s = table([["2H", "3H"], ["4H", "3C"], ["6H", "7H"], ["8H", "9H"]])
    assert GAME.bot_action(s, 1, Rng(SEED, 1)) == Stand()  # 7
    _, s = act(s, 1, Stand())
    assert GAME.bot_action(s, 2, Rng(SEED, 1)) == Draw()  # 13


def test_bot_actions_are_always_legal() -> None:
    engine = Engine(GAME)
    _, records = play_local(GAME, {"hands": 10}, 6, SEED, engine=engine)
    assert engine.verify(roundtrip(records)) is None


def test_view_shows_stacks_pots_to_call_own_totals_and_flags() -> None:
    s = table([["AH", "6C"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]])
    _, s = run(s, *FOUR_STAND, (1, Bet(4)))
    v = GAME.view(s, 0)
    assert v["stacks"] == [99, 95, 99, 99] and v["pot_total"] == 8
    assert v["pots"] == [{"amount": 4, "eligible": [0, 1, 2, 3]}]
    assert [p["bet"] for p in v["players"]] == [0, 4, 0, 0]
    assert v["to_call"] == 4 and v["current_bet"] == 4 and v["dealer"] == 0
    assert v["turn"] == [2]
    assert v["you"]["cards"] == ["AH", "6C"] and v["you"]["totals"] == [14, 34]
    assert v["you"]["distance"] == 0 and v["you"]["closest_to_7"] == 14
    assert v["players"][1]["cards"] == ["4H", None] and v["players"][1]["visible"] == [8]
    assert GAME.view(s, None)["you"] is None


def test_render_and_describe_use_wire_data() -> None:
    s = table([["AH", "6C"], ["4H", "5H"], ["6H", "7H"], ["8H", "9H"]], stacks=[100, 100, 3, 100])
    _, s = run(s, *FOUR_STAND, (1, Bet(4)), (2, Call()))
    wire = orjson.loads(orjson.dumps(CODEC.to_wire(GAME.view(s, 0))))
    text = GAME.render(wire, 0)
    assert "seat 0 (you): stack 99" in text and "AH 6C" in text
    assert (
        "to call 4" in text
        and "Pot 10: main 4 (seats 0, 1, 2, 3); this round's bets 6" in text
        and "all_in" in text
    )
    assert "closest to 7: 7" in text
    assert GAME.describe({"type": "raise", "amount": 3}) == "raise 3"
    assert GAME.describe({"type": "vote", "yes": True}) == "vote yes to an extra card"
    assert GAME.describe({"type": "fold"}) == "fold"
    _, s = run(s, (3, Fold()), (0, Fold()), (1, Vote(False)))
    wire = orjson.loads(orjson.dumps(CODEC.to_wire(GAME.view(s, None))))
    assert "Last hand (1):" in GAME.render(wire, None)


# -- whole sessions -----------------------------------------------------------------------------

OPTION_SETS = st.fixed_dictionaries(
    {},
    optional={
        "stack": st.integers(1, 40),
        "ante": st.integers(1, 3),
        "min_bet": st.integers(1, 3),
        "max_bet": st.integers(3, 12),
        "max_raises": st.integers(0, 4),
        "hands": st.sampled_from(["unlimited", 1, 4, 12]),
        "deal": st.sampled_from(["up_down", "up_down_down"]),
        "draw_rounds": st.sampled_from(["seed", "until_all_stand"]),
        "extra_card_face": st.sampled_from(["down", "up"]),
        "pot": st.sampled_from(["single", "split"]),
        "equidistant": st.sampled_from(["share", "under_wins"]),
        "bust_over_27": st.booleans(),
    },
)


def check_session(game: Any, options: dict[str, Any], seats: int, seed: bytes) -> Any:
    """Play to the end; chips and cards conserved after every event; replay verifies."""
    engine = Engine(GAME)
    final, records = play_local(game, options, seats, seed, max_actions=200_000, engine=engine)
    state = engine.initial(records[0])
    total = seats * state.game.options.stack
    pots: tuple[Pot, ...] = ()
    paid: Counter[int] = Counter()
    for rec in records[1:]:
        before: State = state.game
        state = engine.apply(state, rec)
        g: State = state.game
        assert sum(g.stacks) + g.pot_total == total, f"chips not conserved at {rec.seq}"
        assert min(g.stacks) >= 0
        held = [c for h in g.hands for c in h] + list(g.stock)
        if held:
            assert Counter(held) == Counter(cards.deck()), f"cards not conserved at {rec.seq}"
        e = rec.obj if rec.type == "event" else None
        if isinstance(e, Showdown):
            # side pots pay exactly: each pot's chips go to its eligible seats, all of them.
            pots, paid = build_pots(before.contrib, before.live), Counter()
            assert [h.seat for h in e.hands] == list(from_left(before.live, g.dealer, seats))
        if isinstance(e, PotAwarded):
            assert sum(e.shares) == e.amount and min(e.shares) >= 0
            if e.uncontested:
                assert e.amount == before.pot_total and e.winners == before.live
            else:
                assert set(e.winners) <= set(pots[e.pot].eligible)
                paid[e.pot] += e.amount
        if isinstance(e, HandEnded) and pots:
            assert [paid[i] for i in range(len(pots))] == [p.amount for p in pots]
            pots = ()
    outcome = GAME.outcome(final.game)
    assert outcome is not None and final.ended
    assert sum(outcome["stacks"]) == total
    again = roundtrip(records)
    assert engine.verify(again) is None
    assert engine.rebuild(again).game == final.game
    return final.game


def fix(options: dict[str, Any]) -> dict[str, Any]:
    options = dict(options)
    stack = options.get("stack", 100)
    options["ante"] = min(options.get("ante", 1), stack)
    if options.get("max_bet", 10) < options.get("min_bet", 1):
        options["max_bet"] = options["min_bet"]
    if options.get("hands", "unlimited") == "unlimited" and stack > 20:
        options["hands"] = 12
    return options


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(options=OPTION_SETS, seats=st.integers(4, 10), seed=st.binary(min_size=32, max_size=32))
def test_random_sessions_end_conserve_chips_and_cards_and_replay(
    options: dict[str, Any], seats: int, seed: bytes
) -> None:
    final = check_session(Mixed(GAME), fix(options), seats, seed)
    o = final.options
    assert (
        final.end_reason == "hands_played" and final.hand_no == o.hands
    ) or final.end_reason in ("one_player_left", "too_few_can_ante")


@pytest.mark.parametrize(("seats", "seed"), [(4, 1), (4, 2)])
def test_random_legal_clients_finish_default_sessions(seats: int, seed: int) -> None:
    final = check_session(RandomLegal(GAME), {}, seats, bytes([seed]) * 32)
    assert final.end_reason == "one_player_left"
    assert sorted(final.stacks)[-1] == 100 * seats


def test_host_bots_finish_a_default_session() -> None:
    final = check_session(GAME, {}, 4, b"\x02" * 32)
    assert final.end_reason == "one_player_left"


# -- hidden information -------------------------------------------------------------------------


def card_names(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value} if cards.is_card(value) else set()
    if isinstance(value, dict):
        return set().union(*(card_names(v) for v in value.values())) if value else set()
    if isinstance(value, list | tuple):
        return set().union(*(card_names(v) for v in value)) if value else set()
    return set()


def _view_checker(
    codec: GameCodec, viewer: Any, known: dict[int, set[str]], secret: dict[int, set[str]]
) -> Any:
    def check_view(g: State) -> None:
        view = codec.to_wire(GAME.view(g, viewer))
        last = view.pop("last_hand")
        names = card_names(view)
        assert not names - known.get(g.hand_no, set()), (viewer, g.hand_no)
        assert not names & secret.get(g.hand_no, set())
        if last is not None:
            names = card_names(last)
            assert not names - known[last["hand"]]
            assert not names & secret[last["hand"]]

    return check_view


def check_no_leak(records: list[Record], engine: Engine, seats: int) -> int:
    """Every viewer sees only its own cards, face-up cards and showdown hands, and nobody else
    ever sees a folded hand's face-down cards; returns how many folds were checked.

    Card names repeat from hand to hand, so the check is per hand: the view's ``last_hand`` is
    checked against what was known in the hand it describes.
    """
    folded_checked = 0
    codec = engine.codec
    for viewer in [*range(seats), None]:
        state = engine.initial(records[0])
        known: dict[int, set[str]] = {}
        secret: dict[int, set[str]] = {}
        check_view = _view_checker(codec, viewer, known, secret)

        for rec in records[1:]:
            state = engine.apply(state, rec)
            g: State = state.game
            if rec.type == "ended":
                assert not card_names(rec.data["outcome"])
                check_view(g)
                continue
            if rec.type != "event":
                continue
            e = rec.obj
            seen = known.setdefault(g.hand_no, set())
            hidden = secret.setdefault(g.hand_no, set())
            if isinstance(e, Dealt):
                seen |= {c for c in e.up if c}
                if viewer is not None:
                    seen |= set(e.down[viewer])
            elif isinstance(e, CardDrawn) and (e.face == "up" or e.seat == viewer):
                seen.add(e.card)
            elif isinstance(e, Showdown):
                seen |= {c for h in e.hands for c in h.cards}
            elif isinstance(e, Folded | Busted) and e.seat != viewer:
                faces = zip(g.hands[e.seat], g.faces[e.seat], strict=True)
                hidden |= {c for c, up in faces if not up}
                folded_checked += 1
            wire = codec.event_to_wire(GAME.redact(e, viewer))
            assert not card_names(wire) - seen, (viewer, wire)
            assert not card_names(wire) & hidden
            if isinstance(e, Dealt):
                assert wire["stock"] is None
            check_view(g)
    return folded_checked


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(options=OPTION_SETS, seats=st.integers(4, 7), seed=st.binary(min_size=32, max_size=32))
def test_no_view_or_redacted_event_names_a_card_its_viewer_may_not_see(
    options: dict[str, Any], seats: int, seed: bytes
) -> None:
    engine = Engine(GAME)
    options = {**fix(options), "hands": 4}
    _, records = play_local(Mixed(GAME), options, seats, seed, engine=engine)
    check_no_leak(records, engine, seats)


def test_folded_hands_are_never_revealed_to_anyone_even_at_the_end() -> None:
    engine = Engine(GAME)
    _, records = play_local(RandomLegal(GAME), {"hands": 6}, 5, b"\x11" * 32, engine=engine)
    assert check_no_leak(records, engine, 5) > 0


def test_redact_hides_down_cards_and_the_stock_from_others() -> None:
    dealt = Dealt(("2H", "3H"), (("4H",), ("5H",)), ("6H", "7H"))
    assert GAME.redact(dealt, 0) == Dealt(("2H", "3H"), (("4H",), (None,)), None)
    assert GAME.redact(dealt, None) == Dealt(("2H", "3H"), ((None,), (None,)), None)
    drawn = CardDrawn(1, "KS", "down")
    assert GAME.redact(drawn, 1) == drawn
    assert GAME.redact(drawn, 0) == CardDrawn(1, None, "down")
    assert CODEC.event_to_wire(GAME.redact(drawn, None)) == {
        "type": "card_drawn",
        "seat": 1,
        "card": None,
        "face": "down",
    }


def test_pots_helpers_order_from_the_dealers_left() -> None:
    assert from_left([0, 1, 2, 3], 2, 4) == (3, 0, 1, 2)
    assert share(10, (1, 2, 3)) == (4, 3, 3)
    with pytest.raises(ValueError):
        share(3, ())
