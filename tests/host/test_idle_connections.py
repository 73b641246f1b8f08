"""What a connection holds while it is idle, and how its output is written.

An idle connection is one task (its reader) and its socket: its output is written by the host's
flusher, and a writer task exists only while a client does not take what is queued for it.
"""

from __future__ import annotations

from typing import Any

import orjson
import trio
import trio.testing

from tests.conftest import start_host

HELLO = orjson.dumps({"id": 1, "op": "hello", "protocol": 1, "client": "idle"}) + b"\n"


def task_count() -> int:
    """Tasks now running in this trio run."""

    def count(task: Any) -> int:
        return 1 + sum(count(t) for n in task.child_nurseries for t in n.child_tasks)

    return count(trio.lowlevel.current_root_task())


async def read_line(stream: trio.SocketStream, buf: bytearray) -> bytes:
    while b"\n" not in buf:
        data = await stream.receive_some(65536)
        assert data, "the host hung up"
        buf += data
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line


async def open_idle(port: int) -> trio.SocketStream:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(HELLO)
    assert orjson.loads(await read_line(stream, bytearray()))["ok"]
    return stream


class CountingSocket:
    """A socket whose ``send`` calls are counted (everything else is the socket's)."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.sends: list[int] = []

    def send(self, data: bytes) -> int:
        sent = self.sock.send(data)
        self.sends.append(sent)
        return sent

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


async def test_an_idle_connection_is_one_task(tmp_path):
    with trio.fail_after(30):
        async with trio.open_nursery() as n:
            running = await start_host(n, tmp_path)
            first = await open_idle(running.port)  # the host's flusher has started
            await trio.testing.wait_all_tasks_blocked()
            before = task_count()
            streams = [await open_idle(running.port) for _ in range(5)]
            await trio.testing.wait_all_tasks_blocked()
            assert task_count() - before == len(streams)
            assert len(running.host.connections) == 1 + len(streams)
            for s in [first, *streams]:
                await s.aclose()
            await running.host.wait_disconnected()
            running.host.request_shutdown()


async def test_lines_queued_in_one_step_go_out_in_one_write_in_order(tmp_path):
    with trio.fail_after(30):
        async with trio.open_nursery() as n:
            running = await start_host(n, tmp_path)
            stream = await open_idle(running.port)
            (conn,) = running.host.connections
            counting = conn._sock = CountingSocket(conn._sock)
            lines = [b'{"push":"x","n":%d}\n' % i for i in range(10)]
            for line in lines:  # one step: no checkpoint between them
                assert conn.send_nowait(line)
            got = bytearray()
            while len(got) < sum(map(len, lines)):
                got += await stream.receive_some(65536)
            assert bytes(got) == b"".join(lines)
            assert counting.sends == [len(got)]
            assert conn.queued == 0
            await stream.aclose()
            running.host.request_shutdown()


async def test_output_a_slow_reader_does_not_take_at_once_is_written_once_it_reads(tmp_path):
    with trio.fail_after(30):
        async with trio.open_nursery() as n:
            running = await start_host(n, tmp_path)
            stream = await open_idle(running.port)
            (conn,) = running.host.connections
            # far more than the kernel's buffers take while the client does not read
            lines = [b'{"push":"x","pad":"%s","n":%d}\n' % (b"y" * 1000, i) for i in range(4000)]
            for line in lines:
                assert conn.send_nowait(line)
            await trio.testing.wait_all_tasks_blocked()
            assert conn._writer is not None  # the rest waits for the client in a writer task
            assert 0 < conn.queued <= sum(map(len, lines))
            more = b'{"push":"last"}\n'
            assert conn.send_nowait(more)  # queued behind it, in order
            want = b"".join(lines) + more
            got = bytearray()
            while len(got) < len(want):
                got += await stream.receive_some(1 << 20)
            assert bytes(got) == want
            await trio.testing.wait_all_tasks_blocked()
            assert conn._writer is None and conn.queued == 0  # the writer task has ended
            await stream.aclose()
            running.host.request_shutdown()
