"""``gamehost play``: a terminal client.

It creates a session (``--game``, ``--seats``, ``--bots``, ``--option k=v``), joins one
(``--session ID``) or takes a seat back (``--session ID --resume TOKEN``, with the token ``join``
gave). The token and the command that resumes the seat are printed as soon as the seat is
joined, and again on Ctrl-C or a lost connection; the command names the full path of the
``gamehost`` that runs (or ``python -m tools.cli`` with the full path of this Python), so it
works as printed from any shell, outside the virtualenv too. A Ctrl-C while the ``join`` is on
its way waits for its answer (a second one does not), so a seat the host gave is never left
without its token on screen; a Ctrl-C before any seat was taken says so.

Each turn it shows the player's view and the legal actions, numbered, and reads the choice from
the keyboard: its number, the label as shown (``play 7C``, ``play 8C, name hearts``; any case,
commas optional; a unique beginning of one, such as ``play 8C`` when only one 8C can be played)
or a JSON action object. Actions of one kind share a line (``play [0] 6S · [1] 7C · [2] 8C,
name clubs``), so a hand of playable cards is listed once. Actions that differ only in one whole
number (a bet or raise of any size in a range; the game lists a few sizes, the smallest and the
largest among them) are shown as one form with its range, e.g. ``[2] raise AMOUNT from 1 to
10``; the player types ``2 7`` or ``raise 7`` (or just ``2`` and then the amount when asked).
``--auto`` picks random legal actions instead (for scripts).

What happened is told in words: the client asks the host for each record's text (``"text":
true``, PROTOCOL.md), the game's own (``describe_event``: ``bot1 played 8♠ and named ♥``), and
the end names the winners and the final scores (``describe_outcome``); ``--events`` adds each
record's JSON. A game that offers ``render(view, viewer)`` and ``describe(action)`` is drawn its
own way; any other as JSON. A move the host played for a seat whose turn timer ran out is told
(``Time ran out for you: the host played draw``); if that happens while the player is still
choosing, the prompt is dropped at once with a note, and the next turn is shown (a line typed
later goes to the new prompt, none is lost).

Undo by consent: ``undo``, typed at any time (at the move prompt or between turns), asks the
host to take back your last action; the others are asked and the history says what they
answered. When another player asks, the client asks you ``agree? (y/n)`` and answers
(``--auto`` agrees at once). Stdin is read line by line by one thread for the whole run, so a
line typed between prompts waits for the next one (``undo`` is done at once).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import math
import os
import random
import shlex
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

import attrs
import orjson
import trio

from host.cli import count, non_negative_int, port_number
from host.net.client import Client, HostError
from host.plugins.registry import load_registry
from host.table.words import Words, display_names, raw_event

__all__ = [
    "Form",
    "add_parser",
    "forms",
    "gamehost_command",
    "main",
    "menu",
    "parse_choice",
    "resume_command",
]


def _parse_option(text: str) -> tuple[str, Any]:
    key, eq, value = text.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(f"--option wants K=V, not {text!r}")
    try:
        return key, orjson.loads(value)
    except orjson.JSONDecodeError:
        return key, value


class Renderer:
    """Draws views and actions with the game's own ``render``/``describe`` when installed,
    and records in words (the host's ``text``, else the installed game's)."""

    def __init__(self, game_id: str) -> None:
        try:
            self.game = load_registry().games.get(game_id)
        except Exception:  # noqa: BLE001 - a broken local plugin must not stop the client
            self.game = None
        self.words = Words(self.game) if self.game is not None else None

    def outcome(self, snapshot: dict[str, Any], push: dict[str, Any] | None = None) -> str:
        """The end in words: the host's text of the ``ended`` push when it sent one, else the
        installed game's ``describe_outcome`` (names from the snapshot's seats)."""
        if push is not None and isinstance(push.get("text"), str):
            return str(push["text"])
        outcome = (push or snapshot).get("outcome")
        aborted = (push or snapshot).get("aborted")
        names = display_names([s["name"] if s else None for s in snapshot.get("seats") or []])
        words = self.words or Words(object())
        return words.outcome(outcome, aborted, names)

    def view(self, snapshot: dict[str, Any], seat: int | None) -> str:
        render = getattr(self.game, "render", None)
        names = ", ".join(
            f"{s['seat']}:{s['name']}{'*' if s['bot'] else ''}"
            for s in snapshot.get("seats", [])
            if s
        )
        head = f"--- seq {snapshot['seq']}  seats {names}  to act {snapshot.get('to_act')}"
        body = (
            render(snapshot["view"], seat)
            if render
            else orjson.dumps(snapshot["view"], option=orjson.OPT_INDENT_2).decode()
        )
        return f"{head}\n{body}"

    def action(self, action: dict[str, Any]) -> str:
        describe = getattr(self.game, "describe", None)
        return describe(action) if describe else orjson.dumps(action).decode()

    def event(self, push: dict[str, Any]) -> str | None:
        """A line of the history for an ``event`` push: its ``text`` (None when it has nothing
        to say, or for the end, which the end screen tells), else a plain line."""
        kind, ev = push.get("kind"), push.get("event") or {}
        if isinstance(push.get("text"), str):
            text = push["text"]
            return f"  {text}" if text and kind != "ended" else None
        if kind == "action":
            late = "  [timed out: played by the host]" if ev.get("timed_out") else ""
            return f"  seat {ev['seat']}: {self.action(ev['action'])}{late}"
        if kind == "seat_taken":
            return f"  seat {ev['seat']} taken by {ev['name']}"
        if kind == "seat_held":
            return f"  seat {ev['seat']} is back"
        if kind == "seat_released":
            return f"  seat {ev['seat']} left ({ev.get('reason', 'left')})"
        if kind == "event":
            return f"  · {raw_event(ev)[:150]}"
        return None


@attrs.frozen
class Form:
    """One numbered choice: a single action, or a range of one whole-number field.

    ``key`` is None for a single action (``action``); else ``action`` has ``key`` set to ``lo``
    and any value ``lo .. hi`` may be chosen.
    """

    action: dict[str, Any]
    key: str | None = None
    lo: int = 0
    hi: int = 0

    def label(self, r: Renderer) -> str:
        if self.key is None:
            return r.action(self.action)
        rest = [f"{k}={v}" for k, v in self.action.items() if k not in ("type", self.key)]
        head = " ".join([str(self.action.get("type")), *rest, self.key.upper()])
        return f"{head} from {self.lo} to {self.hi}"

    def pick(self, value: int | None) -> dict[str, Any] | str:
        """The action for ``value`` (None: a single action), or why it does not fit."""
        if self.key is None:
            return self.action if value is None else "this choice takes no number"
        if value is None:
            return f"{self.key}? type a number from {self.lo} to {self.hi}"
        if not self.lo <= value <= self.hi:
            return f"{self.key} must be from {self.lo} to {self.hi}"
        return {**self.action, self.key: value}


def _number_key(action: dict[str, Any]) -> str | None:
    keys = [k for k, v in action.items() if isinstance(v, int) and not isinstance(v, bool)]
    return keys[0] if len(keys) == 1 else None


def forms(legal: list[dict[str, Any]]) -> list[Form]:
    """The legal actions as choices: actions of one type that differ only in one whole-number
    field become one :class:`Form` spanning the smallest to the largest value listed."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for a in legal:
        key = _number_key(a)
        rest = orjson.dumps({k: v for k, v in a.items() if k != key}, option=orjson.OPT_SORT_KEYS)
        groups.setdefault((key, rest), []).append(a)
    out = []
    for (key, _), group in groups.items():
        if key is None or len(group) == 1:
            out.extend(Form(a) for a in group)
        else:
            values = [a[key] for a in group]
            lo = group[values.index(min(values))]
            out.append(Form(lo, key, min(values), max(values)))
    return out


