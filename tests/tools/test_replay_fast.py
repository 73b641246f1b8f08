"""``replay --verify`` folds a log once and compares records as they are: the same verdicts as
the two-pass check it replaced (fold the whole log, then re-run it), on true and tampered logs."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tools.replay
from host.plugins.registry import load_registry
from host.store.base import CorruptLog
from host.store.file import fold_log, read_log
from host.table.engine import BadRecord, GameFault, Record, same_json
from host.table.local import play_local
from tools.cli import main

REGISTRY = load_registry()
ENGINE = REGISTRY.engines["crazy-eights"]
# JSON lines only: a module-level list of Records would stay alive for the whole test run
# (tests/host/test_hot_path.py counts the Records alive)
LINES = [
    r.to_json() for r in play_local(ENGINE.game, {"target": 1}, 3, seed=b"f" * 32, engine=ENGINE)[1]
]


GARBLED = "garbled"  # a record written as a line that does not read (damage, not a difference)


def write(path: Path, records: list[dict]) -> Path:
    path.write_bytes(
        b"".join(
            (b'{"seq": not json' if r.get(GARBLED) else orjson.dumps(r)) + b"\n" for r in records
        )
    )
    return path


def two_pass_engine_verify(engine, records):
    """The engine's check as it was: every produced record made JSON and back, then compared."""
    if not records or records[0].type != "header":
        return (0, "the log does not start with a header")
    at = 0
    try:
        state = engine.initial(records[0])
        i = 1
        while i < len(records):
            rec = records[i]
            at = rec.seq
            diff, produced, after = engine._replay_cause(state, rec)
            if diff is not None:
                return diff
            for j, want in enumerate(produced):
                if i + j >= len(records):
                    return (want.seq, f"the log ends here but the code produces {want.to_json()}")
                got = records[i + j]
                want_data = orjson.loads(orjson.dumps(want.data))
                # compared as JSON values: `true` is not `1` (Python's == says it is)
                if (got.seq, got.type) != (want.seq, want.type) or not same_json(
                    got.data, want_data
                ):
                    return (
                        got.seq,
                        f"recorded {got.to_json()} but the code produces {want.to_json()}",
                    )
            state = after
            i += len(produced)
    except BadRecord as exc:
        return (exc.seq, f"the log does not fold: {exc.message}")
    except GameFault as exc:
        return (exc.seq or at, f"the game faults on replay: {exc.message}")
    except Exception as exc:  # noqa: BLE001
        return (at, f"replay failed: {type(exc).__name__}: {exc}")
    return None


def two_pass_verdict(path: Path) -> tuple[int, str, str]:
    """What ``replay --verify`` answered before: (status, stdout, stderr)."""
    try:
        raw = read_log(path)
    except CorruptLog as exc:
        return 2, "", f"error: {exc}\n"
    if raw[0].get("type") != "header":
        return 2, "", f"error: {path}: no header record\n"
    records = [Record.from_json(r) for r in raw]
    engine = REGISTRY.engines.get(records[0].data.get("game"))
    if engine is None:
        return (
            2,
            "",
            (
                f"error: {path}: game {records[0].data.get('game')!r} is not installed (a game"
                " served with --plugin: give the same --plugin here)\n"
            ),
        )
    warning = tools.replay.version_warning(engine, records)
    err = "" if warning is None else f"warning: {warning}\n"
    try:
        fold_log(path, engine, records)
        damage = None
    except CorruptLog as exc:
        damage = exc
    try:
        header = records[0].data
        diff = None
        for rec in records:
            if rec.type == "ended":
                import hashlib

                try:
                    seed = bytes.fromhex(rec.data["seed"])
                except (KeyError, TypeError, ValueError):
                    seed = None
                if seed is None or hashlib.sha256(seed).hexdigest() != header["seed_commitment"]:
                    diff = (rec.seq, "the revealed seed does not match the header's commitment")
                    break
        if diff is None:
            diff = two_pass_engine_verify(engine, records)
    except Exception as exc:  # noqa: BLE001
        if damage is None:
            return 2, "", err + f"error: {path}: verify failed: {type(exc).__name__}: {exc}\n"
        diff = None
    if diff is not None and (damage is None or diff[0] < damage.seq):
        return 1, f"DIFFERS at seq {diff[0]}: {diff[1]}\n", err
    if damage is not None:
        return 2, "", err + f"error: {damage}\n"
    ok = f"ok: {path.name}: {len(records)} records replay to the same events\n"
    return (0 if warning is None else 3), ok, err


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1, 60),
    st.sampled_from(["2C", "8H", "KS", "AD", "C", "play", "draw", "pass", "drew", "event"]),
    st.lists(st.sampled_from(["2C", "3D", "8S"]), max_size=3),
)


