"""The operator's view of a host: who may use it, what it lists, and ending a session.

The web client's ``admin.html`` (served to anyone: it holds no data) reads and acts through the
HTTP listener (``serve --http``, :mod:`host.net.web`):

- ``GET /admin/api/sessions[?after=ID]``: a page of the live sessions (:func:`session_list`),
  each with its state, seats, who holds them and how many connections watch;
- ``GET /admin/api/metrics``: the host's metrics at a glance (``Metrics.summary``);
- ``POST /admin/api/end?session=ID``: end a session (:func:`end_session`);
- ``GET /metrics``: the Prometheus page (as on ``serve --metrics``).

Who may (:func:`refusal`): with ``serve --admin-token TOKEN`` (or ``$GAMEHOST_ADMIN_TOKEN``)
every such request must carry ``Authorization: Bearer TOKEN``, wherever it comes from (behind a
reverse proxy every request comes from loopback). Without a token only a request from a
loopback address whose ``Host`` header names a loopback host is answered: a page of another
site that a rebinding name sends to this host carries that name as ``Host``, and a reverse proxy
passes the public one. A ``POST`` that carries an ``Origin`` must come from the host's own page
(or a ``--public-url`` / ``--allow-origin`` origin), so a page of another site cannot end a
session from the operator's browser.

Ending a session goes through its table core like any command (``host.table.commands.End``):
the ``ended`` record (``outcome`` null, ``aborted: "admin"``) is appended with the seq it
expects, every subscriber is pushed the record and ``ended``, the log replays and verifies. On
a shared store the session is ended from whichever host the operator uses: the table reads the
log's end first, the other hosts follow the record as any other.
"""

from __future__ import annotations

import hmac
import ipaddress
import itertools
from typing import TYPE_CHECKING, Any

import structlog
import trio

from host.table import commands
from protocol.messages import ErrorCode, ProtocolError
from protocol.replies import Accepted, Outcome, Push, Refused

if TYPE_CHECKING:
    from host.net.server import Host
    from host.net.session import Session

__all__ = ["MAX_PAGE", "Operator", "end_session", "refusal", "session_list"]

log = structlog.get_logger("gamehost.admin")

MAX_PAGE = 200
"""Sessions one ``/admin/api/sessions`` page lists at most."""

END_TIMEOUT = 30.0
"""Seconds an end may take (the session's queue, the store) before it is answered 503."""

_numbers = itertools.count(1)


def _loopback_ip(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _loopback_name(host_header: str) -> bool:
    name = host_header.strip().lower()
    if name.startswith("["):
        name = name[1:].split("]", 1)[0]
    elif name.count(":") == 1:
        name = name.rsplit(":", 1)[0]
    if name == "localhost" or name.endswith(".localhost"):
        return True
    return _loopback_ip(name)


def refusal(
    *,
    token: str | None,
    peer: str,
    headers: dict[str, str],
    method: str,
    origins: frozenset[str] = frozenset(),
) -> tuple[int, str] | None:
    """Whether an admin request may be answered: None if so, else ``(HTTP status, why)``.

    Args:
        token: ``--admin-token`` (None: loopback only).
        peer: the peer's IP address.
        headers: the request's headers, names in lower case.
        method: ``GET``, ``HEAD`` or ``POST``.
        origins: origins besides the host's own page that may ``POST`` (``--public-url``'s,
            ``--allow-origin``), lower case.
    """
    host = headers.get("host", "")
    if token is not None:
        given = headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            value.strip().encode(), token.encode()
        ):
            return 401, "the admin view needs the host's admin token (Authorization: Bearer)"
    elif not (_loopback_ip(peer) and _loopback_name(host)):
        return 403, (
            "the admin view answers requests from this machine only (start the host with"
            " --admin-token to reach it from elsewhere)"
        )
    origin = headers.get("origin")
    if method == "POST" and origin is not None:
        origin = origin.lower().rstrip("/")
        if origin != f"http://{host.lower()}" and origin not in origins:
            return 403, f"origin {origin} may not act on this host"
    return None


class Operator:
    """The requester of an ``End`` command: a :class:`host.net.session.Subscriber` that holds
    no seat and watches nothing; its one answer is awaited with :meth:`outcome`."""

    def __init__(self, host: Host, who: str) -> None:
        self.peer = who
        self.key = f"{host.instance}.admin{next(_numbers)}"
        self._done = trio.Event()
        self._outcome: Outcome | None = None

    def send(self, push: Push) -> bool:
        return True

    def send_many(self, pushes: list[Push]) -> bool:
        return True

    def answer(self, rid: Any, outcome: Outcome) -> None:
        self._outcome = outcome
        self._done.set()

    def settled(self) -> None:
        pass

    def attached(self, session: str, viewer: int | None) -> None:
        pass

    def detached(self, session: str) -> None:
        pass

    async def outcome(self) -> Outcome:
        """The answer, once the session has decided."""
        await self._done.wait()
        assert self._outcome is not None
        return self._outcome