def _plain(text: str) -> str:
    """A label or a typed line as compared: lower case, commas dropped, single spaces."""
    return " ".join(text.replace(",", " ").lower().split())


def parse_choice(
    text: str, choices: list[Form], labels: Sequence[str] = ()
) -> dict[str, Any] | str:
    """The action a typed line names, or a message saying what to type.

    Accepted: ``N`` (a choice's number), ``N AMOUNT``, ``TYPE AMOUNT`` (e.g. ``raise 7``), a
    choice's label as shown (``labels``, one per choice: ``play 7C``; compared in lower case,
    commas dropped), the beginning of exactly one label (``play 8C`` when one 8C play is
    listed), and a JSON action object (sent as typed: the host judges it).
    """
    text = text.strip()
    if text.startswith("{"):
        try:
            action = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            return f"not JSON: {exc}"
        return action if isinstance(action, dict) else "a JSON action is an object {...}"
    typed = _plain(text)
    plain = [_plain(label) for label in labels]
    if typed and typed in plain:
        return choices[plain.index(typed)].pick(None)
    words = text.split()
    usage = (
        f"type a number 0..{len(choices) - 1} (and an amount where asked), a choice as shown,"
        " or a JSON action"
    )
    starts = [i for i, label in enumerate(plain) if label.startswith(typed + " ")]
    if typed and len(starts) == 1 and choices[starts[0]].key is None:
        return choices[starts[0]].pick(None)
    if typed and len(starts) > 1 and not (len(words) == 2 and words[1].lstrip("-").isdigit()):
        which = ", ".join(f"[{i}] {labels[i]}" for i in starts)
        return f"which one? {which}"
    if not 1 <= len(words) <= 2:
        return usage
    value = None
    if len(words) == 2:
        if not words[1].lstrip("-").isdigit():
            return usage
        value = int(words[1])
    if words[0].isdigit():
        if int(words[0]) >= len(choices):
            return usage
        return choices[int(words[0])].pick(value)
    named = [f for f in choices if f.action.get("type") == words[0]]
    if len(named) == 1:
        return named[0].pick(value)
    return usage


