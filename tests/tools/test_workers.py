"""``gamehost serve --workers N``: worker processes sharing one port."""

from __future__ import annotations

import socket

import pytest
import trio

from host.workers import reserve_port, reuse_port_listeners
from tools.cli import main


def test_workers_need_a_shared_store(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    assert main(["serve", "--workers", "2", "--port", "0", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "gamehost serve: error: --workers above 1 needs a PostgreSQL --store (the file store"
        " serves one process)"
    ]
    assert not (tmp_path / "sessions").exists()  # nothing started


async def test_listeners_with_reuse_port_share_a_port() -> None:
    reserved = reserve_port("127.0.0.1", 0)
    port = reserved.getsockname()[1]
    try:
        with pytest.raises(OSError):  # without SO_REUSEPORT the port is taken
            plain = socket.socket()
            try:
                plain.bind(("127.0.0.1", port))
            finally:
                plain.close()
        first = await reuse_port_listeners("127.0.0.1", port)
        second = await reuse_port_listeners("127.0.0.1", port)
        got = []
        async with trio.open_nursery() as n:

            async def serve(listeners: list[trio.SocketListener], name: bytes) -> None:
                async def handler(stream: trio.SocketStream) -> None:
                    await stream.send_all(name)
                    await stream.aclose()

                await trio.serve_listeners(handler, listeners)

            n.start_soon(serve, first, b"1")
            n.start_soon(serve, second, b"2")
            for _ in range(40):  # the kernel spreads connections over both
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                got.append(await stream.receive_some(1))
                await stream.aclose()
                if {b"1", b"2"} <= set(got):
                    break
            n.cancel_scope.cancel()
        assert set(got) == {b"1", b"2"}
    finally:
        reserved.close()
