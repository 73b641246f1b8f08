"""Around the World (Ride the Bus): a drinking game whose result is a drink ledger.

Rules: ``docs/rules/around-the-world.md``. Round 1: four (or five) passes round the table; on each
pass every seat, the dealer (seat 0) last, names a guess and is dealt the next shoe card face up
into its row; right gives the question's value in drinks, wrong takes it. Round 2: the dealer
lays 8 (10 with end cards) cards face down in a ``take`` and a ``give`` column and turns them one
at a time; every card of a seat's row with the turned rank takes or gives the row's value.

Actions (wire forms in ``plugins.around_the_world_model``):

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

Ledger (``outcome``): per seat and round, ``taken`` (drinks the seat drinks: wrong guesses, take
matches and drinks given to it), ``given`` (drinks it assigned to others) and ``cancelled``
(drinks it was spared by ``poker_cancel``), plus totals.
"""

from __future__ import annotations

from typing import Any

import attrs

from host.game import (
    NOT_YOUR_TURN,
    Emitter,
    GameInfo,
    IllegalAction,
    OptionError,
    Rng,
    Viewer,
    hookimpl,
)
from plugins import around_the_world_rules as rules
from plugins import cards
from plugins.around_the_world_model import (
    Assignment,
    BestHand,
    Cancel,
    Cancelled,
    ColumnsLaid,
    Entry,
    Finished,
    Flip,
    Give,
    Given,
    Guess,
    Guessed,
    Match,
    Options,
    ShoeShuffled,
    State,
    Turned,
    View,
    fold,
    ledger,
)
from plugins.around_the_world_text import describe_action, render_view

__all__ = ["AroundTheWorld", "gamehost_register_games"]

