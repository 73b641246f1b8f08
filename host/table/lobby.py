"""The lobby's decisions, with no I/O: what a ``create`` writes, and who may create.

``host.net.server.Host`` carries these out (the store's create, the reply); the rules live here
so they are tested without a socket and read in one place.
"""

from __future__ import annotations

import ipaddress
import math
from typing import Any

import attrs
import structlog

from host.table.core import format_ts
from host.table.engine import Engine, Record, SessionState
from protocol.messages import ErrorCode, ProtocolError

__all__ = ["CreateLimiter", "NewSession", "is_loopback", "plan_create"]

log = structlog.get_logger("gamehost.server")


@attrs.frozen
class NewSession:
    """What a ``create`` writes: ``records`` (the header, then the bots' ``seat_taken`` records
    and, if the bots filled every seat, the opening events), each with the create's ``ts``;
    ``states`` after the header and after each bot's seat (the last is the session's state);
    ``bots`` the bot seats."""

    records: list[Record]
    states: list[SessionState]
    bots: list[int]


def plan_create(
    engine: Engine,
    sid: str,
    seed: bytes,
    options: dict[str, Any] | None,
    seats: int | None,
    bots: int,
    turn_timeout: float | None,
    now: float,
) -> NewSession:
    """Validate a ``create`` and make its records (nothing is written).

    The seats ``seats - bots`` .. ``seats - 1`` are the bots'; humans join the lower seats.
    ``turn_timeout`` (seconds; None or 0: no timer) goes into the header, which is what a
    reload reads. Each event of the opening (all-bot sessions) is folded once.

    Raises:
        ProtocolError: ``bad_request`` (seats, bots, turn timeout), ``internal`` (the game
            failed to start). OptionError: ``bad_option``.
    """
    info = engine.game.info
    n = info.min_seats if seats is None else seats
    if not info.min_seats <= n <= info.max_seats:
        raise ProtocolError(
            ErrorCode.BAD_REQUEST, f"{info.id} seats {info.min_seats} to {info.max_seats}, not {n}"
        )
    if not 0 <= bots <= n:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"bots must be 0..{n}, not {bots}")
    if turn_timeout is not None and not (math.isfinite(turn_timeout) and turn_timeout >= 0):
        raise ProtocolError(
            ErrorCode.BAD_REQUEST, "turn_timeout must be seconds >= 0 or null (no timer)"
        )
    opts = engine.codec.options_from_wire(options, n)  # OptionError: answered bad_option
    bot_seats = list(range(n - bots, n))
    header = engine.header(sid, opts, n, bot_seats, seed)
    header.data["turn_timeout"] = turn_timeout or None
    try:
        state = engine.initial(header)
        seated, states = [], [state]
        for seat in bot_seats:
            new, state = engine.seat_step(state, seat, f"bot{seat}", True, None)
            seated += new
            states.append(state)
    except Exception:
        import structlog

        structlog.get_logger("gamehost.server").exception("game_fault", step="create", game=info.id)
        raise ProtocolError(
            ErrorCode.INTERNAL, "internal error: the game failed to start"
        ) from None
    ts = format_ts(now)
    return NewSession([attrs.evolve(r, ts=ts) for r in (header, *seated)], states, bot_seats)


class CreateLimiter:
    """A token bucket per peer address for ``create``.

    Args:
        burst: tokens a bucket holds at most (``create`` requests at once).
        rate: tokens regained per second.
        loopback: limit loopback addresses too (else they are never limited).
    """

    def __init__(self, burst: int, rate: float, loopback: bool = False) -> None:
        self.burst = burst
        self.rate = rate
        self.loopback = loopback
        self._buckets: dict[str, tuple[float, float]] = {}  # address -> (tokens, at)
        self._prune_at = 10_000  # buckets held before full ones are forgotten

    def take(self, address: str, now: float) -> float:
        """Spend one token of ``address`` at time ``now`` (seconds); 0.0 when granted, else the
        seconds until a token is back (nothing spent)."""
        if not self.loopback and is_loopback(address):
            return 0.0
        tokens, at = self._buckets.get(address, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        if tokens >= 1.0:
            self._buckets[address] = (tokens - 1.0, now)
            if len(self._buckets) > self._prune_at:  # forget full buckets: they tell nothing
                self._prune(now)
                self._prune_at = max(10_000, 2 * len(self._buckets))
            return 0.0
        self._buckets[address] = (tokens, now)
        return (1.0 - tokens) / self.rate if self.rate > 0 else math.inf

    def _prune(self, now: float) -> None:
        full = [
            a for a, (t, at) in self._buckets.items() if t + (now - at) * self.rate >= self.burst
        ]
        for a in full:
            del self._buckets[a]


def is_loopback(address: str) -> bool:
    """Whether ``address`` (an IP, no port) is a loopback address."""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
