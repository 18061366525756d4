"""The package's import graph, read from its source (``ast``), for the tests that guard
the house (tests/test_architecture.py, tests/test_contract_boundary.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "src" / "tiermem"


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _is_type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
    return name == "TYPE_CHECKING"


def import_nodes(tree: ast.AST, typing: bool = True) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement anywhere in ``tree``; ``typing=False`` leaves out those
    under ``if TYPE_CHECKING:`` (never run)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if typing or not _is_type_checking(node):
            yield from import_nodes(node, typing)
        else:
            for other in node.orelse:
                yield from import_nodes(other, typing)


def imports(name: str, path: Path, known: dict[str, Path], typing: bool = True) -> Iterator[str]:
    """The tiermem modules ``name`` imports, anywhere in the file (``typing=False``: not
    those only a type checker reads)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in import_nodes(ast.parse(path.read_text(encoding="utf-8")), typing):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            names = [f"{base}.{a.name}" for a in node.names]
            submodules = [n for n in names if n in known]  # `from pkg import module`
            targets = submodules + ([base] if len(submodules) < len(names) else [])
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def outside_imports(path: Path) -> set[str]:
    """The top-level names of what ``path`` imports (and runs: not typing-only imports)
    from outside the package."""
    found = set()
    for node in import_nodes(ast.parse(path.read_text(encoding="utf-8")), typing=False):
        if isinstance(node, ast.Import):
            found |= {a.name.partition(".")[0] for a in node.names}
        elif not node.level and node.module:
            found.add(node.module.partition(".")[0])
    return found - {"tiermem"}


def graph(typing: bool = True) -> dict[str, set[str]]:
    """Each module and the tiermem modules it imports."""
    known = modules()
    return {n: set(imports(n, p, known, typing)) for n, p in known.items()}


def loaded_by(start: str, runtime: dict[str, set[str]]) -> set[str]:
    """The modules ``import start`` runs: its imports, theirs, and every package above
    each (a package's ``__init__`` runs before its modules); ``runtime`` is
    :func:`graph` without typing-only imports."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parent = name.rpartition(".")[0]
        todo += ([parent] if parent else []) + sorted(runtime[name])
    return seen
