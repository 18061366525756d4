"""Standing instructions and preferences a user states once ("Always format code with
syntax highlighting when I ask about implementation details", "I prefer PostgreSQL"),
found without a model so they can reach every context where they apply.

:func:`standing` finds the sentences of a user's message that state one: a sentence that
opens with an instruction for the future ("always", "never", "from now on", "whenever",
"make sure to", ...) or says what the user prefers ("I prefer", "I'd rather", "my
preference"). A question that opens so is left out ("Always?"): it asks, it does not
instruct; a preference stated in a question ("I prefer Word, can you help?") is kept.
"""

from __future__ import annotations

import re

from tiermem.passages import Span

__all__ = ["standing"]

_OPENS = re.compile(
    r"(?:please\s+|and\s+|also\s+)?(?:always|never|from now on|going forward|in (?:the )?future"
    r"|whenever|every time|each time|make sure (?:to|you)|remember to|don'?t ever|do not ever)\b",
    re.IGNORECASE,
)
_PREFERS = re.compile(
    r"\bI(?:'d| would| really| usually| strongly| generally| always)?\s+"
    r"(?:prefer|rather|like it when|want you to always)\b|\bmy preference\b|\bI'd rather\b",
    re.IGNORECASE,
)
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
        if not MIN_CHARS <= len(sentence) <= MAX_CHARS:
            continue
        if _PREFERS.search(sentence) or (_OPENS.match(sentence) and not sentence.endswith("?")):
            found.append((start, start + len(sentence)))
    return found
