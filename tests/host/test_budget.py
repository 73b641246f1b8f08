"""Game code has a budget (host/plugins/budget.py): a game that loops for ever or allocates
without bound is stopped, its session ends as ``game_error`` naming the fault, and every other
table goes on; a restart does not run into the same fault again."""

from __future__ import annotations

import _thread
import gc
import mmap
import subprocess
import threading
import time
from typing import Any

import pytest
import trio

from host.plugins.budget import BLOCKED, TICK, Budget, BudgetExceeded, resident_bytes
from host.plugins.registry import load_registry
from tests import broken_games
from tests.conftest import log_of, start_host


def test_a_step_that_loops_is_interrupted_within_its_time() -> None:
    budget = Budget(0.1, None)
    budget.start()
    try:
        t0 = time.thread_time()  # CPU time: a loaded machine stretches the wall time
        with pytest.raises(BudgetExceeded) as got, budget.step("a loop"):
            while True:
                pass
        took = time.thread_time() - t0
        assert got.value.what == "time" and 0.1 <= took < 1.0
        for _ in range(20):  # short steps are never interrupted, nor is what follows them
            with budget.step("quick"):
                sum(range(1000))
        time.sleep(0.3)
        assert budget.overruns == 1
    finally:
        budget.stop()


def test_a_step_that_allocates_without_bound_is_interrupted() -> None:
    budget = Budget(None, 64 << 20)
    budget.start()
    try:
        with pytest.raises(BudgetExceeded) as got, budget.step("a hoard"):
            hoard = []
            while True:
                hoard.append(bytearray(1 << 20))
        assert got.value.what == "memory"
        del hoard
    finally:
        budget.stop()


def test_a_game_that_catches_everything_is_interrupted_again() -> None:
    budget = Budget(0.05, None)
    budget.start()
    caught = 0
    try:
        with pytest.raises(BudgetExceeded), budget.step("stubborn"):
            while True:
                try:
                    while True:
                        pass
                except BaseException:
                    caught += 1
                    if caught == 3:
                        raise
        assert caught == 3
    finally:
        budget.stop()


def registry_of(game: Any) -> Any:
    plugins: list[tuple[str, Any]] = [("broken", broken_games.Plugin(game))]
    return load_registry(plugins, entrypoints=False)


async def deal(running: Any, seats: int = 2, bots: int = 0) -> tuple[str, list[Any]]:
    clients = [await running.client() for _ in range(seats - bots)]
    sid = (await clients[0].call("create", game="high-card", seats=seats, bots=bots))["session"]
    for c in clients:
        await c.call("join", session=sid)
    return sid, clients


async def ended_push(c: Any) -> dict[str, Any]:
    while True:
        p = await c.next_push()
        assert p is not None, "the host hung up"
        if p["push"] == "ended":
            return p


@pytest.mark.parametrize(
    ("game", "fault"),
    [(broken_games.DecideLoops(), "time"), (broken_games.DecideEatsMemory(), "memory")],
)
async def test_a_command_into_a_game_that_never_returns_ends_its_table(tmp_path, game, fault):
    async with trio.open_nursery() as n:
        running = await start_host(
            n, tmp_path, registry_of(game), game_time=0.3, game_memory=64, turn_timeout=None
        )
        sid, (a, b) = await deal(running)
        t0 = time.monotonic()
        r = await a.request("act", session=sid, action={"type": "swap"})
        assert r["error"]["code"] == "internal"
        assert time.monotonic() - t0 < 10
        for c in (a, b):  # every subscriber is told the table ended, and why
            end = await ended_push(c)
            assert (end["outcome"], end["aborted"]) == (None, "game_error")
        assert await a.call("ping") == {"pong": True}  # the host answers on
        running.host.request_shutdown()
    last = log_of(tmp_path, sid)[-1]
    assert (last.type, last.data["aborted"], last.data["fault"]) == ("ended", "game_error", fault)


