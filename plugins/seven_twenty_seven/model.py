"""Seven Twenty-Seven values: options, actions, events and the state (all frozen attrs classes).

Chips are integers, card values half-points (see :mod:`plugins.seven_twenty_seven.hands`).
"""

from __future__ import annotations

from typing import Literal

import attrs


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@attrs.frozen
class Options:
    """The table's options (rule spec, "Chips and the table" and "Options")."""

    stack: int = attrs.field(default=100, metadata=_doc("chips each player brings (>= 1)"))
    ante: int = attrs.field(
        default=1, metadata=_doc("chips each player puts in before the deal (1 .. stack)")
    )
    min_bet: int = attrs.field(
        default=1, metadata=_doc("the smallest bet or raise, in chips (>= 1)")
    )
    max_bet: int = attrs.field(
        default=10, metadata=_doc("the largest bet or raise, in chips (>= min_bet)")
    )
    max_raises: int = attrs.field(
        default=3, metadata=_doc("raises allowed per betting round after the opening bet (>= 0)")
    )
    hands: int | Literal["unlimited"] = attrs.field(
        default="unlimited",
        metadata=_doc(
            "the session ends after this many hands (>= 1), or 'unlimited': only when one"
            " player holds every chip (or fewer than two can post the ante)"
        ),
    )
    deal: Literal["up_down", "up_down_down"] = attrs.field(
        default="up_down", metadata=_doc("the deal: one card up then one down, or up, down, down")
    )
    draw_rounds: Literal["seed", "until_all_stand"] = attrs.field(
        default="seed",
        metadata=_doc(
            "seed: one draw round, betting, the extra-card vote; until_all_stand: draw-then-bet"
            " rounds until a round without draws or the stock runs out"
        ),
    )
    extra_card_face: Literal["down", "up"] = attrs.field(
        default="down", metadata=_doc("how the agreed extra card is dealt (seed draw rounds)")
    )
    pot: Literal["single", "split"] = attrs.field(
        default="single",
        metadata=_doc("single: closest to 7 or 27 takes all; split: half to 7, half to 27"),
    )
    equidistant: Literal["share", "under_wins"] = attrs.field(
        default="share",
        metadata=_doc("equal distances share, or a total under its target beats one over it"),
    )
    bust_over_27: bool = attrs.field(
        default=False, metadata=_doc("a hand whose lowest total is over 27 is out at once")
    )


# -- actions -----------------------------------------------------------------------------------


@attrs.frozen
class Draw:
    """Take one more card, face down (draw round)."""


@attrs.frozen
class Stand:
    """Take no card this draw round."""


@attrs.frozen
class Check:
    """Pass without betting while nobody has bet this round."""


@attrs.frozen
class Bet:
    """Open the betting with ``amount`` chips (``min_bet`` .. ``max_bet``)."""

    amount: int


@attrs.frozen
class Call:
    """Put in what the current bet asks for (all of one's chips if fewer: all-in)."""


@attrs.frozen
class Raise:
    """Call, then raise the bet by ``amount`` chips (``min_bet`` .. ``max_bet``)."""

    amount: int


@attrs.frozen
class Fold:
    """Give up the hand (only while facing a bet); the hand is never shown."""


@attrs.frozen
class Vote:
    """The extra-card vote: ``yes`` to an extra card for everyone still in."""

    yes: bool


ACTIONS = (Draw, Stand, Check, Bet, Call, Raise, Fold, Vote)


# -- events ------------------------------------------------------------------------------------


@attrs.frozen
class HandStarted:
    """A hand begins: ``antes[seat]`` chips posted (0: sitting out or out), ``dealer`` deals."""

    hand: int
    dealer: int
    antes: tuple[int, ...]


@attrs.frozen
class Dealt:
    """The deal. ``up[seat]`` is the face-up card (None if not dealt in), ``down[seat]`` the
    face-down cards (None for a card the viewer may not see), ``stock`` the rest (None when
    redacted)."""

    up: tuple[str | None, ...]
    down: tuple[tuple[str | None, ...], ...] = attrs.field(metadata={"hidden": "others"})
    stock: tuple[str, ...] | None = attrs.field(metadata={"hidden": "everyone"})


