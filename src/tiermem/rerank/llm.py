"""A chat model as a reranker: one prompt lists the passages, the model scores each 0-10.

Slower and dearer than a cross-encoder, but it needs nothing more than the chat model
tiermem may already use for summaries. The answer is read leniently, as a small local
model writes it: a JSON list, an object holding one, ``"1: 8"`` lines, or just numbers;
a passage it gives no score scores 0. A malformed answer never raises; a model that
cannot be reached raises its provider's typed error.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from tiermem.llm.base import LLM
from tiermem.rerank.base import BaseReranker

MAX_SCORE = 10.0
MAX_CHARS = 1000
"""Characters of each passage shown to the model (the rest is cut, marked with …)."""

PROMPT = """Rate how relevant each passage is to the query, from 0 (unrelated) to 10 \
(answers it directly).

Query: {query}

Passages:
{passages}

Answer with only a JSON list of {count} numbers, the score of each passage in order, \
e.g. {example}."""

_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)
_NUMBER = r"-?\d+(?:\.\d+)?"
_PAIR = re.compile(  # "[2] 7", "2: 7", "Passage 2 - 7", "2. 7/10"
    r"(?im)^\W*?(?:passage|document|doc|item)?\s*#?"
    rf"(?:\[(\d+)\]\s*[:=\-–]?|(\d+)\s*(?:[:=)\-–]+|\.(?=\s)))\s*({_NUMBER})"
)


class LLMReranker(BaseReranker):
    """Reranks with a chat model through tiermem's :class:`~tiermem.llm.LLM` protocol.

    Scores are the model's 0-10 divided by 10, so between 0 and 1 like the other
    providers'.

    Args:
        llm: the chat model (``get_llm("openai/gpt-4o-mini")``, or the configured one).
        max_chars: characters of each passage put in the prompt.
        **options: request options for each call (``temperature``, ``max_tokens``...).
    """

    provider = "llm"

    def __init__(self, llm: LLM, *, max_chars: int = MAX_CHARS, **options: Any) -> None:
        self.llm = llm
        self.max_chars = max_chars
        self.options = options
        self.model_id = f"llm/{getattr(llm, 'model_id', type(llm).__name__)}"

    def prompt(self, query: str, documents: Sequence[str]) -> str:
        """The one prompt sent for ``documents``."""
        passages = "\n".join(
            f"[{i}] {_cut(' '.join(text.split()), self.max_chars)}"
            for i, text in enumerate(documents, 1)
        )
        example = str([7, 0, 3][: len(documents)]) if len(documents) <= 3 else "[7, 0, 3, ...]"
        return PROMPT.format(
            query=" ".join(query.split()), passages=passages, count=len(documents), example=example
        )

    def _scores(self, query: str, documents: list[str]) -> Sequence[float]:
        answer = self.llm.complete(self.prompt(query, documents), **self.options)
        return parse_scores(answer.text, len(documents))

    async def _ascores(self, query: str, documents: list[str]) -> Sequence[float]:
        answer = await self.llm.acomplete(self.prompt(query, documents), **self.options)
        return parse_scores(answer.text, len(documents))


def parse_scores(text: str, count: int) -> list[float]:
    """The ``count`` scores a model's answer gives, each 0-10 scaled to 0-1; a passage it
    gives none (or a non-number) scores 0. Never raises on the text."""
    if not isinstance(text, str):
        return [0.0] * count
    text = _THINK.sub("", text)
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    found = _from_json(text, count)
    if found is None:
        found = _from_pairs(text, count)
    if found is None:
        found = _from_numbers(text, count)
    return [_clamp(score) / MAX_SCORE for score in found]


def _from_json(text: str, count: int) -> list[float] | None:
    """Scores from the answer's JSON: a list of numbers (or of ``{index, score}``), an
    object holding such a list, or an object from passage numbers to scores."""
    data = _json(text)
    if isinstance(data, dict) and not any(_int(k) is not None for k in data):
        inner = [v for v in data.values() if isinstance(v, (list, dict))]  # {"scores": ...}
        data = inner[0] if inner else data
    if isinstance(data, dict):  # {"1": 8, "2": 3}
        pairs = [(i, _float(v)) for k, v in data.items() if (i := _int(k)) is not None]
        return _placed(pairs, count) if pairs else None
    if not isinstance(data, list):
        return None
    if data and all(isinstance(item, dict) for item in data):  # [{"index": 1, "score": 8}]
        pairs = []
        for position, item in enumerate(data, 1):
            index = next((_int(item[k]) for k in ("index", "id", "passage") if k in item), None)
            score = next((_float(item[k]) for k in ("score", "relevance") if k in item), None)
            pairs.append((position if index is None else index, score))
        return _placed(pairs, count)
    scores = [_float(item) for item in data[:count]]
    return [0.0 if s is None else s for s in scores] + [0.0] * (count - len(scores))


def _json(text: str) -> Any:
    """The whole text as JSON, else its first ``[...]`` or ``{...}`` span, else None."""
    for candidate in (text, *_spans(text)):
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return None


def _spans(text: str) -> list[str]:
    spans = []
    for open_, close in (("[", "]"), ("{", "}")):
        start, end = text.find(open_), text.rfind(close)
        if 0 <= start < end:
            spans.append(text[start : end + 1])
    return spans


def _from_pairs(text: str, count: int) -> list[float] | None:
    """Scores from ``1: 8`` / ``[2] 7`` / ``Passage 3 - 5`` lines."""
    pairs = [(int(a or b), float(s)) for a, b, s in _PAIR.findall(text)]
    if not any(1 <= i <= count for i, _ in pairs):
        return None
    return _placed(pairs, count)


def _from_numbers(text: str, count: int) -> list[float]:
    """The numbers of the answer in order (after its first ``[`` when it has one)."""
    start = text.find("[")
    numbers = [float(n) for n in re.findall(_NUMBER, text[start + 1 :] if start >= 0 else text)]
    return numbers[:count] + [0.0] * max(0, count - len(numbers))


def _placed(pairs: Sequence[tuple[int, float | None]], count: int) -> list[float]:
    """Scores by 1-based passage number (0-based when the model counted from 0)."""
    scores = [0.0] * count
    offset = 0 if any(i == 0 for i, _ in pairs) else 1
    for index, score in pairs:
        if 0 <= index - offset < count and score is not None:
            scores[index - offset] = score
    return scores


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip().strip("[]#"))
    except ValueError:
        return None


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        match = re.search(_NUMBER, str(value))
        if match is None:
            return None
        number = float(match.group())
    return number if math.isfinite(number) else None


def _clamp(score: float) -> float:
    return min(max(score, 0.0), MAX_SCORE) if math.isfinite(score) else 0.0


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
