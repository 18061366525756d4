"""BERT's WordPiece tokenizer, read from a ``tokenizer.json``, in plain Python.

The default embedder needs only this from a tokenizer library, and the ``tokenizers``
package would bring huggingface_hub and hf_xet (about 37 MB of the default install, and
0.1-0.2 s of a fresh process's first context, docs/benchmarks.md). The steps are those of
the Hugging Face ``BertNormalizer``, ``BertPreTokenizer``, ``WordPiece`` model and
``[CLS] … [SEP]`` template, and give the same ids (tests/test_embeddings_wordpiece.py
compares them with the fast tokenizer's; they also matched on every LoCoMo turn and
question, docs/embeddings.md).
"""

from __future__ import annotations

import json
import re
import string
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Any

_ASCII_PUNCTUATION = frozenset(string.punctuation)
# What the fast tokenizer splits words on: tab, newline, carriage return and the Unicode
# space separators (other whitespace, such as \x0b or \x85, is a control it deletes).
_ASCII_WORD = re.compile("[A-Za-z0-9]+|[^A-Za-z0-9]")  # in printable ASCII, the rest is punctuation
_SPACE = re.compile("[\t\n\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),  # as the fast tokenizer has it (BERT says 0x2B820)
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


class UnsupportedTokenizer(ValueError):
    """A ``tokenizer.json`` that is not BERT's WordPiece."""


class WordPieceTokenizer:
    """Text to token ids as a BERT ``tokenizer.json`` says, ``[CLS]`` and ``[SEP]`` around,
    at most ``max_length`` ids (longer texts are cut, as the fast tokenizer cuts them)."""

    def __init__(
        self,
        vocab: dict[str, int],
        *,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        clean_text: bool = True,
        chinese_chars: bool = True,
        unk_token: str = "[UNK]",
        prefix: str = "##",
        max_word_chars: int = 100,
        max_length: int = 512,
    ) -> None:
        self.vocab = vocab
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.clean_text = clean_text
        self.chinese_chars = chinese_chars
        self.unk = vocab[unk_token]
        self.prefix = prefix
        self.max_word_chars = max_word_chars
        self.max_length = max_length
        self.cls, self.sep = vocab["[CLS]"], vocab["[SEP]"]
        self._word = lru_cache(maxsize=65536)(self._word_ids)
        self._chunk = lru_cache(maxsize=65536)(self._chunk_ids)

    @classmethod
    def from_file(cls, path: str | Path, max_length: int = 512) -> WordPieceTokenizer:
        """The tokenizer ``path`` describes; UnsupportedTokenizer when it is not BERT's."""
        spec: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
        model = spec.get("model") or {}
        normalizer = spec.get("normalizer") or {}
        pre = spec.get("pre_tokenizer") or {}
        if (
            model.get("type") != "WordPiece"
            or normalizer.get("type") != "BertNormalizer"
            or pre.get("type") != "BertPreTokenizer"
        ):
            raise UnsupportedTokenizer(
                f"{path} is not a BERT WordPiece tokenizer (model {model.get('type')}, "
                f"normalizer {normalizer.get('type')}, pre-tokenizer {pre.get('type')})"
            )
        return cls(
            model["vocab"],
            lowercase=normalizer.get("lowercase", True),
            strip_accents=normalizer.get("strip_accents"),
            clean_text=normalizer.get("clean_text", True),
            chinese_chars=normalizer.get("handle_chinese_chars", True),
            unk_token=model.get("unk_token", "[UNK]"),
            prefix=model.get("continuing_subword_prefix", "##"),
            max_word_chars=model.get("max_input_chars_per_word", 100),
            max_length=max_length,
        )

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``: ``[CLS]``, its word pieces (cut to fit), ``[SEP]``."""
        ids = [self.cls]
        room = self.max_length - 1
        for chunk in _SPACE.split(text):
            if chunk:
                ids += self._chunk(chunk)
                if len(ids) >= room:
                    del ids[room:]
                    break
        ids.append(self.sep)
        return ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def _chunk_ids(self, chunk: str) -> tuple[int, ...]:
        """The ids of a whitespace-free piece of text (cached: chat repeats its words)."""
        if chunk.isascii() and chunk.isprintable():  # the common case, in C
            words = _ASCII_WORD.findall(chunk.lower() if self.lowercase else chunk)
        else:
            words = self._words(self._normalize(chunk))
        ids: list[int] = []
        for word in words:
            ids += self._word(word)
        return tuple(ids)

    def _normalize(self, text: str) -> str:
        if self.clean_text:
            text = "".join(
                " " if c.isspace() else c
                for c in text
                if c in "\t\n\r" or not (c == "\0" or c == "\ufffd" or _is_control(c))
            )
        if self.chinese_chars:
            text = "".join(f" {c} " if _is_cjk(c) else c for c in text)
        if self.strip_accents:
            text = "".join(
                c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn"
            )
        # Character by character, as the fast tokenizer lowers (no final-sigma rule).
        return "".join(c.lower() for c in text) if self.lowercase else text

    @staticmethod
    def _words(text: str) -> list[str]:
        """Split on whitespace, and around every punctuation character."""
        words: list[str] = []
        for chunk in text.split():
            start = 0
            for i, c in enumerate(chunk):
                if _is_punctuation(c):
                    if start < i:
                        words.append(chunk[start:i])
                    words.append(c)
                    start = i + 1
            if start < len(chunk):
                words.append(chunk[start:])
        return words

    def _word_ids(self, word: str) -> tuple[int, ...]:
        """Greedy longest-match-first pieces of ``word``; ``[UNK]`` when one is missing."""
        if len(word) > self.max_word_chars:
            return (self.unk,)
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    ids.append(found)
                    break
                end -= 1
            else:
                return (self.unk,)
            start = end
        return tuple(ids)


def _is_control(c: str) -> bool:
    """Control, format, private-use or surrogate (the fast tokenizer keeps unassigned)."""
    return unicodedata.category(c) in _CONTROL


_CONTROL = frozenset({"Cc", "Cf", "Co", "Cs"})


def _is_cjk(c: str) -> bool:
    code = ord(c)
    return any(low <= code <= high for low, high in _CJK)


def _is_punctuation(c: str) -> bool:
    return c in _ASCII_PUNCTUATION or unicodedata.category(c).startswith("P")
