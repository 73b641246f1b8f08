"""``serve --http PORT``: the web client's files over HTTP and protocol v1 over a WebSocket.

One listener (``HostConfig.http_port`` on ``http_bind``, 127.0.0.1 by default) answers two kinds
of request, told apart by their head (read with h11, at most :data:`MAX_HEAD` bytes, within
``line_timeout`` seconds or 30 s, and answered within as long again; at most
``max_http_requests`` at once, ``max_http_requests_per_address`` from one address, see
:data:`MAX_HTTP_PER_PEER`):

- ``GET``/``HEAD`` of a file of the web client (``host/static``, shipped as package data; ``/``
  is ``index.html``) or of ``/schema.json`` (every game's contract, :func:`schema_file`):
  answered with the file, a strict Content-Security-Policy (scripts and styles only from the
  host itself, no inline script) and ``Connection: close``. Anything else is 404 or 405.
- a WebSocket upgrade on ``/ws`` (wsproto): once accepted, the socket is wrapped in a
  :class:`WebSocketStream` and handed to :meth:`host.net.server.Host.handle`, exactly as a TCP
  connection is. The stream turns each incoming message into the bytes of one line (its text,
  with any newline read as a space, then ``\\n``) and each line the host writes into one text
  message, so the connection limits (``--max-connections``, idle and line timeouts, the
  outbox budget), the 64 KiB line limit, every error and the redaction are those of TCP: the
  same code runs. A binary message is read the same way as a text one. The one line that is
  not sent as a message is the host's ``ping`` push: over a WebSocket it is a Ping frame, which
  a browser answers with a Pong by itself, and a Pong counts as life as a line does
  (``WebSocketStream.last_pong``; the ping timer is :mod:`host.net.connection`'s).

Who may open the WebSocket (:func:`origin_allowed`): a request without ``Origin`` (not a
browser), one whose ``Origin`` is a configured one (``--allow-origin``, or the origin of
``--public-url``), or one whose ``Origin`` is this host's own page on a loopback name
(``http://`` + its ``Host`` header, when that names ``localhost``, ``127.x.y.z`` or ``[::1]``).
Others are refused with 403. An ``Origin`` that merely equals the ``Host`` header of another
name is never enough: a page of any site can have its name resolve to this host (DNS
rebinding), and its requests then carry its own name as ``Host``. So a host whose pages are
reached by a name other than a loopback one needs ``--public-url`` (or ``--allow-origin``) for
its own pages to open the WebSocket. When the listener is bound to a loopback address, the
``Host`` header must also name a loopback host, or ``--public-url``'s host (a reverse proxy in
front that passes the public name on).
"""

from __future__ import annotations

import functools
import ipaddress
import math
import mimetypes
from collections.abc import Callable
from importlib import resources
from typing import Any

import h11
import orjson
import structlog
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError

from host.table.lobby import AddressSlots, address_key
from protocol.messages import ErrorCode, ProtocolError
from protocol.replies import PingPush

__all__ = [
    "MAX_HEAD",
    "MAX_HTTP_PER_PEER",
    "WebSocketStream",
    "origin_allowed",
    "origin_of",
    "serve_http",
    "static_files",
]

log = structlog.get_logger("gamehost.web")

MAX_HEAD = 16 * 1024
"""The largest HTTP request head read, in bytes (a larger one is answered 431)."""

MAX_HTTP = 64
"""The default of ``--max-http-requests``: requests being read or answered at once (a
WebSocket counts until its handshake is done, then ``--max-connections`` holds)."""

MAX_HTTP_PER_PEER = 8
"""The default of ``--max-http-requests-per-address``: of those, requests from one peer
address (an IPv6 address's /64) at most, loopback exempt unless ``--address-limit-loopback``.
More from it are closed unanswered; and when every slot is held, a request from an address that
holds fewer than the busiest one takes that address's oldest slot (that request is closed
unanswered). So neither one address that begins heads and never ends them (slowloris) nor a
few together keep the others out."""

WS_PATH = "/ws"