async def test_a_looping_bot_is_stopped_and_the_other_tables_go_on(tmp_path):
    game = broken_games.BotLoops()  # its bot loops; tables of humans only play on
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry_of(game), game_time=0.3)
        lobby = await running.client()
        sid, (a,) = await deal(running, seats=2, bots=1)
        # seat 0 keeps; the bot (seat 1) is then to act and loops
        turn = None
        while turn is None:
            p = await a.next_push()
            if p["push"] == "turn":
                turn = p
        other, (x, y) = await deal(running)  # another table, played on meanwhile
        await a.call("act", session=sid, action={"type": "keep"}, seq=turn["seq"])
        end = await ended_push(a)
        assert end["aborted"] == "game_error"
        t0 = time.monotonic()
        assert await lobby.call("ping") == {"pong": True}
        assert time.monotonic() - t0 < 1.0
        snap = await x.call("view", session=other)
        assert not snap["ended"]
        running.host.request_shutdown()
    assert log_of(tmp_path, sid)[-1].data["fault"] == "time"


async def test_a_looping_view_ends_the_table_and_is_not_run_again_after_a_restart(tmp_path):
    game = broken_games.ViewLoops()
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry_of(game), game_time=0.3)
        w = await running.client()
        a, b = await running.client(), await running.client()
        sid = (await a.call("create", game="high-card", seats=2))["session"]
        await w.call("watch", session=sid, view=True)  # asks for view pushes
        token = (await a.call("join", session=sid))["token"]
        r = await b.request("join", session=sid)  # the deal: the join's reply view loops
        assert r["error"]["code"] == "internal"
        end = await ended_push(w)
        assert end["aborted"] == "game_error"
        snap = await w.call("view", session=sid)
        assert snap["ended"] and snap["view"] is None
        running.host.request_shutdown()
    t0 = time.monotonic()
    async with trio.open_nursery() as n:
        again = await start_host(n, tmp_path, registry_of(game), game_time=0.3)
        c = await again.client()
        resumed = await c.call("resume", session=sid, token=token)
        assert resumed["ended"] and resumed["view"] is None
        assert time.monotonic() - t0 < 5
        assert again.host.budget.overruns == 0  # the game's view is not run again
        again.host.request_shutdown()


async def test_a_view_that_raises_ends_the_table_and_later_requests_get_its_end(tmp_path):
    game = broken_games.ViewRaises()  # view raises for spectators, redact for seat 1
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry_of(game))
        sid, (a, b) = await deal(running)
        w = await running.client()
        r = await w.request("watch", session=sid)
        assert r["error"]["code"] == "internal"  # that command fails
        end = await ended_push(a)  # and the table ends, telling every subscriber
        assert (end["outcome"], end["aborted"]) == (None, "game_error")
        watched = await w.call("watch", session=sid)  # later requests: its end, view null
        assert watched["ended"] and watched["view"] is None
        running.host.request_shutdown()
    async with trio.open_nursery() as n:  # after a restart too
        again = await start_host(n, tmp_path, registry_of(game))
        c = await again.client()
        assert (await c.call("watch", session=sid))["aborted"] == "game_error"
        again.host.request_shutdown()


async def test_a_game_that_calls_sys_exit_is_a_game_fault_and_the_host_serves_on(tmp_path):
    async with trio.open_nursery() as n:  # a client's command: that command fails
        running = await start_host(n, tmp_path, registry_of(broken_games.DecideExits()))
        sid, (a, b) = await deal(running)
        r = await a.request("act", session=sid, action={"type": "swap"})
        assert r["error"]["code"] == "internal"
        assert await b.call("ping") == {"pong": True}
        assert (await a.call("act", session=sid, action={"type": "keep"}))["seq"] > 0
        running.host.request_shutdown()
    async with trio.open_nursery() as n:  # a host-driven step: the table ends, the host lives
        running = await start_host(n, tmp_path / "bots", registry_of(broken_games.BotExits()))
        sid, (a,) = await deal(running, seats=2, bots=1)
        turn = None
        while turn is None:
            p = await a.next_push()
            turn = p if p["push"] == "turn" else None
        await a.call("act", session=sid, action={"type": "keep"}, seq=turn["seq"])
        assert (await ended_push(a))["aborted"] == "game_error"
        assert await a.call("ping") == {"pong": True}
        running.host.request_shutdown()
    assert log_of(tmp_path / "bots", sid)[-1].data["aborted"] == "game_error"


