"""Game plugins are third-party code: the host's two guards against them.

:class:`GameFault` is what :class:`host.table.engine.Engine` raises when a game's own code
misbehaves (raises, refuses an action its bot chose, returns an event it never registered or that
does not
survive its codec). What the host does with one depends on who drove the step: a client's
command fails (``internal``, nothing appended); a step the host drives itself (a bot move,
a turn timer) ends the session as ``aborted: "game_error"``.

:func:`notify_isolated` calls the observer hooks (``gamehost_event_appended`` and friends) one
implementation at a time, so one that raises is logged and changes nothing else: the other
observers still run, and the change they observe stays committed, replied to and pushed.

:func:`refusal` is where a command's typed error becomes its error reply: a ``ProtocolError``
or a member of the error family (``host.errors``), each of which knows its reply.
"""

from __future__ import annotations

from typing import Any

import pluggy
import structlog

from host.errors import GamehostError
from host.plugins.budget import BudgetExceeded
from protocol.messages import ProtocolError
from protocol.replies import Refused

__all__ = ["GameFault", "game_error", "host_exception", "notify_isolated", "refusal"]

log = structlog.get_logger("gamehost.faults")


class GameFault(Exception):
    """The game plugin misbehaved; nothing it produced in the failing step may be appended.

    The original exception (if any) is chained as ``__cause__``.

    Args:
        message: what went wrong, naming the game id, the seq of the step and the game member
            at fault (``decide``, ``evolve``, an event type, ...).
        seq: the seq of the record being produced when the game faulted, if known.
    """

    def __init__(self, message: str, seq: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.seq = seq


def host_exception(exc: BaseException) -> bool:
    """Whether ``exc``, raised out of game code, is the host's own and must go on up: the
    budget's interruption (:class:`~host.plugins.budget.BudgetExceeded`) or a cancellation of
    trio's (game code is synchronous: it cannot be cancelled itself, but a host that embeds the
    engine may be). Anything else is the game's fault."""
    return isinstance(exc, BudgetExceeded) or type(exc).__module__.partition(".")[0] == "trio"


def game_error(exc: BaseException) -> BaseException:
    """``exc`` itself when it is the game's fault (see :func:`host_exception`), for a guard to
    turn into a :class:`GameFault` (or a ``BadRecord``); the host's own exception is raised
    again instead. Use in ``except BaseException as exc:`` around a call into a game.

    Raises:
        BudgetExceeded, trio.Cancelled: ``exc`` itself, when it is one of those.
    """
    if host_exception(exc):
        raise exc
    return exc


def notify_isolated(caller: pluggy.HookCaller, **kwargs: Any) -> int:
    """Call every implementation of an observer hook on its own, in pluggy's order.

    An implementation that raises is logged (``observer_failed`` with the hook and plugin name
    and the traceback) and the next one is called anyway; nothing is raised to the caller.
    Hook wrappers are skipped: an observer has nothing to wrap.

    Args:
        caller: the hook, e.g. ``registry.hook.gamehost_event_appended``.
        kwargs: the hook's arguments by name (each implementation gets those it asks for).

    Returns:
        How many implementations raised (the host counts them as plugin faults).
    """
    failed = 0
    for impl in reversed(caller.get_hookimpls()):  # pluggy calls the last registered first
        if impl.hookwrapper or impl.wrapper:
            continue
        try:
            impl.function(**{name: kwargs[name] for name in impl.argnames})
        except BaseException as exc:  # SystemExit from an observer too: logged, never the host's
            game_error(exc)
            failed += 1
            log.exception("observer_failed", hook=caller.name, plugin=impl.plugin_name)
    return failed


def refusal(exc: ProtocolError | GamehostError) -> Refused:
    """The typed refusal for a command's typed error (``exc.reply()``): the one place the host
    maps its errors to wire errors. A family member that answers ``internal`` (``BadHeader``: the
    host made a bad header) is a host bug, so it is logged with its traceback first
    (``internal_error``).
    """
    if isinstance(exc, GamehostError) and exc.code == "internal":
        log.error("internal_error", error=str(exc), exc_info=exc)
    return Refused.of(exc)
