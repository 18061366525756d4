"""Facts from conversations: offline rules, the LLM over HTTP (the local OpenAI-protocol
server answers like a model would: facts and decisions as JSON, or badly), versions kept
on change, and the failures that must lose nothing."""

from __future__ import annotations

import json
import re
import threading
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embedders import HashEmbedder, wait_until
from fakeserver import FakeServer, Reply
from tiermem.errors import (
    ConfigError,
    MalformedAnswerError,
    NotFoundError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
)
from tiermem.facts.extract import KnownFact, OfflineExtractor, SourceMessage, parse_facts
from tiermem.llm import OpenAIModel
from tiermem.memory import Memory
from tiermem.stores.facts import FactMarkOp

DAY = datetime(2023, 5, 8, 14, 0, tzinfo=timezone.utc)
LINE = re.compile(r"^(m\d+) \[[^\]]*\] (\w+): (.*)$", re.M)
KNOWN = re.compile(r"^(f\d+): (.*)$", re.M)


def scripted_model(body: dict[str, Any]) -> str:
    """Answers an extraction prompt as a careful model would, for two kinds of statement:
    "I live in X" / "I moved to X" (a home: a new one supersedes the old) and "I like X"."""
    prompt = body["messages"][-1]["content"]
    known = {text: label for label, text in KNOWN.findall(prompt)}
    facts = []
    for label, name, text in LINE.findall(prompt):
        home = re.match(r"I (?:live in|moved to) (\w+)", text)
        like = re.match(r"I like (\w+)", text)
        if home is None and like is None:
            continue
        fact = f"{name} lives in {home.group(1)}." if home else f"{name} likes {like.group(1)}."  # type: ignore[union-attr]
        old = next((f for t, f in known.items() if home and t.startswith(f"{name} lives in")), None)
        if fact in known:
            action, target = "none", known[fact]
        elif old is not None:
            action, target = "supersede", old
        else:
            action, target = "add", None
        facts.append({"text": fact, "sources": [label], "action": action, "target": target})
    return json.dumps({"facts": facts})


def message(text: str, name: str = "Ana", day: datetime = DAY) -> dict[str, Any]:
    return {"role": "user", "content": text, "name": name, "timestamp": day}


def open_memory(tmp_path: Path, server: FakeServer | None = None, **facts: Any) -> Memory:
    settings_ = {"enabled": True, "batch": 2, "extractor": "llm" if server else "offline"}
    config = {"memory": {"facts": {**settings_, **facts}, "synopsis": {"enabled": False}}}
    llm = None
    if server is not None:
        llm = OpenAIModel(
            "small", base_url=server.openai_url, api_key="k", max_retries=0, timeout=5
        )
    return Memory(str(tmp_path / "m.db"), config=config, embedder=HashEmbedder(32), llm=llm)


def chat_requests(server: FakeServer) -> list[Any]:
    return [r for r in server.requests if r.path.endswith("/chat/completions")]


# -- offline --------------------------------------------------------------------------


def _source(text: str, role: str = "user", n: int = 1) -> SourceMessage:
    return SourceMessage(f"id{n}", f"m{n}", f"Ana: {text}", text, "Ana", role, DAY)


def test_the_offline_extractor_keeps_first_person_statements_with_names_numbers_dates() -> None:
    kept = [
        "I adopted a dog named Max.",  # name
        "My sister is 34 years old.",  # number
        "I went hiking yesterday with friends.",  # date
        "I love painting sunsets.",  # preference
    ]
    dropped = [
        "Do you like painting?",  # a question
        "Wow, that is great!",  # not first person, no signal
        "I am fine thanks.",  # first person, nothing to keep
        "She loves hiking in May.",  # not first person
    ]
    messages = [_source(t, n=i) for i, t in enumerate(kept + dropped, 1)]
    messages.append(_source("I moved to Porto in 2023.", role="assistant", n=99))
    facts = OfflineExtractor().extract(messages, [])
    assert [f.text for f in facts] == [f"Ana (8 May 2023): {t}" for t in kept]
    assert [f.sources for f in facts] == [("id1",), ("id2",), ("id3",), ("id4",)]
    assert OfflineExtractor().extract(messages, []) == facts  # deterministic


