"""The game contract: the only host module a game imports.

A game is a *decider* over immutable state (PLUGINS.md walks through writing one):

=================================  =================================================================
``info``                           :class:`GameInfo`: id, title, version, seat range, options class,
                                   the action and event classes
``initial_state(options, seats)``  the state before any event
``start(state, rng) -> events``    the opening events (shuffle, deal)
``decide(state, seat, action, rng) -> events``
                                   validates an action and returns the events it causes, or raises
                                   :class:`IllegalAction`; follow-on events (the next deal, the
                                   end of a round) are emitted through an :class:`Emitter`
``evolve(state, event) -> state``  applies one event; pure, never reads clocks or randomness
``to_act(state) -> seats``         whose input is awaited (several seats at once is normal)
``legal_actions(state, seat)``     the actions a seat may take now (``[]`` for a seat not to act);
                                   every one must be accepted by ``decide``
``view(state, viewer)``            what a seat (or a spectator, ``viewer=None``) may see
``redact(event, viewer)``          what a viewer may see of an event
``outcome(state)``                 ``None`` while running; scores / payouts / ledger when over
=================================  =================================================================

Optional members:

=================================  =================================================================
``bot_action(state, seat, rng)``   the action a host bot takes for ``seat`` (default: a uniformly
                                   random element of ``legal_actions``); also used when a seat's
                                   turn timer runs out. It must return an action ``decide``
                                   accepts: a refused one is a fault of the game
``check_options(options, seats)``  cross-field option rules; raises :class:`OptionError`
``upcast(event, version)``         turns an event dict written by an older event schema into the
                                   current shape
``undoable(state, seat, action,    whether ``seat`` may take back ``action`` by consent (its last
events) -> bool``                  action, taken in ``state``, which caused ``events``); default:
                                   nothing may be. True only when the events showed nothing hidden
                                   and drew nothing random (no card drawn, dealt or turned): the
                                   host then restores ``state`` exactly, and what everyone saw of
                                   the action itself stays seen
``render(view, viewer) -> str``    the terminal table for ``gamehost play`` and ``gamehost replay
                                   --at``: multi-line text of a view *in wire form* (the JSON the
                                   client received, not the attrs value), for ``viewer`` (a seat
                                   or ``None``); without it the clients print the view's JSON
``describe(action) -> str``        a short label of an action in wire form (``"play 8C, name
                                   hearts"``) for the clients' menus and the replay timeline;
                                   without it they print the action's JSON
``describe_event(event, viewer,    what an event meant, in words, for ``viewer`` (``"bot3 played
names) -> str``                    8♠ and named ♥"``, ``"you drew 2 cards: 5♦ 9♠"``): one line of
                                   plain text. ``event`` is the event *as that viewer received
                                   it* (wire form, after ``redact``), ``names`` each seat's name
                                   (index = seat; see :func:`who`). The history of the web client,
                                   ``gamehost play`` and ``gamehost replay`` show it; the host sends
                                   it to clients that ask (the ``text`` field of event pushes and
                                   log pages). Without it they show the event's type and fields
``describe_outcome(outcome,        the end in words: who won and the final scores (one or more
names) -> str``                    lines, the first saying who won); ``outcome`` is what
                                   ``outcome`` returned, in wire form. Without it clients name the
                                   ``winners`` and ``scores`` of an outcome that has them, else
                                   print its JSON
=================================  =================================================================

``render``, ``describe``, ``describe_event`` and ``describe_outcome`` get only JSON data, never
the state: they run in a client, which knows nothing but what the host sent it, or in the host
for a client that asked for text. They must be pure and total over anything a view, a legal
action, a redacted event or an outcome may hold. ``describe_event`` is handed only what the viewer
received, so it cannot tell a card ``redact`` hid; it must not find one elsewhere either (a
module-level cache, the names): the plugin kit checks that no card hidden from a viewer appears
in the text of that viewer's event. A text member that raises is not a fault of the session: the
host writes its own plain text instead (logged once per session).

Bots see the full state: ``bot_action`` is handed the game's whole state, hidden cards and
the stock order included, because it runs inside the host, not in a client. Nothing it sees
reaches anyone: only the action it returns is recorded and shown. A game that wants fair bots
reads only what ``view(state, seat)`` would show; one that does not (a bot that peeks) is legal
but should say so in its docstring.

Actions and events are frozen attrs classes. On the wire and in logs each is a JSON object whose
``type`` is :func:`tag_of` the class (``Play`` -> ``"play"``, ``SuitNamed`` -> ``"suit_named"``,
or the class attribute ``TAG``). Views and outcomes are attrs instances or plain JSON-able values.

Actions are public: every seat and spectator sees who acted and how. A game whose action would
carry a secret keeps the secret in an event, which :meth:`Game.redact` can hide.

Follow-on events: one action may cause more than one event. When ``start`` or ``decide`` must
look at the state an event leads to before it knows the next one (the last card is played, so
the deal is scored, then the next deal is dealt), it emits its events through an
:class:`Emitter` built with ``Emitter(state, self.evolve)`` and returns it. The emitter folds
each event as it is emitted (``emit(event) -> new state``); the host takes the folded states over
and does not fold those events again, so every event is folded exactly once. A game never calls
its own ``evolve`` inside ``start`` or ``decide``. A plain list of events is fine too: the host
folds it. Every follow-on event is an event like any other: registered in ``GameInfo``,
redacted per viewer, written to the log after the action that caused it (all of one cause in one
append), and recomputed by ``replay --verify``; the game ends after the first event whose state
has an outcome, so nothing may follow the event that ends it.

Randomness comes only from the :class:`Rng` handed to ``start`` and ``decide``; the outcomes (the
shuffled order, the drawn card) are written into events, so replay never needs the generator.

Errors: the host's error family (:mod:`host.errors`) is re-exported here. A game refuses with two
of its members and nothing else: ``decide`` raises an :class:`ActionError`, normally
``IllegalAction(reason, message)`` (answered ``illegal_action`` with the reason;
``not_your_turn`` is its own code), and ``check_options`` raises :class:`OptionError` (answered
``bad_option``). Neither changes anything. Anything else a game member raises is a game fault
(``host.plugins.faults.GameFault``: the command fails with ``internal``, or a host-driven step
ends the session): a ``ValueError`` or ``KeyError``, another :class:`GamehostError` (a game does
not raise
log or seat errors), an ``ActionError`` from any member but ``decide``, or one refusing the action
the game's own bot chose. :class:`OptionError` is also a ``ValueError`` (as it always was);
:class:`IllegalAction` and :class:`ActionError` are not, so a game's own ``except ValueError``
catches what it caught before and no more.

A game checks itself against this contract with the plugin kit, :func:`host.testing.check_game`
(PLUGINS.md walks through writing, testing and installing one).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import attrs
import pluggy

from host.errors import NOT_YOUR_TURN, ActionError, GamehostError, IllegalAction, OptionError

__all__ = [
    "NOT_YOUR_TURN",
    "ActionError",
    "Emitter",
    "Game",
    "GameInfo",
    "GamehostError",
    "IllegalAction",
    "OptionError",
    "Rng",
    "Seat",
    "Viewer",
    "hookimpl",
    "hookspec",
    "replace",
    "seed_commitment",
    "tag_of",
    "who",
]

hookspec = pluggy.HookspecMarker("gamehost")
"""Marks the host's hook specifications (``host.plugins.hookspecs``)."""

