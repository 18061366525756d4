"""``get_embedder``: build an embedder from a model string (seed 001 notation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tiermem.embeddings.base import Embedder
from tiermem.errors import ConfigError, InvalidTypeError

DEFAULT_MODEL = "local/all-MiniLM-L6-v2"
PROVIDERS = ("local", "torch", "openai")


def get_embedder(model: str | Embedder = DEFAULT_MODEL, **opts: Any) -> Embedder:
    """Return the embedder named by ``model``, e.g. ``"local/all-MiniLM-L6-v2"``.

    Args:
        model: ``"<provider>/<name>"`` with provider ``local`` (on the CPU: the packaged
            all-MiniLM-L6-v2 or any ``model_path=`` ONNX graph through onnxruntime, other
            names through sentence-transformers), ``torch`` (always sentence-transformers,
            ``pip install 'tiermem[torch]'``) or ``openai`` (any OpenAI-compatible
            ``/v1/embeddings`` endpoint). An :class:`Embedder` is returned unchanged.
        **opts: passed to the provider class (``batch_size``, ``cache_size``,
            ``model_path``, ``threads``, ``device``, ``base_url``, ``api_key``, ...).

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
    if provider == "openai":
        from tiermem.embeddings.openai import OpenAIEmbedder

        return OpenAIEmbedder(name, **opts)
    if provider == "local" and _runs_on_onnx(name, opts.get("model_path")):
        from tiermem.embeddings.onnx import OnnxEmbedder

        return OnnxEmbedder(name, **opts)
    from tiermem.embeddings.local import SentenceTransformerEmbedder, check_model_name

    if opts.get("model_path") is None:
        check_model_name(provider, name)

    return SentenceTransformerEmbedder(name, provider=provider, **opts)


def _runs_on_onnx(name: str, model_path: Any) -> bool:
    """``local/<name>`` runs on onnxruntime for the packaged model or an ONNX ``model_path``."""
    from tiermem.embeddings.onnx import is_packaged

    if model_path is None:
        return is_packaged(name)
    path = Path(model_path)
    return path.suffix == ".onnx" or (path / "model.onnx").is_file()
