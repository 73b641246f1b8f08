"""The budget of game code: how long a step into a game may run and how much memory it may take.

A game plugin is third-party code that runs on the host's one event-loop thread, so a ``decide``
that loops for ever, or an ``evolve`` that allocates without bound, would freeze every table.
Each time the host runs a game (a command, a host-driven step, the pushes after an append, a
log being followed or folded for a replay), it opens a :meth:`Budget.step`: at most ``seconds``
of the event-loop thread's CPU time (so a host descheduled on a busy machine does not fault a
game that did nothing wrong; a game that blocks without using the CPU — a ``sleep``, a read —
is stopped after :data:`WALL_FACTOR` times that in wall time, at least :data:`WALL_MIN`
seconds) and ``memory`` bytes of growth of the process's resident memory. Past either, the
step is interrupted with :class:`BudgetExceeded` — raised in the event-loop thread wherever the
game is — and the host treats it as that game's fault: the command fails (``internal``) and the
session ends as ``aborted: "game_error"`` with the fault named in its log (``fault``:
``"time"`` or ``"memory"``), so a restart finds it over instead of running into it again.

**The mechanism, and why.** A watchdog thread wakes every :data:`TICK` seconds; while a step is
open it compares the event-loop thread's CPU clock (``pthread_getcpuclockid``), the wall clock
and the resident memory with what they were when the watchdog first saw the step, and when one
is past its bound sends the process a signal
(:data:`SIGNAL`) with ``pthread_kill``. Python runs signal handlers in the main thread, between
two bytecodes, so the handler decides *in the event-loop thread itself* whether the step it
was sent for is still the one running, and only then raises: no race can raise it into host
code after the step ended. The cost on the hot path is two attribute writes and one clock read
per step; the watchdog's readings happen only while a step is open (a step shorter than a tick
is never even seen).

We weighed the alternatives. A process per game (or a pool) isolates everything, C code
included, but every call into the game — several per action, and one ``redact`` per record and
viewer — would cross a pipe: about three times the host CPU per action for the built-in games.
Interrupting the main thread with ``PyThreadState_SetAsyncExc`` from the watchdog needs no
signal, but cannot tell for certain that the step it means is still running when the exception
lands. ``setitimer``/``SIGALRM`` per step would cost two system calls per step.

**Limits.** An interruption lands between bytecodes: game code stuck in one long call into C
(a huge regular expression, ``[0] * 10**10``) is stopped only when that call returns (a
``MemoryError`` from an allocation the system refuses is an ordinary game fault). A game that
catches ``BaseException`` and carries on is interrupted again every tick. The budget covers the
event-loop thread; games run in worker threads (``verify``) are bounded by the one-at-a-time
limit of those requests.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import structlog

__all__ = ["SIGNAL", "TICK", "Budget", "BudgetExceeded"]

TICK = 0.02
"""Seconds between two looks of the watchdog at an open step."""
WALL_FACTOR = 10.0
WALL_MIN = 5.0
"""A step may take ``max(WALL_MIN, WALL_FACTOR * seconds)`` wall seconds (the backstop for game
code that blocks without using the CPU)."""

SIGNAL = getattr(signal, "SIGRTMIN", signal.SIGUSR2) + (3 if hasattr(signal, "SIGRTMIN") else 0)
"""The signal the watchdog sends the process when a step is past its budget."""

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _rss() -> int:
    """The process's resident memory, bytes (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


class BudgetExceeded(BaseException):
    """A step into game code ran past its budget (``what``: ``time`` or ``memory``).

    A ``BaseException``, so a game's ``except Exception`` does not swallow it."""

    def __init__(self, what: str, message: str) -> None:
        super().__init__(message)
        self.what = what
        self.message = message


_started = 0  # budgets started (the handler stays installed while any is)
_previous: Any = None
_open: Budget | None = None  # the budget whose step is open now (steps never overlap: each is
# synchronous code on the one event-loop thread)


def _on_signal(signum: int, frame: Any) -> None:
    """The handler, run by Python in the main thread between two bytecodes: it raises only if
    the step the watchdog fired for is still the one running."""
    b = _open
    if b is None:
        return
    fired = b._fired
    if fired is not None and fired[0] == b._step and b._step:
        b._fired = None
        b.overruns += 1
        raise BudgetExceeded(fired[1], fired[2])


