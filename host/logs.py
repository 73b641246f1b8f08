"""structlog set-up: JSON lines when stderr is not a terminal, a readable console when it is.

Every line carries the context bound in its task (``peer``, ``session``, ``seat``) through
``structlog.contextvars``.
"""

from __future__ import annotations

import contextlib
import logging
import sys

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


def configure(json: bool | None = None, level: str = "info") -> None:
    """Configure structlog for the process.

    Args:
        json: force JSON (True) or console (False) output; None: JSON unless stderr is a tty.
        level: the lowest level written (``debug``, ``info``, ``warning``, ``error``).
    """
    if json is None:
        json = not sys.stderr.isatty()
    renderer = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
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
        cache_logger_on_first_use=True,
    )
