"""A protocol v1 client over the host's WebSocket, for tests: ``tools.client.Client`` on a
stream that sends each line as one text message and reads each message as one line."""

from __future__ import annotations

from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, connect_websocket

from tools.client import Client


class LineOverWebSocket(trio.abc.Stream):
    """The client side of :class:`host.net.web.WebSocketStream`: lines in, messages out."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self._buf = bytearray()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        try:
            for line in bytes(data).split(b"\n"):
                if line:
                    await self.ws.send_message(line.decode())
        except ConnectionClosed:
            raise trio.BrokenResourceError("closed") from None

    async def wait_send_all_might_not_block(self) -> None:
        return None

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if not self._buf:
            try:
                msg = await self.ws.get_message()
            except ConnectionClosed:
                return b""
            self._buf += (msg.encode() if isinstance(msg, str) else msg) + b"\n"
        n = len(self._buf) if max_bytes is None else min(max_bytes, len(self._buf))
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    async def aclose(self) -> None:
        await self.ws.aclose()


async def open_ws(
    nursery: trio.Nursery, port: int, *, origin: str | None = None, path: str = "/ws"
) -> WebSocketConnection:
    """Open a WebSocket to ``127.0.0.1:port`` (with this ``Origin`` header, if any).

    Raises:
        trio_websocket.ConnectionRejected: the host refused the handshake.
    """
    headers: list[tuple[bytes | str, bytes | str]] = []
    if origin is not None:
        headers.append(("Origin", origin))
    return await connect_websocket(
        nursery,
        "127.0.0.1",
        port,
        path,
        use_ssl=False,
        extra_headers=headers,
        message_queue_size=10_000,
        max_message_size=16 * 1024 * 1024,
    )


async def handshake_status(port: int, host: str, origin: str | None) -> int:
    """Send a WebSocket upgrade with these ``Host`` and ``Origin`` headers; the HTTP status
    the host answers (101: accepted)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        head = (
            "GET /ws HTTP/1.1\r\n"
            f"Host: {host}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            + (f"Origin: {origin}\r\n" if origin is not None else "")
            + "\r\n"
        )
        await stream.send_all(head.encode())
        got = b""
        while b"\r\n" not in got:
            data = await stream.receive_some(4096)
            if not data:
                break
            got += data
        return int(got.split(b" ", 2)[1])


async def ws_client(nursery: trio.Nursery, port: int, **kw: Any) -> Client:
    """A started :class:`Client` over the host's WebSocket on ``port``."""
    ws = await open_ws(nursery, port, **kw)
    c = Client(LineOverWebSocket(ws))
    c.start(nursery)
    return c
