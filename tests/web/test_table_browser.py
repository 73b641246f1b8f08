"""The web table's moves and end, and the debugger's diff and token field, in a real browser
(headless Chromium, as tests/web/test_browser.py drives it): a drink split chosen freely and
sent; a card played by clicking it in the hand; the game-over panel with names and scores; the
debugger's "What changed" as a sequence diff after a draw; the token field showing a seat's own
hand; the turn clock counting down from the host's deadline; a seat's connection dropping and
coming back."""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from selenium.webdriver.support.ui import Select

from tests.web import test_browser as web
from tools.client import Client

pytestmark = web.pytestmark
browser = web.browser  # the module's one Chromium
css, wait_for = web.css, web.wait_for


@pytest.fixture(scope="module")
def host() -> Iterator[web.RunningHost]:
    with tempfile.TemporaryDirectory() as d:
        running = web.RunningHost(Path(d))
        yield running
        running.stop()


def create_in_lobby(
    d: Any, host: web.RunningHost, game: str, seats: int, bots: int | None = None, **options: Any
) -> str:
    """Create ``game`` from the lobby's form with ``seats`` seats and ``bots`` host bots (all
    but this page's seat unless given), the given options set through the form; returns the
    session id once the table shows."""
    d.get(host.base + "/#/")
    form = wait_for(d, lambda d: css(d, f'form[data-game="{game}"]'), "the games")[0]
    for name, value in (("seats", seats), ("bots", seats - 1 if bots is None else bots)):
        field = form.find_element("css selector", f'input[name="{name}"]')
        field.clear()
        field.send_keys(str(value))
    if options:
        form.find_element("css selector", "details summary").click()
    for name, value in options.items():
        control = form.find_element("css selector", f"#opt-{game}-{name}")
        if isinstance(value, int) and not isinstance(value, bool):
            Select(control).select_by_value("number")
            number = form.find_element("css selector", f"#opt-{game}-{name}-number")
            number.clear()
            number.send_keys(str(value))
        else:
            Select(control).select_by_value(orjson.dumps(value).decode())
    form.find_element("css selector", "button.create").click()
    wait_for(d, lambda d: "#/play/" in d.current_url, "the table")
    return d.current_url.rsplit("/", 1)[1]


def actions_of(host: web.RunningHost, sid: str, seat: int) -> list[dict]:
    return [
        r.data["action"]
        for r in host.records(sid)
        if r.type == "action" and r.data["seat"] == seat and not r.data.get("timed_out")
    ]


# ---- Around the World: drinks split freely -------------------------------------------------
def test_a_drink_split_chosen_freely_is_sent(host, browser):
    """Four seats, so a give of 2 or more drinks has splits the turn push does not list: the
    page splits them with its steppers (1 to the next seat, the rest to the last one), sends
    it, and the log has exactly that give."""
    from selenium.common.exceptions import StaleElementReferenceException

    d = browser
    for _attempt in range(6):  # a give of 2+ needs a right guess (or a matched give card)
        sid = create_in_lobby(d, host, "around-the-world", 4, round1_values="escalating")
        while True:

            def ready(d: Any) -> Any:
                if css(d, "#state.ended"):
                    return "ended"
                if css(d, "#controls .give-split"):
                    return "give"
                return css(d, "#controls button.action")

            got = wait_for(d, ready, "my turn or the end")
            if got == "ended":
                break
            if got == "give":
                owed = sum(g["drinks"] for g in quick_picks(d)[0]["to"])
                if owed >= 2:
                    split_freely(d, host, sid, owed)
                    return
                got = css(d, "#controls .quick button.action")
            try:
                got[0].click()
            except StaleElementReferenceException:
                continue
    pytest.fail("no give of 2 or more drinks came to seat 0 in 6 games")


def quick_picks(d: Any) -> list[dict]:
    picks = css(d, "#controls .quick button.action")
    return [orjson.loads(b.get_attribute("data-action")) for b in picks]


