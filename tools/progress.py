"""Progress of a long job on stdout: a rich bar on a terminal, plain periodic lines otherwise.

``gamehost chaos``, ``replay --verify`` (many logs, or one long one) and ``check`` show their
progress with a :class:`Progress`; ``import`` and ``export`` with their own bar per file
(``tools.db.Progress``), on the same rule:

- stdout is a terminal: a rich progress bar (what, a bar, done of total, the rate, the time
  elapsed, a short status), drawn in place and gone once the job ends (its result lines stay);
- otherwise (a pipe, a file, CI): one plain line every :func:`every` seconds (5 s by default,
  ``$GAMEHOST_PROGRESS_EVERY`` to change it; 0: every update), e.g.
  ``verify: 120/500 logs (24%), 31.8 logs/s, 4 s; 1 differs``; nothing for a job done sooner.
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Any, TextIO

__all__ = ["EVERY_ENV", "Progress", "every"]

EVERY_ENV = "GAMEHOST_PROGRESS_EVERY"
"""The environment variable that sets the seconds between two plain progress lines."""


def every(default: float = 5.0) -> float:
    """Seconds between two plain progress lines: ``$GAMEHOST_PROGRESS_EVERY`` when it is a
    number >= 0, else ``default``."""
    try:
        value = float(os.environ.get(EVERY_ENV, ""))
    except ValueError:
        return default
    return value if math.isfinite(value) and value >= 0 else default


class Progress:
    """The progress of one job (a context manager: the bar is drawn while inside).

    Args:
        what: the job's name, first on every line (``verify``, ``chaos``).
        total: how many units make the whole job (None: not known yet; :meth:`update` may
            give it later).
        unit: what is counted (``logs``, ``records``, ``sessions ended``).
        out: the stream (default: stdout).
        terminal: force the bar (True) or the lines (False); default: whether ``out`` is one.
        interval: seconds between plain lines (default: :func:`every`).
    """

    def __init__(
        self,
        what: str,
        total: int | None = None,
        unit: str = "",
        *,
        out: TextIO | None = None,
        terminal: bool | None = None,
        interval: float | None = None,
    ) -> None:
        from rich.console import Console

        self.what = what
        self.total = total
        self.unit = unit
        self.out = out if out is not None else sys.stdout
        self.interval = every() if interval is None else interval
        self.console = Console(file=self.out, force_terminal=terminal, highlight=False)
        self.bar: Any = None
        self._task: Any = None
        self.done = 0
        self.status = ""
        self._start = time.monotonic()
        self._last = self._start
        self.lines = 0
        """Plain lines printed so far."""

    @property
    def is_terminal(self) -> bool:
        return bool(self.console.is_terminal)

    def __enter__(self) -> Progress:
        self._start = self._last = time.monotonic()
        if self.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import Progress as Bar

            self.bar = Bar(
                TextColumn("{task.description}"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TextColumn(self.unit),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[status]}"),
                console=self.console,
                transient=True,
            )
            self.bar.__enter__()
            self._task = self.bar.add_task(self.what, total=self.total, rate="", status="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None

    def _rate(self) -> str:
        took = time.monotonic() - self._start
        if took <= 0 or not self.done:
            return ""
        return f"{self.done / took:,.1f} {self.unit}/s".strip()

    def update(
        self, done: int | None = None, *, total: int | None = None, status: str | None = None
    ) -> None:
        """The job reached ``done`` units (of ``total``, if it is known now), with ``status``
        (a short text: what fails so far, the phase)."""
        if done is not None:
            self.done = done
        if total is not None:
            self.total = total
        if status is not None:
            self.status = status
        if self.bar is not None:
            self.bar.update(
                self._task,
                completed=self.done,
                total=self.total,
                rate=self._rate(),
                status=self.status,
            )
            return
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self.line()

    def advance(self, n: int = 1, status: str | None = None) -> None:
        """``n`` more units done."""
        self.update(self.done + n, status=status)

    def line(self) -> None:
        """Print the plain line now (off a terminal)."""
        of = f"/{self.total:,}" if self.total is not None else ""
        pct = f" ({100 * self.done // self.total}%)" if self.total else ""
        took = time.monotonic() - self._start
        rate = self._rate()
        parts = [f"{self.what}: {self.done:,}{of} {self.unit}{pct}".replace("  ", " ")]
        if rate:
            parts.append(rate)
        parts.append(f"{took:.0f} s")
        text = ", ".join(parts) + (f"; {self.status}" if self.status else "")
        print(text, file=self.out, flush=True)
        self.lines += 1

    def print(self, text: str) -> None:
        """A result line (above the bar on a terminal)."""
        if self.bar is not None:
            self.bar.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, file=self.out, flush=True)
