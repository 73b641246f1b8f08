"""Snapshots (host.table.snapshots): the state at any seq from the nearest snapshot and a few
records equals the fold from seq 0; a snapshot that does not match the fold is found."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from host.plugins.registry import load_registry
from host.table import snapshots
from host.table.engine import BadRecord, Engine, Record


def bot_log(n: int, seed: int = 3) -> tuple[Engine, list[Record]]:
    """A Crazy Eights log of about ``n`` records, four bots (never ending by itself)."""
    engine = load_registry().engines["crazy-eights"]
    rng = random.Random(seed)
    opts = engine.codec.options_from_wire({"target": 1_000_000}, 4)
    header = engine.header("snap0000000001", opts, 4, [0, 1, 2, 3], rng.randbytes(32))
    state = engine.initial(header)
    out = [header]
    for seat in range(4):
        new, state = engine.seat_step(state, seat, f"bot{seat}", True, None)
        out += new
    while len(out) < n:
        new, state = engine.bot_step(state, engine.bot_seat(state))
        out += new
    return engine, out


ENGINE, LOG = bot_log(700)


@settings(max_examples=30)
@given(seq=st.integers(0, len(LOG) - 1), every=st.integers(1, 120))
def test_the_state_at_any_seq_from_the_nearest_snapshot_is_the_fold(seq, every):
    folded = snapshots.fold_log(ENGINE, LOG, every)
    assert folded.last == len(LOG) - 1
    assert [s for s, _ in folded.snapshots] == list(range(every, len(LOG), every))
    kept = snapshots.Snapshots()
    kept.add(folded.snapshots)
    near = kept.nearest(seq)
    base = ENGINE.initial(LOG[0]) if near is None else snapshots.load(near[1])
    assert seq - base.seq < every
    state = ENGINE.apply_all(base, LOG[base.seq + 1 : seq + 1])
    assert state == ENGINE.rebuild(LOG[: seq + 1])
    assert snapshots.check_snapshots(ENGINE, LOG, folded.snapshots) is None


def test_a_fold_goes_on_from_its_end_state_as_the_log_grows():
    first = snapshots.fold_log(ENGINE, LOG[:300], 50)
    more = snapshots.fold_log(ENGINE, LOG[300:], 50, snapshots.load(first.end))
    whole = snapshots.fold_log(ENGINE, LOG, 50)

    def states(items):
        return [(seq, snapshots.load(data)) for seq, data in items]

    assert states(first.snapshots + more.snapshots) == states(whole.snapshots)
    assert snapshots.load(more.end) == snapshots.load(whole.end)
    assert first.tokens | more.tokens == whole.tokens


def test_a_snapshot_that_is_not_the_fold_is_found_and_dropping_them_changes_nothing():
    folded = snapshots.fold_log(ENGINE, LOG, 100)
    wrong = list(folded.snapshots)
    seq, _ = wrong[3]
    wrong[3] = (seq, snapshots.dump(ENGINE.rebuild(LOG[: seq - 1])))  # two records short
    assert snapshots.check_snapshots(ENGINE, LOG, wrong) == seq
    assert snapshots.check_snapshots(ENGINE, LOG, [(len(LOG) + 5, wrong[0][1])]) == len(LOG) + 5
    assert snapshots.check_snapshots(ENGINE, LOG, []) is None  # none at all: nothing to trust


def test_a_record_that_does_not_fold_names_its_seq():
    bad = list(LOG)
    bad[40] = Record(40, "event", {"event": {"type": "no-such-event"}})
    with pytest.raises(BadRecord) as err:
        snapshots.fold_log(ENGINE, bad, 10)
    assert err.value.seq == 40


def test_the_nearest_snapshot():
    kept = snapshots.Snapshots()
    kept.add([(10, b"a"), (20, b"bb"), (15, b"skipped")])
    assert kept.nearest(9) is None
    assert kept.nearest(10) == (10, b"a") and kept.nearest(19) == (10, b"a")
    assert kept.nearest(25) == (20, b"bb") and kept.nbytes == 3 and len(kept) == 2