hookimpl = pluggy.HookimplMarker("gamehost")
"""Marks a plugin's hook implementations, e.g. ``gamehost_register_games``."""

Seat = int
"""A seat index, 0-based, clockwise from seat 0 (the first dealer in every built-in game)."""

Viewer = int | None
"""Who looks: a seat, or ``None`` for a spectator (who sees only public information)."""

T = TypeVar("T")


@attrs.frozen
class GameInfo:
    """What the host needs to know of a game before any session exists.

    Attributes:
        id: the game id used on the wire, e.g. ``"crazy-eights"``.
        title: a human title.
        version: the game's version string, recorded in every log header.
        min_seats, max_seats: the seat range (inclusive).
        options: an attrs class whose fields all have defaults; an instance is built from the
            ``options`` object of ``create`` (unknown keys refused). A field's
            ``metadata["doc"]`` describes it in ``games``; ``typing.Literal`` types list the
            allowed values.
        action_types, event_types: every action and event class the game uses.
        event_version: the schema version written beside each event; bump it when an event's
            shape changes and teach ``upcast`` the old shape.
        description: one paragraph for ``games``.
        view_type: an attrs class describing the view's wire shape (``view`` may return an
            instance or the same shape as plain data); ``None`` publishes no view schema. Its
            fields, and the event fields, mark what is hidden from whom with
            ``metadata={"hidden": ...}`` (see :mod:`host.plugins.contract`).
        outcome_type: the same for the outcome (what ``ended`` carries), or ``None``.
        reveal_seed: whether clients get the session seed when it ends (commit-reveal). A game
            whose rules keep some cards secret for ever (folded hands in Seven Twenty-Seven)
            sets it False: the seed would let anyone re-deal them. The log keeps the seed, so
            an auditor with the log can still check the commitment.
    """

    id: str
    title: str
    version: str
    min_seats: int
    max_seats: int
    options: type
    action_types: tuple[type, ...]
    event_types: tuple[type, ...]
    event_version: int = 1
    description: str = ""
    reveal_seed: bool = True
    view_type: type | None = None
    outcome_type: type | None = None