def test_offline_facts_are_extracted_in_the_background_and_versioned(tmp_path: Path) -> None:
    with open_memory(tmp_path, batch=3) as memory:
        memory.add_messages(
            [message("I live in Lisbon with my sister Rita."), message("Hi there.")],
            "ana",
            "s1",
        )
        memory.flush()
        assert memory.facts("ana") == []  # 2 new messages: below the batch of 3
        memory.add_messages([message("My favourite food is bacalhau.")], "ana", "s1")
        memory.flush()
        facts = {f.content: f for f in memory.facts("ana")}
        assert set(facts) == {
            "Ana (8 May 2023): I live in Lisbon with my sister Rita.",
            "Ana (8 May 2023): My favourite food is bacalhau.",
        }
        later = DAY + timedelta(days=200)
        memory.add_messages([message("I moved to Porto last month.", day=later)], "ana", "s2")
        memory.extract_facts("ana", "s2")  # at once, below the batch
        porto = next(f for f in memory.facts("ana") if "Porto" in f.content)
        versions = memory.fact_history(str(porto.id), "ana")
        assert [v.content for v in versions] == [
            "Ana (8 May 2023): I live in Lisbon with my sister Rita.",
            "Ana (24 November 2023): I moved to Porto last month.",
        ]
        assert versions[0].metadata["valid_until"] == porto.metadata["valid_from"]
        assert versions[0].metadata["superseded_by"] == str(porto.id)
        assert porto.metadata["replaces"] == str(versions[0].id)
        assert "Lisbon" not in " ".join(f.content for f in memory.facts("ana"))


def test_facts_need_them_enabled(tmp_path: Path) -> None:
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32)) as memory:
        with pytest.raises(ConfigError, match=r"memory\.facts\.enabled"):
            memory.extract_facts("ana")
        with pytest.raises(NotFoundError):
            memory.fact_history("7b0c8a2e-8d4f-4f57-9d3c-8a4b3c2d1e0f", "ana")


# -- parsing what a model answers --------------------------------------------------------


def _batch() -> tuple[list[SourceMessage], list[KnownFact]]:
    messages = [_source("I like tea.", n=1), _source("I moved to Porto.", n=2)]
    return messages, [KnownFact("uuid-lisbon", "f1", "Ana lives in Lisbon.")]


@pytest.mark.parametrize(
    "answer",
    [
        '{"facts": [{"text": "Ana likes tea.", "sources": ["m1"], "action": "add", "target": null}]}',
        '```json\n{"facts": [{"text": "Ana likes tea.", "sources": ["m1"], "action": "add"}]}\n```',
        'Here you go: {"facts": [{"fact": "Ana likes tea.", "sources": [1]}]} Hope it helps!',
        '[{"text": "Ana likes tea.", "source": "1", "action": "ADD"}]',
        '{"text": "Ana likes tea.", "sources": ["m1"], "action": "invent"}',
        '{"facts": ["Ana likes tea."]}',
    ],
)
def test_answers_of_small_models_are_read_tolerantly(answer: str) -> None:
    messages, known = _batch()
    (fact,) = parse_facts(answer, messages, known)
    assert (fact.text, fact.sources, fact.action, fact.target) == (
        "Ana likes tea.",
        ("id1",),
        "add",
        None,
    )


def test_a_decision_names_a_known_fact_or_becomes_an_add() -> None:
    messages, known = _batch()
    answer = {
        "facts": [
            {
                "text": "Ana lives in Porto.",
                "sources": ["m2"],
                "action": "supersede",
                "target": "f1",
            },
            {"text": "Ana likes tea.", "sources": ["m1"], "action": "update", "target": "f9"},
        ]
    }
    porto, tea = parse_facts(json.dumps(answer), messages, known)
    assert (porto.action, porto.target, porto.sources) == ("supersede", "uuid-lisbon", ("id2",))
    assert (tea.action, tea.target) == ("add", None)


@pytest.mark.parametrize(
    "answer", ["I could not find any facts.", '{"facts": "none"}', '{"facts": [{"x": 1}, 3]}', ""]
)
def test_answers_without_usable_json_are_a_typed_error(answer: str) -> None:
    messages, known = _batch()
    with pytest.raises(MalformedAnswerError):
        parse_facts(answer, messages, known)


# -- the LLM over HTTP ----------------------------------------------------------------