def menu(choices: list[Form], labels: Sequence[str], width: int = 100) -> str:
    """The numbered choices as printed: a single choice per line, except that consecutive
    single actions whose labels start with the same word (``play 6S``, ``play 7C``) share a line,
    that word written once: ``play [0] 6S · [1] 7C`` (wrapped at ``width``)."""
    lines: list[str] = []
    i = 0
    while i < len(choices):
        head = labels[i].split(" ", 1)[0]
        j = i
        while j < len(choices) and choices[j].key is None and labels[j].startswith(head + " "):
            j += 1
        if j - i >= 2:
            line = f"  {head} "
            indent = " " * len(line)
            for k in range(i, j):  # wrapped between two items, never inside one
                item = f"[{k}] {labels[k][len(head) + 1 :]}"
                if line.strip() != head and len(line) + 3 + len(item) > width:
                    lines.append(line)
                    line = indent + item
                else:
                    line += item if line.strip() == head else f" · {item}"
            lines.append(line)
            i = j
        else:
            lines.append(f"  [{i}] {labels[i]}")
            i += 1
    return "\n".join(lines)


class _Stdin:
    """The lines typed on stdin, read by one thread for the whole run and handed over through a
    channel, so a read that is cancelled (the table moved on) loses nothing: the line waits for
    the next read. ``ahead`` holds lines read between prompts that were not commands: the next
    prompt takes them first."""

    def __init__(self) -> None:
        self.send, self.recv = trio.open_memory_channel[str](math.inf)
        self.ahead: collections.deque[str] = collections.deque()
        self.started = False

    def _put(self, line: str | None) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            if line is None:
                self.send.close()
            else:
                self.send.send_nowait(line)

    def _pump(self, token: trio.lowlevel.TrioToken) -> None:
        try:
            for raw in iter(sys.stdin.readline, ""):
                token.run_sync_soon(self._put, raw.rstrip("\r\n"))
        except Exception:  # noqa: BLE001, S110 - stdin unreadable (closed, captured): its end
            pass
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(self._put, None)

    async def line(self) -> str:
        """The next line typed.

        Raises:
            EOFError: stdin is closed.
        """
        if not self.started:
            self.started = True
            token = trio.lowlevel.current_trio_token()
            threading.Thread(target=self._pump, args=(token,), daemon=True).start()
        try:
            return await self.recv.receive()
        except trio.EndOfChannel:
            raise EOFError from None


_stdin: _Stdin | None = None


