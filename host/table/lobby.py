"""The lobby's decisions, with no I/O: what a ``create`` writes (:func:`plan_create`), who may
create now (:class:`Lobby`: the live-session cap, the unstarted sessions per connection and per
address, the per-address rate of :class:`CreateLimiter`), what one ``sessions`` page holds
(:class:`PageBuilder`), and how many connections and HTTP requests one address may hold
(:class:`AddressSlots`).

``host.net.server.Host`` carries these out (the store's create, the reply); the rules live here
so they are tested without a socket and read in one place.
"""

from __future__ import annotations

import ipaddress
import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import attrs
import orjson
import structlog

from host.plugins.faults import game_error
from host.table.core import format_ts
from host.table.engine import Engine, Record, SessionState
from protocol.framing import MAX_LINE
from protocol.messages import ErrorCode, ProtocolError
from protocol.replies import SessionsPage, SessionSummary

__all__ = [
    "PAGE_BYTES",
    "AddressSlots",
    "CreateLimiter",
    "Lobby",
    "NewSession",
    "PageBuilder",
    "address_key",
    "is_loopback",
    "plan_create",
    "sessions_page",
]

log = structlog.get_logger("gamehost.server")

PAGE_BYTES = MAX_LINE - 4096
"""The most bytes the summaries of one ``sessions`` reply take (the rest of the line is left
for the reply around them): past it the page ends early and ``next`` goes on from there, so
long player names never push the reply past the line limit."""


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
    except BaseException as exc:
        game_error(exc)  # the budget's interruption goes on up (the host answers it)
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


def address_key(address: str) -> str:
    """The address a peer counts as for the per-address limits: an IPv4 address as it is (an
    IPv4-mapped IPv6 one as its IPv4 address), an IPv6 address as its /64 network (one
    subscriber's share, which it can fill with addresses at will; ``::1`` stays itself),
    anything else as it is."""
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        if not ip.is_loopback:
            return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class AddressSlots:
    """Slots (connections, HTTP requests) held per peer address, with no I/O.

    Args:
        per_address: slots one address may hold at once (None or 0: no limit per address).
        total: slots all addresses may hold at once (None: no limit here; the caller may cap
            the total itself).
        limit_loopback: hold loopback addresses (:func:`is_loopback`) to ``per_address`` too;
            off, they have no per-address limit (they still count towards ``total``).
        fair: when ``total`` slots are held, a new holder from an address that holds fewer
            than the address holding the most takes the oldest slot of the addresses holding
            that most, which the caller then ends (:meth:`acquire` names it). So addresses that
            fill every slot (slowloris: a few holding many each, or as many addresses as
            slots holding one each) cannot keep out one more: they are pushed back to their
            fair share, oldest first.

    Addresses are counted as given: pass them through :func:`address_key`.
    """

    def __init__(
        self,
        per_address: int | None,
        total: int | None = None,
        *,
        limit_loopback: bool = False,
        fair: bool = False,
    ) -> None:
        self.per_address = per_address or None
        self.total = total
        self.limit_loopback = limit_loopback
        self.fair = fair
        # address -> holder -> its ticket (the order slots were granted in), oldest first
        self._held: dict[str, OrderedDict[Hashable, int]] = {}
        self._count = 0
        self._tickets = 0

    def __len__(self) -> int:
        """Slots held now, over every address."""
        return self._count

    def held(self, address: str) -> int:
        """Slots ``address`` holds now."""
        return len(self._held.get(address, ()))

    def limited(self, address: str) -> bool:
        """Whether ``address`` is held to ``per_address``."""
        return self.per_address is not None and (self.limit_loopback or not is_loopback(address))

    def acquire(self, address: str, holder: Hashable) -> tuple[bool, Hashable | None]:
        """Take a slot for ``holder`` (any hashable, unique among the holders) from
        ``address``.

        Returns:
            ``(granted, evicted)``: ``granted`` False when ``address`` holds ``per_address``
            slots already, or every slot is held and taking one would not be fairer (nothing
            changed then); ``evicted`` the holder whose slot was taken to make room (its slot
            is released already; the caller ends it), else None.
        """
        mine = self.held(address)
        if self.limited(address) and mine >= self.per_address:  # type: ignore[operator]
            return False, None
        evicted: Hashable | None = None
        if self.total is not None and self._count >= self.total:
            if not self.fair:
                return False, None
            evicted = self.evictable(address)
            if evicted is None:
                return False, None
            self.release(self._owner(evicted), evicted)
        self._tickets += 1
        self._held.setdefault(address, OrderedDict())[holder] = self._tickets
        self._count += 1
        return True, evicted

    def evictable(
        self, address: str, fits: Callable[[Hashable], bool] | None = None
    ) -> Hashable | None:
        """The holder whose slot a newcomer from ``address`` may take: the oldest (that
        ``fits``, if given) of the addresses holding the most slots, when ``address`` holds
        fewer than they do (looking down to the addresses holding one more than ``address``
        when none of the busiest fits); None if there is none."""
        mine = self.held(address)
        oldest: tuple[int, Hashable] | None = None
        for count in sorted({len(h) for h in self._held.values()}, reverse=True):
            if count <= mine:
                break
            for held in self._held.values():
                if len(held) != count:
                    continue
                for holder, ticket in held.items():  # oldest first
                    if oldest is not None and ticket > oldest[0]:
                        break
                    if fits is None or fits(holder):
                        oldest = (ticket, holder)
                        break
            if oldest is not None:
                return oldest[1]
        return None

    def _owner(self, holder: Hashable) -> str:
        for address, held in self._held.items():
            if holder in held:
                return address
        raise KeyError(holder)

    def release(self, address: str, holder: Hashable) -> None:
        """Give back ``holder``'s slot (nothing if it holds none: evicted, or never granted)."""
        mine = self._held.get(address)
        if mine is None or holder not in mine:
            return
        del mine[holder]
        self._count -= 1
        if not mine:
            del self._held[address]


