"""Token counting: exact offline tiktoken counts, model-based choice, and the estimate."""

from __future__ import annotations

import hashlib
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiermem.errors import InvalidTypeError
from tiermem.messages import Message
from tiermem.tokens import (
    CACHED_CHARS,
    MESSAGE_OVERHEAD,
    ApproxTokenCounter,
    TiktokenCounter,
    TokenCounter,
    counted_line,
    encoding_for_model,
    get_token_counter,
    seed_tiktoken_cache,
    stored_count,
)

PROSE = (
    "Persistent memory uses dimension-specific tables rather than a single fixed table. "
    "The table name is derived from the embedding model's output dimension, so several "
    "formations sharing the same database can each use a different embedding model. "
    "Memories are scored for importance from recency, access frequency and explicit weight."
)
CHAT = [
    "Hey Mel! Good to see you! How have you been?",
    "I'm off to go swimming with the kids tomorrow, they love it.",
    "Wow, that's awesome! I signed up for a pottery class on 3 July 2023.",
    "Thanks, Caroline! It's been a wild ride since May, but I'm doing okay.",
]


@pytest.fixture()
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_exact_counts_offline_from_the_packaged_encoding(empty_cache) -> None:
    counter = TiktokenCounter("o200k_base")
    assert counter.count("hello world") == 2
    assert counter.count("") == 0
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    assert (empty_cache / hashlib.sha1(url.encode()).hexdigest()).exists()


def test_seeding_is_idempotent_and_respects_a_disabled_cache(empty_cache, monkeypatch) -> None:
    assert seed_tiktoken_cache("cl100k_base")
    assert seed_tiktoken_cache("cl100k_base")
    assert len(os.listdir(empty_cache)) == 1
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    assert not seed_tiktoken_cache("cl100k_base")


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        (None, "o200k_base"),
        ("gpt-4o", "o200k_base"),
        ("openai/gpt-4.1-mini", "o200k_base"),
        ("openai/gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("anthropic/claude-sonnet-4", "o200k_base"),
    ],
)
def test_encoding_is_chosen_by_model_name(model, encoding) -> None:
    assert encoding_for_model(model) == encoding


def test_counters_differ_by_encoding() -> None:
    text = "Résumé: naïve café — 東京 2024"
    o200k = get_token_counter("gpt-4o").count(text)
    cl100k = get_token_counter("gpt-3.5-turbo").count(text)
    assert o200k != cl100k


def test_factory_returns_protocol_instances_and_approx_on_request() -> None:
    assert isinstance(get_token_counter(), TokenCounter)
    assert isinstance(get_token_counter("approx"), ApproxTokenCounter)
    assert isinstance(get_token_counter("gpt-4o", exact=False), ApproxTokenCounter)


def test_message_count_adds_overhead_and_is_computed_once() -> None:
    calls = []

    class Counting(TiktokenCounter):
        def count(self, text: str) -> int:
            calls.append(text)
            return super().count(text)

    counter = Counting()
    message = Message("user", "hello world")
    assert counter.count_message(message) == 2 + MESSAGE_OVERHEAD
    assert counter.count_message(message) == 2 + MESSAGE_OVERHEAD
    assert calls == ["hello world"]
    # another counting scheme does not reuse the cached count
    assert ApproxTokenCounter().count_message(message) == 2 + MESSAGE_OVERHEAD


def test_short_texts_are_encoded_once_long_ones_each_time() -> None:
    """The same message or line comes back prompt after prompt (each read of the
    transcript makes new Message objects): its count is cached by text; a whole rendered
    context is new every time and is not kept."""
    counter = TiktokenCounter()
    encoded = []
    encode = counter._wait()
    counter._encode = lambda text: encoded.append(text) or encode(text)
    long = " ".join(CHAT) * (CACHED_CHARS // len(" ".join(CHAT)) + 1)
    for _ in range(3):
        assert counter.count(CHAT[0]) == len(encode(CHAT[0]))
        assert counter.count_message(Message("user", CHAT[1])) == (
            len(encode(CHAT[1])) + MESSAGE_OVERHEAD
        )
        assert counter.count(long) == len(encode(long))
    assert encoded == [CHAT[0], CHAT[1], long, long, long]


_TRICKY = "aZé 9,./:!?'\"-[]()\n\r\t\u00a0\u2028\u3000\u200b😀"
"""Letters, digits, punctuation, "/", line breaks and white space of several kinds: what
could make a pre-tokenizer's piece cross a line break."""


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.text(alphabet=_TRICKY, max_size=12), max_size=6))
def test_joined_lines_count_as_the_text_they_make(encoding, lines) -> None:
    """``count_lines`` adds up the lines' counts where no piece can cross a line break
    and counts the joined text otherwise: always the joined text's exact count."""
    counter = get_token_counter("gpt-4" if encoding == "cl100k_base" else "gpt-4o", exact=True)
    text = "\n".join(lines)
    assert counter.count_lines(lines) == counter.count(text)
    assert counter.count_lines_message(lines) == counter.count_message(Message("system", text))
    assert ApproxTokenCounter().count_lines(lines) == ApproxTokenCounter().count(text)


