"""Broken variants of the toy game (``tests.toy.HighCard``), one planted plugin bug each.

Each keeps the toy's id, rules and registered classes except for the one fault its docstring
names, so a test can play the toy up to the fault and check what the host does there. The
faults trigger on the first ``swap`` (or keep) only, so a session gets going first.
"""

from __future__ import annotations

from typing import Any

import attrs

from host.game import IllegalAction, Rng, Viewer, hookimpl
from tests.toy import Dealt, HighCard, Keep, Kept, State, Swap, Swapped


@attrs.frozen
class Peeked:
    """An event the broken games below may emit: the cards a seat looked at."""

    seat: int
    cards: tuple[str, ...]


class DecideRaises(HighCard):
    """``decide`` raises ``RuntimeError`` on a swap."""

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        if isinstance(action, Swap):
            raise RuntimeError("planted bug in decide")
        return super().decide(state, seat, action, rng)


class UnregisteredEvent(HighCard):
    """A swap yields a :class:`Peeked` event, a class the game never registered."""

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        if isinstance(action, Swap):
            return [Peeked(seat, (state.hands[seat],))]
        return super().decide(state, seat, action, rng)

    def evolve(self, state: State, event: Any) -> State:
        if isinstance(event, Peeked):
            return attrs.evolve(state, turn=state.turn + 1)
        return super().evolve(state, event)


class MangledEvent(UnregisteredEvent):
    """:class:`Peeked` is registered, but a swap fills its ``cards`` with a ``frozenset``, which
    the codec writes as a list and reads back as a tuple: not the event the game evolved by."""

    info = attrs.evolve(HighCard.info, event_types=(Dealt, Swapped, Kept, Peeked))

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        if isinstance(action, Swap):
            return [Peeked(seat, frozenset({state.hands[seat], state.stock[0]}))]  # type: ignore[arg-type]
        return super().decide(state, seat, action, rng)


class UnreadableEvent(MangledEvent):
    """A swap yields a :class:`Peeked` whose ``cards`` hold an object no JSON can carry."""

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        if isinstance(action, Swap):
            return [Peeked(seat, (object(),))]  # type: ignore[arg-type]
        return HighCard.decide(self, state, seat, action, rng)


class BoolSeat(HighCard):
    """In the second round, seat 1's ``Kept`` event names its seat as ``True``: equal to ``1`` in
    Python, but JSON ``true``, which the codec does not read as an integer."""

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        if isinstance(action, Keep) and state.turn >= state.seats:
            return [Kept(True if seat == 1 else seat)]
        return super().decide(state, seat, action, rng)


class EvolveRaises(HighCard):
    """``evolve`` raises ``KeyError`` on a :class:`Kept` event."""

    def evolve(self, state: State, event: Any) -> State:
        if isinstance(event, Kept):
            raise KeyError("planted bug in evolve")
        return super().evolve(state, event)


