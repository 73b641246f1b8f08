"""``check_game``: the properties every game must have, checked by playing it.

One call from a plugin's own tests::

    from host.testing import check_game

    def test_my_game_keeps_the_contract():
        check_game(MyGame())

What it checks (each failure is a :class:`GameCheckFailed` whose message starts with the fault's
name, then the game id, the seat count, the seed and the seq where it happened):

``registration``
    the game's action and event classes are attrs classes with distinct ``type`` tags, and the
    codec can be built for them.
``fault``
    playing with host bots, the game raised, returned an action or event class it did not
    register, wrote one that does not read back equal through the codec and JSON, stalled (no
    seat to act, no outcome), or its bot raised (the host's own check, :mod:`host.table.engine`).
``did_not_end``
    a playout passed ``max_actions`` bot actions without an outcome.
``legal_refused``
    ``decide`` refused (an :class:`~host.game.ActionError`, normally ``IllegalAction``) an action
    ``legal_actions`` listed.
``legal_not_to_act``
    ``legal_actions`` listed an action for a seat that is not in ``to_act``, or listed nothing
    for one that is.
``refusal_not_illegal_action``
    ``decide`` raised something other than an :class:`~host.game.ActionError` on a well-formed
    action that is not legal now (sampled from actions legal elsewhere in the playouts).
``unregistered_action`` / ``codec``
    a listed legal action is of a class the game did not register, or does not read back
    equal to itself through its wire form.
``nondeterminism``
    ``decide`` twice with the same state and ``Rng`` gave different events, ``view`` twice
    gave different bytes, or two playouts with the same seed wrote different logs (a game that
    uses ``random``, the clock or a set's order instead of its :class:`~host.game.Rng`).
``replay``
    :meth:`~host.table.engine.Engine.verify` (what ``gamehost replay --verify`` runs) rejects the
    log of a playout read back from JSON.
``contract``
    a value breaks the game's published contract (:func:`host.plugins.contract.game_schema`, what
    ``gamehost schema`` prints): an action, a logged event, a redacted event as a seat or a
    spectator receives it, a view (when ``GameInfo.view_type`` is set) or the outcome (when
    ``outcome_type`` is set) does not validate against its JSON Schema. Views and redacted
    events are checked at up to ``contract_samples`` causes of each playout (a spectator and
    one seat, in turn).
``invariant``
    the ``invariant`` hook raised ``AssertionError`` on the state after some event.
``undo``
    the game's ``undoable`` said an action of a playout may be taken back by consent although
    one of the events it caused is not the same for every viewer (``redact`` hides part of it
    from a seat or a spectator: a card drawn or dealt), or ``undoable`` raised, or taking it
    back (the host's own records) did not give back the state before it.
``describe``
    a text member the game has raised or returned something else than a string: ``describe``
    of a logged action, ``describe_event`` of an event as a spectator and one seat (in turn)
    received it, ``describe_outcome`` of the outcome; or ``describe_event`` wrote more than one
    line.
``text_leak``
    the text ``describe_event`` wrote of an event for a viewer names a card (``8S`` or ``8♠``)
    that ``redact`` hid from that viewer in that event (checked for a spectator and one seat, in
    turn, at every event of every playout). The host hands it only the redacted event, so a
    game leaks this way only if its text reads something besides its arguments.
``leak``
    the randomized no-leak property (hypothesis): replay a playout in a world where every card
    the viewer may not know is renamed by a random permutation (other hands, the stock order:
    what another seed could have dealt) and compare the viewer's bytes. The view, the ``turn``
    push (``to_act`` and the viewer's legal list) and the outcome may change only if they show
    a card the viewer's redacted events never told it; a redacted event may change only if it
    shows a card the viewer's views never showed. What the viewer may know is thus read from
    the game itself: views must not show what events did not tell, events must not tell what
    views never show. Cards are strings in the :mod:`plugins.cards` notation (``"10H"``); a card
    string an event shows every viewer but no view shows (Crazy Eights' starters turned back)
    is declared public with ``revealed``.

Bots: every playout is run twice over, by uniformly random legal actions
(:class:`~host.testing.bots.RandomLegal`) and, if the game has one, by its own ``bot_action``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import jsonschema
import orjson
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from host.game import ActionError, Rng, Viewer, tag_of
from host.plugins.codec import GameCodec
from host.plugins.contract import game_schema
from host.plugins.faults import GameFault
from host.table.engine import Engine, Record, SessionState
from host.table.local import roundtrip
from host.table.words import display_names
from host.testing.bots import RandomLegal

__all__ = [
    "CARD",
    "GameCheckFailed",
    "Playout",
    "cards_in_text",
    "check_game",
    "check_no_leak",
    "play",
]

CARD = re.compile(r"^(?:10|[2-9JQKA])[CDHS]$")
"""A card in wire notation (:mod:`plugins.cards`): the strings the no-leak property renames."""

TEXT_CARD = re.compile(
    r"(?<![0-9A-Za-z])(10|[2-9JQKA])([CDHS\u2663\u2666\u2665\u2660])(?![0-9A-Za-z])"
)
"""A card named in a text: ``8S``, ``10H``, or with its suit as a symbol, ``8♠``."""

_SYMBOL_SUITS = {"\u2663": "C", "\u2666": "D", "\u2665": "H", "\u2660": "S"}


def cards_in_text(text: str) -> set[str]:
    """Every card a text names, in wire notation: ``cards_in_text("Ann played 8♠") == {"8S"}``
    (a rank, then a suit letter or symbol, not inside a longer word)."""
    return {rank + _SYMBOL_SUITS.get(suit, suit) for rank, suit in TEXT_CARD.findall(text)}


Invariant = Callable[[Any], None]
"""An invariant hook: called with the game state after every event; raises ``AssertionError``
(with a message) when the state is impossible, e.g. cards or chips not conserved."""


class GameCheckFailed(AssertionError):
    """A property of the game contract does not hold.

    Attributes:
        fault: the fault's name (``leak``, ``legal_refused``, ``nondeterminism``, ... see the
            module docstring); the message starts with it.
    """

    def __init__(self, fault: str, message: str) -> None:
        super().__init__(f"{fault}: {message}")
        self.fault = fault


def _seed(n: int | bytes) -> bytes:
    return n if isinstance(n, bytes) else n.to_bytes(32, "big")


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


@attrs.frozen
class Playout:
    """One session played to its end by host bots.

    Attributes:
        game: the game as played (the game, or its :class:`RandomLegal` wrapper).
        seats: how many seats.
        seed: the session seed.
        bots: ``"random"`` (uniform legal actions) or ``"own"`` (the game's ``bot_action``).
        records: every log record, header first, ``ended`` last.
        state: the final session state.
    """

    game: Any
    seats: int
    seed: bytes
    bots: str
    records: tuple[Record, ...]
    state: SessionState

    def where(self, seq: int | None = None) -> str:
        at = "" if seq is None else f" at seq {seq}"
        return (
            f"(game {self.game.info.id!r}, {self.seats} seats, seed {self.seed.hex()[-8:]},"
            f" {self.bots} bots{at})"
        )


class _Checker:
    """The per-state checks of one game, with what it has seen so far (for sampling)."""

    def __init__(self, game: Any, invariant: Invariant | None, refusals: int) -> None:
        self.game = game
        self.codec = GameCodec(game)
        self.invariant = invariant
        self.refusals = refusals
        self.pool: dict[bytes, Any] = {}  # actions seen legal anywhere, by wire bytes
        self.actions = frozenset(game.info.action_types)
        self.events = frozenset(game.info.event_types)

    def fail(self, fault: str, what: str, where: str) -> GameCheckFailed:
        return GameCheckFailed(fault, f"{what} {where}")

    def wire(self, action: Any, where: str) -> bytes:
        if type(action) not in self.actions:
            raise self.fail(
                "unregistered_action",
                f"legal_actions listed {action!r}, a class the game did not register",
                where,
            )
        try:
            data = self.codec.action_to_wire(action)
            text = _dumps(data)
            back = self.codec.action_from_wire(orjson.loads(text))
        except Exception as exc:
            raise self.fail(
                "codec", f"the listed action {action!r} does not round-trip: {exc!r}", where
            ) from exc
        if back != action:
            raise self.fail("codec", f"the listed action {action!r} reads back as {back!r}", where)
        return text

    def decide(self, state: SessionState, seat: int, action: Any) -> bytes:
        """``decide``'s events as bytes; raises :class:`ActionError` as decide does."""
        events = list(self.game.decide(state.game, seat, action, Rng(state.seed, state.seq + 1)))
        for event in events:
            if type(event) not in self.events:
                raise GameCheckFailed(
                    "fault",
                    f"decide of {action!r} for seat {seat} returned the event {event!r}, of a"
                    f" class the game did not register (seq {state.seq + 1})",
                )
        return _dumps([self.codec.event_to_wire(e) for e in events])

    def state(self, playout_where: Callable[[int | None], str], state: SessionState) -> None:
        """Check the legal actions, refusals and view determinism at one running state."""
        game, seq = self.game, state.seq + 1
        where = playout_where(seq)
        waiting = tuple(game.to_act(state.game))
        for seat in range(len(state.seats)):
            legal = list(game.legal_actions(state.game, seat))
            if seat not in waiting:
                if legal:
                    raise self.fail(
                        "legal_not_to_act",
                        f"legal_actions lists {legal[:3]!r} for seat {seat}, which is not to act",
                        where,
                    )
                continue
            if not legal:
                raise self.fail(
                    "legal_not_to_act", f"seat {seat} is to act but has no legal action", where
                )
            listed = set()
            events = {}
            for action in legal:
                key = self.wire(action, where)
                listed.add(key)
                self.pool.setdefault(key, action)
                try:
                    events[key] = self.decide(state, seat, action)
                except ActionError as exc:
                    why = getattr(exc, "reason", exc.code)
                    raise self.fail(
                        "legal_refused",
                        f"decide refused {action!r} for seat {seat} ({why}: {exc})"
                        f" although legal_actions listed it",
                        where,
                    ) from exc
                except Exception as exc:
                    raise self.fail(
                        "fault", f"decide raised {exc!r} on the listed {action!r}", where
                    ) from exc
            # once per state: the same action decided again with the same Rng
            key = Rng(state.seed, state.seq, "kit-again").choice(sorted(events))
            again = self.codec.action_from_wire(orjson.loads(key))
            if self.decide(state, seat, again) != events[key]:
                raise self.fail(
                    "nondeterminism",
                    f"decide gave different events twice for {again!r} with the same Rng",
                    where,
                )
            self._refusals(state, seat, listed, where)
        for viewer in (None, *waiting):
            once = _dumps(self.codec.to_wire(game.view(state.game, viewer)))
            if once != _dumps(self.codec.to_wire(game.view(state.game, viewer))):
                raise self.fail(
                    "nondeterminism", f"view for viewer {viewer!r} differs between calls", where
                )

    def _refusals(self, state: SessionState, seat: int, listed: set[bytes], where: str) -> None:
        """Unlisted actions from the pool: decide may accept them (legal lists may be a subset)
        but may refuse only with an ActionError."""
        others = [k for k in self.pool if k not in listed]
        if not others:
            return
        rng = Rng(state.seed, state.seq, "kit")
        for _ in range(min(self.refusals, len(others))):
            action = self.pool[rng.choice(others)]
            try:
                self.decide(state, seat, action)
            except ActionError:
                continue
            except Exception as exc:
                raise self.fail(
                    "refusal_not_illegal_action",
                    f"decide raised {exc!r} on {action!r} for seat {seat} instead of an"
                    f" ActionError (IllegalAction)",
                    where,
                ) from exc


def play(
    game: Any,
    seats: int,
    seed: int | bytes,
    bots: str = "random",
    *,
    options: dict[str, Any] | None = None,
    max_actions: int = 20_000,
    checker: _Checker | None = None,
) -> Playout:
    """Play one session with host bots in every seat, checking each state with ``checker``.

    Args:
        game: the game object.
        seats: how many seats.
        seed: the session seed (an int is written as 32 big-endian bytes).
        bots: ``"random"`` or ``"own"`` (see :class:`Playout`).
        options: the ``create`` options (wire form).
        max_actions: the bot-action budget.

    Raises:
        GameCheckFailed: ``fault`` (the engine's :class:`GameFault`), ``did_not_end``, or what
            ``checker`` found.
    """
    played = RandomLegal(game) if bots == "random" else game
    engine = Engine(played)
    seed = _seed(seed)
    where = Playout(played, seats, seed, bots, (), None).where  # type: ignore[arg-type]
    try:
        opts = engine.codec.options_from_wire(options or {}, seats)
        check_options = getattr(game, "check_options", None)
        if check_options is not None:
            check_options(opts, seats)
        records = [engine.header("kit", opts, seats, range(seats), seed)]
        state = engine.initial(records[0])
        for seat in range(seats):
            new, state = engine.seat_step(state, seat, f"bot{seat}", True, None)
            records += new
        for _ in range(max_actions):
            seat = engine.bot_seat(state)
            if seat is None:
                break
            if checker is not None:
                try:
                    checker.state(where, state)
                except GameCheckFailed:
                    raise
                except Exception as exc:  # to_act, legal_actions, view or the codec raised
                    raise GameCheckFailed(
                        "fault", f"checking the state raised {exc!r} {where(state.seq + 1)}"
                    ) from exc
            new, state = engine.bot_step(state, seat)
            records += new
    except GameFault as exc:
        raise GameCheckFailed("fault", f"{exc} {where(exc.seq)}") from exc
    if not state.ended:
        raise GameCheckFailed("did_not_end", f"no outcome after {max_actions} actions {where()}")
    return Playout(played, seats, seed, bots, tuple(records), state)


def _check_registration(game: Any) -> None:
    info = game.info
    for kind, classes in (("action", info.action_types), ("event", info.event_types)):
        tags: dict[str, type] = {}
        for cls in classes:
            if not attrs.has(cls):
                raise GameCheckFailed("registration", f"the {kind} {cls!r} is not an attrs class")
            tag = tag_of(cls)
            if tag in tags:
                raise GameCheckFailed(
                    "registration", f"{kind}s {tags[tag]!r} and {cls!r} share the tag {tag!r}"
                )
            tags[tag] = cls
    try:
        GameCodec(game)
    except Exception as exc:
        raise GameCheckFailed("registration", f"the codec cannot be built: {exc!r}") from exc


def _check_log(playout: Playout, invariant: Invariant | None, again: Playout) -> None:
    """Determinism (``again`` is the same playout run a second time), replay verification and
    the invariant on every event's state."""
    one = [_dumps(r.to_json()) for r in playout.records]
    two = [_dumps(r.to_json()) for r in again.records]
    if one != two:
        at = next((i for i, (a, b) in enumerate(zip(one, two, strict=False)) if a != b), None)
        if at is None:
            at = min(len(one), len(two))
            text = f"one log has {len(one)} records, the other {len(two)}"
        else:
            text = f"{one[at].decode()} then {two[at].decode()}"
        raise GameCheckFailed(
            "nondeterminism",
            f"two playouts with the same seed and bots wrote different logs: {text}"
            f" {playout.where(at)} (use the Rng handed to start/decide, never random)",
        )
    engine = Engine(playout.game)
    problem = engine.verify(roundtrip(list(playout.records)))
    if problem is not None:
        seq, why = problem
        raise GameCheckFailed(
            "replay",
            f"replay --verify rejects the log: {why} {playout.where(seq)} (a game that re-run"
            " on its own log produces other events uses something besides its Rng and its"
            " state: random, a clock, a set's order, a module-level variable)",
        )
    if invariant is None:
        return
    state = engine.initial(playout.records[0])
    for rec in playout.records[1:]:
        state = engine.apply(state, rec)
        if rec.type != "event":
            continue
        try:
            invariant(state.game)
        except AssertionError as exc:
            raise GameCheckFailed(
                "invariant",
                f"after the event {rec.data['event']!r}: {exc} {playout.where(rec.seq)}",
            ) from exc


def _validator(schema: dict[str, Any] | None) -> jsonschema.Draft202012Validator | None:
    return None if schema is None else jsonschema.Draft202012Validator(schema)


def _check_contract(playout: Playout, samples: int) -> None:
    """Every action, logged event and outcome of the playout, and at up to ``samples`` causes the
    view and redacted events of the spectator and of one seat (in turn), validate against the
    published schema (jsonschema is slow: a few milliseconds a value)."""
    try:
        schema = game_schema(playout.game)
    except Exception as exc:
        raise GameCheckFailed(
            "contract", f"gamehost schema cannot describe the game: {exc!r}"
        ) from exc
    action = _validator(schema["action"])
    events = {role: _validator(schema["event"][role]) for role in ("seat", "spectator", "log")}
    views = {role: _validator((schema["view"] or {}).get(role)) for role in ("seat", "spectator")}
    outcome = _validator(schema["outcome"])

    def check(v: jsonschema.Draft202012Validator | None, value: Any, what: str, seq: int) -> None:
        if v is None:
            return
        error = next(iter(v.iter_errors(value)), None)
        if error is not None:
            path = "/".join(map(str, error.absolute_path)) or "(the value)"
            raise GameCheckFailed(
                "contract",
                f"{what} breaks its published schema at {path}: {error.message}"
                f" {playout.where(seq)}",
            )

    engine = Engine(playout.game)
    causes = _causes(playout.records)
    stride = max(1, len(causes) // max(1, samples))
    state = engine.initial(playout.records[0])
    for i, cause in enumerate(causes):
        sampled = i % stride == 0
        # a spectator and one seat per sampled cause, the seat going round the table
        viewers: tuple[Viewer, ...] = (None, (i // stride) % playout.seats)
        for rec in cause:
            state = engine.apply(state, rec)
            if rec.type == "action":
                check(action, rec.data["action"], "the action", rec.seq)
            elif rec.type == "event":
                check(events["log"], rec.data["event"], "the logged event", rec.seq)
                for viewer in viewers if sampled else ():
                    role = "spectator" if viewer is None else "seat"
                    wire = orjson.loads(_dumps(engine.redacted_wire(rec, viewer)))
                    check(events[role], wire, f"the event as viewer {viewer!r} gets it", rec.seq)
            elif rec.type == "ended" and rec.data.get("outcome") is not None:
                check(outcome, rec.data["outcome"], "the outcome", rec.seq)
        for viewer in viewers if sampled and state.started else ():
            role = "spectator" if viewer is None else "seat"
            wire = orjson.loads(_dumps(engine.view_wire(state, viewer)))
            check(views[role], wire, f"the view of viewer {viewer!r}", state.seq)


def _check_words(playout: Playout) -> None:
    """The game's text members (``describe``, ``describe_event``, ``describe_outcome``), as the
    host and the clients call them, on every record of the playout: strings, one line for an
    event, and no card the viewer's redacted event hid (``describe`` and ``text_leak`` in the
    module docstring). Events are told to a spectator and one seat, going round the table."""
    game = playout.game
    describe = getattr(game, "describe", None)
    describe_event = getattr(game, "describe_event", None)
    describe_outcome = getattr(game, "describe_outcome", None)
    if describe is None and describe_event is None and describe_outcome is None:
        return
    seats = [r.data["name"] for r in playout.records if r.type == "seat_taken"]
    names = display_names(seats)
    engine = Engine(game)

    def said(what: str, call: Callable[[], Any], seq: int) -> str:
        try:
            text = call()
        except Exception as exc:
            raise GameCheckFailed(
                "describe", f"{what} raised {exc!r} {playout.where(seq)}"
            ) from exc
        if not isinstance(text, str):
            raise GameCheckFailed(
                "describe", f"{what} returned {text!r}, not a string {playout.where(seq)}"
            )
        return text

    turn = 0
    for rec in playout.records:
        if rec.type == "action" and describe is not None:
            action = orjson.loads(_dumps(rec.data["action"]))
            said(f"describe({action!r})", lambda a=action: describe(a), rec.seq)
        elif rec.type == "ended" and describe_outcome is not None:
            outcome = orjson.loads(_dumps(rec.data.get("outcome")))
            if outcome is not None:
                what = f"describe_outcome({outcome!r})"
                said(what, lambda o=outcome: describe_outcome(o, names), rec.seq)
        elif rec.type == "event" and describe_event is not None:
            turn += 1
            full = _cards(rec.data["event"], set())
            for viewer in (None, turn % playout.seats):
                event = orjson.loads(_dumps(engine.redacted_wire(rec, viewer)))
                what = f"describe_event({event!r}, viewer {viewer!r})"
                text = said(what, lambda e=event, v=viewer: describe_event(e, v, names), rec.seq)
                if "\n" in text:
                    raise GameCheckFailed(
                        "describe",
                        f"{what} wrote more than one line: {text!r} {playout.where(rec.seq)}",
                    )
                hidden = cards_in_text(text) & (full - _cards(event, set()))
                if hidden:
                    raise GameCheckFailed(
                        "text_leak",
                        f"{what} wrote {text!r}, naming {sorted(hidden)}, which redact hid from"
                        f" that viewer {playout.where(rec.seq)}",
                    )


# -- the no-leak property ---------------------------------------------------------------------


def _cards(value: Any, out: set[str]) -> set[str]:
    """Every card string inside a JSON value (added to ``out``)."""
    if isinstance(value, str):
        if CARD.match(value):
            out.add(value)
    elif isinstance(value, dict):
        for v in value.values():
            _cards(v, out)
    elif isinstance(value, list | tuple):
        for v in value:
            _cards(v, out)
    return out


def _rename(value: Any, sigma: dict[str, str]) -> Any:
    if isinstance(value, str):
        return sigma.get(value, value)
    if isinstance(value, dict):
        return {k: _rename(v, sigma) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, sigma) for v in value]
    return value


def _causes(records: Sequence[Record]) -> list[list[Record]]:
    """The records after the header grouped by cause (a seat taken or an action, then the
    events and ``ended`` it produced): what a client receives together."""
    out: list[list[Record]] = []
    for rec in records[1:]:
        if rec.type in ("seat_taken", "action") or not out:
            out.append([rec])
        else:
            out[-1].append(rec)
    return out


@attrs.frozen
class _Seen:
    """One viewer's bytes after one cause."""

    events: tuple[bytes, ...]  # the redacted events
    state: bytes  # view, to_act, the viewer's legal list, the outcome
    heard: frozenset[str]  # cards in the redacted events, public actions and outcome
    shown: frozenset[str]  # cards in the view, public actions and outcome


def _trace(
    engine: Engine,
    causes: list[list[Record]],
    header: Record,
    viewer: Viewer,
    upto: int,
    sigma: dict[str, str] | None,
    revealed: Callable[[Any], Iterable[str]] | None,
) -> list[_Seen]:
    """The viewer's bytes after each of the first ``upto + 1`` causes, in the world where the
    events' cards are renamed by ``sigma``."""
    game, codec = engine.game, engine.codec
    state = engine.initial(header)
    out = []
    for cause in causes[: upto + 1]:
        events, public = [], set()
        for rec in cause:
            if rec.type == "event":
                data = rec.data if sigma is None else _rename(rec.data, sigma)
                rec = Record(rec.seq, "event", data)
                state = engine.apply(state, rec)
                events.append(engine.redacted_wire(rec, viewer))
                if revealed is not None:
                    public.update(revealed(codec.event_from_wire(data["event"], data.get("v"))))
            else:
                state = engine.apply(state, rec)
                if rec.type == "action":
                    _cards(rec.data["action"], public)
        view = engine.view_wire(state, viewer)
        waiting = engine.to_act(state)
        legal = (
            [codec.action_to_wire(a) for a in game.legal_actions(state.game, viewer)]
            if viewer in waiting
            else None
        )
        outcome = codec.to_wire(game.outcome(state.game)) if state.started else None
        _cards(outcome, public)
        out.append(
            _Seen(
                tuple(_dumps(e) for e in events),
                _dumps({"view": view, "to_act": list(waiting), "legal": legal, "outcome": outcome}),
                frozenset(_cards(events, set(public))),
                frozenset(_cards(view, set(public))),
            )
        )
    return out


def check_no_leak(
    playout: Playout,
    viewer: Viewer,
    upto: int,
    shuffle: Callable[[list[str]], list[str]],
    revealed: Callable[[Any], Iterable[str]] | None = None,
) -> None:
    """One example of the no-leak property (see the module docstring, ``leak``).

    Args:
        playout: a finished playout.
        viewer: the seat (or ``None``, a spectator) whose bytes are compared.
        upto: the index of the last cause to compare (causes are counted after the header).
        shuffle: returns a permutation of the list it is given (the renaming of unknown cards).
        revealed: cards an event shows every viewer though no view needs to (declared public).

    Raises:
        GameCheckFailed: ``leak``, naming the cause's seq, the viewer and the two byte strings.
    """
    engine = Engine(playout.game)
    causes = _causes(playout.records)
    upto = min(upto, len(causes) - 1)
    header = playout.records[0]
    try:
        real = _trace(engine, causes, header, viewer, upto, None, revealed)
    except GameFault as exc:  # view or redact raised, or wrote what the codec cannot
        raise GameCheckFailed("fault", f"{exc} {playout.where(exc.seq)}") from exc
    every: set[str] = set()
    for cause in causes:
        for rec in cause:
            if rec.type == "event":
                _cards(rec.data["event"], every)
    heard, shown = set(), set()
    for seen in real:
        heard |= seen.heard
        shown |= seen.shown
    for known, part in ((heard, "state"), (shown, "events")):
        unknown = sorted(every - known)
        if len(unknown) < 2:
            continue
        sigma = dict(zip(unknown, shuffle(list(unknown)), strict=True))
        if all(a == b for a, b in sigma.items()):
            continue
        try:
            other = _trace(engine, causes, header, viewer, upto, sigma, revealed)
        except Exception as exc:  # noqa: BLE001 - reported with the renaming that caused it
            raise GameCheckFailed(
                "leak",
                f"viewer {viewer!r}: replaying with the cards it may not know renamed raised"
                f" {exc!r} (does evolve, view or redact depend on a hidden card's identity?)"
                f" {playout.where()}",
            ) from exc
        for i, (a, b) in enumerate(zip(real, other, strict=True)):
            mine, theirs = (a.state, b.state) if part == "state" else (a.events, b.events)
            if mine != theirs:
                what = (
                    "the view, turn push or outcome shows a card its redacted events never told"
                    if part == "state"
                    else "a redacted event tells a card that no view of the viewer ever shows"
                )
                raise GameCheckFailed(
                    "leak",
                    f"viewer {viewer!r}: {what}; renaming the cards it may not know"
                    f" ({len(unknown)} of them) changes its bytes from {_show(mine)} to"
                    f" {_show(theirs)} {playout.where(causes[i][0].seq)}",
                )


def _check_undo(game: Any, playout: Playout) -> None:
    """``undo`` (see the module docstring): at every action of the playout that the game's
    ``undoable`` lets be taken back, each event it caused is the same for every viewer, and the
    host's undo records give back the state before it. Nothing to check without ``undoable``."""
    if getattr(game, "undoable", None) is None:
        return
    engine = Engine(game)
    records = list(playout.records)
    state = engine.initial(records[0])
    viewers = (None, *range(playout.seats))
    for cause in _causes(records):
        before = state
        state = engine.apply_all(state, cause)
        if cause[0].type != "action" or state.ended:
            continue
        seq = cause[0].seq
        seat = cause[0].data["seat"]
        try:
            refused = engine.undo_refusal(state, seat)
        except GameFault as exc:
            raise GameCheckFailed("undo", f"{exc} {playout.where(seq)}") from exc
        if refused is not None:
            continue
        for rec in cause[1:]:
            shown = {repr(v): engine.redacted_wire(rec, v) for v in viewers}
            if any(x != rec.data["event"] for x in shown.values()):
                raise GameCheckFailed(
                    "undo",
                    f"undoable lets {cause[0].data['action']!r} be taken back, but its event"
                    f" {rec.data['event']!r} is shown otherwise to some viewers: {shown!r}"
                    f" {playout.where(rec.seq)}",
                )
        undone = engine.ask_undo(state, seat)[1]
        if undone.game != before.game:
            raise GameCheckFailed(
                "undo", f"taking back the action did not restore the state {playout.where(seq)}"
            )


def _show(value: bytes | tuple[bytes, ...]) -> str:
    text = value.decode() if isinstance(value, bytes) else b" ".join(value).decode()
    return text if len(text) < 600 else text[:600] + "..."


def check_game(
    game: Any,
    *,
    seeds: Iterable[int | bytes] = range(3),
    seat_counts: Iterable[int] | None = None,
    options: dict[str, Any] | None = None,
    max_actions: int = 20_000,
    invariant: Invariant | None = None,
    revealed: Callable[[Any], Iterable[str]] | None = None,
    leak_examples: int = 25,
    refusals: int = 3,
    contract_samples: int = 30,
) -> list[Playout]:
    """Check ``game`` against the contract by playing it (see the module docstring).

    Args:
        game: the game object (what the plugin's ``gamehost_register_games`` returns).
        seeds: the seeds of the checked playouts; each seat count is played with each seed,
            by random legal actions and by the game's own bot (if it has one).
        seat_counts: the seat counts to play (default: the game's smallest and largest).
        options: the ``create`` options (wire form) of every playout.
        max_actions: the bot-action budget of one playout (a bound on its length).
        invariant: called with the game state after every event; raises ``AssertionError``
            for an impossible state (cards or chips not conserved, ...).
        revealed: ``event -> card strings`` an event shows every viewer although no view need
            show them (see ``leak`` in the module docstring).
        leak_examples: hypothesis examples of the no-leak property (0 skips it).
        contract_samples: causes per playout whose views and redacted events are validated
            against the published schema (actions, logged events and outcomes: all of them).
        refusals: unlisted actions tried on ``decide`` at each state.

    Returns:
        The checked playouts (for further checks of the caller's own).

    Raises:
        GameCheckFailed: the first property that does not hold; its ``fault`` names it.
    """
    _check_registration(game)
    info = game.info
    counts = sorted(set(seat_counts or (info.min_seats, info.max_seats)))
    kinds = ["random"] + (["own"] if getattr(game, "bot_action", None) is not None else [])
    checker = _Checker(game, invariant, refusals)
    playouts = []
    for seed in seeds:
        for n in counts:
            for bots in kinds:
                run = dict(options=options, max_actions=max_actions)
                playout = play(game, n, seed, bots, checker=checker, **run)  # type: ignore[arg-type]
                _check_log(playout, invariant, play(game, n, seed, bots, **run))  # type: ignore[arg-type]
                _check_contract(playout, contract_samples)
                _check_words(playout)
                _check_undo(game, playout)
                playouts.append(playout)
    if leak_examples > 0:
        _leak_property(playouts, revealed, leak_examples)
    return playouts


def _leak_property(
    playouts: list[Playout], revealed: Callable[[Any], Iterable[str]] | None, examples: int
) -> None:
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=(Phase.explicit, Phase.generate),  # no shrinking: the message names the cause
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def property_(data: st.DataObject) -> None:
        playout = data.draw(st.sampled_from(playouts), label="playout")
        viewer = data.draw(st.sampled_from([None, *range(playout.seats)]), label="viewer")
        causes = len(_causes(playout.records))
        upto = data.draw(st.integers(0, causes - 1), label="last cause")
        check_no_leak(playout, viewer, upto, lambda xs: data.draw(st.permutations(xs)), revealed)

    property_()
