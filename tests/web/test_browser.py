"""The web client in a real browser: headless Chromium driven by selenium, against a host
started as ``gamehost serve --http 0``.

Skipped only when Chromium or its driver is absent (``.ci/run`` installs both from Debian:
``apt-get install -y chromium chromium-driver``).
"""

from __future__ import annotations

import queue
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from host.plugins.registry import load_registry
from host.store.file import read_log
from host.table.engine import Record
from host.testing import cards_in_text
from tools.client import Client

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and Path(DRIVER).exists()),
    reason="needs Debian's chromium and chromium-driver (apt-get install -y chromium"
    " chromium-driver; .ci/run installs them)",
)
REGISTRY = load_registry()
CARD = re.compile(r"\b(?:10|[2-9JQKA])[CDHS]\b")
EVIL = "<img src=x onerror=alert(1)>"
WAIT = 30  # seconds a page may take to show what the test waits for (a slow, shared CI box)


class RunningHost:
    """``gamehost serve`` in a subprocess, with ``--http 0``."""

    def __init__(self, data_dir: Path, *extra: str) -> None:
        self.data_dir = data_dir
        cmd = [sys.executable, "-m", "tools.cli", "serve", "--port", "0", "--http", "0"]
        cmd += ["--data-dir", str(data_dir), "--log-format", "json", "--fsync", "never", *extra]
        self.proc = subprocess.Popen(
            cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, cwd=Path(__file__).parents[2]
        )
        self.port = self.http = 0
        assert self.proc.stderr is not None
        for line in self.proc.stderr:  # read until both listeners are up
            try:
                msg = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if msg.get("event") == "listening":
                self.port = msg["port"]
            if msg.get("event") == "listening_http":
                self.http = msg["port"]
                break
        assert self.http, "the host did not start"
        # keep draining its log so the pipe never fills
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        self.base = f"http://127.0.0.1:{self.http}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)

    def records(self, sid: str) -> list[Record]:
        return [Record.from_json(r) for r in read_log(self.data_dir / "sessions" / f"{sid}.jsonl")]

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(client, *args)`` (async) on a fresh TCP client."""

        async def go() -> Any:
            async with await Client.connect("127.0.0.1", self.port) as c:
                return await fn(c, *args)

        return trio.run(go)


@pytest.fixture(scope="module")
def host() -> Iterator[RunningHost]:
    with tempfile.TemporaryDirectory() as d:
        running = RunningHost(Path(d))
        yield running
        running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    with tempfile.TemporaryDirectory() as profile:
        for flag in (
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",  # a container's small /dev/shm must not crash it
            f"--user-data-dir={profile}",
            "--window-size=1280,1000",
        ):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(DRIVER), options=options)
        try:
            yield driver
        finally:
            driver.quit()


def wait_for(driver: Any, cond: Callable[[Any], Any], what: str) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT, ignored_exceptions=[StaleElementReferenceException]).until(
        cond, message=f"waited for {what}"
    )


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def no_script_ran(driver: Any) -> None:
    """No alert is open and the page holds no ``img`` (nothing typed became HTML)."""
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert  # noqa: B018 - raises when no alert is open
    assert css(driver, "img") == []


# ---- a whole Crazy Eights game through the page ---------------------------------------------
def test_a_whole_crazy_eights_game_is_played_through_the_page(host, browser):
    from selenium.common.exceptions import StaleElementReferenceException

    d = browser
    d.get(host.base + "/#/")
    form = wait_for(d, lambda d: css(d, 'form[data-game="crazy-eights"]'), "the games")[0]
    name = css(d, "#name")[0]
    name.clear()
    name.send_keys("alice")
    form.find_element("css selector", "details summary").click()
    # the form comes from the game's JSON Schema: target is "auto" or a number
    from selenium.webdriver.support.ui import Select

    Select(form.find_element("css selector", "#opt-crazy-eights-target")).select_by_value("number")
    target = form.find_element("css selector", "#opt-crazy-eights-target-number")
    target.clear()
    target.send_keys("1")  # one deal
    reshuffle = form.find_element("css selector", "#opt-crazy-eights-reshuffle")
    assert reshuffle.get_attribute("type") == "checkbox" and reshuffle.is_selected()
    form.find_element("css selector", "button.create").click()
    wait_for(d, lambda d: "#/play/" in d.current_url, "the table")
    sid = d.current_url.rsplit("/", 1)[1]
    # the token is in this tab's storage, not in the address
    held = d.execute_script(f"return sessionStorage.getItem('gamehost.seat.{sid}')")
    assert orjson.loads(held)["token"] not in d.current_url
    moves = 0
    while True:

        def ready(d: Any) -> Any:
            if css(d, "#state.ended"):
                return "ended"
            choice = css(d, "#controls button.suit-choice")
            return choice or css(d, "#hand button.card") or css(d, "#controls button.action")

        got = wait_for(d, ready, "my turn or the end")
        if got == "ended":
            break
        try:
            got[0].click()
            moves += 1
        except StaleElementReferenceException:
            continue  # redrawn meanwhile: look again
        if moves == 3:  # a reload resumes the seat from the tab's storage
            d.refresh()
    assert css(d, "#outcome")
    records = host.records(sid)
    # the game-over panel names the winners and every seat's score, in words
    outcome = records[-1].data["outcome"]
    names = {r.data["seat"]: r.data["name"] for r in records if r.type == "seat_taken"}
    end = wait_for(d, lambda d: css(d, "#outcome .end-text"), "the end in words")[0].text
    winners = " and ".join(names[w] for w in outcome["winners"])
    assert end.splitlines()[0].startswith(f"{winners} won after")
    scores = ", ".join(f"{names[i]} {n}" for i, n in enumerate(outcome["scores"]))
    assert end.splitlines()[1] == f"Scores: {scores}"
    # and "What happened" tells the moves in words: no key=value text
    told = [text for _, text in listed_events(d)]
    assert any(" played " in t for t in told) and not any("=" in t for t in told)
    assert records[-1].type == "ended"
    mine = [r for r in records if r.type == "action" and r.data["seat"] == 0]
    assert len(mine) >= 3 and not any(r.data.get("timed_out") for r in mine)
    assert REGISTRY.engines["crazy-eights"].verify(records) is None


# ---- a spectator never sees a hidden card ----------------------------------------------------
def spectator_could_see(
    records: list[Record], game: str = "crazy-eights", viewer: int | None = None
) -> set[str]:
    """Every card a spectator (or seat ``viewer``) was shown by the records and the view up to
    the last record."""
    engine = REGISTRY.engines[game]
    seen: set[str] = set()
    state = engine.initial(records[0])
    for rec in records[1:]:
        state = engine.apply(state, rec)
        shown = engine.redacted_wire(rec, viewer) if rec.type == "event" else rec.data
        seen |= set(CARD.findall(orjson.dumps(shown).decode()))
    seen |= set(CARD.findall(orjson.dumps(engine.view_wire(state, viewer)).decode()))
    return seen


def listed_events(d: Any) -> list[tuple[int, str]]:
    """The entries of the table's "What happened" list, in the page's order: (seq, text)."""
    texts = d.execute_script(
        "return [...document.querySelectorAll('#events li')].map((li) => li.textContent)"
    )
    return [(int(t[1:].split(" ", 1)[0]), t) for t in texts]


def whole_history(d: Any) -> list[int] | None:
    """The seqs the table's "What happened" list shows (newest first) once it reaches back to
    seq 1 and up to the seq the table shows; None before."""
    seqs = [seq for seq, _ in listed_events(d)]
    info = css(d, "#info[data-seq]")
    if not seqs or not info or seqs[-1] != 1:
        return None
    return seqs if seqs[0] >= int(info[0].get_attribute("data-seq")) else None


async def _players(c: Client, port: int, sid: str, turns: int, held: dict[int, str]) -> int:
    """Seats 0 and 1 of ``sid`` (joined on the first call, resumed by token on later ones)
    play ``turns`` random legal actions between them; returns the last seq they saw."""
    rng = random.Random(len(held) + turns)
    got = {"played": 0, "last": 0}
    clients = []
    async with trio.open_nursery() as n:

        async def play(who: Client, seat: int) -> None:
            while (p := await who.next_push()) is not None:
                got["last"] = max(got["last"], p.get("seq") or 0)
                if p["push"] == "ended" or got["played"] >= turns:
                    n.cancel_scope.cancel()
                    return
                if p["push"] == "turn" and p["seat"] == seat:
                    action = rng.choice(p["legal"])
                    reply = await who.request("act", session=sid, action=action, seq=p["seq"])
                    if reply.get("ok"):
                        got["played"] += 1
                        got["last"] = max(got["last"], reply["result"]["seq"])

        for seat in (0, 1):
            who = await Client.connect("127.0.0.1", port)
            who.start(n)
            clients.append(who)
            if seat in held:
                await who.call("resume", session=sid, token=held[seat])
            else:
                joined = await who.call("join", session=sid, name=f"p{seat}", seat=seat)
                held[seat] = joined["token"]
            n.start_soon(play, who, seat)
    for who in clients:
        await who.aclose()
    return got["last"]


def test_a_spectator_page_never_shows_a_hidden_card(host, browser):
    d = browser

    async def make(c: Client) -> str:
        made = await c.call("create", game="crazy-eights", seats=3, bots=1, options={"target": 1})
        return made["session"]

    sid = host.run(make)
    d.get(f"{host.base}/#/watch/{sid}")
    wait_for(d, lambda d: css(d, "#info[data-seq]"), "the spectator's table")
    checked = 0
    held: dict[int, str] = {}
    for round_ in range(6):
        last = host.run(_players, host.port, sid, 4, held)
        if round_ == 2:  # a page opened mid-game lists what happened before, as a spectator
            d.refresh()
        wait_for(
            d,
            lambda d, last=last: int(css(d, "#info")[0].get_attribute("data-seq")) >= last,
            f"the page to reach seq {last}",
        )
        seqs = wait_for(d, whole_history, "what happened, from seq 1")
        assert seqs == list(range(seqs[0], 0, -1))
        shown = {e.get_attribute("data-card") for e in css(d, "[data-card]")}
        shown |= cards_in_text(css(d, "main")[0].text)  # "8S" or "8♠"
        allowed = spectator_could_see(host.records(sid))
        assert shown <= allowed, f"the spectator page showed {shown - allowed}"
        assert css(d, "#hand") == []  # a spectator has no hand
        assert css(d, ".card.back")  # the stock is drawn face down
        checked += len(shown)
    assert checked > 0


# ---- a seat that joins late, or reloads, sees what happened before ---------------------------
@pytest.mark.parametrize(("game", "seats"), [("seven-twenty-seven", 4), ("crazy-eights", 2)])
def test_a_table_lists_what_happened_before_it_opened(host, browser, game, seats):
    d = browser
    d.get(host.base + "/#/")
    form = wait_for(d, lambda d: css(d, f'form[data-game="{game}"]'), "the games")[0]
    for name, value in (("seats", seats), ("bots", seats - 1)):
        field = form.find_element("css selector", f'input[name="{name}"]')
        field.clear()
        field.send_keys(str(value))
    form.find_element("css selector", "button.create").click()
    wait_for(d, lambda d: "#/play/" in d.current_url, "the table")
    sid = d.current_url.rsplit("/", 1)[1]
    wait_for(d, lambda d: css(d, "#controls button"), "my first turn")
    top = 0
    for reload in (False, True):
        if reload:  # a move of mine, then a reload: it resumes the seat, lists it all again

            def moved(d: Any, top: int = top) -> bool:
                if listed_events(d)[0][0] > top:
                    return True
                # (an 8 asks for its suit: then click a suit)
                buttons = css(d, "#controls button.suit-choice") or css(d, "#controls button")
                if buttons:
                    buttons[0].click()
                return False

            wait_for(d, moved, "my move listed")
            d.refresh()
        wait_for(d, whole_history, "what happened, from seq 1")
        entries = listed_events(d)
        listed = dict(entries)
        top = max(listed)
        assert [seq for seq, _ in entries] == list(range(top, 0, -1))  # no gap, none twice
        records = host.records(sid)[: top + 1]
        names = {r.data["seat"]: r.data["name"] for r in records if r.type == "seat_taken"}
        first = records[1].data  # a bot's seat, taken before I joined
        assert listed[1] == f"#1 {first['name']} took seat {first['seat']} (a host bot)"
        for r in records:  # the bots' moves, before I joined too, told by their first event
            if r.type == "action" and r.data["seat"] != 0 and r.seq + 1 in listed:
                assert listed[r.seq] == f"#{r.seq}"  # the action itself: nothing to say
                assert listed[r.seq + 1].startswith(f"#{r.seq + 1} {names[r.data['seat']]} ")
        assert not any("=" in text for text in listed.values())  # words, not key=value
        # only what seat 0 may see: its own cards, never another seat's hidden ones
        named = set().union(*(cards_in_text(text) for text in listed.values()))
        allowed = spectator_could_see(records, game, viewer=0)
        assert named <= allowed, f"the history showed seat 0 {named - allowed}"


# ---- what a client typed is text, never HTML -------------------------------------------------
def test_a_player_named_like_html_runs_nothing(host, browser):
    d = browser

    async def make(c: Client) -> str:
        sid = (await c.call("create", game="crazy-eights", seats=2))["session"]
        async with await Client.connect("127.0.0.1", host.port) as p:
            await p.call("join", session=sid, name=EVIL)
            await p.call("leave", session=sid)
        return sid

    sid = host.run(make)
    d.get(host.base + "/#/")
    row = wait_for(d, lambda d: css(d, f'tr[data-session="{sid}"]'), "the session in the lobby")[0]
    assert EVIL in row.text
    no_script_ran(d)
    d.get(f"{host.base}/#/watch/{sid}")
    wait_for(d, lambda d: EVIL in css(d, "#board")[0].text, "the name on the table")
    no_script_ran(d)
    d.get(f"{host.base}/debug.html#{sid}")
    timeline = wait_for(d, lambda d: css(d, "#timeline div"), "the debugger's timeline")
    assert any(EVIL in row.get_attribute("textContent") for row in timeline)
    no_script_ran(d)
    # the same name typed into this page's own lobby
    d.get(host.base + "/#/")
    form = wait_for(d, lambda d: css(d, 'form[data-game="crazy-eights"]'), "the games")[0]
    name = css(d, "#name")[0]
    name.clear()
    name.send_keys(EVIL)
    form.find_element("css selector", "button.create").click()
    role = wait_for(d, lambda d: [e for e in css(d, "#role") if e.text], "my seat")[0]
    assert EVIL in role.text
    no_script_ran(d)


# ---- the debugger on a finished Seven Twenty-Seven log ---------------------------------------
def test_the_debugger_steps_through_a_finished_seven_twenty_seven_log(host, browser):
    d = browser

    async def play(c: Client) -> tuple[str, int]:
        made = await c.call(
            "create", game="seven-twenty-seven", seats=4, bots=4, options={"hands": 1}
        )
        snap = await c.call("watch", session=made["session"])
        last = snap["seq"]
        while not snap["ended"]:
            p = await c.next_push()
            if p["push"] == "ended":
                last = p["seq"]
                break
        return made["session"], last

    sid, last = host.run(play)
    d.get(f"{host.base}/debug.html#{sid}")
    wait_for(d, lambda d: css(d, "#last")[0].text == str(last), "the whole timeline")
    assert len(css(d, "#timeline > div")) == last + 1
    seq = css(d, "#seq")[0]
    state = css(d, "#state")[0]

    def at(n: int) -> None:
        wait_for(d, lambda d: seq.get_attribute("value") == str(n), f"seq {n}")
        wait_for(d, lambda d: "to act" in state.text, f"the state at {n}")

    at(last)  # it opens at the end
    css(d, "#first")[0].click()
    at(0)
    for n in (1, 2, 3):
        css(d, "#next")[0].click()
        at(n)
    css(d, "#prev")[0].click()
    at(2)
    assert css(d, "#timeline .current")[0].get_attribute("data-seq") == "2"
    # what changed between two seqs
    css(d, "#end")[0].click()
    at(last)
    frm = css(d, "#diff-from")[0]
    frm.clear()
    frm.send_keys("0")
    css(d, "#diff")[0].click()
    wait_for(d, lambda d: css(d, "#changes tr"), "the changes")
    # verify: the host's code re-produces the log
    css(d, "#verify")[0].click()
    wait_for(d, lambda d: css(d, "#verify-ok"), "the verify result")
    # Seven Twenty-Seven keeps its seed: no client sees the full truth, even once it ended
    truth = css(d, '#viewer option[value="truth"]')[0]
    assert truth.get_attribute("disabled") is not None


# ---- any other game: the generic table --------------------------------------------------------
@pytest.fixture(scope="module")
def toy_web() -> Iterator[str]:
    """An in-process host (in its own thread) with only the test game, High Card, which has no
    table of its own in the web client; yields the page's base address."""
    from host.net.server import HostConfig, run_host
    from tests.conftest import toy_registry

    ready: queue.Queue = queue.Queue()
    with tempfile.TemporaryDirectory() as data:

        async def serve() -> None:
            cfg = HostConfig(
                data_dir=Path(data), port=0, http_port=0, idle_timeout=None, line_timeout=None
            )
            async with trio.open_nursery() as n:
                running, _ = await n.start(
                    lambda task_status: run_host(
                        cfg, toy_registry(), handle_signals=False, task_status=task_status
                    )
                )
                ready.put((running, trio.lowlevel.current_trio_token()))

        thread = threading.Thread(target=trio.run, args=(serve,), daemon=True)
        thread.start()
        running, token = ready.get(timeout=WAIT)
        try:
            yield f"http://127.0.0.1:{running.http_port}"
        finally:
            trio.from_thread.run_sync(running.request_shutdown, trio_token=token)
            thread.join(WAIT)


