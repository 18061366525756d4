"""Seed 001 (MUXI memory internals): the configuration snippets load as written.

The seed's text lost its YAML indentation when it was extracted from HTML; the YAML
below restores the indentation and keeps every line (comments included) verbatim.
``test_yaml_is_the_seed_text`` checks that line by line against the seed file when the
seeds folder is present.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tiermem.config import TiermemConfig

SEED_CONFIGURATION_REFERENCE = """\
memory:
  buffer:
    size: 50 # Messages before summarization
    multiplier: 10 # Extended capacity factor
    vector_search: true # Enable semantic search
    embedding_model: openai/text-embedding-3-small # Or local/all-MiniLM-L6-v2
  working:
    max_memory_mb: 10 # Memory limit
    fifo_interval_min: 5 # Cleanup frequency
  persistent:
    enabled: true
    provider: postgresql
    connection_string: ${{ secrets.POSTGRES_URI }}
    user_isolation: true
  synopsis:
    identity_ttl: 604800 # 7 days
    context_ttl: 3600 # 1 hour
    refresh_on_access: true
"""

SEED_WORKING_FIFO = """\
memory:
  working:
    max_memory_mb: 10
    fifo_interval_min: 5
"""

SEED_LOCAL_EMBEDDINGS = """\
llm:
  models:
    - embedding: "local/all-MiniLM-L6-v2" # 384 dimensions
      # or: "local/all-mpnet-base-v2" # 768 dimensions
"""

URI = "postgresql://muxi:secret@localhost/muxi"


REPOSITORY = Path(__file__).resolve().parents[2]
SEEDS = REPOSITORY.parent / "shared" / "seeds"  # beside the repository, as the project keeps them


def seeds_dir() -> Path:
    """``TIERMEM_SEEDS_DIR`` when set, else ``../shared/seeds`` from the repository root."""
    return Path(os.environ.get("TIERMEM_SEEDS_DIR") or SEEDS)


def seed_file() -> Path | None:
    found = sorted(seeds_dir().glob("001_*.txt"))
    return found[0] if found else None


def test_configuration_reference_loads_as_written() -> None:
    config = TiermemConfig.load(SEED_CONFIGURATION_REFERENCE, environ={"POSTGRES_URI": URI})
    memory = config.memory
    assert (memory.buffer.size, memory.buffer.multiplier, memory.buffer.vector_search) == (
        50,
        10,
        True,
    )
    assert config.embedding_model == "openai/text-embedding-3-small"
    assert (memory.working.max_memory_mb, memory.working.fifo_interval_min) == (10, 5)
    assert memory.persistent.provider == "postgresql" and memory.persistent.enabled
    assert memory.persistent.connection_string is not None
    assert memory.persistent.connection_string.get_secret_value() == URI
    assert memory.persistent.user_isolation is True
    assert (memory.synopsis.identity_ttl, memory.synopsis.context_ttl) == (7 * 24 * 3600, 3600)
    assert memory.synopsis.refresh_on_access is True
    assert "secret" not in repr(config)


def test_working_and_local_embedding_snippets_load() -> None:
    working = TiermemConfig.load(SEED_WORKING_FIFO).memory.working
    assert (working.max_memory_mb, working.fifo_interval_min) == (10, 5)
    config = TiermemConfig.load(SEED_LOCAL_EMBEDDINGS)
    assert config.embedding_model == "local/all-MiniLM-L6-v2"
    combined = TiermemConfig.load(
        SEED_CONFIGURATION_REFERENCE + SEED_LOCAL_EMBEDDINGS, environ={"POSTGRES_URI": URI}
    )
    assert combined.embedding_model == "local/all-MiniLM-L6-v2"  # llm.models wins


def test_yaml_is_the_seed_text() -> None:
    path = seed_file()
    if path is None:
        pytest.skip(
            f"seed 001 (001_*.txt) not found in {seeds_dir()}: set TIERMEM_SEEDS_DIR to the "
            "seeds folder, or keep it at ../shared/seeds beside the repository"
        )
    text = path.read_text(encoding="utf-8")
    section = text.split("Configuration Reference\n", 1)[1].split("Next Steps", 1)[0]
    seed_lines = [line.strip() for line in section.splitlines() if line.strip()]
    ours = [line.strip() for line in SEED_CONFIGURATION_REFERENCE.splitlines()]
    assert ours == seed_lines
    for snippet in (SEED_WORKING_FIFO, SEED_LOCAL_EMBEDDINGS):
        for line in snippet.splitlines():
            assert line.strip().lstrip("- ") in text
