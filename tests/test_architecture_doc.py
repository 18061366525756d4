"""docs/architecture.md's room table is in step with the tree: it names every package and
top-level module of ``src/tiermem`` once, and nothing that is not there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "tiermem"
DOC = ROOT / "docs" / "architecture.md"


def tree() -> list[str]:
    """The top-level modules (``x.py``) and packages (``x/``) of the package."""
    modules = [p.name for p in PACKAGE.glob("*.py")]
    packages = [f"{p.name}/" for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()]
    return sorted(modules + packages)


def room_entries(text: str) -> list[str]:
    """The modules and packages the "modules" column of the room table names, in order."""
    section = text.split("\n## The rooms\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    column = header.index("modules")
    entries = []
    for row in rows[1:]:
        cell = [c.strip() for c in row.strip("|").split("|")][column]
        entries += re.findall(r"`([\w.]+(?:\.py|/))`", cell)
    return entries


def test_the_room_table_names_every_module_and_package_once() -> None:
    named = room_entries(DOC.read_text(encoding="utf-8"))
    assert len(named) == len(set(named)), sorted({n for n in named if named.count(n) > 1})
    assert sorted(set(named) - set(tree())) == [], "named in the table, not in the tree"
    assert sorted(set(tree()) - set(named)) == [], "in the tree, not named in the table"


def test_room_entries_reads_the_modules_column() -> None:
    text = (
        "# x\n\n## The rooms\n\n| room | modules | holds |\n|---|---|---|\n"
        "| core | `a.py`, `b/` | `c.py` is not a module of this row |\n\n## Next\n| `d.py` |\n"
    )
    assert room_entries(text) == ["a.py", "b/"]
