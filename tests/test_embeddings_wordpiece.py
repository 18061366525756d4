"""The default embedder's tokenizer gives the ids of the Hugging Face fast tokenizer."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tiermem.embeddings.onnx import DATA
from tiermem.embeddings.wordpiece import UnsupportedTokenizer, WordPieceTokenizer

TOKENIZER = DATA / "tokenizer.json"
TEXTS = [
    "The cat sits on the mat.",
    "Hey Mel! I painted a sunrise last week, wanna see? :)",
    "It's $5+3=8 <tag> a^b `x` |y| ~z and snake_case, e-mail@host.org",
    "“Quotes” — dash – ‘s’ … ¿qué? ¡sí! Ich habe meinen Schlüssel verloren.",
    "ΟΔΟΣ Σ İstanbul café naïve Ångström Ａｂｃ\u3000fullwidth ﬁ ½ ²",
    "中文字符测试 日本語 한국어 \U0002b820\U0002b920",
    "emoji 😀👍🏽 family 👨\u200d👩\u200d👧 zero\u200bwidth soft\u00adhyphen",
    "tab\tnew\nline\r\x00nul\ufffd\x7fdel\x1cfs\x0bvt\x85nel\u2028ls\u00a0nbsp",
    "x" * 150 + " " + "antidisestablishmentarianism",
    "The deploy failed because DATABASE_URL was missing in staging. " * 40,
    "",
    "   ",
]


@pytest.fixture(scope="module")
def ours() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_file(TOKENIZER, max_length=256)


def test_the_same_ids_as_the_fast_tokenizer(ours: WordPieceTokenizer) -> None:
    tokenizers = pytest.importorskip("tokenizers")  # in the [torch] extra, not the default
    fast = tokenizers.Tokenizer.from_file(str(TOKENIZER))
    fast.enable_truncation(256)
    fast.no_padding()
    rng = random.Random(7)
    # Blocks whose characters kept their categories across Unicode versions (the fast
    # tokenizer's tables are older than Python's: marks and punctuation added since differ).
    blocks = [(0x20, 0x24F), (0x370, 0x52F), (0x2000, 0x206F), (0x3000, 0x303F), (0x4E00, 0x9FFF)]
    noise = ["".join(chr(rng.randint(*rng.choice(blocks))) for _ in range(30)) for _ in range(300)]
    texts = TEXTS + noise
    expected = [e.ids for e in fast.encode_batch(texts)]
    assert ours.encode_batch(texts) == expected
    assert ours.encode_batch(texts) == expected  # from the caches, the same again


def test_ids_are_framed_and_cut_at_max_length(ours: WordPieceTokenizer) -> None:
    vocab = json.loads(TOKENIZER.read_text())["model"]["vocab"]
    ids = ours.encode(TEXTS[-3])
    assert len(ids) == 256 and ids[0] == vocab["[CLS]"] and ids[-1] == vocab["[SEP]"]
    assert ours.encode("") == [vocab["[CLS]"], vocab["[SEP]"]]
    assert ours.encode("x" * 150) == [vocab["[CLS]"], vocab["[UNK]"], vocab["[SEP]"]]


def test_a_tokenizer_that_is_not_bert_wordpiece_is_refused(tmp_path: Path) -> None:
    spec = json.loads(TOKENIZER.read_text())
    spec["model"]["type"] = "Unigram"
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(UnsupportedTokenizer, match="not a BERT WordPiece tokenizer"):
        WordPieceTokenizer.from_file(path)
