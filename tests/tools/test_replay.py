"""``gamehost replay`` on real Crazy Eights logs written as the host writes them."""

from __future__ import annotations

import stat
from pathlib import Path

import orjson
import pytest

from host.plugins.registry import load_registry
from host.table.local import play_local
from tools.cli import main

REGISTRY = load_registry()
pytestmark = pytest.mark.skipif(
    "crazy-eights" not in REGISTRY.games, reason="the crazy-eights plugin is not installed"
)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    engine = REGISTRY.engines["crazy-eights"]
    _, records = play_local(engine.game, {"target": 1}, 3, seed=b"r" * 32, engine=engine)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r.to_json()) + b"\n" for r in records))
    return path


def test_verify_passes_on_a_true_log_and_names_the_first_tampered_record(log, capsys):
    assert main(["replay", "--verify", str(log)]) == 0
    assert capsys.readouterr().out.startswith("ok:")
    lines = log.read_bytes().splitlines()
    i = next(i for i, line in enumerate(lines) if b'"type":"drew"' in line)
    rec = orjson.loads(lines[i])
    rec["event"]["cards"] = ["2C"] if rec["event"]["cards"] != ["2C"] else ["3C"]
    lines[i] = orjson.dumps(rec)
    log.write_bytes(b"\n".join(lines) + b"\n")
    assert main(["replay", "--verify", str(log)]) == 1
    assert f"DIFFERS at seq {i}" in capsys.readouterr().out


def test_a_revealed_seed_that_breaks_its_commitment_fails_verify(log, capsys):
    lines = log.read_bytes().splitlines()
    last = orjson.loads(lines[-1])
    last["seed"] = "00" * 32
    lines[-1] = orjson.dumps(last)
    log.write_bytes(b"\n".join(lines) + b"\n")
    assert main(["replay", "--verify", str(log)]) == 1
    assert "commitment" in capsys.readouterr().out


def test_the_timeline_as_a_seat_hides_what_that_seat_could_not_see(log, capsys):
    assert main(["replay", str(log), "--raw", "--width", "100000"]) == 0
    full = capsys.readouterr().out
    assert main(["replay", str(log), "--raw", "--as", "1", "--width", "100000"]) == 0
    as_one = capsys.readouterr().out
    dealt_full = next(line for line in full.splitlines() if '"dealt"' in line)
    dealt_one = next(line for line in as_one.splitlines() if '"dealt"' in line)
    assert '"stock":[' in dealt_full and '"stock":null' in dealt_one
    assert dealt_one.count("null") > dealt_full.count("null")


def test_the_timeline_as_a_seat_the_log_has_not_is_refused(log, capsys):
    seats = orjson.loads(log.read_bytes().splitlines()[0])["seats"]
    assert main(["replay", str(log), "--as", str(seats)]) == 2
    assert capsys.readouterr().err == f"error: no seat {seats}\n"


def test_a_fork_is_a_new_session_that_replays(log, tmp_path, capsys):
    lines = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    inside = next(r["seq"] for r in lines if r["type"] == "action")  # its event follows
    assert main(["replay", str(log), "--fork-at", str(inside), "--out", str(tmp_path / "f")]) == 2
    capsys.readouterr()
    end = inside + 1
    assert main(["replay", str(log), "--fork-at", str(end), "--out", str(tmp_path / "f")]) == 0
    (fork,) = (tmp_path / "f").glob("*.jsonl")
    header = orjson.loads(fork.read_bytes().splitlines()[0])
    assert fork.stem == header["session"] != "local"
    assert header["forked_from"]["seq"] == end
    assert main(["replay", "--verify", str(fork)]) == 0


def test_the_state_at_a_seq_as_a_seat_shows_only_its_own_hand(log, capsys):
    assert main(["replay", str(log), "--at", "10", "--json"]) == 0
    truth = orjson.loads(capsys.readouterr().out)
    assert len(truth["state"]["hands"]) == 3
    assert main(["replay", str(log), "--at", "10", "--as", "0"]) == 0
    text = capsys.readouterr().out
    other = truth["state"]["hands"][1]
    own = truth["state"]["hands"][0]
    assert all(card in text for card in own)
    assert not any(card in text for card in other if card not in own)


