"""Crazy Eights values: options, actions, events and the state (``docs/rules/crazy-eights.md``).

Every class here is a frozen attrs class; cards are wire strings (``"10H"``), seats are ints.
The rules that act on these values live in :mod:`plugins.crazy_eights.rules`; the game class and
the decisions taken where the spec is silent are in :mod:`plugins.crazy_eights`.
"""

from __future__ import annotations

from typing import Literal

import attrs

from host.game import OptionError

__all__ = [
    "DealScored",
    "Dealt",
    "Draw",
    "Drew",
    "Options",
    "Pass",
    "Passed",
    "PenaltyTaken",
    "Play",
    "Played",
    "Reshuffled",
    "State",
    "View",
    "Outcome",
    "check_options",
    "deck_count",
    "hand_size",
    "stacking",
    "target",
]

Cards = tuple[str, ...]


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@attrs.frozen
class Options:
    """The game options of ``docs/rules/crazy-eights.md`` with the spec's defaults.

    Integer options refuse booleans and out-of-range values in :func:`check_options`.
    """

    decks: Literal["auto", 1, 2] = attrs.field(
        default="auto",
        metadata=_doc(
            "decks in the shoe; auto = 1 deck for 2-5 players, 2 decks for 6-7 (Setup 1)"
        ),
    )
    hand_size: Literal["auto"] | int = attrs.field(
        default="auto",
        metadata=_doc(
            "cards dealt to each player; auto = 7 with two players, else 5 (Setup 3);"
            " not used with countdown"
        ),
    )
    starter_eight: Literal["bury", "redraw", "keep"] = attrs.field(
        default="bury",
        metadata=_doc(
            "a wild card turned as starter: bury = back into the middle of the stock and the next"
            " card is turned; redraw = shuffled back into the stock and a card turned again;"
            " keep = it stays and the first player may play any card (Setup 4)"
        ),
    )
    draw_limit: Literal["none"] | int = attrs.field(
        default="none",
        metadata=_doc(
            "cards a player may draw per turn: none = until they play or nothing can be drawn;"
            " N >= 1 = after N draws the player may pass (A turn)"
        ),
    )
    reshuffle: bool = attrs.field(
        default=True,
        metadata=_doc(
            "when the stock is empty and a draw is wanted, the discards but the top card are"
            " shuffled into a new stock (A turn)"
        ),
    )
    blocked_tie: Literal["split", "none"] = attrs.field(
        default="split",
        metadata=_doc(
            "a blocked deal with several lowest hands: split = they share the total equally"
            " (remainder dropped); none = nobody scores (Scoring)"
        ),
    )
    target: Literal["auto"] | int = attrs.field(
        default="auto",
        metadata=_doc(
            "match points: deals continue until a player reaches it; auto = 50 x players"
            " (Scoring); not used with countdown"
        ),
    )
    queens_skip: bool = attrs.field(
        default=False, metadata=_doc("a Queen makes the next player lose their turn (Variants)")
    )
    aces_reverse: bool = attrs.field(
        default=False,
        metadata=_doc(
            "an Ace reverses the direction of play; with two players it acts as a skip (Variants)"
        ),
    )
    draw_two: bool = attrs.field(
        default=False,
        metadata=_doc("a 2 makes the next player draw two unless they play a 2 (Variants)"),
    )
    draw_two_stacking: Literal["auto"] | bool = attrs.field(
        default="auto",
        metadata=_doc(
            "each 2 played on a pending 2 adds two to the penalty; auto = on whenever draw_two"
            " is on; false = a 2 answering a 2 passes on a penalty of two only (Variants)"
        ),
    )
    special_on_last_card: Literal["ignored", "applied"] = attrs.field(
        default="ignored",
        metadata=_doc(
            "a special card played as a last card: ignored = no effect; applied = its effect"
            " happens before scoring (a last 2 makes the next player draw) (Variants)"
        ),
    )
    special_starter: Literal["applies", "ignored"] = attrs.field(
        default="applies",
        metadata=_doc(
            "a special starter (Q, A, 2 with their variants on) acts as if the dealer had"
            " played it, or has no effect (Variants)"
        ),
    )
    countdown: bool = attrs.field(
        default=False,
        metadata=_doc(
            "Crazy Eights Countdown: everyone starts at 8, is dealt that many cards, and the"
            " rank of their number is wild for them (1 = aces); going out drops the number by"
            " one; the first to go out at 1 wins; no points (Variants)"
        ),
    )


