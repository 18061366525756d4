"""Embedders: turn text into L2-normalized float32 vectors."""

from tiermem.embeddings.base import Embedder

__all__ = ["Embedder"]
