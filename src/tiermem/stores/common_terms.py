"""A big user's common words on PostgreSQL: which query terms choose the keyword matches.

A 100k-message user's keyword search ranks the newest ``KEYWORD_SCAN`` matches of the
query's words, found newest first through ``(user_id, created_at)``; with a word that is
in a fifth of the user's rows (a speaker's name, "like", "make") the matches are tens of
thousands and the scan reads about 25,000 rows to rank 5,000 (docs/notes/2026-12-02-scale.md,
"Where the growth comes from"). Such a word says little about which of the user's rows answer
(its inverse document frequency for the user is low: BM25, as SQLite ranks, gives it
little weight), so the matches are chosen by the query's other words, which are rarer,
and every word still ranks them: a row that holds the rare word and the common one comes
first. A query whose words are all common chooses by all of them, as before.

A user's common words are the lexemes in more than ``COMMON_SHARE`` of their newest
``COMMON_SAMPLE`` rows (one statement, cached ``COMMON_TTL`` seconds a user, like the
row count); a query term's lexemes come from the server's ``english`` configuration (the
one the ``tsv`` column is made with), cached per process.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from tiermem.stores.plans import Plan
from tiermem.stores.user_cache import UserCache, bound

COMMON_SAMPLE = 2_000
"""The user's newest rows whose words are counted."""
COMMON_SHARE = 0.05
"""A lexeme in more than this share of the sample is common for the user. Measured on
200 LoCoMo questions asked of a 100k-message user (docs/notes/2026-12-02-scale.md): at 0.05 the
search read 36% of the buffers and its top 10 held 26% more evidence turns; at 0.1, 61%
and 20% more; at 0.2 no fewer buffers."""
COMMON_TTL = 300.0
"""Seconds a user's common words are trusted (they change slowly)."""
USERS_MAX = 1_000
"""Users whose common words a process keeps (only big users are asked for)."""
LEXEMES_MAX = 50_000
"""Query terms whose lexemes a process keeps."""


class CommonTerms:
    """Per-user common lexemes and per-term lexemes of one ``memories_{dim}`` table."""

    def __init__(self, table: str) -> None:
        self.table = table
        self._users: UserCache[frozenset[str]] = UserCache(COMMON_TTL, USERS_MAX)
        self._lexemes: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def choosing(self, user_id: str, terms: list[str]) -> Plan[list[str]]:
        """The terms that choose ``user_id``'s matches: those with a lexeme that is not
        common for the user; all of ``terms`` when none is left (or all are rare)."""
        common = yield from self._common_plan(user_id)
        lexemes = yield from self._lexemes_plan(terms)
        rare = [t for t in terms if any(x not in common for x in lexemes.get(t, ()))]
        return rare or terms

    def forget(self, user_id: str) -> None:
        """Drop ``user_id``'s cached common words (their rows were deleted)."""
        self._users.forget(user_id)

    def _common_plan(self, user_id: str) -> Plan[frozenset[str]]:
        cached = self._users.get(user_id)
        if cached is not None:
            return cached
        rows = yield (
            f"WITH newest AS (SELECT tsv FROM {self.table} WHERE user_id = %s"
            " ORDER BY created_at DESC LIMIT %s) SELECT lexeme FROM newest,"
            " unnest(tsvector_to_array(tsv)) AS lexeme GROUP BY lexeme"
            " HAVING count(*) > %s * (SELECT count(*) FROM newest)",
            (user_id, COMMON_SAMPLE, COMMON_SHARE),
        )
        common = frozenset(str(r["lexeme"]) for r in rows)
        self._users.put(user_id, common)
        return common

    def _lexemes_plan(self, terms: Iterable[str]) -> Plan[dict[str, tuple[str, ...]]]:
        with self._lock:
            known = {t: self._lexemes[t] for t in terms if t in self._lexemes}
        missing = [t for t in terms if t not in known]
        if missing:
            rows = yield (
                "SELECT term, tsvector_to_array(to_tsvector('english', term)) AS lexemes"
                " FROM unnest(%s::text[]) AS term",
                (missing,),
            )
            found = {str(r["term"]): tuple(r["lexemes"]) for r in rows}
            with self._lock:
                self._lexemes.update(found)
                bound(self._lexemes, LEXEMES_MAX)
            known.update(found)
        return known
