"""Seven Twenty-Seven as the terminal client and ``replay --as`` draw it: the pot line adds up."""

from __future__ import annotations

import re

import orjson

from host.plugins.registry import load_registry
from host.table.local import play_local

ENGINE = load_registry().engines["seven-twenty-seven"]
GAME = ENGINE.game


def _numbers(pattern: str, text: str) -> list[int]:
    return [int(x) for x in re.findall(pattern, text)]


def test_the_pot_line_counts_this_rounds_bets_and_agrees_with_each_seats_in_pot():
    _, records = play_local(GAME, {"hands": 4}, 5, seed=b"\x07" * 32, engine=ENGINE)
    state = ENGINE.rebuild(records[:1])
    with_bets = 0
    for rec, after in zip(records[1:], [*records[2:], None], strict=True):
        state = ENGINE.apply(state, rec)
        if not state.started or (after is not None and after.type == "event"):
            continue  # only the tables a player sees: after the last event of each cause
        for viewer in (None, 0, 3):
            view = orjson.loads(orjson.dumps(ENGINE.codec.to_wire(GAME.view(state.game, viewer))))
            text = GAME.render(view, viewer)
            in_pot = sum(_numbers(r"in pot (\d+)", text))
            bets = sum(_numbers(r"this round's bets (\d+)", text))
            lines = [line for line in text.splitlines() if line.startswith("Pot ")]
            if not in_pot:
                assert lines == []
                continue
            (line,) = lines
            total = int(line.split()[1].rstrip(":"))
            pots = _numbers(r"(?:main|side \d+) (\d+) \(", line)
            assert total == in_pot == view["pot_total"] == sum(pots) + bets
            assert bets == sum(p["bet"] for p in view["players"])
            with_bets += bets > 0
    assert with_bets > 0  # the property was tested mid-round, with bets in front of players