ADMIN_API = "/admin/api/"
"""Where the admin view's requests go (:mod:`host.net.admin`)."""

_ADMIN_STATUS = {
    ErrorCode.UNKNOWN_SESSION: 404,
    ErrorCode.SESSION_ENDED: 409,
    ErrorCode.CONFLICT: 409,
    ErrorCode.OVERLOADED: 503,
    ErrorCode.UNAVAILABLE: 503,
}
"""The HTTP status of an admin request's typed error (others: 500)."""


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


PING_LINE = PingPush().line().rstrip(b"\n")
"""The ``ping`` push's line, which :meth:`WebSocketStream.send_all` sends as a Ping frame."""

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def static_files() -> dict[str, tuple[bytes, str]]:
    """The web client's files: URL path -> (body, content type). ``/`` is ``index.html``."""
    out: dict[str, tuple[bytes, str]] = {}
    root = resources.files("host") / "static"
    for item in root.iterdir():
        if item.is_file() and not item.name.startswith("."):
            kind = mimetypes.guess_type(item.name)[0] or "application/octet-stream"
            if kind.startswith("text/") or kind.endswith("javascript"):
                kind += "; charset=utf-8"
            out["/" + item.name] = (item.read_bytes(), kind)
    if "/index.html" in out:
        out["/"] = out["/index.html"]
    return out


def _is_loopback_name(hostname: str) -> bool:
    name = hostname.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _hostname(host_header: str) -> str:
    """The name of a ``Host`` header value, without its port."""
    if host_header.startswith("["):
        return host_header.split("]", 1)[0] + "]"
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def origin_of(url: str) -> tuple[str, str]:
    """``(origin, host)`` of a URL such as ``--public-url https://cards.example/``: the origin
    ``scheme://host[:port]`` (lower case, the scheme's default port left out) and the ``Host``
    header naming it (``host[:port]``).

    Raises:
        ValueError: not an ``http://`` or ``https://`` URL with a host name.
    """
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http:// or https:// URL with a host: {url!r}")
    port = parts.port  # ValueError: a port out of range
    name = parts.hostname.lower()
    if ":" in name:  # an IPv6 address
        name = f"[{name}]"
    host = name if port is None or port == {"http": 80, "https": 443}[scheme] else f"{name}:{port}"
    return f"{scheme}://{host}", host


def origin_allowed(
    origin: str | None,
    host_header: str | None,
    allowed: frozenset[str],
    loopback: bool,
    hosts: frozenset[str] = frozenset(),
) -> bool:
    """Whether a WebSocket request may be accepted.

    Args:
        origin: its ``Origin`` header (None: absent, not a browser).
        host_header: its ``Host`` header (None: absent, refused).
        allowed: the configured origins (``--allow-origin``, ``--public-url``'s;
            ``scheme://host[:port]``, lower case).
        loopback: the listener is bound to a loopback address (then ``Host`` must be a
            loopback name or one of ``hosts``).
        hosts: ``Host`` values a loopback listener accepts besides loopback names (lower case:
            ``--public-url``'s).

    An ``Origin`` equal to ``http://`` + ``Host`` (the host's own page) is accepted only when
    ``Host`` is a loopback name: any other name could be a rebinding one.
    """
    if host_header is None:
        return False
    host_header = host_header.lower()
    local = _is_loopback_name(_hostname(host_header))
    if loopback and not local and host_header not in hosts:
        return False
    if origin is None:
        return True
    origin = origin.lower().rstrip("/")
    return origin in allowed or (local and origin == f"http://{host_header}")


def _peer(stream: trio.SocketStream) -> str:
    """The peer address a request counts against (:func:`host.table.lobby.address_key`: an
    IPv6 address's /64 network)."""
    try:
        return address_key(str(stream.socket.getpeername()[0]))
    except (OSError, IndexError, TypeError):
        return "?"


