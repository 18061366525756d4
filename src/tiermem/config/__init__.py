"""Configuration: ``TiermemConfig`` (:mod:`.model`) and where a configuration comes from
(:mod:`.source`: YAML, ``${NAME}`` and secrets)."""

from tiermem.config.model import (
    BufferConfig,
    LLMConfig,
    MemoryConfig,
    ModelEntry,
    PersistentConfig,
    RerankConfig,
    SynopsisConfig,
    TiermemConfig,
    WorkingConfig,
    check_config,
)

__all__ = [
    "BufferConfig",
    "LLMConfig",
    "MemoryConfig",
    "ModelEntry",
    "PersistentConfig",
    "RerankConfig",
    "SynopsisConfig",
    "TiermemConfig",
    "WorkingConfig",
    "check_config",
]
