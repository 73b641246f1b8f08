"""When an ``act`` naming an older ``seq`` is still fresh: the expected-seq rule (pure).

A seat answers its ``turn`` push of seq ``E`` with ``{"op": "act", "seq": E, ...}``. If the
session has moved on to ``S > E`` meanwhile, the action is refused with ``conflict`` only if,
since ``E``, something changed what that seat may do or what it alone may see. Precisely, the
action is still *fresh* when all of these hold:

1. **What it may do is unchanged**: the seat's legal actions now are exactly those of the
   ``turn`` push it got at ``E`` (compared in wire form; a seat no longer to act has none).
2. **Nothing private happened**: every event record ``E+1 .. S`` looks the same to the seat as
   to a spectator (``redact(event, seat) == redact(event, None)``): the seat learnt nothing
   that only it may see, such as a card it drew.
3. **It has not answered already**: none of the records ``E+1 .. S`` is an action of this seat
   (a second ``act`` with the same ``seq`` is a resend, not a new decision).
4. **Nothing was taken back**: none of the records ``E+1 .. S`` is an ``undo`` (the table went
   back to an earlier state: an answer to a ``turn`` push from before it is not trusted, even
   where the same choices are offered again).

Public changes by other seats — another seat's give booked into the ledger in Around the
World's round 2, another seat's vote in Seven Twenty-Seven's extra-card vote — do not make the
answer stale: every seat saw them, and the seat's choices are the same. The rule is cheap: it
looks only at the records since ``E`` (a few, normally) and at the legal lists the host
computes for its ``turn`` pushes anyway. When the host cannot tell (``E`` older than the
records and turn pushes it keeps in memory), the answer is ``conflict``, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from host.game import Seat
from host.table.engine import Engine, Record

__all__ = ["stale_reason"]


def stale_reason(
    engine: Engine,
    seat: Seat,
    since: Sequence[Record],
    legal_then: Sequence[Any] | None,
    legal_now: Sequence[Any],
) -> str | None:
    """Why an action from ``seat`` expecting an older seq is stale, or ``None`` if it is fresh.

    Args:
        engine: the session's engine (its game redacts the events).
        seat: the acting seat.
        since: the records after the expected seq, up to the current one (oldest first).
        legal_then: the wire legal actions of the seat's ``turn`` push at the expected seq;
            ``None`` when unknown (no such push is remembered): stale.
        legal_now: the seat's wire legal actions now (empty when it is not to act).

    Returns:
        A sentence for the ``conflict`` message, or ``None``.

    Raises:
        GameFault: the game's ``redact`` failed (the caller answers ``internal``).
    """
    if legal_then is None:
        return "this seat had no turn at that seq (or it is too old to check)"
    for rec in since:
        if rec.type == "action" and rec.data.get("seat") == seat:
            return f"this seat acted since (seq {rec.seq})"
        if rec.type == "undo":
            return f"an action was taken back since (seq {rec.seq})"
    if list(legal_then) != list(legal_now):
        return "what this seat may do has changed since"
    for rec in since:
        if rec.type == "event" and engine.redacted_wire(rec, seat) != engine.redacted_wire(
            rec, None
        ):
            return f"this seat was shown something new since (seq {rec.seq})"
    return None