class Lobby:
    """Who may create a session now, and the per-address bookkeeping that says it (no I/O).

    Args:
        max_sessions: live sessions a host holds at most (an ended one that lingers does not
            count once the host is full: see :meth:`check_room`).
        max_unstarted: sessions one connection, and (unless loopback, see ``limit_loopback``)
            one peer address, may have created that are live and not started.
        limiter: the per-address ``create`` rate (:class:`CreateLimiter`).
        limit_loopback: hold loopback addresses to the per-address unstarted cap too.

    The host tells it of each session created (:meth:`created`) and of each that leaves memory
    (:meth:`forget`), for every peer: nothing of a finished session stays here.
    """

    def __init__(
        self,
        max_sessions: int,
        max_unstarted: int,
        limiter: CreateLimiter,
        limit_loopback: bool = False,
    ) -> None:
        self.max_sessions = max_sessions
        self.max_unstarted = max_unstarted
        self.limiter = limiter
        self.limit_loopback = limit_loopback
        # peer address -> ids of the live sessions created from it; live id -> that address
        self._created_by: dict[str, set[str]] = {}
        self._creator: dict[str, str] = {}

    def check_room(self, live: int, running: Callable[[], int]) -> None:
        """Refuse a new session when the host holds ``max_sessions`` live ones: ``live``
        counts them, ``running()`` (asked only then) those not ended.

        Raises:
            ProtocolError: ``overloaded``.
        """
        if live >= self.max_sessions and running() >= self.max_sessions:
            raise ProtocolError(
                ErrorCode.OVERLOADED, f"this host holds {self.max_sessions} live sessions already"
            )

    def check_create(
        self, created: set[str], address: str, now: float, unstarted: Callable[[str], bool]
    ) -> set[str]:
        """Refuse a ``create`` from a connection that created ``created`` (ids) and comes from
        ``address``, at time ``now`` (seconds), past the per-connection or per-address
        unstarted cap or the address's rate; ``unstarted(sid)``: whether a session is live and
        has neither started nor ended. Returns ``created`` less the sessions that are no longer
        waiting (the connection keeps that). A rate token is spent only when granted.

        Raises:
            ProtocolError: ``overloaded`` (with ``retry_after`` seconds for the address rate).
        """
        created = {sid for sid in created if unstarted(sid)}
        cap = self.max_unstarted
        if len(created) >= cap:
            raise ProtocolError(
                ErrorCode.OVERLOADED,
                f"this connection has {len(created)} sessions waiting for players already"
                f" (at most {cap}); create more once they start or end",
            )
        if self.limit_loopback or not is_loopback(address):
            # the same cap per peer address, so reconnecting does not get round it
            mine = {sid for sid in self._created_by.get(address, ()) if unstarted(sid)}
            if len(mine) >= cap:
                raise ProtocolError(
                    ErrorCode.OVERLOADED,
                    f"{len(mine)} sessions created from {address} are waiting for players"
                    f" already (at most {cap}); create more once they start or end",
                )
        wait = self.limiter.take(address, now)
        if wait:
            lim = self.limiter
            raise ProtocolError(
                ErrorCode.OVERLOADED,
                f"too many sessions created from {address} (at most {lim.burst} at once, then"
                f" one per {1 / lim.rate if lim.rate else math.inf:g} s)",
                retry_after=math.ceil(round(wait * 10, 6)) / 10 if math.isfinite(wait) else None,
            )
        return created

    def created(self, address: str, sid: str) -> None:
        """Session ``sid`` was created from ``address``."""
        self._created_by.setdefault(address, set()).add(sid)
        self._creator[sid] = address

    def forget(self, sid: str) -> None:
        """Session ``sid`` left the host's memory (whoever created it)."""
        address = self._creator.pop(sid, None)
        mine = self._created_by.get(address) if address is not None else None
        if mine is not None:
            mine.discard(sid)
            if not mine:
                del self._created_by[address]  # type: ignore[arg-type]

    def created_from(self, address: str) -> set[str]:
        """The live sessions created from ``address`` (a copy)."""
        return set(self._created_by.get(address, ()))


