"""The crash marker: which session's game code a host process is running, in a small file that
outlives the process.

Game code that kills the host (``os._exit``, a crash in C, the kernel's OOM killer) or that the
host must kill because it cannot be interrupted (the hang watchdog, :mod:`host.plugins.budget`)
would, if nothing remembered it, run again on the next start — a bot's move is re-run as soon as
its session is loaded — and take the host down again, for ever. So before each step into game
code the host writes the session id and the seq of its log into a memory-mapped file
(:meth:`CrashMarker.enter`: a memory write, no system call, about 0.5 µs with the clear), and
clears it after (:meth:`CrashMarker.leave`). The kernel keeps a dead process's writes to a
shared mapping, so the next start reads what the host was doing when it died.

**The verdict** (:func:`judge`), on start, before any session is loaded, from the marker and
X's log:

- the marker is clear: the host stopped cleanly, or died outside game code. Nothing to do (and
  the suspect is forgotten: the deaths that count come in a row).
- it names session X at seq s, and the previous run was ended by the hang watchdog (the marker
  says the watchdog ended it, or the hang file holds the traceback ``faulthandler`` wrote): X
  hung the host; X is ended now, ``aborted: "game_error"``, ``fault: "hang"``.
- it names X at s, and the suspect is not X: the host died inside X's game code, but a host
  SIGKILLed by an operator (or a chaos test) at a random moment can be there too. It is only
  noted (``host_died_in_game``): X at s becomes the *suspect*.
- it names X and the suspect is X at s0: the host died twice in a row inside X's code, and X's
  log made no progress in between — nothing but presence records (``seat_held``,
  ``seat_released``: a restart releases the seats its connections held) after s0. X is ended
  (``fault: "crash"``) before its code runs again.

The session is ended by appending its ``ended`` record to its log, as the budget's faults do,
without running any of its game code (no fold); a log that made progress meanwhile (another host
played it on), or that has ended, is left alone. A step that names no session (the ``start`` of
a ``create``) ends nothing: a client can make such a game crash the host again by asking again.

**Where the marker lives.** A file per host process in the data dir: ``host-step.N`` (and the
hang watchdog's traceback in ``host-hang.N.txt``), N the first slot no running process holds
(``flock``). With the file store the data dir belongs to one host, so N is 0. With PostgreSQL
the marker is *local* to each host (its own ``--data-dir``; the workers of ``serve --workers``
take one slot each): each host judges only its own deaths. A session whose code kills every host
that runs it is therefore ended by the first host that dies in it twice; another host may adopt
it in between and die once too.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
from pathlib import Path
from typing import IO, Any

import attrs
import structlog

__all__ = ["CrashMarker", "Death", "Verdict", "judge"]

log = structlog.get_logger("gamehost.marker")

MAGIC = b"GHSTEP1\n"
_SLOT = struct.Struct("<qB64sB")  # seq, session id length, session id, state: the state last
STEP_AT = len(MAGIC)
STATE_AT = STEP_AT + _SLOT.size - 1
SUSPECT_AT = 128
SIZE = 4096
SLOTS = 64
"""Marker files one data dir may hold (host processes sharing it at once)."""
IDLE, IN_STEP, HUNG = 0, 1, 2
HANG_TEXT = 64 * 1024
"""Characters of a hang traceback kept for the host log."""


@attrs.frozen
class Death:
    """What the marker said when the host started: the previous run died inside a step.

    Attributes:
        session: the session whose game code ran (None: a step of no session).
        seq: the last seq of its log then.
        hung: the hang watchdog ended it (else: it died, of something else).
    """

    session: str | None
    seq: int
    hung: bool


PRESENCE = frozenset({"seat_held", "seat_released"})
"""Record types that are no progress of the game (who holds a seat)."""


@attrs.frozen
class Verdict:
    """What to do on start (:func:`judge`).

    Attributes:
        fault: ``hang`` or ``crash``: end the session the marker names now (None: nothing to
            end).
        suspect: ``(session, seq)`` to remember for the next start (None: nothing).
    """

    fault: str | None
    suspect: tuple[str, int] | None


def judge(
    death: Death | None, suspect: tuple[str, int] | None, log: list[dict[str, Any]] | None
) -> Verdict:
    """The verdict on a previous run that died as ``death`` (None: not in a step), given the
    suspect the marker remembered and the log of ``death.session`` (its records as read; None:
    there is none), as the module docstring says."""
    if death is None or death.session is None:
        return Verdict(None, None)
    key = (death.session, death.seq)
    if not log or log[-1].get("type") == "ended":
        return Verdict(None, None)

    def idle_after(seq: int) -> bool:  # nothing but presence records after seq
        return all(r.get("type") in PRESENCE for r in log if r.get("seq", 0) > seq)

    if death.hung:
        return Verdict("hang", key) if idle_after(death.seq) else Verdict(None, None)
    if suspect is not None and suspect[0] == death.session and idle_after(suspect[1]):
        return Verdict("crash", suspect)
    return Verdict(None, key)


def _unpack(mm: mmap.mmap, at: int) -> tuple[int, str | None, int]:
    seq, n, raw, state = _SLOT.unpack_from(mm, at)
    session = raw[: min(n, 64)].decode("ascii", "replace") if n else None
    return state, session, seq


class CrashMarker:
    """A host process's marker file, open and locked (see the module docstring); made by
    :meth:`open`.

    Attributes:
        path: the marker file.
        death: how the previous run of this slot died inside a step (None: it did not).
        suspect: the suspect it remembered (``(session, seq)``, or None).
        traceback: what the hang watchdog wrote in the previous run (empty: it did not fire).
        hang_file: where the hang watchdog writes tracebacks (open for writing).
    """

    def __init__(
        self,
        path: Path,
        fd: int,
        mm: mmap.mmap,
        hang_file: IO[str],
        death: Death | None,
        suspect: tuple[str, int] | None,
        traceback: str,
    ) -> None:
        self.path = path
        self._fd = fd
        self._mm = mm
        self.hang_file: IO[str] | None = hang_file
        self.death = death
        self.suspect = suspect
        self.traceback = traceback
        self._pack = _SLOT.pack_into

    @classmethod
    def open(cls, directory: Path) -> CrashMarker:
        """Take the first free slot in ``directory`` (made if missing), read and judge what
        its previous holder left, and keep it open for this process.

        Raises:
            OSError: the directory or the files cannot be made, or every slot is held.
        """
        directory.mkdir(parents=True, exist_ok=True)
        for n in range(SLOTS):
            path = directory / f"host-step.{n}"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            except BaseException:
                os.close(fd)
                raise
            try:
                return cls._take(path, directory / f"host-hang.{n}.txt", fd)
            except BaseException:
                os.close(fd)
                raise
        raise OSError(f"every crash marker slot in {directory} is held ({SLOTS})")

    @classmethod
    def _take(cls, path: Path, hang_path: Path, fd: int) -> CrashMarker:
        fresh = os.fstat(fd).st_size < SIZE
        if fresh:
            os.ftruncate(fd, SIZE)
        mm = mmap.mmap(fd, SIZE)
        death: Death | None = None
        suspect: tuple[str, int] | None = None
        if not fresh and mm[: len(MAGIC)] == MAGIC:
            state, session, seq = _unpack(mm, STEP_AT)
            if state in (IN_STEP, HUNG):
                death = Death(session, seq, state == HUNG)
            s_state, s_session, s_seq = _unpack(mm, SUSPECT_AT)
            if s_state and s_session is not None:
                suspect = (s_session, s_seq)
        traceback = ""
        with contextlib.suppress(FileNotFoundError):
            traceback = hang_path.read_text(errors="replace")[:HANG_TEXT]
        traceback = traceback.strip()
        if traceback and death is not None:
            death = Death(death.session, death.seq, True)
        mm[:SIZE] = bytes(SIZE)
        mm[: len(MAGIC)] = MAGIC
        hang_file = open(hang_path, "w")  # noqa: SIM115 - kept open for faulthandler
        marker = cls(path, fd, mm, hang_file, death, suspect, traceback)
        marker._suspect(suspect)  # kept until the verdict is carried out (:meth:`remember`)
        return marker

    def remember(self, key: tuple[str, int] | None) -> None:
        """Keep ``key`` as the suspect for the next start (None: forget it)."""
        self.suspect = key
        self._suspect(key)

    def _suspect(self, key: tuple[str, int] | None) -> None:
        if key is None:
            self._pack(self._mm, SUSPECT_AT, 0, 0, b"", IDLE)
        else:
            raw = key[0].encode("ascii", "replace")[:64]
            self._pack(self._mm, SUSPECT_AT, key[1], len(raw), raw, IN_STEP)

    # -- the hot path --------------------------------------------------------------------------
    def enter(self, session: str | None, seq: int) -> None:
        """A step into ``session``'s game code (its log at ``seq``) begins."""
        if session is None:
            self._pack(self._mm, STEP_AT, seq, 0, b"", IN_STEP)
        else:
            raw = session.encode()
            self._pack(self._mm, STEP_AT, seq, len(raw), raw, IN_STEP)

    def leave(self) -> None:
        """The step ended."""
        self._mm[STATE_AT] = IDLE

    def hung(self) -> None:
        """The open step ignored its interruption: the process ends now (the next start ends
        its session without waiting for a second time)."""
        self._mm[STATE_AT] = HUNG

    # -- start and stop -------------------------------------------------------------------------
    def close(self) -> None:
        """A clean stop: the marker is cleared (suspect too) and the slot freed."""
        if self._fd < 0:
            return
        self._mm[STATE_AT] = IDLE
        self._suspect(None)
        self._mm.close()
        if self.hang_file is not None:
            self.hang_file.close()
            self.hang_file = None
        os.close(self._fd)
        self._fd = -1