class WebSocketStream(trio.abc.HalfCloseableStream):
    """A WebSocket presented as the byte stream of protocol v1 lines.

    ``receive_some`` returns the bytes of incoming messages, each message followed by ``\\n``
    (newlines inside a message become spaces, so one message is one line; partial frames are
    passed on as they arrive, so an over-long message is cut by the same line limit as on TCP).
    ``send_all`` takes whole lines and sends each as one text message, except the ``ping``
    push (:data:`PING_LINE`), sent as a WebSocket Ping frame: a browser answers that with a Pong
    by itself, and ``last_pong`` (``trio.current_time()`` seconds, ``-inf`` until the first)
    says when the last Pong was read (the connection counts it as life; ``on_pong`` tells it
    at once). ``send_eof`` sends a close frame; ``receive_some`` returns ``b""`` once the
    peer's close (or EOF) arrives. ``socket`` is the underlying socket (for the peer address
    and its options).
    """

    def __init__(self, stream: trio.SocketStream, ws: WSConnection) -> None:
        self._stream = stream
        self.socket = stream.socket
        self._ws = ws
        self._incoming = bytearray()
        self._outgoing = bytearray()  # a line not finished by the last send_all
        self._eof = False
        self._lock = trio.StrictFIFOLock()
        self.last_pong = -math.inf
        self.on_pong: Callable[[], None] | None = None
        """Called (from the reading task) after each Pong: the connection's reader then works
        out its ping deadline again at once."""

    def _read_events(self) -> bytes:
        """Take wsproto's events: message bytes into ``_incoming``; control replies returned."""
        reply = b""
        for event in self._ws.events():
            if isinstance(event, TextMessage | BytesMessage):
                data = event.data.encode() if isinstance(event.data, str) else bytes(event.data)
                self._incoming += data.replace(b"\n", b" ")
                if event.message_finished:
                    self._incoming += b"\n"
            elif isinstance(event, Ping):
                reply += self._ws.send(event.response())
            elif isinstance(event, Pong):
                self.last_pong = trio.current_time()
                if self.on_pong is not None:
                    self.on_pong()
            elif isinstance(event, CloseConnection):
                self._eof = True
                try:
                    if self._ws.state.name == "REMOTE_CLOSING":
                        reply += self._ws.send(event.response())
                    elif self._ws.state.name == "OPEN":  # a protocol violation: close with it
                        reply += self._ws.send(CloseConnection(code=event.code))
                except LocalProtocolError:
                    pass
        return reply

    @property
    def peer_closed(self) -> bool:
        """The peer's close frame (or the end of its TCP stream) has been read: nothing more
        comes in after the messages already read."""
        return self._eof

    async def _send_raw(self, data: bytes) -> None:
        async with self._lock:
            await self._stream.send_all(data)

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """The next bytes of incoming lines; ``b""`` once the peer closed."""
        while not self._incoming and not self._eof:
            data = await self._stream.receive_some(65536)
            if not data:
                self._eof = True
                break
            self._ws.receive_data(data)
            reply = self._read_events()
            if reply:  # a pong or a close reply: never cut off half-way by a cancel
                with trio.CancelScope(shield=True), trio.move_on_after(5):
                    await self._send_raw(reply)
        n = len(self._incoming) if max_bytes is None else min(max_bytes, len(self._incoming))
        out = bytes(self._incoming[:n])
        del self._incoming[:n]
        return out

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Send whole lines, each as one text message (a trailing partial line waits).

        Raises:
            trio.BrokenResourceError: the WebSocket is closing or closed.
        """
        self._outgoing += data
        end = self._outgoing.rfind(b"\n")
        if end < 0:
            return
        lines = bytes(self._outgoing[:end]).split(b"\n")
        del self._outgoing[: end + 1]
        try:
            frames = b"".join(
                self._ws.send(
                    Ping()
                    if line == PING_LINE
                    else TextMessage(data=line.decode("utf-8", "replace"))
                )
                for line in lines
                if line
            )
        except LocalProtocolError:
            raise trio.BrokenResourceError("the WebSocket is closed") from None
        await self._send_raw(frames)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        """Send a close frame (code 1000); reading goes on until the peer's close."""
        if self._ws.state.name == "OPEN":
            await self._send_raw(self._ws.send(CloseConnection(code=1000)))

    async def aclose(self) -> None:
        try:
            if self._ws.state.name == "OPEN":
                with trio.move_on_after(1):
                    await self._send_raw(self._ws.send(CloseConnection(code=1000)))
        except (trio.BrokenResourceError, trio.ClosedResourceError, LocalProtocolError, OSError):
            pass
        finally:
            await self._stream.aclose()