class PageBuilder:
    """One ``sessions`` page, filled in id order: at most ``limit`` summaries whose wire form
    takes at most ``max_bytes`` (the first always fits)."""

    def __init__(self, limit: int, max_bytes: int = PAGE_BYTES) -> None:
        self.limit = limit
        self.max_bytes = max_bytes
        self.entries: list[SessionSummary] = []
        self._size = 0

    def add(self, summary: SessionSummary) -> bool:
        """Take ``summary``; False (not taken) when the page is full: it ends before it."""
        self._size += len(orjson.dumps(summary.to_wire())) + 1  # with its comma
        if len(self.entries) == self.limit or (self.entries and self._size > self.max_bytes):
            return False
        self.entries.append(summary)
        return True

    def full_page(self) -> SessionsPage:
        """The page, more following: ``next`` is its last session."""
        return SessionsPage(self.entries, self.entries[-1].session)

    def page(self, next_cursor: str | None) -> SessionsPage:
        """The page with ``next`` = ``next_cursor`` (None: the last page)."""
        return SessionsPage(self.entries, next_cursor)


def sessions_page(
    summaries: Iterable[SessionSummary], limit: int, max_bytes: int = PAGE_BYTES
) -> SessionsPage:
    """One ``sessions`` page of ``summaries`` (already in id order, filtered by game and
    ``after``; read lazily, one past the page at most): ``next`` is the last listed id when
    more follow, else None."""
    page = PageBuilder(limit, max_bytes)
    for summary in summaries:
        if not page.add(summary):
            return page.full_page()
    return page.page(None)
