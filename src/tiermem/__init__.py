"""tiermem: tiered memory for LLM agents."""

__version__ = "0.1.0"
