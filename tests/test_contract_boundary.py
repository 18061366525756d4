"""Every face meets the library through one contract (DESIGN.md): the server, MCP, the
client, the adapters, the patterns, the agent and the command line call ``Memory``'s
public methods only. This reads their source (``ast``) for an attribute of a Memory that
is one of its parts (``.store``, ``.embedder``...) or private (``._x``).

A name holds a Memory when it is called ``memory`` / ``mem`` (or ``x.memory``,
``x._memory``), is annotated with ``Memory`` / ``MemoryAPI``, or is assigned
``Memory(...)`` / ``Memory.from_config(...)`` or another such name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "tiermem"
FACES = (
    "server",
    "mcp.py",
    "client.py",
    "integrations",
    "patterns",
    "agent.py",
    "cli",
)
"""The faces, relative to the package (a folder means every module in it). The library's
core (memory/, stores/, worker, synopsis, embeddings...) is not a face."""
PARTS = frozenset({"store", "embedder", "archiver", "synopses", "worker", "working", "accesses"})
MEMORY_NAMES = frozenset({"memory", "mem"})
MEMORY_ATTRIBUTES = frozenset({"memory", "_memory"})
MEMORY_TYPES = frozenset({"Memory", "MemoryAPI", "AsyncMemoryAPI"})


def _names_type(annotation: ast.expr | None) -> bool:
    """Whether an annotation mentions a Memory type (``Memory | None``, ``"Memory"``...)."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    return any(
        (isinstance(node, ast.Name) and node.id in MEMORY_TYPES)
        or (isinstance(node, ast.Attribute) and node.attr in MEMORY_TYPES)
        for node in ast.walk(annotation)
    )


def _key(node: ast.expr) -> str | None:
    """``x`` or ``x.y``: how a place holding a value is named here."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class _Reaches(ast.NodeVisitor):
    """The reaches past the facade in one module, as ``line: expression``."""

    def __init__(self, tree: ast.Module) -> None:
        self.holders = set(MEMORY_NAMES | MEMORY_ATTRIBUTES)
        self.found: list[str] = []
        self._collect(tree)

    def _collect(self, tree: ast.Module) -> None:
        """Names and attributes that hold a Memory, to a fixed point."""
        while True:
            before = len(self.holders)
            for node in ast.walk(tree):
                if isinstance(node, ast.arg) and _names_type(node.annotation):
                    self.holders.add(node.arg)
                elif isinstance(node, ast.AnnAssign) and _names_type(node.annotation):
                    self._hold(node.target)
                elif isinstance(node, ast.Assign) and self._makes_memory(node.value):
                    for target in node.targets:
                        self._hold(target)
            if len(self.holders) == before:
                return

    def _hold(self, target: ast.expr) -> None:
        key = _key(target)
        if key is not None:
            self.holders.add(key)

    def _makes_memory(self, value: ast.expr) -> bool:
        if isinstance(value, ast.Call):
            func = value.func
            if isinstance(func, ast.Attribute) and func.attr == "from_config":
                func = func.value
            return _key(func) == "Memory"
        return self._holds(value)

    def _holds(self, node: ast.expr) -> bool:
        return isinstance(node, (ast.Name, ast.Attribute)) and _key(node) in self.holders

    def _reaches(self, attr: str) -> bool:
        return attr in PARTS or (attr.startswith("_") and not attr.startswith("__"))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if self._holds(node.value) and self._reaches(node.attr):
            self.found.append(f"{node.lineno}: {ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if (
            isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and self._holds(node.args[0])
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and self._reaches(node.args[1].value)
        ):
            self.found.append(f"{node.lineno}: {ast.unparse(node)}")
        self.generic_visit(node)


def reaches(source: str) -> list[str]:
    """Where ``source`` reaches past a Memory's facade."""
    tree = ast.parse(source)
    visitor = _Reaches(tree)
    visitor.visit(tree)
    return visitor.found


def _modules(face: str) -> list[Path]:
    path = PACKAGE / face
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


@pytest.mark.parametrize("face", FACES)
def test_face_calls_the_public_contract_only(face: str) -> None:
    found = [
        f"{module.relative_to(PACKAGE)}:{line}"
        for module in _modules(face)
        for line in reaches(module.read_text(encoding="utf-8"))
    ]
    assert found == [], "reaches past Memory's facade:\n" + "\n".join(found)


def test_every_face_exists() -> None:
    assert [f for f in FACES if not (PACKAGE / f).exists()] == []


@pytest.mark.parametrize(
    "source",
    [
        "memory.store.list('u')",
        "self.memory.embedder.embed(['x'])",
        "self._memory._archiver.flush()",
        "m = Memory('x.db')\nm.synopses.get('u')",
        "m = Memory.from_config({})\nkept = m\nkept.worker.wake()",
        "def f(target: 'Memory | None') -> None:\n    target.accesses.record('u', [])",
        "def f(target: MemoryAPI) -> None:\n    target._check_open()",
        "getattr(self.memory, 'working')",
    ],
)
def test_the_scan_sees_a_reach(source: str) -> None:
    assert len(reaches(source)) == 1


@pytest.mark.parametrize(
    "source",
    [
        "memory.list_memories('u', metadata={'k': 1})",
        "self.memory.search('q', 'u')",
        "conversation.buffer.add_eviction_consumer(f)",
        "self._store.save()",
        "memory.__class__",
        "store = Store()\nstore._batch()",
    ],
)
def test_the_scan_leaves_public_calls_and_other_objects(source: str) -> None:
    assert reaches(source) == []
