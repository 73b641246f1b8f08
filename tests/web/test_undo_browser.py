"""Undo by consent in a real browser (headless Chromium, selenium): a player's page answers
another's request (refuses, then accepts), asks to take back its own play (accepted) and sees
it in the replay debugger; an undo asked after a draw is refused with the reason.

Skipped only when Chromium or its driver is absent (``apt-get install -y chromium
chromium-driver``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.web import test_browser as tb
from tools.client import Client

pytestmark = tb.pytestmark
host = tb.host  # the fixtures, by name
browser = tb.browser
css, listed_events, wait_for = tb.css, tb.listed_events, tb.wait_for


def new_session(host: Any) -> tuple[str, dict[int, str]]:
    """A Crazy Eights session for Ann (seat 0, the page) and Bob (seat 1, a TCP client: the
    first to act); the seats' tokens."""

    async def make(c: Client) -> tuple[str, dict[int, str]]:
        made = await c.call("create", game="crazy-eights", seats=2, options={"target": 30})
        sid = made["session"]
        tokens = {}
        for seat, name in ((0, "Ann"), (1, "Bob")):
            joined = await c.call("join", session=sid, name=name, seat=seat)
            tokens[seat] = joined["token"]
            await c.call("leave", session=sid)
        return sid, tokens

    return host.run(make)


def as_bob(host: Any, sid: str, token: str, what: str, *args: Any) -> Any:
    """Bob, on a new connection (his seat resumed), does ``what``: ``play`` (a card: drawing
    until he can), ``undo``, ``accept`` or ``refuse``. Returns the reply's result (or error)."""

    async def go(c: Client) -> Any:
        snap = await c.call("resume", session=sid, token=token)
        if what == "play":
            seq = snap["seq"]
            while True:
                turn = await _turn(c, seq)
                card = next((a for a in turn["legal"] if a["type"] == "play"), None)
                if card is not None:
                    await c.call("act", session=sid, action=card, seq=turn["seq"])
                    return card
                seq = (await c.call("act", session=sid, action={"type": "draw"}))["seq"]
        if what == "undo":
            return await c.request("undo", session=sid)
        return await c.request("undo_answer", session=sid, accept=what == "accept")

    return host.run(go)


async def _turn(c: Client, seq: int) -> dict[str, Any]:
    while True:
        p = await c.next_push()
        assert p is not None
        if p["push"] == "turn" and p["seq"] >= seq:
            return p


def open_table(d: Any, host: Any, sid: str, token: str) -> None:
    d.get(host.base + "/#/")
    d.execute_script(
        "sessionStorage.setItem(arguments[0], arguments[1])",
        f"gamehost.seat.{sid}",
        json.dumps({"seat": 0, "token": token}),
    )
    d.get(f"{host.base}/#/play/{sid}")
    wait_for(d, lambda d: css(d, "#role") and "seat 0" in css(d, "#role")[0].text, "the table")


def drawn(d: Any, host: Any, sid: str, before: int) -> None:
    """Wait until the log holds an action after its first ``before`` records and the page shows
    the log's end (looked up again each time: Bob's connection closing may append the release
    of his seat at any moment, before or after the move)."""
    wait_for(
        d,
        lambda d: any(r.type == "action" for r in host.records(sid)[before:]),
        "the move in the log",
    )
    wait_for(
        d,
        lambda d: css(d, "#info")[0].get_attribute("data-seq") == str(len(host.records(sid)) - 1),
        "the move shown",
    )


def click(d: Any, selector: str, what: str) -> None:
    """Click the first element ``selector`` finds, once there (the table redraws often: an
    element gone stale is looked for again)."""

    def go(d: Any) -> bool:
        found = css(d, selector)
        if found:
            found[0].click()
        return bool(found)

    wait_for(d, go, what)


def has_text(selector: str, text: str) -> Any:
    return lambda d: any(text in e.text for e in css(d, selector))


def status(d: Any) -> str:
    return css(d, "#status")[0].text


