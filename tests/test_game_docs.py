"""``docs/games/<id>.md`` cannot drift from the generated contract (``host.plugins.contract``).

Each page documents, in tables whose first column names a field in backticks, the game's
options (``## Options``), each action and each event (``## Actions`` / ``## Events``, one
``### `tag``` heading each), the view (``## View``) and the outcome (``## Outcome``), nested
fields as ``a.b`` and list items as ``a[].b``. Every field the schema has must be named there
and nothing the schema lacks may be; the worked turn's lines (``seat N <<<`` / ``spectator
<<<`` / ``seat N >>>``) must each validate against the schema for that viewer. PROTOCOL.md
links every page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from host.plugins.contract import game_schema
from host.plugins.registry import load_registry

ROOT = Path(__file__).resolve().parent.parent
# the project's own games (an installed third-party game, e.g. examples/high_low, has no page)
GAMES = {
    gid: game
    for gid, game in load_registry().games.items()
    if type(game).__module__.startswith("plugins.")
}
FIELD = re.compile(r"^\|\s*`([^`]+)`\s*\|")
LINE = re.compile(r"^(seat \d+|spectator) (<<<|>>>) (\{.*\})\s*$")


def schema_paths(schema: dict[str, Any], skip: set[str], prefix: str = "") -> set[str]:
    """Every field path of an object schema: ``a``, ``a.b`` (an object), ``a[].b`` (a list of
    objects); a nested object with exactly the options' fields is the options (documented in
    their own section), so its fields are not repeated."""
    out: set[str] = set()
    for name, sub in schema.get("properties", {}).items():
        if name == "type" and "const" in sub:
            continue
        path = prefix + name
        out.add(path)
        for inner, suffix in _objects(sub):
            if set(inner["properties"]) != skip:
                out |= schema_paths(inner, skip, path + suffix)
    return out


def _objects(sub: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    found: list[tuple[dict[str, Any], str]] = []
    if sub.get("type") == "object" and "properties" in sub:
        found.append((sub, "."))
    if sub.get("type") == "array" and isinstance(sub.get("items"), dict):
        found += [(o, "[]" + s) for o, s in _objects(sub["items"])]
    for alt in sub.get("anyOf", []):
        found += _objects(alt)
    return found


def sections(text: str) -> dict[str, dict[str, set[str]]]:
    """``{"## heading": {"### tag" or "": {field names}}}`` from a page's tables."""
    out: dict[str, dict[str, set[str]]] = {}
    h2 = h3 = ""
    fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        if fence:
            continue
        if line.startswith("## "):
            h2, h3 = line[3:].strip(), ""
            out.setdefault(h2, {})
        elif line.startswith("### "):
            h3 = line[4:].strip().strip("`")
            out.setdefault(h2, {}).setdefault(h3, set())
        else:
            m = FIELD.match(line)
            if m and h2:
                out.setdefault(h2, {}).setdefault(h3, set()).add(m.group(1))
    return out


def page(gid: str) -> str:
    path = ROOT / "docs" / "games" / f"{gid}.md"
    assert path.exists(), f"{path.relative_to(ROOT)} is missing: every game has its page"
    return path.read_text()


def mismatch(documented: set[str], generated: set[str], where: str) -> list[str]:
    problems = [f"{where}: `{f}` is not documented" for f in sorted(generated - documented)]
    extra = sorted(documented - generated)
    problems += [f"{where}: `{f}` is documented but not in the schema" for f in extra]
    return problems


@pytest.mark.parametrize("gid", sorted(GAMES))
def test_the_page_names_every_field_of_the_schema_and_nothing_else(gid: str) -> None:
    schema = game_schema(GAMES[gid])
    doc = sections(page(gid))
    headings = ("Options", "Actions", "Events", "View", "Outcome", "Hidden information")
    for heading in (*headings, "A worked turn"):
        assert heading in doc, f"{gid}.md has no '## {heading}' section"
    options = set(schema["options"]["properties"])
    problems = mismatch(doc["Options"].get("", set()), options, "options")
    for heading, union in (("Actions", schema["action"]), ("Events", schema["event"]["seat"])):
        tags = {b["title"]: b for b in union["oneOf"]}
        documented_tags = {t for t in doc[heading] if t}
        problems += mismatch(documented_tags, set(tags), heading.lower())
        for tag in set(tags) & documented_tags:
            problems += mismatch(doc[heading][tag], schema_paths(tags[tag], options), tag)
    view = schema_paths(schema["view"]["seat"], options)
    problems += mismatch(doc["View"].get("", set()), view, "view")
    outcome = schema_paths(schema["outcome"], options)
    problems += mismatch(doc["Outcome"].get("", set()), outcome, "outcome")
    assert not problems, f"docs/games/{gid}.md and `gamehost schema` disagree:\n" + "\n".join(
        problems
    )


@pytest.mark.parametrize("gid", sorted(GAMES))
def test_the_worked_turn_is_valid_for_its_viewers(gid: str) -> None:
    """Each wire line of the worked turn fits the schema of who sends or receives it."""
    schema = game_schema(GAMES[gid])
    check = {
        key: jsonschema.Draft202012Validator(s)
        for key, s in (
            ("action", schema["action"]),
            ("event seat", schema["event"]["seat"]),
            ("event spectator", schema["event"]["spectator"]),
            ("view seat", schema["view"]["seat"]),
            ("view spectator", schema["view"]["spectator"]),
        )
    }
    checked = 0
    for line in page(gid).splitlines():
        m = LINE.match(line)
        if not m:
            continue
        who, direction, body = m.groups()
        role = "spectator" if who == "spectator" else "seat"
        msg = json.loads(body)
        values: list[tuple[str, Any]] = []
        if direction == ">>>" and msg.get("op") == "act":
            values.append(("action", msg["action"]))
        if msg.get("push") == "event" and msg.get("kind") == "event":
            values.append((f"event {role}", msg["event"]))
        if msg.get("push") == "event" and msg.get("kind") == "action":
            values.append(("action", msg["event"]["action"]))
        if msg.get("push") == "turn":
            values += [("action", a) for a in msg["legal"]]
        if msg.get("push") == "view":
            values.append((f"view {role}", msg["view"]))
        result = msg.get("result")
        if isinstance(result, dict) and "view" in result:
            values.append((f"view {role}", result["view"]))
        for key, value in values:
            errors = list(check[key].iter_errors(value))
            assert not errors, f"{gid}.md: {who} {direction} {value}: {errors[0].message}"
            checked += 1
    assert checked >= 3, f"{gid}.md: the worked turn shows too few wire lines ({checked})"


def test_protocol_md_links_every_game_page() -> None:
    text = (ROOT / "PROTOCOL.md").read_text()
    for gid in GAMES:
        assert f"(docs/games/{gid}.md)" in text, f"PROTOCOL.md does not link docs/games/{gid}.md"


def test_the_drift_check_catches_a_missing_and_an_extra_field() -> None:
    """The check itself can fail: a page without ``hand`` and with an invented field."""
    schema = game_schema(GAMES["crazy-eights"])
    options = set(schema["options"]["properties"])
    documented = sections(page("crazy-eights"))["View"][""]
    generated = schema_paths(schema["view"]["seat"], options)
    assert not mismatch(documented, generated, "view")
    broken = (documented - {"hand"}) | {"hands_left"}
    assert mismatch(broken, generated, "view") == [
        "view: `hand` is not documented",
        "view: `hands_left` is documented but not in the schema",
    ]