def split_freely(d: Any, host: web.RunningHost, sid: str, owed: int) -> None:
    sample = quick_picks(d)
    others = [int(r.get_attribute("data-seat")) for r in css(d, "#controls .give-seat")]
    assert others == [1, 2, 3]
    want = {1: 1, 3: owed - 1}  # 1 to the next seat, the rest to the last: not in the sample
    split = [{"seat": s, "drinks": n} for s, n in sorted(want.items())]
    assert {"type": "give", "to": split} not in sample
    send = css(d, "#give-send")[0]
    assert not send.is_enabled()  # nothing given out yet
    assert css(d, "#give-left")[0].text == f"{owed} of {owed} left to give"
    for seat, n in want.items():
        more = css(d, f'#controls .give-seat[data-seat="{seat}"] button.more')[0]
        for _ in range(n):
            more.click()
    # every drink is given out: no more "+" anywhere, and the split can be sent
    assert css(d, "#give-left")[0].text == f"all {owed} given out"
    assert all(not b.is_enabled() for b in css(d, "#controls .give-seat button.more"))
    counts = {
        int(r.get_attribute("data-seat")): int(
            r.find_element("css selector", "input.drinks").get_attribute("value")
        )
        for r in css(d, "#controls .give-seat")
    }
    assert counts == {1: 1, 2: 0, 3: owed - 1}
    assert send.is_enabled()
    send.click()
    wait_for(
        d,
        lambda d: {"type": "give", "to": split} in actions_of(host, sid, 0),
        "the give in the log",
    )
    given = [
        r.data["event"]
        for r in host.records(sid)
        if r.type == "event" and r.data["event"]["type"] == "given" and r.data["event"]["seat"] == 0
    ]
    assert given[-1]["to"] == split
    assert web.REGISTRY.engines["around-the-world"].verify(host.records(sid)) is None


# ---- Crazy Eights: a card is played by clicking it, shown once -----------------------------
def test_a_card_is_played_by_clicking_it_in_the_hand(host, browser):
    from selenium.common.exceptions import StaleElementReferenceException

    d = browser
    sid = create_in_lobby(d, host, "crazy-eights", 2)
    for _turn in range(30):
        wait_for(d, lambda d: css(d, "#hand button.card, #controls button"), "my turn")
        try:
            hand = [c.get_attribute("data-card") for c in css(d, "#hand [data-card]")]
            playable = css(d, "#hand button.card.playable[data-action]")
            labels = [b.text for b in css(d, "#controls button")]
            if not playable:  # nothing to play (or only an 8): draw, and look again
                css(d, '#controls button.action[data-action*="draw"]')[0].click()
                continue
            card = playable[0].get_attribute("data-card")
            action = orjson.loads(playable[0].get_attribute("data-action"))
        except (StaleElementReferenceException, IndexError):
            continue
        # each card shows once, in the hand; no list of "play" buttons repeats them
        assert len(hand) == len(css(d, "#board [data-card]")) - 1  # all but the discard's top
        assert not css(d, "#controls .card") and not any(x.startswith("play") for x in labels)
        before = len(actions_of(host, sid, 0))
        playable[0].click()
        wait_for(d, lambda d, n=before: len(actions_of(host, sid, 0)) > n, "my move in the log")
        assert actions_of(host, sid, 0)[-1] == action
        assert action["type"] == "play" and action["card"] == card
        return
    pytest.fail("no card of seat 0's could be played in 30 turns")


# ---- the game-over panel --------------------------------------------------------------------
def names_in_log(host: web.RunningHost, sid: str) -> dict[int, str]:
    return {r.data["seat"]: r.data["name"] for r in host.records(sid) if r.type == "seat_taken"}


def play_to_the_end(d: Any) -> None:
    """Click the first move offered (a playable card, a suit, a button) until the game ends."""
    from selenium.common.exceptions import StaleElementReferenceException

    while True:

        def ready(d: Any) -> Any:
            if css(d, "#state.ended"):
                return "ended"
            return (
                css(d, "#controls button.suit-choice")
                or css(d, "#hand button.card.playable")
                or css(d, "#controls button.action")
                or css(d, "#give-send:not([disabled])")
            )

        got = wait_for(d, ready, "my turn or the end")
        if got == "ended":
            return
        try:
            got[0].click()
        except StaleElementReferenceException:
            continue


