"""Records in words: the text a viewer reads of each record of a session's log.

The host sends it to clients that ask (``"text": true`` on ``join``, ``watch``, ``resume`` and
the ``log`` replay op: PROTOCOL.md); ``gamehost replay`` prints its timeline with it and
``gamehost play`` its history. A game event's text is the game's own
(``describe_event(event, viewer, names)``, see :mod:`host.game`), given the event *as the viewer
received it*; the host writes the rest:

=================  ==========================================================================
``seat_taken``     ``"Ann took seat 0"`` (``"(a host bot)"`` for a bot; ``"You took seat 0"``)
``action``         ``""`` (nothing: the game's events tell what it did) when the game has
                   ``describe_event``; else ``"Ann: play 8C"`` (the game's ``describe`` label).
                   A move the host played for a seat whose turn timer ran out is always told:
                   ``"Time ran out for Ann: the host played draw"``
``event``          the game's ``describe_event``; without it (or when it raises) the event's
                   type and its fields, ``played seat=1 card="8C"``
``seat_held``      ``"Ann is back"``
``seat_released``  ``"Ann left"`` (``"Ann lost the connection"`` when the reason is known to be
                   a lost connection)
``undo_asked``     ``"Ann asked to take back play 8C (Bob to agree)"``
``undo_answered``  ``"Bob agreed"`` / ``"Bob refused: the move stands"``
``undo``           ``"Ann took back play 8C"``
``undo_refused``   ``"Nobody answered in time: Ann's move stands"`` (``expired``) / ``"Ann's
                   request lapsed: a move came first"`` (``acted``)
``ended``          the game's ``describe_outcome`` of the outcome, or why the host ended it
``header``         ``"A session of Crazy Eights (version 1) for 4 seats"`` (a log page's)
=================  ==========================================================================

Seat names come from the ``seat_taken`` records (:func:`display_names`): a free seat is
``"seat N"``, and a name two seats share (or ``you``) gets its seat number, so every text names
one seat. Pure: no I/O; the game's text members run inside :class:`Words`, which turns what
they raise into the host's own text (``failed`` says it happened, for the caller to log).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from host.game import Viewer, who
from host.plugins.faults import game_error
from protocol.convert import json_text

__all__ = ["Words", "display_names", "outcome_fallback", "raw_event"]

ABORTED = {
    "too_long": "it reached the host's record limit",
    "abandoned": "no player was connected for too long",
    "game_error": "the game's code failed",
    "admin": "an operator ended it",
}
"""Why the host ended a session (``ended`` records' ``aborted``), in words."""

LOST = frozenset({"gone", "unresponsive", "host_gone"})
"""``seat_released`` reasons that mean a lost connection (``left`` is a ``leave``)."""


def display_names(names: Sequence[str | None]) -> list[str]:
    """The name each seat goes by in texts, from the seats' names (None: a free seat).

    A free seat, or an empty name, is ``"seat N"``; a name that two seats share, or ``you``
    (any case), becomes ``"NAME (seat N)"``.

    >>> display_names(["Ann", None, "bot2", "Ann"])
    ['Ann (seat 0)', 'seat 1', 'bot2', 'Ann (seat 3)']
    """
    counts: dict[str, int] = {}
    for n in names:
        if n:
            counts[n] = counts.get(n, 0) + 1
    out = []
    for seat, n in enumerate(names):
        if not n:
            out.append(f"seat {seat}")
        elif counts[n] > 1 or n.strip().lower() == "you":
            out.append(f"{n} (seat {seat})")
        else:
            out.append(n)
    return out


def raw_event(event: Any) -> str:
    """An event's type and fields, ``played seat=1 card="8C" suit=null``: the text of a game
    without ``describe_event`` (JSON values; ``-`` for an event not shown)."""
    if not isinstance(event, Mapping):
        return "-" if event is None else json_text(event)
    parts = [f"{k}={json_text(v)}" for k, v in event.items() if k != "type"]
    return " ".join([str(event.get("type", "event")), *parts])


def _and(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def outcome_fallback(outcome: Any, names: Sequence[str]) -> str:
    """The end in words for a game without ``describe_outcome``: its ``winners`` (seats) and
    ``scores`` (one number per seat) when it has them, else its JSON."""
    if isinstance(outcome, Mapping):
        winners = outcome.get("winners")
        scores = outcome.get("scores")
        lines = []
        if isinstance(winners, list) and all(isinstance(w, int) for w in winners) and winners:
            lines.append(f"{_and([who(w, None, names) for w in winners])} won.")
        if isinstance(scores, list) and all(isinstance(s, int | float) for s in scores):
            lines.append(
                "Scores: " + ", ".join(f"{who(i, None, names)} {s}" for i, s in enumerate(scores))
            )
        if lines:
            return "\n".join(lines)
    return f"The game is over: {json_text(outcome)}"


def _seats(n: Any) -> str:
    return "1 seat" if n == 1 else f"{n} seats"


class Words:
    """The text of records for one game (see the module docstring).

    Args:
        game: the game object (its optional ``describe``, ``describe_event`` and
            ``describe_outcome`` are used).

    Attributes:
        failed: a text member of the game raised (its text was replaced by the host's); the
            caller logs it and may reset it.
    """

    def __init__(self, game: Any) -> None:
        self.game = game
        self.describe_event = getattr(game, "describe_event", None)
        self.describe_outcome = getattr(game, "describe_outcome", None)
        self.describe = getattr(game, "describe", None)
        self.failed = False

    def label(self, action: Any) -> str:
        """An action's label: the game's ``describe``, else its JSON."""
        if self.describe is not None:
            try:
                return str(self.describe(action))
            except BaseException as exc:  # a game's text fault is not the host's (SystemExit too)
                game_error(exc)
                self.failed = True
        return json_text(action)

    def event(self, event: Any, viewer: Viewer, names: Sequence[str]) -> str:
        """A game event (as ``viewer`` received it) in words."""
        if event is None:
            return ""
        if self.describe_event is not None:
            try:
                text = self.describe_event(event, viewer, names)
                if isinstance(text, str):
                    return text
            except BaseException as exc:  # a game's text fault is not the host's (SystemExit too)
                game_error(exc)
            self.failed = True
        return raw_event(event)

    def outcome(self, outcome: Any, aborted: str | None, names: Sequence[str]) -> str:
        """The end in words: why the host ended it (``aborted``), or the outcome's text."""
        if aborted is not None or outcome is None:
            why = ABORTED.get(str(aborted), str(aborted))
            return f"The host ended the session: {why}."
        if self.describe_outcome is not None:
            try:
                text = self.describe_outcome(outcome, names)
                if isinstance(text, str):
                    return text
            except BaseException as exc:  # a game's text fault is not the host's (SystemExit too)
                game_error(exc)
            self.failed = True
        return outcome_fallback(outcome, names)

    def _undo(self, kind: str, d: Mapping[str, Any], viewer: Viewer, names: Sequence[str]) -> str:
        """An undo record in words (see the module docstring)."""
        seat = d.get("seat")
        name = who(seat, viewer, names, start=True)
        whose = "your" if seat == viewer else f"{who(seat, viewer, names)}'s"
        if kind == "undo_asked":
            waiting = [who(w, viewer, names) for w in d.get("waiting") or []]
            asked = f" ({_and(waiting)} to agree)" if waiting else ""
            return f"{name} asked to take back {self.label(d.get('action'))}{asked}"
        if kind == "undo_answered":
            return f"{name} agreed" if d.get("accept") else f"{name} refused: the move stands"
        if kind == "undo":
            return f"{name} took back {self.label(d.get('action'))}"
        if d.get("reason") == "expired":
            return f"Nobody answered in time: {whose} move stands"
        return f"{whose[0].upper()}{whose[1:]} request lapsed: a move came first"

    def record(self, kind: str, body: Any, viewer: Viewer, names: Sequence[str]) -> str:
        """The text of a record for ``viewer``: ``kind`` is its type (an ``event`` push's
        ``kind``) and ``body`` what the viewer was shown of it (the push's ``event``, already
        redacted), so the text tells nothing more than the push does. ``""``: nothing to say."""
        d = body if isinstance(body, Mapping) else {}
        seat = d.get("seat")
        if kind == "event":
            return self.event(body, viewer, names)
        if kind == "action":
            if d.get("timed_out"):
                whom = "you" if seat == viewer else who(seat, viewer, names)
                return f"Time ran out for {whom}: the host played {self.label(d.get('action'))}"
            if self.describe_event is not None:
                return ""
            return f"{who(seat, viewer, names, start=True)}: {self.label(d.get('action'))}"
        if kind == "seat_taken":
            bot = " (a host bot)" if d.get("bot") else ""
            return f"{who(seat, viewer, names, start=True)} took seat {seat}{bot}"
        if kind == "seat_held":
            return f"{who(seat, viewer, names, start=True)} came back"
        if kind == "seat_released":
            went = "lost the connection" if d.get("reason") in LOST else "left"
            return f"{who(seat, viewer, names, start=True)} {went}"
        if kind in ("undo_asked", "undo_answered", "undo", "undo_refused"):
            return self._undo(kind, d, viewer, names)
        if kind == "ended":
            return self.outcome(d.get("outcome"), d.get("aborted"), names)
        if kind == "header":
            title, version = self.game.info.title, d.get("game_version", "?")
            return f"A session of {title} (version {version}) for {_seats(d.get('seats'))}"
        return ""
