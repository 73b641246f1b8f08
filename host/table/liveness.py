"""When a connection's reader acts if the client stays silent, with no I/O.

A connection (``host.net.connection``) waits for input up to a deadline; this policy says which
deadline and what happens at it:

- ``line_timeout``: a line once begun must end within it (then the connection is closed,
  reason ``line_timeout``);
- ``idle``: a connection that neither plays nor watches a live session, and waits for no answer,
  is closed after ``idle_timeout`` seconds without a complete line;
- ``ping``: one that plays or watches may stay silent, so it is asked instead: ``ping_after``
  seconds after it was last heard from (a complete line, or over a WebSocket a Pong) the host
  sends a ``ping``; ``unresponsive``: if nothing at all comes within ``ping_timeout`` seconds
  more it is closed.

Times are seconds on one monotonic clock (the caller's), ``inf`` for never.
"""

from __future__ import annotations

import math

import attrs

__all__ = ["Liveness"]


@attrs.define
class Liveness:
    """One connection's silence rules (see the module docstring); None or 0 turns one off.

    Attributes:
        pinged: when the ping not answered yet was sent, or None.
    """

    idle_timeout: float | None = None
    line_timeout: float | None = None
    ping_after: float | None = None
    ping_timeout: float | None = None
    pinged: float | None = None

    def ping_deadline(self, heard: float, watching: bool) -> tuple[float, str | None]:
        """When the ping timer acts next and how: ``"ping"`` (send one) or ``"unresponsive"``
        (close); ``(inf, None)`` when this connection is not pinged (it neither plays nor
        watches, or pings are off). ``heard``: when it was last heard from. Once heard from
        after a ping, that ping is answered and the next is due ``ping_after`` after that."""
        if not (self.ping_after and self.ping_timeout and watching):
            self.pinged = None
            return math.inf, None
        if self.pinged is not None and heard >= self.pinged:
            self.pinged = None  # answered
        if self.pinged is None:
            return heard + self.ping_after, "ping"
        return self.pinged + self.ping_timeout, "unresponsive"

    def deadline(
        self,
        now: float,
        last_line: float,
        line_began: float | None,
        heard: float,
        busy: bool,
        watching: bool,
    ) -> tuple[float, str | None]:
        """The reader's next deadline and what it means (``line_timeout``, ``idle``, ``ping``,
        ``unresponsive``; None: only look again then).

        Args:
            now: the time now.
            last_line: when the last complete line was handled (or the connection was made).
            line_began: when an unfinished line was first seen, or None.
            heard: when the client was last heard from (``last_line``, or a later Pong).
            busy: requests of the connection wait for their answers.
            watching: the connection plays or watches a live session.
        """
        deadline, reason = math.inf, None
        if line_began is not None and self.line_timeout is not None:
            deadline, reason = line_began + self.line_timeout, "line_timeout"
        elif self.idle_timeout is not None:
            if busy or watching:  # not idle: look again later
                deadline = now + self.idle_timeout
            else:
                deadline, reason = last_line + self.idle_timeout, "idle"
        due, why = self.ping_deadline(heard, watching)
        if due < deadline:
            deadline, reason = due, why
        return deadline, reason
