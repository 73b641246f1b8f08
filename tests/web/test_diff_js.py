"""The debugger's "What changed" (``diff`` in host/static/common.js), run in Node: lists are
compared as sequences (drawing cards from the top of a stock removes those cards and nothing
else), per-seat numbers by position, records field by field.

Skipped when ``node`` is absent (``.ci/run`` installs it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

NODE = shutil.which("node")
COMMON = Path(__file__).resolve().parents[2] / "host" / "static" / "common.js"
pytestmark = pytest.mark.skipif(NODE is None, reason="needs node (.ci/run installs it)")


def diffs(pairs: list[tuple[Any, Any]]) -> list[list[dict]]:
    """``diff(a, b)`` for each pair, in one Node process: each a list of {path, kind, ...}."""
    script = (
        f"import {{ diff }} from {orjson.dumps(COMMON.as_uri()).decode()};\n"
        "let input = '';\n"
        "process.stdin.on('data', (c) => { input += c; });\n"
        "process.stdin.on('end', () => {\n"
        "  const out = JSON.parse(input).map(([a, b]) => diff(a, b));\n"
        "  process.stdout.write(JSON.stringify(out));\n"
        "});\n"
    )
    done = subprocess.run(
        [str(NODE), "--input-type=module", "-e", script],
        input=orjson.dumps(pairs),
        capture_output=True,
        check=True,
        timeout=60,
    )
    return orjson.loads(done.stdout)


def test_drawing_three_cards_removes_three_and_adds_three():
    stock = [f"{r}{s}" for s in "CDHS" for r in ("2", "3", "4", "5", "6", "7", "8", "9")][:31]
    before = {"stock": stock, "hands": [["AS", "KH"], ["QD"]], "draws": 0}
    after = {"stock": stock[3:], "hands": [["AS", "KH", *stock[:3]], ["QD"]], "draws": 3}
    [got] = diffs([(before, after)])
    assert got == [
        {"path": "stock[0]", "kind": "removed", "before": stock[0]},
        {"path": "stock[1]", "kind": "removed", "before": stock[1]},
        {"path": "stock[2]", "kind": "removed", "before": stock[2]},
        {"path": "hands[0][2]", "kind": "added", "after": stock[0]},
        {"path": "hands[0][3]", "kind": "added", "after": stock[1]},
        {"path": "hands[0][4]", "kind": "added", "after": stock[2]},
        {"path": "draws", "kind": "changed", "before": 0, "after": 3},
    ]


def test_per_seat_numbers_by_position_and_records_field_by_field():
    a = {"scores": [1, 2], "ledger": [{"seat": 0, "taken": 1}, {"seat": 1, "taken": 2}]}
    b = {"scores": [2, 3], "ledger": [{"seat": 0, "taken": 1}, {"seat": 1, "taken": 5}], "x": 1}
    [got] = diffs([(a, b)])
    assert got == [
        {"path": "scores[0]", "kind": "changed", "before": 1, "after": 2},
        {"path": "scores[1]", "kind": "changed", "before": 2, "after": 3},
        {"path": "ledger[1].taken", "kind": "changed", "before": 2, "after": 5},
        {"path": "x", "kind": "added", "after": 1},
    ]
    assert diffs([(a, a)]) == [[]]


def lcs(a: list[str], b: list[str]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b):
            prev, row[j + 1] = row[j + 1], prev + 1 if x == y else max(row[j + 1], row[j])
    return row[-1]


cards = st.lists(st.sampled_from(["2C", "7H", "8S", "QD", "AS"]), max_size=12)


@settings(max_examples=4)  # each example is 200 pairs in one Node process
@given(st.lists(st.tuples(cards, cards), min_size=200, max_size=200))
def test_a_list_of_cards_is_a_shortest_edit(pairs):
    """Whatever the lists, the removed and added items are the fewest that turn one into the
    other (a longest common subsequence is kept), and applying them gives the new list."""
    for (a, b), got in zip(pairs, diffs(pairs), strict=True):
        removed = [c for c in got if c["kind"] == "removed"]
        added = [c for c in got if c["kind"] == "added"]
        assert len(removed) + len(added) == len(got)  # strings are never "changed"
        keep = lcs(a, b)
        assert (len(removed), len(added)) == (len(a) - keep, len(b) - keep)
        gone = {int(c["path"][1:-1]) for c in removed}
        new = {int(c["path"][1:-1]): c["after"] for c in added}
        kept = iter([x for i, x in enumerate(a) if i not in gone])
        assert [new[j] if j in new else next(kept) for j in range(len(b))] == b
