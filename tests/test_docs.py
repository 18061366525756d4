"""Every Python example in the README and docs/ runs as written.

Each fenced ```python block of README.md and docs/**/*.md runs on its own, in a fresh
temporary folder, in a fresh interpreter, offline (``HF_HUB_OFFLINE=1``), unless the line
right before it is ``<!-- fragment: why -->`` (docs/README.md says when to use it).
The blocks load the real embedding model, hence ``slow``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```python[ \t]*$")
FRAGMENT = re.compile(r"^<!--\s*fragment:\s*\S.*-->\s*$")


def python_blocks(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, code, is_fragment)`` of each fenced ```python block of ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            start = i
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            previous = next((ln for ln in reversed(lines[:start]) if ln.strip()), "")
            code = "\n".join(lines[start + 1 : end]) + "\n"
            blocks.append((start + 1, code, bool(FRAGMENT.match(previous))))
            i = end
        i += 1
    return blocks


SERVED = {"client.md", "mcp.md", "server.md"}
"""Pages whose examples talk to a running server: tests/test_server_docs.py runs them
against one it starts. The pages of docs/integrations/ need a framework's model server:
tests/integrations/test_integrations_docs.py runs them against tests/fakeserver.py."""


def doc_files() -> list[Path]:
    docs = [
        p
        for p in sorted((ROOT / "docs").rglob("*.md"))
        if p.name not in SERVED and p.parent.name != "integrations"
    ]
    return [ROOT / "README.md", *docs]


EXAMPLES = [
    pytest.param(path, line, code, id=f"{path.relative_to(ROOT)}:{line}")
    for path in doc_files()
    for line, code, fragment in python_blocks(path)
    if not fragment
]


def test_the_examples_are_found() -> None:
    assert len(EXAMPLES) >= 30
    assert any("planner.md" in str(p.values[0]) for p in EXAMPLES)


def test_a_fragment_needs_its_reason(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- fragment: needs a key -->\n```python\nx\n```\n\n"
        "<!-- fragment -->\n```python\ny\n```\n```python\nz\n```\n"
    )
    assert python_blocks(page) == [(2, "x\n", True), (7, "y\n", False), (10, "z\n", False)]


@pytest.mark.slow
@pytest.mark.parametrize(("path", "line", "code"), EXAMPLES)
def test_example_runs(path: Path, line: int, code: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    env.update(
        HF_HUB_OFFLINE="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")])),
        XDG_DATA_HOME=str(tmp_path / "data"),  # Memory()'s default file: a fresh folder
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"{path.name}:{line} failed:\n{run.stderr[-3000:]}"
