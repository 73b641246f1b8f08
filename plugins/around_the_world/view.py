"""Around the World: the table view and event redaction (rule spec, "Hidden information").

Everything is public except the shoe order: rows, guesses, turned cards, pending gives and the
ledger are visible to every viewer; ``shoe_shuffled`` is redacted for everyone.
"""

from __future__ import annotations

from typing import Any

import attrs

from host.game import Viewer, replace
from plugins.around_the_world.model import ShoeShuffled, State, ledger
from plugins.around_the_world.rules import (
    DEALER,
    current_question,
    guesser,
    round2_entries,
    state_layout,
    state_questions,
)


def view(state: State, viewer: Viewer) -> dict[str, Any]:
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
    qs = state_questions(state)
    who = guesser(state)
    question = None
    if who is not None:
        name, value = current_question(state)
        question = {
            "seat": who,
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
        for k, (column, row, value) in enumerate(state_layout(state)):
            card = state.turned[k] if k < len(state.turned) else None
            columns.append({"column": column, "row": row, "value": value, "card": card})
    return {
        "phase": state.phase,
        "you": viewer,
        "dealer": DEALER,
        "options": attrs.asdict(state.options),
        "shoe": {"decks": state.decks, "size": len(state.shoe), "left": _left(state)},
        "question": question,
        "rows": rows,
        "columns": columns,
        "pending": [{"seat": s, "drinks": d} for s, d in enumerate(state.pending) if d],
        "round2_entries": [[e.seat, e.drinks, e.giver, e.cancelled] for e in round2_entries(state)],
        "ledger": ledger(state),
        "best": (
            {"seats": list(state.best), "hand": state.best_hand, "decided": list(state.decided)}
            if state.best
            else None
        ),
    }


def _left(state: State) -> int:
    return len(state.shoe) - state.dealt


def redact(event: Any, viewer: Viewer) -> Any:
    """Hide the shoe order from every viewer; every other event is public."""
    if isinstance(event, ShoeShuffled):
        return replace(event, cards=None)
    return event
