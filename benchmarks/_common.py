"""What every benchmark does the same way: percentiles, the reproduce line, JSON, tables.

Standard library only at import (rich is imported when a table is made), like
``peers.py``: benchmark code that also runs inside a peer's virtualenv may import it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table


def locomo_folder(text: str) -> Path:
    """An argparse ``type``: a folder holding LoCoMo conversations (``*.json``), or a
    clear usage error naming it (not a failure deep in the run)."""
    path = Path(text)
    if not path.is_dir() or not any(path.glob("*.json")):
        raise argparse.ArgumentTypeError(f"{path} holds no LoCoMo conversations (*.json)")
    return path


def positive(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer of at least 1")
    return number


def nearest_rank(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0 to 1) of the sorted ``ordered``, by nearest rank."""
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def reproduce_command(script: str, argv: Sequence[str] | None) -> str:
    """``python benchmarks/<script> <args>``: the command that repeats this run.

    ``argv`` is what ``main`` was given (``None``: the process's own arguments).
    """
    args = sys.argv[1:] if argv is None else argv
    return shlex.join(["python", f"benchmarks/{Path(script).name}", *args])


def write_json(path: str | Path, results: Any) -> None:
    """Write ``results`` as indented JSON to ``path``, creating its folder."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))


def rich_table(title: str, columns: Sequence[str], left: int = 1) -> Table:
    """A rich table of ``columns``: the first ``left`` aligned left, the figures right."""
    from rich.table import Table

    table = Table(title=title)
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i < left else "right")
    return table
