"""Every relative link of the README, CONTRIBUTING.md and docs/ leads somewhere: to a file
that exists and, with an anchor, to a heading of that page (as GitHub names it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$")


def prose(markdown: str) -> list[str]:
    """The lines of ``markdown`` outside fenced code blocks."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of ``markdown``: lower case, punctuation
    dropped, spaces as hyphens, and ``-1``, ``-2``... after a name already taken."""
    found: set[str] = set()
    for line in prose(markdown):
        if heading := HEADING.match(line):
            name = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
            anchor, n = name, 0
            while anchor in found:
                n += 1
                anchor = f"{name}-{n}"
            found.add(anchor)
    return found


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` whose file or heading does not exist."""
    broken = []
    for line in prose(page.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:...
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists() or (
                anchor
                and linked.suffix == ".md"
                and anchor not in anchors(linked.read_text(encoding="utf-8"))
            ):
                broken.append(target)
    return broken


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_relative_link_resolves() -> None:
    broken = {str(p.relative_to(ROOT)): b for p in pages() if (b := broken_links(p))}
    assert broken == {}


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## A part: `x.py`\n\n## A part: `x.py`\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md) [ok](other.md#a-part-xpy-1) [ok](#page) [web](https://x.y/z)\n"
        "[gone](missing.md) [no part](other.md#a-part-ypy) [self](#nothing)\n"
        "```\n[in code](missing.md)\n```\n"
    )
    assert broken_links(page) == ["missing.md", "other.md#a-part-ypy", "#nothing"]
