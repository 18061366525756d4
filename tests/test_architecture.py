"""The house's rules, checked: no import cycle (typing-only and function-level imports
count: a reader follows them too), no module over 700 lines, no class standing on more
than three of ours, and async methods from three sources (docs/architecture.md; a
store's few names are checked on every engine by tests/conformance/test_store_conformance.py)."""

from __future__ import annotations

import ast

from importgraph import PACKAGE, graph, import_nodes, modules

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


# -- classes: composed, not inherited ----------------------------------------------------

MAX_CHAIN = 3
"""The most classes of ours one class may stand on, itself included (Protocol, ABC,
Generic and other outside classes are not counted): a new concern is a part an object
holds, not one more base (the store's line was four long, and through its mixins it stood
on seven of ours: docs/architecture.md). The typed
errors are exempt: a taxonomy a caller catches by (``except ProviderError``), no
behaviour inherited."""
ERRORS = "tiermem.errors.TiermemError"


def _local_names(name: str, tree: ast.Module) -> dict[str, str]:
    """What each name of the module stands for among ours: a class it defines or
    imports (by its dotted name), or a module it imports."""
    local: dict[str, str] = {}
    for node in import_nodes(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tiermem"):
            for alias in node.names:
                local[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tiermem") and alias.asname:
                    local[alias.asname] = alias.name
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            local[node.name] = f"{name}.{node.name}"
    return local


def class_bases() -> dict[str, list[str]]:
    """Every module-level class of the package (``module.Class``) and the bases of ours
    it names, read from the source (``ast``: nothing is imported)."""
    trees = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in modules().items()}
    names = {name: _local_names(name, tree) for name, tree in trees.items()}

    def resolve(dotted: str) -> str | None:
        """The class a dotted name of ours stands for, through a package's re-exports."""
        for _ in range(10):
            module, _, attr = dotted.rpartition(".")
            found = names.get(module, {}).get(attr)
            if found is None or found == dotted:
                return dotted if found == dotted else None
            dotted = found
        return None

    def base_name(local: dict[str, str], expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Subscript):  # Generic[...] and SQLStore[...] alike
            expr = expr.value
        if isinstance(expr, ast.Name):
            return local.get(expr.id)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            module = local.get(expr.value.id)
            return None if module is None else f"{module}.{expr.attr}"
        return None

    bases: dict[str, list[str]] = {}
    for name, tree in trees.items():
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                found = (base_name(names[name], b) for b in node.bases)
                ours = (resolve(b) for b in found if b is not None)
                bases[f"{name}.{node.name}"] = [b for b in ours if b is not None]
    return bases


def chain(cls: str, bases: dict[str, list[str]]) -> list[str]:
    """The longest line of our classes from ``cls`` up through its bases, ``cls`` first."""
    longest = max((chain(b, bases) for b in bases.get(cls, [])), key=len, default=[])
    return [cls, *longest]


def test_no_class_stands_on_more_than_three_of_ours() -> None:
    bases = class_bases()
    chains = {c: chain(c, bases) for c in bases}
    deep = {c: up for c, up in chains.items() if len(up) > MAX_CHAIN and up[-1] != ERRORS}
    assert deep == {}


def test_class_bases_follows_imports_and_reexports() -> None:
    bases = class_bases()
    assert bases["tiermem.stores.sqlite.SQLiteStore"] == ["tiermem.stores.sql.SQLStore"]
    assert chain("tiermem.stores.sqlite.SQLiteStore", bases) == [
        "tiermem.stores.sqlite.SQLiteStore",
        "tiermem.stores.sql.SQLStore",
        "tiermem.stores.protocol.MemoryStore",
    ]
    assert "tiermem.stores.parts.Part" in bases["tiermem.stores.index.MemoryIndex"]


# -- async from three sources (docs/architecture.md, Sync and async) --------------------

FACES = ("server/", "integrations/")
"""Coroutines a framework calls (routes, middleware, MCP tools, an adapter's async
methods): they call Memory's twins, never re-implement them."""
CLOSERS = frozenset({"aclose", "__aenter__", "__aexit__"})
"""Closing what belongs to an event loop (an async pool or HTTP client) runs on it."""
WRITTEN: dict[str, frozenset[str]] = {
    "the plans' async driver and the store's native async reads (stores/)": frozenset(
        {
            "stores/plans.py:arun",
            "stores/postgres.py:PostgresStore.abatch",
            "stores/postgres.py:PostgresStore.abatch_then",
            "stores/postgres.py:PostgresStore._retried",
            "stores/postgres.py:PostgresStore._aread",
            "stores/postgres.py:PostgresStore._atransaction",
            "stores/postgres_async.py:_configure",
            "stores/postgres_async.py:_closed_at_the_loops_end",
            "stores/postgres_async.py:AsyncPools.pool",
            "stores/postgres_async.py:AsyncPools.connection",
            "stores/postgres_async.py:AsyncPools.recheck",
            "stores/sql.py:SQLStore.abatch",
            "stores/protocol.py:MemoryStore.abatch_then",
            "synopsis/redis.py:RedisSynopsisCache.abatch",
            "synopsis/redis.py:RedisSynopsisCache.aclear",
        }
    ),
    "the awaiting form of a stepped method's wait (what an _astep awaits)": frozenset(
        {
            "embeddings/base.py:BaseEmbedder._aembed_batch",
            "embeddings/openai.py:OpenAIEmbedder._aembed_batch",
            "rerank/base.py:BaseReranker._ascores",
            "rerank/http.py:HTTPReranker._ascores",
            "rerank/llm.py:LLMReranker._ascores",
            "client/__init__.py:AsyncMemoryClient.call",
            "agent.py:Agent._arun_tool",
            "memory/retrieval.py:Retriever._aembedded",
            "breaker.py:aguarded",
        }
    ),
    "streams (an async iterator, a page at a time)": frozenset(
        {"memory/facade.py:Memory.aexport", "client/__init__.py:AsyncMemoryClient.aexport"}
    ),
    "seed APIs that are async only, or wait on an asyncio lock": frozenset(
        {
            "agent.py:Agent.run",
            "agent.py:Agent.achat",
            "agent.py:Agent._compress_memory",
            "buffer/memory.py:BufferMemory.aadd_message",
            "buffer/memory.py:ConversationBuffer.async_snapshot",
            "buffer/memory.py:ConversationBuffer.async_replace",
            "buffer/memory.py:ConversationBuffer.async_append",
            "patterns/token_limits.py:summarize_memory",
            "patterns/token_limits.py:_summarize",
        }
    ),
    "a deadline: a late sync call keeps its thread, a late task is cancelled": frozenset(
        {"rerank/stage.py:arerank_scores"}
    ),
}
"""The coroutines written by hand, each for its reason."""


def _declaration(node: ast.AsyncFunctionDef, within: list[ast.ClassDef]) -> bool:
    """A Protocol's or an abstract method: a signature, not a body."""
    protocol = bool(within) and any(ast.unparse(b).endswith("Protocol") for b in within[-1].bases)
    return protocol or any(ast.unparse(d).endswith("abstractmethod") for d in node.decorator_list)


def _written_coroutines() -> set[str]:
    """Every ``async def`` of the package outside aio/ (the sources), the faces, the
    declarations, the ``_astep`` of a stepped class and the closers."""
    found: set[str] = set()

    def visit(node: ast.AST, module: str, within: list[ast.ClassDef], name: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, module, [*within, child], f"{name}{child.name}.")
            elif isinstance(child, ast.AsyncFunctionDef):
                if not (
                    _declaration(child, within)
                    or child.name in CLOSERS
                    or (within and child.name == "_astep")
                ):
                    found.add(f"{module}:{name}{child.name}")
            elif isinstance(child, ast.FunctionDef):
                pass  # a coroutine inside a function is the function's (a twin's, a test's)
            else:
                visit(child, module, within, name)

    for path in sorted(PACKAGE.rglob("*.py")):
        module = str(path.relative_to(PACKAGE))
        if not module.startswith(("aio/", *FACES)):
            visit(ast.parse(path.read_text(encoding="utf-8")), module, [], "")
    return found


def test_async_methods_come_from_the_three_sources() -> None:
    """An async method is a thread twin (``twin``), a stepped method's twin
    (``stepped_twin``) or a plan run by ``arun``; the coroutines written by hand are
    :data:`WRITTEN`, each for its reason, and no entry there outlives its code."""
    written = _written_coroutines()
    allowed = frozenset().union(*WRITTEN.values())
    assert sorted(written - allowed) == []  # a new one: make it with a source
    assert sorted(allowed - written) == []  # gone: take it off the list
