"""The default embedder: the packaged all-MiniLM-L6-v2 graph on onnxruntime, no torch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import embedders
from tiermem.embeddings import OnnxEmbedder, get_embedder
from tiermem.embeddings.onnx import DATA, packaged_files
from tiermem.errors import ModelLoadError

pytestmark = pytest.mark.slow
SRC = str(Path(__file__).parents[1] / "src")
TEXTS = [
    "The cat sits on the mat.",
    "A kitten is resting on a rug.",
    "Quarterly revenue grew by twelve percent.",
    "How do I reset my password?",
    "Ich habe meinen Schlüssel verloren.",
    "The deploy failed because DATABASE_URL was missing in staging. " * 40,  # > 256 tokens
]


@pytest.fixture(scope="session")
def model() -> OnnxEmbedder:
    return embedders.minilm()


def test_vectors_are_close_to_sentence_transformers(model: OnnxEmbedder) -> None:
    """int8 weights: not identical, but every vector within cosine 0.99 of the fp32 model's
    (docs/embeddings.md: LoCoMo recall within 0.005 of it at every budget)."""
    expected = embedders.torch_minilm().embed(TEXTS)
    got = model.embed(TEXTS)
    assert got.shape == (len(TEXTS), 384) and got.dtype == np.float32
    cosine = np.sum(got * expected, axis=1)
    assert cosine.min() > 0.99 and cosine.mean() > 0.995


def test_long_texts_are_cut_at_the_models_window(model: OnnxEmbedder) -> None:
    """Truncated at 256 tokens like sentence-transformers, not at tokenizer.json's 128."""
    long = TEXTS[-1]
    assert len(model.loaded.tokenizer.encode(long)) == 256
    expected = embedders.torch_minilm().embed([long])[0]
    assert float(model.embed([long])[0] @ expected) > 0.99


def test_batches_and_single_texts_get_the_same_vectors(model: OnnxEmbedder) -> None:
    """Sorting by length and padding per forward pass change nothing."""
    fresh = OnnxEmbedder(cache_size=0, encode_batch_size=2)
    batch = fresh.embed(TEXTS)
    singles = np.vstack([fresh.embed([text]) for text in TEXTS])
    assert np.allclose(batch, singles, atol=1e-5)
    assert np.allclose(batch, model.embed(TEXTS), atol=1e-5)


def test_one_text_runs_on_a_session_of_one_thread() -> None:
    """A query (one text) runs on a session of ``query_threads`` (1), a batch on the
    session of ``threads``; with ``query_threads=None`` both share one."""
    fresh = OnnxEmbedder(cache_size=0)
    fresh.embed(["one query"])
    assert list(fresh._models) == [1]
    fresh.embed(TEXTS[:3])
    assert list(fresh._models) == [1, None]
    one = fresh._models[1].session.get_session_options().intra_op_num_threads
    assert one == 1 and fresh._models[1] is not fresh._models[None]
    shared = OnnxEmbedder(cache_size=0, threads=2, query_threads=None)
    shared.embed(["one query"])
    shared.embed(TEXTS[:3])
    assert list(shared._models) == [2]


def test_meaning_is_captured(model: OnnxEmbedder) -> None:
    cat, kitten, revenue = model.embed(TEXTS[:3])
    assert cat @ kitten > 0.5 > cat @ revenue


def test_threads_and_coroutines_get_the_same_vectors() -> None:
    embedders.assert_threads_and_coroutines_agree(lambda: OnnxEmbedder(cache_size=0))


def test_model_path_loads_a_copy_and_reads_its_dimension(
    tmp_path: Path, model: OnnxEmbedder
) -> None:
    graph, tokenizer = packaged_files()
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(graph, folder / "model.onnx")
    shutil.copy(tokenizer, folder / "tokenizer.json")
    mine = get_embedder("local/my-minilm", model_path=folder)
    assert isinstance(mine, OnnxEmbedder)
    assert mine.model_id == "local/my-minilm" and mine.dimension == 384
    assert float(mine.embed(["hello"])[0] @ model.embed(["hello"])[0]) > 0.9999


def test_missing_or_broken_files_raise_model_load_error(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        OnnxEmbedder("mine", model_path=tmp_path / "nothing.onnx").embed(["hello"])
    broken = tmp_path / "broken" / "model.onnx"
    broken.parent.mkdir()
    broken.write_bytes(b"not a graph")
    shutil.copy(DATA / "tokenizer.json", broken.parent / "tokenizer.json")
    embedder = OnnxEmbedder("mine", model_path=broken.parent)
    with pytest.raises(ModelLoadError, match="cannot load embedding model"):
        embedder.embed(["hello"])
    with pytest.raises(ModelLoadError):  # a failure is not cached as a success
        _ = embedder.dimension
    with pytest.raises(ModelLoadError, match="model_path="):
        OnnxEmbedder("another-model").embed(["hello"])  # nothing packaged for it


def test_the_default_embeds_without_torch_or_network(tmp_path: Path) -> None:
    """A fresh process embeds with the default and never imports torch; the hub is
    unreachable (and never asked); onnxruntime's telemetry stays off (its device id and
    event cache under ~/.cache/Microsoft are never written)."""
    code = (
        "import sys\n"
        "from tiermem.embeddings import get_embedder\n"
        "print(get_embedder().embed(['hi']).shape)\n"
        "heavy = ('torch', 'sentence_transformers', 'transformers', 'huggingface_hub')\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    dropped = ("HF_HUB_OFFLINE", "ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(PYTHONPATH=SRC, HF_ENDPOINT="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9")
    env.update(HOME=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["(1, 384)", "[]"]
    assert [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_process_that_chose_telemetry_keeps_its_choice(tmp_path: Path) -> None:
    """``ORT_DISABLE_TELEMETRY`` set by the process is left as it is (tiermem only sets
    it when unset)."""
    code = (
        "import os\n"
        "from tiermem.embeddings import get_embedder\n"
        "get_embedder().embed(['hi'])\n"
        "print(os.environ['ORT_DISABLE_TELEMETRY'])\n"
    )
    env = dict(os.environ, PYTHONPATH=SRC, HOME=str(tmp_path), ORT_DISABLE_TELEMETRY="0")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"


def test_forward_passes_cover_every_row_and_cut_padding() -> None:
    """Passes are consecutive, at most max_rows each, and never compute more padded tokens
    than fixed groups do; texts of one length share passes."""
    from tiermem.embeddings.onnx import forward_passes

    def padded(lengths: list[int], passes: list[tuple[int, int]]) -> int:
        return sum((end - start) * lengths[end - 1] for start, end in passes)

    lengths = sorted([5, 5, 6, 7, 9, 12, 12, 13, 30, 31, 64, 200] * 5)
    passes = forward_passes(lengths, 8)
    assert [s for s, _ in passes] == [0] + [e for _, e in passes[:-1]]
    assert passes[-1][1] == len(lengths) and all(0 < e - s <= 8 for s, e in passes)
    fixed = [(i, min(i + 8, len(lengths))) for i in range(0, len(lengths), 8)]
    assert padded(lengths, passes) < padded(lengths, fixed)
    assert len(forward_passes([7] * 20, 8)) == 3  # no padding to save: as few passes as fit
    assert forward_passes([3], 32) == [(0, 1)] and forward_passes([], 32) == []