def test_one_call_per_batch_with_a_json_schema_and_never_on_add(tmp_path: Path) -> None:
    """The model answers only once the test releases it, which it does after both adds
    returned; an add that waited for extraction would get the model's answer first (it
    gives up waiting after 4 s, before the client's 5 s timeout)."""
    release = threading.Event()
    events: list[str] = []

    def slow_model(body: dict[str, Any]) -> str:
        release.wait(4)
        events.append("answered")
        return scripted_model(body)

    with FakeServer(chat_reply=slow_model) as server, open_memory(tmp_path, server, batch=20) as m:
        lines = [message(f"I like {w}.") for w in ["tea", "jazz", "chess", "cats", "rain"]] * 5
        m.add_messages(lines[:25], "ana", "s1")
        events.append("added")
        assert wait_until(lambda: len(chat_requests(server)) == 1, 30)  # extraction blocked
        m.add_messages([message("I like Porto.")], "ana", "s1")
        events.append("added again")
        assert m.recent("ana", "s1", 1)[0].text == "I like Porto."
        release.set()
        m.flush()
        assert events == ["added", "added again", "answered"]  # no add waited for the model
        request = chat_requests(server)[0].json
        assert request["response_format"]["type"] == "json_schema"
        assert request["temperature"] == 0
        assert len(chat_requests(server)) == 1  # 25 messages, one call
        assert sorted(f.content for f in m.facts("ana")) == [
            f"Ana likes {w}." for w in sorted(["tea", "jazz", "chess", "cats", "rain"])
        ]
        tea = next(f for f in m.facts("ana") if f.content == "Ana likes tea.")
        assert tea.metadata["mentions"] == 5 and len(tea.metadata["sources"]) == 5
        assert tea.metadata["extractor"] == "openai/small"


def test_a_superseded_fact_keeps_its_text_and_the_context_prefers_the_current(
    tmp_path: Path,
) -> None:
    with FakeServer(chat_reply=scripted_model) as server, open_memory(tmp_path, server) as m:
        m.add_messages([message("I live in Lisbon."), message("I like tea.")], "ana", "s1")
        m.flush()
        later = DAY + timedelta(days=400)
        m.add_messages(
            [message("I moved to Porto.", day=later), message("I like tea.", day=later)],
            "ana",
            "s2",
        )
        m.flush()
        current = {f.content: f for f in m.facts("ana")}
        assert set(current) == {"Ana lives in Porto.", "Ana likes tea."}
        assert current["Ana likes tea."].metadata["mentions"] == 2  # merged, not deleted
        porto = current["Ana lives in Porto."]
        lisbon, again = m.fact_history(str(porto.id), "ana")
        assert again.id == porto.id and lisbon.content == "Ana lives in Lisbon."
        assert lisbon.metadata["valid_until"] == later.isoformat()
        assert lisbon.metadata["change"] == "supersede"

        def score(query: str, text: str) -> float:
            context = m.get_context(query, "ana", "s3")
            return next(i.score for i in context.items if i.content.startswith(text))

        now = "Where does Ana live?"
        assert score(now, "Ana lives in Porto.") > score(now, "Ana lives in Lisbon.")
        before = "Where did Ana live before?"
        assert score(before, "Ana lives in Lisbon.") > score(now, "Ana lives in Lisbon.")
        explained = m.get_context(now, "ana", "s3").explain()
        assert "Ana lives in Lisbon. (until 11 June 2024)" in explained
        assert "from: Ana: I moved to Porto." in explained


def test_a_malformed_answer_falls_back_to_the_offline_rules(tmp_path: Path) -> None:
    model = FakeServer(chat_reply=lambda body: "Sure! Ana likes tea, I think.")
    with model as server, open_memory(tmp_path, server, batch=5) as m:
        m.add_messages([message("I love green tea since 2019.")], "ana", "s1")
        written = m.extract_facts("ana", "s1")
        (fact,) = m.facts("ana")
        assert written == [str(fact.id)]
        assert fact.content == "Ana (8 May 2023): I love green tea since 2019."
        assert fact.metadata["extractor"] == "offline"
        assert m.worker.facts.stats.fallbacks == 1


