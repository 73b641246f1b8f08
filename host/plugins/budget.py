"""The budget of game code: how long a step into a game may run and how much memory it may take.

A game plugin is third-party code that runs on the host's one event-loop thread, so a ``decide``
that loops for ever, or an ``evolve`` that allocates without bound, would freeze every table.
Each time the host runs a game (a command, a host-driven step, the pushes after an append, a
log being followed or folded for a replay), it opens a :meth:`Budget.step`. Within a step:

- **CPU**: at most ``seconds`` of the event-loop thread's CPU time (so a host descheduled on a
  busy machine does not fault a game that did nothing wrong);
- **blocking**: a game that blocks without using the CPU (a ``sleep``, a read) is stopped once
  it has been blocked :data:`BLOCKED` seconds (plus :data:`BLOCKED_PER_CPU` times the CPU the
  step used, so the waits of a busy step for the interpreter lock do not count against it).
  "Blocked" is the step's wall time less the time the thread ran and the time it waited,
  runnable, for a CPU (the kernel's per-thread ``schedstat``): a loaded machine delays a step
  without making it "blocked". Where ``schedstat`` cannot be read the backstop is
  ``max(WALL_MIN, WALL_FACTOR * seconds)`` of wall time instead;
- **memory**: ``memory`` bytes of growth of the process's resident memory, counted from a
  look of the watchdog from before the step began (so one allocation made in C, during which
  the watchdog cannot look, is still counted once it returns; if the step has closed by then,
  its session is blamed, below);
- **threads**: a game that starts a thread (``threading``, ``_thread``) or a process
  (``fork``, ``subprocess``, ``os.system``, ``exec``: an audit hook) inside a step is stopped
  at that call, which fails: a thread would run the game's code outside any step, where
  nothing bounds it.

Past any of them the step is interrupted with :class:`BudgetExceeded` (``what``: ``time``,
``memory`` or ``thread``), raised in the event-loop thread wherever the game is, and the host
treats it as that game's fault: the command fails (``internal``) and the session ends as
``aborted: "game_error"`` with the fault named in its log (``fault``), so a restart finds it
over instead of running into it again. A game that catches the interruption and returns
normally is faulted all the same: its session is *blamed* (:meth:`Budget.blamed`) and the host
ends it at its next step.

**The host as a whole.** ``max_memory`` bounds the host's resident memory: while it is past
that bound (:attr:`Budget.over`) every step reads the resident memory when it opens and closes
(two reads of ``/proc/self/statm``, about 2 µs each, only then), a session whose steps grow it by
:data:`OVER_GROWTH` in all is blamed, a step the watchdog sees growing it by as much is
interrupted, and the host refuses new sessions (``overloaded``). Memory a game keeps where the
host cannot free it (a module-level list) stays until the host restarts: the host stays usable,
without new sessions, until then.

**When the step cannot be interrupted** (``hang``). An interruption lands between two
bytecodes: game code stuck in one long call into C (``sum(range(10**15))``, a catastrophic
regular expression) never gives the interpreter back, and a game that catches
``BaseException`` and loops keeps it. For those the last resort is to end the process: the
watchdog keeps ``faulthandler.dump_traceback_later(hang, exit=True)`` armed — a timer that runs
in a C thread and needs no interpreter lock — and pushes it back about once a second
(:data:`REARM`) unless one step has been open for longer than that. A step stuck in C that
holds the interpreter lock stops the watchdog itself, and one that waits without it is no
longer pushed back, so the timer fires about ``hang`` seconds after the step began (within
:data:`REARM`): the traceback of every thread goes to the hang file and the process exits with
status 1. A step that ignored its interruption is ended sooner, by
the watchdog itself, :data:`IGNORED_GRACE` seconds after the interruption. Before each step
the host writes which session and seq it is running into a small memory-mapped file (the crash
marker, ``host.net.marker``: a memory write, no system call), cleared after; a host that died
inside a game's code — by this watchdog, or by the game itself (``os._exit``, a crash in C) —
finds the marker on its next start and ends that session before its code runs again (see
``host.net.marker`` for when). Something must start the host again: ``serve --supervise`` (or
``--workers N``) does, or a service manager (systemd's ``Restart=on-failure``).

**The mechanism, and why.** A watchdog thread wakes every :data:`TICK` seconds; while a step is
open it compares the event-loop thread's CPU clock (``pthread_getcpuclockid``), its
``schedstat``, the wall clock and the resident memory with what they were when it first saw
the step, and when one is past its bound sends the process a signal (:data:`SIGNAL`) with
``pthread_kill``. Python runs signal handlers in the main thread, between two bytecodes, so
the handler decides *in the event-loop thread itself* whether the step it was sent for is still
the one running (and, for blocking, whether the thread really was blocked: the kernel updates
a waiting thread's run-queue time only once it runs), and only then raises: no race can raise
it into host code after the step ended. The cost on the hot path is a few attribute writes and
the marker's two memory writes per step (about 0.5 µs; ``gamehost bench --no-budget`` measures
the whole); the watchdog's readings happen on its own thread (a step shorter than a tick is
never even seen).

We weighed the alternatives. A process per game (or a pool) isolates everything, C code
included, but every call into the game — several per action, and one ``redact`` per record and
viewer — would cross a pipe: about three times the host CPU per action for the built-in games.
Interrupting the main thread with ``PyThreadState_SetAsyncExc`` from the watchdog needs no
signal, but cannot tell for certain that the step it means is still running when the exception
lands. ``setitimer``/``SIGALRM`` per step would cost two system calls per step, and arming
``faulthandler`` per step costs a thread start (about 60 µs) per step: the watchdog re-arms it
instead. Reading the resident memory per step costs a system call per step: it is read only
while the host is past ``max_memory``.

**Limits.** A one-shot allocation in C (``b"x" * 2**31``) cannot be stopped while it runs: the
host's memory passes the bounds for that long, and the step (or, if it has closed already, its
session: the one that ran last) is faulted once the call returns. Threads or processes a game
starts at import time, outside any step, are not seen. A host stopped (``SIGSTOP``) inside a
step for more than :data:`BLOCKED` seconds faults that step's game (it looks blocked), and one
stopped for more than ``hang`` seconds exits when continued. Games run in worker threads
(``verify``) and worker processes are bounded by those requests' own limits.
"""