def test_a_game_without_its_own_table_is_played_on_the_generic_one(toy_web, browser):
    from selenium.common.exceptions import StaleElementReferenceException

    d = browser
    d.get(toy_web + "/#/")
    form = wait_for(d, lambda d: css(d, 'form[data-game="high-card"]'), "the games")[0]
    form.find_element("css selector", "button.create").click()
    wait_for(d, lambda d: css(d, ".table.generic"), "the generic table")
    # the view as a tree: our own card shows, the other seat's is hidden (null)
    wait_for(d, lambda d: css(d, '.table.generic [data-path="view.hands"]'), "the hands")
    clicks = 0
    while True:

        def ready_(d: Any) -> Any:
            return "ended" if css(d, "#state.ended") else css(d, "#controls button.action")

        got = wait_for(d, ready_, "my turn or the end")
        if got == "ended":
            break
        try:
            assert {b.text for b in got} <= {"keep", "swap"}
            got[0].click()
            clicks += 1
        except StaleElementReferenceException:
            continue  # redrawn meanwhile: look again
    assert clicks >= 1
    assert css(d, "#outcome")


def test_fork_here_starts_a_session_the_page_plays_on(host, browser):
    d = browser

    async def play(c: Client) -> str:
        sid = (await c.call("create", game="crazy-eights", seats=2, bots=1, options={"target": 1}))[
            "session"
        ]
        await c.call("join", session=sid, name="ann")
        while (p := await c.next_push()) is not None:
            if p["push"] == "turn" and p["seat"] == 0:
                await c.call("act", session=sid, action=p["legal"][0], seq=p["seq"])
            elif p["push"] == "ended":
                return sid
        raise AssertionError("the connection closed before the end")

    sid = host.run(play)
    records = host.records(sid)
    # the end of a cause with a turn of seat 0 next: its action record follows
    at = next(r.seq - 1 for r in records if r.type == "action" and r.data["seat"] == 0)
    d.get(f"{host.base}/debug.html#{sid}")
    wait_for(d, lambda d: css(d, "#last")[0].text == str(records[-1].seq), "the timeline")
    css(d, f'#timeline [data-seq="{at}"]')[0].click()
    wait_for(d, lambda d: css(d, "#seq")[0].get_attribute("value") == str(at), f"seq {at}")
    css(d, "#fork")[0].click()
    new = wait_for(d, lambda d: css(d, "#fork-id"), "the fork")[0].text
    assert new != sid
    wait_for(d, lambda d: css(d, "#forked button"), "play it")[0].click()
    wait_for(d, lambda d: f"#/play/{new}" in d.current_url, "the fork's table")
    role = wait_for(d, lambda d: [e for e in css(d, "#role") if e.text], "the seat")[0]
    assert "seat 0" in role.text
    wait_for(d, lambda d: css(d, "#controls button"), "seat 0's turn in the fork")
    forked = host.records(new)
    assert forked[0].data["forked_from"] == {"session": sid, "seq": at}

    def same(rs: list[Record]) -> list[dict]:  # a fork gives its seats new tokens, no holder
        return [{k: v for k, v in r.data.items() if k not in ("token_hash", "holder")} for r in rs]

    assert same(forked[1 : at + 1]) == same(records[1 : at + 1])
    ann = next(r for r in forked if r.type == "seat_taken" and r.data["seat"] == 0)
    assert ann.data["token_hash"] != records[ann.seq].data["token_hash"]


