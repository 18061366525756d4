"""The tiermem command."""

from __future__ import annotations

import subprocess
import sys

from tiermem.cli import main


def test_demo_shows_filling_eviction_and_context(capsys) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "Filling the buffer" in out
    assert "price_flour" in out
    assert "Context within" in out


def test_no_command_prints_help(capsys) -> None:
    assert main([]) == 2
    assert "demo" in capsys.readouterr().out


def test_import_is_light() -> None:
    code = "import sys, tiermem; print(sorted(m for m in ('numpy', 'torch', 'tiktoken', 'httpx', 'pydantic') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_lazy_public_names() -> None:
    import tiermem

    assert tiermem.BufferMemory.__name__ == "BufferMemory"
    assert "ConversationBuffer" in dir(tiermem)