from __future__ import annotations

import _thread
import faulthandler
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any, Protocol

import structlog

__all__ = [
    "BLOCKED",
    "HANG_STATUS",
    "IGNORED_GRACE",
    "OVER_GROWTH",
    "SIGNAL",
    "TICK",
    "Budget",
    "BudgetExceeded",
    "StepMarker",
]

log = structlog.get_logger("gamehost.budget")

TICK = 0.02
"""Seconds between two looks of the watchdog at an open step."""
BLOCKED = 1.0
"""Seconds a step may spend blocked (neither running nor waiting for a CPU) before it is
interrupted, plus :data:`BLOCKED_PER_CPU` times the CPU time it used."""
BLOCKED_PER_CPU = 4.0
WALL_FACTOR = 10.0
WALL_MIN = 5.0
"""Without ``schedstat``: a step may take ``max(WALL_MIN, WALL_FACTOR * seconds)`` wall
seconds (the backstop for game code that blocks without using the CPU)."""
IGNORED_GRACE = 1.0
"""Seconds a step may go on after its interruption was raised in it (a game that caught it)
before the watchdog ends the process (when ``hang`` is set)."""
REARM = 1.0
"""Seconds between two pushes of the hang timer while the host is not stuck in a step."""
OVER_GROWTH = 8 << 20
"""Bytes of resident memory the steps of one session may add, in all, while the host is past
``max_memory``, before the session is faulted."""
HANG_STATUS = 1
"""The exit status of a host ended by the hang watchdog (``faulthandler``'s)."""

SIGNAL = getattr(signal, "SIGRTMIN", signal.SIGUSR2) + (3 if hasattr(signal, "SIGRTMIN") else 0)
"""The signal the watchdog sends the process when a step is past its budget."""

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_statm: tuple[int, int] | None = None  # (pid, descriptor of /proc/self/statm) kept open