def _int_option(name: str, value: object, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise OptionError(name, f"{value!r} is not an integer")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise OptionError(name, f"{value} is not allowed: must be {bound}")


def deck_count(options: Options, seats: int) -> int:
    """Decks in the shoe (Setup 1): ``decks`` or, for ``auto``, 1 for 2-5 seats and 2 for 6-7."""
    if options.decks == "auto":
        return 1 if seats <= 5 else 2
    return int(options.decks)


def hand_size(options: Options, seats: int) -> int:
    """Cards dealt per player outside countdown (Setup 3): auto = 7 for two players, else 5."""
    if options.hand_size == "auto":
        return 7 if seats == 2 else 5
    return options.hand_size


def target(options: Options, seats: int) -> int:
    """Match target in points (Scoring): ``auto`` = 50 x seats."""
    return 50 * seats if options.target == "auto" else options.target


def stacking(options: Options) -> bool:
    """Whether 2s stack (Variants): ``auto`` follows ``draw_two``."""
    if options.draw_two_stacking == "auto":
        return options.draw_two
    return bool(options.draw_two_stacking)


def check_options(options: Options, seats: int) -> None:
    """Cross-field and range rules.

    Raises:
        OptionError: a bool where an integer is wanted, ``hand_size``/``draw_limit``/``target``
            below 1, ``decks`` a boolean, or a deal that does not fit the shoe (every hand plus
            the starter must come from ``52 x decks`` cards; in countdown every hand is 8).
    """
    if isinstance(options.decks, bool):
        raise OptionError("decks", f"{options.decks!r} is not allowed (allowed: 'auto', 1, 2)")
    if options.hand_size != "auto":
        _int_option("hand_size", options.hand_size, 1)
    if options.draw_limit != "none":
        _int_option("draw_limit", options.draw_limit, 1)
    if options.target != "auto":
        _int_option("target", options.target, 1)
    if not 2 <= seats <= 7:
        raise OptionError("seats", f"{seats} players: Crazy Eights is for 2 to 7 (Setup 1)")
    size = 8 if options.countdown else hand_size(options, seats)
    shoe = 52 * deck_count(options, seats)
    if seats * size + 1 > shoe:
        name = "decks" if options.countdown or options.hand_size == "auto" else "hand_size"
        raise OptionError(
            name, f"{seats} hands of {size} cards and a starter do not fit in {shoe} cards"
        )


# -- actions ------------------------------------------------------------------------------------


@attrs.frozen
class Play:
    """Play ``card`` from the hand; ``suit`` (``C D H S``) names the new suit.

    ``suit`` is required exactly when the card is wild for the player (an 8; in countdown the
    rank of their number) and it is not their last card; otherwise it must be null.
    """

    card: str
    suit: str | None = None


@attrs.frozen
class Draw:
    """Draw the top stock card, or under a pending draw-two penalty the whole penalty."""


@attrs.frozen
class Pass:
    """End the turn without playing (only when no card can be drawn; see ``A turn``)."""


# -- events -------------------------------------------------------------------------------------


@attrs.frozen
class Dealt:
    """A deal: hands, stock and starter.

    Attributes:
        deal: the deal number, from 1.
        dealer: the dealer's seat.
        hands: each seat's hand (``None`` where the viewer may not see it).
        hand_sizes: each hand's size (public).
        stock: the stock after the starter was turned, index 0 on top (``None`` when redacted).
        stock_size: its size (public).
        starter: the first discard.
        turned_back: wild cards turned as starter and put back (seen by everyone, in order).
    """

    deal: int
    dealer: int
    hands: tuple[Cards | None, ...] = attrs.field(metadata={"hidden": "others"})
    hand_sizes: tuple[int, ...]
    stock: Cards | None = attrs.field(metadata={"hidden": "everyone"})
    stock_size: int
    starter: str
    turned_back: Cards = ()


@attrs.frozen
class Played:
    """``seat`` played ``card``; ``suit`` is the suit named with a wild card, else ``None``."""

    seat: int
    card: str
    suit: str | None = None


@attrs.frozen
class Drew:
    """``seat`` drew ``count`` cards from the top of the stock (``cards`` only for the drawer)."""

    seat: int
    cards: Cards | None = attrs.field(metadata={"hidden": "others"})
    count: int


@attrs.frozen
class PenaltyTaken:
    """``seat`` served the pending draw-two penalty: ``drawn`` cards taken, ``forgiven`` not
    available (stock and reshuffle ran dry); their turn ends."""

    seat: int
    drawn: int
    forgiven: int = 0


@attrs.frozen
class Reshuffled:
    """The discards but the top card became the new stock (``stock`` ``None`` when redacted)."""

    stock: Cards | None = attrs.field(metadata={"hidden": "everyone"})
    stock_size: int


@attrs.frozen
class Passed:
    """``seat`` passed."""

    seat: int


@attrs.frozen
class DealScored:
    """The end of a deal, with every hand revealed.

    Attributes:
        deal: the deal number.
        result: ``"out"`` (``winner`` played their last card) or ``"blocked"``.
        winner: the seat that went out, else ``None``.
        hands: every hand as it ended (revealed).
        points: each hand's card points (8 = 50, K Q J 10 = 10, A = 1, others pip value).
        gains: points each seat scored this deal (all 0 in countdown).
        scores: match totals after this deal.
        numbers: countdown numbers after this deal (empty outside countdown).
    """

    deal: int
    result: Literal["out", "blocked"]
    winner: int | None
    hands: tuple[Cards, ...]
    points: tuple[int, ...]
    gains: tuple[int, ...]
    scores: tuple[int, ...]
    numbers: tuple[int, ...] = ()


# -- state --------------------------------------------------------------------------------------


@attrs.frozen
class State:
    """The whole table.

    Attributes:
        options, seats: the session's options and player count.
        deal: the current (or last) deal number; 0 before the first deal.
        dealer: the current deal's dealer.
        hands: each seat's hand, in the order the cards came.
        stock: the stock, index 0 on top.
        discard: the discard pile, the last card on top.
        current_suit: the suit to follow; ``None`` after a kept wild starter (anything goes).
        turn: the seat to act, ``None`` between deals and when the match is over.
        direction: +1 clockwise, -1 after an odd number of aces under ``aces_reverse``.
        penalty: cards the player to act must draw unless they play a 2 (``draw_two``).
        draws: cards drawn in the current turn (penalty draws excluded).
        passes: consecutive passes by players who drew nothing that turn (blocked at ``seats``).
        scores: match points per seat.
        numbers: countdown numbers per seat (empty outside countdown).
        last_deal: the last :class:`DealScored`, ``None`` before the first one.
        over, winners: whether the match is over and who won it.
    """

    options: Options
    seats: int
    deal: int = 0
    dealer: int = 0
    hands: tuple[Cards, ...] = ()
    stock: Cards = ()
    discard: Cards = ()
    current_suit: str | None = None
    turn: int | None = None
    direction: int = 1
    penalty: int = 0
    draws: int = 0
    passes: int = 0
    scores: tuple[int, ...] = ()
    numbers: tuple[int, ...] = ()
    last_deal: DealScored | None = None
    over: bool = False
    winners: tuple[int, ...] = ()


# -- the view's wire shape (what ``CrazyEights.view`` returns; published as JSON Schema) ---------


@attrs.frozen
class DealResult:
    """The last deal's result in a view (its hands revealed to everyone)."""

    deal: int
    result: Literal["out", "blocked"]
    winner: int | None
    hands: tuple[Cards, ...]
    points: tuple[int, ...]
    gains: tuple[int, ...]


@attrs.frozen
class View:
    """The table as one viewer sees it."""

    deal: int
    dealer: int
    turn: int | None
    direction: Literal["clockwise", "counterclockwise"]
    hand: Cards | None = attrs.field(metadata={"hidden": "others"})
    hand_sizes: tuple[int, ...]
    top: str | None
    current_suit: str | None
    discard_size: int
    stock_size: int
    penalty: int
    draws_this_turn: int
    draw_limit: Literal["none"] | int
    scores: tuple[int, ...]
    target: int | None
    countdown: bool
    numbers: tuple[int, ...] | None
    wild_ranks: tuple[str, ...]
    last_deal: DealResult | None
    over: bool
    winners: tuple[int, ...]


@attrs.frozen
class Outcome:
    """The match result: the outcome of a session the game ended."""

    scores: tuple[int, ...]
    winners: tuple[int, ...]
    deals: int
    countdown: bool
