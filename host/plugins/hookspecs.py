"""The host's hook specifications. Every hook name starts with ``gamehost_``.

Hooks are synchronous (pluggy has no async hooks): they return objects, the host awaits.
A plugin implements some of them with :data:`host.game.hookimpl` and is registered through the
``gamehost`` entry-point group, e.g. in its ``pyproject.toml``::

    [project.entry-points.gamehost]
    my-game = "my_package.my_game"

The observer hooks (``gamehost_session_created``, ``gamehost_event_appended``,
``gamehost_session_ended``) are told of a change only after it is durable, answered and pushed
to every subscriber, and each implementation is called on its own
(:func:`host.plugins.faults.notify_isolated`): one that raises is logged as ``observer_failed``
with its plugin's name and changes nothing, neither the change nor what the other observers see.
Their
return values are ignored.
"""

from __future__ import annotations

from typing import Any

from host.game import Game, hookspec


@hookspec
def gamehost_register_games() -> list[Game]:
    """Return the games this plugin offers (each a :class:`host.game.Game`).

    Called once when the registry loads; game ids must be unique across plugins.
    """


@hookspec
def gamehost_session_created(session: str, game: str, header: dict[str, Any]) -> None:
    """Observe a new session: its id, game id and header record data (holds the secret seed)."""


@hookspec
def gamehost_event_appended(session: str, record: dict[str, Any]) -> None:
    """Observe a record once it is durable in the log (full truth: hands included).

    Called after the command's reply and the pushes. Must not block: it runs inside the
    session's task.
    """


@hookspec
def gamehost_session_ended(session: str, outcome: Any) -> None:
    """Observe the end of a session with its outcome (wire form)."""