@pytest.mark.parametrize(
    ("game", "seats", "options", "column"),
    [
        ("crazy-eights", 3, {"target": 1}, "points"),
        ("seven-twenty-seven", 4, {"hands": 1}, "chips"),
        ("around-the-world", 2, {}, "drank"),
    ],
)
def test_the_game_over_panel_names_the_winners_and_every_seats_score(
    host, browser, game, seats, options, column
):
    d = browser
    d.get(host.base + "/#/")
    name = wait_for(d, lambda d: css(d, "#name"), "the lobby")[0]
    name.clear()
    name.send_keys("zoe")
    sid = create_in_lobby(d, host, game, seats, **options)
    play_to_the_end(d)
    panel = wait_for(d, lambda d: css(d, "#outcome #scores"), "the game-over panel")[0]
    names = names_in_log(host, sid)
    assert names[0] == "zoe"
    outcome = host.records(sid)[-1].data["outcome"]
    rows = css(d, "#scores tbody tr")
    assert [r.get_attribute("data-seat") for r in rows] == [str(i) for i in range(seats)]
    heads = [th.text for th in panel.find_elements("css selector", "thead th")]
    assert heads[0] == "seat" and heads[1] == column
    for i, row in enumerate(rows):
        cells = [td.text for td in row.find_elements("css selector", "td")]
        assert cells[0] == names[i] + (" (bot)" if i else "")
        if game == "crazy-eights":
            assert cells[1] == str(outcome["scores"][i])
        elif game == "seven-twenty-seven":
            assert cells[1] == str(outcome["stacks"][i])
        else:
            assert cells[1] == str(outcome["ledger"][i]["total"]["taken"])
    shown = [(w.get_attribute("data-seat"), w.text) for w in css(d, "#outcome .winners .winner")]
    if game == "around-the-world":  # no winners: the seats that drank the most
        totals = [line["total"]["taken"] for line in outcome["ledger"]]
        most = [i for i, n in enumerate(totals) if n == max(totals)] if max(totals) else []
        assert [int(s) for s, _ in shown] == most
        if most:
            assert css(d, "#outcome .winners")[0].text.startswith("Drank the most")
    else:
        assert [int(s) for s, _ in shown] == outcome["winners"]
        label = "Winner: " if len(outcome["winners"]) == 1 else "Winners: "
        assert css(d, "#outcome .winners")[0].text.startswith(label)
    assert [t for _, t in shown] == [
        names[int(s)] + (" (bot)" if s != "0" else "") for s, _ in shown
    ]
    winners = {int(s) for s, _ in shown}
    marked = {int(r.get_attribute("data-seat")) for r in css(d, "#scores tr.winner")}
    assert marked == winners
    assert "winners: [" not in css(d, "#outcome")[0].text  # names, not seat numbers


# ---- the debugger: what changed, as a sequence diff ------------------------------------------
def bots_only_game(host: web.RunningHost) -> str:
    async def play(c: Client) -> str:
        made = await c.call(
            "create", game="crazy-eights", seats=2, bots=2, options={"target": 1, "hand_size": 3}
        )
        snap = await c.call("watch", session=made["session"])
        while not snap["ended"]:
            p = await c.next_push()
            if p is None or p["push"] == "ended":
                break
        return made["session"]

    return host.run(play)


