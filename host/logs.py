"""structlog set-up: JSON lines when stderr is not a terminal, a readable console when it is.

Every line carries the context bound in its task (``peer``, ``session``, ``seat``) through
``structlog.contextvars``.
"""

from __future__ import annotations

import logging
import sys

import structlog


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
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