async def end_session(host: Host, sid: str, who: str) -> dict[str, Any]:
    """End live session ``sid`` as the operator ``who`` (a peer address, for the log).

    Returns:
        ``{"session": sid, "seq": N}``: the seq of its ``ended`` record.

    Raises:
        ProtocolError: ``unknown_session`` (no such live session), ``session_ended``,
            ``conflict`` (other hosts kept appending), ``overloaded``/``unavailable`` (the
            session's queue is full, the store failed, or no answer in :data:`END_TIMEOUT`).
    """
    session = await host._live_session(sid) if _plausible(sid) else None
    if session is None:
        if _plausible(sid) and await host._ended_session(sid) is not None:
            raise ProtocolError(ErrorCode.SESSION_ENDED, "the session is over")
        raise ProtocolError(ErrorCode.UNKNOWN_SESSION, f"no live session {sid!r}")
    op = Operator(host, who)
    session.submit(op, 1, commands.End("admin"))
    with trio.move_on_after(END_TIMEOUT):
        outcome = await op.outcome()
        if isinstance(outcome, Refused):
            raise ProtocolError(outcome.code, outcome.message, **dict(outcome.extra))
        assert isinstance(outcome, Accepted)
        log.warning("admin_ended_session", session=sid, by=who, seq=outcome.seq)
        return {"session": sid, "seq": outcome.seq}
    raise ProtocolError(ErrorCode.UNAVAILABLE, "the session did not answer in time; retry")


def _plausible(sid: str) -> bool:
    return 0 < len(sid) <= 64 and all(c.isalnum() or c in "_-" for c in sid) and sid.isascii()


def describe(host: Host, s: Session) -> dict[str, Any]:
    """One session as the admin view lists it: ``session``, ``game``, ``state`` (``waiting``
    for players, ``playing`` or ``ended``), ``seq``, ``driven`` (this host runs its bots and
    timers), ``seats`` (each ``{"seat", "name", "bot", "held", "peer"}`` or ``{"seat",
    "free": true}``; ``held``: a connection holds it, as snapshots' ``connected`` say;
    ``peer``: that connection's address when it is this host's), ``spectators`` and
    ``connections`` (this host's, playing or watching)."""
    table = s.table
    st = s.state
    subs = table.subs
    conns = getattr(s, "_conns", {})
    held = table.connected(st)  # by the log, as snapshots say (nobody, once it has ended)
    seats: list[dict[str, Any]] = []
    for i, seat in enumerate(st.seats):
        if seat is None:
            seats.append({"seat": i, "free": True})
            continue
        holder = table.holders[i] if i < len(table.holders) else None
        conn = conns.get(holder) if holder is not None else None
        seats.append(
            {
                "seat": i,
                "name": seat.name,
                "bot": seat.bot,
                "held": held[i],
                "peer": None if conn is None else conn.peer,
            }
        )
    state = "ended" if st.ended else "playing" if st.started else "waiting"
    return {
        "session": s.id,
        "game": s.game.info.id,
        "state": state,
        "seq": st.seq,
        "driven": bool(s.driver),
        "seats": seats,
        "spectators": sum(1 for sub in subs.values() if sub.viewer is None),
        "connections": len(subs),
    }


async def session_list(host: Host, after: str | None, limit: int = MAX_PAGE) -> dict[str, Any]:
    """A page of the live sessions, by id, those after ``after``: this host's; on a shared
    store, every unfinished session of the store (one not live here is loaded, and then
    followed, as the lobby's ``sessions`` does). ``{"sessions": [...], "next": cursor or
    None}`` (see :func:`describe`)."""
    limit = max(1, min(limit, MAX_PAGE))
    out: list[dict[str, Any]] = []
    store = host.store
    if host.follower is not None and hasattr(store, "session_page"):
        cursor = after
        for _ in range(10):  # store pages read at most (ended sessions are skipped)
            want = limit + 1 - len(out)
            rows = await store.session_page(cursor, want)
            for row in rows:
                cursor = row["session"]
                s = host.sessions.get(cursor)
                if s is None and not row["ended"]:
                    s = await host._live_session(cursor)
                if s is not None:
                    out.append(describe(host, s))
            if len(out) > limit or len(rows) < want:
                break
        else:  # stopped scanning before the store's end: the next page goes on from there
            return {"sessions": out, "next": cursor}
    else:
        for sid in sorted(host.sessions):
            if after is not None and sid <= after:
                continue
            out.append(describe(host, host.sessions[sid]))
            if len(out) > limit:
                break
    more = len(out) > limit
    out = out[:limit]
    return {"sessions": out, "next": out[-1]["session"] if more else None}