def test_the_debugger_diffs_lists_as_sequences_after_a_draw(host, browser):
    """Crazy Eights draws from the top of the stock (index 0): comparing the full truth before
    and after a `drew` record shows its cards removed from the stock and added to the hand,
    and nothing else of the stock, where a diff by position marked every stock card."""
    d = browser
    for _ in range(20):  # a deal of 3 cards may end before anybody draws: play another
        sid = bots_only_game(host)
        records = host.records(sid)
        draws = [r for r in records if r.type == "event" and r.data["event"]["type"] == "drew"]
        if draws:
            break
    assert draws, "20 bots-only games without a draw"
    drew = max(draws, key=lambda r: r.data["event"]["count"])
    count, seat = drew.data["event"]["count"], drew.data["event"]["seat"]
    d.get(f"{host.base}/debug.html#{sid}")
    wait_for(d, lambda d: css(d, "#last")[0].text == str(records[-1].seq), "the timeline")
    Select(css(d, "#viewer")[0]).select_by_value("truth")  # an ended Crazy Eights log is open
    wait_for(d, lambda d: "full truth" in css(d, "#state-who")[0].text, "the truth")
    seq = css(d, "#seq")[0]
    seq.clear()
    seq.send_keys(str(drew.seq), "\n")
    wait_for(d, lambda d: css(d, "#rec-seq")[0].text.startswith(f"#{drew.seq} "), "the draw")
    frm = css(d, "#diff-from")[0]
    frm.clear()
    frm.send_keys(str(drew.seq - 1))
    css(d, "#diff")[0].click()
    rows = wait_for(d, lambda d: css(d, "#changes tr[data-kind]"), "the changes")
    changes = [(r.get_attribute("data-path"), r.get_attribute("data-kind")) for r in rows]
    stock = [c for c in changes if c[0].startswith("state.stock[")]
    drawn = drew_cards(host, sid, drew.seq)
    assert stock == [(f"state.stock[{i}]", "removed") for i in range(count)]
    removed = [c.text for c in css(d, '#changes tr[data-path^="state.stock["] td.before')]
    assert removed == drawn
    hand = [c for c in changes if c[0].startswith(f"state.hands[{seat}]")]
    assert [kind for _, kind in hand] == ["added"] * count
    added = [c.text for c in css(d, f'#changes tr[data-path^="state.hands[{seat}]"] td.after')]
    assert added == drawn
    assert len(changes) < count * 2 + 8  # a few counters besides, never the whole stock
    assert f"{count} added, {count} removed" in css(d, "#changes-count")[0].text


def drew_cards(host: web.RunningHost, sid: str, seq: int) -> list[str]:
    return next(r for r in host.records(sid) if r.seq == seq).data["event"]["cards"]


# ---- the debugger: your own seat by its token ----------------------------------------------
def test_the_debuggers_token_field_shows_your_own_hand(host, browser):
    """A live session is not open: as a spectator the hand is hidden; with the seat's token
    typed into the field, the debugger finds the seat and shows that seat's hand."""

    async def seated(c: Client) -> tuple[str, str, list[str]]:
        made = await c.call("create", game="crazy-eights", seats=2, bots=1)
        sid = made["session"]
        joined = await c.call("join", session=sid, name="tess")
        while (p := await c.next_push()) is not None:
            if p["push"] == "turn" and p["seat"] == 0:
                break
        view = await c.call("view", session=sid)
        await c.call("leave", session=sid)
        return sid, joined["token"], view["view"]["hand"]

    sid, token, hand = host.run(seated)
    d = browser
    d.get(f"{host.base}/debug.html#{sid}")
    wait_for(d, lambda d: "to act" in css(d, "#state")[0].text, "the state")
    assert css(d, '#state [data-path="state.hand"] [data-card]') == []  # a spectator's
    assert css(d, '#viewer option[value="0"]')[0].get_attribute("disabled") is not None
    field = css(d, "#token")[0]
    field.send_keys("not-a-token")
    css(d, "#use-token")[0].click()
    wait_for(d, lambda d: "holds no seat" in css(d, "#status")[0].text, "the refusal")
    field.clear()
    field.send_keys(token)
    css(d, "#use-token")[0].click()
    wait_for(d, lambda d: css(d, "#viewer")[0].get_attribute("value") == "0", "seat 0 chosen")
    shown = wait_for(
        d,
        lambda d: [
            c.get_attribute("data-card")
            for c in css(d, '#state [data-path="state.hand"] [data-card]')
        ],
        "my hand",
    )
    assert shown == hand
    assert "(you)" in css(d, '#viewer option[value="0"]')[0].text
    assert token not in d.current_url
    assert css(d, '#viewer option[value="1"]')[0].get_attribute("disabled") is not None


