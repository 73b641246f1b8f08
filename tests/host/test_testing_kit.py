"""The plugin kit (:mod:`host.testing`) catches each bug planted in a copy of the toy game.

Every game below is the toy High Card (:mod:`tests.toy`) with one planted fault; ``check_game``
must fail on it with :class:`GameCheckFailed` naming that fault, and pass on the toy itself.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import attrs
import pytest

from host.game import IllegalAction, Rng, Viewer, who
from host.testing import GameCheckFailed, check_game
from plugins import cards
from tests.broken_games import BotRaises, RefusesItsLegalAction, UnregisteredEvent
from tests.toy import Dealt, HighCard, Keep, Kept, State, Swap, Swapped


def cards_conserved(state: State) -> None:
    """The invariant hook of the toy: no card is in two places (a swapped-out card leaves the
    game, so only uniqueness is conserved)."""
    held = list(state.hands) + list(state.stock)
    twice = sorted({c for c in held if held.count(c) > 1})
    assert not twice, f"cards held twice: {twice}"


class LeaksInView(HighCard):
    """The view shows every hand to every viewer (a hidden-card leak)."""

    def view(self, state: State, viewer: Viewer) -> dict:
        return {**super().view(state, viewer), "hands": list(state.hands)}


class LeaksInRedact(HighCard):
    """``redact`` forgets to hide the card another seat swapped for."""

    def redact(self, event: Any, viewer: Viewer) -> Any:
        if isinstance(event, Swapped):
            return event
        return super().redact(event, viewer)


class DuplicatesCards(HighCard):
    """A swap puts the stock's top card in the hand but leaves it in the stock (an impossible
    state: that card is now held twice)."""

    def evolve(self, state: State, event: Any) -> State:
        after = super().evolve(state, event)
        if isinstance(event, Swapped):
            return attrs.evolve(after, stock=state.stock)
        return after


class UsesRandom(HighCard):
    """``start`` shuffles with the ``random`` module instead of the game's Rng."""

    def start(self, state: State, rng: Rng) -> list:
        shoe = cards.deck()
        random.shuffle(shoe)
        return [Dealt(tuple(shoe[: state.seats]), tuple(shoe[state.seats :]))]


def fault_of(game: Any, **kwargs: Any) -> GameCheckFailed:
    with pytest.raises(GameCheckFailed) as caught:
        check_game(game, seeds=range(2), leak_examples=30, **kwargs)
    return caught.value


def test_the_toy_game_passes_the_kit() -> None:
    playouts = check_game(HighCard(), invariant=cards_conserved)
    assert {p.bots for p in playouts} == {"random"}
    assert all(p.state.ended for p in playouts)


def test_a_view_that_shows_other_hands_is_a_leak() -> None:
    failed = fault_of(LeaksInView())
    assert failed.fault == "leak"
    assert "the view, turn push or outcome shows a card" in str(failed)


def test_an_event_redacted_too_little_is_a_leak() -> None:
    failed = fault_of(LeaksInRedact())
    assert failed.fault == "leak"
    assert "a redacted event tells a card" in str(failed)


def test_an_impossible_state_fails_the_invariant_hook() -> None:
    failed = fault_of(DuplicatesCards(), invariant=cards_conserved)
    assert failed.fault == "invariant"
    assert "cards held twice" in str(failed) and "'swapped'" in str(failed)


def test_a_legal_action_decide_refuses_is_named() -> None:
    failed = fault_of(RefusesItsLegalAction())
    assert failed.fault == "legal_refused"
    assert "decide refused Swap()" in str(failed) and "no_swaps" in str(failed)


def test_an_unregistered_event_is_named() -> None:
    failed = fault_of(UnregisteredEvent())
    assert failed.fault == "fault"
    assert "the event Peeked(" in str(failed) and "the game did not register" in str(failed)


def test_an_exception_on_a_bots_turn_is_named() -> None:
    failed = fault_of(BotRaises())
    assert failed.fault == "fault"
    assert "bot_action for seat 0 raised ValueError: planted bug in bot_action" in str(failed)


def test_random_instead_of_the_games_rng_is_nondeterminism() -> None:
    failed = fault_of(UsesRandom())
    assert failed.fault == "nondeterminism"
    assert "never random" in str(failed)


def test_a_swap_is_listed_and_accepted_at_every_state() -> None:
    """The legal check really runs ``decide``: a toy whose swap is refused only late is caught
    at that state, not just at the first."""

    class RefusesLateSwaps(HighCard):
        def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
            if isinstance(action, Swap) and state.turn >= state.seats:
                raise IllegalAction("late", "no swaps in round 2")
            return super().decide(state, seat, action, rng)

    failed = fault_of(RefusesLateSwaps(), options={"rounds": 2})
    assert failed.fault == "legal_refused" and "late" in str(failed)


async def test_the_kits_game_host_fixture_serves_the_chosen_games(game_host) -> None:
    """``host.testing.pytest_plugin`` (enabled in tests/conftest.py): ``game_host`` serves what
    ``gamehost_registry`` returns, here overridden by tests/conftest.py to the toy only."""
    client = await game_host.client()
    games = await client.call("games")
    assert [g["id"] for g in games["games"]] == ["high-card"]
    created = await client.call("create", game="high-card", seats=2, bots=2)
    assert created["free"] == []