DEALER = 0


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
    def _questions(self, state: State) -> tuple[str, ...]:
        return rules.questions(state.options.fifth_question)

    def _layout(self, state: State) -> tuple[tuple[str, int, int], ...]:
        o = state.options
        return rules.layout(o.row_values, o.flip_order, o.end_cards)

    def _guesser(self, state: State) -> int | None:
        """The seat to guess next in round 1: seat 1 first, the dealer last on each pass."""
        if state.phase != "round1" or state.turn >= len(self._questions(state)) * state.seats:
            return None
        return (state.turn % state.seats + 1) % state.seats

    def _question(self, state: State) -> tuple[str, int]:
        index = state.turn // state.seats
        o = state.options
        return self._questions(state)[index], rules.round1_value(
            index, o.round1_values, o.row_values
        )

    def _expected(self, state: State, seat: int) -> str | None:
        """What ``seat`` must send now: guess, give, flip, cancel, or None."""
        if state.phase in ("round1", "round2") and any(state.pending):
            return "give" if state.pending[seat] else None
        if state.phase == "round1":
            return "guess" if seat == self._guesser(state) else None
        if state.phase == "round2":
            more = len(state.turned) < len(self._layout(state))
            return "flip" if seat == DEALER and more else None
        if state.phase == "cancel":
            return "cancel" if seat in state.best and seat not in state.decided else None
        return None

    def to_act(self, state: State) -> tuple[int, ...]:
        """Round 1: the guesser, or the seat with a pending give. Round 2: every seat with a
        pending give, else the dealer. Cancel phase: best-hand holders yet to decide."""
        return tuple(s for s in range(state.seats) if self._expected(state, s) is not None)

    # -- actions -------------------------------------------------------------------------------
    def legal_actions(self, state: State, seat: int) -> list[Any]:
        """The actions ``seat`` may take now (a representative subset for give and cancel)."""
        kind = self._expected(state, seat)
        if kind == "guess":
            question, _ = self._question(state)
            allowed = rules.allowed_guesses(question, state.options.suit_question)
            return [Guess(g) for g in allowed]
        if kind == "give":
            return self._give_choices(state, seat)
        if kind == "flip":
            return [Flip()]
        if kind == "cancel":
            return self._cancel_choices(state, seat)
        return []

    def _give_choices(self, state: State, seat: int) -> list[Give]:
        value = state.pending[seat]
        others = [(seat + k) % state.seats for k in range(1, state.seats)]
        out = [Give((Assignment(o, value),)) for o in others]
        spread = others[:value]
        if len(spread) > 1:
            base, extra = divmod(value, len(spread))
            out.append(Give(tuple(Assignment(o, base + (i < extra)) for i, o in enumerate(spread))))
        return out

    def _round2_entries(self, state: State) -> list[Entry]:
        """The round-2 drink entries; their position is their number for ``cancel``."""
        return [e for e in state.entries if e.round == 2]

    def _cancel_choices(self, state: State, seat: int) -> list[Cancel]:
        entries = self._round2_entries(state)
        options = [(), tuple(range(len(entries)))]
        for s in (seat, *range(state.seats)):
            options.append(tuple(n for n, e in enumerate(entries) if e.seat == s))
        seen: list[tuple[int, ...]] = []
        for o in options:
            if o not in seen:
                seen.append(o)
        return [Cancel(o) for o in seen]

    def bot_action(self, state: State, seat: int, rng: Rng) -> Any:
        """A random legal guess; gives spread drink by drink over random other seats; a flip;
        a cancel of every round-2 drink the bot itself would drink."""
        kind = self._expected(state, seat)
        if kind == "give":
            others = [s for s in range(state.seats) if s != seat]
            split: dict[int, int] = {}
            for _ in range(state.pending[seat]):
                target = rng.choice(others)
                split[target] = split.get(target, 0) + 1
            return Give(tuple(Assignment(s, d) for s, d in sorted(split.items())))
        if kind == "cancel":
            entries = self._round2_entries(state)
            return Cancel(tuple(n for n, e in enumerate(entries) if e.seat == seat))
        return rng.choice(self.legal_actions(state, seat))

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list[Any]:
        """Validate ``action`` by ``seat`` and return its events (plus any phase changes).

        Raises:
            IllegalAction: ``not_your_turn`` (seat not to act), ``wrong_action`` (the seat must
                send another kind of action), ``bad_guess``, ``empty_give``, ``bad_seat``,
                ``give_to_self``, ``duplicate_seat``, ``bad_drinks``, ``wrong_total``,
                ``bad_entry``, ``duplicate_entry``.
        """
        kind = self._expected(state, seat)
        if kind is None:
            raise IllegalAction(NOT_YOUR_TURN, f"seat {seat} is not to act")
        wanted = {"guess": Guess, "give": Give, "flip": Flip, "cancel": Cancel}[kind]
        if not isinstance(action, wanted):
            raise IllegalAction("wrong_action", f"seat {seat} must {kind} now")
        if isinstance(action, Guess):
            event: Any = self._guess(state, seat, action)
        elif isinstance(action, Give):
            self._check_give(state, seat, action)
            event = Given(seat, action.to)
        elif isinstance(action, Flip):
            event = self._flip(state)
        else:
            event = self._cancel(state, seat, action)
        out = Emitter(state, self.evolve)
        out.emit(event)
        self._follow_ups(out)
        return out

    def _guess(self, state: State, seat: int, action: Guess) -> Guessed:
        question, value = self._question(state)
        o = state.options
        allowed = rules.allowed_guesses(question, o.suit_question)
        if action.guess not in allowed:
            raise IllegalAction(
                "bad_guess", f"the {question} question takes {', '.join(allowed)} (Round 1)"
            )
        card = state.shoe[state.dealt]
        right = rules.answer(question, state.rows[seat], card, o.ace == "high", o.suit_question)
        return Guessed(seat, question, action.guess, card, action.guess == right, value)

    def _check_give(self, state: State, seat: int, action: Give) -> None:
        value = state.pending[seat]
        if not action.to:
            raise IllegalAction("empty_give", "name at least one seat to give drinks to")
        seen: set[int] = set()
        for a in action.to:
            if not 0 <= a.seat < state.seats:
                raise IllegalAction("bad_seat", f"there is no seat {a.seat}")
            if a.seat == seat:
                raise IllegalAction("give_to_self", "drinks are given to other players only")
            if a.seat in seen:
                raise IllegalAction("duplicate_seat", f"seat {a.seat} is named twice")
            if a.drinks < 1:
                raise IllegalAction("bad_drinks", "each named seat gets at least one drink")
            seen.add(a.seat)
        total = sum(a.drinks for a in action.to)
        if total != value:
            raise IllegalAction("wrong_total", f"give exactly {value} drinks (named {total})")

    def _flip(self, state: State) -> Turned:
        column, row, value = self._layout(state)[len(state.turned)]
        card = state.shoe[state.laid_at + len(state.turned)]
        matches = []
        for s, hand in enumerate(state.rows):
            n, drinks = rules.match_drinks(hand, card, value, state.options.face_double)
            if n:
                matches.append(Match(s, n, drinks))
        return Turned(column, row, card, value, tuple(matches))

    def _cancel(self, state: State, seat: int, action: Cancel) -> Cancelled:
        count = len(self._round2_entries(state))
        if len(set(action.entries)) != len(action.entries):
            raise IllegalAction("duplicate_entry", "an entry is named twice")
        for n in action.entries:
            if not 0 <= n < count:
                raise IllegalAction(
                    "bad_entry", f"round-2 drink entries are numbered 0 to {count - 1}"
                )
        return Cancelled(seat, tuple(sorted(action.entries)))

    def _follow_ups(self, out: Emitter) -> None:
        """Emit the automatic events the new state calls for (round 2 laid, poker, end)."""
        state = out.state
        if state.phase == "round1" and self._guesser(state) is None and not any(state.pending):
            state = out.emit(ColumnsLaid(len(self._layout(state))))
        if (
            state.phase == "round2"
            and len(state.turned) == len(self._layout(state))
            and not any(state.pending)
        ):
            if state.options.poker_cancel:
                state = out.emit(BestHand(*rules.best_hands(state.rows)))
                if not self._round2_entries(state):
                    state = out.emit(Finished())
            else:
                state = out.emit(Finished())
        if state.phase == "cancel" and set(state.decided) == set(state.best):
            out.emit(Finished())

    # -- state ---------------------------------------------------------------------------------
    def evolve(self, state: State, event: Any) -> State:
        """Apply one event (pure; every random outcome is in the event)."""
        return fold(state, event)

    # -- what people see -----------------------------------------------------------------------
    def view(self, state: State, viewer: Viewer) -> dict[str, Any]:
        """The table as anyone may see it: rows, guesses, the columns (face-down cards as
        ``null``), pending gives, round-2 drink entries and the ledger. The shoe order is never
        shown.

        Shape: ``phase``, ``you``, ``dealer``, ``shoe`` {decks, size, left}, ``question``
        {seat, question, drinks, pass} or null, ``rows`` [{seat, cards, guesses [{question,
        guess, correct}]}], ``columns`` [{column, row, value, card}], ``pending`` [{seat,
        drinks}], ``round2_entries`` [[seat, drinks, giver or null, cancelled]] (compact: the
        index is the number ``cancel`` uses), ``ledger`` (as in
        :func:`ledger`), ``best`` {seats, hand, decided} or null.
        """
        qs = self._questions(state)
        guesser = self._guesser(state)
        question = None
        if guesser is not None:
            name, value = self._question(state)
            question = {
                "seat": guesser,
                "question": name,
                "drinks": value,
                "pass": state.turn // state.seats + 1,
            }
        rows = [
            {
                "seat": s,
                "cards": list(state.rows[s]),
                "guesses": [
                    {"question": qs[i], "guess": g, "correct": state.results[s][i]}
                    for i, g in enumerate(state.guesses[s])
                ],
            }
            for s in range(len(state.rows))
        ]
        columns = []
        if state.laid_at >= 0:
            for k, (column, row, value) in enumerate(self._layout(state)):
                card = state.turned[k] if k < len(state.turned) else None
                columns.append({"column": column, "row": row, "value": value, "card": card})
        return {
            "phase": state.phase,
            "you": viewer,
            "dealer": DEALER,
            "options": attrs.asdict(state.options),
            "shoe": {"decks": state.decks, "size": len(state.shoe), "left": self._left(state)},
            "question": question,
            "rows": rows,
            "columns": columns,
            "pending": [{"seat": s, "drinks": d} for s, d in enumerate(state.pending) if d],
            "round2_entries": [
                [e.seat, e.drinks, e.giver, e.cancelled] for e in self._round2_entries(state)
            ],
            "ledger": ledger(state),
            "best": (
                {"seats": list(state.best), "hand": state.best_hand, "decided": list(state.decided)}
                if state.best
                else None
            ),
        }

    def _left(self, state: State) -> int:
        return len(state.shoe) - state.dealt

    def redact(self, event: Any, viewer: Viewer) -> Any:
        """Hide the shoe order from every viewer; every other event is public."""
        if isinstance(event, ShoeShuffled):
            return attrs.evolve(event, cards=None)
        return event

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


@hookimpl
def gamehost_register_games() -> list:
    """The plugin hook: this module offers one game."""
    return [AroundTheWorld()]
