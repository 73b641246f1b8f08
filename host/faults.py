"""Stand-ins for the plugin-fault names the session uses (to be reconciled with the engine's and
the registry's own definitions): :class:`GameFault` and :func:`notify_isolated`.
"""

from __future__ import annotations

from typing import Any

import structlog

__all__ = ["GameFault", "notify_isolated"]

log = structlog.get_logger("gamehost.faults")


class GameFault(Exception):
    """A game plugin misbehaved: its code raised something other than ``IllegalAction``, or it
    produced an action or event its codec cannot encode and decode again."""


def notify_isolated(caller: Any, **kwargs: Any) -> None:
    """Call every implementation of a pluggy hook on its own: one that raises is logged
    (``observer_failed``, with its traceback) and the others still run. Never raises."""
    for impl in caller.get_hookimpls():
        try:
            impl.function(**{k: kwargs[k] for k in impl.argnames})
        except Exception:
            log.exception("observer_failed", hook=caller.name, plugin=impl.plugin_name)