def _typed() -> _Stdin:
    """This run's stdin reader (made on first use)."""
    global _stdin
    if _stdin is None:
        _stdin = _Stdin()
    return _stdin


async def read_line(prompt: str) -> str:
    """Show ``prompt`` and read a line typed on stdin (a line typed ahead first); cancellable:
    a cancelled read takes nothing, the next line waits for the next read.

    Raises:
        EOFError: stdin is closed.
    """
    print(prompt, end="", flush=True)
    stdin = _typed()
    if stdin.ahead:
        line = stdin.ahead.popleft()
        print(line)
        return line
    return await stdin.line()


UNDO = object()
"""What :func:`_choose` returns when the player typed ``undo``."""


def _is_undo(text: str) -> bool:
    return _plain(text) == "undo"


async def _choose_unless_overtaken(
    c: Client,
    turn: dict[str, Any],
    seat: int,
    r: Renderer,
    rng: random.Random,
    backlog: collections.deque,
) -> Any:
    """The player's choice for ``turn``; None if the table moved on while they thought (the host
    played for them when their turn timer ran out, a newer turn replaced this one, or the session
    ended). Pushes read meanwhile go to ``backlog`` for the caller, in order."""
    chosen = None

    async def ask() -> None:
        nonlocal chosen
        chosen = await _choose(turn["legal"], r, False, rng)
        n.cancel_scope.cancel()

    async def watch() -> None:
        while True:
            q = await c.next_push()
            backlog.append(q)
            ev = (q or {}).get("event") or {}
            played = q and q.get("kind") == "action" and ev.get("seat") == seat
            newer = q and q["push"] == "turn" and q.get("seat") == seat and q["seq"] != turn["seq"]
            asked = q and q["push"] == "undo_asked" and seat in q.get("waiting", ())
            ends = q is None or q["push"] in ("ended", "closed", "detached")
            if ends or played or newer or asked:
                if played and ev.get("timed_out"):
                    print("\nyour turn timer ran out: the host played for you")
                elif q is not None:
                    print()
                n.cancel_scope.cancel()
                return

    async with trio.open_nursery() as n:
        n.start_soon(ask)
        n.start_soon(watch)
    return chosen


async def _choose(legal: list[dict[str, Any]], r: Renderer, auto: bool, rng: random.Random) -> Any:
    if auto:
        return rng.choice(legal)
    choices = forms(legal)
    labels = [f.label(r) for f in choices]
    print(menu(choices, labels))
    pending: Form | None = None
    while True:
        try:
            prompt = f"{pending.key} ({pending.lo}..{pending.hi})> " if pending else "your move> "
            text = await read_line(prompt)
        except EOFError:
            raise KeyboardInterrupt from None
        if _is_undo(text):
            return UNDO
        if pending is not None and text.strip().lstrip("-").isdigit():
            got = pending.pick(int(text))
        else:
            pending = None
            got = parse_choice(text, choices, labels)
            words = text.split()
            if isinstance(got, str) and len(words) == 1 and words[0].isdigit():
                f = choices[int(words[0])] if int(words[0]) < len(choices) else None
                if f is not None and f.key is not None:
                    pending = f  # ask for the amount next
        if isinstance(got, dict):
            return got
        print(got)


def gamehost_command() -> str:
    """How to run this ``gamehost`` again from any shell, its virtualenv active or not: the
    full path of the ``gamehost`` script that runs now, else ``python -m tools.cli`` with the
    full path of this Python (quoted for a POSIX shell)."""
    script = sys.argv[0] if sys.argv else ""
    name = os.path.basename(script)
    if name in ("gamehost", "gamehost.exe") and os.path.isfile(script):
        return shlex.quote(os.path.abspath(script))
    return f"{shlex.quote(sys.executable)} -m tools.cli"


def resume_command(args: argparse.Namespace, session: str, token: str) -> str:
    """The command line that takes this seat back (printed when the seat is joined, and on
    Ctrl-C or a lost connection); see :func:`gamehost_command`. The token is given as
    ``--resume=TOKEN``: a token made by an older host may begin with ``-``."""
    where = "" if args.host == "127.0.0.1" else f" --host {shlex.quote(args.host)}"
    where += "" if args.port == 7878 else f" --port {args.port}"
    return (
        f"{gamehost_command()} play{where} --session {shlex.quote(session)}"
        f" --resume={shlex.quote(token)}"
    )