@st.composite
def tampered(draw) -> list[dict]:
    records = [orjson.loads(orjson.dumps(r)) for r in LINES]
    for _ in range(draw(st.integers(1, 2))):
        i = draw(st.integers(1, len(records) - 1))
        rec = records[i]
        nested = [k for k in ("event", "action") if isinstance(rec.get(k), dict)]
        target = rec[nested[0]] if nested and draw(st.booleans()) else rec
        op = draw(
            st.sampled_from(["set", "set", "set", "delete", "add", "cut", "drop", "copy", "garble"])
        )
        keys = sorted(k for k in target if k != "seq")
        if op == "set" and keys:
            target[draw(st.sampled_from(keys))] = draw(VALUES)
        elif op == "delete" and keys:
            del target[draw(st.sampled_from(keys))]
        elif op == "add":
            target[draw(st.sampled_from(["extra", "seat", "cards", "timed_out"]))] = draw(VALUES)
        elif op == "cut":
            del records[i:]
            break
        elif op == "garble":  # read damage, after or before a difference: damage is the verdict
            records[i] = {GARBLED: True}
        elif op in ("drop", "copy"):  # a gap or a repeat: renumbered so the log still reads
            if op == "drop":
                del records[i]
            else:
                records.insert(i, dict(records[i]))
            for seq, r in enumerate(records):
                r["seq"] = seq
    return records


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(records=tampered())
def test_verify_gives_the_two_pass_verdict_on_any_tampered_log(tmp_path, capsys, records):
    path = write(tmp_path / "t.jsonl", records)
    want = two_pass_verdict(path)
    capsys.readouterr()
    status = main(["replay", "--verify", str(path)])
    out, err = capsys.readouterr()
    assert (status, out, err) == want


def test_verify_gives_the_two_pass_verdict_on_the_true_log(tmp_path, capsys):
    path = write(tmp_path / "t.jsonl", LINES)
    assert two_pass_verdict(path)[0] == 0
    assert main(["replay", "--verify", str(path)]) == 0
    assert capsys.readouterr().out == two_pass_verdict(path)[1]


def test_a_log_that_verifies_is_folded_once_a_diverging_one_is_folded_again(
    tmp_path, capsys, monkeypatch
):
    calls: list[int] = []
    real = tools.replay.fold_log

    def counting(path, engine, records):
        calls.append(len(records))
        return real(path, engine, records)

    monkeypatch.setattr(tools.replay, "fold_log", counting)
    path = write(tmp_path / "t.jsonl", LINES)
    assert main(["replay", "--verify", str(path)]) == 0
    assert calls == []  # the re-run folded it: no second fold
    diverging = [orjson.loads(orjson.dumps(r)) for r in LINES]
    drew = next(r for r in diverging if r["type"] == "event" and r["event"]["type"] == "drew")
    drew["event"]["cards"] = ["2C"] if drew["event"]["cards"] != ["2C"] else ["3C"]
    write(path, diverging)
    assert main(["replay", "--verify", str(path)]) == 1
    assert f"DIFFERS at seq {drew['seq']}" in capsys.readouterr().out
    assert calls == [len(LINES)]  # folded to tell damage from the difference


def test_replayed_actions_are_decoded_once_per_distinct_object(monkeypatch):
    decoded: list[dict] = []
    real = ENGINE.codec.action_from_wire

    def counting(wire):
        decoded.append(wire)
        return real(wire)

    monkeypatch.setattr(ENGINE.codec, "action_from_wire", counting)
    records = [Record.from_json(r) for r in orjson.loads(orjson.dumps(LINES))]
    assert ENGINE.verify(records) is None
    distinct = {orjson.dumps(r.data["action"]) for r in records if r.type == "action"}
    assert len(decoded) == len(distinct) < sum(r.type == "action" for r in records)


def test_replayed_actions_are_encoded_once_per_distinct_object(monkeypatch):
    encoded: list = []
    real = ENGINE.codec.action_to_wire

    def counting(action):
        encoded.append(action)
        return real(action)

    monkeypatch.setattr(ENGINE.codec, "action_to_wire", counting)
    records = [Record.from_json(r) for r in orjson.loads(orjson.dumps(LINES))]
    assert ENGINE.verify(records) is None
    distinct = {orjson.dumps(r.data["action"]) for r in records if r.type == "action"}
    assert len(encoded) == len(distinct) < sum(r.type == "action" for r in records)
    # and the action records it produces are the logged ones, each with its own seat and seq
    tampered = [orjson.loads(orjson.dumps(r)) for r in LINES]
    seen: set[bytes] = set()
    again = None
    for r in (r for r in tampered if r["type"] == "action"):
        key = orjson.dumps(r["action"])
        if key in seen:
            again = r  # an action replayed before: its wire form comes from the memo
            break
        seen.add(key)
    assert again is not None
    again["seat"] = (again["seat"] + 1) % 3
    diff = ENGINE.verify([Record.from_json(r) for r in tampered])
    assert diff is not None and diff[0] <= again["seq"]


