"""The crash marker (host/net/marker.py) and the hang watchdog (host/plugins/budget.py): what a
process that died inside a step leaves, and what the next start makes of it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from host.net.marker import CrashMarker, Death, Verdict, judge
from host.plugins.budget import HANG_STATUS, IGNORED_GRACE

ROOT = Path(__file__).resolve().parents[2]


def log(*types: str) -> list[dict]:
    """A log whose records after the header have these types (seq 1, 2, ...)."""
    return [{"seq": 0, "type": "header"}] + [{"seq": i, "type": t} for i, t in enumerate(types, 1)]


def test_the_verdicts() -> None:
    x5 = Death("x", 5, False)
    played = log("seat_taken", "seat_taken", "event", "action", "event")  # seq 5: an event
    assert judge(None, ("x", 5), played) == Verdict(None, None)  # clean: the suspect goes
    assert judge(Death(None, 5, False), None, played) == Verdict(None, None)  # no session
    assert judge(x5, None, played) == Verdict(None, ("x", 5))  # the first death: noted
    assert judge(x5, ("y", 5), played) == Verdict(None, ("x", 5))  # another session's
    assert judge(x5, ("x", 5), played) == Verdict("crash", ("x", 5))  # twice, no progress
    released = [*played, {"seq": 6, "type": "seat_released"}]  # a restart let the seat go
    assert judge(Death("x", 6, False), ("x", 5), released) == Verdict("crash", ("x", 5))
    moved = [*played, {"seq": 6, "type": "action"}, {"seq": 7, "type": "event"}]
    assert judge(Death("x", 7, False), ("x", 5), moved) == Verdict(None, ("x", 7))
    assert judge(Death("x", 5, True), None, played) == Verdict("hang", ("x", 5))  # sure at once
    assert judge(Death("x", 5, True), None, moved) == Verdict(None, None)  # played on since
    ended = [*played, {"seq": 6, "type": "ended"}]
    assert judge(x5, ("x", 5), ended) == Verdict(None, None)
    assert judge(x5, ("x", 5), None) == Verdict(None, None)  # no such log


def test_each_process_takes_a_slot_of_its_own(tmp_path: Path) -> None:
    first = CrashMarker.open(tmp_path)
    second = CrashMarker.open(tmp_path)
    assert (first.path.name, second.path.name) == ("host-step.0", "host-step.1")
    second.close()
    first.enter("abc", 3)
    first.close()  # a clean stop clears it
    again = CrashMarker.open(tmp_path)
    assert again.path.name == "host-step.0" and again.death is None and again.suspect is None
    again.close()


def run(script: str, data: Path, timeout: float = 60) -> tuple[int, float]:
    """Run ``script`` (with ``data``) in a fresh Python; its exit status and run time."""
    code = "import sys; data = __import__('pathlib').Path(sys.argv[1])\n" + textwrap.dedent(script)
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code, str(data)], cwd=ROOT, timeout=timeout, capture_output=True
    )
    return done.returncode, time.monotonic() - t0


MARKED = """
from host.net.marker import CrashMarker
from host.plugins.budget import Budget
marker = CrashMarker.open(data)
"""


def test_a_process_that_dies_in_a_step_leaves_the_session_and_seq(tmp_path: Path) -> None:
    code, _ = run(
        MARKED
        + """
budget = Budget(0.5, None, marker=marker)
budget.start()
with budget.step("a bot", "s1", 9):
    __import__("os")._exit(7)
""",
        tmp_path,
    )
    assert code == 7
    after = CrashMarker.open(tmp_path)
    assert after.death == Death("s1", 9, False) and after.traceback == ""
    assert after.suspect is None  # the host judges it (judge) and remembers the suspect
    after.remember(("s1", 9))
    after._mm.close()  # let go without a clean stop, as a process that dies does
    os.close(after._fd)
    again = CrashMarker.open(tmp_path)
    assert again.suspect == ("s1", 9)  # kept across starts until the verdict is carried out
    again.close()


def test_a_process_killed_outside_a_step_leaves_nothing(tmp_path: Path) -> None:
    code, _ = run(
        MARKED
        + """
budget = Budget(0.5, None, marker=marker)
budget.start()
with budget.step("quick", "s1", 2):
    pass
__import__("os").kill(__import__("os").getpid(), 9)
""",
        tmp_path,
    )
    assert code == -9
    after = CrashMarker.open(tmp_path)
    assert after.death is None
    after.close()


def test_a_step_stuck_in_c_ends_the_process_after_the_hang_time(tmp_path: Path) -> None:
    code, took = run(
        MARKED
        + """
budget = Budget(0.2, None, hang=2.0, marker=marker)
budget.start()
with budget.step("a C loop", "s2", 4):
    sum(range(10**15))
""",
        tmp_path,
    )
    assert code == HANG_STATUS
    assert took < 30  # about 2 s after the step began (plus the start of the interpreter)
    after = CrashMarker.open(tmp_path)
    assert after.death == Death("s2", 4, True)  # the traceback in the hang file says so
    assert "Timeout" in after.traceback and "<string>" in after.traceback
    after.close()


def test_a_step_that_ignores_its_interruption_ends_the_process_soon_after(tmp_path: Path) -> None:
    code, took = run(
        MARKED
        + """
budget = Budget(0.05, None, hang=60.0, marker=marker)
budget.start()
with budget.step("stubborn", "s3", 6):
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass
""",
        tmp_path,
    )
    assert code == HANG_STATUS
    assert took < 30 and IGNORED_GRACE < 30  # soon after the interruption, not 60 s
    after = CrashMarker.open(tmp_path)
    assert after.death == Death("s3", 6, True)  # the watchdog marked it before it ended it
    assert "<string>" in after.traceback  # where the main thread was
    after.close()
