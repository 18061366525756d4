"""Embedders: turn text into L2-normalized float32 vectors.

``get_embedder("local/all-MiniLM-L6-v2")`` (the default, onnxruntime, no torch),
``get_embedder("torch/all-MiniLM-L6-v2")`` (sentence-transformers) or
``get_embedder("openai/text-embedding-3-small")``. Importing this package imports
neither onnxruntime nor torch; a local model loads on its first embed.
"""

from tiermem.embeddings.base import BaseEmbedder, Embedder
from tiermem.embeddings.cache import LRUCache, content_hash
from tiermem.embeddings.factory import DEFAULT_MODEL, get_embedder
from tiermem.embeddings.local import SentenceTransformerEmbedder
from tiermem.embeddings.onnx import OnnxEmbedder

__all__ = [
    "DEFAULT_MODEL",
    "BaseEmbedder",
    "Embedder",
    "LRUCache",
    "OnnxEmbedder",
    "SentenceTransformerEmbedder",
    "content_hash",
    "get_embedder",
]
