"""``gamehost schema --protocol`` against what a live host really sends.

A host with the installed games serves a whole session of each game over TCP — seats that join
(one with view pushes), a spectator, host bots, a seat that drops its connection and resumes,
refused requests of many kinds, the replay ops — and every line received, each reply and each
push, is recorded and validated with the ``jsonschema`` library against the definition it must
fit (``reply.OP`` for the reply to an op, ``reply.error`` for a refusal, ``push`` for a push).
The typed messages are held to it too (any value Hypothesis makes encodes to a line the schema
accepts), and the schema's descriptions, and the games', are in wire terms.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from host.plugins.contract import game_schema
from host.plugins.registry import load_registry
from protocol.framing import LineBuffer
from protocol.messages import ERRORS, ErrorCode
from protocol.replies import RESULT_TYPES, Refused, Reply, encode_message
from protocol.schema import protocol_schema
from tests.conftest import start_host
from tests.protocol.test_replies import op_and_result, pushes, request_ids
from tools.client import Client

REGISTRY = load_registry()
BUILT_IN = ["around-the-world", "crazy-eights", "seven-twenty-seven"]
OPTIONS = {"crazy-eights": {"target": 30}, "seven-twenty-seven": {"hands": 3}}
SCHEMA = protocol_schema()
DEFS = SCHEMA["$defs"]
_validators: dict[str, Draft202012Validator] = {}


def validator(name: str) -> Draft202012Validator:
    """A validator of one definition of the protocol's schema (``reply.join``, ``push``...)."""
    if name not in _validators:
        _validators[name] = Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": DEFS})
    return _validators[name]


def problems(name: str, value: Any) -> list[str]:
    """What is wrong with ``value`` as a ``name`` (empty: it fits)."""
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"[:300] for e in
            validator(name).iter_errors(value)]  # fmt: skip


def test_the_schema_is_a_valid_draft_2020_12_schema_of_every_message() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert {f"reply.{op}" for op in RESULT_TYPES} <= set(DEFS)
    assert {f"error.{code}" for code in ErrorCode} <= set(DEFS)
    pushes_ = {r["$ref"].rsplit(".", 1)[1] for r in DEFS["push"]["oneOf"]}
    assert pushes_ == {
        "event", "turn", "view", "presence", "undo_asked", "undo_done", "undo_refused", "ended",
        "stalled", "detached", "closed", "ping"
    }  # fmt: skip
    assert DEFS["push.turn"]["required"][-2:] == ["to_act", "deadline"]
    assert DEFS["push.view"]["required"][-3:] == ["to_act", "deadline", "connected"]
    assert {"deadline", "connected", "options", "timers"} <= set(DEFS["result.join"]["required"])


def test_gamehost_schema_protocol_prints_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tools.cli", "schema", "--protocol"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == json.loads(json.dumps(SCHEMA))


_MARKUP = re.compile(
    r":[a-z]+:`|``|\b(None|True|False)\b|\b(Attributes|Args|Raises|Returns):|\\"
    r"|\b\w+\.py\b|\b[A-Z][a-z]+[A-Z]\w*\.\w+"
)


