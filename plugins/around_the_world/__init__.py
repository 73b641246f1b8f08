"""Around the World (Ride the Bus): a drinking game whose result is a drink ledger.

Rules: ``docs/rules/around-the-world.md``. Round 1: four (or five) passes round the table; on each
pass every seat, the dealer (seat 0) last, names a guess and is dealt the next shoe card face up
into its row; right gives the question's value in drinks, wrong takes it. Round 2: the dealer
lays 8 (10 with end cards) cards face down in a ``take`` and a ``give`` column and turns them one
at a time; every card of a seat's row with the turned rank takes or gives the row's value.

Actions (wire forms in ``plugins.around_the_world.model``):

- ``guess`` — the seat to be dealt answers the current question (``legal_actions`` lists every
  allowed answer, including ones that cannot win, e.g. ``outside`` around 2 and A).
- ``give`` — a seat with a pending give assigns it: ``to`` names one or more *other* seats, each
  once, each with ``drinks >= 1``, the drinks summing exactly to the pending value. The full set
  is every such composition; ``legal_actions`` lists a representative subset: all drinks to each
  single other seat, plus one even spread over the others (clockwise from the giver's left).
  While a give is pending in round 1 the next guess waits; in round 2 every seat with a pending
  give is in ``to_act`` at once, in any order, and the dealer's ``flip`` waits for all of them.
- ``flip`` — the dealer turns the next round-2 card; take matches are booked into the ledger in
  the ``turned`` event itself.
- ``cancel`` (``poker_cancel``) — after the last round-2 card and give, every seat holding the
  best five-card poker hand (ties share the right) sends one ``cancel`` naming the round-2 drink
  entries it cancels by number (the index in ``view["round2_entries"]``, 0-based: one entry per
  seat matching a take card and per line of a round-2 give, in booking order); ``[]`` keeps them
  all. The union of all holders' choices is cancelled: cancelled drinks
  count as neither taken nor given. The full set is every subset of the round-2 entries;
  ``legal_actions`` lists: keep all, cancel all, cancel the holder's own drinks, and cancel all
  drinks of each single seat. With no round-2 drinks at all the phase is skipped.

Undo by consent (``undoable``): a ``give`` (or a ``cancel``) may be taken back as long as no card
was turned since: the session's last action, with no ``guessed`` or ``turned`` among its events.

Ledger (``outcome``): per seat and round, ``taken`` (drinks the seat drinks: wrong guesses, take
matches and drinks given to it), ``given`` (drinks it assigned to others) and ``cancelled``
(drinks it was spared by ``poker_cancel``), plus totals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from host.game import GameInfo, OptionError, Rng, Viewer, hookimpl
from plugins import cards
from plugins.around_the_world import rules
from plugins.around_the_world import view as views
from plugins.around_the_world.model import (
    Assignment,
    BestHand,
    Cancel,
    Cancelled,
    ColumnsLaid,
    Finished,
    Flip,
    Give,
    Given,
    Guess,
    Guessed,
    Options,
    Outcome,
    ShoeShuffled,
    State,
    Turned,
    View,
    ledger,
)
from plugins.around_the_world.text import (
    describe_action,
    describe_event,
    describe_outcome,
    render_view,
)

__all__ = ["AroundTheWorld", "gamehost_register_games"]


class AroundTheWorld:
    """The ``around-the-world`` game (see the module docstring for actions and the ledger)."""

    info = GameInfo(
        id="around-the-world",
        title="Around the World (Ride the Bus)",
        version="1",
        min_seats=2,
        max_seats=20,
        options=Options,
        action_types=(Guess, Give, Flip, Cancel),
        event_types=(
            ShoeShuffled,
            Guessed,
            Given,
            ColumnsLaid,
            Turned,
            BestHand,
            Cancelled,
            Finished,
        ),
        view_type=View,
        outcome_type=Outcome,
        description=(
            "A drinking game (Ride the Bus): guess red/black, higher/lower, inside/outside and "
            "the suit to build a row of cards, then match the take and give columns. The host "
            "keeps the drink ledger."
        ),
    )

    # -- setup ---------------------------------------------------------------------------------
    def check_options(self, options: Options, seats: int) -> None:
        """Cross-field rules (spec, "Setup" and the fifth question).

        Raises:
            OptionError: ``seats`` outside 2..20; ``poker_cancel`` without ``fifth_question``;
                ``decks`` below 1, above :data:`rules.MAX_DECKS`, or too few for every card.
        """
        if not self.info.min_seats <= seats <= self.info.max_seats:
            raise OptionError("seats", f"{seats} players; the game takes 2 to 20")
        if options.poker_cancel and not options.fifth_question:
            raise OptionError("poker_cancel", "needs fifth_question (five-card hands)")
        if options.decks != "auto":
            need = rules.decks_needed(seats, options.fifth_question, options.end_cards)
            if not 1 <= options.decks <= rules.MAX_DECKS:
                raise OptionError("decks", f"must be 1 to {rules.MAX_DECKS} or 'auto'")
            if options.decks < need:
                total = rules.cards_needed(seats, options.fifth_question, options.end_cards)
                raise OptionError(
                    "decks", f"{seats} players need {total} cards: at least {need} decks"
                )

    def initial_state(self, options: Options, seats: int) -> State:
        """The state before the shuffle; ``decks = auto`` resolved to the fewest decks."""
        decks = options.decks
        if decks == "auto":
            decks = rules.decks_needed(seats, options.fifth_question, options.end_cards)
        return State(options=options, seats=seats, decks=decks)

    def start(self, state: State, rng: Rng) -> list[Any]:
        """Shuffle the shoe (every card of the session is dealt from it, top first)."""
        shoe = cards.shuffled_shoe(rng, state.decks)
        return [ShoeShuffled(state.decks, len(shoe), tuple(shoe))]

    # -- derived facts -------------------------------------------------------------------------
    def to_act(self, state: State) -> tuple[int, ...]:
        """See :func:`plugins.around_the_world.rules.to_act`."""
        return rules.to_act(state)

    # -- actions -------------------------------------------------------------------------------
    def legal_actions(self, state: State, seat: int) -> list[Any]:
        """See :func:`plugins.around_the_world.rules.legal_actions`."""
        return rules.legal_actions(state, seat)

    def bot_action(self, state: State, seat: int, rng: Rng) -> Any:
        """A random legal guess; gives spread drink by drink over random other seats; a flip;
        a cancel of every round-2 drink the bot itself would drink."""
        kind = rules.expected(state, seat)
        if kind == "give":
            others = [s for s in range(state.seats) if s != seat]
            split: dict[int, int] = {}
            for _ in range(state.pending[seat]):
                target = rng.choice(others)
                split[target] = split.get(target, 0) + 1
            return Give(tuple(Assignment(s, d) for s, d in sorted(split.items())))
        if kind == "cancel":
            entries = rules.round2_entries(state)
            return Cancel(tuple(n for n, e in enumerate(entries) if e.seat == seat))
        return rng.choice(rules.legal_actions(state, seat))

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list[Any]:
        """See :func:`plugins.around_the_world.rules.decide`."""
        return rules.decide(state, seat, action, rng, self.evolve)

    def undoable(self, state: State, seat: int, action: Any, events: Sequence[Any]) -> bool:
        """Whether ``seat`` may take back ``action`` (taken in ``state``, causing ``events``)
        by consent: a ``give`` or a ``cancel`` whose events turned no card: ``given``,
        ``cancelled`` and what follows them without a card shown (``columns_laid``: the
        round-2 cards laid face down; ``best_hand``: read from the face-up rows). A ``guess``
        deals a card face up and a ``flip`` turns one: never."""
        return isinstance(action, Give | Cancel) and all(
            isinstance(e, Given | Cancelled | ColumnsLaid | BestHand) for e in events
        )

    # -- state ---------------------------------------------------------------------------------
    def evolve(self, state: State, event: Any) -> State:
        """Apply one event (pure; every random outcome is in the event)."""
        return rules.evolve(state, event)

    # -- what people see -----------------------------------------------------------------------
    def view(self, state: State, viewer: Viewer) -> dict[str, Any]:
        """See :func:`plugins.around_the_world.view.view`."""
        return views.view(state, viewer)

    def redact(self, event: Any, viewer: Viewer) -> Any:
        """See :func:`plugins.around_the_world.view.redact`."""
        return views.redact(event, viewer)

    def outcome(self, state: State) -> dict[str, Any] | None:
        """``None`` until the end; then ``ledger`` (per seat), ``totals`` and ``best``."""
        if state.phase != "over":
            return None
        book = ledger(state)
        return {
            "ledger": book,
            "totals": {
                key: sum(b["total"][key] for b in book) for key in ("taken", "given", "cancelled")
            },
            "best": {"seats": list(state.best), "hand": state.best_hand} if state.best else None,
        }

    # -- text ----------------------------------------------------------------------------------
    def render(self, view: dict[str, Any], viewer: Viewer) -> str:
        """A multi-line text table of a wire-form view (rows, columns, ledger)."""
        return render_view(view, viewer)

    def describe(self, action: dict[str, Any]) -> str:
        """A short label for a wire-form action, e.g. ``give 2 to seat 1, 1 to seat 3``."""
        return describe_action(action)

    def describe_event(self, event: dict[str, Any], viewer: Viewer, names: Sequence[str]) -> str:
        """An event in words, e.g. ``Ann guessed red: 7♥, right (2 drinks to give)``."""
        return describe_event(event, viewer, names)

    def describe_outcome(self, outcome: dict[str, Any], names: Sequence[str]) -> str:
        """The ledger in words: who drank the most, each seat's drinks taken and given."""
        return describe_outcome(outcome, names)


@hookimpl
def gamehost_register_games() -> list:
    """The plugin hook: this module offers one game."""
    return [AroundTheWorld()]
