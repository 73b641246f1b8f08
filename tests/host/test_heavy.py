"""Heavy requests off the event loop (host.net.heavy, host.net.replayops): a long log's first
``replay`` folds it once in a worker process, keeping snapshots; later ``replay``s start from the
nearest snapshot and read at most one interval of records; ``verify`` runs in a worker process;
a log the worker finds damaged is ``session_damaged`` naming its seq; the host's start reads only
the last record of an ended log."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import trio

from host.net import heavy, replayops
from host.net.client import Client
from host.plugins.registry import load_registry
from host.store.file import read_log
from host.table.engine import Record
from tests.conftest import start_host
from tools.stall import make_long_log

RECORDS = 2_500
EVERY = 100


@pytest.fixture(scope="module")
def long_log(tmp_path_factory) -> tuple[Path, str]:
    data = tmp_path_factory.mktemp("long")
    return data, make_long_log(data, RECORDS, seed=5)


def copied(long_log, tmp_path: Path) -> tuple[Path, str]:
    data, sid = long_log
    (tmp_path / "sessions").mkdir(mode=0o700)
    src = data / "sessions" / f"{sid}.jsonl"
    (tmp_path / "sessions" / src.name).write_bytes(src.read_bytes())
    return tmp_path / "sessions" / src.name, sid


async def test_replay_and_verify_of_a_long_log_run_in_a_worker_process(
    long_log, tmp_path, monkeypatch
):
    path, sid = copied(long_log, tmp_path)
    monkeypatch.setattr(replayops, "EVERY", EVERY)
    registry = load_registry()
    engine = registry.engines["crazy-eights"]
    records = [Record.from_json(r) for r in read_log(path)]
    last = records[-1].seq
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry, heavy_workers=1)
        host = running.host
        assert host.heavy.in_process
        store = host.store
        ranges: list[tuple[int, int]] = []
        real = store.read_range

        async def counted(session, first, stop):
            ranges.append((first, stop))
            return await real(session, first, stop)

        monkeypatch.setattr(store, "read_range", counted)
        c = await running.client()
        for seq in (last - 7, last - 250, 1_234, last):
            ranges.clear()
            got = await c.call("replay", session=sid, seq=seq, truth=True)
            want = engine.rebuild(records[: seq + 1])
            assert got["seq"] == seq and got["state"] == engine.codec.to_wire(want.game)
            assert sum(b - a for a, b in ranges) <= EVERY + 2  # header, last, <= one interval
        kept = replayops._logs[host][sid]
        assert len(kept.snaps) == last // EVERY  # made once, in the worker
        assert all(s % EVERY == 0 for s, _ in kept.snaps.items())
        verified = await c.call("verify", session=sid)
        assert verified["ok"] and verified["records"] == last + 1
        # snapshots are derived data: dropped, they are made again
        replayops._logs[host].clear()
        got = await c.call("replay", session=sid, seq=last - 3, truth=True)
        assert got["state"] == engine.codec.to_wire(engine.rebuild(records[: last - 2]).game)
        host.request_shutdown()


async def test_a_log_a_worker_cannot_fold_is_damaged_naming_its_seq(long_log, tmp_path):
    path, sid = copied(long_log, tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    bad = next(i for i in range(1500, len(lines)) if b'"type":"event"' in lines[i])
    lines[bad] = lines[bad].replace(b'"event":{"type":"', b'"event":{"type":"no_such_')
    path.write_bytes(b"".join(lines))
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, load_registry(), heavy_workers=1)
        c = await running.client()
        r = await c.request("replay", session=sid, seq=len(lines) - 3)
        assert r["error"]["code"] == "session_damaged"
        assert f"seq {bad}" in r["error"]["message"]
        page = await c.request("log", session=sid, after=bad + 1)  # damage known: for every op
        assert page["error"]["code"] == "session_damaged"
        running.host.request_shutdown()


def test_page_and_replay_jobs_read_the_log_outside_the_games_budget(
    long_log, tmp_path, monkeypatch
):
    """Reading a log (the first read of a long one indexes the whole file) is the host's work:
    in a worker it must not count against the game's budget, or a spectator's ``log`` request
    would fault a healthy game. Here reading burns 0.4 s of CPU against a 0.1 s budget."""
    import types

    from host.net import heavy
    from host.plugins.budget import Budget
    from host.store.file import FileStore

    path, sid = copied(long_log, tmp_path)
    real = FileStore._read_range

    def slow(self, *args):
        began = time.thread_time()
        while time.thread_time() - began < 0.4:
            pass
        return real(self, *args)

    monkeypatch.setattr(FileStore, "_read_range", slow)
    monkeypatch.setattr(heavy, "_registry", load_registry())
    monkeypatch.setattr(heavy, "_stores", {})
    monkeypatch.setattr(heavy, "_progress", types.SimpleNamespace(value=0))
    budget = Budget(0.1, None)
    budget.start()
    monkeypatch.setattr(heavy, "_budget", budget)
    source = ("file", str(path.parent))
    try:
        # as a worker process runs a job it is sent
        asked = (source, "crazy-eights", sid, 10, 30, None, False, None, False, 1 << 20)
        page = heavy._run(heavy.page_job, asked)
        state = heavy._run(heavy.replay_job, (source, "crazy-eights", sid, None, 40, None, False))
    finally:
        budget.stop()
    assert page[0] == "page" and page[1] == 29
    assert [r["seq"] for r in json.loads(page[2])] == list(range(10, 30))
    assert state[0] == "state" and state[2] is True  # started
    assert heavy._progress.value >= 2  # the game's part ran in budgeted stretches


async def test_a_page_the_reads_worker_finds_damaged_is_session_damaged_naming_its_seq(
    long_log, tmp_path
):
    path, sid = copied(long_log, tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    bad = next(i for i in range(1234, len(lines)) if b'"ts":"' in lines[i])
    lines[bad] = lines[bad].replace(b'"ts":"', b'"ts":"9', 1)  # its checksum no longer holds
    path.write_bytes(b"".join(lines))
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, load_registry(), heavy_workers=1)
        c = await running.client()
        fine = await c.call("log", session=sid, after=bad - 101, limit=100)  # before it: read
        assert fine["records"][-1]["seq"] == bad - 1
        page = await c.request("log", session=sid, after=bad - 50, limit=100)
        assert page["error"]["code"] == "session_damaged"
        assert str(bad) in page["error"]["message"]
        assert running.host.reads.pids()  # read in the reads process
        running.host.request_shutdown()


async def test_the_start_reads_only_the_last_record_of_an_ended_log(
    long_log, tmp_path, monkeypatch
):
    _, sid = copied(long_log, tmp_path)
    from host.store.file import FileStore

    loads: list[str] = []
    real = FileStore.load

    def counted(self, session):
        loads.append(session)
        return real(self, session)

    monkeypatch.setattr(FileStore, "load", counted)
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, load_registry(), heavy_workers=0)
        assert loads == [] and sid not in running.host.sessions
        c = await running.client()
        view = await c.call("view", session=sid)  # still answered, from its log
        assert view["ended"]
        running.host.request_shutdown()


async def test_log_pages_and_replays_made_in_the_reads_worker_are_those_the_loop_makes(
    long_log, tmp_path, monkeypatch
):
    """With workers, a ``log`` page is read and redacted, and a ``replay`` folded from its
    snapshot and viewed, in the host's reads process (the store's ``read_range`` reads only the
    header and the last record on the host); the answers are those a host without workers makes
    on its loop, for every viewer and size limit."""
    _, sid = copied(long_log, tmp_path)
    asks = [
        {},
        {"after": 1_000, "limit": 250},
        {"after": 2_000, "limit": 1_000, "seat": 1},
        {"after": 10, "limit": 40, "truth": True},
        {"after": 500, "limit": 300, "text": True},  # as the web debugger asks
        {"after": RECORDS - 30, "limit": 100},  # the last page: next is null
    ]
    pages: dict[int, list[dict]] = {}
    replays: dict[int, list[dict]] = {1: [], 0: []}
    for workers in (1, 0):
        async with trio.open_nursery() as n:
            running = await start_host(n, tmp_path, load_registry(), heavy_workers=workers)
            host = running.host
            assert host.reads.in_process is bool(workers)
            ranges: list[tuple[int, int]] = []
            real = host.store.read_range

            async def counted(session, first, stop, real=real, ranges=ranges):
                ranges.append((first, stop))
                return await real(session, first, stop)

            monkeypatch.setattr(host.store, "read_range", counted)
            c = await running.client()
            pages[workers] = [await c.call("log", session=sid, **ask) for ask in asks]
            last = pages[workers][0]["seq"]
            for seq, ask in ((0, {}), (1, {"seat": 1}), (150, {"truth": True}), (last, {})):
                replays[workers].append(await c.call("replay", session=sid, seq=seq, **ask))
            for seq in (last - 1, last - 40, 7):  # a connection that steps on (or back)
                replays[workers].append(await c.call("replay", session=sid, seq=seq))
            if workers:
                # the header and the last record; for texts, the seats' names (once per log)
                assert all(b - a == 1 or b <= 201 for a, b in ranges)
                assert len(host.reads.pids()) == 1
            else:
                assert any(b - a > 1 for a, b in ranges)
            host.request_shutdown()
    assert pages[1] == pages[0]
    assert replays[1] == replays[0] and [r["seq"] for r in replays[1]][:3] == [0, 1, 150]
    told = [r["text"] for r in pages[1][4]["records"]]
    assert all(isinstance(t, str) for t in told) and any(t for t in told)
    last = pages[1][0]["seq"]
    assert [len(p["records"]) for p in pages[1]][:4] == [200, 250, min(1_000, last - 2_000), 40]
    assert pages[1][0]["records"][0]["seq"] == 0 and pages[1][1]["next"] == 1_250
    assert pages[1][-1]["next"] is None and pages[1][-1]["records"][-1]["seq"] == last


# -- heavy workers are bounded ------------------------------------------------------------------
def worker_registry():
    from tests import worker_games

    return load_registry([("worker-games", worker_games)], entrypoints=False)


async def live_session(running, game: str):
    c = await running.client()
    sid = (await c.call("create", game=game, seats=2, bots=1))["session"]
    token = (await c.call("join", session=sid))["token"]
    return c, sid, token


async def test_a_game_that_loops_in_a_workers_fold_or_verify_is_stopped_by_its_budget(
    tmp_path, monkeypatch
):
    from tests.worker_games import HOST_PID

    monkeypatch.setenv(HOST_PID, str(os.getpid()))
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, worker_registry(), heavy_workers=1, game_time=0.3)
        host = running.host
        assert host.heavy.in_process
        c, sid, token = await live_session(running, "loops-in-workers")
        other, healthy, _ = await live_session(running, "loops-in-workers")
        with trio.fail_after(60):
            checked = await c.call("verify", session=sid)  # the worker's budget stops it
        assert checked["ok"] is False and checked["seq"] is not None
        pids = host.heavy.pids()
        assert len(pids) == 1  # the worker serves on
        with trio.fail_after(60):
            r = await c.request("replay", session=sid, seq=3, seat=0, token=token)
        assert r["error"]["code"] == "game_faulted"  # the fold in the worker faulted
        while (p := await c.next_push())["push"] != "ended":
            pass
        assert p["aborted"] == "game_error"  # a live session whose game faulted ends
        assert (await other.call("verify", session=healthy))["ok"] is False
        assert host.heavy.pids() == pids
        host.request_shutdown()
    last = read_log(tmp_path / "sessions" / f"{sid}.jsonl")[-1]
    assert (last["aborted"], last["fault"]) == ("game_error", "time")


@pytest.mark.parametrize(
    ("game", "op", "ask", "step"),
    [
        ("redact-loops-in-workers", "log", {}, "redact"),  # a page: redacted there
        ("view-loops-in-workers", "replay", {"seq": 2}, "replay"),  # its view is made there
    ],
)
async def test_game_code_that_loops_in_the_reads_worker_faults_its_game_not_the_host(
    tmp_path, monkeypatch, game, op, ask, step
):
    from tests.worker_games import HOST_PID

    monkeypatch.setenv(HOST_PID, str(os.getpid()))
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, worker_registry(), heavy_workers=1, game_time=0.3)
        host = running.host
        c, sid, _ = await live_session(running, game)
        watcher = await running.client()
        await watcher.call("watch", session=sid)
        with trio.fail_after(60):
            r = await c.request(op, session=sid, **ask)  # made in the reads process: loops there
        assert r["error"]["code"] == "game_faulted" and step in r["error"]["message"]
        with trio.fail_after(60):
            while (p := await watcher.next_push())["push"] != "ended":
                pass
        assert p["aborted"] == "game_error"
        assert await c.call("ping") == {"pong": True}
        assert len(host.reads.pids()) == 1  # the reads process serves on
        host.request_shutdown()
    last = read_log(tmp_path / "sessions" / f"{sid}.jsonl")[-1]
    assert (last["aborted"], last["fault"]) == ("game_error", "time")


async def test_a_worker_whose_job_makes_no_progress_is_killed(tmp_path, monkeypatch):
    from tests.worker_games import HOST_PID

    monkeypatch.setenv(HOST_PID, str(os.getpid()))
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, worker_registry(), heavy_workers=1)
        host = running.host
        host.heavy.stall = 2.0
        c, sid, _ = await live_session(running, "blocks-in-workers")
        t0 = time.monotonic()
        with trio.fail_after(60):
            r = await c.request("verify", session=sid)
        assert r["error"]["code"] == "unavailable" and "no progress" in r["error"]["message"]
        assert time.monotonic() - t0 < 30
        assert host.heavy.pids() == []  # killed; the next job starts a new one
        assert await c.call("ping") == {"pong": True}
        host.request_shutdown()


async def test_shutdown_kills_the_workers_at_once(tmp_path, monkeypatch):
    from tests.worker_games import HOST_PID

    monkeypatch.setenv(HOST_PID, str(os.getpid()))
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, worker_registry(), heavy_workers=1)
        host = running.host
        c, sid, _ = await live_session(running, "blocks-in-workers")
        answer: list[dict] = []

        async def ask() -> None:
            with contextlib.suppress(ConnectionError):  # closed as the host shuts down
                answer.append(await c.request("verify", session=sid))

        n.start_soon(ask)
        with trio.fail_after(60):  # wait for the condition: the job runs in its worker
            while not host.heavy._busy:
                await trio.sleep(0.05)
        pids = host.heavy.pids()
        t0 = time.monotonic()
        host.request_shutdown()
    assert time.monotonic() - t0 < 10  # the stuck job did not hold the shutdown up
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")
async def test_a_worker_steps_aside_for_the_host_on_the_cpu(tmp_path, monkeypatch):
    from tests.worker_games import HOST_PID

    monkeypatch.setenv(HOST_PID, str(os.getpid()))
    ours = sorted(os.sched_getaffinity(0))
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, worker_registry(), heavy_workers=1)
        host = running.host
        c, sid, _ = await live_session(running, "blocks-in-workers")

        async def ask() -> None:
            with contextlib.suppress(ConnectionError):  # closed as the host shuts down
                await c.request("verify", session=sid)

        n.start_soon(ask)
        with trio.fail_after(60):  # wait for the condition: the job runs in its worker
            while not host.heavy._busy:
                await trio.sleep(0.05)
        (pid,) = host.heavy.pids()
        nice = min(os.getpriority(os.PRIO_PROCESS, 0) + heavy.NICE, 19)
        cpus = ours[1:] if len(ours) > 1 else ours  # the first CPU is left to the host

        def aside() -> bool:
            return os.getpriority(os.PRIO_PROCESS, pid) == nice and (
                sorted(os.sched_getaffinity(pid)) == cpus
            )

        with trio.fail_after(30):  # it steps aside as it starts, before it takes a job
            while not aside():
                await trio.sleep(0.05)
        assert sorted(os.sched_getaffinity(0)) == ours  # the host itself is untouched
        host.request_shutdown()


def test_heavy_workers_die_with_their_host(tmp_path):
    """A SIGKILLed host leaves no worker process behind (``bench --stall`` kills its host)."""
    _, sid = copied_log(tmp_path)
    argv = [sys.executable, "-m", "tools.cli", "serve", "--port", "0", "--data-dir"]
    argv += [str(tmp_path), "--log-format", "json", "--heavy-workers", "1"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        port = None
        for line in proc.stderr:
            event = json.loads(line)
            if event.get("event") == "listening":
                port = event["port"]
                break
        assert port is not None, "the host did not start"
        threading.Thread(target=proc.stderr.read, daemon=True).start()

        async def verify() -> None:
            c = await Client.connect("127.0.0.1", port)
            async with trio.open_nursery() as nursery:
                c.start(nursery)
                assert (await c.call("verify", session=sid))["ok"]
                await c.aclose()
                nursery.cancel_scope.cancel()

        trio.run(verify)  # a worker process was started for it, and stays
        workers = children(proc.pid)
        assert workers, "no worker process"
        proc.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(pid) for pid in workers):
            time.sleep(0.1)
        assert not any(alive(pid) for pid in workers)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


def alive(pid: int) -> bool:
    try:
        return " Z " not in Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False


def copied_log(tmp_path: Path) -> tuple[Path, str]:
    data = tmp_path / "src"
    sid = make_long_log(data, 300, seed=7)
    (tmp_path / "sessions").mkdir(mode=0o700, exist_ok=True)
    src = data / "sessions" / f"{sid}.jsonl"
    (tmp_path / "sessions" / src.name).write_bytes(src.read_bytes())
    return tmp_path / "sessions" / src.name, sid


async def test_verify_in_a_worker_checks_the_revealed_seed(long_log, tmp_path):
    import orjson

    from host.store.base import body_of, frame

    path, sid = copied(long_log, tmp_path)
    lines = path.read_bytes().splitlines()
    rec = orjson.loads(body_of(lines[-1]))
    assert rec["type"] == "ended"
    rec["seed"] = "00" * 32  # not the seed the header committed to
    lines[-1] = frame(orjson.dumps(rec))[:-1]
    path.write_bytes(b"\n".join(lines) + b"\n")
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, load_registry(), heavy_workers=1)
        assert running.host.heavy.in_process
        c = await running.client()
        got = await c.call("verify", session=sid)
        assert got["ok"] is False and got["seq"] == rec["seq"]
        running.host.request_shutdown()


# -- heavy work on the loop lets the tables go first ---------------------------------------------
async def test_give_way_returns_once_the_other_tasks_are_blocked():
    from host.net.heavy import give_way

    order: list[str] = []

    async def table() -> None:
        for _ in range(5):
            order.append("table")
            await trio.lowlevel.checkpoint()  # runnable again at once: still work to do
        await trio.sleep_forever()

    async with trio.open_nursery() as n:
        n.start_soon(table)
        await trio.lowlevel.checkpoint()
        await give_way()
        order.append("slice")
        n.cancel_scope.cancel()
    assert order == ["table"] * 5 + ["slice"]


async def test_give_way_waits_no_longer_than_its_bound_for_a_task_that_never_blocks():
    from host.net.heavy import give_way

    stop = False
    turns = 0

    async def spinner() -> None:
        nonlocal turns
        while not stop:
            turns += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as n:
        n.start_soon(spinner)
        await trio.lowlevel.checkpoint()
        t0 = time.monotonic()
        await give_way(0.05)
        took = time.monotonic() - t0
        stop = True
    assert turns > 1 and took < 5  # bounded (0.05 s asked; generous for a loaded machine)