class _Interrupts:
    """Ctrl-C, as the client takes it (see the module docstring): at once, except while a
    ``join`` is on its way (``guarding``), when it is held (``held``) until the answer is in."""

    def __init__(self) -> None:
        self.guarding = False
        self.held = False

    async def watch(self, signals: Any) -> None:
        async for _ in signals:
            if self.guarding and not self.held:
                self.held = True  # the seat's token is on its way: take it, then stop
                continue
            raise KeyboardInterrupt

    def check(self) -> None:
        """Raise the Ctrl-C held while guarding (once the guarded answer is handled)."""
        self.guarding = False
        if self.held:
            raise KeyboardInterrupt


async def play(args: argparse.Namespace) -> int:
    """Create, join or resume, then play until the session ends. Returns the exit status.

    Sets ``args.resume_hint`` to the command that resumes the seat once it is held, and
    ``args.created`` to the session it created, if any. Ctrl-C (SIGINT) raises
    ``KeyboardInterrupt`` out of it, except while a ``join`` is answered (see the module
    docstring).
    """
    interrupts = _Interrupts()
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(interrupts.watch, signals)
            status = await _play(args, interrupts)
            nursery.cancel_scope.cancel()
    return status


async def _play(args: argparse.Namespace, interrupts: _Interrupts) -> int:
    rng = random.Random(args.seed)
    async with await Client.connect(args.host, args.port) as c:
        await c.call("hello", protocol=1, client="gamehost-play")
        sid = args.session
        if args.resume is not None:
            resumed = await c.call("resume", session=sid, token=args.resume, text=True)
            seat = resumed["seat"]
            r = Renderer(resumed["game"])
            args.resume_hint = resume_command(args, sid, args.resume)
            print(f"you are seat {seat} again in session {sid}")
            if seat not in resumed.get("to_act", []) or resumed.get("ended"):
                print(r.view(resumed, seat))  # else the turn push that follows draws it
            if resumed.get("ended"):
                print(_end_screen(r.outcome(resumed)))
                return 0
            waiting = resumed.get("undo")  # a request that waits for this seat's answer
            return await _loop(c, args, sid, seat, r, rng, waiting)
        if sid is None:
            options = dict(args.option)
            bots = args.bots
            if bots is None:  # every seat but yours is a bot (3 when --seats is not given)
                bots = args.seats - 1 if args.seats is not None else 3
            seats = args.seats if args.seats is not None else bots + 1
            listed = {g["id"]: g for g in (await c.call("games"))["games"]}
            if args.game in listed and args.seats is None:
                seats = max(seats, listed[args.game]["min_seats"])
            args.bots = bots
            created = await c.call(
                "create", game=args.game, seats=seats, bots=bots, options=options
            )
            sid = created["session"]
            args.created = sid
            bots = f"{args.bots} bot" + ("" if args.bots == 1 else "s")
            print(f"created session {sid} ({args.game}, {seats} seats, {bots})")
        interrupts.guarding = True  # a Ctrl-C now waits for the seat's token
        joined = await c.call("join", session=sid, name=args.name, text=True)
        seat = joined["seat"]
        r = Renderer(joined["game"])
        args.resume_hint = resume_command(args, sid, joined["token"])
        print(f"you are seat {seat}; token {joined['token']}")
        print(f"to take this seat back later: {args.resume_hint}", flush=True)
        interrupts.check()
        free = [i for i, s in enumerate(joined["seats"]) if s is None]
        if free:
            print(f"waiting for {len(free)} more player(s): gamehost play --session {sid}")
        return await _loop(c, args, sid, seat, r, rng)


async def _ask_undo(c: Client, sid: str) -> bool:
    """Ask to take back this seat's last action; say how it stands. Whether it was asked."""
    reply = await c.request("undo", session=sid)
    if reply.get("ok"):
        status = reply["result"]["status"]
        print("taken back" if status == "done" else "asked: waiting for the others to agree")
        return True
    error = reply.get("error") or {}
    print(f"cannot undo: {error.get('message')}")
    return False


