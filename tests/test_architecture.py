"""The house's rules, checked: no import cycle (typing-only and function-level imports
count: a reader follows them too) and no module over 700 lines (docs/architecture.md)."""

from __future__ import annotations

from importgraph import PACKAGE, graph

MAX_LINES = 700


def _cycles() -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    imports = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in imports[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(imports):
        if v not in index:
            visit(v)
    return groups


def test_no_import_cycles() -> None:
    assert _cycles() == []


def test_no_module_over_700_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}
