"""Standing instructions and preferences a user states once ("Always format code with
syntax highlighting when I ask about implementation details", "I prefer PostgreSQL"),
found without a model so they can reach every context where they apply.

:func:`standing` finds the sentences of a user's message that state one: an instruction
for the future in the imperative ("Always include...", "Never use...", "From now on,
answer...", "Whenever I ask about dates, use..."), or what the user prefers ("I prefer",
"I'd rather", "my preference"). A sentence that only opens like one ("Always happy to
help!", "Never saw this coming.", "Whenever you need help, ...") is not one; a question
that opens so asks rather than instructs, while a preference stated in a question ("I
prefer Word, can you help?") is kept.
"""

from __future__ import annotations

import re

from tiermem.work.passages import Span

__all__ = ["standing"]

_OPENS = re.compile(
    r"(?:please\s+|and\s+|also\s+)?(?:always|never|from now on,?|going forward,?"
    r"|in (?:the )?future,?|make sure (?:to|you)|remember to|don'?t ever|do not ever)"
    r"\s+([\w']+)",
    re.IGNORECASE,
)
_WHENEVER = re.compile(
    r"(?:whenever|every time|each time) I [^,]{3,120},\s*(?:please\s+)?([\w']+)",
    re.IGNORECASE,
)
_PREFERS = re.compile(
    r"\bI(?:'d| would| really| usually| strongly| generally| always)?\s+"
    r"(?:prefer|rather|like it when|want you to always)\b|\bmy preference\b|\bI'd rather\b",
    re.IGNORECASE,
)
_NOT_VERBS = frozenset(
    [
        "a",
        "an",
        "the",
        "my",
        "your",
        "our",
        "his",
        "her",
        "their",
        "its",
        "i",
        "we",
        "you",
        "he",
        "she",
        "they",
        "it",
        "me",
        "us",
        "them",
        "this",
        "that",
        "up",
        "down",
        "here",
        "there",
        "so",
        "too",
        "very",
        "just",
        "been",
        "be",
        "being",
        "was",
        "were",
        "is",
        "am",
        "are",
        "had",
        "has",
        "have",
        "did",
        "do",
        "does",
        "saw",
        "got",
        "went",
        "came",
        "made",
        "said",
        "felt",
        "thought",
        "knew",
        "fun",
        "nice",
        "good",
        "great",
        "glad",
        "happy",
        "ready",
        "true",
        "welcome",
        "sure",
        "on",
        "in",
        "at",
        "with",
        "for",
        "about",
        "like",
        "to",
        "of",
        "from",
        "and",
        "or",
        "but",
    ]
)
"""Words after "always" / "never" that show the sentence is no instruction."""
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+[\"')\]]*|$)")
MIN_CHARS = 20
MAX_CHARS = 600


def standing(text: str) -> list[Span]:
    """Spans of ``text``'s sentences that state a standing instruction or preference."""
    found: list[Span] = []
    for match in _SENTENCE.finditer(text):
        start, end = match.span()
        while start < end and text[start].isspace():
            start += 1
        sentence = text[start:end].rstrip()
        if MIN_CHARS <= len(sentence) <= MAX_CHARS and _states(sentence):
            found.append((start, start + len(sentence)))
    return found


def _states(sentence: str) -> bool:
    """Whether ``sentence`` instructs for the future or states a preference."""
    if _PREFERS.search(sentence):
        return True
    if sentence.endswith(("?", "!")):
        return False
    opens = _OPENS.match(sentence) or _WHENEVER.match(sentence)
    return opens is not None and _imperative(opens.group(1))


def _imperative(word: str) -> bool:
    """Whether ``word`` can open an imperative clause: a verb's plain form, as far as
    a word list tells (no pronoun, article, auxiliary, past or -ing form)."""
    word = word.lower()
    return word not in _NOT_VERBS and not word.endswith(("ing", "ed", "'s"))