async def _push_or_command(c: Client, sid: str, idle: list[bool]) -> dict[str, Any] | None:
    """The next push; meanwhile a line typed (between turns) is a command: ``undo`` is sent
    at once, any other line is kept for the next prompt. ``idle[0]`` goes False once stdin
    is closed."""
    got: list[dict[str, Any] | None] = []

    async def push() -> None:
        got.append(await c.next_push())
        n.cancel_scope.cancel()

    async def typed() -> None:
        stdin = _typed()
        while True:
            try:
                line = await stdin.line()
            except EOFError:
                idle[0] = False
                return
            if _is_undo(line):
                with trio.CancelScope(shield=True):  # a push meanwhile waits for the reply
                    await _ask_undo(c, sid)
            elif line.strip():
                stdin.ahead.append(line)

    async with trio.open_nursery() as n:
        n.start_soon(push)
        n.start_soon(typed)
    return got[0]


async def _answer_undo(
    c: Client,
    sid: str,
    p: dict[str, Any],
    r: Renderer,
    auto: bool,
    backlog: collections.deque,
    told: bool = False,
) -> None:
    """Ask the player whether the action ``p`` (an ``undo_asked`` push) may be taken back, and
    answer; the question is dropped when the request ends first. ``told``: the event's own
    line ("Ann asked to take back ...") was printed already."""
    what = r.action(p.get("action") or {})
    if auto:
        accept: bool | None = True
    else:
        accept = None
        if not told:
            print(f"seat {p['seat']} asks to take back {what}")

        async def ask() -> None:
            nonlocal accept
            while accept is None:
                text = _plain(await read_line("agree? (y/n)> "))
                if text in ("y", "yes"):
                    accept = True
                elif text in ("n", "no"):
                    accept = False
            n.cancel_scope.cancel()

        async def watch() -> None:
            while True:
                q = await c.next_push()
                backlog.append(q)
                over = q is None or q["push"] in ("undo_done", "undo_refused", "ended", "closed")
                if over or (q.get("kind") == "action"):
                    print()
                    n.cancel_scope.cancel()
                    return

        async with trio.open_nursery() as n:
            n.start_soon(ask)
            n.start_soon(watch)
    if accept is None:
        return
    reply = await c.request("undo_answer", session=sid, accept=accept)
    if not reply.get("ok"):
        print(f"too late: {(reply.get('error') or {}).get('message')}")


async def _loop(
    c: Client,
    args: argparse.Namespace,
    sid: str,
    seat: int,
    r: Renderer,
    rng: random.Random,
    undo: dict[str, Any] | None = None,
) -> int:
    """Print pushes and answer this seat's turns until the session ends or the host closes
    (``undo``: the request a resume's snapshot shows waiting, asked first)."""
    backlog: collections.deque = collections.deque()
    if undo is not None:
        backlog.append({"push": "undo_asked", "session": sid, "resumed": True, **undo})
    idle = [not args.auto]  # read commands (undo) between turns
    while True:
        if backlog:
            p = backlog.popleft()
        elif idle[0]:
            p = await _push_or_command(c, sid, idle)
        else:
            p = await c.next_push()
        if p is None:
            print("the host closed the connection")
            return 1
        if p["push"] == "event" and not args.quiet:
            line = r.event(p)
            if line:
                print(line)
            if args.events:
                print(f"    {orjson.dumps({k: v for k, v in p.items() if k != 'text'}).decode()}")
        elif p["push"] == "turn" and p.get("seat") == seat:
            snap = await c.call("view", session=sid)
            if snap["seq"] != p["seq"]:
                continue  # a newer turn push follows
            if not args.quiet:
                print(r.view(snap, seat))
            while True:
                if args.auto:
                    action = await _choose(p["legal"], r, True, rng)
                else:
                    action = await _choose_unless_overtaken(c, p, seat, r, rng, backlog)
                    if action is None:
                        break  # the table moved on: the backlog says how
                if action is UNDO:
                    if await _ask_undo(c, sid):
                        break  # the table changes: a new turn push follows
                    continue
                reply = await c.request("act", session=sid, action=action, seq=p["seq"])
                if reply.get("ok"):
                    break
                error = reply.get("error") or {}
                print(f"refused: {error.get('code')}: {error.get('message')}")
                if error.get("code") in ("conflict", "not_your_turn"):
                    break  # the table moved on: a newer turn push follows
        elif p["push"] == "undo_asked" and seat in p.get("waiting", ()):
            told = not args.quiet and not p.get("resumed")  # its event line came first
            await _answer_undo(c, sid, p, r, args.auto, backlog, told)
        elif p["push"] == "ended":
            snap = await c.call("view", session=sid)
            print(r.view(snap, seat))
            print(_end_screen(r.outcome(snap, p)))
            return 0
        elif p["push"] == "detached" and p.get("session") == sid:
            why = "resumed on another connection" if p.get("reason") == "resumed" else "released"
            print(f"this connection no longer holds seat {seat}: it was {why}")
            return 1
        elif p["push"] == "closed":
            print(f"closed by the host: {p.get('reason')}")
            if getattr(args, "resume_hint", None):
                print(f"resume it with: {args.resume_hint}")
            return 1


