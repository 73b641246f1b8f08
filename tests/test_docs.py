"""The documentation stands alone: every link and every ``*.md`` path a tracked file mentions
points to a file inside the repository, and each game's rules page lists its real options."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import attrs
import orjson
import pytest

from host.plugins.registry import load_registry

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
MD_PATH = re.compile(r"(?<![\w/.*-])((?:\.\./|[\w.-]+/)*[\w*-]+\.md)\b")


def tracked() -> list[Path]:
    """Every tracked text file (and the new ones not ignored) of the documentation and code."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    names = {n for n in out.splitlines() if n.endswith((".md", ".py", ".toml"))}
    return [ROOT / n for n in sorted(names) if (ROOT / n).is_file()]


def _slug(heading: str) -> str:
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"\s", "-", text)


def _anchors(path: Path) -> set[str]:
    return {_slug(m) for m in re.findall(r"^#+\s+(.*)$", path.read_text(), re.M)}


def _inside(target: Path) -> bool:
    return target.resolve().is_relative_to(ROOT)


def bad_references(path: Path) -> list[str]:
    """The links and ``.md`` mentions of one file that leave the repository or find nothing."""
    text = path.read_text(encoding="utf-8")
    bad = []
    if path.suffix == ".md":
        for target in LINK.findall(text):
            if target.startswith("#"):
                if target[1:] not in _anchors(path):
                    bad.append(f"{target}: no such heading")
                continue
            if "://" in target or target.startswith("mailto:"):
                bad.append(f"{target}: links outside the repository")
                continue
            file, _, anchor = target.partition("#")
            dest = path.parent / file
            if not _inside(dest) or not dest.exists():
                bad.append(f"{target}: no such file in the repository")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append(f"{target}: no such heading")
    for mention in MD_PATH.findall(text):
        candidates = [ROOT / mention, path.parent / mention]
        if "*" in mention:  # a pattern such as rules/*.md: at least one file must match
            candidates = [*ROOT.glob(mention), *path.parent.glob(mention)]
        if not any(_inside(c) and c.exists() for c in candidates):
            bad.append(f"{mention}: mentioned, but not in the repository")
    return bad


def test_no_file_links_outside_the_repository_or_to_a_missing_file():
    files = tracked()
    assert any(f.name == "README.md" for f in files)
    here = Path(__file__).resolve()  # its examples of bad references are on purpose
    problems = {str(f.relative_to(ROOT)): bad_references(f) for f in files if f != here}
    assert {f: p for f, p in problems.items() if p} == {}


def test_the_checker_catches_outside_and_missing_references(tmp_path, monkeypatch):
    monkeypatch.setattr("tests.test_docs.ROOT", tmp_path)  # a tiny repository of two pages
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# The Title\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md#the-title) [gone](docs/b.md) [up](../x.md) [web](https://example.org)"
        " [head](docs/a.md#nothing)\nsee ARCHITECTURE.md, ``rules/crazy-eights.md``, docs/*.md"
        " and shared/rules/*.md\n"
    )
    assert bad_references(page) == [
        "docs/b.md: no such file in the repository",
        "../x.md: no such file in the repository",
        "https://example.org: links outside the repository",
        "docs/a.md#nothing: no such heading",
        "docs/b.md: mentioned, but not in the repository",
        "../x.md: mentioned, but not in the repository",
        "ARCHITECTURE.md: mentioned, but not in the repository",
        "rules/crazy-eights.md: mentioned, but not in the repository",
        "shared/rules/*.md: mentioned, but not in the repository",
    ]


BUILT_IN = sorted(
    gid
    for gid, game in load_registry().games.items()
    if type(game).__module__.startswith("plugins.")
)
"""The project's own games (an installed third-party game, e.g. examples/high_low, has no page)."""


@pytest.mark.parametrize("gid", BUILT_IN)
def test_each_games_rules_page_lists_every_option_with_its_default(gid):
    page = ROOT / "docs" / "rules" / f"{gid}.md"
    text = page.read_text()
    options = attrs.fields(load_registry().games[gid].info.options)
    rows = re.findall(r"^\| `(\w+)` \| `([^`]*)` \|", text, re.M)
    assert rows == [(f.name, orjson.dumps(f.default).decode()) for f in options]