@pytest.mark.parametrize(
    ("reply", "error", "reason"),
    [
        (Reply(status=500), ProviderError, "HTTP 500"),
        (Reply(status=429, headers={"Retry-After": "0"}), RateLimitError, "RateLimitError"),
        (Reply(delay=3.0), ProviderTimeoutError, "ProviderTimeoutError"),
    ],
)
def test_when_the_llm_fails_the_mark_stays_and_a_retry_reads_the_batch(
    tmp_path: Path, reply: Reply, error: type[Exception], reason: str
) -> None:
    with FakeServer(chat_reply=scripted_model) as server:
        llm = OpenAIModel(
            "small", base_url=server.openai_url, api_key="k", max_retries=0, timeout=1
        )
        config = {"memory": {"facts": {"enabled": True, "extractor": "llm", "batch": 50}}}
        with Memory(str(tmp_path / "m.db"), config=config, embedder=HashEmbedder(32), llm=llm) as m:
            m.add_messages([message("I live in Lisbon."), message("I like tea.")], "ana", "s1")
            server.enqueue(reply)
            with pytest.raises(error):
                m.extract_facts("ana", "s1")
            mark = m.store.batch([FactMarkOp("ana", "s1")])[0]
            assert (mark.upto, mark.attempts) == (0, 1) and reason in mark.error
            assert m.facts("ana") == []
            assert m.flush(30) and m.work_stats("ana").pending == 0  # embedding carried on
            m.extract_facts("ana", "s1")  # an explicit call does not wait for the backoff
            assert {f.content for f in m.facts("ana")} == {"Ana lives in Lisbon.", "Ana likes tea."}
            assert m.store.batch([FactMarkOp("ana", "s1")])[0].attempts == 0


def test_a_failing_batch_waits_with_backoff_and_blocks_no_other_user(tmp_path: Path) -> None:
    def model(body: dict[str, Any]) -> str:
        if "Bea:" in body["messages"][-1]["content"]:
            raise_reply = "not json at all"  # Bea's answers are malformed: offline fallback
            return raise_reply
        return scripted_model(body)

    with FakeServer(chat_reply=model) as server, open_memory(tmp_path, server) as m:
        server.fail_next(500)
        m.add_messages([message("I live in Lisbon."), message("I like tea.")], "ana", "s1")
        m.flush()
        mark = m.store.batch([FactMarkOp("ana", "s1")])[0]
        assert mark.upto == 0 and mark.retry_at > 0  # waits for its retry time
        m.add_messages(
            [message("I like 3 cats.", "Bea"), message("I live in Rome.", "Bea")], "bea", "s1"
        )
        m.flush()
        assert len(m.facts("bea")) == 2  # Bea's batch was not held up by Ana's
        assert m.facts("ana") == []
        m.extract_facts("ana", "s1")
        assert len(m.facts("ana")) == 2


def test_a_server_without_json_schema_is_asked_in_the_prompt(tmp_path: Path) -> None:
    with FakeServer(chat_reply=scripted_model) as server, open_memory(tmp_path, server) as m:
        server.fail_next(400)
        m.add_messages([message("I like tea.")], "ana", "s1")
        m.extract_facts("ana", "s1")
        first, second = (r.json for r in chat_requests(server))
        assert "response_format" in first and "response_format" not in second
        assert [f.content for f in m.facts("ana")] == ["Ana likes tea."]
        m.add_messages([message("I like jazz.")], "ana", "s1")
        m.extract_facts("ana", "s1")
        assert "response_format" not in chat_requests(server)[-1].json


# -- isolation ------------------------------------------------------------------------