@attrs.frozen
class PhaseStarted:
    """A draw round, betting round or extra-card vote begins; ``order`` is who takes part, in
    turn order (all of them at once for the vote). ``round`` counts from 1 within the hand."""

    phase: Literal["draw", "betting", "vote"]
    round: int
    order: tuple[int, ...]


@attrs.frozen
class CardDrawn:
    """``seat`` gets the top stock card (``card`` None when the viewer may not see it)."""

    seat: int
    card: str | None = attrs.field(metadata={"hidden": "some"})
    face: Literal["down", "up"]


@attrs.frozen
class Stood:
    seat: int


@attrs.frozen
class StockRanOut:
    """The stock is empty: no more cards are offered this hand (edge case 7)."""


@attrs.frozen
class Busted:
    """``bust_over_27``: the seat's lowest total passed 27; it is out of the hand, unseen."""

    seat: int


@attrs.frozen
class Checked:
    seat: int


@attrs.frozen
class BetMade:
    """``seat`` opened with ``amount`` chips (``all_in`` if that was its last chip)."""

    seat: int
    amount: int
    all_in: bool


@attrs.frozen
class Called:
    """``seat`` put in ``chips`` to call (fewer than asked only when ``all_in``)."""

    seat: int
    chips: int
    all_in: bool


@attrs.frozen
class Raised:
    """``seat`` put in ``chips`` = the call plus a raise of ``amount``."""

    seat: int
    amount: int
    chips: int
    all_in: bool


@attrs.frozen
class Folded:
    seat: int


@attrs.frozen
class BetReturned:
    """The part of the top bet nobody matched goes back to ``seat``."""

    seat: int
    chips: int


@attrs.frozen
class Voted:
    seat: int
    yes: bool


@attrs.frozen
class VoteDecided:
    """The extra-card vote is over: ``agreed`` only if every remaining player voted yes."""

    agreed: bool


@attrs.frozen
class ShownHand:
    """A hand turned up at showdown: its cards, totals and best distance (half-points)."""

    seat: int
    cards: tuple[str, ...]
    totals: tuple[int, ...]
    distance: int


@attrs.frozen
class Showdown:
    """The remaining hands are turned up (rule spec, step 5)."""

    hands: tuple[ShownHand, ...]


@attrs.frozen
class PotAwarded:
    """Pot number ``pot`` (0 = main) or its ``half`` is paid: ``shares[i]`` to ``winners[i]``.

    ``half`` is ``all`` for a whole pot, ``seven`` / ``twenty_seven`` for the halves of a split
    pot. ``uncontested`` when everyone else folded: no hand was evaluated or shown.
    """

    pot: int
    half: Literal["all", "seven", "twenty_seven"]
    amount: int
    winners: tuple[int, ...]
    shares: tuple[int, ...]
    uncontested: bool


@attrs.frozen
class HandEnded:
    hand: int
    stacks: tuple[int, ...]


@attrs.frozen
class SessionEnded:
    """The session is over (``reason``: ``one_player_left``, ``hands_played`` or
    ``too_few_can_ante``)."""

    reason: Literal["one_player_left", "hands_played", "too_few_can_ante"]
    stacks: tuple[int, ...]


EVENTS = (
    HandStarted,
    Dealt,
    PhaseStarted,
    CardDrawn,
    Stood,
    StockRanOut,
    Busted,
    Checked,
    BetMade,
    Called,
    Raised,
    Folded,
    BetReturned,
    Voted,
    VoteDecided,
    Showdown,
    PotAwarded,
    HandEnded,
    SessionEnded,
)


# -- state -------------------------------------------------------------------------------------


@attrs.frozen
class LastHand:
    """The public summary of the last finished hand (for views): shown hands and awards."""

    hand: int
    shown: tuple[ShownHand, ...] = ()
    awards: tuple[PotAwarded, ...] = ()


@attrs.frozen
class Outcome:
    """The session's result, the outcome of a session the game ended: no cards at all."""

    reason: Literal["one_player_left", "hands_played", "too_few_can_ante"]
    hands: int
    stacks: tuple[int, ...]
    net: tuple[int, ...]
    winners: tuple[int, ...]


