"""Crazy Eights (game id ``crazy-eights``), per ``docs/rules/crazy-eights.md``.

A shedding game for 2-7 players over a match of several deals. The package: options, actions,
events and state in :mod:`plugins.crazy_eights.model`; ``decide``, ``evolve`` and the legal
actions in :mod:`plugins.crazy_eights.rules`; ``view`` and ``redact`` in
:mod:`plugins.crazy_eights.view`; text rendering in :mod:`plugins.crazy_eights.text`.

Actions (wire form): ``{"type": "play", "card": "8C", "suit": "H"}`` (``suit`` only for a wild
card that is not the player's last), ``{"type": "draw"}``, ``{"type": "pass"}``.
Refusals (:class:`~host.game.IllegalAction` reasons): ``not_your_turn``, ``card_not_in_hand``,
``draw_two_pending``, ``card_does_not_match``, ``suit_required``, ``suit_not_allowed``,
``unknown_suit``, ``cannot_draw``, ``cannot_pass``.

Events: ``dealt``, ``played``, ``drew``, ``reshuffled``, ``penalty_taken``, ``passed``,
``deal_scored``. A deal that ends is scored and the next deal dealt in the same action.

Decisions where the spec is silent or ambiguous:

- **Dealing**: one card at a time from the top of the shuffled shoe, starting at the dealer's left.
- **Wild starter** (Setup 4): the rule covers every rank wild for someone this deal (8s; in
  countdown the ranks of all players' numbers). ``bury`` reinserts the card at a random place
  in the middle half of the stock left after turning it (so nobody can count to it; the
  position comes from the Rng and is recorded in the dealt stock), then turns the next card;
  ``redraw``
  shuffles it into the stock and turns the top card again. The cards turned back are public
  (``Dealt.turned_back``). Should burying cycle through the whole stock, or a redraw stock hold
  wild cards only (possible only in countdown), the card last turned is kept. A kept wild starter
  names no suit: the first player may play any card.
- **Special starter** ``applies``: the starter acts as if the dealer had played it: a Queen skips
  the dealer's left, an Ace reverses (play starts at the dealer's right; with two players the
  dealer plays first), a 2 puts a penalty of two on the first player.
- **Matching**: a card matches the top discard's rank or the current suit, or is wild for the
  player. In countdown a card wild for another player is an ordinary card for this one (it can
  still match by rank or suit, naming nothing).
- **Special cards** act by rank even when played as a wild (a countdown player at 2 playing a 2
  names a suit and sets a draw-two penalty; at 1 an Ace names a suit and reverses).
- **Draw-two penalty** (``draw_two``): the next player may only play a 2 (any 2) or ``draw``,
  which takes the whole penalty at once and ends their turn (``penalty_taken``); ``draw_limit``
  does not apply to it. Without stacking a 2 answering a 2 passes on a penalty of two. When
  the stock runs out mid-penalty the discards are reshuffled (with ``reshuffle``); whatever still
  cannot be drawn is forgiven (``penalty_taken.forgiven``). When nothing at all can be drawn the
  player may pass (with ``draw_limit`` none only if they hold no 2) and the penalty lapses.
- **Last card**: a wild last card names no suit. With ``special_on_last_card`` ``applied`` a last
  2 makes the next player take the draw-two penalty (stacked total included) before the deal is
  scored, so those cards count; a last Queen or Ace changes nothing that is scored.
- **Passing**: with ``draw_limit`` N a player may pass once nothing more may be drawn (N draws,
  or stock and reshuffle empty) even holding a legal play; with ``none`` only when nothing can be
  drawn and they hold no legal play (A turn).
- **Blocked**: a pass counts toward a block only when the passer drew nothing that turn; the deal
  is blocked when every player in turn passes that way (``seats`` consecutive such passes: no
  card moved for a full round). A turn with a draw or a play resets the count. Because cards
  only leave the stock by drawing and come back only by playing, a deal without plays runs out
  of draws, so every deal ends.
- **Blocked scoring**: "hand count" is read, with the seed, as the hand's card points.
- **Countdown**: ``hand_size`` and ``target`` are not used; a blocked deal changes no number; the
  match ends when one player goes out at 1. Outcome ``scores`` are then the numbers (lower is
  better).
- **Hidden information**: hands only to their owner, stock order to nobody, a drawn card only to
  its drawer; ``deal_scored`` reveals every hand and the view keeps it as ``last_deal``.
- **Undo by consent** (``undoable``): a ``play`` or ``pass`` that drew nothing and did not end the
  deal may be taken back (the card played goes back to the hand; everyone saw it, so it is known
  to be there). A draw never: it showed the drawer a card from the stock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from host.game import GameInfo, Rng, Viewer, hookimpl
from plugins import cards
from plugins.crazy_eights import rules
from plugins.crazy_eights import view as views
from plugins.crazy_eights.model import (
    DealScored,
    Dealt,
    Draw,
    Drew,
    Options,
    Outcome,
    Pass,
    Passed,
    PenaltyTaken,
    Play,
    Played,
    Reshuffled,
    State,
    View,
    check_options,
)
from plugins.crazy_eights.text import describe, describe_event, describe_outcome, render

__all__ = ["CrazyEights", "gamehost_register_games"]


class CrazyEights:
    """The Crazy Eights game (see the module docstring for the rules' open points).

    ``legal_actions`` lists every distinct playable card (a wild one once per suit it may name,
    or once with no suit as a last card), then ``draw`` and ``pass`` when allowed.
    """

    info = GameInfo(
        id="crazy-eights",
        title="Crazy Eights",
        version="1",
        min_seats=2,
        max_seats=7,
        options=Options,
        action_types=(Play, Draw, Pass),
        event_types=(Dealt, Played, Drew, Reshuffled, PenaltyTaken, Passed, DealScored),
        view_type=View,
        outcome_type=Outcome,
        description=(
            "Shed your hand by matching the top discard's rank or suit; 8s are wild and name"
            " a suit. Deals are scored by the cards left in hand until a player reaches the"
            " target. Variants: queens skip, aces reverse, draw two, countdown."
        ),
    )

    # -- setup ---------------------------------------------------------------------------------
    def check_options(self, options: Options, seats: int) -> None:
        """See :func:`plugins.crazy_eights.model.check_options`."""
        check_options(options, seats)

    def initial_state(self, options: Options, seats: int) -> State:
        return rules.initial_state(options, seats)

    def start(self, state: State, rng: Rng) -> list[Any]:
        """The first deal (dealer seat 0)."""
        return [rules.next_deal(state, rng)]

    def evolve(self, state: State, event: Any) -> State:
        return rules.evolve(state, event)

    # -- turns ---------------------------------------------------------------------------------
    def to_act(self, state: State) -> tuple[int, ...]:
        return rules.to_act(state)

    def legal_actions(self, state: State, seat: int) -> list[Any]:
        return rules.legal_actions(state, seat)

    def bot_action(self, state: State, seat: int, rng: Rng) -> Any:
        """Play a legal card when there is one (keeping wild cards for last), else draw, else
        pass. A wild card names the suit of a card of the rest of the hand drawn at random, so
        the suits the hand holds most are named most. (Always naming the suit held most could
        go round for ever: with the four 8s the whole stock, each bot drew one and named a suit
        the next one lacked, deal after deal to the host's record limit.)"""
        plays = rules.playable_cards(state, seat)
        if plays:
            plain = [c for c in plays if not rules.is_wild(state, seat, c)]
            card = rng.choice(plain or plays)
            hand = state.hands[seat]
            if rules.is_wild(state, seat, card) and len(hand) > 1:
                return Play(card, cards.suit(rng.choice(cards.remove_one(hand, card))))
            return Play(card, None)
        return Draw() if rules.can_draw(state) else Pass()

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list[Any]:
        """See :func:`plugins.crazy_eights.rules.decide`."""
        return rules.decide(state, seat, action, rng, self.evolve)

    def undoable(self, state: State, seat: int, action: Any, events: Sequence[Any]) -> bool:
        """Whether ``seat`` may take back ``action`` (taken in ``state``, causing ``events``)
        by consent: a ``play`` or a ``pass`` whose only events are ``played`` / ``passed``.
        Not a draw (it showed the drawer a card), nor a play or pass that ended the deal (the
        deal's score shows every hand and the next deal is dealt) or made someone draw."""
        return isinstance(action, Play | Pass) and all(
            isinstance(e, Played | Passed) for e in events
        )

    # -- what people see -----------------------------------------------------------------------
    def view(self, state: State, viewer: Viewer) -> dict[str, Any]:
        """See :func:`plugins.crazy_eights.view.view`."""
        return views.view(state, viewer)

    def redact(self, event: Any, viewer: Viewer) -> Any:
        """See :func:`plugins.crazy_eights.view.redact`."""
        return views.redact(event, viewer)

    def outcome(self, state: State) -> dict[str, Any] | None:
        """``None`` while the match runs, then ``{"scores", "winners", "deals", "countdown"}``.

        ``scores`` are the match points per seat, or in countdown each seat's number (lower is
        better, the winner's is 0).
        """
        if not state.over:
            return None
        return {
            "scores": list(state.numbers if state.options.countdown else state.scores),
            "winners": list(state.winners),
            "deals": state.deal,
            "countdown": state.options.countdown,
        }

    # -- text ----------------------------------------------------------------------------------
    def render(self, view: dict[str, Any], viewer: Viewer) -> str:
        """See :func:`plugins.crazy_eights.text.render`."""
        return render(view, viewer)

    def describe(self, action: dict[str, Any]) -> str:
        """See :func:`plugins.crazy_eights.text.describe`."""
        return describe(action)

    def describe_event(self, event: dict[str, Any], viewer: Viewer, names: Sequence[str]) -> str:
        """See :func:`plugins.crazy_eights.text.describe_event`."""
        return describe_event(event, viewer, names)

    def describe_outcome(self, outcome: dict[str, Any], names: Sequence[str]) -> str:
        """See :func:`plugins.crazy_eights.text.describe_outcome`."""
        return describe_outcome(outcome, names)


@hookimpl
def gamehost_register_games() -> list[Any]:
    """Register Crazy Eights with the host."""
    return [CrazyEights()]