def _end_screen(text: str) -> str:
    """The end in words, framed: ``=== Game over ===`` then the lines of ``text``."""
    return "=== Game over ===\n" + text


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``play`` sub-command."""
    p = sub.add_parser("play", help="play in a terminal against other clients or host bots")
    p.add_argument("--host", default="127.0.0.1", help="the host's address (default: 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=7878, help="its port (default: 7878)")
    p.add_argument("--game", default="crazy-eights")
    p.add_argument("--seats", type=count, help="seats (default: bots + 1)")
    p.add_argument(
        "--bots",
        type=non_negative_int,
        default=None,
        help="seats filled by host bots (default: every seat but yours; 3 without --seats)",
    )
    p.add_argument(
        "--option",
        action="append",
        default=[],
        type=_parse_option,
        metavar="K=V",
        help="a game option (V is JSON, or else a string)",
    )
    p.add_argument("--session", help="join this session instead of creating one")
    p.add_argument(
        "--resume", metavar="TOKEN", help="with --session: take back the seat this token holds"
    )
    p.add_argument("--name", default="player")
    p.add_argument("--auto", action="store_true", help="pick random legal actions")
    p.add_argument("--quiet", action="store_true", help="print only the end")
    p.add_argument("--events", action="store_true", help="also print each record's JSON")
    p.add_argument("--seed", type=int, default=None, help="seed of --auto's choices")
    p.set_defaults(func=main)


def bye(args: argparse.Namespace) -> str:
    """What Ctrl-C prints: how to take the seat back (with its token) when one was joined;
    else that none was taken (and how to join the session it created, if it did)."""
    if args.resume_hint:
        return f"bye: your seat stays yours; resume it with: {args.resume_hint}"
    if getattr(args, "created", None):
        where = "" if args.host == "127.0.0.1" else f" --host {shlex.quote(args.host)}"
        where += "" if args.port == 7878 else f" --port {args.port}"
        join = f"{gamehost_command()} play{where} --session {args.created}"
        return f"bye: no seat was taken; session {args.created} waits for players: {join}"
    return "bye: no seat was taken"


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def main(args: argparse.Namespace) -> int:
    """Run the client; exit status 0 when the session ended, 1 otherwise (130 on Ctrl-C/D, 2
    for ``--resume`` without ``--session``)."""
    if args.resume is not None and args.session is None:
        print("gamehost play: error: --resume TOKEN needs --session ID", file=sys.stderr)
        return 2
    args.resume_hint = None
    args.created = None
    try:
        return trio.run(play, args)
    except BaseException as exc:  # noqa: BLE001 - trio wraps what the client raised in groups
        leaf = _leaf(exc)
        if isinstance(leaf, KeyboardInterrupt):
            print(f"\n{bye(args)}")
            return 130
        if isinstance(leaf, HostError):
            print(f"error from the host: {leaf}", file=sys.stderr)
            return 1
        if isinstance(leaf, OSError | ConnectionError):
            print(f"cannot talk to {args.host}:{args.port}: {leaf}", file=sys.stderr)
            if args.resume_hint:
                print(f"resume your seat with: {args.resume_hint}", file=sys.stderr)
            return 1
        raise