class Budget:
    """A host's budget for game code (see the module docstring).

    Args:
        seconds: CPU seconds of the event-loop thread one step may use (None: no time limit;
            wall time is bounded too, see :data:`WALL_FACTOR`).
        memory: how many bytes the resident memory may grow during one step (None: no limit).

    :meth:`start` it once from the main thread (it installs the signal handler, shared by every
    budget of the process, and starts this budget's watchdog), then wrap each step in ``with
    budget.step(what):``; :meth:`stop` at the end. A budget not started (or whose limits are
    both None) bounds nothing.

    Attributes:
        overruns: steps interrupted so far.
    """

    def __init__(self, seconds: float | None = 0.5, memory: int | None = 256 << 20) -> None:
        self.seconds = seconds
        self.memory = memory
        self.overruns = 0
        self._counter = 0
        self._step = 0  # the open step's number (0: none)
        self._what = ""
        self._fired: tuple[int, str, str] | None = None  # (step, what, message) to raise
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._main = 0

    @property
    def active(self) -> bool:
        """The watchdog runs."""
        return self._thread is not None

    def start(self) -> None:
        """Install the handler (main thread only) and start the watchdog; nothing when both
        limits are None."""
        global _started, _previous
        if self._thread is not None or (self.seconds is None and self.memory is None):
            return
        if threading.current_thread() is not threading.main_thread():
            # signal handlers run in the main thread only: a host run in another thread (an
            # embedding, some tests) has no budget; ``gamehost serve`` runs in the main thread
            structlog.get_logger("gamehost.budget").warning(
                "game_budget_off", reason="the host does not run in the main thread"
            )
            return
        self._main = threading.get_ident()
        if _started == 0:
            _previous = signal.signal(SIGNAL, _on_signal)
        _started += 1
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="gamehost budget", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the watchdog (and, with the last budget, put the previous handler back)."""
        global _started
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        _started -= 1
        if _started == 0:
            signal.signal(SIGNAL, _previous or signal.SIG_DFL)

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[None]:
        """Bound the (synchronous) code run inside; ``what`` names it in the error.

        Raises:
            BudgetExceeded: the step ran past its time or grew memory past the bound.
        """
        global _open
        if self._thread is None or _open is not None:  # not started, or inside a step already
            yield
            return
        self._what = what
        self._counter += 1
        self._step = self._counter
        _open = self
        try:
            yield
        finally:
            _open = None
            self._step = 0
            self._fired = None

    # -- the watchdog's side ---------------------------------------------------------------------
    def _watch(self) -> None:
        seen = 0
        base = cpu0 = wall0 = 0.0
        try:
            cpu_clock = time.pthread_getcpuclockid(self._main)
        except (AttributeError, OSError):  # no per-thread clock here: wall time only
            cpu_clock = None
        wall_limit = None
        if self.seconds is not None:
            wall_limit = max(WALL_MIN, WALL_FACTOR * self.seconds)
        while not self._stop.wait(TICK):
            step = self._step
            if not step:
                seen = 0
                continue
            if step != seen:  # a step seen for the first time: it is measured from here
                seen = step
                base = _rss() if self.memory is not None else 0
                cpu0 = time.clock_gettime(cpu_clock) if cpu_clock is not None else 0.0
                wall0 = time.monotonic()
                continue
            what = message = ""
            if self.seconds is not None:
                if cpu_clock is not None:
                    used = time.clock_gettime(cpu_clock) - cpu0
                    if used > self.seconds:
                        what, message = "time", f"{self._what} ran past {self.seconds:g} s"
                wall = time.monotonic() - wall0
                limit = wall_limit if cpu_clock is not None else self.seconds
                if not what and limit is not None and wall > limit:
                    what, message = "time", f"{self._what} took more than {limit:g} s"
            if not what and self.memory is not None:
                grown = _rss() - base
                if grown > self.memory:
                    what = "memory"
                    message = (
                        f"{self._what} grew memory by {int(grown) >> 20} MiB"
                        f" (more than {self.memory >> 20} MiB)"
                    )
            if what and self._step == step:
                self._fired = (step, what, message)
                signal.pthread_kill(self._main, SIGNAL)
