"""Crazy Eights (game id ``crazy-eights``), per ``docs/rules/crazy-eights.md``.

A shedding game for 2-7 players over a match of several deals. Values are in
:mod:`plugins.crazy_eights_model`, rules in :mod:`plugins.crazy_eights_rules`, text rendering in
:mod:`plugins.crazy_eights_text`.

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
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs

from host.game import NOT_YOUR_TURN, Emitter, GameInfo, IllegalAction, Rng, Viewer, hookimpl
from plugins import cards
from plugins import crazy_eights_rules as rules
from plugins.crazy_eights_model import (
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
    View,
    check_options,
    target,
)
from plugins.crazy_eights_text import describe, render

__all__ = ["CrazyEights", "gamehost_register_games"]


class _Events(Emitter):
    """The events of one ``decide`` (an :class:`Emitter`), with the moves that emit several."""

    def draw(self, seat: int, want: int, rng: Rng) -> int:
        """Draw up to ``want`` cards for ``seat``, reshuffling when the stock runs out."""
        got = 0
        while got < want:
            s = self.state
            if not s.stock:
                if not (s.options.reshuffle and len(s.discard) > 1):
                    break
                pile = tuple(rng.shuffled(s.discard[:-1]))
                self.emit(Reshuffled(pile, len(pile)))
                s = self.state
            k = min(want - got, len(s.stock))
            self.emit(Drew(seat, s.stock[:k], k))
            got += k
        return got

    def take_penalty(self, seat: int, rng: Rng) -> None:
        total = self.state.penalty
        got = self.draw(seat, total, rng)
        self.emit(PenaltyTaken(seat, got, total - got))

    def end_deal(self, winner: int | None, rng: Rng) -> None:
        s = self.emit(rules.score_deal(self.state, winner))
        if not s.over:
            self.emit(rules.next_deal(s, rng))


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
        description=(
            "Shed your hand by matching the top discard's rank or suit; 8s are wild and name"
            " a suit. Deals are scored by the cards left in hand until a player reaches the"
            " target. Variants: queens skip, aces reverse, draw two, countdown."
        ),
    )

    # -- setup ---------------------------------------------------------------------------------
    def check_options(self, options: Options, seats: int) -> None:
        """See :func:`plugins.crazy_eights_model.check_options`."""
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
        if state.over or state.turn is None or not all(state.hands):
            return ()
        return (state.turn,)

    def legal_actions(self, state: State, seat: int) -> list[Any]:
        if seat not in self.to_act(state):
            return []
        hand = state.hands[seat]
        out: list[Any] = []
        for card in rules.playable_cards(state, seat):
            if rules.is_wild(state, seat, card) and len(hand) > 1:
                out += [Play(card, s) for s in cards.SUITS]
            else:
                out.append(Play(card, None))
        if rules.can_draw(state):
            out.append(Draw())
        if rules.can_pass(state, seat):
            out.append(Pass())
        return out

    def bot_action(self, state: State, seat: int, rng: Rng) -> Any:
        """Play a legal card when there is one (keeping wild cards for last), else draw, else
        pass. A wild card names the suit the rest of the hand holds most of."""
        plays = rules.playable_cards(state, seat)
        if plays:
            plain = [c for c in plays if not rules.is_wild(state, seat, c)]
            card = rng.choice(plain or plays)
            hand = state.hands[seat]
            if rules.is_wild(state, seat, card) and len(hand) > 1:
                rest = Counter(cards.suit(c) for c in cards.remove_one(hand, card))
                return Play(card, max(cards.SUITS, key=lambda s: rest[s]))
            return Play(card, None)
        return Draw() if rules.can_draw(state) else Pass()

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list[Any]:
        """The events ``action`` by ``seat`` causes.

        Raises:
            IllegalAction: see the module docstring for the reasons.
        """
        if seat not in self.to_act(state):
            raise IllegalAction(NOT_YOUR_TURN, f"seat {seat} is not to act")
        if isinstance(action, Play):
            return self._play(state, seat, action, rng)
        out = _Events(state, self.evolve)
        if isinstance(action, Draw):
            if not rules.can_draw(state):
                raise IllegalAction("cannot_draw", self._why_no_draw(state))
            if state.penalty > 0:
                out.take_penalty(seat, rng)
            else:
                out.draw(seat, 1, rng)
            return out
        if isinstance(action, Pass):
            if not rules.can_pass(state, seat):
                raise IllegalAction(
                    "cannot_pass",
                    "you may pass only when no card can be drawn"
                    + (" and you hold no legal play" if state.options.draw_limit == "none" else "")
                    + " (A turn)",
                )
            s = out.emit(Passed(seat))
            if s.passes >= s.seats:
                out.end_deal(None, rng)
            return out
        raise IllegalAction("unknown_action", f"not a Crazy Eights action: {action!r}")

    @staticmethod
    def _why_no_draw(state: State) -> str:
        if rules.drawable(state) == 0:
            return "the stock is empty and there is nothing to reshuffle (A turn)"
        return f"draw_limit reached: {state.draws} cards drawn this turn (A turn)"

    def _play(self, state: State, seat: int, action: Play, rng: Rng) -> list[Any]:
        hand = state.hands[seat]
        card, suit = action.card, action.suit
        if card not in hand:
            raise IllegalAction("card_not_in_hand", f"{card!r} is not in your hand")
        if state.penalty > 0 and cards.rank(card) != "2":
            raise IllegalAction(
                "draw_two_pending",
                f"a draw-two penalty of {state.penalty} is pending: play a 2 or draw (Variants)",
            )
        if not rules.matches(state, seat, card):
            raise IllegalAction(
                "card_does_not_match",
                f"{card} matches neither the rank of {state.discard[-1]} nor the current suit"
                f" {cards.SUIT_NAMES[state.current_suit or 'C']} (A turn)",
            )
        if rules.is_wild(state, seat, card) and len(hand) > 1:
            if suit is None:
                raise IllegalAction("suit_required", f"{card} is wild: name a suit (A turn)")
            if suit not in cards.SUITS:
                raise IllegalAction("unknown_suit", f"{suit!r} is not one of C, D, H, S")
        elif suit is not None:
            raise IllegalAction(
                "suit_not_allowed",
                f"{card} names no suit (only a wild card that is not your last does)",
            )
        out = _Events(state, self.evolve)
        s = out.emit(Played(seat, card, suit))
        if not s.hands[seat]:
            if s.penalty > 0 and s.turn is not None:
                out.take_penalty(s.turn, rng)
            out.end_deal(seat, rng)
        return out

    # -- what people see -----------------------------------------------------------------------
    def view(self, state: State, viewer: Viewer) -> dict[str, Any]:
        """The table as ``viewer`` sees it (JSON-able).

        Keys: ``deal``, ``dealer``, ``turn``, ``direction`` (``"clockwise"`` or
        ``"counterclockwise"``), ``hand`` (the viewer's own, ``None`` for spectators),
        ``hand_sizes``, ``top``, ``current_suit`` (``None`` = any card), ``discard_size``,
        ``stock_size``, ``penalty``, ``draws_this_turn``, ``draw_limit``, ``scores``,
        ``target`` (``None`` in countdown), ``countdown``, ``numbers`` (countdown, else
        ``None``), ``wild_ranks`` (per seat), ``last_deal`` (the last deal's result with the
        revealed hands, or ``None``), ``over``, ``winners``.
        """
        n = state.seats
        own = viewer is not None and 0 <= viewer < n and bool(state.hands)
        last = state.last_deal
        o = state.options
        return {
            "deal": state.deal,
            "dealer": state.dealer,
            "turn": state.turn,
            "direction": "clockwise" if state.direction == 1 else "counterclockwise",
            "hand": list(state.hands[viewer]) if own and viewer is not None else None,
            "hand_sizes": [len(h) for h in state.hands],
            "top": state.discard[-1] if state.discard else None,
            "current_suit": state.current_suit,
            "discard_size": len(state.discard),
            "stock_size": len(state.stock),
            "penalty": state.penalty,
            "draws_this_turn": state.draws,
            "draw_limit": o.draw_limit,
            "scores": list(state.scores),
            "target": None if o.countdown else target(o, n),
            "countdown": o.countdown,
            "numbers": list(state.numbers) if o.countdown else None,
            "wild_ranks": [rules.wild_rank(state, s) for s in range(n)],
            "last_deal": None if last is None else _deal_result(last),
            "over": state.over,
            "winners": list(state.winners),
        }

    def redact(self, event: Any, viewer: Viewer) -> Any:
        """Hide other hands, the stock order and other players' drawn cards (Hidden information)."""
        if isinstance(event, Dealt):
            hands = tuple(h if i == viewer else None for i, h in enumerate(event.hands))
            return attrs.evolve(event, hands=hands, stock=None)
        if isinstance(event, Drew) and event.seat != viewer:
            return attrs.evolve(event, cards=None)
        if isinstance(event, Reshuffled):
            return attrs.evolve(event, stock=None)
        return event

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
        """See :func:`plugins.crazy_eights_text.render`."""
        return render(view, viewer)

    def describe(self, action: dict[str, Any]) -> str:
        """See :func:`plugins.crazy_eights_text.describe`."""
        return describe(action)


def _deal_result(scored: DealScored) -> dict[str, Any]:
    return {
        "deal": scored.deal,
        "result": scored.result,
        "winner": scored.winner,
        "hands": [list(h) for h in scored.hands],
        "points": list(scored.points),
        "gains": list(scored.gains),
    }


@hookimpl
def gamehost_register_games() -> list[Any]:
    """Register Crazy Eights with the host."""
    return [CrazyEights()]