def schema_file(registry: Any) -> bytes:
    """``/schema.json``: ``{"games": {id: contract}}``, each installed game's published contract
    (:func:`host.plugins.contract.game_schema`, as ``gamehost schema`` prints it); the lobby
    builds its option forms from it. A game whose types the generator cannot describe is left out
    (the
    lobby then falls back on what ``games`` says of its options)."""
    from host.plugins.contract import game_schema

    out: dict[str, Any] = {}
    for gid in sorted(registry.games):
        try:
            out[gid] = game_schema(registry.games[gid])
        except Exception:  # a plugin's types: its fault costs its own schema only
            log.warning("game_schema_failed", game=gid, exc_info=True)
    return orjson.dumps({"games": out})


class WebFront:
    """Answers one HTTP listener: static files, and WebSocket connections for ``host``."""

    def __init__(
        self, host: Any, bind: str, allow_origins: tuple[str, ...], public_url: str | None = None
    ) -> None:
        self.host = host
        self.files = static_files()
        self.files["/schema.json"] = (schema_file(host.registry), "application/json")
        allowed = {o.lower().rstrip("/") for o in allow_origins}
        self.hosts: frozenset[str] = frozenset()
        if public_url:
            origin, name = origin_of(public_url)
            allowed.add(origin)
            self.hosts = frozenset({name})
        self.allowed = frozenset(allowed)
        try:
            self.loopback = ipaddress.ip_address(bind).is_loopback
        except ValueError:
            self.loopback = _is_loopback_name(bind)
        if not self.loopback and not self.allowed:
            log.warning(
                "websocket_origins_unset",
                bind=bind,
                hint="browsers reach this host by a name that is not loopback: only pages of"
                " --public-url / --allow-origin origins may open the WebSocket",
            )
        cfg = host.config
        self.slots = AddressSlots(
            getattr(cfg, "max_http_requests_per_address", MAX_HTTP_PER_PEER),
            getattr(cfg, "max_http_requests", MAX_HTTP),
            limit_loopback=getattr(cfg, "address_limit_loopback", False),
            fair=True,
        )
        """The requests being read or answered, per peer address (a request's holder is its
        cancel scope: an evicted one is cancelled)."""
        timeout = host.config.line_timeout
        self.head_timeout = timeout if timeout else 30.0

    async def handle(self, stream: trio.SocketStream) -> None:
        """The per-connection handler given to ``serve_tcp``; never raises."""
        try:
            await self._handle(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        except Exception:
            log.exception("http_failed")
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _handle(self, stream: trio.SocketStream) -> None:
        peer = _peer(stream)
        if self.host.shutdown.is_set():
            return
        scope = trio.CancelScope()
        granted, evicted = self.slots.acquire(peer, scope)
        if not granted:
            log.debug("http_request_refused", peer=peer, held=self.slots.held(peer))
            return  # closed unanswered: too many requests being read or served at once
        if evicted is not None:
            log.debug("http_request_evicted", peer=peer)
            evicted.cancel()  # type: ignore[attr-defined]  # its connection is closed unanswered
        got = None
        try:
            with scope:
                got = await self._request(stream)
        finally:
            self.slots.release(peer, scope)
        if got is not None:  # a WebSocket: from here on the host's connection limits hold
            await self.host.handle(got)

    async def _request(self, stream: trio.SocketStream) -> WebSocketStream | None:
        """Read a request head and answer it: a file, an error, or a WebSocket handshake
        (accepted: the stream to hand to the host)."""
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        raw = bytearray()
        event: Any = h11.NEED_DATA
        with trio.move_on_after(self.head_timeout):
            while event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                raw += data
                conn.receive_data(data)
                try:
                    event = conn.next_event()
                except h11.RemoteProtocolError as exc:
                    await self._simple(stream, conn, exc.error_status_hint, "bad request")
                    return None
                if not data and event is h11.NEED_DATA:
                    return None
        if not isinstance(event, h11.Request):
            return None  # timed out, or closed
        headers = {k.decode().lower(): v.decode("latin-1") for k, v in event.headers}
        target, _, query = event.target.decode("latin-1").partition("?")
        # the answer too has its time: a client that does not read must not keep the slot
        with trio.move_on_after(self.head_timeout):
            if "websocket" in headers.get("upgrade", "").lower():
                return await self._websocket(stream, bytes(raw), target, headers)
            if target == "/metrics" or target.startswith(ADMIN_API):
                await self._admin(stream, conn, event.method.decode("latin-1"), target, query,
                                  headers)  # fmt: skip
                return None
            await self._file(stream, conn, event.method, target)
        return None

    async def _admin(
        self,
        stream: trio.SocketStream,
        conn: h11.Connection,
        method: str,
        target: str,
        query: str,
        headers: dict[str, str],
    ) -> None:
        """``/metrics`` and the admin view's API (:mod:`host.net.admin`), to whoever may."""
        from urllib.parse import parse_qs

        from host.net import admin

        try:
            peer = str(stream.socket.getpeername()[0])
        except (OSError, IndexError, TypeError):
            peer = "?"
        why = admin.refusal(
            token=getattr(self.host.config, "admin_token", None),
            peer=peer,
            headers=headers,
            method=method,
            origins=self.allowed,
        )
        if why is not None:
            extra = [("www-authenticate", "Bearer")] if why[0] == 401 else []
            await self._json(stream, conn, why[0], _error("forbidden", why[1]), extra)
            return
        params = {k: v[-1] for k, v in parse_qs(query).items()}
        reads = {"/metrics", f"{ADMIN_API}sessions", f"{ADMIN_API}metrics"}
        if (target in reads and method not in ("GET", "HEAD")) or (
            target == f"{ADMIN_API}end" and method != "POST"
        ):
            allow = "GET, HEAD" if target in reads else "POST"
            await self._simple(stream, conn, 405, "method not allowed", [("allow", allow)])
            return
        metrics = self.host.metrics
        if target == "/metrics":
            from host.net.metrics import CONTENT_TYPE

            await self._body(stream, conn, 200, metrics.page(), CONTENT_TYPE, method == "HEAD")
        elif target == f"{ADMIN_API}sessions":
            page = await admin.session_list(self.host, params.get("after") or None)
            await self._json(stream, conn, 200, page, head=method == "HEAD")
        elif target == f"{ADMIN_API}metrics":
            await self._json(stream, conn, 200, metrics.summary(), head=method == "HEAD")
        elif target == f"{ADMIN_API}end":
            try:
                done = await admin.end_session(self.host, params.get("session", ""), peer)
            except ProtocolError as exc:
                status = _ADMIN_STATUS.get(exc.code, 500)
                await self._json(stream, conn, status, _error(exc.code.value, exc.message))
                return
            await self._json(stream, conn, 200, done)
        else:
            await self._json(stream, conn, 404, _error("not_found", f"no {target}"))

    async def _json(
        self,
        stream: trio.SocketStream,
        conn: h11.Connection,
        status: int,
        body: Any,
        extra: list[tuple[str, str]] | None = None,
        head: bool = False,
    ) -> None:
        data = orjson.dumps(body)
        await self._body(stream, conn, status, data, "application/json", head, extra)

    async def _body(
        self,
        stream: trio.SocketStream,
        conn: h11.Connection,
        status: int,
        body: bytes,
        kind: str,
        head: bool = False,
        extra: list[tuple[str, str]] | None = None,
    ) -> None:
        headers = [
            ("content-type", kind),
            ("content-length", str(len(body))),
            ("cache-control", "no-store"),
            ("x-content-type-options", "nosniff"),
            ("connection", "close"),
            *(extra or []),
        ]
        out = conn.send(h11.Response(status_code=status, headers=headers))
        if not head:
            out += conn.send(h11.Data(data=body))
        await stream.send_all(out + conn.send(h11.EndOfMessage()))

    async def _file(
        self, stream: trio.SocketStream, conn: h11.Connection, method: bytes, target: str
    ) -> None:
        if method not in (b"GET", b"HEAD"):
            await self._simple(stream, conn, 405, "method not allowed", [("allow", "GET, HEAD")])
            return
        found = self.files.get(target)
        if found is None:
            await self._simple(stream, conn, 404, "not found")
            return
        body, kind = found
        headers = [
            ("content-type", kind),
            ("content-length", str(len(body))),
            ("cache-control", "no-cache"),
            ("content-security-policy", CSP),
            ("x-content-type-options", "nosniff"),
            ("referrer-policy", "no-referrer"),
            ("connection", "close"),
        ]
        await stream.send_all(conn.send(h11.Response(status_code=200, headers=headers)))
        if method == b"GET":
            await stream.send_all(conn.send(h11.Data(data=body)))
        await stream.send_all(conn.send(h11.EndOfMessage()))

    async def _simple(
        self,
        stream: trio.SocketStream,
        conn: h11.Connection,
        status: int,
        text: str,
        extra: list[tuple[str, str]] | None = None,
    ) -> None:
        body = (text + "\n").encode()
        headers = [
            ("content-type", "text/plain; charset=utf-8"),
            ("content-length", str(len(body))),
            ("connection", "close"),
            *(extra or []),
        ]
        try:
            out = conn.send(h11.Response(status_code=status, headers=headers))
            out += conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
        except h11.LocalProtocolError:
            return
        await stream.send_all(out)

    async def _websocket(
        self, stream: trio.SocketStream, raw: bytes, target: str, headers: dict[str, str]
    ) -> WebSocketStream | None:
        ws = WSConnection(ConnectionType.SERVER)
        ws.receive_data(raw)
        request = next((e for e in ws.events() if isinstance(e, Request)), None)
        if request is None:  # not a valid upgrade after all (wsproto said why: a close)
            return None
        origin = headers.get("origin")
        if target != WS_PATH or not origin_allowed(
            origin, headers.get("host"), self.allowed, self.loopback, self.hosts
        ):
            status, why = (404, b"not found\n") if target != WS_PATH else (403, b"origin refused\n")
            if status == 403:
                log.warning("websocket_origin_refused", origin=origin, host=headers.get("host"))
            reject = RejectConnection(
                status_code=status,
                headers=[(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(why))],
                has_body=True,
            )
            await stream.send_all(ws.send(reject) + ws.send(RejectData(data=why)))
            return None
        await stream.send_all(ws.send(AcceptConnection()))
        return WebSocketStream(stream, ws)


async def serve_http(
    host: Any,
    port: int,
    bind: str,
    allow_origins: tuple[str, ...],
    conns: trio.Nursery,
    public_url: str | None = None,
    *,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen for HTTP on ``bind``:``port`` (0: any free port) until the host shuts down;
    ``task_status.started`` with the listeners. Handlers run in ``conns``. A worker of
    ``serve --workers`` listens with ``SO_REUSEPORT``, as on its TCP port, so every worker
    serves the one HTTP port."""
    front = WebFront(host, bind, allow_origins, public_url)
    async with trio.open_nursery() as nursery:
        if getattr(host.config, "reuse_port", False):  # one of several workers on one port
            from host.net.workers import reuse_port_listeners

            serve: Any = functools.partial(
                trio.serve_listeners,
                front.handle,
                await reuse_port_listeners(bind, port),
                handler_nursery=conns,
            )
        else:
            serve = functools.partial(
                trio.serve_tcp, front.handle, port, host=bind, handler_nursery=conns
            )
        listeners = await nursery.start(serve)
        task_status.started(listeners)
        await host.shutdown.wait()
        nursery.cancel_scope.cancel()