def test_a_page_whose_seat_is_resumed_elsewhere_watches_on_and_takes_it_back(host, browser):
    """The last resume answered wins: a client that resumes the page's seat with its token takes
    it; the page is told (the ``detached`` push), says so and shows no moves, but watches the
    table on (it sends ``watch``: the other player's move reaches it) and offers the seat back;
    taking it back detaches the other client in turn, and the page plays again."""
    d = browser
    d.get(host.base + "/#/")
    form = wait_for(d, lambda d: css(d, 'form[data-game="crazy-eights"]'), "the games")[0]
    form.find_element("css selector", "button.create").click()
    wait_for(d, lambda d: css(d, "#controls button"), "my first turn")
    sid = d.current_url.rsplit("/", 1)[1]
    token = orjson.loads(d.execute_script(f"return sessionStorage.getItem('gamehost.seat.{sid}')"))[
        "token"
    ]

    def page_seq(d: Any) -> int:
        return int(css(d, "#info")[0].get_attribute("data-seq") or -1)

    async def take_play_and_lose_it(c: Client) -> tuple[dict, int, dict]:
        taken = await c.call("resume", session=sid, token=token)
        turn = None
        while turn is None:  # the seat is to act: its turn push follows the reply
            push = await c.next_push()
            turn = push if push and push["push"] == "turn" else None
        acted = await c.call("act", session=sid, action=turn["legal"][0], seq=turn["seq"])

        def follows_then_takes_back() -> None:
            wait_for(d, lambda d: "another connection" in css(d, "#role")[0].text, "the notice")
            wait_for(d, lambda d: page_seq(d) >= acted["seq"], "the page to show the move")
            wait_for(d, lambda d: css(d, "#take-back"), "the offer of the seat")[0].click()

        await trio.to_thread.run_sync(follows_then_takes_back)
        detached = None
        while detached is None:
            push = await c.next_push()
            assert push is not None
            detached = push if push["push"] == "detached" else None
        return taken, acted["seq"], detached

    taken, moved, detached = host.run(take_play_and_lose_it)
    assert taken["seat"] == 0 and moved > taken["seq"]
    assert detached == {"push": "detached", "session": sid, "seat": 0, "reason": "resumed"}
    wait_for(d, lambda d: "seat 0" in css(d, "#role")[0].text, "the page to hold its seat again")
    assert css(d, "#take-back") == []
    wait_for(d, lambda d: css(d, "#controls button"), "seat 0's next turn on the page")
    records = host.records(sid)
    held = [r.seq for r in records if r.type == "seat_held" and r.data["seat"] == 0]
    assert held[-1] > moved  # the page's resume, after the other client's move