def descriptions(value: Any) -> list[str]:
    """Every ``description`` in a schema."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "description" and isinstance(v, str):
                out.append(v)
            else:
                out += descriptions(v)
    elif isinstance(value, list):
        for v in value:
            out += descriptions(v)
    return out


@pytest.mark.parametrize("which", ["protocol", *sorted(REGISTRY.games)])
def test_descriptions_are_in_wire_terms(which: str) -> None:
    """No Python or Sphinx markup (roles, double backticks, None/True/False, docstring
    sections, module paths, ``Class.method``): what a client author reads is the wire."""
    schema = SCHEMA if which == "protocol" else game_schema(REGISTRY.games[which])
    texts = descriptions(schema)
    assert texts
    bad = [t for t in texts if _MARKUP.search(t)]
    assert not bad, bad


def test_every_field_of_every_message_is_described() -> None:
    undescribed = []
    for name, d in DEFS.items():
        for field, sub in d.get("properties", {}).items():
            if not {"description", "const", "$ref"} & set(sub):
                undescribed.append(f"{name}.{field}")
    assert not undescribed, undescribed


# -- the typed messages fit it --------------------------------------------------------------------
@given(request_ids, op_and_result)
def test_every_typed_result_fits_its_definition(rid: Any, op_result: tuple[str, Any]) -> None:
    op, result = op_result
    line = orjson.loads(encode_message(Reply(rid, result)))
    assert problems(f"reply.{op}", line) == []


@given(pushes)
def test_every_typed_push_fits_the_push_definition(msg: Any) -> None:
    assert problems("push", orjson.loads(encode_message(msg))) == []


def values_of(tp: Any) -> st.SearchStrategy[Any]:
    """Values of an error extra's declared type, as JSON carries them."""
    if tp is int:
        return st.integers(-(2**53), 2**53)
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if tp is str:
        return st.text(max_size=20)
    args = typing.get_args(tp)
    if typing.get_origin(tp) is list:
        return st.lists(values_of(args[0]), max_size=4)
    if type(None) in args:
        return st.none() | values_of(next(a for a in args if a is not type(None)))
    raise AssertionError(f"an extra of type {tp!r}: add it here")


@given(request_ids, st.data())
def test_every_error_with_its_declared_extras_fits(rid: Any, data: st.DataObject) -> None:
    code = data.draw(st.sampled_from(list(ErrorCode)))
    spec = ERRORS[code]
    extra = {
        name: data.draw(values_of(spec.types[name]))
        for name in spec.fields
        if name not in spec.optional or data.draw(st.booleans())
    }
    line = orjson.loads(encode_message(Reply(rid, Refused(code, "why", extra))))
    assert problems("reply.error", line) == []
    wrong = {**line, "error": {**line["error"], "code": "no_such_code"}}
    assert problems("reply.error", wrong)


def test_the_schema_refuses_what_the_host_does_not_send() -> None:
    turn = {
        "push": "turn", "session": "s", "seq": 5, "seat": 0, "legal": [], "to_act": [0],
        "deadline": {"at": "2026-11-30T10:02:00.118Z", "seconds_left": 1.5},
    }  # fmt: skip
    assert problems("push", turn) == []
    assert problems("push", {k: v for k, v in turn.items() if k != "deadline"})
    assert problems("push", {**turn, "extra": 1})
    assert problems("push", {**turn, "deadline": {"at": "x"}})
    assert problems("push", {**turn, "push": "nope"})
    assert problems("reply.act", {"id": 1, "ok": True, "result": {"seq": "7"}})


# -- a recorded session of every game -------------------------------------------------------------
class Recording(trio.abc.Stream):
    """A stream that keeps every line received and the op of every request sent (by id)."""

    def __init__(self, inner: trio.abc.Stream, ops: dict[Any, str], lines: list[bytes]) -> None:
        self.inner = inner
        self.ops = ops
        self.lines = lines
        self.framer = LineBuffer(16 * 1024 * 1024)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        for line in bytes(data).splitlines():
            try:
                req = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(req, dict) and isinstance(req.get("op"), str):
                self.ops[req.get("id")] = req["op"]
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        self.lines += [x for x in self.framer.feed(bytes(data)) if isinstance(x, bytes)]
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


class Recorder:
    """Opens recorded connections to a running host; keeps every line received, with the op of
    the request a reply answers (every connection has its own ids)."""

    def __init__(self, running: Any) -> None:
        self.running = running
        self.received: list[tuple[Any, bytes]] = []  # (op or None for a push, line)
        self._conns: list[tuple[dict[Any, str], list[bytes]]] = []

    async def client(self) -> Client:
        stream = await trio.open_tcp_stream("127.0.0.1", self.running.port)
        ops: dict[Any, str] = {}
        lines: list[bytes] = []
        self._conns.append((ops, lines))
        c = Client(Recording(stream, ops, lines))
        c.start(self.running.nursery)
        return c

    def lines(self) -> list[tuple[str, dict[str, Any]]]:
        """Every line received so far as ``(definition it must fit, message)``."""
        out = []
        for ops, lines in self._conns:
            for line in lines:
                msg = orjson.loads(line)
                if "push" in msg:
                    out.append(("push", msg))
                elif msg.get("ok"):
                    out.append((f"reply.{ops[msg['id']]}", msg))
                else:
                    out.append(("reply.error", msg))
        return out


