"""The commands a session takes from connections (frozen, typed, no wire format).

A connection turns a parsed request into one of these and submits it with the requester and the
request id (:meth:`host.net.session.Session.submit`); the session's table core decides it
(:meth:`host.table.core.Table.command`, whose handlers document the outcomes and the pushes
around them) and its driver answers a typed outcome from :mod:`protocol.replies` (a result, or
:class:`protocol.replies.Refused`), which only the connection encodes."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = [
    "Act",
    "Command",
    "End",
    "Join",
    "Leave",
    "Resume",
    "Undo",
    "UndoAnswer",
    "View",
    "Watch",
]


@attrs.frozen
class Join:
    """Take a seat: ``seat`` (None: the lowest free one) under ``name`` (already cleaned: at
    most 64 printable characters); ``view``: a ``view`` push after every change; ``text``:
    event and ``ended`` pushes carry their text (:mod:`host.table.words`). Answered
    :class:`protocol.replies.Joined`."""

    name: str
    seat: int | None = None
    view: bool = False
    text: bool = False


@attrs.frozen
class Watch:
    """Watch as a spectator (``view``: a ``view`` push after every change; ``text``: event
    and ``ended`` pushes carry their text). Answered :class:`protocol.replies.Watching`."""

    view: bool = False
    text: bool = False


@attrs.frozen
class Resume:
    """Take back the seat ``token`` holds; push the records after seq ``after`` first (None:
    none). Answered :class:`protocol.replies.Resumed`."""

    token: str
    after: int | None = None
    view: bool = False
    text: bool = False


@attrs.frozen
class View:
    """The snapshot for the role held. Answered :class:`protocol.replies.ViewReply`."""


@attrs.frozen
class Act:
    """Play ``action`` (its wire object) from the seat held, if the session is still at seq
    ``expected`` (None: whatever it is). Answered :class:`protocol.replies.Accepted`."""

    action: Any
    expected: int | None = None


@attrs.frozen
class Undo:
    """Ask to take back the last action of the seat held (the other human seats must agree).
    Answered :class:`protocol.replies.UndoResult`."""


@attrs.frozen
class UndoAnswer:
    """Answer the request to take back an action that waits for the seat held: ``accept`` it
    or refuse it. Answered :class:`protocol.replies.UndoResult`."""

    accept: bool


@attrs.frozen
class Leave:
    """Stop playing or watching. Answered :class:`protocol.replies.Left`."""


@attrs.frozen
class End:
    """End the session now, as the host's operator (no wire request makes this: the admin view
    of ``host.net.web`` does): an ``ended`` record with ``outcome`` null and ``aborted`` =
    ``reason``. Answered :class:`protocol.replies.Accepted` with the ``ended`` record's seq."""

    reason: str = "admin"


Command = Join | Watch | Resume | View | Act | Undo | UndoAnswer | Leave | End
"""Everything a session's mailbox carries (with the requester and the request id)."""
