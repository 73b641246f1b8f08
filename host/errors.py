"""The host's error family: one base class, one subclass per kind of fault, each knowing its reply.

Every error the host (or a game) raises on purpose to refuse something is a
:class:`GamehostError`. Each one knows its error reply — :meth:`GamehostError.reply` gives the
wire error code (see PROTOCOL.md), a message for the client and the code's extra fields — so
the host turns any of them into a reply in one place (``host.plugins.faults.refusal``, which
makes the ``protocol.replies.Refused`` the connection encodes) instead of matching strings or
exception
types command by command. The reply never holds more than a client may read: ``str()`` may say more
(a log's file path, for instance), for the host log and the operator.

==========================================  ===================
======================================
class                                       wire code            raised for
==========================================  ===================
======================================
``GamehostError``                           ``internal``         (the base; not raised on its own)
``LogError``                                ``unavailable``      a log that cannot be used now
``host.store.base.Conflict``                ``unavailable``      an append expecting another seq, a
                                                                 create of an existing session
``host.store.base.StoreClosed``             ``unavailable``      an append after the store closed
``host.store.base.CorruptLog``              ``session_damaged``  a log that cannot be read as a
session
``host.table.engine.BadRecord``             ``session_damaged``  a record that does not fold
``host.store.base.UnknownSession``          ``unknown_session``  no log of that session
``BadSessionId``                            ``unknown_session``  a name that cannot be a session id
``BadHeader``                               ``internal``         a ``create`` without a valid header
``SeatError``                               ``bad_request``      a seat that does not exist
``SeatTaken``                               ``session_full``     a seat that is taken (with
``free``)
``ActionError``                             ``bad_action``       a malformed action
``host.plugins.codec.BadAction``            ``bad_action``       an action object of no action's
shape
``IllegalAction``                           ``illegal_action``   a rule refuses the action now (with
                                            / ``not_your_turn``  ``reason``; ``not_your_turn`` is
                                            its
                                                                 own code)
``OptionError``                             ``bad_option``       a session option value (with
                                                                 ``option``)
``UndoRefused``                             ``cannot_undo``      an ``undo`` or ``undo_answer``
                                                                 refused (with ``reason``)
==========================================  ===================
======================================

Games raise two of them: :class:`ActionError` (usually :class:`IllegalAction`) from ``decide``,
and :class:`OptionError` from ``check_options``; the host answers both as typed refusals. Any
other exception from game code — a built-in one, or another member of this family such as a
:class:`LogError` — is a game fault (``host.plugins.faults.GameFault``), as the engine's guards
decide.

``ValueError`` compatibility: a class that replaces a ``ValueError`` the host raised before is
still one (:class:`OptionError`, :class:`SeatError`, :class:`BadSessionId`, :class:`BadHeader`,
``BadAction``, ``BadRecord``), and ``UnknownSession`` is still a ``LookupError``, so a plugin's or
tool's ``except ValueError`` catches what it caught before. The base, :class:`LogError`,
:class:`ActionError` and :class:`IllegalAction` are not, so such an ``except`` never starts
catching a refusal it did not catch before.

This module imports nothing but the standard library: a game reaches it through ``host.game``
at no cost, and it does no I/O.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "NOT_YOUR_TURN",
    "ActionError",
    "BadHeader",
    "BadSessionId",
    "GamehostError",
    "IllegalAction",
    "LogError",
    "OptionError",
    "SeatError",
    "SeatTaken",
    "UndoRefused",
]

NOT_YOUR_TURN = "not_your_turn"
"""The :attr:`IllegalAction.reason` for an action from a seat that is not in ``to_act``."""


class GamehostError(Exception):
    """A refusal the host answers with a typed error; raising one changes nothing.

    Args:
        message: what is refused and why, in words.
        extra: the extra fields of the error reply, as PROTOCOL.md lists them for :attr:`code`.

    Attributes:
        code: the wire error code (a ``protocol.messages.ErrorCode`` value), per class.
        message, extra: as given.
    """

    code: ClassVar[str] = "internal"

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra

    def reply(self) -> tuple[str, str, dict[str, Any]]:
        """The error reply: ``(code, message, extra fields)``; the message is sent as is, so it
        names no file path or secret. An ``id`` extra is dropped: it cannot redirect the reply."""
        return self.code, self.message, {k: v for k, v in self.extra.items() if k != "id"}


# -- the event log -------------------------------------------------------------------------------
class LogError(GamehostError):
    """A session's log cannot be used for this request (store and log faults).

    The base means "not now" (``unavailable``: retry); subclasses name lasting faults.
    """

    code: ClassVar[str] = "unavailable"


class BadSessionId(LogError, ValueError):
    """A name that cannot be a session id (``[A-Za-z0-9_-]{1,64}``): there is no such session."""

    code: ClassVar[str] = "unknown_session"


class BadHeader(LogError, ValueError):
    """A ``create`` given no records, or a first record that is not a valid header (a host or
    tool bug: clients never send headers)."""

    code: ClassVar[str] = "internal"


# -- seats ---------------------------------------------------------------------------------------
class SeatError(GamehostError, ValueError):
    """A seat that cannot be taken: it does not exist."""

    code: ClassVar[str] = "bad_request"


class SeatTaken(SeatError):
    """A seat that is taken.

    Args:
        message: for the client.
        free: the free seats now (the ``session_full`` reply's ``free``).
    """

    code: ClassVar[str] = "session_full"

    def __init__(self, message: str, free: list[int]) -> None:
        super().__init__(message, free=list(free))
        self.free = list(free)


# -- actions -------------------------------------------------------------------------------------
class ActionError(GamehostError):
    """An action the host refuses: malformed (this class, ``bad_action``) or against the rules
    (:class:`IllegalAction`). A game's ``decide`` may raise any subclass: it changes nothing."""

    code: ClassVar[str] = "bad_action"


class IllegalAction(ActionError):
    """An action the rules do not allow now. It changes nothing.

    Args:
        reason: a stable snake_case code a client can branch on, e.g. ``"not_your_turn"``,
            ``"card_not_in_hand"``, ``"suit_required"``. The host answers ``not_your_turn`` as
            its own wire error code and every other reason as ``illegal_action`` with ``reason``.
        message: a sentence for people, naming the rule (and its spec section where useful).
    """

    code: str  # per instance: it depends on the reason

    def __init__(self, reason: str, message: str) -> None:
        if reason == NOT_YOUR_TURN:
            super().__init__(message)
            self.code = NOT_YOUR_TURN
        else:
            super().__init__(message, reason=reason)
            self.code = "illegal_action"
        self.reason = reason


# -- options -------------------------------------------------------------------------------------
class OptionError(GamehostError, ValueError):
    """A session option value that is not allowed (raised by the codec and ``check_options``).

    Args:
        option: the option's name, e.g. ``"draw_limit"``.
        message: why the value is refused.

    ``str()`` is ``"<option>: <message>"``, which is also the reply's message.
    """

    code: ClassVar[str] = "bad_option"

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}", option=option)
        self.option = option
        self.message = message

    def reply(self) -> tuple[str, str, dict[str, Any]]:
        """``("bad_option", "<option>: <message>", {"option": option})``."""
        return self.code, str(self), {"option": self.option}


# -- undo ----------------------------------------------------------------------------------------
class UndoRefused(GamehostError):
    """A request to take back an action (``undo``), or an answer to one (``undo_answer``), that
    cannot be granted now. It changes nothing.

    Args:
        reason: a stable snake_case code (PROTOCOL.md, "Undo by consent"): ``nothing_to_undo``,
            ``acted_since``, ``timed_out``, ``not_undoable``, ``pending``, ``no_request`` or
            ``not_asked``.
        message: a sentence for people.
    """

    code: ClassVar[str] = "cannot_undo"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, reason=reason)
        self.reason = reason