class StartRaises(HighCard):
    """``start`` raises ``ZeroDivisionError``."""

    def start(self, state: State, rng: Rng) -> list:
        return [1 // 0]


class Stalls(HighCard):
    """After a swap nobody is to act, yet the game has no outcome: the table would freeze."""

    def to_act(self, state: State) -> tuple[int, ...]:
        if any(h is None for h in state.hands):
            return ()
        return super().to_act(state)

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        if isinstance(action, Swap):
            return [Swapped(seat, None)]
        return super().decide(state, seat, action, rng)


class OutcomeNotJson(HighCard):
    """The outcome holds an object no JSON can carry."""

    def outcome(self, state: State) -> dict | None:
        result = super().outcome(state)
        return None if result is None else {**result, "extra": object()}


class ViewRaises(HighCard):
    """``view`` raises for spectators, ``redact`` for seat 1."""

    def view(self, state: State, viewer: Viewer) -> dict:
        if viewer is None:
            raise LookupError("planted bug in view")
        return super().view(state, viewer)

    def redact(self, event: Any, viewer: Viewer) -> Any:
        if viewer == 1:
            raise LookupError("planted bug in redact")
        return super().redact(event, viewer)


class ViewRaisesOnceDealt(HighCard):
    """``view`` raises ``LookupError`` once the cards are dealt (the game has started)."""

    def view(self, state: State, viewer: Viewer) -> dict:
        if state.hands:
            raise LookupError("planted bug in view")
        return super().view(state, viewer)


class ViewUnencodable(HighCard):
    """Once the cards are dealt, ``view`` returns a dict holding an object JSON cannot carry."""

    def view(self, state: State, viewer: Viewer) -> dict:
        if state.hands:
            return {"x": object()}
        return super().view(state, viewer)


class ViewTooLarge(HighCard):
    """Once the cards are dealt, ``view`` returns 2 MiB of text (past the 1 MiB bound)."""

    def view(self, state: State, viewer: Viewer) -> dict:
        if state.hands:
            return {"x": "X" * (2 << 20)}
        return super().view(state, viewer)


class BotRaises(HighCard):
    """The game's own ``bot_action`` raises ``ValueError``."""

    def bot_action(self, state: State, seat: int, rng: Rng) -> Any:
        raise ValueError("planted bug in bot_action")


class RefusesItsLegalAction(HighCard):
    """``legal_actions`` lists only ``swap``, which ``decide`` refuses as illegal."""

    def legal_actions(self, state: State, seat: int) -> list:
        return [Swap()] if seat in self.to_act(state) else []

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        if isinstance(action, Swap):
            raise IllegalAction("no_swaps", "swapping is not allowed here")
        return super().decide(state, seat, action, rng)


class BotPicksUnregisteredAction(HighCard):
    """The game's own bot returns an action of a class the game never registered."""

    def bot_action(self, state: State, seat: int, rng: Rng) -> Any:
        return Peeked(seat, ())


class DecideLoops(HighCard):
    """``decide`` loops for ever on a swap (and catches ``Exception`` on the way)."""

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        if isinstance(action, Swap):
            n = 0
            while True:
                try:
                    n += 1
                except Exception:  # a game that swallows what it can
                    n = 0
        return super().decide(state, seat, action, rng)


class DecideEatsMemory(HighCard):
    """``decide`` allocates without bound on a swap."""

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        if isinstance(action, Swap):
            hoard = []
            while True:
                hoard.append(bytearray(1 << 20))
        return super().decide(state, seat, action, rng)


class BotLoops(HighCard):
    """The game's own bot loops for ever (a host-driven step)."""

    def bot_action(self, state: State, seat: int, rng: Rng) -> Any:
        while True:
            pass


class ViewLoops(HighCard):
    """``view`` loops for ever once the cards are dealt."""

    def view(self, state: State, viewer: Viewer) -> dict:
        while state.hands:
            pass
        return super().view(state, viewer)


class OwnBaseException(BaseException):
    """A ``BaseException`` of a game's own (not an ``Exception``)."""


class DecideExits(HighCard):
    """``decide`` raises ``SystemExit`` on a swap, as ``sys.exit(3)`` does (or, given one, any
    other ``BaseException``: ``KeyboardInterrupt``, ``GeneratorExit``, one of its own)."""

    def __init__(self, raises: type[BaseException] = SystemExit) -> None:
        self.raises = raises

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        if isinstance(action, Swap):
            raise self.raises(3)
        return super().decide(state, seat, action, rng)


class BotExits(HighCard):
    """The game's own bot calls ``sys.exit()`` (a host-driven step)."""

    def bot_action(self, state: State, seat: int, rng: Rng) -> Any:
        raise SystemExit(4)


class SpectatorViewLoops(HighCard):
    """``view`` loops for ever for a spectator once the cards are dealt; players' views work,
    so play without spectators never runs into it (a replay op's spectator does)."""

    def view(self, state: State, viewer: Viewer) -> dict:
        while viewer is None and state.hands:
            pass
        return super().view(state, viewer)


class SpectatorRedactLoops(HighCard):
    """``redact`` loops for ever for a spectator; for players it works."""

    def redact(self, event: Any, viewer: Viewer) -> Any:
        while viewer is None:
            pass
        return super().redact(event, viewer)


class Armable(HighCard):
    """The toy under its own id (``armable``), whose ``evolve`` or ``decide`` loops for ever
    once that name is in :attr:`armed`: a game upgraded with a bug, which a restart of the host
    runs into when it loads the session's log."""

    info = attrs.evolve(HighCard.info, id="armable", title="Armable")

    def __init__(self) -> None:
        self.armed: set[str] = set()

    def evolve(self, state: State, event: Any) -> State:
        while "evolve" in self.armed:
            pass
        return super().evolve(state, event)

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        while "decide" in self.armed:
            pass
        return super().decide(state, seat, action, rng)


HANGS = (
    DecideLoops,
    DecideEatsMemory,
    BotLoops,
    ViewLoops,
    SpectatorViewLoops,
    SpectatorRedactLoops,
)
"""Games whose code never returns: only for hosts with a budget (``game_time``)."""

BROKEN = (
    DecideRaises,
    UnregisteredEvent,
    MangledEvent,
    UnreadableEvent,
    BoolSeat,
    EvolveRaises,
    StartRaises,
    Stalls,
    OutcomeNotJson,
    ViewRaises,
    ViewRaisesOnceDealt,
    ViewUnencodable,
    ViewTooLarge,
    BotRaises,
    RefusesItsLegalAction,
    BotPicksUnregisteredAction,
    DecideExits,
    BotExits,
)
"""Every broken game class above."""


class Plugin:
    """Registers one broken game (under the toy's id) as a plugin, for host tests."""

    def __init__(self, game: HighCard) -> None:
        self.game = game

    @hookimpl
    def gamehost_register_games(self) -> list:
        return [self.game]