def test_a_fork_is_written_through_the_file_store(log, tmp_path, capsys):
    out = tmp_path / "shared"
    out.mkdir(mode=0o755)
    out.chmod(0o755)
    lines = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    end = max(r["seq"] for r in lines if r["type"] == "action") - 1  # ends the cause before
    assert main(["replay", str(log), "--fork-at", str(end), "--out", str(out)]) == 0
    (fork,) = out.glob("*.jsonl")
    written = [orjson.loads(x) for x in fork.read_bytes().splitlines()]
    assert [r["seq"] for r in written] == list(range(end + 1))
    assert all(r["ts"].endswith("Z") for r in written)  # stamped by the store
    assert stat.S_IMODE(fork.stat().st_mode) == 0o600
    assert stat.S_IMODE(out.stat().st_mode) == 0o755  # a folder it did not make is left alone
    assert f"(session {fork.stem})" in capsys.readouterr().out


def test_a_fork_into_a_folder_that_cannot_be_made_is_one_error_line(log, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"not a folder")
    assert main(["replay", str(log), "--fork-at", "0", "--out", str(blocker / "f")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write the fork into") and err.count("\n") == 1
    assert blocker.read_bytes() == b"not a folder"


def _rewrite(log: Path, change) -> list[dict]:
    records = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    change(records)
    log.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return records


def test_a_move_the_host_made_for_a_timed_out_seat_is_marked_in_every_timeline(log, capsys):
    def time_out_the_second_action(records):
        action = [r for r in records if r["type"] == "action"][1]
        action["timed_out"] = True

    records = _rewrite(log, time_out_the_second_action)
    timed = [r["seq"] for r in records if r.get("timed_out")]
    assert main(["replay", "--verify", str(log)]) == 0  # the engine re-plays it as a timeout
    capsys.readouterr()
    for viewer in ([], ["--as", "1"], ["--spectator"]):
        assert main(["replay", str(log), "--raw", "--width", "100000", *viewer]) == 0
        lines = capsys.readouterr().out.splitlines()
        marked = [int(line.split()[0]) for line in lines if "timed out" in line]
        assert marked == timed
        plain = next(line for line in lines if " action " in line and "timed out" not in line)
        assert "played by the host" not in plain
        # in words: the timed-out move is told (the others by their events only)
        assert main(["replay", str(log), "--width", "100000", *viewer]) == 0
        lines = [x for x in capsys.readouterr().out.splitlines() if x.split()[0].isdigit()]
        told = [int(line.split()[0]) for line in lines if "Time ran out for " in line]
        assert told == timed
        seat = records[timed[0]]["seat"]
        whom = "you" if viewer == ["--as", str(seat)] else f"bot{seat}"
        (line,) = [x for x in lines if int(x.split()[0]) == timed[0]]
        assert line.endswith(f"Time ran out for {whom}: the host played draw") or (
            f"Time ran out for {whom}: the host played play " in line
        )


@pytest.mark.parametrize("logged", ["0", None])
def test_verify_warns_about_another_game_version_and_exits_3(log, capsys, logged):
    assert main(["replay", "--verify", str(log)]) == 0
    assert capsys.readouterr().err == ""

    def set_version(records):
        if logged is None:
            del records[0]["game_version"]
        else:
            records[0]["game_version"] = logged

    _rewrite(log, set_version)
    assert main(["replay", "--verify", str(log)]) == 3
    out, err = capsys.readouterr()
    assert out.startswith("ok:")
    (warning,) = err.splitlines()
    installed = REGISTRY.games["crazy-eights"].info.version
    if logged is None:
        assert warning.startswith("warning: the header names no game_version")
    else:
        assert warning == (
            f"warning: the log was written by crazy-eights version {logged};"
            f" the installed version is {installed}"
        )
    assert main(["replay", str(log), "--raw"]) == 0  # the timeline still shows the header
    assert " crazy-eights v" in capsys.readouterr().out
    assert main(["replay", str(log)]) == 0
    assert "A session of Crazy Eights (version " in capsys.readouterr().out


def test_at_prints_text_by_default_and_the_raw_state_with_json(log, capsys):
    assert main(["replay", str(log), "--at", "10", "--json"]) == 0
    raw = orjson.loads(capsys.readouterr().out)
    assert main(["replay", str(log), "--at", "10"]) == 0
    text = capsys.readouterr().out
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(text)
    lines = text.splitlines()
    assert lines[:2] == [f"seq: {raw['seq']}", f"to_act: [{' '.join(map(str, raw['to_act']))}]"]
    for hand in raw["state"]["hands"]:
        assert f"    - [{' '.join(hand)}]" in lines
    # a seat's view: the game's own table by default, the wire view with --json
    assert main(["replay", str(log), "--at", "10", "--as", "0"]) == 0
    table = capsys.readouterr().out
    assert main(["replay", str(log), "--at", "10", "--as", "0", "--json"]) == 0
    view = orjson.loads(capsys.readouterr().out)
    assert table == REGISTRY.games["crazy-eights"].render(view, 0) + "\n"


def test_the_timeline_is_told_in_words_with_the_seat_names_and_the_end(log, capsys):
    records = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    assert main(["replay", str(log), "--width", "100000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    by_seq: dict[int, list[str]] = {}
    seq = -1
    for line in lines:
        if not line.startswith(" " * 21):  # a record's first line; the end has more lines
            seq = int(line.split()[0])
        by_seq.setdefault(seq, []).append(line)
    # every record but the actions has its line; no key=value or JSON anywhere
    said = {r["seq"] for r in records if r["type"] != "action"}
    assert set(by_seq) == said
    assert not any("{" in line or "=" in line for line in lines)
    for r in records:
        if r["type"] == "seat_taken":
            assert by_seq[r["seq"]][0].endswith(
                f"bot{r['seat']} took seat {r['seat']} (a host bot)"
            )
        event = r.get("event") or {}
        if event.get("type") == "played":
            card = event["card"][:-1] + {"C": "♣", "D": "♦", "H": "♥", "S": "♠"}[event["card"][-1]]
            assert f"bot{event['seat']} played {card}" in by_seq[r["seq"]][0]
    # the end names the winners and every seat's score, not the outcome's JSON
    outcome = records[-1]["outcome"]
    end = by_seq[records[-1]["seq"]]
    winners = " and ".join(f"bot{w}" for w in outcome["winners"])
    assert end[0].endswith(
        f"{winners} won after {outcome['deals']} deal" + ("s." if outcome["deals"] > 1 else ".")
    )
    scores = ", ".join(f"bot{i} {n}" for i, n in enumerate(outcome["scores"]))
    assert end[1].strip() == f"Scores: {scores}"


def test_the_timeline_in_words_as_a_seat_says_you_and_names_only_its_own_drawn_cards(log, capsys):
    records = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    assert main(["replay", str(log), "--as", "1", "--width", "100000"]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = {int(x.split()[0]): x for x in out if x.split()[0].isdigit()}
    drew = [r for r in records if (r.get("event") or {}).get("type") == "drew"]
    assert {r["event"]["seat"] for r in drew} >= {0, 1}  # both seen below
    for r in drew:
        e = r["event"]
        line = lines[r["seq"]]
        if e["seat"] == 1:
            assert "You drew " in line and all(c[:-1] in line for c in e["cards"])
        else:
            assert line.endswith(f"bot{e['seat']} drew a card") or line.endswith(
                f"bot{e['seat']} drew {e['count']} cards"
            )


def test_the_end_of_an_around_the_world_log_is_a_few_lines_not_a_json_blob(tmp_path, capsys):
    engine = REGISTRY.engines["around-the-world"]
    _, records = play_local(engine.game, {}, 4, seed=b"w" * 32, engine=engine)
    path = tmp_path / "atw.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r.to_json()) + b"\n" for r in records))
    assert main(["replay", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    end = lines[lines.index(next(x for x in lines if x.startswith(f"{records[-1].seq:>5}"))) :]
    assert "drank the most" in end[0]
    assert end[1].strip().startswith("Drinks: bot0 took ")
    assert all(len(x) < 160 for x in end) and "{" not in "".join(end)
