"""Around the World: text for the terminal client (``render`` of a wire-form view, ``describe``).

Both functions take only JSON data (the view dict after a JSON round trip, an action dict).
"""

from __future__ import annotations

from typing import Any

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
