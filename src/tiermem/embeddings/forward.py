"""A direct forward pass for short inputs to a sentence-transformers model.

``SentenceTransformer.encode`` spends about 1 ms per call on bookkeeping (sorting by
length, device lookups that walk every parameter, feature dictionaries): 15 % of
embedding one query with MiniLM on a CPU, which is on ``get_context``'s critical path.
For the common stack (a Hugging Face transformer, mean pooling, optional normalization)
the same vectors come from the tokenizer, the transformer and a masked mean. The direct
path is used only if it reproduces ``encode`` on probe texts at load time; any other
model, or any difference, keeps ``encode``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

DirectEncoder = Callable[[list[str]], np.ndarray]
PROBES = [
    "tiermem checks its fast path.",
    "A second, longer probe: both ways of embedding must agree on every number!",
]
TOLERANCE = 1e-5


def direct_encoder(model: Any) -> DirectEncoder | None:
    """A function embedding texts like ``model.encode`` (unnormalized), or None."""
    try:
        encode = _build(model)
        if encode is None:
            return None
        expected = np.asarray(model.encode(PROBES, convert_to_numpy=True, show_progress_bar=False))
        batched = encode(PROBES)
        single = np.vstack([encode([text]) for text in PROBES])
    except Exception as exc:  # an unexpected model layout: keep encode()
        log.debug("no direct forward pass for this model: %s", exc)
        return None
    for got in (batched, single):
        if got.shape != expected.shape or not np.allclose(got, expected, atol=TOLERANCE):
            log.debug("direct forward pass differs from encode(): not used")
            return None
    return encode


def _build(model: Any) -> DirectEncoder | None:
    """The direct path for [Transformer, Pooling(mean)(, Normalize)], else None."""
    import torch

    modules = list(model)
    names = [type(m).__name__ for m in modules]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    transformer, pooling = modules[0], modules[1]
    if _pooling_mode(pooling) != "mean":
        return None
    tokenizer = transformer.tokenizer
    network = transformer.auto_model
    max_length = transformer.max_seq_length
    lower = bool(getattr(transformer, "do_lower_case", False))
    normalize = len(modules) == 3

    def encode(texts: list[str]) -> np.ndarray:
        if lower:
            texts = [t.lower() for t in texts]
        with torch.inference_mode():
            batch = tokenizer(
                texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
            )
            hidden = network(**batch)[0]
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            if normalize:
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        vectors: np.ndarray = pooled.numpy()
        return vectors

    return encode


def _pooling_mode(pooling: Any) -> str | None:
    """The pooling mode across sentence-transformers versions."""
    config = pooling.get_config_dict() if hasattr(pooling, "get_config_dict") else {}
    mode = config.get("pooling_mode")
    if isinstance(mode, str):
        return mode
    flags = {k: v for k, v in config.items() if k.startswith("pooling_mode_") and v}
    if list(flags) == ["pooling_mode_mean_tokens"]:
        return "mean"
    return None
