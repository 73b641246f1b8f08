"""Python's cyclic garbage collector in a host process: kept off the hot path, and timed.

CPython frees most objects by reference counting; the cyclic collector is what finds garbage
that refers to itself. It runs when allocations pass its thresholds and, while it runs, nothing
else in the process does. With the interpreter's defaults a collection of the oldest generation
walks every tracked object of the heap (about 360,000 at 1,000 tables, 100 per session or
connection), so it is a pause of every table at once: hundreds of milliseconds at 1,000 tables,
long enough for a game step that it interrupts to run past its time budget.

A host's objects mostly live long (a table keeps the states of its last records, a connection
its tasks) or die young by reference counting (the hot path makes no cycles: a test holds it
to that), so the collector finds almost nothing, and walking old objects again and again is
only cost. :func:`tune` (``gamehost serve`` calls it; ``serve --gc default`` keeps the
interpreter's defaults, to compare) therefore:

- **freezes** (``gc.freeze``) what start-up made, what loading the stored sessions made (the
  host calls :func:`freeze` once they are loaded), and, after every collection, what survived
  it: each object is walked by the collector once, in the first young collection it lives
  through, then moves to the permanent generation, which no automatic collection walks. Frozen
  objects are still freed by reference counting when they die. A pause is then as long as the
  objects made since the last collection that are still alive, however many tables there are;
- sets :data:`THRESHOLDS`: the young generation is collected after ``THRESHOLDS[0]`` net
  allocations of tracked objects;
- **collects the young generation every :data:`YOUNG_EVERY` units of work** (:func:`made`:
  a record appended counts 1, a session made or a connection opened or closed
  :data:`LONG_LIVED`),
  not only when the threshold says so. The threshold counts *net* allocations: an object freed
  lowers the count, frozen ones too. A table replaces its state at every move, so the frozen
  state of the last move dies about as fast as the new one is made; the count then hardly
  moves while the young generation fills up (10,000-30,000 objects at 1,000 tables, a 6-17 ms
  pause when the threshold is at last passed). Counted in work done, a collection walks what
  a few dozen moves left alive, whatever the net count says;
- **bounds what freezing can leak** (:meth:`Collector.check`, run every :data:`CHECK_EVERY`
  seconds by :meth:`Collector.run`): an object that dies inside a cycle after it was frozen is
  never found by a young collection, so when the permanent generation holds more than
  :data:`GROWTH` times the objects per session and connection it held after the last full
  collection (and :data:`FLOOR` more in all), the host unfreezes everything, collects it in
  full once (a long pause, logged as ``gc_full``) and freezes again. A host whose games make no
  cycles never gets there: more tables add objects in proportion. Counting the frozen objects
  walks every one of them (``gc.get_freeze_count``: 15-55 ms for 90,000 objects on a loaded
  host, a pause of every table), so the count is only taken once the process's resident memory
  has grown :data:`MEMORY_STEP` bytes past what it was at the last count: garbage that piles
  up takes memory, and a host whose memory does not grow has nothing to look for;
- **times** every collection through ``gc.callbacks`` by generation (:class:`Pauses`: count,
  total and longest, in wall-clock and in the collecting thread's CPU time). The host logs them
  when it stops (``gc_pauses``); ``gamehost bench`` reports them (``gc_*``).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any, Literal

import attrs
import structlog

from host.plugins.budget import resident_bytes

__all__ = [
    "CHECK_EVERY",
    "DEFAULT_THRESHOLDS",
    "FLOOR",
    "GROWTH",
    "LONG_LIVED",
    "MEMORY_STEP",
    "SLOW",
    "THRESHOLDS",
    "YOUNG_EVERY",
    "YOUNG_PERIOD",
    "Collector",
    "GcMode",
    "Pauses",
    "collector",
    "freeze",
    "made",
    "pauses",
    "tune",
]

log = structlog.get_logger("gamehost.gc")

GcMode = Literal["tuned", "default"]
"""``tuned``: :func:`tune`'s policy; ``default``: the interpreter's thresholds, nothing frozen
(collections are timed either way)."""

THRESHOLDS = (1_000, 10, 10)
"""``gc.set_threshold`` of a tuned host: net allocations of tracked objects (allocations less
deallocations) before the youngest generation is collected. What survives it is frozen at once,
so the older generations stay empty and their thresholds hardly matter."""

DEFAULT_THRESHOLDS = (700, 10, 10)
"""CPython's own thresholds (what ``serve --gc default`` keeps)."""

CHECK_EVERY = 5.0
"""Seconds between two looks at how much is frozen (:meth:`Collector.check`)."""

GROWTH = 2.0
"""How many times the frozen objects per session and connection of the last full collection
the permanent generation may hold before the next full collection."""

