"""Python's cyclic garbage collector in a host process: tuned, kept off what loading made, and
timed.

CPython frees most objects by reference counting; the cyclic collector is what finds garbage
that refers to itself. It runs when allocations pass its thresholds and, while it runs, nothing
else in the process does: a collection of the oldest generation walks every tracked object of
the heap, so on a host holding many tables it is a pause of every table at once (on the
project's bench at 100 tables, 104-113 ms per full collection with the interpreter's defaults).
:func:`tune` does three things (``gamehost serve`` calls it; ``serve --gc default`` leaves the
interpreter's defaults, to compare):

- **thresholds** (:data:`THRESHOLDS`): the youngest generation is collected after
  ``THRESHOLDS[0]`` net allocations of tracked objects instead of 700, so short-lived objects
  (a move's events, pushes and states) are mostly freed by reference counting before a
  collection sees them, and the older generations after ``THRESHOLDS[1]`` and ``THRESHOLDS[2]``
  collections of the one below;
- **freezing** (:func:`freeze`): what start-up made (modules, the games, the sessions loaded
  from the store) is collected once and then moved to the permanent generation, which no
  collection walks; such objects are still freed by reference counting;
- **timing** (:class:`Pauses`): every collection is timed through ``gc.callbacks`` (two clock
  reads), by generation: how many, their total and the longest. The host logs them when it
  stops (``gc_pauses``) and exports them as metrics (``gamehost_gc_*``).

The memory this costs is garbage with cycles that waits longer to be found (bounded: a
collection still runs after ``THRESHOLDS[0]`` allocations) and whatever frozen object dies in a
cycle (it is never collected): the hot path avoids making cycles, so neither grows with play.
"""

from __future__ import annotations

import gc
import time
from typing import Any, Literal

import attrs

__all__ = ["DEFAULT_THRESHOLDS", "THRESHOLDS", "GcMode", "Pauses", "freeze", "pauses", "tune"]

GcMode = Literal["tuned", "default"]
"""``tuned``: :func:`tune` sets :data:`THRESHOLDS` and the host freezes what loading made;
``default``: the interpreter's thresholds, nothing frozen (both are timed)."""

THRESHOLDS = (50_000, 20, 100)
"""``gc.set_threshold`` of a tuned host: net allocations of tracked objects before the youngest
generation is collected, then collections of each generation before the next older one is."""

DEFAULT_THRESHOLDS = (700, 10, 10)
"""CPython's own thresholds (what ``serve --gc default`` keeps)."""


@attrs.define
class Pauses:
    """Every collection since :meth:`install`, by generation (0, 1, 2): ``count``, ``total``
    seconds and ``longest`` seconds (wall clock: what every table waits), ``cpu_total`` and
    ``cpu_longest`` (the CPU time of the collecting thread: on a shared machine the wall clock
    also counts the time the process waited for a core); ``collected``: unreachable objects
    found (garbage that only the collector could free)."""

    count: list[int] = attrs.field(factory=lambda: [0, 0, 0])
    total: list[float] = attrs.field(factory=lambda: [0.0, 0.0, 0.0])
    longest: list[float] = attrs.field(factory=lambda: [0.0, 0.0, 0.0])
    cpu_total: list[float] = attrs.field(factory=lambda: [0.0, 0.0, 0.0])
    cpu_longest: list[float] = attrs.field(factory=lambda: [0.0, 0.0, 0.0])
    collected: list[int] = attrs.field(factory=lambda: [0, 0, 0])
    freezes: list[float] = attrs.field(factory=list)
    """Seconds each :func:`freeze` took (its full collection is not counted above)."""
    _began: float = 0.0
    _began_cpu: float = 0.0
    _off: bool = False

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if self._off:
            return
        if phase == "start":
            self._began_cpu = time.thread_time()
            self._began = time.perf_counter()
            return
        took = time.perf_counter() - self._began
        cpu = time.thread_time() - self._began_cpu
        g = info["generation"]
        self.count[g] += 1
        self.total[g] += took
        if took > self.longest[g]:
            self.longest[g] = took
        self.cpu_total[g] += cpu
        if cpu > self.cpu_longest[g]:
            self.cpu_longest[g] = cpu
        self.collected[g] += info["collected"]

    def install(self) -> None:
        """Time every collection from now on (idempotent)."""
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def uninstall(self) -> None:
        """Stop timing collections."""
        while self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def summary(self) -> dict[str, Any]:
        """The figures as JSON-ready lists by generation (milliseconds), and the longest pause
        of any generation: ``{"collections": [n0, n1, n2], "total_ms": [...], "longest_ms":
        [...], "cpu_total_ms": [...], "cpu_longest_ms": [...], "collected": [...], "max_ms":
        float, "cpu_max_ms": float, "thresholds": [t0, t1, t2], "frozen":
        objects in the permanent generation, "freeze_ms": [each freeze]}``."""
        return {
            "collections": list(self.count),
            "total_ms": [round(t * 1000, 3) for t in self.total],
            "longest_ms": [round(t * 1000, 3) for t in self.longest],
            "cpu_total_ms": [round(t * 1000, 3) for t in self.cpu_total],
            "cpu_longest_ms": [round(t * 1000, 3) for t in self.cpu_longest],
            "collected": list(self.collected),
            "max_ms": round(max(self.longest) * 1000, 3),
            "cpu_max_ms": round(max(self.cpu_longest) * 1000, 3),
            "thresholds": list(gc.get_threshold()),
            "frozen": gc.get_freeze_count(),
            "freeze_ms": [round(t * 1000, 3) for t in self.freezes],
        }


pauses = Pauses()
"""The process's collection timings (one collector per process)."""


def tune(mode: GcMode = "tuned") -> None:
    """Set the process's collector up for a host: :data:`THRESHOLDS` (``tuned``) or
    :data:`DEFAULT_THRESHOLDS` (``default``); time collections (:data:`pauses`) either way;
    and, when tuned, :func:`freeze` what exists now (modules, the registry).

    Raises:
        ValueError: an unknown mode.
    """
    if mode not in ("tuned", "default"):
        raise ValueError(f"gc mode is tuned or default, not {mode!r}")
    pauses.install()
    gc.set_threshold(*(THRESHOLDS if mode == "tuned" else DEFAULT_THRESHOLDS))
    if mode == "tuned":
        freeze()


def freeze() -> float:
    """Collect everything once, then move every tracked object to the permanent generation
    (``gc.freeze``): later collections skip them. Returns the seconds it took (a pause: call it
    where the host waits anyway, after start-up or loading)."""
    began = time.perf_counter()
    pauses._off = True
    try:
        gc.collect()
        gc.freeze()
    finally:
        pauses._off = False
    took = time.perf_counter() - began
    pauses.freezes.append(took)
    return took