@pytest.mark.parametrize("game", [broken_games.ViewUnencodable(), broken_games.ViewTooLarge()])
async def test_a_view_that_cannot_be_sent_ends_the_table_and_keeps_the_request_id(tmp_path, game):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry_of(game))
        w = await running.client()
        a, b = await running.client(), await running.client()
        sid = (await a.call("create", game="high-card", seats=2))["session"]
        await a.call("join", session=sid)
        await w.call("watch", session=sid)
        with trio.fail_after(10):  # the reply has the request's id (the client matches by id)
            r = await b.request("join", session=sid)  # the deal: the join's reply view is bad
        assert r["error"]["code"] == "internal"
        assert (await ended_push(w))["aborted"] == "game_error"
        snap = await w.call("view", session=sid)  # its end, without running the view again
        assert snap["ended"] and snap["view"] is None
        running.host.request_shutdown()
    assert log_of(tmp_path, sid)[-1].data["aborted"] == "game_error"


# -- blocking, threads, caught interruptions, memory (host/plugins/budget.py) ------------------


def test_a_step_that_blocks_is_interrupted_after_about_a_second() -> None:
    budget = Budget(0.5, None)
    budget.start()
    try:
        t0 = time.monotonic()
        with pytest.raises(BudgetExceeded) as got, budget.step("a sleep"):
            time.sleep(60)
        took = time.monotonic() - t0
        assert got.value.what == "time" and "blocked" in got.value.message
        assert BLOCKED <= took < BLOCKED + 3  # not the old 5 s backstop
    finally:
        budget.stop()


def test_a_busy_step_is_not_blocked_however_slow_the_machine() -> None:
    """Waiting for a CPU (or for the interpreter lock held by another busy thread) is not
    being blocked: a step under its CPU budget is not interrupted."""
    stop = threading.Event()

    def hog() -> None:  # competes for the interpreter lock the whole time
        while not stop.is_set():
            sum(range(1000))

    budget = Budget(0.5, None)
    budget.start()
    hogs = [threading.Thread(target=hog) for _ in range(2)]
    for t in hogs:
        t.start()
    try:
        with budget.step("busy"):
            t = time.thread_time()
            while time.thread_time() - t < 0.3:
                pass
        assert budget.overruns == 0
    finally:
        stop.set()
        for t in hogs:
            t.join()
        budget.stop()


def test_a_step_cannot_start_a_thread_or_a_process() -> None:
    ran = []
    budget = Budget(0.5, None)
    budget.start()
    try:
        with pytest.raises(BudgetExceeded) as got, budget.step("a thread"):
            threading.Thread(target=lambda: ran.append(1)).start()
        assert got.value.what == "thread"
        with pytest.raises(BudgetExceeded), budget.step("a process"):
            subprocess.run(["true"], check=False)
        with pytest.raises(BudgetExceeded), budget.step("a raw thread"):
            _thread.start_new_thread(ran.append, (2,))
        outside = threading.Thread(target=lambda: ran.append(3))  # outside a step: as usual
        outside.start()
        outside.join()
        assert ran == [3]
    finally:
        budget.stop()


def test_a_game_that_catches_its_interruption_and_returns_is_blamed() -> None:
    budget = Budget(0.05, None)
    budget.start()
    try:
        with budget.step("stubborn", "s1", 4):
            try:
                while True:
                    pass
            except BaseException:  # noqa: BLE001 - what a bad game does
                pass
        assert budget.blamed("s1") is not None
        assert budget.blamed("s1") is None  # asked once
        with budget.step("fine", "s2", 4):
            pass
        assert budget.blamed("s2") is None
    finally:
        budget.stop()