def test_a_table_resumes_its_seat_by_itself_after_the_host_restarts(browser, tmp_path):
    d = browser
    first = RunningHost(tmp_path)
    try:
        d.get(first.base + "/#/")
        form = wait_for(d, lambda d: css(d, 'form[data-game="crazy-eights"]'), "the games")[0]
        form.find_element("css selector", "button.create").click()
        wait_for(d, lambda d: css(d, "#controls button"), "my first turn")
        sid = d.current_url.rsplit("/", 1)[1]
    finally:
        first.stop()
    wait_for(d, lambda d: "trying again" in css(d, "#status")[0].text, "the page to notice")
    second = RunningHost(tmp_path, "--http", str(first.http))  # same data, same address
    try:
        wait_for(d, lambda d: css(d, "#status")[0].text == "", "the page to reconnect")
        wait_for(d, lambda d: css(d, "#controls button"), "my turn again, after the restart")
        assert d.current_url.endswith(f"#/play/{sid}")
        assert "seat 0" in css(d, "#role")[0].text
    finally:
        second.stop()


@pytest.mark.parametrize(
    ("game", "seats", "number_option"),
    [("around-the-world", 2, None), ("seven-twenty-seven", 4, ("hands", "1"))],
)
def test_the_other_games_are_played_to_the_end_on_their_tables(
    host, browser, game, seats, number_option
):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import Select

    d = browser
    d.get(host.base + "/#/")
    form = wait_for(d, lambda d: css(d, f'form[data-game="{game}"]'), "the games")[0]
    for name, value in (("seats", seats), ("bots", seats - 1)):
        field = form.find_element("css selector", f'input[name="{name}"]')
        field.clear()
        field.send_keys(str(value))
    if number_option is not None:
        option, value = number_option
        form.find_element("css selector", "details summary").click()
        Select(form.find_element("css selector", f"#opt-{game}-{option}")).select_by_value("number")
        form.find_element("css selector", f"#opt-{game}-{option}-number").send_keys(value)
    form.find_element("css selector", "button.create").click()
    table = ".table.atw" if game == "around-the-world" else ".table.stc"
    wait_for(d, lambda d: css(d, table), "the game's own table")
    sid = d.current_url.rsplit("/", 1)[1]
    while True:

        def ready(d: Any) -> Any:
            return "ended" if css(d, "#state.ended") else css(d, "#controls button.action")

        got = wait_for(d, ready, "my turn or the end")
        if got == "ended":
            break
        try:
            got[0].click()
        except StaleElementReferenceException:
            continue
    records = host.records(sid)
    assert records[-1].type == "ended" and "aborted" not in records[-1].data
    assert any(r.type == "action" and r.data["seat"] == 0 for r in records)
    assert REGISTRY.engines[game].verify(records) is None


