"""The Porter stemmer, as SQLite's FTS5 ``porter`` tokenizer applies it.

SQLite's keyword index stems each word before it prefixes the word with its owner (see
:mod:`tiermem.stores.keyword_tokens`), so the stemming happens here rather than in FTS5,
whose stemmer would see the prefix as part of the word. It follows Martin Porter's own
C implementation (with its two departures from the 1980 paper: ``bli`` -> ``ble`` and
``logi`` -> ``log``), which is what FTS5 runs: tests compare the two word for word on
English words. They may differ on non-words and non-ASCII ones (FTS5 counts a word's
length in bytes, and treats a ``y`` before a doubled consonant as a consonant), which
does not matter here: both the index and the queries are stemmed by this module.

Its output is part of the stored index (a row's tokens are recomputed to delete it), so
any change to it needs a migration that re-indexes every row.
"""

from __future__ import annotations

from functools import lru_cache

MIN_LETTERS = 3
"""Shorter words are kept whole (as FTS5 does)."""
MAX_LETTERS = 64
"""Longer words are kept whole (as FTS5 does)."""
_VOWELS = frozenset("aeiou")

# Each step's suffixes grouped as Porter's C code tries them: the first suffix the word
# ends with is the only one tried, whether or not its condition then holds.
_STEP2 = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("logi", "log"),
)
_STEP3 = (
    ("icate", "ic"),
    ("ative", ""),
    ("alize", "al"),
    ("iciti", "ic"),
    ("ical", "ic"),
    ("ful", ""),
    ("ness", ""),
)
_STEP4 = (
    "al",
    "ance",
    "ence",
    "er",
    "ic",
    "able",
    "ible",
    "ant",
    "ement",
    "ment",
    "ent",
    "ion",
    "ou",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
)


def _consonant(word: str, i: int) -> bool:
    """Whether ``word[i]`` is a consonant: not a vowel, and ``y`` only after a vowel or
    first."""
    ch = word[i]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _consonant(word, i - 1)
    return True


def _measure(stem: str) -> int:
    """Porter's *m*: how many vowel-consonant sequences ``stem`` holds."""
    m, previous_vowel = 0, False
    for i in range(len(stem)):
        vowel = not _consonant(stem, i)
        if previous_vowel and not vowel:
            m += 1
        previous_vowel = vowel
    return m


def _has_vowel(stem: str) -> bool:
    return any(not _consonant(stem, i) for i in range(len(stem)))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonant(word, len(word) - 1)


def _cvc(word: str) -> bool:
    """Whether ``word`` ends consonant-vowel-consonant, the last not w, x or y."""
    n = len(word)
    return (
        n >= 3
        and _consonant(word, n - 1)
        and not _consonant(word, n - 2)
        and _consonant(word, n - 3)
        and word[-1] not in "wxy"
    )


def _ends(w: str, suffix: str) -> bool:
    """Whether ``w`` ends with ``suffix`` and holds more than it (as FTS5 requires)."""
    return len(w) > len(suffix) and w.endswith(suffix)


def _step1a(w: str) -> str:
    if _ends(w, "sses") or _ends(w, "ies"):
        return w[:-2]
    if w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def _step1b(w: str) -> str:
    if _ends(w, "eed"):
        return w[:-1] if _measure(w[:-3]) > 0 else w
    for suffix in ("ed", "ing"):
        if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
            return _step1b_tidy(w[: -len(suffix)])
    return w


def _step1b_tidy(w: str) -> str:
    """After ``ed`` or ``ing`` went: restore an ``e`` or undouble a final consonant."""
    if w.endswith(("at", "bl", "iz")):
        return w + "e"
    if _double_consonant(w) and w[-1] not in "lsz":
        return w[:-1]
    if _measure(w) == 1 and _cvc(w):
        return w + "e"
    return w


def _step1c(w: str) -> str:
    if w.endswith("y") and _has_vowel(w[:-1]):
        return w[:-1] + "i"
    return w


def _replace(w: str, rules: tuple[tuple[str, str], ...], min_measure: int) -> str:
    """The first rule whose suffix ``w`` ends with, applied if the rest's *m* exceeds
    ``min_measure``."""
    for suffix, replacement in rules:
        if w.endswith(suffix):
            stem = w[: -len(suffix)]
            return stem + replacement if _measure(stem) > min_measure else w
    return w


def _step4(w: str) -> str:
    for suffix in _STEP4:
        if w.endswith(suffix):
            stem = w[: -len(suffix)]
            if suffix == "ion" and not stem.endswith(("s", "t")):
                return w
            return stem if _measure(stem) > 1 else w
    return w


def _step5(w: str) -> str:
    if w.endswith("e"):
        m = _measure(w[:-1])
        if m > 1 or (m == 1 and not _cvc(w[:-1])):
            w = w[:-1]
    if w.endswith("ll") and _measure(w) > 1:
        w = w[:-1]
    return w


@lru_cache(maxsize=50_000)
def stem(word: str) -> str:
    """The Porter stem of a lower-cased ``word`` ("painting" -> "paint")."""
    if not MIN_LETTERS <= len(word) <= MAX_LETTERS:
        return word
    w = _step1c(_step1b(_step1a(word)))
    w = _replace(_replace(w, _STEP2, 0), _STEP3, 0)
    return _step5(_step4(w))
