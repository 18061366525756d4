"""OnnxCrossEncoder on a tiny cross-encoder graph the test writes itself.

No weights can be downloaded here, and neither the ``onnx`` package nor its helpers are
installed (onnxruntime ships none), so the graph is written as the ONNX protobuf directly
(:func:`model_bytes`, a few dozen lines of wire format). It is an embedding-bag: each
token id has a weight (``gold`` 1, ``silver`` 0.5, ``[PAD]`` 5 so that padding which is
not masked shows, every other token 0), summed over the tokens the attention mask keeps
and, when the graph takes ``token_type_ids``, over the document's tokens only (type 1),
times a fixed vector. A document holding ``gold`` scores higher, twice as high with two.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest

from tiermem.errors import ModelLoadError, ProviderResponseError
from tiermem.rerank import CircuitBreaker, OnnxCrossEncoder, get_reranker, rerank_scores

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "where", "is", "the", "gold", "silver"]
VOCAB += ["no", "metal", "here", "coins", "a", "ring", "spoon", "filler", "##s", ".", "?"]
WEIGHTS = {"[PAD]": 5.0, "gold": 1.0, "silver": 0.5}
QUERY = "Where is the gold?"
DOCS = ["no metal here", "gold gold coins", "a gold ring", "silver spoon"]
COUNTS = [0.0, 2.0, 1.0, 0.5]  # the weights of each document's tokens


# -- the ONNX protobuf, by hand (onnx.proto field numbers) --------------------------------


def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _field(number: int, payload: bytes | str | int) -> bytes:
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


FLOAT, INT32, INT64 = 1, 6, 7


def _tensor(name: str, dims: list[int], values: list[float] | list[int], dtype: int) -> bytes:
    raw = struct.pack(f"<{len(values)}{'f' if dtype == FLOAT else 'q'}", *values)
    return (
        b"".join(_field(1, d) for d in dims) + _field(2, dtype) + _field(8, name) + _field(9, raw)
    )


def _value(name: str, dtype: int, dims: list[str]) -> bytes:
    shape = b"".join(_field(1, _field(2, d)) for d in dims)  # symbolic dims
    return _field(1, name) + _field(2, _field(1, _field(1, dtype) + _field(2, shape)))


def _node(op: str, inputs: list[str], outputs: list[str], **ints: int) -> bytes:
    attributes = b"".join(
        _field(5, _field(1, k) + _field(3, v) + _field(20, 2)) for k, v in ints.items()
    )
    return (
        b"".join(_field(1, i) for i in inputs)
        + b"".join(_field(2, o) for o in outputs)
        + _field(4, op)
        + attributes
    )


def model_bytes(
    weights: list[float],
    head: list[float],
    *,
    token_types: bool = True,
    flat: bool = False,
    per_token: bool = False,
    id_type: int = INT64,
) -> bytes:
    """The graph: ``logits = sum(E[ids] * mask [* types]) @ head``, shaped (n, len(head)),
    or (n,) when ``flat``, or per token (n, seq, 1) when ``per_token``."""
    nodes = [
        _node("Gather", ["E", "input_ids"], ["emb"], axis=0),
        _node("Cast", ["attention_mask"], ["keep"], to=FLOAT),
    ]
    if token_types:
        nodes += [
            _node("Cast", ["token_type_ids"], ["doc"], to=FLOAT),
            _node("Mul", ["keep", "doc"], ["kept"]),
        ]
    kept = "kept" if token_types else "keep"
    nodes += [
        _node("Unsqueeze", [kept, "axis2"], ["kept3"]),
        _node("Mul", ["emb", "kept3"], ["masked"]),
        _node("ReduceSum", ["masked", "axis1"], ["bag"], keepdims=0),
        _node("MatMul", ["bag", "W"], ["scores" if flat else "logits"]),
    ]
    if flat:
        nodes.append(_node("ReduceSum", ["scores", "axis1"], ["logits"], keepdims=0))
    output = "masked" if per_token else "logits"
    inits = [
        _tensor("E", [len(weights), 1], weights, FLOAT),
        _tensor("W", [1, len(head)], head, FLOAT),
        _tensor("axis1", [1], [1], INT64),
        _tensor("axis2", [1], [2], INT64),
    ]
    inputs = ["input_ids", "attention_mask"] + (["token_type_ids"] if token_types else [])
    graph = (
        b"".join(_field(1, n) for n in nodes)
        + _field(2, "tiny-cross-encoder")
        + b"".join(_field(5, t) for t in inits)
        + b"".join(_field(11, _value(i, id_type, ["batch", "seq"])) for i in inputs)
        + _field(12, _value(output, FLOAT, ["batch"] if flat and not per_token else ["batch", "k"]))
    )
    opset = _field(1, "") + _field(2, 13)
    return _field(1, 8) + _field(2, "tiermem-test") + _field(7, graph) + _field(8, opset)


def make_folder(
    root: Path,
    name: str = "tiny",
    *,
    tokenizer: str = "vocab.txt",
    head: list[float] | None = None,
    **graph: bool | int,
) -> Path:
    folder = root / name
    folder.mkdir()
    weights = [WEIGHTS.get(token, 0.0) for token in VOCAB]
    (folder / "model.onnx").write_bytes(model_bytes(weights, head or [1.0], **graph))  # type: ignore[arg-type]
    if tokenizer == "vocab.txt":
        (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    else:
        (folder / "tokenizer.json").write_text(json.dumps(bert_tokenizer()), encoding="utf-8")
    return folder


def bert_tokenizer() -> dict[str, object]:
    return {
        "normalizer": {"type": "BertNormalizer", "lowercase": True, "clean_text": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "model": {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": {token: i for i, token in enumerate(VOCAB)},
        },
    }


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path)


# -- ranking -----------------------------------------------------------------------------


def test_a_document_holding_the_token_ranks_higher(folder: Path) -> None:
    reranker = OnnxCrossEncoder(folder)
    scores = reranker.rerank(QUERY, DOCS)
    assert scores == pytest.approx([sigmoid(c) for c in COUNTS], abs=1e-6)
    assert sorted(range(4), key=lambda i: -scores[i]) == [1, 2, 3, 0]
    assert all(0.0 < s < 1.0 for s in scores)
    assert reranker.model_id == "onnx/tiny"


def test_raw_logits_without_the_sigmoid(folder: Path) -> None:
    assert OnnxCrossEncoder(folder, sigmoid=False).rerank(QUERY, DOCS) == pytest.approx(COUNTS)


def test_padding_is_masked_and_batches_change_nothing(folder: Path) -> None:
    """[PAD] weighs 5: a score would jump if padding were not masked."""
    docs = [*DOCS, "filler " * 20 + "gold", "gold"]
    expected = [*COUNTS, 1.0, 1.0]
    for batch_size in (1, 2, 16):
        got = OnnxCrossEncoder(folder, sigmoid=False, batch_size=batch_size).rerank(QUERY, docs)
        assert got == pytest.approx(expected), batch_size


def test_only_the_document_segment_counts_when_the_graph_takes_token_types(folder: Path) -> None:
    """The query holds "gold" too: with token types (query 0, document 1) it is not counted."""
    reranker = OnnxCrossEncoder(folder, sigmoid=False)
    ids, types = reranker.encode_pair(QUERY, "a gold ring")
    tok = reranker.loaded.tokenizer
    q = [VOCAB.index(t) for t in ("where", "is", "the", "gold", "?")]
    d = [VOCAB.index(t) for t in ("a", "gold", "ring")]
    assert ids == [tok.cls, *q, tok.sep, *d, tok.sep]
    assert types == [0] * 7 + [1] * 4
    assert reranker.rerank("gold gold gold", ["no metal here"]) == [0.0]


def test_inputs_the_graph_does_not_declare_are_not_fed(tmp_path: Path) -> None:
    """A graph without token_type_ids (DistilBERT-style): fed two inputs; the query's
    own "gold" then counts for every document."""
    folder = make_folder(tmp_path, token_types=False)
    reranker = OnnxCrossEncoder(folder, sigmoid=False)
    assert set(reranker.loaded.inputs) == {"input_ids", "attention_mask"}
    assert reranker.rerank(QUERY, DOCS) == pytest.approx([c + 1.0 for c in COUNTS])


def test_int32_inputs_are_fed_as_int32(tmp_path: Path) -> None:
    folder = make_folder(tmp_path, id_type=INT32)
    reranker = OnnxCrossEncoder(folder, sigmoid=False)
    assert set(reranker.loaded.inputs.values()) == {np.int32}
    assert reranker.rerank(QUERY, DOCS) == pytest.approx(COUNTS)


@pytest.mark.parametrize(
    ("head", "flat", "expected"),
    [
        ([1.0], False, COUNTS),  # (n, 1)
        ([3.0], True, [3 * c for c in COUNTS]),  # (n,)
        ([-1.0, 2.0], False, [2 * c for c in COUNTS]),  # (n, 2): the last column
    ],
)
def test_output_shapes(
    tmp_path: Path, head: list[float], flat: bool, expected: list[float]
) -> None:
    folder = make_folder(tmp_path, head=head, flat=flat)
    assert OnnxCrossEncoder(folder, sigmoid=False).rerank(QUERY, DOCS) == pytest.approx(expected)


def test_an_output_per_token_is_not_a_cross_encoder(tmp_path: Path) -> None:
    folder = make_folder(tmp_path, per_token=True)
    with pytest.raises(ProviderResponseError, match="is it a cross-encoder"):
        OnnxCrossEncoder(folder).rerank(QUERY, DOCS)


def test_pairs_are_cut_to_max_length_longest_side_first(folder: Path) -> None:
    reranker = OnnxCrossEncoder(folder, max_length=12, sigmoid=False)
    long_doc = "filler " * 30 + "gold"
    ids, types = reranker.encode_pair(QUERY, long_doc)
    assert len(ids) == len(types) == 12
    assert types.count(0) == 7  # the short query (5 pieces) stays whole
    assert reranker.rerank(QUERY, [long_doc, "gold " + long_doc]) == [0.0, 1.0]
    long_query = "the " * 30
    ids, types = reranker.encode_pair(long_query, long_doc)
    assert len(ids) == 12 and types.count(0) == 2 + 5 and types.count(1) == 4 + 1


def test_vocab_txt_and_tokenizer_json_agree_and_case_follows_the_config(tmp_path: Path) -> None:
    from_vocab = OnnxCrossEncoder(make_folder(tmp_path, "a")).rerank(QUERY, DOCS)
    from_json = OnnxCrossEncoder(make_folder(tmp_path, "b", tokenizer="tokenizer.json"))
    assert from_json.rerank(QUERY, DOCS) == pytest.approx(from_vocab)
    cased = make_folder(tmp_path, "c")
    (cased / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    assert OnnxCrossEncoder(cased, sigmoid=False).rerank(QUERY, ["GOLD", "gold"]) == [0.0, 1.0]


def test_an_onnx_file_and_an_optimum_layout_load(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    assert OnnxCrossEncoder(folder / "model.onnx").rerank(QUERY, DOCS[1:2]) == pytest.approx(
        [sigmoid(2.0)]
    )
    (folder / "onnx").mkdir()
    (folder / "model.onnx").rename(folder / "onnx" / "model.onnx")
    assert OnnxCrossEncoder(folder).rerank(QUERY, DOCS[1:2]) == pytest.approx([sigmoid(2.0)])


async def test_async_twin_and_get_reranker(folder: Path) -> None:
    reranker = get_reranker(f"onnx:{folder}", api_key="ignored", timeout=3)
    assert isinstance(reranker, OnnxCrossEncoder)
    assert await reranker.arerank(QUERY, DOCS) == pytest.approx(reranker.rerank(QUERY, DOCS))
    assert await reranker.arerank(QUERY, []) == []


# -- what cannot be loaded -------------------------------------------------------------------


def test_missing_and_foreign_files_are_model_load_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        OnnxCrossEncoder(tmp_path / "nowhere").preload()
    folder = make_folder(tmp_path)
    (folder / "vocab.txt").unlink()
    with pytest.raises(ModelLoadError, match=r"no tokenizer\.json or vocab\.txt"):
        OnnxCrossEncoder(folder).preload()
    sentencepiece = {"model": {"type": "Unigram", "vocab": []}, "normalizer": None}
    (folder / "tokenizer.json").write_text(json.dumps(sentencepiece))
    with pytest.raises(ModelLoadError, match="WordPiece"):
        OnnxCrossEncoder(folder, max_length=100).preload()
    broken = make_folder(tmp_path, "broken")
    (broken / "model.onnx").write_bytes(b"not a graph")
    with pytest.raises(ModelLoadError, match="cannot load cross-encoder"):
        OnnxCrossEncoder(broken).preload()


def test_rerank_scores_gives_none_for_a_model_that_cannot_load(tmp_path: Path) -> None:
    reranker = OnnxCrossEncoder(tmp_path / "nowhere")
    assert rerank_scores(reranker, QUERY, DOCS, breaker=CircuitBreaker()) is None
    assert rerank_scores(make_reranker(tmp_path), QUERY, DOCS) == pytest.approx(
        [sigmoid(c) for c in COUNTS], abs=1e-6
    )


def make_reranker(root: Path) -> OnnxCrossEncoder:
    return OnnxCrossEncoder(make_folder(root, "ok"))