def test_an_undo_asked_accepted_and_shown_in_the_debugger(host, browser):
    d = browser
    sid, tokens = new_session(host)
    open_table(d, host, sid, tokens[0])
    bob = tokens[1]
    card = as_bob(host, sid, bob, "play")
    # Bob asks to take it back: the page asks Ann, who refuses, then (asked again) accepts
    for answer in ("refuse", "accept"):
        assert as_bob(host, sid, bob, "undo")["result"]["status"] == "asked"
        asked = f"Bob asks to take back play {card['card']}"
        wait_for(d, has_text("#undo-prompt", asked), "the question")
        click(d, f"#undo-{answer}", answer)
        wait_for(d, lambda d: not css(d, "#undo-prompt"), "the question answered")
    wait_for(
        d,
        lambda d: any(f"Bob took back play {card['card']}" in t for _, t in listed_events(d)),
        "the undo in the history",
    )
    assert any("You refused: the move stands" in t for _, t in listed_events(d))
    # Bob plays again; Ann plays a card (drawing until she can) and asks to take it back
    as_bob(host, sid, bob, "play")
    while True:
        got = wait_for(
            d,
            lambda d: (
                css(d, "#hand button.card.playable")
                or css(d, '#controls button.action[data-action=\'{"type":"draw"}\']')
            ),
            "Ann's turn",
        )
        if "card" in (got[0].get_attribute("class") or ""):
            break
        shown = len(host.records(sid))
        got[0].click()
        drawn(d, host, sid, shown)
    shown = len(host.records(sid))
    got[0].click()
    if css(d, "#controls button.suit-choice"):  # an 8: name a suit
        click(d, "#controls button.suit-choice", "a suit")
    drawn(d, host, sid, shown)  # Ann's play, in the log and on the page
    click(d, "#undo", "undo")
    wait_for(d, lambda d: "waiting for the other players" in status(d), "the request")
    assert as_bob(host, sid, bob, "accept")["result"]["status"] == "done"
    wait_for(d, lambda d: css(d, "#hand button.card.playable"), "Ann's turn again")
    wait_for(
        d,
        lambda d: any("You took back play" in t for _, t in listed_events(d)),
        "Ann's undo in the history",
    )
    # the debugger: the undo records (in the host's words), and the actions taken back struck
    # through
    d.get(f"{host.base}/debug.html#{sid}")
    wait_for(d, lambda d: css(d, "#timeline .t-undo"), "the timeline")
    undos = css(d, "#timeline .t-undo")
    assert len(undos) == 2 and all("took back" in u.text for u in undos)
    struck = css(d, "#timeline .t-action.undone")
    assert len(struck) == 2 and all("play" in row.text for row in struck)
    asked = [row.text for row in css(d, "#timeline .t-undo_asked")]
    assert len(asked) == 3 and "Bob asked to take back" in asked[0]
    undos[-1].click()  # the state after the last undo: Ann is to act again
    wait_for(d, has_text("#state", "to act: Ann"), "the state after it")
    click(d, "#verify", "verify")
    wait_for(d, lambda d: css(d, "#verify-ok"), "the log verified")


def test_an_undo_asked_after_a_draw_is_refused(host, browser):
    d = browser
    sid, tokens = new_session(host)
    open_table(d, host, sid, tokens[0])
    as_bob(host, sid, tokens[1], "play")
    before = len(host.records(sid))
    click(d, '#controls button.action[data-action=\'{"type":"draw"}\']', "draw")
    drawn(d, host, sid, before)
    click(d, "#undo", "the undo button")
    wait_for(d, lambda d: "cannot undo" in status(d), "the refusal")
    assert "revealed something hidden" in status(d)
    assert "error" in css(d, "#status span")[0].get_attribute("class")
    assert not [r for r in host.records(sid) if r.type.startswith("undo")]


@pytest.fixture(autouse=True)
def _fresh_page(browser):
    yield
    browser.get("about:blank")