@runtime_checkable
class Game(Protocol):
    """The decider a plugin implements (see the module docstring for each member's meaning)."""

    info: GameInfo

    def initial_state(self, options: Any, seats: int) -> Any: ...

    def start(self, state: Any, rng: Rng) -> Sequence[Any]: ...

    def decide(self, state: Any, seat: Seat, action: Any, rng: Rng) -> Sequence[Any]: ...

    def evolve(self, state: Any, event: Any) -> Any: ...

    def to_act(self, state: Any) -> tuple[Seat, ...]: ...

    def legal_actions(self, state: Any, seat: Seat) -> list[Any]: ...

    def view(self, state: Any, viewer: Viewer) -> Any: ...

    def redact(self, event: Any, viewer: Viewer) -> Any: ...

    def outcome(self, state: Any) -> Any | None: ...


class Emitter(list[Any]):
    """The events one ``start`` or ``decide`` call produces, folded into the state as emitted.

    It is the list of the events emitted so far, so ``start``/``decide`` return it as their
    events. It also remembers the state after each event, which the host takes over instead of
    folding the events again (see the module docstring, "Follow-on events").

    Args:
        state: the state ``start``/``decide`` was given.
        evolve: the game's own ``evolve`` (pass ``self.evolve``). The host takes the folded
            states over only when this is the game's ``evolve`` and the list was changed only
            through :meth:`emit`; otherwise it folds the events itself (correct, just slower).

    Example, in ``decide`` (the last card played ends the deal)::

        out = Emitter(state, self.evolve)
        after = out.emit(Played(seat, card))
        if not after.hands[seat]:
            out.emit(DealScored(...))
        return out

    Attributes:
        state: the state after the last emitted event (``state`` as given before the first).
        initial: the state as given.
        evolve: as given.
    """

    __slots__ = ("state", "initial", "evolve", "_folded")

    def __init__(self, state: Any, evolve: Callable[[Any, Any], Any]) -> None:
        super().__init__()
        self.state = state
        self.initial = state
        self.evolve = evolve
        self._folded: list[tuple[Any, Any]] = []

    def emit(self, *events: Any) -> Any:
        """Append each event and fold it into :attr:`state`, in order.

        Returns:
            The state after the last one.

        Raises:
            whatever ``evolve`` raises (the event it raised on is not appended).
        """
        for event in events:
            state = self.evolve(self.state, event)
            self.append(event)
            self._folded.append((event, state))
            self.state = state
        return self.state

    def folded_states(self, state: Any, evolve: Callable[[Any, Any], Any]) -> list[Any] | None:
        """The state after each event, if these events are exactly those emitted from ``state``
        (the same object) by ``evolve`` (equal to the one given); else ``None``.

        For the host: it folds the events itself when this is ``None``.
        """
        folded = self._folded
        if self.initial is not state or len(folded) != len(self) or self.evolve != evolve:
            return None
        for event, (done, _) in zip(self, folded, strict=True):
            if event is not done:
                return None
        return [after for _, after in folded]


_REPLACERS: dict[type, Callable[[Any, dict[str, Any]], Any]] = {}


def replace(inst: T, **changes: Any) -> T:
    """A copy of an attrs instance with some fields changed: what ``attrs.evolve`` does (the
    copy goes through the class's ``__init__``, so validators and converters run; an unknown
    field is a ``TypeError``), several times faster. For a game's ``evolve``, which copies its
    state for every event.

    The copying function is generated once per class (a keyword per ``init`` field, read from
    ``changes`` or else from ``inst``), then remembered.

    >>> @attrs.frozen
    ... class Score:
    ...     seat: int
    ...     points: int = 0
    >>> replace(Score(1, 5), points=7)
    Score(seat=1, points=7)

    Raises:
        TypeError: a change names no ``init`` field of the class (as ``attrs.evolve``), or
            ``inst`` is not an attrs instance.
    """
    cls = type(inst)
    make = _REPLACERS.get(cls)
    if make is None:
        make = _REPLACERS[cls] = _replacer(cls)
    return make(inst, changes)  # type: ignore[no-any-return]


