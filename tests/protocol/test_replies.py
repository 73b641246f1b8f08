"""The typed replies and pushes (protocol/replies.py) against the wire contract, PROTOCOL.md.

Three guards against drift: every typed message survives encode -> decode unchanged; each one
encodes to the key order PROTOCOL.md shows (and to the very bytes the dict-built lines of the
host had); and every complete line of PROTOCOL.md's session transcript decodes into a typed
message that encodes back to the same bytes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.messages import ERRORS, ErrorCode, encode, encode_error, encode_ok, push
from protocol.replies import (
    PUSHES,
    RESULTS,
    Accepted,
    Capabilities,
    ClosedPush,
    Created,
    Deadline,
    EndedPush,
    EventPush,
    Expiry,
    Forked,
    GameDescription,
    GamesResult,
    HelloResult,
    Joined,
    Left,
    LogPage,
    OptionDescription,
    PingPush,
    Pong,
    PresencePush,
    Refused,
    ReplayState,
    Reply,
    Resumed,
    SeatInfo,
    SessionsPage,
    SessionSummary,
    Snapshot,
    StalledPush,
    Timers,
    TurnPush,
    UndoAskedPush,
    UndoDonePush,
    UndoRefusedPush,
    UndoRequest,
    UndoResult,
    Verified,
    ViewPush,
    ViewReply,
    Watching,
    decode_line,
    encode_message,
)

PROTOCOL_MD = Path(__file__).resolve().parents[2] / "PROTOCOL.md"

# --- strategies ----------------------------------------------------------------------------------
ints = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | ints | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
objects = st.dictionaries(text, json_values, max_size=3)
request_ids = st.none() | ints | text
seat_lists = st.lists(st.none() | st.builds(SeatInfo, st.integers(0, 9), text, st.booleans()))
small = st.lists(st.integers(0, 9), max_size=4)
deadlines = st.none() | st.builds(
    Deadline, text, st.floats(0, 1e6, allow_nan=False, allow_infinity=False)
)
flags = st.lists(st.booleans(), max_size=4)
seconds = st.none() | st.floats(0, 1e6, allow_nan=False, allow_infinity=False)
timers = st.builds(Timers, seconds, seconds, st.integers(0, 9))
undo_requests = st.builds(
    UndoRequest,
    st.integers(0, 9),
    ints,
    json_values,
    small,
    st.builds(Expiry, text, st.floats(0, 1e6, allow_nan=False, allow_infinity=False)),
)


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    ended = draw(st.booleans())
    return Snapshot(
        draw(text),
        draw(text),
        draw(ints),
        draw(seat_lists),
        draw(st.booleans()),
        ended,
        draw(small),
        draw(json_values),
        draw(text),
        # outcome, aborted and seed exist only once ended
        draw(json_values) if ended else None,
        draw(st.none() | text) if ended else None,
        draw(st.none() | text) if ended else None,
        draw(deadlines),
        draw(flags),
        draw(objects),
        draw(timers),
        draw(st.none() | undo_requests),
    )


@st.composite
def refusals(draw: st.DrawFn) -> Refused:
    code = draw(st.sampled_from(list(ErrorCode)))
    spec = ERRORS[code]
    extra = {
        name: draw(json_values)
        for name in spec.fields
        if name not in spec.optional or draw(st.booleans())
    }
    return Refused(code, draw(st.text(max_size=40)), extra)


summaries = st.builds(
    SessionSummary, text, text, seat_lists, small, st.booleans(), st.booleans(), ints
)
results: dict[str, st.SearchStrategy[Any]] = {
    "hello": st.builds(
        HelloResult,
        ints,
        text,
        text,
        st.lists(text),
        st.builds(Capabilities, ints, st.booleans(), st.booleans(), st.booleans(), st.lists(text)),
    ),
    "games": st.builds(
        GamesResult,
        st.lists(
            st.builds(
                GameDescription,
                text,
                text,
                text,
                st.integers(1, 9),
                st.integers(1, 9),
                text,
                st.lists(
                    st.builds(
                        OptionDescription,
                        text,
                        json_values,
                        text,
                        st.none() | st.lists(json_values, max_size=3),
                        text,
                    ),
                    max_size=3,
                ),
            ),
            max_size=3,
        ),
    ),
    "create": st.builds(Created, text, text, seat_lists, small, small, ints, text),
    "sessions": st.builds(SessionsPage, st.lists(summaries, max_size=3), st.none() | text),
    "join": st.builds(Joined, st.integers(0, 9), text, snapshots()),
    "watch": st.builds(Watching, snapshots()),
    "resume": st.builds(Resumed, st.integers(0, 9), snapshots()),
    "view": st.builds(ViewReply, snapshots()),
    "act": st.builds(Accepted, ints),
    "undo": st.builds(UndoResult, ints, st.sampled_from(["asked", "done"])),
    "undo_answer": st.builds(UndoResult, ints, st.sampled_from(["asked", "done", "refused"])),
    "leave": st.just(Left()),
    "ping": st.just(Pong()),
    "log": st.builds(
        LogPage,
        text,
        text,
        ints,
        st.booleans(),
        st.booleans(),
        st.booleans(),
        st.lists(objects, max_size=3),
        st.none() | ints,
    ),
    "replay": st.builds(
        ReplayState,
        text,
        text,
        ints,
        ints,
        seat_lists,
        st.booleans(),
        st.booleans(),
        small,
        json_values,
        st.booleans(),
    ),
    "verify": st.builds(
        Verified, st.booleans(), ints, st.none() | ints, st.none() | text, st.none() | text
    ),
    "fork": st.builds(
        Forked, text, text, objects, seat_lists, small, ints, st.dictionaries(text, text)
    ),
}
op_and_result = st.sampled_from(sorted(results)).flatmap(
    lambda op: st.tuples(st.just(op), results[op])
)
pushes = st.one_of(
    st.builds(
        EventPush,
        text,
        ints,
        st.sampled_from(["event", "action", "seat_taken", "undo_asked", "undo", "ended"]),
        json_values,
    ),
    st.builds(
        TurnPush, text, ints, st.integers(0, 9), st.lists(objects, max_size=3), small, deadlines
    ),
    st.builds(ViewPush, text, ints, json_values, small, deadlines, flags),
    st.builds(
        PresencePush,
        text,
        ints,
        st.integers(0, 9),
        st.booleans(),
        st.sampled_from(["joined", "resumed", "left", "gone", "unresponsive", "host_gone"]),
    ),
    st.builds(UndoAskedPush, text, ints, undo_requests),
    st.builds(UndoDonePush, text, ints, st.integers(0, 9), ints),
    st.builds(
        UndoRefusedPush,
        text,
        ints,
        ints,
        st.sampled_from(["refused", "expired", "acted"]),
        st.none() | st.integers(0, 9),
    ),
    st.builds(EndedPush, text, ints, json_values, st.none() | text),
    st.builds(StalledPush, text, st.just("store_error")),
    st.builds(ClosedPush, st.sampled_from(["shutdown", "idle", "slow_consumer", "unresponsive"])),
    st.builds(PingPush),
)


# --- round trips ---------------------------------------------------------------------------------
def test_every_op_has_a_typed_result():
    from protocol.messages import REQUESTS

    assert set(RESULTS) == set(REQUESTS) == set(results)


@given(request_ids, op_and_result)
def test_a_result_reply_survives_encode_and_decode(rid, op_result):
    op, result = op_result
    line = encode_message(Reply(rid, result))
    assert decode_line(line, op) == Reply(rid, result)
    assert encode_message(decode_line(line, op)) == line


@given(request_ids, refusals())
def test_a_refusal_survives_encode_and_decode(rid, refused):
    line = encode_message(Reply(rid, refused))
    back = decode_line(line, "act")
    assert back == Reply(rid, refused)
    assert not back.ok and back.outcome.code is refused.code


@given(pushes)
def test_a_push_survives_encode_and_decode(msg):
    line = encode_message(msg)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode_line(line) == msg
    assert encode_message(decode_line(line)) == line


# --- the documented shapes -----------------------------------------------------------------------
SNAPSHOT = [
    "session",
    "game",
    "seq",
    "seats",
    "started",
    "ended",
    "to_act",
    "view",
    "seed_commitment",
]
ENDED = ["outcome", "seed"]  # and "aborted" between them when the host ended the session
LAST = ["deadline", "connected", "options", "timers", "undo"]  # after ENDED: every snapshot
RESULT_KEYS = {  # PROTOCOL.md, "Ops", the result column, in order
    "hello": ["protocol", "host", "version", "ops", "capabilities"],
    "games": ["games"],
    "create": ["session", "game", "seats", "bots", "free", "seq", "seed_commitment"],
    "sessions": ["sessions", "next"],
    "join": ["seat", "token", *SNAPSHOT],
    "watch": SNAPSHOT,
    "resume": ["seat", *SNAPSHOT],
    "view": SNAPSHOT,
    "act": ["seq"],
    "undo": ["seq", "status"],
    "undo_answer": ["seq", "status"],
    "leave": ["left"],
    "ping": ["pong"],
    # PROTOCOL.md, "Replay ops"
    "log": ["session", "game", "seq", "live", "ended", "open", "records", "next"],
    "replay": ["session", "game", "seq", "last", "seats", "started", "ended", "to_act", "view"],
    "verify": ["ok", "records", "seq", "explanation", "warning"],
    "fork": ["session", "game", "forked_from", "seats", "free", "seq", "tokens"],
}

GAME_KEYS = ["id", "title", "version", "min_seats", "max_seats", "description", "options"]
OPTION_KEYS = ["name", "default", "type", "choices", "doc"]


def documented_pushes() -> dict[str, list[str]]:
    """Each push's keys in order, read from PROTOCOL.md's "Pushes" list."""
    text_ = PROTOCOL_MD.read_text()
    section = text_[text_.index("## Pushes") : text_.index("## Limits")]
    out = {}
    for m in re.finditer(r'^- `(\{"push": "(\w+)"[^`]*\})`', section, re.M):
        out[m.group(2)] = re.findall(r'"(\w+)":', m.group(1))
    return out


def test_protocol_md_lists_every_push():
    assert (
        set(documented_pushes())
        == set(PUSHES)
        == {
            "event",
            "turn",
            "view",
            "presence",
            "undo_asked",
            "undo_done",
            "undo_refused",
            "ended",
            "stalled",
            "closed",
            "detached",
            "ping",
        }
    )


@given(pushes)
def test_a_push_has_the_keys_protocol_md_shows_in_that_order(msg):
    keys = list(orjson.loads(encode_message(msg)))
    expected = documented_pushes()[msg.name]
    if isinstance(msg, EndedPush) and msg.aborted is not None:
        expected = [*expected, "aborted"]  # "with "aborted": reason ... when the host ended it"
    assert keys == expected


@given(request_ids, op_and_result)
def test_a_result_has_the_keys_protocol_md_shows_in_that_order(rid, op_result):
    op, result = op_result
    reply = orjson.loads(encode_message(Reply(rid, result)))
    assert list(reply) == ["id", "ok", "result"] and reply["ok"] is True
    keys = list(reply["result"])
    expected = RESULT_KEYS[op]
    if getattr(result, "truth", False):  # replay with truth: the whole state, not a view
        expected = [*expected[:-1], "state"]
    snap = getattr(result, "snapshot", None)
    if op == "games":  # "for each game `id`, `title`, ... `options` (each: `name`, ...)"
        for game in reply["result"]["games"]:
            assert list(game) == GAME_KEYS
            assert all(list(o) == OPTION_KEYS for o in game["options"])
    if snap is not None and snap.ended:
        expected = [
            *expected,
            "outcome",
            *(["aborted"] if snap.aborted is not None else []),
            "seed",
        ]
    if snap is not None:
        expected = [*expected, *LAST]
    assert keys == expected


@given(request_ids, refusals())
def test_a_refusal_has_the_documented_error_object(rid, refused):
    reply = orjson.loads(encode_message(Reply(rid, refused)))
    assert list(reply) == ["id", "ok", "error"] and reply["ok"] is False
    assert list(reply["error"])[:2] == ["code", "message"]
    assert set(reply["error"]) - {"code", "message"} <= set(ERRORS[refused.code].fields)


# --- the same bytes as the host's dict-built lines -----------------------------------------------
@given(request_ids, snapshots(), st.integers(0, 9), text)
def test_snapshot_replies_are_the_bytes_the_dict_built_replies_were(rid, snap, seat, token):
    """The host built these as dicts before the typed messages: the bytes must not change."""
    d: dict[str, Any] = {
        "session": snap.session,
        "game": snap.game,
        "seq": snap.seq,
        "seats": [
            None if s is None else {"seat": s.seat, "name": s.name, "bot": s.bot}
            for s in snap.seats
        ],
        "started": snap.started,
        "ended": snap.ended,
        "to_act": snap.to_act,
        "view": snap.view,
        "seed_commitment": snap.seed_commitment,
    }
    if snap.ended:
        d["outcome"] = snap.outcome
        if snap.aborted is not None:
            d["aborted"] = snap.aborted
        d["seed"] = snap.seed
    # the fields added later come last, so the bytes before them are those of old
    d["deadline"] = None if snap.deadline is None else snap.deadline.to_wire()
    d["connected"] = snap.connected
    d["options"] = snap.options
    d["timers"] = snap.timers.to_wire()
    d["undo"] = None if snap.undo is None else snap.undo.to_wire()
    assert encode_message(Reply(rid, Watching(snap))) == encode_ok(rid, d)
    assert encode_message(Reply(rid, Joined(seat, token, snap))) == encode_ok(
        rid, {"seat": seat, "token": token, **d}
    )
    assert encode_message(Reply(rid, Resumed(seat, snap))) == encode_ok(rid, {"seat": seat, **d})


@given(request_ids, ints, text, ints, json_values, st.none() | text)
def test_hot_path_lines_are_the_bytes_the_dict_built_lines_were(rid, seq, sid, n, body, aborted):
    assert encode_message(Reply(rid, Accepted(seq))) == encode_ok(rid, {"seq": seq})
    assert encode_message(EventPush(sid, n, "event", body)) == push(
        "event", session=sid, seq=n, kind="event", event=body
    )
    assert encode_message(TurnPush(sid, n, 1, [body])) == push(
        "turn", session=sid, seq=n, seat=1, legal=[body], to_act=[], deadline=None
    )
    due = Deadline("2026-11-30T10:02:00.118Z", 119.998)
    assert encode_message(TurnPush(sid, n, 1, [body], [1, 2], due)) == push(
        "turn",
        session=sid,
        seq=n,
        seat=1,
        legal=[body],
        to_act=[1, 2],
        deadline={"at": "2026-11-30T10:02:00.118Z", "seconds_left": 119.998},
    )
    fields = {"outcome": body} | ({} if aborted is None else {"aborted": aborted})
    assert encode_message(EndedPush(sid, n, body, aborted)) == push(
        "ended", session=sid, seq=n, **fields
    )


@given(request_ids, refusals())
def test_refusals_are_the_bytes_encode_error_made(rid, refused):
    assert encode_message(Reply(rid, refused)) == encode_error(
        rid, refused.code, refused.message, **refused.extra
    )


def test_a_refusal_never_sends_an_undeclared_field(error_replies_match_the_table):
    line = encode_message(Reply(1, Refused(ErrorCode.SESSION_ENDED, "over", {"seq": 4})))
    assert orjson.loads(line)["error"] == {"code": "session_ended", "message": "over"}
    assert error_replies_match_the_table == [("session_ended", {"seq": 4})]
    error_replies_match_the_table.clear()  # provoked on purpose


# --- PROTOCOL.md's transcript --------------------------------------------------------------------
def transcript() -> list[tuple[str | None, bytes]]:
    """The host's lines of "A whole session by hand" that are whole JSON (some are cut with
    ``…`` for the page), each with the op of the request it answers (None for a push)."""
    text_ = PROTOCOL_MD.read_text()
    section = text_[text_.index("## A whole session by hand") : text_.index("## The games")]
    ops: dict[Any, str] = {}
    out: list[tuple[str | None, bytes]] = []
    for line in section.splitlines():
        if line.startswith(">>> "):
            try:
                req = json.loads(line[4:])
            except ValueError:
                continue
            ops[req.get("id")] = req.get("op")
        elif line.startswith("<<< "):
            try:
                msg = json.loads(line[4:])
            except ValueError:
                continue  # cut for the page
            out.append((None if "push" in msg else ops.get(msg.get("id")), line[4:].encode()))
    return out


def test_the_transcript_has_whole_lines_of_every_kind():
    kinds = {orjson.loads(line).get("push", "reply") for _, line in transcript()}
    assert kinds >= {"reply", "event", "turn", "ended"}


@pytest.mark.parametrize(("op", "line"), transcript(), ids=lambda v: str(v)[:20])
def test_every_whole_transcript_line_encodes_back_to_its_bytes(op, line):
    msg = decode_line(line, op)
    if isinstance(msg, Reply) and msg.ok and op is not None:
        assert not isinstance(msg.outcome, dict)  # read as that op's typed result
    assert encode_message(msg) == line + b"\n"
    assert encode(orjson.loads(line)) == line + b"\n"  # the page shows the exact wire form