# ---- the turn clock ---------------------------------------------------------------------------
def test_the_countdown_falls_from_the_hosts_deadline(host, browser):
    """On my turn the table counts down the host's turn timer (120 s by default): the seconds
    it shows fall, and agree with the deadline a spectator gets from the host at that moment."""
    d = browser
    sid = create_in_lobby(d, host, "crazy-eights", 2)
    clock = wait_for(d, lambda d: css(d, "#state #countdown.mine"), "my turn's countdown")[0]
    first = int(clock.get_attribute("data-seconds"))
    assert 100 < first <= 120
    assert clock.text == f"{first // 60}:{first % 60:02d} left"

    async def deadline(c: Client) -> dict:
        return (await c.call("watch", session=sid))["deadline"]

    def shown() -> int:
        return int(css(d, "#countdown")[0].get_attribute("data-seconds"))

    wait_for(d, lambda d: shown() <= first - 2, "the countdown to fall by 2 s")
    before = shown()
    host_says = host.run(deadline)
    after = shown()
    assert css(d, "#countdown")[0].get_attribute("data-at") == host_says["at"]  # the log's
    assert after - 2 <= host_says["seconds_left"] <= before + 1
    # it keeps falling, one second at a time
    seen = [shown()]
    wait_for(d, lambda d: seen.append(shown()) or len(set(seen)) >= 3, "two more ticks")
    assert seen == sorted(seen, reverse=True)  # never up, while nothing happens


# ---- who is connected ---------------------------------------------------------------------------
class LineClient:
    """A bare TCP client of the JSON-lines protocol: a socket it can drop at any moment."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=web.WAIT)
        self.lines = self.sock.makefile("rb")
        self.next_id = 0

    def call(self, op: str, **fields: Any) -> dict:
        self.next_id += 1
        self.sock.sendall(orjson.dumps({"id": self.next_id, "op": op, **fields}) + b"\n")
        for line in self.lines:  # pushes before the reply are skipped
            msg = orjson.loads(line)
            if msg.get("id") == self.next_id:
                assert msg["ok"], msg
                return msg["result"]
        raise AssertionError("the host hung up")

    def drop(self) -> None:
        self.lines.close()
        self.sock.close()


def test_a_seats_connection_dropping_and_coming_back_shows(host, browser):
    d = browser
    sid = create_in_lobby(d, host, "crazy-eights", 2, bots=0)
    wait_for(d, lambda d: css(d, '.seat[data-seat="0"] .presence.on'), "my own seat's dot")
    assert css(d, '.seat[data-seat="1"] .presence.off')  # free: nobody there
    other = LineClient(host.port)
    token = other.call("join", session=sid, name="rob")["token"]
    dot = '.seat[data-seat="1"] .presence'
    wait_for(d, lambda d: css(d, f"{dot}.on"), "rob's dot on")
    other.drop()  # the socket closes, no leave: the host releases the seat (gone)
    wait_for(d, lambda d: css(d, f"{dot}.off"), "rob's dot off")
    assert css(d, '.seat[data-seat="1"].away')
    assert css(d, f"{dot}")[0].get_attribute("title") == "not connected: away"
    released = [r for r in host.records(sid) if r.type == "seat_released"]
    assert released and released[-1].data["seat"] == 1
    back = LineClient(host.port)
    back.call("resume", session=sid, token=token)
    wait_for(d, lambda d: css(d, f"{dot}.on"), "rob's dot on again")
    assert not css(d, '.seat[data-seat="1"].away')
    assert [r.type for r in host.records(sid)][-1] == "seat_held"
    back.drop()
    wait_for(d, lambda d: css(d, f"{dot}.off"), "rob's dot off again")
