"""Around the World: text for the terminal client (``render`` of a wire-form view, ``describe``)
and the events and the ledger in words (``describe_event``, ``describe_outcome``).

Every function takes only JSON data (the view dict after a JSON round trip, an action dict, an
event as its viewer received it, the outcome).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from host.game import Viewer, who
from plugins import cards

QUESTION_TEXT = {
    "color": "red or black",
    "higher_lower": "higher, lower or same",
    "inside_outside": "inside, outside or same",
    "odd_even": "odd, even or face",
    "suit": "the suit",
}


def _seat(seat: Any, viewer: Any, dealer: Any = None) -> str:
    tags = []
    if seat == dealer:
        tags.append("dealer")
    if seat == viewer:
        tags.append("you")
    return f"seat {seat}" + (f" ({', '.join(tags)})" if tags else "")


def _ledger_cell(book: dict[str, Any]) -> str:
    text = f"{book['taken']:>3} / {book['given']:<3}"
    return text + (f" ({book['cancelled']} cancelled)" if book.get("cancelled") else "")


def render_view(view: dict[str, Any], viewer: Any) -> str:
    """A multi-line text rendering: status line, every row, the two columns, the ledger."""
    dealer = view.get("dealer")
    lines = [f"Around the World - {view['phase']}"]
    shoe = view["shoe"]
    lines.append(f"Shoe: {shoe['decks']} deck(s), {shoe['left']} of {shoe['size']} cards left")
    q = view.get("question")
    if q:
        lines.append(
            f"Pass {q['pass']}: {_seat(q['seat'], viewer)} guesses "
            f"{QUESTION_TEXT.get(q['question'], q['question'])} for {q['drinks']} drink(s)"
        )
    lines.append("Rows:")
    for row in view["rows"]:
        cards = " ".join(f"{c:>3}" for c in row["cards"]) or "-"
        guesses = ", ".join(
            f"{g['guess']} {'right' if g['correct'] else 'wrong'}" for g in row["guesses"]
        )
        lines.append(f"  {_seat(row['seat'], viewer, dealer):<20} {cards:<20} {guesses}")
    if view["columns"]:
        lines.append("Columns:        take   give")
        by_row: dict[int, dict[str, Any]] = {}
        for col in view["columns"]:
            by_row.setdefault(col["row"], {"value": col["value"]})[col["column"]] = col["card"]
        for row_no, cells in sorted(by_row.items()):
            label = "end" if row_no == 5 else f"row {row_no}"
            take = cells.get("take") or "##"
            give = cells.get("give") or "##"
            lines.append(f"  {label:<5} x{cells['value']:<4}  {take:>4}   {give:>4}")
    for p in view["pending"]:
        lines.append(f"Pending: {_seat(p['seat'], viewer)} gives {p['drinks']} drink(s)")
    best = view.get("best")
    if best:
        seats = ", ".join(str(s) for s in best["seats"])
        decided = ", ".join(str(s) for s in best["decided"]) or "nobody yet"
        lines.append(f"Best hand ({best['hand']}): seat(s) {seats}; decided: {decided}")
        lines.append("Round-2 drinks (cancel by n):")
        for n, (seat, drinks, giver, cancelled) in enumerate(view["round2_entries"]):
            source = "take" if giver is None else f"from seat {giver}"
            gone = " CANCELLED" if cancelled else ""
            lines.append(f"  {n:>3}: seat {seat} drinks {drinks} ({source}){gone}")
    lines.append(f"  {'ledger taken / given':<20} {'round 1':<9}   {'round 2':<9}   total")
    for b in view["ledger"]:
        lines.append(
            f"  {_seat(b['seat'], viewer, dealer):<20} {_ledger_cell(b['round1'])}   "
            f"{_ledger_cell(b['round2'])}   {_ledger_cell(b['total'])}"
        )
    return "\n".join(lines)


def describe_action(action: dict[str, Any]) -> str:
    """A short label: ``guess red``, ``give 2 to seat 1, 1 to seat 3``, ``flip the next card``."""
    kind = action.get("type")
    if kind == "guess":
        return f"guess {action.get('guess')}"
    if kind == "give":
        parts = [f"{a.get('drinks')} to seat {a.get('seat')}" for a in action.get("to", [])]
        return "give " + ", ".join(parts)
    if kind == "flip":
        return "flip the next card"
    if kind == "cancel":
        entries = action.get("entries") or []
        if not entries:
            return "keep every round-2 drink"
        return "cancel drink entries " + ", ".join(str(n) for n in entries)
    return str(kind)


def _drinks(n: Any) -> str:
    return f"{n} drink" if n == 1 else f"{n} drinks"


def _list(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def describe_event(event: dict[str, Any], viewer: Viewer, names: Sequence[str]) -> str:
    """One event in words for ``viewer``: ``"Ann guessed red: 7♥, right (2 drinks to give)"``,
    ``"Turned 6♣ in the take column, row 4 (8 each): bot2 takes 8"``."""
    kind = event.get("type")
    seat = event.get("seat")
    subject = who(seat, viewer, names, start=True)
    if kind == "shoe_shuffled":
        decks = event.get("decks")
        return (
            f"The shoe is shuffled: {decks} deck{'s' if decks != 1 else ''},"
            f" {event.get('size')} cards"
        )
    if kind == "guessed":
        drinks = _drinks(event.get("drinks"))
        verdict = (
            f"right ({drinks} to give)" if event.get("correct") else f"wrong ({drinks} to take)"
        )
        return f"{subject} guessed {event.get('guess')}: {cards.face(event.get('card'))}, {verdict}"
    if kind == "given":
        parts = [
            f"{_drinks(a.get('drinks'))} to {who(a.get('seat'), viewer, names)}"
            for a in event.get("to") or []
        ]
        return f"{subject} gave {_list(parts)}"
    if kind == "columns_laid":
        return f"Round 2: {event.get('cards')} cards laid face down in the take and give columns"
    if kind == "turned":
        column = event.get("column")
        row = event.get("row")
        where = "end card" if row == 5 else f"row {row}"
        text = (
            f"Turned {cards.face(event.get('card'))} in the {column} column, {where}"
            f" ({event.get('value')} each)"
        )
        verb = "take" if column == "take" else "give"
        matches = [
            f"{who(m.get('seat'), viewer, names)} {verb}{'' if m.get('seat') == viewer else 's'}"
            f" {m.get('drinks')}" + (f" ({m.get('cards')} cards)" if m.get("cards", 1) != 1 else "")
            for m in event.get("matches") or []
        ]
        return f"{text}: {_list(matches) if matches else 'no match'}"
    if kind == "best_hand":
        holders = _list([who(s, viewer, names) for s in event.get("seats") or []])
        return f"Best poker hand ({event.get('hand')}): {holders}; round-2 drinks may be cancelled"
    if kind == "cancelled":
        entries = event.get("entries") or []
        if not entries:
            return f"{subject} kept every round-2 drink"
        return f"{subject} cancelled drink entries {', '.join(str(e) for e in entries)}"
    if kind == "finished":
        return "The game is over"
    return str(kind)


def describe_outcome(outcome: dict[str, Any], names: Sequence[str]) -> str:
    """The ledger in words: who drank the most, then each seat's drinks taken and given (and
    cancelled), and the best poker hand when there was one."""
    book = outcome.get("ledger") or []
    totals = [(b.get("seat"), b.get("total") or {}) for b in book]
    most = max((t.get("taken", 0) for _, t in totals), default=0)
    top = [who(s, None, names) for s, t in totals if t.get("taken", 0) == most]
    head = f"{_list(top)} drank the most: {_drinks(most)}." if most and top else "Nobody drank."
    parts = []
    for s, t in totals:
        part = f"{who(s, None, names)} took {t.get('taken', 0)}, gave {t.get('given', 0)}"
        if t.get("cancelled"):
            part += f" ({t['cancelled']} cancelled)"
        parts.append(part)
    lines = [head, "Drinks: " + "; ".join(parts)]
    best = outcome.get("best")
    if best:
        holders = _list([who(s, None, names) for s in best.get("seats") or []])
        lines.append(f"Best poker hand ({best.get('hand')}): {holders}")
    return "\n".join(lines)