# -- the view's wire shape (what the game's ``view`` returns; published as JSON Schema) ----------


@attrs.frozen
class ViewPot:
    """A pot in a view: its ``amount`` and the seats ``eligible`` to win it."""

    amount: int
    eligible: tuple[int, ...]


@attrs.frozen
class ViewPlayer:
    """One seat at the table as the viewer sees it (``cards``: null for a card it may not see)."""

    seat: int
    stack: int
    bet: int
    put_in: int
    cards: tuple[str | None, ...] = attrs.field(metadata={"hidden": "some"})
    face_up: tuple[bool, ...]
    in_hand: bool
    sitting_out: bool
    folded: bool
    busted: bool
    all_in: bool
    out: bool
    visible: tuple[int, ...]


@attrs.frozen
class ViewYou:
    """The viewer's own hand: cards, totals, distance and the totals closest to 7 and 27."""

    seat: int
    cards: tuple[str, ...]
    totals: tuple[int, ...]
    distance: int | None
    closest_to_7: int | None
    closest_to_27: int | None


@attrs.frozen
class View:
    """The table as one viewer sees it."""

    hand: int
    hands_limit: int | Literal["unlimited"]
    dealer: int
    phase: Literal["idle", "dealt", "draw", "betting", "vote", "over"]
    round: int
    stacks: tuple[int, ...]
    pots: tuple[ViewPot, ...]
    pot_total: int
    current_bet: int
    to_call: int
    raises: int
    max_raises: int
    min_bet: int
    max_bet: int
    turn: tuple[int, ...]
    votes: tuple[bool | None, ...]
    stock: int
    players: tuple[ViewPlayer, ...]
    you: ViewYou | None = attrs.field(metadata={"hidden": "others"})
    last_hand: LastHand | None
    over: bool
    end_reason: Literal["one_player_left", "hands_played", "too_few_can_ante"] | None


@attrs.frozen
class State:
    """The whole table. Per-seat tuples are indexed by seat.

    Attributes:
        stacks: chips in front of each seat (not in the pot).
        contrib: chips each seat has put into the pot this hand (antes included).
        paid: chips of this hand's pot already paid out (during the showdown events).
        in_hand: dealt into the current hand. folded: folded or busted this hand.
        hands: each seat's cards this hand; faces: ``True`` where that card is face up.
        phase: ``idle`` between hands, ``dealt`` (cards out, no round yet), ``draw``,
            ``betting``, ``vote``, ``over``.
        pending: who still has to act in the phase, in turn order (voters: all at once).
        round_bet: chips put in this betting round; current_bet: the most of them.
        raises: raises made this betting round; drew: somebody drew this draw round.
    """

    options: Options
    seats: int
    stacks: tuple[int, ...]
    hand_no: int = 0
    dealer: int = 0
    in_hand: tuple[bool, ...] = ()
    folded: tuple[bool, ...] = ()
    busted: tuple[bool, ...] = ()
    hands: tuple[tuple[str, ...], ...] = ()
    faces: tuple[tuple[bool, ...], ...] = ()
    stock: tuple[str, ...] = ()
    contrib: tuple[int, ...] = ()
    paid: int = 0
    phase: Literal["idle", "dealt", "draw", "betting", "vote", "over"] = "idle"
    round: int = 0
    pending: tuple[int, ...] = ()
    round_bet: tuple[int, ...] = ()
    current_bet: int = 0
    raises: int = 0
    drew: bool = False
    stock_out: bool = False
    votes: tuple[bool | None, ...] = ()
    agreed: bool | None = None
    last: LastHand | None = None
    end_reason: str | None = None

    @property
    def live(self) -> tuple[int, ...]:
        """Seats in the hand and not folded (ascending)."""
        return tuple(
            s for s in range(self.seats) if self.in_hand and self.in_hand[s] and not self.folded[s]
        )

    def all_in(self, seat: int) -> bool:
        """In the hand, not folded, with no chips left to bet."""
        return bool(self.in_hand) and seat in self.live and self.stacks[seat] == 0

    @property
    def pot_total(self) -> int:
        return sum(self.contrib) - self.paid if self.contrib else 0