def resident_bytes() -> int:
    """The process's resident memory, bytes (0 where /proc is not there); one ``pread``."""
    global _statm
    pid = os.getpid()
    try:
        if _statm is None or _statm[0] != pid:  # opened by the parent of a fork: reopen
            _statm = (pid, os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC))
        return int(os.pread(_statm[1], 128, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


class _SchedStat:
    """A thread's ``schedstat``: nanoseconds run and waited runnable (None: not readable)."""

    def __init__(self, native_id: int) -> None:
        self.fd: int | None = None
        try:
            self.fd = os.open(f"/proc/self/task/{native_id}/schedstat", os.O_RDONLY | os.O_CLOEXEC)
            if self.read() is None:
                self.close()
        except OSError:
            self.fd = None

    def read(self) -> tuple[float, float] | None:
        """(seconds run, seconds waited for a CPU), or None."""
        if self.fd is None:
            return None
        try:
            run, wait = os.pread(self.fd, 128, 0).split()[:2]
            return int(run) / 1e9, int(wait) / 1e9
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class StepMarker(Protocol):
    """What the budget needs of a crash marker (``host.net.marker.CrashMarker``)."""

    hang_file: IO[str] | None

    def enter(self, session: str | None, seq: int) -> None:
        """A step into ``session``'s game code at ``seq`` begins."""
        ...

    def leave(self) -> None:
        """The step ended."""
        ...

    def hung(self) -> None:
        """The process is about to end: the open step ignored its interruption."""
        ...


class BudgetExceeded(BaseException):
    """A step into game code ran past its budget (``what``: ``time``, ``memory`` or
    ``thread``).

    A ``BaseException``, so a game's ``except Exception`` does not swallow it."""

    def __init__(self, what: str, message: str) -> None:
        super().__init__(message)
        self.what = what
        self.message = message


_started = 0  # budgets started (the handler stays installed while any is)
_previous: Any = None
_open: Budget | None = None  # the budget whose step is open now (steps never overlap: each is
# synchronous code on the one event-loop thread)
_hang_owner: Budget | None = None  # the budget that keeps the (process-wide) hang timer
_guards_installed = False


def _on_signal(signum: int, frame: Any) -> None:
    """The handler, run by Python in the main thread between two bytecodes: it raises only if
    the step the watchdog fired for is still the one running (and its check still holds)."""
    b = _open
    if b is None:
        return
    if frame is not None and frame.f_code in _STEP_EDGES:
        # the step is opening or closing (Python looks for signals as a function starts: this
        # is the start of ``_Step.__exit__``, before it clears the open step): raising here
        # would leave the step open for good. It closes now; its overrun is let go.
        return
    fired = b._fired
    if fired is not None and fired[0] == b._step and b._step:
        b._fired = None
        check = fired[3]
        if check is not None and not check():
            return
        b.overruns += 1
        b._raised = (b._step, fired[1], fired[2])
        raise BudgetExceeded(fired[1], fired[2])


def _refuse_in_step(kind: str) -> None:
    """Called where a thread or process would start: inside a step of the event-loop thread
    (game code) it fails with :class:`BudgetExceeded` (``thread``)."""
    b = _open
    if b is not None and threading.get_ident() == b._main:
        message = f"{b._what} started a {kind}"
        b.overruns += 1
        b._raised = (b._step, "thread", message)
        raise BudgetExceeded("thread", message)


def _install_guards() -> None:
    """Wrap ``threading.Thread.start`` and ``_thread.start_new_thread``, and add an audit hook
    for process starts, so game code cannot start them inside a step (once per process; outside
    a step they cost one global read)."""
    global _guards_installed
    if _guards_installed:
        return
    _guards_installed = True
    thread_start = threading.Thread.start
    raw_start = _thread.start_new_thread

    def start(self: threading.Thread) -> None:
        _refuse_in_step("thread")
        thread_start(self)

    def start_new_thread(*args: Any, **kwargs: Any) -> int:
        _refuse_in_step("thread")
        return raw_start(*args, **kwargs)

    threading.Thread.start = start  # type: ignore[method-assign]
    _thread.start_new_thread = start_new_thread  # type: ignore[assignment]
    processes = ("os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn")

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if _open is not None and (event in processes or event == "subprocess.Popen"):
            _refuse_in_step("process")

    sys.addaudithook(audit)


class Budget:
    """A host's budget for game code (see the module docstring).

    Args:
        seconds: CPU seconds of the event-loop thread one step may use (None: no time limit;
            blocking is bounded too, see :data:`BLOCKED`).
        memory: how many bytes the resident memory may grow during one step (None: no limit).
        hang: seconds after which a step that cannot be interrupted ends the process (None:
            never; see the module docstring).
        max_memory: bytes of resident memory past which the host refuses to grow (None: no
            bound; see the module docstring).
        marker: the crash marker written before each step (None: none).

    :meth:`start` it once from the main thread (it installs the signal handler, shared by every
    budget of the process, and starts this budget's watchdog), then wrap each step in ``with
    budget.step(what, session, seq):``; :meth:`stop` at the end. A budget not started (or
    whose limits are all None) bounds nothing.

    Attributes:
        overruns: steps interrupted so far.
        over: the host's resident memory is past ``max_memory`` now (the watchdog's last look).
    """

    def __init__(
        self,
        seconds: float | None = 0.5,
        memory: int | None = 256 << 20,
        *,
        hang: float | None = None,
        max_memory: int | None = None,
        marker: StepMarker | None = None,
    ) -> None:
        self.seconds = seconds
        self.memory = memory
        self.hang = hang
        self.max_memory = max_memory
        self.marker = marker
        self.overruns = 0
        self.over = False
        self._counter = 0
        self._step = 0  # the open step's number (0: none)
        self._what = ""
        self._session: str | None = None  # the session of the open step, or of the last one
        # (step, what, message, check) to raise; check (if any) runs in the handler first
        self._fired: tuple[int, str, str, Callable[[], bool] | None] | None = None
        self._raised: tuple[int, str, str] | None = None  # the last interruption raised
        self._blamed: dict[str, tuple[str, str]] = {}  # session -> (what, message)
        self._growth: dict[str, int] = {}  # session -> bytes its steps added while over
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._main = 0
        self._native = 0

    @property
    def active(self) -> bool:
        """The watchdog runs."""
        return self._thread is not None

    def start(self) -> None:
        """Install the handler (main thread only) and start the watchdog; nothing when every
        limit is None."""
        global _started, _previous, _hang_owner
        limits = (self.seconds, self.memory, self.hang, self.max_memory)
        if self._thread is not None or all(x is None for x in limits):
            return
        if threading.current_thread() is not threading.main_thread():
            # signal handlers run in the main thread only: a host run in another thread (an
            # embedding, some tests) has no budget; ``gamehost serve`` runs in the main thread
            log.warning("game_budget_off", reason="the host does not run in the main thread")
            return
        self._main = threading.get_ident()
        self._native = threading.get_native_id()
        if _started == 0:
            _previous = signal.signal(SIGNAL, _on_signal)
        _started += 1
        _install_guards()
        if self.hang is not None and _hang_owner is None:
            _hang_owner = self
            self._arm()
        self._stop.clear()
        reads_memory = self.memory is not None or self.max_memory is not None
        rss = resident_bytes() if reads_memory else 0  # before any step: the first base
        # the steps begun so far, read here: the thread may first run after a step has begun
        args = (rss, self._counter)
        self._thread = threading.Thread(
            target=self._watch, args=args, name="gamehost budget", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the watchdog (and, with the last budget, put the previous handler back)."""
        global _started, _hang_owner
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if _hang_owner is self:
            faulthandler.cancel_dump_traceback_later()
            _hang_owner = None
        _started -= 1
        if _started == 0:
            signal.signal(SIGNAL, _previous or signal.SIG_DFL)

    def step(self, what: str, session: str | None = None, seq: int = 0) -> _Step:
        """Bound the (synchronous) code run inside (``with budget.step(...):``); ``what`` names
        it in the error, ``session`` and ``seq`` (the last seq of its log) say whose game code it
        runs, for the crash marker and for blame.

        Raises:
            BudgetExceeded: the step ran past its time or memory, or started a thread.
        """
        return _Step(self, what, session, seq)

    def _close_step(
        self, session: str | None, step: int, returned: bool, over: bool, rss0: int
    ) -> None:
        """What follows a step of ``session`` once it closed (:class:`_Step`): the crash
        marker left, blame for an interruption the game caught or a memory bound it passed."""
        self._step = 0
        fired, self._fired = self._fired, None
        marker = self.marker
        if marker is not None:
            marker.leave()
        if session is not None:
            raised = self._raised
            if returned and raised is not None and raised[0] == step:
                # interrupted, yet the step returned: the game caught it; faulted all the same
                self._blamed.setdefault(session, (raised[1], raised[2]))
            elif fired is not None and fired[0] == step and fired[1] == "memory":
                # past its memory bound, but closed before the interruption landed
                self._blamed.setdefault(session, (fired[1], fired[2]))
            if over:
                self._grew(session, resident_bytes() - rss0)

    def blamed(self, session: str) -> tuple[str, str] | None:
        """``(what, message)`` if ``session``'s game is at fault for something the budget
        found after its step had closed (a caught interruption, memory grown past the host's
        bound); the session's driver then ends it. Asked once: the blame is dropped."""
        if not self._blamed:
            return None
        return self._blamed.pop(session, None)

    def _grew(self, session: str, grown: int) -> None:
        """A step of ``session`` grew the resident memory by ``grown`` bytes while the host
        was past its bound."""
        if grown <= 0:
            return
        total = self._growth[session] = self._growth.get(session, 0) + grown
        if total > OVER_GROWTH:
            del self._growth[session]
            bound = (self.max_memory or 0) >> 20
            self._blamed.setdefault(
                session,
                (
                    "memory",
                    f"its steps grew memory by {total >> 20} MiB past the host's {bound} MiB",
                ),
            )

    # -- the watchdog's side ---------------------------------------------------------------------
    def _arm(self) -> None:
        """(Re)arm the process-wide hang timer: the process ends ``hang`` seconds from now
        unless it is armed again before."""
        marker = self.marker
        out = marker.hang_file if marker is not None and marker.hang_file is not None else None
        faulthandler.dump_traceback_later(self.hang, exit=True, file=out or sys.stderr)  # type: ignore[arg-type]

    def _hang_exit(self, why: str) -> None:
        """End the process now (the open step ignored its interruption): the marker says so,
        the host log and the hang file get why and every thread's traceback."""
        marker = self.marker
        if marker is not None:
            marker.hung()
        log.critical("game_hang", step=self._what, session=self._session, error=why)
        out = marker.hang_file if marker is not None and marker.hang_file is not None else None
        try:
            faulthandler.dump_traceback(file=out or sys.stderr, all_threads=True)  # type: ignore[arg-type]
            (out or sys.stderr).flush()
        finally:
            os._exit(HANG_STATUS)

    def _fire(self, step: int, what: str, message: str, check: Callable[[], bool] | None) -> None:
        if self._step != step:
            return
        self._fired = (step, what, message, check)
        signal.pthread_kill(self._main, SIGNAL)
        session = self._session
        if what == "memory" and self._step != step and session is not None:
            # the step closed before the handler could raise in it: its session is to blame
            # (what it allocated is still held, or was: the bound is passed all the same)
            self._blamed.setdefault(session, (what, message))

    def _watch(self, prev: int, begun: int) -> None:
        try:
            cpu_clock = time.pthread_getcpuclockid(self._main)
        except (AttributeError, OSError):  # no per-thread clock here: wall time only
            cpu_clock = None
        sched = _SchedStat(self._native)
        reads_memory = self.memory is not None or self.max_memory is not None
        wall_limit = None
        if self.seconds is not None:
            wall_limit = max(WALL_MIN, WALL_FACTOR * self.seconds)
        seen = 0  # the open step the watchdog has seen (0: none)
        # the last two looks, oldest first: (steps begun, resident memory, a step was open).
        # One allocation in C holds the watchdog off while it runs, but the look under way
        # when it began may read the memory in the middle of it: two looks bracket it.
        looks = [(begun, prev, False), (begun, prev, False)]
        base = 0  # resident memory before the seen step
        cpu0 = wall0 = 0.0
        sched0: tuple[float, float] | None = None
        raised_at: float | None = None  # when the seen step's interruption was first noticed
        last_arm = time.monotonic()
        try:
            while not self._stop.wait(TICK):
                now = time.monotonic()
                counter = self._counter  # before the memory: a step after it is in the next look
                rss = resident_bytes() if reads_memory else 0
                step = self._step
                if self.max_memory is not None and (rss > self.max_memory) != self.over:
                    self.over = not self.over
                    if self.over:
                        log.error(
                            "host_memory_over", rss_mib=rss >> 20, bound=self.max_memory >> 20
                        )
                    else:
                        self._growth.clear()
                        log.warning("host_memory_under", rss_mib=rss >> 20)
                if not step:
                    ran = counter != looks[0][0] or looks[0][2] or looks[1][2]
                    if ran:
                        self._jumped(rss - looks[0][1])
                elif step != seen:  # a step seen for the first time: measured from here
                    seen = step
                    base = looks[0][1]
                    cpu0 = time.clock_gettime(cpu_clock) if cpu_clock is not None else 0.0
                    wall0 = now
                    sched0 = sched.read()
                    raised_at = None
                    self._check_memory(step, rss - base)
                else:
                    self._check(
                        step, now, rss - base, cpu_clock, cpu0, wall0, sched, sched0, wall_limit
                    )
                    raised = self._raised
                    if raised is not None and raised[0] == step:  # interrupted, still running
                        if raised_at is None:
                            raised_at = now
                        elif self.hang is not None and now - raised_at > IGNORED_GRACE:
                            self._hang_exit(
                                f"{self._what} went on {IGNORED_GRACE:g} s after it was"
                                f" interrupted ({raised[2]})"
                            )
                stuck = step and step == seen and now - wall0 > REARM
                if _hang_owner is self and not stuck and now - last_arm >= REARM:
                    self._arm()  # not stuck in a step: push the timer back
                    last_arm = now
                looks = [looks[1], (counter, rss, bool(step))]
                if not step:
                    seen = 0
        finally:
            sched.close()

    def _jumped(self, grown: int) -> None:
        """Memory grew by ``grown`` bytes over the last two looks, while steps ran and none is
        open now: the step that ran last (one allocation in C, which held the watchdog off) is
        to blame, through its session."""
        session = self._session
        if self.memory is None or grown <= self.memory or session is None:
            return
        message = f"a step grew memory by {grown >> 20} MiB (more than {self.memory >> 20} MiB)"
        self._blamed.setdefault(session, ("memory", message))

    def _check_memory(self, step: int, grown: int) -> None:
        if self.memory is not None and grown > self.memory:
            message = (
                f"{self._what} grew memory by {grown >> 20} MiB (more than {self.memory >> 20} MiB)"
            )
            self._fire(step, "memory", message, None)
        elif self.over and grown > OVER_GROWTH:
            bound = (self.max_memory or 0) >> 20
            message = f"{self._what} grew memory by {grown >> 20} MiB past the host's {bound} MiB"
            self._fire(step, "memory", message, None)

    def _check(
        self,
        step: int,
        now: float,
        grown: int,
        cpu_clock: int | None,
        cpu0: float,
        wall0: float,
        sched: _SchedStat,
        sched0: tuple[float, float] | None,
        wall_limit: float | None,
    ) -> None:
        """The looks at a step seen before: time, blocking, memory."""
        if self.seconds is not None:
            used = 0.0
            if cpu_clock is not None:
                used = time.clock_gettime(cpu_clock) - cpu0
                if used > self.seconds:
                    self._fire(step, "time", f"{self._what} ran past {self.seconds:g} s", None)
                    return
            wall = now - wall0
            if sched0 is not None:
                if self._blocked(sched, sched0, wall0) > BLOCKED + BLOCKED_PER_CPU * used:
                    limit = BLOCKED + BLOCKED_PER_CPU * used

                    def still() -> bool:  # the kernel counts a wait for a CPU once it ends
                        return self._blocked(sched, sched0, wall0) > limit

                    message = f"{self._what} was blocked for more than {limit:.2g} s"
                    self._fire(step, "time", message, still)
                    return
            else:
                limit = wall_limit if cpu_clock is not None else self.seconds
                if limit is not None and wall > limit:
                    self._fire(step, "time", f"{self._what} took more than {limit:g} s", None)
                    return
        self._check_memory(step, grown)

    @staticmethod
    def _blocked(sched: _SchedStat, sched0: tuple[float, float], wall0: float) -> float:
        """Seconds since ``wall0`` the thread neither ran nor waited for a CPU."""
        got = sched.read()
        if got is None:
            return -math.inf
        return (time.monotonic() - wall0) - (got[0] - sched0[0]) - (got[1] - sched0[1])


class _Step:
    """One :meth:`Budget.step` (a context manager; a class rather than a generator, for it is
    entered several times per move)."""

    __slots__ = ("active", "budget", "over", "rss0", "seq", "session", "step", "what")

    def __init__(self, budget: Budget, what: str, session: str | None, seq: int) -> None:
        self.budget = budget
        self.what = what
        self.session = session
        self.seq = seq
        self.active = False

    def __enter__(self) -> None:
        global _open
        b = self.budget
        if b._thread is None or _open is not None:  # not started, or inside a step already
            return
        self.active = True
        b._what = self.what
        b._counter += 1
        self.step = b._step = b._counter
        b._session = self.session
        marker = b.marker
        if marker is not None:
            marker.enter(self.session, self.seq)
        self.over = over = b.over
        self.rss0 = resident_bytes() if over else 0
        _open = b

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        global _open
        if not self.active:
            return
        _open = None
        self.active = False
        self.budget._close_step(self.session, self.step, exc_type is None, self.over, self.rss0)


_STEP_EDGES = frozenset({_Step.__enter__.__code__, _Step.__exit__.__code__})
"""The code of a step's own opening and closing, where :func:`_on_signal` never raises."""