async def play_seat(
    rec: Recorder, c: Client, sid: str, seat: int, token: str, seen: int, drop_after: int | None
) -> tuple[Client, int]:
    """Answer this seat's current ``turn`` pushes with random legal actions until the session
    ends; after ``drop_after`` actions, hang up and ``resume`` on a new connection (with the
    last seq seen). The connection in use at the end and the last seq seen."""
    rng = random.Random(f"{sid}:{seat}")
    acted = 0
    while True:
        p = await c.next_push()
        assert p is not None, f"seat {seat}: the connection ended"
        if p["push"] == "event":
            assert p["seq"] == seen + 1
            seen = p["seq"]
        elif p["push"] == "ended":
            return c, seen
        elif p["push"] == "turn" and p["seq"] == seen:
            r = await c.request("act", session=sid, action=rng.choice(p["legal"]), seq=p["seq"])
            acted += r["ok"]
            if drop_after is not None and acted == drop_after:
                drop_after = None
                await c.aclose()
                c = await rec.client()
                await c.call("hello", protocol=1, client="recorder")
                # the records after `seen` are queued before the reply: read on as before
                await c.call("resume", session=sid, token=token, after=seen, view=True)


async def probe_refusals(rec: Recorder, sid: str) -> None:
    """Requests the host refuses, one per kind that needs no special set-up."""
    c = await rec.client()
    await c.send_raw(b'{"id": "raw", "op": "act", "x": 1e400}\n')  # bad_json, its id read
    for op, params, code in [
        ("fly", {}, "unknown_op"),
        ("join", {"session": sid, "bogus": 1}, "bad_request"),
        ("hello", {"protocol": 9}, "unsupported_protocol"),
        ("create", {"game": "no-such-game"}, "unknown_game"),
        ("create", {"game": "crazy-eights", "options": {"nope": 1}}, "bad_option"),
        ("view", {"session": "0000000000000000"}, "unknown_session"),
        ("join", {"session": sid}, "session_full"),
        ("resume", {"session": sid, "token": "not-a-token"}, "bad_token"),
        ("act", {"session": sid, "action": {"type": "draw"}}, "not_seated"),
    ]:
        r = await c.request(op, **params)
        assert not r["ok"] and r["error"]["code"] == code, (op, r)
    w = await rec.client()
    await w.call("watch", session=sid)
    r = await w.request("watch", session=sid)
    assert r["error"]["code"] == "already_attached"
    r = await w.request("act", session=sid, action={"type": "draw"})
    assert r["error"]["code"] == "not_seated"
    await w.call("leave", session=sid)
    await c.aclose()
    await w.aclose()


async def record_undo(rec: Recorder, lobby: Client) -> None:
    """A Crazy Eights session of two recorded players: an undo refused after a draw, then a
    play asked back, refused, asked again and accepted."""
    made = await lobby.call("create", game="crazy-eights", seats=2, options={"target": 30})
    sid = made["session"]
    seats = {}
    for seat in (0, 1):
        c = await rec.client()
        await c.call("join", session=sid, seat=seat, name=f"u{seat}", view=True, text=True)
        seats[seat] = c
    to_act = (await seats[0].call("view", session=sid))["to_act"][0]
    me, other = seats[to_act], seats[1 - to_act]
    turn = await _next(me, "turn")
    while True:
        play = next((a for a in turn["legal"] if a["type"] == "play"), None)
        if play is not None:
            break
        done = await me.call("act", session=sid, action={"type": "draw"}, seq=turn["seq"])
        r = await me.request("undo", session=sid)
        assert r["error"]["code"] == "cannot_undo"
        turn = await _next(me, "turn", done["seq"])
    await me.call("act", session=sid, action=play, seq=turn["seq"])
    for accept in (False, True):
        await me.call("undo", session=sid)
        await _next(other, "undo_asked")
        await other.call("undo_answer", session=sid, accept=accept)
        await _next(me, "undo_done" if accept else "undo_refused")
    r = await other.request("undo_answer", session=sid, accept=True)
    assert r["error"]["code"] == "cannot_undo"
    await me.call("view", session=sid)
    for c in seats.values():
        await c.aclose()


