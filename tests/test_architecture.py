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


CORE = frozenset(
    {"_version", "errors", "messages", "tokens", "text", "clock", "runner", "breaker"}
    | {"extras", "paths", "sections", "aio"}
)
"""The core: top-level modules, and ``aio/`` (twins, one object per event loop, HTTP)."""
ROOMS = {
    "aio": frozenset(),
    "types": frozenset(),
    "buffer": frozenset({"summaries"}),
    "summaries": frozenset({"buffer", "llm"}),
    "working": frozenset({"embeddings"}),
    "planner": frozenset({"types"}),
    "facts": frozenset({"types", "embeddings", "stores", "planner"}),
    "work": frozenset({"types", "embeddings", "stores", "working", "summaries", "facts", "memory"}),
    "client": frozenset({"types", "api", "wire"}),
    "config": frozenset({"embeddings", "llm", "rerank", "planner", "work"}),
    "stores": frozenset({"types", "embeddings"}),
}
"""What each room's modules may import of ours beside the core (docs/architecture.md's
"may import" column); ``work/process.py`` (a process that only works) builds a Memory."""


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_each_room_imports_only_what_it_may() -> None:
    found = {
        f"{name} -> {target}"
        for name, targets in graph().items()
        if (room := _room(name)) in ROOMS
        for target in targets
        if _room(target) not in ROOMS[room] | CORE | {room}
    }
    assert sorted(found) == []


def test_the_top_level_holds_at_most_15_modules() -> None:
    assert len(list(PACKAGE.glob("*.py"))) <= 15