FLOOR = 200_000
"""Frozen objects the permanent generation may grow by, whatever the ratio, before a full
collection is considered (below this a full collection is short anyway, and a host with few
tables never pays one)."""

MEMORY_STEP = 16 << 20
"""Bytes of resident memory the process must have grown by since the last count of the frozen
objects before :meth:`Collector.check` counts them again (a count walks them all)."""

YOUNG_EVERY = 64
"""Units of work (:func:`made`), over every session and connection of the process, between two
young collections (a tuned host only): each then walks what a few dozen moves left alive (at
1,000 tables 0.2 ms a collection on average, BENCHMARKS.md)."""

YOUNG_PERIOD = 0.05
"""Seconds between two young collections when :func:`made` has counted work since the last one
but not :data:`YOUNG_EVERY` units (work it does not count, as a burst of closing connections,
is collected at this pace too)."""

LONG_LIVED = 8
"""The units :func:`made` counts for a session made or a connection opened or closed: each makes
some 80-100 tracked objects (those of a new one live on)."""

SLOW = 0.010
"""Seconds past which a collection counts as slow (``slow``, ``cpu_slow``)."""


@attrs.define
class Pauses:
    """Every collection since :meth:`install`, by generation (0, 1, 2): ``count``, ``total``
    seconds and ``longest`` seconds (wall clock: what every table waits), ``cpu_total`` and
    ``cpu_longest`` (the CPU time of the collecting thread: on a shared machine the wall clock
    also counts the time the process waited for a core); ``collected``: unreachable objects
    found (garbage that only the collector could free); ``slow`` and ``cpu_slow``: collections
    longer than :data:`SLOW` (wall clock, CPU). ``freezes``: the seconds each explicit
    freeze took; ``fulls``: the seconds each full collection of :meth:`Collector.check` took
    (neither is counted by generation)."""

    count: list[int] = attrs.field(factory=lambda: [0, 0, 0])
    total: list[float] = attrs.field(factory=lambda: [0.0, 0.0, 0.0])
    longest: list[float] = attrs.field(factory=lambda: [0.0, 0.0, 0.0])
    cpu_total: list[float] = attrs.field(factory=lambda: [0.0, 0.0, 0.0])
    cpu_longest: list[float] = attrs.field(factory=lambda: [0.0, 0.0, 0.0])
    collected: list[int] = attrs.field(factory=lambda: [0, 0, 0])
    slow: list[int] = attrs.field(factory=lambda: [0, 0, 0])
    cpu_slow: list[int] = attrs.field(factory=lambda: [0, 0, 0])
    freezes: list[float] = attrs.field(factory=list)
    fulls: list[float] = attrs.field(factory=list)
    _began: float = 0.0
    _began_cpu: float = 0.0
    _off: bool = False
    _freeze_from: int | None = None  # freeze what survives a collection of this generation on

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if self._off:
            return
        if phase == "start":
            self._began_cpu = time.thread_time()
            self._began = time.perf_counter()
            return
        g = info["generation"]
        if self._freeze_from is not None and g >= self._freeze_from:
            gc.freeze()  # the survivors (now in the oldest generation) are walked no more
        took = time.perf_counter() - self._began
        cpu = time.thread_time() - self._began_cpu
        self.count[g] += 1
        self.total[g] += took
        if took > self.longest[g]:
            self.longest[g] = took
        self.cpu_total[g] += cpu
        if cpu > self.cpu_longest[g]:
            self.cpu_longest[g] = cpu
        self.collected[g] += info["collected"]
        self.slow[g] += took > SLOW
        self.cpu_slow[g] += cpu > SLOW

    def install(self) -> None:
        """Time every collection from now on (idempotent)."""
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def uninstall(self) -> None:
        """Stop timing collections (and freezing after them)."""
        while self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
        self._freeze_from = None

    def summary(self) -> dict[str, Any]:
        """The figures as JSON-ready lists by generation (milliseconds), and the longest pause
        of any generation: ``{"collections": [n0, n1, n2], "total_ms": [...], "longest_ms":
        [...], "cpu_total_ms": [...], "cpu_longest_ms": [...], "collected": [...], "slow": [...],
        "cpu_slow": [...], "max_ms":
        float, "cpu_max_ms": float, "thresholds": [t0, t1, t2], "frozen": objects in the
        permanent generation, "freeze_ms": [each explicit freeze], "full_ms": [each full
        collection]}``."""
        return {
            "collections": list(self.count),
            "total_ms": [round(t * 1000, 3) for t in self.total],
            "longest_ms": [round(t * 1000, 3) for t in self.longest],
            "cpu_total_ms": [round(t * 1000, 3) for t in self.cpu_total],
            "cpu_longest_ms": [round(t * 1000, 3) for t in self.cpu_longest],
            "collected": list(self.collected),
            "slow": list(self.slow),
            "cpu_slow": list(self.cpu_slow),
            "max_ms": round(max(self.longest) * 1000, 3),
            "cpu_max_ms": round(max(self.cpu_longest) * 1000, 3),
            "thresholds": list(gc.get_threshold()),
            "frozen": gc.get_freeze_count(),
            "freeze_ms": [round(t * 1000, 3) for t in self.freezes],
            "full_ms": [round(t * 1000, 3) for t in self.fulls],
        }