def test_rendered_lines_are_counted_from_the_lines_counts() -> None:
    """A context's section is new text each time; its lines are not: no line break is
    crossed by a piece before a line that starts with a letter or "[", so the joined
    text is not encoded (its count is the sum of the cached lines' counts)."""
    counter = TiktokenCounter()
    encoded = []
    encode = counter._wait()
    counter._encode = lambda text: encoded.append(text) or encode(text)
    lines = ["Relevant memories:", "[8 May 2023]", *CHAT, "[9 May 2023]", "Mel: ok!"]
    assert counter.count_lines(lines) == len(encode("\n".join(lines)))
    assert "\n".join(lines) not in encoded
    before = len(encoded)
    assert counter.count_lines([*lines[:3], " indented"]) == len(
        encode("\n".join([*lines[:3], " indented"]))
    )
    assert encoded[before:] == ["\n".join([*lines[:3], " indented"])]


def test_names_and_tool_calls_are_counted() -> None:
    counter = get_token_counter()
    plain = counter.count_message(Message("assistant", "ok"))
    named = counter.count_message(Message("assistant", "ok", name="bot"))
    call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    with_call = counter.count_message(Message("assistant", "ok", tool_calls=[call]))
    assert named > plain and with_call > plain


@pytest.mark.parametrize("texts", [CHAT, [PROSE]], ids=["chat", "prose"])
def test_estimate_stays_within_ten_percent_of_exact(texts) -> None:
    exact = get_token_counter("gpt-4o", exact=True)
    approx = ApproxTokenCounter()
    truth = sum(exact.count(t) for t in texts)
    error = sum(abs(approx.count(t) - exact.count(t)) for t in texts) / truth
    naive = sum(abs(len(t) // 4 - exact.count(t)) for t in texts) / truth
    assert error < 0.10
    assert error < naive


@pytest.mark.parametrize(
    "counter", [TiktokenCounter(), ApproxTokenCounter()], ids=["exact", "approx"]
)
@pytest.mark.parametrize("bad", [None, 12, b"bytes"])
def test_non_text_is_rejected(counter, bad) -> None:
    with pytest.raises(InvalidTypeError):
        counter.count(bad)


def test_a_damaged_encoding_file_fails_at_the_first_count(tmp_path) -> None:
    """The table is built in the background; a file tiktoken rejects (hash mismatch)
    surfaces as ModelLoadError when the counter is first used, not as a hang or a
    wrong count. A fresh process, so no encoding is already loaded."""
    import subprocess
    import sys
    from pathlib import Path

    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_text("not the encoding\n")
    code = (
        "from tiermem.errors import ModelLoadError\n"
        "from tiermem.tokens import TiktokenCounter\n"
        "counter = TiktokenCounter('o200k_base')\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        counter.count('hello')\n"
        "    except ModelLoadError as exc:\n"
        "        print('ModelLoadError', 'o200k_base' in str(exc))\n"
    )
    env = {
        **os.environ,
        "TIKTOKEN_CACHE_DIR": str(tmp_path),
        "PYTHONPATH": str(Path(__file__).parents[1] / "src"),
        # tiktoken re-downloads a file whose hash is wrong: make sure that cannot work
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
    }
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.stdout.split("\n")[:2] == ["ModelLoadError True"] * 2, out.stderr


def test_a_line_counted_when_indexed_is_taken_while_the_line_is_the_same() -> None:
    """The worker stores ``[counter, tokens, hash]`` with each line it indexes; the count
    stands for that line only: another line (an updated memory) or a damaged value
    gives none, and a counter told a count does not encode the line."""
    counter = TiktokenCounter()
    line = "assistant: the deadline for the authentication module is 15 March!"
    stored = counted_line(counter, line)
    assert stored[:2] == [counter.name, len(counter._wait()(line + "\n"))]
    digest = hashlib.sha256(line.encode()).hexdigest()
    assert stored_count(stored, digest) == (counter.name, stored[1])
    other = hashlib.sha256(b"assistant: the deadline moved to April").hexdigest()
    assert stored_count(stored, other) is None
    for damaged in (None, "12", [counter.name, "12", stored[2]], stored[:2], [*stored, 1]):
        assert stored_count(damaged, digest) is None
    fresh = TiktokenCounter()
    encoded = []
    encode = fresh._wait()
    fresh._encode = lambda text: encoded.append(text) or encode(text)
    fresh.remember(line + "\n", stored[1])
    assert fresh.count(line + "\n") == stored[1] and encoded == []