def test_an_action_field_true_is_not_taken_for_1_when_remembered():
    seen: dict = {}
    first = ENGINE._recorded_action({"type": "play", "card": "2C", "suit": None}, seen)
    assert ENGINE._recorded_action({"type": "play", "card": "2C", "suit": None}, seen) is first
    with pytest.raises(ValueError):
        ENGINE._recorded_action({"type": "play", "card": True, "suit": None}, seen)
    assert len(seen) == 1


def test_stats_prints_the_rate_and_its_ratio_to_the_orjson_parse_rate(tmp_path, capsys):
    path = write(tmp_path / "t.jsonl", LINES)
    assert main(["replay", "--verify", "--stats", str(path)]) == 0
    ok, stats = capsys.readouterr().out.splitlines()
    assert ok.startswith("ok:")
    m = re.fullmatch(
        r"stats: (\d+) records in [\d.]+ s of CPU = ([\d,]+) records/s; orjson parses the same file"
        r" at ([\d,]+) records/s; ratio ([\d.]+)x",
        stats,
    )
    assert m is not None, stats
    records, rate, orjson_rate, ratio = m.groups()
    assert int(records) == len(LINES)
    num = lambda text: float(text.replace(",", ""))  # noqa: E731
    assert float(ratio) == pytest.approx(num(rate) / num(orjson_rate), abs=0.002)


def test_verify_tells_true_from_1_and_1_0_from_1(tmp_path, capsys):
    """JSON's types count: an event whose seat reads ``true`` (or ``1.0``) where the code
    writes ``1`` is not the same record, although Python's ``==`` says it is."""
    for value in (True, 1.0):
        records = [orjson.loads(orjson.dumps(r)) for r in LINES]
        at = next(
            i
            for i, r in enumerate(records)
            if r["type"] == "event"
            and r["event"].get("seat") == 1
            and type(r["event"]["seat"]) is int
        )
        records[at]["event"]["seat"] = value
        path = write(tmp_path / "t.jsonl", records)
        capsys.readouterr()
        assert main(["replay", "--verify", str(path)]) != 0
        out, err = capsys.readouterr()
        assert f"seq {records[at]['seq']}" in out + err


JSON_LIKE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.0, 1.0, -1.5])
    | st.text(max_size=2),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(JSON_LIKE, JSON_LIKE)
def test_the_same_text_is_the_same_json_value(a, b):
    from host.table.engine import _same_text

    if _same_text(a, b):
        assert same_json(a, b)
    # and a value is the same text as its copy through JSON (the common case verify takes)
    assert _same_text(a, orjson.loads(orjson.dumps(a)))


def test_the_same_text_tells_true_from_one_and_one_from_one_point_zero():
    from host.table.engine import _same_text

    assert not _same_text({"n": True}, {"n": 1}) and not _same_text([1.0], [1])
    assert _same_text({"a": (1, 2)}, {"a": [1, 2]})
    assert not _same_text({"a": 1, "b": 2}, {"b": 2, "a": 1})  # same_json then says yes
    assert same_json({"a": 1, "b": 2}, {"b": 2, "a": 1})


