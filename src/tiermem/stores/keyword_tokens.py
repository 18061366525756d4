"""Keyword tokens of each user's own: how SQLite's FTS5 index keeps users' postings apart.

FTS5 finds a word's rows by walking that word's postings. With one token per word, a
user's search walked every user's postings of its words, even when it matched the
owner too: 4.8 ms for a 1k-message user in a 100k-message store, 34 ms in a 1M one (the
cost curve, docs/scaling.md). Here each word is indexed as its owner's prefix followed by
its Porter stem, so a search walks the user's own postings only and costs the same
whatever the others hold. bm25's document frequencies become the user's own too (the
row count and mean length it weighs them with stay the whole index's).

The owner's prefix is a 64-bit hash of the user id: a collision would only let one user's
rows rank beside another's in FTS5, never reach them, since every search also filters
rows by their ``user_id``. A row's tokens are recomputed to delete it from the index (it
is contentless), so :func:`document` must not change without a migration that
re-indexes every row. It depends on Python's Unicode tables only for characters that a
newer Unicode assigns (a character unassigned before is a separator, and may become a
letter): a row holding one, written under one Python and deleted under a newer one,
would leave its tokens behind, costing a result slot and never another user's row.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import lru_cache

from tiermem.stores.porter import stem

SQL_FUNCTION = "tiermem_keywords"
"""The SQL function (user_id, text) -> :func:`document` the index's triggers call."""
_WORD = re.compile(r"[^\W_]+")


@lru_cache(maxsize=10_000)
def owner_prefix(user_id: str) -> str:
    """What starts each of ``user_id``'s tokens: ``k`` and 16 hex digits."""
    return "k" + hashlib.blake2b(user_id.encode(), digest_size=8).hexdigest()


def words(text: str) -> list[str]:
    """The words of ``text`` as FTS5's ``unicode61`` finds them: case folded, accents
    removed, split at anything but a letter or digit."""
    if text.isascii():
        return _WORD.findall(text.lower())
    # decomposed first ("𝐒" is "S"), then folded, then decomposed again ("İ" folds to "i̇")
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", text).casefold())
    return _WORD.findall("".join(ch for ch in folded if not unicodedata.combining(ch)))


def document(user_id: str, text: str) -> str:
    """The tokens the index holds for one of ``user_id``'s rows."""
    prefix = owner_prefix(user_id)
    return " ".join(prefix + stem(word) for word in words(text))


def phrases(user_id: str, terms: list[str]) -> list[str]:
    """The phrases of an FTS5 query matching any of ``terms`` among ``user_id``'s rows:
    each term one phrase of its words' tokens ("foo_bar" is the words "foo" then "bar")."""
    prefix = owner_prefix(user_id)
    said = (" ".join(prefix + stem(w) for w in words(term)) for term in terms)
    return [phrase for phrase in dict.fromkeys(said) if phrase]


def match(chosen: list[str]) -> str:
    """The FTS5 query matching any of the ``chosen`` phrases."""
    return " OR ".join(f'"{phrase}"' for phrase in chosen)


def rows_of(chosen: list[str], rows: dict[str, int]) -> list[int]:
    """Each of the ``chosen`` phrases' rows at most (its rarest token's), ``rows`` giving
    each token's."""
    return [min(rows.get(token, 0) for token in phrase.split()) for phrase in chosen]


def rarest(chosen: list[str], counts: list[int], most: int) -> list[str]:
    """The rarest of the ``chosen`` phrases (``counts``: each one's rows) whose rows add
    up to at most ``most``, at least one, in their order.

    A search ranks only the newest ``most`` matches (ranking is the cost): for a big
    user a common word ("first", "project") matches thousands of rows, and the newest of
    them would push every older row out, the ones that hold the query's rare words too.
    Its weight in bm25 is small anyway: the matches are chosen by the rarer words."""
    kept: set[str] = set()
    total = 0
    for count, phrase in sorted(zip(counts, chosen, strict=True)):
        if kept and total + count > most:
            break
        kept.add(phrase)
        total += count
    return [phrase for phrase in chosen if phrase in kept]
