"""Passages: a long message cut along its own structure."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiermem.messages import Message
from tiermem.work.passages import cut
from tiermem.work.vectors import PassageSettings

CODE = "```python\n" + "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(30)) + "```"
DOC = "\n\n".join(
    [
        "# Deployment plan",
        "We ship the dashboard on Friday. " * 12,
        "Steps:\n- build the image with the pinned lock file\n- run the migrations\n- switch the traffic",
        CODE,
        "The deadline for the authentication module is April 15. It was moved once already.",
    ]
)


def texts(text: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[a:b] for a, b in spans]


def test_every_non_blank_character_is_in_one_passage_in_order() -> None:
    spans = cut(DOC, max_chars=300, min_chars=80)
    assert spans == sorted(spans)
    assert all(a < b <= c for (a, b), (c, _) in itertools.pairwise(spans))
    covered = "".join(DOC[a:b] for a, b in spans)
    assert "".join(covered.split()) == "".join(DOC.split())


def test_a_code_block_is_kept_whole_up_to_twice_the_limit() -> None:
    assert 600 < len(CODE) <= 2 * 600
    assert any(CODE in t for t in texts(DOC, cut(DOC, max_chars=600, min_chars=80)))


def test_a_longer_code_block_is_cut_between_lines() -> None:
    spans = cut(CODE, max_chars=200, min_chars=0)
    assert len(spans) > 1
    assert all(CODE[b - 1] in "\n:0123456789`)" or CODE[b : b + 1] == "\n" for _, b in spans[:-1])
    assert all(b - a <= 200 for a, b in spans)


def test_a_list_stays_with_the_line_that_introduces_it() -> None:
    (found,) = [t for t in texts(DOC, cut(DOC, max_chars=300, min_chars=80)) if "Steps:" in t]
    assert found.startswith("Steps:") and "switch the traffic" in found


def test_a_heading_stays_with_what_follows() -> None:
    first = texts(DOC, cut(DOC, max_chars=600, min_chars=0))[0]
    assert first.startswith("# Deployment plan") and "We ship" in first


def test_sentences_are_not_split_when_they_fit() -> None:
    for passage in texts(DOC, cut(DOC, max_chars=300, min_chars=80)):
        if "We ship" in passage:
            assert passage.endswith("Friday.")


@given(st.text(alphabet=st.sampled_from("ab .\n-#`:x"), max_size=3000), st.integers(50, 500))
def test_any_text_is_covered_within_the_limit(text: str, limit: int) -> None:
    spans = cut(text, max_chars=limit, min_chars=limit // 4)
    covered = "".join(text[a:b] for a, b in spans)
    assert "".join(covered.split()) == "".join(text.split())
    assert all(0 < b - a <= 2 * limit for a, b in spans)


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        cut("text", max_chars=0)


def test_only_a_message_over_the_length_has_passages() -> None:
    settings = PassageSettings(over=len(DOC) - 1, max_chars=300, min_chars=80)
    assert settings.spans(Message("user", DOC))
    assert settings.spans(Message("user", DOC[: len(DOC) - 2])) == []


def test_a_batch_of_short_and_long_messages_embeds_each_with_its_passages() -> None:
    from embedders import HashEmbedder
    from tiermem.work.vectors import embed_with_passages

    settings = PassageSettings(over=500, max_chars=300, min_chars=80)
    messages = [
        Message("user", "One sentence here. And a second one there."),
        Message("assistant", DOC),
    ]
    embedded = embed_with_passages(HashEmbedder(), messages, settings)
    assert len(embedded.vectors) == 2 and embedded.passages[0] == []
    spans = [span for span, _ in embedded.passages[1]]
    assert spans == settings.spans(messages[1]) and len(spans) > 2