def test_verify_of_a_link_is_refused_in_one_line(tmp_path, capsys):
    real = write(tmp_path / "real.jsonl", LINES)
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    assert main(["replay", "--verify", str(link)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {link}: seq 0: a symbolic link, not a log file: refused\n"


def test_a_torn_tail_is_told_once_when_the_log_is_read_again_to_find_damage(tmp_path, capsys):
    import structlog

    path = write(tmp_path / "t.jsonl", LINES)
    data = path.read_bytes()
    path.write_bytes(data[:-40])  # the last line torn: the last cause has lost a record
    with structlog.testing.capture_logs() as logs:
        status = main(["replay", "--verify", str(path)])
    assert status == 1  # the code produces a record the log does not hold
    assert [e["event"] for e in logs].count("torn_tail") == 1


def test_verify_of_a_folder_without_logs_is_an_error_not_a_clean_pass(tmp_path, capsys):
    empty = tmp_path / "demo-data"
    (empty / "20261208-000000" / "sessions").mkdir(parents=True)  # logs one level further down
    assert main(["replay", "--verify", str(empty)]) == 2
    assert capsys.readouterr().err == (
        f"error: {empty}: no session logs in it (*.jsonl) nor in its sessions folder (a data"
        " dir's)\n"
    )
    one = tmp_path / "one"
    one.mkdir()
    write(one / "t.jsonl", LINES)
    assert main(["replay", "--verify", str(one)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(f"verified 1 log ({len(LINES)} records): 1 ok,")


def test_stats_of_a_damaged_or_torn_log_never_crashes(tmp_path, capsys):
    lines = write(tmp_path / "t.jsonl", LINES).read_bytes().splitlines(keepends=True)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(b"".join([*lines[:20], b'{"seq": not json\n', *lines[21:]]))
    assert main(["replay", "--verify", "--stats", str(damaged)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: {damaged}: seq 20: ")
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b"".join(lines)[:-10])
    assert main(["replay", "--verify", "--stats", str(torn)]) == 1  # its last cause is cut
    assert capsys.readouterr().out.splitlines()[-1].startswith("stats: ")


def test_damage_is_told_before_a_missing_game_or_another_version(tmp_path, capsys):
    raws = [orjson.loads(orjson.dumps(r)) for r in LINES]
    lines = [orjson.dumps(r) + b"\n" for r in raws]
    lines[20] = b'{"seq": not json\n'
    for change in ({"game": "nope"}, {"game_version": "99"}):
        path = tmp_path / "t.jsonl"
        header = orjson.dumps({**raws[0], **change}) + b"\n"
        path.write_bytes(b"".join([header, *lines[1:]]))
        assert main(["replay", "--verify", str(path)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"error: {path}: seq 20: "), err


def test_an_empty_folder_among_others_is_told_and_the_others_are_checked(tmp_path, capsys):
    logs = tmp_path / "logs"
    (logs / "sessions").mkdir(parents=True)  # an empty sessions folder: the logs beside it count
    write(logs / "t.jsonl", LINES)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["replay", "--verify", str(logs), str(empty)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"error: {empty}: no session logs")
    assert out.splitlines()[-1].startswith(f"verified 1 log ({len(LINES)} records): 1 ok,")


def test_at_folds_a_log_file_as_it_reads_it_and_still_tells_damage_past_the_seq(
    tmp_path, capsys, monkeypatch
):
    path = write(tmp_path / "t.jsonl", LINES)
    records = [Record.from_json(r) for r in orjson.loads(orjson.dumps(LINES))]
    want = ENGINE.rebuild(r for r in records if r.seq <= 30)
    assert main(["replay", str(path), "--at", "30", "--json"]) == 0
    shown = orjson.loads(capsys.readouterr().out)
    assert shown["seq"] == 30 and shown["state"] == orjson.loads(
        orjson.dumps(ENGINE.codec.to_wire(want.game))
    )

    def whole(*args, **kwargs):
        raise AssertionError("--at of a log file read it whole")

    monkeypatch.setattr(tools.replay, "load_with_times", whole)
    assert main(["replay", str(path), "--at", "30", "--as", "1"]) == 0
    capsys.readouterr()
    bad = [orjson.loads(orjson.dumps(r)) for r in LINES]
    action = next(r for r in bad[40:] if r["type"] == "action")
    action["seat"] = 99  # reads, but does not fold
    write(path, bad)
    assert main(["replay", str(path), "--at", "30"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {path}: seq {action['seq']}: does not fold")
    assert main(["replay", str(path), "--at", str(len(LINES) + 5)]) == 2


def test_at_tells_a_line_that_does_not_read_before_an_earlier_fold_or_game_error(tmp_path, capsys):
    raws = [orjson.loads(orjson.dumps(r)) for r in LINES]
    action = next(r for r in raws if r["type"] == "action")
    action["seat"] = 99  # reads, does not fold
    lines = [orjson.dumps(r) + b"\n" for r in raws]
    lines[40] = b"garbage\n"  # does not read, later in the log
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(lines))
    assert main(["replay", str(path), "--at", "10"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {path}: seq 40: the line at byte")
    raws = [orjson.loads(orjson.dumps(r)) for r in LINES]
    raws[0]["game"] = "no-such-game"
    lines = [orjson.dumps(r) + b"\n" for r in raws]
    lines[40] = b"garbage\n"
    path.write_bytes(b"".join(lines))
    assert main(["replay", str(path), "--at", "10"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {path}: seq 40: the line at byte")


def test_a_stream_read_in_part_and_dropped_still_finds_damage_later(tmp_path):
    import gc

    lines = [orjson.dumps(r) + b"\n" for r in LINES]
    lines[40] = b"garbage\n"
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(lines))
    stream = tools.replay.LogStream(path, REGISTRY)
    first = iter(stream)  # a reader that stops early, as a fold that fails does
    next(first)
    next(first)
    del first
    gc.collect()
    stream.drain()
    assert stream.damage is not None and stream.damage.seq == 40