# ---- liveness: the browser answers the host's Ping frames ------------------------------------
def test_a_seated_page_answers_every_ping_frame_and_keeps_its_connection(browser):
    """A host that pings after 0.2 s of silence and hangs up 1 s later: a page sitting at its
    table (it sends nothing while it is its turn) keeps its one connection, because the browser
    answers each Ping frame with a Pong by itself."""
    from host.net.server import HostConfig, run_host

    ready: queue.Queue = queue.Queue()
    with tempfile.TemporaryDirectory() as data:

        async def serve() -> None:
            cfg = HostConfig(
                data_dir=Path(data),
                port=0,
                http_port=0,
                turn_timeout=None,
                ping_after=0.2,
                ping_timeout=1.0,
            )
            async with trio.open_nursery() as n:
                running, _ = await n.start(
                    lambda task_status: run_host(
                        cfg, REGISTRY, handle_signals=False, task_status=task_status
                    )
                )
                ready.put((running, trio.lowlevel.current_trio_token()))

        thread = threading.Thread(target=trio.run, args=(serve,), daemon=True)
        thread.start()
        host, token = ready.get(timeout=WAIT)

        def in_host(fn: Callable[[], Any]) -> Any:
            return trio.from_thread.run_sync(fn, trio_token=token)

        try:
            d = browser
            d.get(f"http://127.0.0.1:{host.http_port}/#/")
            form = wait_for(d, lambda d: css(d, 'form[data-game="crazy-eights"]'), "the games")[0]
            form.find_element("css selector", "button.create").click()
            wait_for(d, lambda d: css(d, "#controls button"), "my first turn")
            sid = d.current_url.rsplit("/", 1)[1]

            def seat_zero() -> Any:
                held = host.sessions[sid].subscribers
                return next(c for c, seat in held.items() if seat == 0)

            conn = in_host(seat_zero)
            since = in_host(trio.current_time)
            # five times past ping_after + ping_timeout, its Pongs still come
            wait_for(
                d,
                lambda d: in_host(lambda: conn.stream.last_pong) > since + 6.0,
                "Pongs for 6 s",
            )
            assert in_host(lambda: conn in host.connections and not conn.dead)
            assert in_host(seat_zero) is conn  # the same connection, never closed and resumed
            assert css(d, "#controls button")  # still its turn, nothing happened meanwhile
        finally:
            in_host(host.request_shutdown)
            thread.join(WAIT)
