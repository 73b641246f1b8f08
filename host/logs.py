"""structlog set-up: JSON lines when stderr is not a terminal, a readable console when it is.

Every line carries the context bound in its task (``peer``, ``session``, ``seat``) through
``structlog.contextvars``, and the fields given to :func:`configure` as ``fields`` (a worker of
``serve --workers`` gives its index, ``worker``).

``serve --workers`` writes one format on one terminal: the supervisor decides (its own stderr
is the terminal, the workers' is a pipe to it) and passes its choice to the workers
(``--log-format``), and its colours with :data:`COLOR_ENV`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any

import structlog


class StderrLogger:
    """Writes each line to the process's *current* ``sys.stderr``, found at each write.

    structlog's ``PrintLogger`` keeps the file it was made with; a host whose stderr is swapped
    (a test's capture, a daemon's redirect) would then write to a closed file and the write would
    raise inside a session. A log line that cannot be written is dropped: logging never ends a
    table or the host.
    """

    def msg(self, message: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            print(message, file=sys.stderr, flush=True)

    log = debug = info = warn = warning = error = critical = exception = fatal = failure = msg


def _stderr_logger(*args: object) -> StderrLogger:
    return StderrLogger()


COLOR_ENV = "GAMEHOST_LOG_COLOR"
"""Set to ``1`` (``0``): console lines are coloured (plain) whatever stderr is; the supervisor
of ``serve --workers`` sets it for its workers, whose stderr is a pipe to it."""

_json = False


def is_json() -> bool:
    """Whether the last :func:`configure` chose JSON lines."""
    return _json


def colors() -> bool:
    """Whether console lines are coloured: :data:`COLOR_ENV` if set, else whether stderr is a
    terminal."""
    forced = os.environ.get(COLOR_ENV)
    if forced in ("0", "1"):
        return forced == "1"
    return sys.stderr.isatty()


CACHE = True
"""Whether loggers are bound once, on first use (fast); tests turn it off so that
``structlog.testing.capture_logs`` sees every logger, whatever configured logging before."""


def configure(
    json: bool | None = None, level: str = "info", fields: dict[str, Any] | None = None
) -> None:
    """Configure structlog for the process.

    Args:
        json: force JSON (True) or console (False) output; None: JSON unless stderr is a tty.
        level: the lowest level written (``debug``, ``info``, ``warning``, ``error``).
        fields: added to every line (``{"worker": 1}``).
    """
    global _json
    if json is None:
        json = not sys.stderr.isatty()
    _json = json
    renderer = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=colors())
    )
    extra = dict(fields or {})

    def add_fields(logger: Any, name: str, event: dict[str, Any]) -> dict[str, Any]:
        for key, value in extra.items():
            event.setdefault(key, value)
        return event

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            *([add_fields] if extra else []),
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=CACHE,
    )
