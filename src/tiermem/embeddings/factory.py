"""``get_embedder``: build an embedder from a model string (seed 001 notation)."""

from __future__ import annotations

from typing import Any

from tiermem.embeddings.base import Embedder
from tiermem.errors import ConfigError, InvalidTypeError

DEFAULT_MODEL = "local/all-MiniLM-L6-v2"
PROVIDERS = ("local", "openai")


def get_embedder(model: str | Embedder = DEFAULT_MODEL, **opts: Any) -> Embedder:
    """Return the embedder named by ``model``, e.g. ``"local/all-MiniLM-L6-v2"``.

    Args:
        model: ``"<provider>/<name>"`` with provider ``local`` (sentence-transformers on
            the CPU) or ``openai`` (any OpenAI-compatible ``/v1/embeddings`` endpoint).
            An object that already is an :class:`Embedder` is returned unchanged.
        **opts: passed to the provider class (``batch_size``, ``cache_size``, ``device``,
            ``model_path``, ``base_url``, ``api_key``, ``dimensions``, ...).

    Nothing is loaded or contacted here: a local model loads on its first embed.
    """
    if isinstance(model, Embedder):
        return model
    if not isinstance(model, str):
        raise InvalidTypeError("model", f"expected a model string, got {type(model).__name__}")
    provider, _, name = model.partition("/")
    if not name or provider not in PROVIDERS:
        raise ConfigError(
            "model",
            f"{model!r} is not '<provider>/<name>' with provider in {PROVIDERS}",
            "e.g. 'local/all-MiniLM-L6-v2' or 'openai/text-embedding-3-small'",
        )
    if provider == "local":
        from tiermem.embeddings.local import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(name, **opts)
    from tiermem.embeddings.openai import OpenAIEmbedder

    return OpenAIEmbedder(name, **opts)