class NeverEnds(HighCard):
    """A keep does not move the turn on: with bots that always keep the game never ends."""

    def legal_actions(self, state: State, seat: int) -> list:
        return [Keep()] if seat in self.to_act(state) else []

    def evolve(self, state: State, event: Any) -> State:
        if isinstance(event, Kept):
            return state
        return super().evolve(state, event)


class ListsForEverySeat(HighCard):
    """``legal_actions`` lists a keep for seats that are not to act."""

    def legal_actions(self, state: State, seat: int) -> list:
        return super().legal_actions(state, seat) or ([Keep()] if state.hands else [])


def test_a_game_that_never_ends_is_named_with_its_bound() -> None:
    failed = fault_of(NeverEnds(), max_actions=50)
    assert failed.fault == "did_not_end"
    assert "no outcome after 50 actions" in str(failed)


def test_legal_actions_for_a_seat_not_to_act_are_named() -> None:
    failed = fault_of(ListsForEverySeat())
    assert failed.fault == "legal_not_to_act"
    assert "for seat 1, which is not to act" in str(failed)


@attrs.frozen
class ToyView:
    """The toy's view shape, published through ``GameInfo.view_type``."""

    hands: tuple[str | None, ...] = attrs.field(metadata={"hidden": "some"})
    stock: int
    turn: int


class PublishesItsView(HighCard):
    info = attrs.evolve(HighCard.info, view_type=ToyView)


class BreaksItsPublishedView(PublishesItsView):
    """The view writes ``stock`` as text although the published shape says an integer."""

    def view(self, state: State, viewer: Viewer) -> dict:
        return {**super().view(state, viewer), "stock": str(len(state.stock))}


def test_a_view_true_to_its_published_schema_passes() -> None:
    check_game(PublishesItsView(), leak_examples=0)


def test_a_view_that_breaks_its_published_schema_is_named() -> None:
    failed = fault_of(BreaksItsPublishedView())
    assert failed.fault == "contract"
    assert "the view of viewer None breaks its published schema at stock" in str(failed)


# ---- the game's text members ------------------------------------------------------------------
class Tells(HighCard):
    """Tells its events in words, from the event as the viewer received it (no leak)."""

    def describe_event(self, event: dict, viewer: Viewer, names: Sequence[str]) -> str:
        if event["type"] == "swapped":
            card = event["card"] or "a card"
            return f"{who(event['seat'], viewer, names, start=True)} swapped for {card}"
        if event["type"] == "dealt":
            mine = event["hands"][viewer] if viewer is not None else None
            return "dealt" + (f"; you hold {mine}" if mine else "")
        return f"{who(event['seat'], viewer, names, start=True)} kept"


class TellsWhatRedactHid(Tells):
    """Its text reads the last event ``redact`` was handed (the whole event), not the event
    the viewer received: it names the card another seat swapped for."""

    def redact(self, event: Any, viewer: Viewer) -> Any:
        self.whole = event
        return super().redact(event, viewer)

    def describe_event(self, event: dict, viewer: Viewer, names: Sequence[str]) -> str:
        whole = self.whole
        if isinstance(whole, Swapped) and event["type"] == "swapped":
            return f"{names[whole.seat]} swapped for {whole.card}"
        return super().describe_event(event, viewer, names)


class TellsInTwoLines(Tells):
    def describe_event(self, event: dict, viewer: Viewer, names: Sequence[str]) -> str:
        return "one\ntwo"


class DescribeOutcomeRaises(Tells):
    def describe_outcome(self, outcome: dict, names: Sequence[str]) -> str:
        raise KeyError("scores")


def test_a_game_that_tells_its_events_from_what_the_viewer_got_passes() -> None:
    check_game(Tells(), seeds=range(2), leak_examples=0)


def test_a_text_naming_a_card_redact_hid_is_a_text_leak() -> None:
    failed = fault_of(TellsWhatRedactHid())
    assert failed.fault == "text_leak"
    assert "which redact hid from that viewer" in str(failed)


@pytest.mark.parametrize(
    ("game", "says"),
    [(TellsInTwoLines(), "wrote more than one line"), (DescribeOutcomeRaises(), "KeyError")],
)
def test_a_text_member_that_raises_or_writes_two_lines_is_named(game: Any, says: str) -> None:
    failed = fault_of(game)
    assert failed.fault == "describe"
    assert says in str(failed)


class TakesBackEverything(HighCard):
    """``undoable`` lets a swap be taken back, though the card swapped in was shown to its seat
    alone (a draw must never be taken back)."""

    def undoable(self, state: State, seat: int, action: Any, events: Sequence[Any]) -> bool:
        return True


class TakesBackKeeps(HighCard):
    """``undoable`` lets only a keep be taken back: it shows nothing hidden."""

    def undoable(self, state: State, seat: int, action: Any, events: Sequence[Any]) -> bool:
        return isinstance(action, Keep) and all(isinstance(e, Kept) for e in events)


def test_an_undoable_that_lets_a_draw_be_taken_back_is_named() -> None:
    failed = fault_of(TakesBackEverything())
    assert failed.fault == "undo"
    assert "'swapped'" in str(failed) and "shown otherwise to some viewers" in str(failed)


def test_an_undoable_that_takes_back_only_what_showed_nothing_passes() -> None:
    check_game(TakesBackKeeps(), seeds=range(2), leak_examples=0)
