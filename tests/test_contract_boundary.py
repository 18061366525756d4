"""Every face meets the library through one contract (DESIGN.md): the server, MCP, the
client, the adapters, the patterns, the agent and the command line call ``Memory``'s
public methods only. This reads their source (``ast``) for an attribute of a Memory that
is one of its parts (``.store``, ``.embedder``...) or private (``._x``).

The contract stands on the floor of types: ``api.py``, ``wire.py`` and ``tiermem.types``
import nothing of ours but the core, and the client only them and httpx (read from the
import graph, and seen in a fresh process); the planner's import chain holds no provider,
store or configuration module.

A name holds a Memory when it is called ``memory`` / ``mem`` (or ``x.memory``,
``x._memory``), is annotated with ``Memory`` / ``MemoryAPI``, or is assigned
``Memory(...)`` / ``Memory.from_config(...)`` or another such name.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from importgraph import graph, loaded_by, modules, outside_imports

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "tiermem"
FACES = (
    "server",
    "server/mcp.py",
    "client",
    "integrations",
    "patterns",
    "agent.py",
    "cli",
)
"""The faces, relative to the package (a folder means every module in it). The library's
core (memory/, stores/, work/, synopsis/, embeddings/...) is not a face. ``cli/copying.py``
is a tool that works on stores, not through ``Memory``: it holds no Memory, so the scan
passes it, and :data:`TOOLS` bounds what it imports."""
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
        "memory.store.index.list('u')",
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


CORE = frozenset({"tiermem", "tiermem._version", "tiermem.errors", "tiermem.messages"})
"""What the floor of types may stand on."""
CLIENT = frozenset(
    {"tiermem.api", "tiermem.wire", "tiermem.client", "tiermem.client.requests"}
    | {"tiermem.aio", "tiermem.aio.twins"}  # stepped methods: a request is the one wait
)
CLIENT_OUTSIDE = frozenset({"httpx"})
"""What the contract's modules may import (and run) from outside the package and the
standard library."""
NOT_FOR_THE_PLANNER = ("tiermem.llm", "tiermem.embeddings", "tiermem.rerank", "tiermem.stores")
CONFIGURATION = frozenset({"tiermem.config", "tiermem.config.model", "tiermem.config.source"})


def _floor() -> frozenset[str]:
    return CORE | {m for m in modules() if m == "tiermem.types" or m.startswith("tiermem.types.")}


def _below(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


@pytest.mark.parametrize(
    ("start", "allowed"),
    [
        ("tiermem.types", frozenset()),
        ("tiermem.api", frozenset({"tiermem.api"})),
        ("tiermem.wire", frozenset({"tiermem.wire"})),
        ("tiermem.client", CLIENT),
    ],
)
def test_the_contract_stands_on_the_floor_of_types(start: str, allowed: frozenset[str]) -> None:
    loaded = loaded_by(start, graph(typing=False))
    assert sorted(loaded - _floor() - allowed) == []


def test_the_contract_imports_nothing_heavy_from_outside() -> None:
    found = {
        name: sorted(outside - sys.stdlib_module_names - CLIENT_OUTSIDE)
        for name, path in modules().items()
        if name in CLIENT or name in _floor()
        if (outside := outside_imports(path))
    }
    assert {name: extra for name, extra in found.items() if extra} == {}


def test_the_planner_reaches_no_provider_store_or_configuration() -> None:
    loaded = loaded_by("tiermem.planner", graph(typing=False))
    assert "tiermem.types.context" in loaded  # the walk follows the planner's imports
    reached = [m for m in loaded if m in CONFIGURATION or _below(m, NOT_FOR_THE_PLANNER)]
    assert sorted(reached) == []


def test_the_walk_sees_a_heavy_import() -> None:
    """The static check can fail: the memory facade reaches the stores and the config."""
    loaded = loaded_by("tiermem.memory", graph(typing=False))
    assert "tiermem.stores.sqlite" in loaded
    assert "tiermem.config.model" in loaded


def _loaded_in_a_fresh_process(module: str, names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` are in ``sys.modules`` after ``import module`` in a new process."""
    source = PACKAGE.parent
    probe = f"import sys, {module}; print(*[n for n in {names!r} if n in sys.modules])"
    env = {**os.environ, "PYTHONPATH": str(source)}
    proc = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_importing_the_client_loads_no_store_planner_config_or_numpy() -> None:
    heavy = ("numpy", "pydantic", "yaml", "tiermem.planner", "tiermem.config")
    heavy += ("tiermem.stores", "tiermem.memory", "tiermem.llm", "tiermem.embeddings")
    assert _loaded_in_a_fresh_process("tiermem.client", heavy) == []
    assert _loaded_in_a_fresh_process("tiermem.memory", heavy[:1]) == ["numpy"]  # it can see


def test_importing_the_planner_loads_no_provider_store_or_config() -> None:
    names = (*NOT_FOR_THE_PLANNER, *sorted(CONFIGURATION))
    assert _loaded_in_a_fresh_process("tiermem.planner", names) == []


TOOLS = {
    "tiermem.memory.export": ("tiermem.types", "tiermem.stores", "tiermem.embeddings"),
    "tiermem.cli.copying": (
        "tiermem.types",
        "tiermem.stores",
        "tiermem.memory.export",
        "tiermem.server",
    ),
}
"""The archive format (``Memory.export``) and ``tiermem copy`` work on the stores, not
through ``Memory``: what they may import of ours beside the core (no facade, no planner)."""
TOOL_CORE = ("tiermem._version", "tiermem.errors", "tiermem.messages", "tiermem.paths")


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_the_tools_import_the_stores_not_the_facade(tool: str) -> None:
    imported = graph()[tool]
    assert sorted(m for m in imported if not _below(m, TOOLS[tool] + TOOL_CORE)) == []
