"""Seven Twenty-Seven (game id ``seven-twenty-seven``): a betting game for chips, 4–10 players.

Rules: ``docs/rules/seven-twenty-seven.md``. Each hand: antes, one card up and one (or two) down,
a draw round, betting, a unanimous vote on one extra card (then more betting), and the showdown:
the hand closest to 7 or 27 takes the pot (``pot: split``: half each). Classic variants are
options. Values are integer half-points (J/Q/K = 1, 7 = 14, 27 = 54).

The modules:

- :mod:`plugins.seven_twenty_seven.model` — options, actions, events, state
- :mod:`plugins.seven_twenty_seven.rules` — ``decide``, ``evolve``, ``legal_actions``, the
  automatic steps
- :mod:`plugins.seven_twenty_seven.view` — ``view``, ``redact``
- :mod:`plugins.seven_twenty_seven.text` — ``render``, ``describe``

and two sub-parts of the rules, kept as modules of their own because each is a self-contained
piece of arithmetic with its own tests:

- :mod:`plugins.seven_twenty_seven.hands` — totals and distances in half-points
- :mod:`plugins.seven_twenty_seven.pots` — main/side pots, odd chips, uncalled bets

Decisions where the spec is silent (also in the docs):

- Betting is spread-limit: a bet or raise is ``min_bet`` .. ``max_bet`` chips. The opening bet
  is not a raise; up to ``max_raises`` raises follow it in a round. ``fold`` is only allowed
  facing a bet (spec step 3: check or bet while nobody has bet).
- A player may not bet or raise all-in for less than ``min_bet``: a bet or raise must be a full
  ``min_bet`` the stack covers. A player who cannot cover a *call* calls all-in for what is
  left. Nobody may bet or raise when every other player still in is all-in.
- At the end of a betting round the part of the top bet nobody matched goes back to its owner
  (``bet_returned``); pots are then built from what each seat put in, as in poker.
- A player whose stack is below the ante sits the hand out (and deals no hand). The session ends
  when one player holds every chip, after ``hands`` hands, or when fewer than two players can
  post the ante (possible only with ``ante`` > 1). ``ante`` is at least 1, so chips move every
  hand.
- The dealer passes clockwise to the next seat that is dealt into the hand.
- The extra-card vote is simultaneous; the first ``no`` ends it. All-in players vote and draw.
  After an agreed extra card there is a second betting round (spec step 4).
- ``until_all_stand``: rounds of draw-then-bet, no vote; a betting round follows every draw
  round, and the hand goes to showdown after the betting of a round in which nobody drew or in
  which the stock ran out (then nobody else is offered a card).
- ``pot: split``: a total qualifies for the 7-half if it is at most 17 and for the 27-half if it
  is at least 17; a hand competes for a half with its qualifying totals only. If no hand
  qualifies for a half, the other half takes the whole pot. The odd chip of an odd pot goes to
  the half holding the winner nearest the dealer's left. Each side pot is split the same way.
- ``bust_over_27``: a hand whose lowest total passes 27 (on the deal, a draw or the extra card)
  is out at once like a fold: announced, never shown, its chips stay in the pot.
- The outcome holds stacks and net results only: no cards at all.
- Undo by consent (``undoable``): a stand, check, bet, call, raise, fold or vote may be taken back
  while it is the session's last action and nothing was dealt or shown by it (the action that
  closes a round and brings the next card, the showdown or the next hand: never); a draw never.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from host.game import GameInfo, OptionError, Rng, Viewer, hookimpl
from plugins.seven_twenty_seven import hands as hv
from plugins.seven_twenty_seven import rules, text
from plugins.seven_twenty_seven import view as views
from plugins.seven_twenty_seven.model import (
    ACTIONS,
    EVENTS,
    Bet,
    BetMade,
    BetReturned,
    Call,
    Called,
    Check,
    Checked,
    Draw,
    Fold,
    Folded,
    Options,
    Outcome,
    PhaseStarted,
    Raise,
    Raised,
    Stand,
    State,
    StockRanOut,
    Stood,
    View,
    Vote,
    Voted,
    VoteDecided,
)
from plugins.seven_twenty_seven.rules import evolve

__all__ = ["SevenTwentySeven", "gamehost_register_games"]

UNDOABLE_EVENTS = (
    Stood,
    Checked,
    BetMade,
    Called,
    Raised,
    Folded,
    Voted,
    BetReturned,
    VoteDecided,
    PhaseStarted,
    StockRanOut,
)
"""The events an action taken back by consent may have caused: none deals, draws or shows a
card, or pays a pot."""


class SevenTwentySeven:
    """The Seven Twenty-Seven decider (see the module docstring and the rule spec)."""

    info = GameInfo(
        id="seven-twenty-seven",
        title="Seven Twenty-Seven",
        version="1",
        min_seats=4,
        max_seats=10,
        options=Options,
        action_types=ACTIONS,
        event_types=EVENTS,
        description=(
            "A betting game for chips: get closest to 7 or 27 points (J/Q/K count 1/2, aces 1"
            " or 11). Antes, one card up and one down, a draw round, betting, a unanimous vote"
            " on an extra card, showdown; side pots as in poker."
        ),
        # folded hands stay secret for ever (Hidden information): the revealed seed would let
        # anyone re-deal them, so clients get the commitment only; the log keeps the seed
        reveal_seed=False,
        view_type=View,
        outcome_type=Outcome,
    )

    def check_options(self, options: Options, seats: int) -> None:
        """Range rules for the options.

        Raises:
            OptionError: ``seats`` outside 4–10, ``stack`` < 1, ``ante`` outside 1..stack,
                ``min_bet`` < 1, ``max_bet`` < ``min_bet``, ``max_raises`` < 0, ``hands`` < 1.
        """
        if not 4 <= seats <= 10:
            raise OptionError("seats", "Seven Twenty-Seven is for 4 to 10 players")
        if options.stack < 1:
            raise OptionError("stack", "a stack is at least 1 chip")
        if not 1 <= options.ante <= options.stack:
            raise OptionError("ante", "the ante is at least 1 chip and at most the stack")
        if options.min_bet < 1:
            raise OptionError("min_bet", "the smallest bet is at least 1 chip")
        if options.max_bet < options.min_bet:
            raise OptionError("max_bet", "the largest bet is at least min_bet")
        if options.max_raises < 0:
            raise OptionError("max_raises", "max_raises is 0 or more")
        if options.hands != "unlimited" and options.hands < 1:
            raise OptionError("hands", "at least 1 hand, or 'unlimited'")

    def initial_state(self, options: Options, seats: int) -> State:
        """Everyone seated with ``stack`` chips, no hand dealt yet."""
        return State(options=options, seats=seats, stacks=(options.stack,) * seats)

    def start(self, state: State, rng: Rng) -> list[Any]:
        """The first hand: antes, the deal, the first draw round (seat 0 deals)."""
        return rules.start(state, rng, self.evolve)

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list[Any]:
        """See :func:`plugins.seven_twenty_seven.rules.decide`."""
        return rules.decide(state, seat, action, rng, self.evolve)

    def evolve(self, state: State, event: Any) -> State:
        return evolve(state, event)

    def to_act(self, state: State) -> tuple[int, ...]:
        return rules.to_act(state)

    def legal_actions(self, state: State, seat: int) -> list[Any]:
        return rules.legal_actions(state, seat)

    def undoable(self, state: State, seat: int, action: Any, events: Sequence[Any]) -> bool:
        """Whether ``seat`` may take back ``action`` (taken in ``state``, causing ``events``)
        by consent: a ``stand``, ``check``, ``bet``, ``call``, ``raise``, ``fold`` or ``vote``
        before the next card is dealt or any hand is shown: its events are only the betting,
        standing and voting ones and the phase changes that deal nothing (``bet_returned``,
        ``vote_decided``, ``phase_started``, ``stock_ran_out``). A ``draw``, an action whose
        round ends in a deal, an extra card, a showdown or a pot paid: never."""
        return not isinstance(action, Draw) and all(isinstance(e, UNDOABLE_EVENTS) for e in events)

    def view(self, state: State, viewer: Viewer) -> dict[str, Any]:
        return views.view(state, viewer)

    def redact(self, event: Any, viewer: Viewer) -> Any:
        return views.redact(event, viewer)

    def render(self, view: dict[str, Any], viewer: Viewer) -> str:
        return text.render(view, viewer)

    def describe(self, action: dict[str, Any]) -> str:
        return text.describe(action)

    def describe_event(self, event: dict[str, Any], viewer: Viewer, names: Sequence[str]) -> str:
        """See :func:`plugins.seven_twenty_seven.text.describe_event`."""
        return text.describe_event(event, viewer, names)

    def describe_outcome(self, outcome: dict[str, Any], names: Sequence[str]) -> str:
        """See :func:`plugins.seven_twenty_seven.text.describe_outcome`."""
        return text.describe_outcome(outcome, names)

    def outcome(self, state: State) -> dict[str, Any] | None:
        """``None`` while running; then ``reason``, ``hands`` played, final ``stacks``, ``net``
        (stack minus the starting stack, per seat) and ``winners`` (the largest stacks).

        No cards appear in it, so no folded hand can leak through it.
        """
        if state.phase != "over":
            return None
        top = max(state.stacks)
        return {
            "reason": state.end_reason,
            "hands": state.hand_no,
            "stacks": list(state.stacks),
            "net": [st - state.options.stack for st in state.stacks],
            "winners": [s for s, st in enumerate(state.stacks) if st == top],
        }

    def bot_action(self, state: State, seat: int, rng: Rng) -> Any:
        """A loose, aggressive strategy on the bot's own hand, so that tables of bots end soon: draw
        while 2½ or more from 7/27; bet or raise the maximum within 2 of a target (and on one
        bluff in three); otherwise check, or call, folding only a far hand now and then."""
        legal = rules.legal_actions(state, seat)
        hand = state.hands[seat]
        d = hv.distance(hand)
        if state.phase == "draw":
            low = hv.lowest_total(hand)
            risky = state.options.bust_over_27 and low > hv.TWENTY_SEVEN - 12
            if d >= 5 and low < hv.TWENTY_SEVEN and not risky and Draw() in legal:
                return Draw()
            return Stand()
        if state.phase == "vote":
            return Vote(d >= 5)
        bets = [a for a in legal if isinstance(a, Bet | Raise)]
        bluff = rng.below(3) == 0
        if bets and (d <= 4 or bluff):
            return bets[-1]
        if Check() in legal:
            return Check()
        if d <= 8 or rng.below(4) != 0:
            return Call()
        return Fold()


@hookimpl
def gamehost_register_games() -> list:
    """The gamehost entry point: this module's one game."""
    return [SevenTwentySeven()]