STATEMENTS = st.lists(
    st.tuples(
        st.sampled_from(["ana", "bea"]),
        st.sampled_from(
            ["I live in Lisbon.", "I live in Rome.", "I like tea.", "I like 2 dogs named Rex."]
        ),
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(statements=STATEMENTS)
def test_facts_of_one_user_never_touch_another(tmp_path_factory: Any, statements: Any) -> None:
    path = tmp_path_factory.mktemp("iso")
    with open_memory(path, batch=1) as m:
        for user, text in statements:
            m.add_messages([message(text, user.title())], user, "s")
        m.flush()
        for user in ("ana", "bea"):
            m.extract_facts(user, "s")
        own = {u: {x.message_id for x in m.history(u, "s")} for u in ("ana", "bea")}
        for user, other in (("ana", "bea"), ("bea", "ana")):
            said = {t for u, t in statements if u == user}
            for fact in m.facts(user, current=False):
                assert set(fact.metadata["sources"]) <= own[user]
                assert fact.content.startswith(user.title())
                assert any(s in fact.content for s in said)
                assert m.fact_history(str(fact.id), user)
                with pytest.raises(NotFoundError):
                    m.fact_history(str(fact.id), other)


@pytest.mark.slow  # the example uses the default (real) embedding model
def test_the_example_of_docs_facts_md_prints_what_it_says(
    capsys: pytest.CaptureFixture[str],
) -> None:
    page = (Path(__file__).parents[1] / "docs" / "facts.md").read_text()
    code, printed = re.findall(r"```(?:python|text)\n(.*?)```", page, re.S)[:2]
    exec(compile(code, "docs/facts.md", "exec"), {"__name__": "__docs__"})
    assert capsys.readouterr().out == printed


def test_a_fact_is_left_out_when_the_messages_it_was_read_from_are_taken() -> None:
    from tiermem.planner.planner import Candidate, QueryPlanner
    from tiermem.planner.temporal import asks_about_past
    from tiermem.text import folded
    from tiermem.tokens import get_token_counter

    planner = QueryPlanner(counter=get_token_counter("gpt-4o", exact=True))
    said = "Ana: I moved to Porto in May and my sister Rita lives there too."
    fact = "Ana moved to Porto in May 2023."

    def plan(message_first: bool) -> list[str]:
        message = Candidate(
            said,
            "store",
            similarity=0.9 if message_first else 0.5,
            key=folded(said),
            message_id="m1",
            timestamp=DAY,
        )
        restated = Candidate(
            fact,
            "store",
            similarity=0.5 if message_first else 0.9,
            key=folded(fact),
            source_ids=("m1",),
            timestamp=DAY,
        )
        other = Candidate("Bea: I like tea.", "store", similarity=0.7, key="bea", timestamp=DAY)
        context = planner.plan("where does Ana live", candidates=[message, restated, other])
        return [i.content for i in context.items]

    assert sorted(plan(message_first=True)) == sorted([said, "Bea: I like tea."])
    assert sorted(plan(message_first=False)) == sorted([fact, said, "Bea: I like tea."])
    assert asks_about_past("Where did Ana live before Porto?")
    assert asks_about_past("What did Ana do on 8 May 2023?")
    assert not asks_about_past("Where does Ana live?")


def test_the_end_of_a_session_reads_its_last_messages(tmp_path: Path) -> None:
    with FakeServer(chat_reply=scripted_model) as server, open_memory(tmp_path, server) as m:
        m.add_messages([message("I like tea.")], "ana", "s1")  # below the batch of 2
        m.end_session("ana", "s1")
        assert [f.content for f in m.facts("ana")] == ["Ana likes tea."]
        server.fail_next(500, 500)  # the session's summary, then its facts
        m.add_messages([message("I like jazz.")], "ana", "s1")
        m.end_session("ana", "s1")  # the model is down: the session still ends
        assert m.store.batch([FactMarkOp("ana", "s1")])[0].attempts == 1
        assert [f.content for f in m.facts("ana")] == ["Ana likes tea."]


def test_bad_input_to_the_fact_api_is_a_typed_error(tmp_path: Path) -> None:
    from tiermem.errors import InputError, InvalidSizeError, InvalidTypeError, MissingUserError
    from tiermem.facts.extract import LLMExtractor

    with open_memory(tmp_path) as m:
        with pytest.raises(MissingUserError):
            m.extract_facts("  ")
        with pytest.raises(InvalidTypeError, match="session_id"):
            m.extract_facts("ana", 7)  # type: ignore[arg-type]
        with pytest.raises(InvalidTypeError, match="memory_id"):
            m.fact_history(None, "ana")  # type: ignore[arg-type]
        with pytest.raises(InputError, match="memory_id"):  # as get_memory and forget
            m.fact_history("not a uuid", "ana")
        with pytest.raises(NotFoundError):
            m.fact_history(str(uuid.uuid4()), "ana")
        with pytest.raises(InvalidSizeError, match="limit"):
            m.facts("ana", limit=0)
        with pytest.raises(InputError, match="structured"):
            LLMExtractor(object(), structured="xml")
    config = {"memory": {"retention": "session", "facts": {"enabled": True}}}
    with Memory(config=config, embedder=HashEmbedder(32)) as m, pytest.raises(ConfigError):
        m.extract_facts("ana")
    llm_without_model = {"memory": {"facts": {"enabled": True, "extractor": "llm"}}}
    no_model = Memory(str(tmp_path / "x.db"), config=llm_without_model, embedder=HashEmbedder(32))
    with no_model as m, pytest.raises(ConfigError, match="extractor"):
        m.extract_facts("ana")
