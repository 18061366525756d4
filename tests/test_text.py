"""The words of a text: one implementation for the stores, the planner, facts and summaries."""

from __future__ import annotations

import gc

from tiermem.text import (
    FILLER_WORDS,
    STOP_WORDS,
    distinct_terms,
    folded,
    keyword_matches,
    keyword_terms,
    sentences,
    stems,
    term_set,
    terms,
    words,
)


def test_terms_are_lower_cased_word_runs() -> None:
    assert terms("Ana's dog, Rex-2!") == ["ana", "s", "dog", "rex", "2"]
    assert folded("  Ana's  DOG, Rex! ") == "ana s dog rex"


def test_keyword_terms_drop_stop_words_unless_nothing_else_is_left() -> None:
    assert keyword_terms("What is the name of my dog?") == ["name", "dog"]
    assert keyword_terms("who was it") == ["who", "was", "it"]
    assert keyword_terms('NEAR(b) AND "c"') == ["near", "b", "c"]  # no operator
    assert len(keyword_terms("word " * 100)) == 64


def test_words_meet_by_their_first_five_letters() -> None:
    assert stems("Painted painting") == ("paint",)
    assert keyword_matches("When did Mel paint the sunrise?", "Mel painted a sunrise.") == 3
    assert keyword_matches("the of", "nothing here") == 0


def test_cached_words_are_out_of_the_collectors_sight() -> None:
    """What the caches keep is not walked by a full collection once it has aged: a cache
    of sets made every full collection of a serving process 55 ms."""
    text = "Caroline went to the LGBTQ support group on 7 May 2023."
    cached = [stems(text), distinct_terms(text)]
    assert term_set(text) == frozenset(terms(text))
    gc.collect()
    assert not any(gc.is_tracked(value) for value in cached)
    assert not gc.is_tracked(stems(text)) and stems(text) is cached[0]


def test_words_keep_case_and_numbers() -> None:
    assert words("I'm in Lisbon on 12/05, it costs 3.5") == [
        "I'm",
        "in",
        "Lisbon",
        "on",
        "12/05,",
        "it",
        "costs",
        "3.5",
    ]


def test_filler_words_hold_every_stop_word() -> None:
    assert STOP_WORDS < FILLER_WORDS and "yeah" in FILLER_WORDS and "yeah" not in STOP_WORDS


def test_sentences() -> None:
    assert sentences("One. Two!  Three?\nFour… five") == [
        "One.",
        "Two!",
        "Three?",
        "Four…",
        "five",
    ]
    assert sentences("It costs 3.5 dollars.") == ["It costs 3.5 dollars."]