async def _next(c: Client, push: str, seq: int | None = None) -> dict[str, Any]:
    while True:
        p = await c.next_push()
        assert p is not None
        if p["push"] == push and (seq is None or p["seq"] == seq):
            return p


@pytest.mark.parametrize("game", [g for g in BUILT_IN if g in REGISTRY.games])
async def test_a_recorded_session_fits_the_schema_line_by_line(tmp_path: Path, game: str) -> None:
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path / "data", REGISTRY, turn_timeout=60.0)
        rec = Recorder(running)
        lobby = await rec.client()
        await lobby.call("hello", protocol=1, client="recorder")
        await lobby.call("games")
        info = REGISTRY.games[game].info
        seats = max(info.min_seats, 3)
        created = await lobby.call(
            "create", game=game, seats=seats, bots=1, options=OPTIONS.get(game, {})
        )
        sid = created["session"]
        await lobby.call("sessions")
        spectator = await rec.client()
        await spectator.call("watch", session=sid, view=True)
        players = []
        for i, seat in enumerate(created["free"]):
            c = await rec.client()
            joined = await c.call("join", session=sid, seat=seat, name=f"p{seat}", view=i == 0)
            players.append((c, seat, joined["token"], joined["seq"]))
        await probe_refusals(rec, sid)
        r = await players[0][0].request("act", session=sid, action={"type": "x"}, seq=10**6)
        assert r["error"]["code"] == "conflict"
        ends: list[tuple[Client, int]] = []

        async def seat_task(c: Client, seat: int, token: str, seen: int, drop: int | None):
            ends.append(await play_seat(rec, c, sid, seat, token, seen, drop))

        async with trio.open_nursery() as playing:
            for i, (c, seat, token, seen) in enumerate(players):
                playing.start_soon(seat_task, c, seat, token, seen, 2 if i == 0 else None)
            while (p := await spectator.next_push()) is not None and p["push"] != "ended":
                pass
        c, _ = ends[0]
        await c.call("view", session=sid)
        await c.call("leave", session=sid)
        page = await lobby.call("log", session=sid, limit=50)
        await lobby.call("replay", session=sid, seq=min(10, page["seq"]))
        await lobby.call("verify", session=sid)
        await lobby.request("fork", session=sid, seq=created["seq"])  # answered either way
        await record_undo(rec, lobby)
        r = await lobby.request("act", session=sid, action={"type": "x"})
        assert r["error"]["code"] in ("not_seated", "session_ended")
        running.host.request_shutdown()
    lines = rec.lines()
    bad = [(name, p, msg) for name, msg in lines for p in problems(name, msg)]
    assert not bad, bad[:5]
    kinds = {msg["push"] for name, msg in lines if name == "push"}
    assert {"event", "turn", "view", "presence", "ended"} <= kinds
    assert {"undo_asked", "undo_done", "undo_refused"} <= kinds
    answered = {name for name, _ in lines if name != "push"}
    assert {f"reply.{op}" for op in ("hello", "games", "create", "sessions", "join", "watch",
            "resume", "view", "act", "undo", "undo_answer", "leave", "log", "replay",
            "verify")} <= answered  # fmt: skip
    codes = {msg["error"]["code"] for name, msg in lines if name == "reply.error"}
    assert len(codes) >= 12, codes
    turns = [msg for name, msg in lines if name == "push" and msg["push"] == "turn"]
    assert turns and all(t["seat"] in t["to_act"] for t in turns)
    bots = set(created["bots"])  # no timer while a bot is to act too (it moves at once)
    assert all((t["deadline"] is None) == bool(bots & set(t["to_act"])) for t in turns)
    presence = [msg for name, msg in lines if name == "push" and msg["push"] == "presence"]
    assert {p["reason"] for p in presence} >= {"joined", "resumed"}
