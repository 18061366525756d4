"""A cross-encoder exported to ONNX, run by onnxruntime on the CPU (no torch, no download).

The folder holds ``model.onnx`` (or ``onnx/model.onnx``, as Hugging Face Hub repositories
hold it) and the BERT WordPiece tokenizer: ``tokenizer.json``, else ``vocab.txt``
(lower-cased unless ``tokenizer_config.json`` says ``do_lower_case: false``), read by
:mod:`tiermem.embeddings.wordpiece` as the ONNX embedder reads its own. That covers the
ms-marco MiniLM / TinyBERT cross-encoders and other BERT-style ones; a SentencePiece
tokenizer (the XLM-R based bge or jina rerankers) is refused with a
:class:`~tiermem.errors.ModelLoadError`: serve those with text-embeddings-inference and
use ``tei:``.

Each pair is encoded as ``[CLS] query [SEP] document [SEP]`` (token types 0 then 1),
cut to ``max_length`` tokens by taking from the longer side first (the Hugging Face
``longest_first`` rule), batched by length (:func:`~tiermem.embeddings.onnx.forward_passes`)
and fed as ``input_ids`` / ``attention_mask`` / ``token_type_ids``, only those the graph
declares. The graph's output is a logit per pair, shaped ``(n,)``, ``(n, 1)`` or ``(n, 2)``
(the last column is taken); the score is its sigmoid (``sigmoid=False``: the raw logit).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tiermem.embeddings.onnx import LoadedOnce, cpu_session, forward_passes, onnxruntime
from tiermem.embeddings.wordpiece import WordPieceTokenizer
from tiermem.errors import InvalidSizeError, ModelLoadError, ProviderResponseError
from tiermem.rerank.base import BaseReranker

MAX_LENGTH = 512
"""Tokens of one pair (BERT's window; ms-marco cross-encoders are trained at 512)."""
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class CrossEncoderModel:
    """A loaded session, its tokenizer, and the inputs its graph declares (with dtypes)."""

    session: Any
    tokenizer: WordPieceTokenizer
    inputs: dict[str, type[np.integer[Any]]]
    output: str


def resolve_files(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """``(graph, tokenizer file)`` for a folder or an ``.onnx`` file; ModelLoadError
    says what is missing."""
    given = Path(path).expanduser()
    if given.is_dir():
        graph = next(
            (g for g in (given / "model.onnx", given / "onnx" / "model.onnx") if g.is_file()),
            given / "model.onnx",
        )
        folder = given
    else:
        graph, folder = given, given.parent
    if not graph.is_file():
        raise ModelLoadError(
            f"cross-encoder graph {graph} does not exist; pass a folder holding model.onnx "
            "and tokenizer.json (or vocab.txt), or the .onnx file itself"
        )
    for name in ("tokenizer.json", "vocab.txt"):
        for place in dict.fromkeys((graph.parent, folder)):
            if (place / name).is_file():
                return graph, place / name
    raise ModelLoadError(
        f"no tokenizer.json or vocab.txt beside {graph}; copy the model's tokenizer files "
        "into the folder"
    )


def load_tokenizer(file: Path, max_length: int) -> WordPieceTokenizer:
    """The WordPiece tokenizer of a ``tokenizer.json`` or a ``vocab.txt``."""
    if file.name != "vocab.txt":
        return WordPieceTokenizer.from_file(file, max_length)
    tokens = file.read_text(encoding="utf-8").split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    vocab = {token: i for i, token in enumerate(tokens)}
    lowercase = True
    config = file.parent / "tokenizer_config.json"
    if config.is_file():
        settings = json.loads(config.read_text(encoding="utf-8"))
        lowercase = bool(settings.get("do_lower_case", True))
    return WordPieceTokenizer(vocab, lowercase=lowercase, max_length=max_length)


def _load(
    graph: Path, tokenizer_file: Path, max_length: int, threads: int | None
) -> CrossEncoderModel:
    ort = onnxruntime("the ONNX reranker needs")
    try:
        session = cpu_session(ort, graph, threads)
        tokenizer = load_tokenizer(tokenizer_file, max_length)
    except Exception as exc:  # a corrupt graph, a SentencePiece tokenizer, a vocab without [CLS]
        raise ModelLoadError(
            f"cannot load cross-encoder {graph} with {tokenizer_file}: "
            f"{type(exc).__name__}: {exc} (a BERT-style graph and WordPiece tokenizer are needed)"
        ) from exc
    declared = {i.name: i.type for i in session.get_inputs()}
    if "input_ids" not in declared:
        raise ModelLoadError(
            f"cross-encoder {graph} takes {sorted(declared)}, not input_ids: not a BERT-style graph"
        )
    inputs = {
        name: np.int32 if declared[name] == "tensor(int32)" else np.int64
        for name in INPUTS
        if name in declared
    }
    outputs = [o.name for o in session.get_outputs()]
    output = "logits" if "logits" in outputs else outputs[0]
    return CrossEncoderModel(session, tokenizer, inputs, output)


load_cross_encoder = LoadedOnce(_load)
"""Load (once per process) the session for ``graph`` and its tokenizer."""


class OnnxCrossEncoder(BaseReranker):
    """A local cross-encoder (``onnx:/path/to/folder``) on onnxruntime.

    Args:
        path: a folder with ``model.onnx`` and ``tokenizer.json`` or ``vocab.txt``, or
            the ``.onnx`` file with them beside it.
        max_length: tokens of one ``[CLS] query [SEP] document [SEP]`` pair.
        batch_size: pairs per forward pass.
        sigmoid: scores are the sigmoid of the logit, in (0, 1) (default); False gives
            the raw logit.
        threads: onnxruntime intra-op threads (default: its own choice, the cores).
    """

    provider = "onnx"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_length: int = MAX_LENGTH,
        batch_size: int = 16,
        sigmoid: bool = True,
        threads: int | None = None,
    ) -> None:
        if max_length < 4:
            raise InvalidSizeError("max_length", f"{max_length} must be >= 4", "e.g. 512")
        if batch_size < 1:
            raise InvalidSizeError("batch_size", f"{batch_size} must be >= 1", "e.g. 16")
        self.path = Path(path).expanduser()
        self.max_length = max_length
        self.batch_size = batch_size
        self.sigmoid = sigmoid
        self.threads = threads
        self.model_id = f"onnx/{self.path.name or self.path}"
        self._model: CrossEncoderModel | None = None

    @property
    def loaded(self) -> CrossEncoderModel:
        """The shared session and tokenizer (loaded on first access)."""
        if self._model is None:
            graph, tokenizer = resolve_files(self.path)
            self._model = load_cross_encoder(graph, tokenizer, self.max_length, self.threads)
        return self._model

    def preload(self) -> None:
        """Load the model now rather than at the first rerank."""
        _ = self.loaded

    def encode_pair(self, query: str, document: str) -> tuple[list[int], list[int]]:
        """``(ids, token types)`` of ``[CLS] query [SEP] document [SEP]``, cut to fit."""
        tokenizer = self.loaded.tokenizer
        q = tokenizer.encode(query)[1:-1]
        d = tokenizer.encode(document)[1:-1]
        q, d = _longest_first(q, d, self.max_length - 3)
        ids = [tokenizer.cls, *q, tokenizer.sep, *d, tokenizer.sep]
        return ids, [0] * (len(q) + 2) + [1] * (len(d) + 1)

    def _scores(self, query: str, documents: list[str]) -> Sequence[float]:
        model = self.loaded
        pairs = [self.encode_pair(query, document) for document in documents]
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]))
        logits = np.empty(len(pairs), dtype=np.float64)
        for start, end in forward_passes([len(pairs[i][0]) for i in order], self.batch_size):
            rows = order[start:end]
            logits[rows] = self._run(model, [pairs[i] for i in rows])
        scores = 1.0 / (1.0 + np.exp(-logits)) if self.sigmoid else logits
        return [float(s) for s in scores]

    def _run(
        self, model: CrossEncoderModel, pairs: list[tuple[list[int], list[int]]]
    ) -> np.ndarray:
        """One forward pass over pairs of similar length (padded to the longest)."""
        width = max(len(ids) for ids, _ in pairs)
        ids = np.zeros((len(pairs), width), dtype=np.int64)
        types = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for row, (pair_ids, pair_types) in enumerate(pairs):
            ids[row, : len(pair_ids)] = pair_ids
            types[row, : len(pair_types)] = pair_types
            mask[row, : len(pair_ids)] = 1
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feeds = {name: arrays[name].astype(dtype) for name, dtype in model.inputs.items()}
        out = np.asarray(model.session.run([model.output], feeds)[0], dtype=np.float64)
        if out.ndim == 2 and out.shape[0] == len(pairs) and out.shape[1] in (1, 2):
            return out[:, -1]
        if out.shape == (len(pairs),):
            return out
        raise ProviderResponseError(
            f"{self.model_id}: the graph's output {model.output!r} has shape {out.shape} for "
            f"{len(pairs)} pairs, not (n,), (n, 1) or (n, 2): is it a cross-encoder?"
        )


def _longest_first(q: list[int], d: list[int], room: int) -> tuple[list[int], list[int]]:
    """Cut a token from the longer of ``q`` and ``d`` (the document on a tie) until both
    fit in ``room``: the shorter stays whole when it takes at most half."""
    if len(q) + len(d) <= room:
        return q, d
    if min(len(q), len(d)) * 2 <= room:
        keep_q = len(q) if len(q) <= len(d) else room - len(d)
    else:
        keep_q = (room + 1) // 2
    return q[:keep_q], d[: room - keep_q]
