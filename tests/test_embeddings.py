"""Embedder machinery: validation, batching, cache, normalization, async twin, factory."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from embedders import BadOutputEmbedder, FailingEmbedder, HashEmbedder
from tiermem.embeddings import (
    BaseEmbedder,
    Embedder,
    LRUCache,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    content_hash,
    get_embedder,
)
from tiermem.errors import (
    ConfigError,
    ContentTooLargeError,
    DimensionMismatchError,
    InputError,
    InvalidSizeError,
    InvalidTypeError,
    ProviderError,
    ProviderResponseError,
)


def test_rows_are_unit_float32_and_match_input_order() -> None:
    emb = HashEmbedder(dimension=16)
    out = emb.embed(["alpha beta", "gamma", "alpha beta"])
    assert out.shape == (3, 16) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(out[0], out[2])
    assert not np.allclose(out[0], out[1])
    assert isinstance(emb, Embedder)


def test_empty_list_gives_empty_array_without_calling_the_model() -> None:
    emb = HashEmbedder(dimension=8)
    assert emb.embed([]).shape == (0, 8)
    assert emb.calls == []


@pytest.mark.parametrize(
    ("texts", "error", "field"),
    [
        ("a single string", InvalidTypeError, "texts"),
        (b"bytes", InvalidTypeError, "texts"),
        (42, InvalidTypeError, "texts"),
        (["ok", 3], InvalidTypeError, "texts[1]"),
        (["ok", None], InvalidTypeError, "texts[1]"),
        (["ok", ""], InputError, "texts[1]"),
        (["   \n"], InputError, "texts[0]"),
    ],
)
def test_bad_input_raises_typed_error_naming_the_element(
    texts: object, error: type[Exception], field: str
) -> None:
    emb = HashEmbedder()
    with pytest.raises(error) as info:
        emb.embed(texts)  # type: ignore[arg-type]
    assert info.value.field == field  # type: ignore[attr-defined]
    assert emb.calls == []


def test_too_long_text_is_refused() -> None:
    emb = HashEmbedder(max_chars=100)
    with pytest.raises(ContentTooLargeError, match="max_chars=100"):
        emb.embed(["x" * 101])


def test_batches_respect_batch_size_and_dedupe() -> None:
    emb = HashEmbedder(batch_size=3)
    texts = [f"text {i}" for i in range(7)] + ["text 0", "text 1"]
    out = emb.embed(texts)
    assert [len(call) for call in emb.calls] == [3, 3, 1]
    np.testing.assert_array_equal(out[7], out[0])


def test_cache_serves_repeats_and_is_keyed_by_model_and_content() -> None:
    cache: LRUCache[np.ndarray] = LRUCache(100)
    small, big = HashEmbedder(dimension=8, cache=cache), HashEmbedder(dimension=16, cache=cache)
    first = small.embed(["hello world"])
    again = small.embed(["hello world"])
    assert len(small.calls) == 1
    np.testing.assert_array_equal(first, again)
    assert big.embed(["hello world"]).shape == (1, 16)  # same text, other model: no reuse
    assert len(big.calls) == 1 and len(cache) == 2
    again[0, 0] = 42.0  # results are copies: mutating them leaves the cache intact
    np.testing.assert_array_equal(small.embed(["hello world"]), first)


def test_cache_disabled_with_size_zero() -> None:
    emb = HashEmbedder(cache_size=0)
    emb.embed(["same"])
    emb.embed(["same"])
    assert len(emb.calls) == 2


def test_lru_cache_evicts_least_recently_used_and_validates() -> None:
    cache: LRUCache[int] = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now most recent
    cache.put("c", 3)
    assert "b" not in cache and cache.get("a") == 1 and cache.get("c") == 3
    assert cache.hits == 3 and cache.get("b") is None and cache.misses == 1
    with pytest.raises(InvalidSizeError):
        LRUCache(-1)
    with pytest.raises(InvalidTypeError):
        LRUCache("10")  # type: ignore[arg-type]


def test_lru_cache_is_thread_safe() -> None:
    cache: LRUCache[int] = LRUCache(50)

    def hammer(offset: int) -> None:
        for i in range(2000):
            cache.put((offset, i % 80), i)
            cache.get((offset, (i * 7) % 80))

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 50


def test_content_hash_is_stable_sha256() -> None:
    assert content_hash("abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda n: np.full((n, 32), np.nan), ProviderResponseError),
        (lambda n: np.full((n, 32), np.inf), ProviderResponseError),
        (lambda n: np.zeros((n, 32)), ProviderResponseError),
        (lambda n: np.ones((n, 31)), DimensionMismatchError),
        (lambda n: np.ones((n + 1, 32)), ProviderResponseError),
        (lambda n: np.ones(32), ProviderResponseError),
    ],
)
def test_bad_provider_output_raises_and_is_not_cached(make: object, error: type) -> None:
    emb = BadOutputEmbedder(make)
    with pytest.raises(error):
        emb.embed(["some text"])
    assert len(emb.cache) == 0


def test_normalizes_unnormalized_provider_output() -> None:
    emb = BadOutputEmbedder(lambda n: np.full((n, 32), 5.0))
    np.testing.assert_allclose(np.linalg.norm(emb.embed(["x"]), axis=1), 1.0, rtol=1e-6)


def test_provider_error_propagates_and_nothing_is_cached() -> None:
    emb = FailingEmbedder(ProviderError("down"))
    with pytest.raises(ProviderError, match="down"):
        emb.embed(["a", "b"])
    assert len(emb.cache) == 0


async def test_aembed_matches_embed_and_runs_off_the_loop() -> None:
    emb = HashEmbedder(batch_size=2)
    expected = emb.embed(["one two", "three", "four five six"])
    emb.cache.clear()
    loop_thread = threading.get_ident()
    seen: list[int] = []
    original = emb._embed_batch

    def recording(texts: list[str]) -> np.ndarray:
        seen.append(threading.get_ident())
        return original(texts)

    emb._embed_batch = recording  # type: ignore[method-assign]
    got = await emb.aembed(["one two", "three", "four five six"])
    np.testing.assert_array_equal(got, expected)
    assert seen and loop_thread not in seen
    np.testing.assert_array_equal(await emb.aembed_one("three"), expected[1])


async def test_concurrent_aembed_calls() -> None:
    emb = HashEmbedder()
    texts = [[f"doc {i} {j}" for j in range(5)] for i in range(10)]
    results = await asyncio.gather(*(emb.aembed(t) for t in texts))
    for batch, got in zip(texts, results, strict=True):
        np.testing.assert_array_equal(got, HashEmbedder().embed(batch))


def test_base_embedder_validates_its_options() -> None:
    with pytest.raises(InvalidSizeError, match="batch_size"):
        HashEmbedder(batch_size=0)
    with pytest.raises(InvalidTypeError, match="max_chars"):
        HashEmbedder(max_chars="many")
    with pytest.raises(TypeError):
        BaseEmbedder("x")  # type: ignore[abstract]


@pytest.mark.parametrize("model", ["local/not-a-model", "torch/not-a-model", "local/org/typo"])
def test_an_unknown_model_name_says_so_and_lists_the_offline_names(
    model: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    (tmp_path / "hub" / "models--BAAI--bge-small-en-v1.5").mkdir(parents=True)
    with pytest.raises(ConfigError) as caught:
        get_embedder(model)
    assert caught.value.field == "model"
    assert caught.value.problem == f"unknown embedding model {model}"
    assert "local/all-MiniLM-L6-v2, local/BAAI/bge-small-en-v1.5" in caught.value.hint
    assert "torch" not in str(caught.value).replace(model, "")  # no "install PyTorch" first
    assert get_embedder("local/BAAI/bge-small-en-v1.5").dimension == 384  # cached: accepted


def test_get_embedder_parses_model_strings_without_loading(tmp_path: Path) -> None:
    emb = get_embedder()
    assert isinstance(emb, OnnxEmbedder)  # the default needs no torch
    assert emb.model_id == "local/all-MiniLM-L6-v2" and emb.dimension == 384
    assert isinstance(get_embedder("local/sentence-transformers/all-MiniLM-L6-v2"), OnnxEmbedder)
    torch_path = get_embedder("torch/all-MiniLM-L6-v2")
    assert isinstance(torch_path, SentenceTransformerEmbedder)
    assert torch_path.model_id == "torch/all-MiniLM-L6-v2" and torch_path.dimension == 384
    other = get_embedder("local/all-mpnet-base-v2")  # no ONNX copy: sentence-transformers
    assert isinstance(other, SentenceTransformerEmbedder) and other.dimension == 768
    graph = tmp_path / "mine.onnx"
    mine = get_embedder("local/mine", model_path=graph)
    assert isinstance(mine, OnnxEmbedder) and mine.model_id == "local/mine"
    custom = HashEmbedder()
    assert get_embedder(custom) is custom
    for bad in ("all-MiniLM-L6-v2", "cohere/embed", "local/", ""):
        with pytest.raises(ConfigError, match="local/all-MiniLM-L6-v2"):
            get_embedder(bad)
    with pytest.raises(InvalidTypeError):
        get_embedder(384)  # type: ignore[arg-type]


def test_import_does_not_import_torch() -> None:
    code = (
        "import sys, tiermem.embeddings as e, tiermem.working.memory\n"
        "assert e.get_embedder().dimension == 384\n"
        "heavy = ('torch', 'sentence_transformers', 'transformers', 'onnxruntime')\n"
        "bad = [m for m in heavy if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env=env)