def test_one_allocation_in_c_is_counted_once_it_returns() -> None:
    """The watchdog cannot look while one call into C allocates (it needs the interpreter
    lock): the growth is counted from its look before the step, so it is seen after."""
    budget = Budget(None, 64 << 20)
    budget.start()
    try:
        with pytest.raises(BudgetExceeded) as got, budget.step("a big one", "s1", 1):
            big = b"x" * (200 << 20)
            time.sleep(5)
        assert got.value.what == "memory"
    finally:
        budget.stop()
    del big
    # a fresh budget, whose watchdog looks first after the memory above is freed (an old look
    # from before the del would hide the next allocation's growth)
    budget = Budget(None, 64 << 20)
    budget.start()
    try:
        try:  # a step that closes at once: its session is blamed instead
            with budget.step("a big one", "s2", 1):
                big = b"x" * (200 << 20)
            time.sleep(0.2)
            blame = budget.blamed("s2")
            assert blame is not None and blame[0] == "memory"
        except BudgetExceeded as exc:  # or caught while the step was still open
            assert exc.what == "memory"
        del big
    finally:
        budget.stop()


def test_past_the_host_bound_the_sessions_that_grow_memory_are_blamed() -> None:
    gc.collect()  # what earlier tests left in cycles is freed now, not while this one runs
    budget = Budget(None, None, max_memory=resident_bytes() + (32 << 20))
    budget.start()
    try:
        ballast = mmap.mmap(-1, 96 << 20)  # the host past its bound (not a game's doing): new
        for at in range(0, 96 << 20, mmap.PAGESIZE):  # pages (freed heap could be reused)
            ballast[at] = 1
        deadline = time.monotonic() + 5
        while not budget.over and time.monotonic() < deadline:
            time.sleep(0.02)
        assert budget.over
        time.sleep(3 * TICK)  # the watchdog's last two looks hold the ballast: steps from here
        with budget.step("small", "quiet", 1):
            sum(range(1000))
        kept = []
        for _ in range(3):  # 4 MiB a step: each under OVER_GROWTH, all three past it
            with budget.step("grows", "leaky", 1):
                fresh = mmap.mmap(-1, 4 << 20)  # new pages (freed heap could be reused)
                for at in range(0, 4 << 20, mmap.PAGESIZE):
                    fresh[at] = 1
                kept.append(fresh)
            time.sleep(3 * TICK)
        assert budget.blamed("leaky") is not None and budget.blamed("quiet") is None
        del ballast, kept
    finally:
        budget.stop()


def test_an_interruption_due_as_a_step_closes_never_leaves_it_open() -> None:
    # Python handles a signal as a function starts: the watchdog's, fired during a last long
    # call into C, lands at the start of the step's own __exit__. Raising there would leave the
    # step open for good (every later step unbounded, host code refused threads)
    import types

    from host.plugins import budget as budget_module

    budget = Budget(0.2, None)
    budget.start()
    try:
        exit_frame = types.SimpleNamespace(f_code=budget_module._Step.__exit__.__code__)
        other_frame = types.SimpleNamespace(
            f_code=test_a_step_that_loops_is_interrupted_within_its_time.__code__
        )
        with budget.step("a step", "s1"):
            budget._fired = (budget._step, "time", "ran past 0.2 s", None)
            budget_module._on_signal(0, exit_frame)  # let go: the step is closing
            assert budget_module._open is budget
            with pytest.raises(BudgetExceeded):
                budget_module._on_signal(0, other_frame)  # anywhere else it lands
        assert budget_module._open is None and budget._step == 0
        # the real thing: a step that spins most of its time, then ends in one long call into C
        for _ in range(3):
            try:
                with budget.step("spins, then calls into C", "s2"):
                    t0 = time.thread_time()
                    while time.thread_time() - t0 < 0.17:
                        pass
                    sum(range(6_000_000))
            except BudgetExceeded:
                pass  # landed inside the step: fine
            assert budget_module._open is None and budget._step == 0
            threading.Thread(target=lambda: None).start()  # host code may start threads again
    finally:
        budget.stop()