def _replacer(cls: type) -> Callable[[Any, dict[str, Any]], Any]:
    fields = [a for a in attrs.fields(cls) if a.init]
    args = "".join(f"{a.alias}=pop({a.alias!r}, inst.{a.name}), " for a in fields)
    source = f"def copy(inst, changes):\n    pop = changes.pop\n    return cls({args}**changes)\n"
    scope: dict[str, Any] = {"cls": cls}
    exec(compile(source, f"<replace {cls.__qualname__}>", "exec"), scope)  # noqa: S102
    return scope["copy"]  # type: ignore[no-any-return]


_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_TAGS: dict[type, str] = {}


def tag_of(cls: type) -> str:
    """The ``type`` tag of a class: its ``TAG`` attribute, else its snake_case name.

    Computed once per class, then remembered.

    >>> class SuitNamed: ...
    >>> tag_of(SuitNamed)
    'suit_named'
    """
    tag = _TAGS.get(cls)
    if tag is None:
        own: str | None = cls.__dict__.get("TAG")
        tag = own if own else _CAMEL.sub("_", cls.__name__).lower()
        _TAGS[cls] = tag
    return tag


def seed_commitment(seed: bytes) -> str:
    """The public commitment to a session seed: ``sha256(seed)`` as 64 hex digits."""
    return hashlib.sha256(seed).hexdigest()


class Rng:
    """A deterministic random generator that is stable across Python versions and platforms.

    SHA-256 in counter mode over ``seed``, ``stream`` and ``seq``; integers by rejection sampling,
    so there is no modulo bias. The host hands ``start`` and ``decide`` an ``Rng(seed, seq)``
    where ``seq`` is the log sequence number of the first record the call will produce; bots get
    ``stream="bot"``. Do not use the ``random`` module in a game: its ``shuffle``/``randrange``
    algorithms are not promised to stay the same.

    Args:
        seed: the session's secret seed (32 bytes from the host).
        seq: the sequence number the draws belong to.
        stream: a name separating independent streams of draws for the same ``seq``.
    """

    __slots__ = ("_seed", "_seq", "_stream", "_key", "_counter", "_pool")

    def __init__(self, seed: bytes, seq: int, stream: str = "game") -> None:
        # the key is derived on the first draw: most actions draw nothing
        self._seed, self._seq, self._stream = seed, seq, stream
        self._key = b""
        self._counter = 0
        self._pool = b""

    def _take(self, n: int) -> bytes:
        if not self._key:
            self._key = hashlib.sha256(
                b"gamehost-rng-v1\x00"
                + self._seed
                + b"\x00"
                + self._stream.encode()
                + b"\x00"
                + str(self._seq).encode()
            ).digest()
        while len(self._pool) < n:
            block = hashlib.sha256(self._key + self._counter.to_bytes(8, "big")).digest()
            self._counter += 1
            self._pool += block
        out, self._pool = self._pool[:n], self._pool[n:]
        return out

    def below(self, n: int) -> int:
        """A uniform integer in ``[0, n)``.

        Raises:
            ValueError: if ``n < 1``.
        """
        if n < 1:
            raise ValueError("Rng.below needs n >= 1")
        if n == 1:
            return 0
        nbytes = (n.bit_length() + 7) // 8 + 1
        space = 1 << (8 * nbytes)
        limit = space - space % n
        while True:
            x = int.from_bytes(self._take(nbytes), "big")
            if x < limit:
                return x % n

    def choice(self, items: Sequence[T]) -> T:
        """One element of a non-empty sequence, uniformly.

        Raises:
            IndexError: if ``items`` is empty.
        """
        if not items:
            raise IndexError("Rng.choice from an empty sequence")
        return items[self.below(len(items))]

    def shuffled(self, items: Sequence[T]) -> list[T]:
        """A new list with the items in a uniformly random order (Fisher-Yates)."""
        out = list(items)
        for i in range(len(out) - 1, 0, -1):
            j = self.below(i + 1)
            out[i], out[j] = out[j], out[i]
        return out


def who(seat: Any, viewer: Viewer, names: Sequence[str], *, start: bool = False) -> str:
    """How a text names ``seat`` for ``viewer`` (for ``describe_event``): ``"you"`` for the
    viewer's own seat (``"You"`` with ``start``, at the start of a sentence), else the seat's
    name from ``names``, else ``"seat N"`` (a seat past ``names``, or not an int).

    Past tense reads right for both (``"you drew"``, ``"Ann drew"``).

    >>> who(1, 1, ["Ann", "Bob"], start=True), who(1, 0, ["Ann", "Bob"])
    ('You', 'Bob')
    """
    if seat is not None and seat == viewer:
        return "You" if start else "you"
    if isinstance(seat, int) and not isinstance(seat, bool) and 0 <= seat < len(names):
        return str(names[seat])
    return f"seat {seat}"