pauses = Pauses()
"""The process's collection timings (one collector per process)."""


class Collector:
    """The full collections a tuned host still needs (see the module docstring): one when the
    frozen objects per unit (a live session or an open connection, as ``units`` counts them)
    have grown :data:`GROWTH` times since the last one.

    Args:
        units: how many sessions and connections the host holds now.
    """

    def __init__(self, units: Callable[[], int]) -> None:
        self.units = units
        self.mark(gc.get_freeze_count())

    def mark(self, frozen: int) -> None:
        """Remember the frozen count right after a full collection (or at start)."""
        self.base = frozen
        self.base_units = max(self.units(), 1)
        self.counted_at = resident_bytes()

    def limit(self) -> int:
        """The frozen count past which :meth:`check` collects in full."""
        per_unit = self.base / self.base_units
        expected = max(self.base, per_unit * max(self.units(), 1))
        return int(max(expected * GROWTH, self.base + FLOOR))

    def check(self) -> float | None:
        """Collect in full (unfreeze, collect, freeze) if the permanent generation passed
        :meth:`limit`; the seconds it took, or None if it was not needed. The frozen objects
        are only counted when the resident memory grew :data:`MEMORY_STEP` bytes since the
        last count (always where it cannot be read)."""
        rss = resident_bytes()
        if rss and rss < self.counted_at + MEMORY_STEP:
            return None
        self.counted_at = rss
        frozen = gc.get_freeze_count()
        if frozen <= self.limit():
            return None
        began = time.perf_counter()
        pauses._off = True
        try:
            gc.unfreeze()
            found = gc.collect()
            gc.freeze()
        finally:
            pauses._off = False
        took = time.perf_counter() - began
        pauses.fulls.append(took)
        self.mark(gc.get_freeze_count())
        log.warning(
            "gc_full",
            seconds=round(took, 4),
            frozen_before=frozen,
            frozen=self.base,
            collected=found,
            units=self.base_units,
        )
        return took

    async def run(self) -> None:
        """Until cancelled: collect the young generation every :data:`YOUNG_PERIOD` seconds
        (unless :func:`made` just did), and call :meth:`check` every :data:`CHECK_EVERY`."""
        import trio

        checked = trio.current_time()
        while True:
            await trio.sleep(YOUNG_PERIOD)
            if _young["on"] and _young["since"]:
                _young["since"] = 0
                gc.collect(0)
            if trio.current_time() - checked >= CHECK_EVERY:
                checked = trio.current_time()
                self.check()


collector: Collector | None = None
"""The process's :class:`Collector`, once :func:`watch` made it."""


def tune(mode: GcMode = "tuned") -> None:
    """Set the process's collector up for a host: ``tuned`` sets :data:`THRESHOLDS`, freezes
    what exists now (modules, the registry) and from then on what survives each collection;
    ``default`` keeps :data:`DEFAULT_THRESHOLDS`. Collections are timed (:data:`pauses`) either
    way; only a tuned host collects every :data:`YOUNG_EVERY` units of work (:func:`made`).

    Raises:
        ValueError: an unknown mode.
    """
    if mode not in ("tuned", "default"):
        raise ValueError(f"gc mode is tuned or default, not {mode!r}")
    pauses.install()
    if mode == "tuned":
        gc.set_threshold(*THRESHOLDS)
        freeze()
        pauses._freeze_from = 0
    else:
        gc.set_threshold(*DEFAULT_THRESHOLDS)
    _young["on"] = mode == "tuned"
    _young["since"] = 0


_young = {"on": False, "since": 0}


def made(units: int) -> None:
    """Count ``units`` of work done by this process (a record appended: 1; a session made or a
    connection opened or closed: :data:`LONG_LIVED`); every :data:`YOUNG_EVERY` of them, collect the
    young generation (``gc.collect(0)``: what survives is frozen, as after any collection).
    Does nothing unless :func:`tune` set the tuned mode."""
    young = _young
    if not young["on"]:
        return
    young["since"] += units
    if young["since"] >= YOUNG_EVERY:
        young["since"] = 0
        gc.collect(0)


def watch(units: Callable[[], int]) -> Collector:
    """The process's :class:`Collector` for a host whose sessions and connections ``units``
    counts (run its :meth:`Collector.run` in the host's nursery)."""
    global collector
    collector = Collector(units)
    return collector


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
    if collector is not None:
        collector.mark(gc.get_freeze_count())
    return took
