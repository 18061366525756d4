"""Facts from LoCoMo conversations: how many, whether they hold the answers, and what they
do to evidence recall within a token budget.

For each conversation (one user): import every turn with ``Memory.add_messages`` (as
benchmarks/locomo.py does), build a context for every question of categories 1-4 at each
budget, then extract facts from every session (``Memory.extract_facts``: one extraction
per session) and build the same contexts again. Reported, in one run:

* facts per session, and the share of category 1, 2 and 4 answers whose text appears in
  the extracted facts (beside the share that appears in the conversation at all);
* evidence recall within each budget without and with facts in the store: an evidence
  turn counts when its text is in the context ("text"), or also when a fact read from it
  is ("text or fact"); the first is locomo.py's measure;
* with ``--llm``: the extraction calls and tokens per 100 messages.

Usage:
    python benchmarks/facts.py ../shared/data/locomo [--budgets 500 1000 2000] [--quick]
        [--llm URL --model NAME | --llm fake]

``--llm URL`` extracts with the chat model at an OpenAI-compatible URL (not in CI);
``--llm fake`` starts the local OpenAI-protocol test server (tests/fakeserver.py) that
answers with the offline rules' facts in the JSON asked for: it measures the calls and
prompt tokens the batching costs, not the quality of a model.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import locomo_folder, reproduce_command, rich_table, write_json
from locomo import Conversation, Turn, evidence_turns, load, recall

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parents[1]
ANSWER_CATEGORIES = (1, 2, 4)
_WORD = re.compile(r"\w+")


def _norm(text: str) -> str:
    return " ".join(_WORD.findall(str(text).lower()))


def fake_model_server() -> Any:
    """The local OpenAI-protocol server answering extraction prompts with the offline
    rules' facts, as JSON in the asked shape."""
    sys.path.insert(0, str(ROOT / "tests"))
    from datetime import datetime, timezone

    from fakeserver import FakeServer
    from tiermem.facts.extract import OfflineExtractor, SourceMessage

    line = re.compile(r"^(m\d+) \[([^\]]*)\] ([^:]+): (.*)$", re.M)

    def answer(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        messages = [
            SourceMessage(
                label,
                label,
                f"{name}: {text}",
                text,
                name,
                "user",
                datetime.strptime(day, "%d %B %Y").replace(tzinfo=timezone.utc),
            )
            for label, day, name, text in line.findall(prompt)
        ]
        facts = [
            {"text": f.text, "sources": list(f.sources), "action": "add", "target": None}
            for f in OfflineExtractor().extract(messages, [])
        ]
        return json.dumps({"facts": facts})

    return FakeServer(chat_reply=answer).start()


def _contexts(
    memory: Any,
    conv: Conversation,
    asked: list[tuple[dict[str, Any], list[Turn]]],
    budgets: list[int],
    sources: dict[str, set[str]],
) -> dict[str, dict[int, list[float]]]:
    """Recall of every question at every budget: by text, by text or fact; and whether
    the answer itself is in the context (categories 1, 2, 4)."""
    last = f"session_{conv.turns[-1].session}"
    out: dict[str, dict[int, list[float]]] = {"text": {}, "text or fact": {}, "answer": {}}
    for q, wanted in asked:
        for budget in budgets:
            context = memory.get_context(q["question"], conv.name, last, max_tokens=budget)
            assert context.total_tokens <= budget
            text = context.text()
            read = set()
            for item in context.items:
                read |= sources.get(str(item.memory_id), set())
            by_fact = [t.text in text or f"{conv.name}-{t.dia_id}" in read for t in wanted]
            out["text"].setdefault(budget, []).append(recall(text, wanted))
            out["text or fact"].setdefault(budget, []).append(sum(by_fact) / len(wanted))
            if q.get("category") in ANSWER_CATEGORIES and str(q.get("answer", "")).strip():
                answered = _norm(q["answer"]) in _norm(text)
                out["answer"].setdefault(budget, []).append(float(answered))
    return out


def run(
    data_dir: Path, budgets: list[int], quick: bool, llm: str | None, model: str
) -> dict[str, Any]:
    from tiermem import Memory
    from tiermem.embeddings import get_embedder
    from tiermem.llm import OpenAIModel

    embedder = get_embedder("local/all-MiniLM-L6-v2")
    files = sorted(data_dir.glob("*.json"))[: 1 if quick else None]
    conversations = [load(f) for f in files]
    server = fake_model_server() if llm == "fake" else None
    chat = None
    if llm is not None:
        url = server.openai_url if server is not None else llm
        chat = OpenAIModel(model, base_url=url, api_key="none", timeout=300, max_retries=2)
    tmp = Path(tempfile.mkdtemp(prefix="tiermem-facts-"))
    facts_config = {"enabled": True, "batch": 1000, "max_batch": 50, "extractor": "offline"}
    if chat is not None:
        facts_config["extractor"] = "llm"
    config = {"memory": {"facts": facts_config}}
    memory = Memory(str(tmp / "facts.db"), config=config, embedder=embedder, llm=chat)
    scores: dict[str, dict[str, dict[int, list[float]]]] = {}
    per_session: list[int] = []
    found = {"facts": 0, "conversation": 0, "questions": 0}
    extract_s = 0.0
    extract_calls = 0  # the extractor's calls (the same model also writes synopses)
    messages = 0
    try:
        for conv in conversations:
            questions = conv.questions[:20] if quick else conv.questions
            sessions = sorted({t.session for t in conv.turns})
            for session in sessions:
                memory.add_messages(
                    [
                        {
                            "role": "user",
                            "content": t.text,
                            "name": t.speaker,
                            "timestamp": t.timestamp,
                            "message_id": f"{conv.name}-{t.dia_id}",
                        }
                        for t in conv.turns
                        if t.session == session
                    ],
                    user_id=conv.name,
                    session_id=f"session_{session}",
                )
            memory.flush()
            messages += len(conv.turns)
            asked = [(q, evidence_turns(conv, q)) for q in questions]
            asked = [(q, wanted) for q, wanted in asked if wanted]
            for name, per in _contexts(memory, conv, asked, budgets, {}).items():
                for budget, values in per.items():
                    scores.setdefault(f"without facts: {name}", {}).setdefault(budget, []).extend(
                        values
                    )
            start, before = time.perf_counter(), chat.calls if chat is not None else 0
            for session in sessions:
                per_session.append(len(memory.extract_facts(conv.name, f"session_{session}")))
            extract_s += time.perf_counter() - start
            extract_calls += (chat.calls if chat is not None else 0) - before
            facts = memory.facts(conv.name, limit=10_000)
            sources = {str(f.id): set(f.metadata["sources"]) for f in facts}
            for name, per in _contexts(memory, conv, asked, budgets, sources).items():
                for budget, values in per.items():
                    scores.setdefault(f"with facts: {name}", {}).setdefault(budget, []).extend(
                        values
                    )
            fact_text = _norm(" | ".join(f.content for f in facts))
            history = _norm(" | ".join(t.text for t in conv.turns))
            for q in questions:
                if q.get("category") in ANSWER_CATEGORIES and str(q.get("answer", "")).strip():
                    answer = _norm(q["answer"])
                    found["questions"] += 1
                    found["facts"] += answer in fact_text
                    found["conversation"] += answer in history
    finally:
        memory.close()
        shutil.rmtree(tmp, ignore_errors=True)
        if server is not None:
            server.stop()
    recall = {n: {b: statistics.mean(v) for b, v in per.items()} for n, per in scores.items()}
    result: dict[str, Any] = {
        "conversations": [c.name for c in conversations],
        "messages": messages,
        "sessions": len(per_session),
        "questions": len(next(iter(scores.values()))[budgets[0]]),
        "budgets": budgets,
        "extractor": "offline" if chat is None else chat.model_id,
        "facts": sum(per_session),
        "facts_per_session": statistics.mean(per_session),
        "answers_in_facts": found["facts"] / max(found["questions"], 1),
        "answers_in_conversation": found["conversation"] / max(found["questions"], 1),
        "answer_questions": found["questions"],
        "recall": {n: per for n, per in recall.items() if not n.endswith("answer")},
        "answer_in_context": {n: per for n, per in recall.items() if n.endswith("answer")},
        "extract_s": extract_s,
    }
    if server is not None:  # the fake server counts words: count the tokens here
        from tiermem.tokens import get_token_counter

        counter = get_token_counter("gpt-4o", exact=True)
        asked = [r.json for r in server.requests if r.path.endswith("/chat/completions")]
        counted = sum(counter.count(m["content"]) for body in asked for m in body["messages"])
        result["prompt_tokens_o200k"] = counted
    if chat is not None:
        result["llm"] = {
            "url": "local fake server" if server is not None else llm,
            "calls": extract_calls,
            "all_calls": chat.calls,
            "prompt_tokens": chat.total_usage.prompt_tokens,
            "completion_tokens": chat.total_usage.completion_tokens,
            "calls_per_100_messages": 100 * extract_calls / messages,
            "tokens_per_100_messages": 100 * chat.total_usage.total_tokens / messages,
        }
    return result


def report(result: dict[str, Any], command: str) -> None:
    from rich.console import Console

    console = Console()
    table = rich_table(
        f"LoCoMo evidence recall without and with facts ({result['questions']} questions, "
        f"{len(result['conversations'])} conversations, extractor {result['extractor']})",
        ["store: counted by", *(f"{b} tokens" for b in result["budgets"])],
    )
    for name, per in result["recall"].items():
        table.add_row(name, *(f"{per[b]:.3f}" for b in result["budgets"]))
    for name, per in result["answer_in_context"].items():
        table.add_row(f"{name} in context", *(f"{per[b]:.3f}" for b in result["budgets"]))
    console.print(table)
    console.print(
        f"{result['facts']} facts from {result['messages']} messages in {result['sessions']} "
        f"sessions: {result['facts_per_session']:.1f} per session, extracted in "
        f"{result['extract_s']:.1f} s; answers of categories 1, 2, 4 in the facts: "
        f"{result['answers_in_facts']:.3f} (in the conversation at all: "
        f"{result['answers_in_conversation']:.3f}, {result['answer_questions']} questions)"
    )
    if "prompt_tokens_o200k" in result:
        per_100 = 100 * result["prompt_tokens_o200k"] / result["messages"]
        console.print(f"prompt tokens counted with o200k_base: {per_100:.0f} per 100 messages")
    if "llm" in result:
        llm = result["llm"]
        console.print(
            f"LLM ({llm['url']}): {llm['calls']} extraction calls ({llm['all_calls']} with "
            f"summaries and synopses), {llm['calls_per_100_messages']:.2f} "
            f"per 100 messages; {llm['tokens_per_100_messages']:.0f} tokens per 100 messages "
            f"({llm['prompt_tokens']} prompt, {llm['completion_tokens']} completion)"
        )
    print(f"reproduce: {command}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("data_dir", type=locomo_folder)
    parser.add_argument("--budgets", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--quick", action="store_true", help="one conversation, 20 questions")
    parser.add_argument("--llm", default=None, help="OpenAI-compatible URL, or 'fake'")
    parser.add_argument("--model", default="local", help="the chat model's name at --llm")
    parser.add_argument("--out", type=Path, default=RESULTS / "facts.json")
    args = parser.parse_args(argv)
    result = run(args.data_dir, sorted(args.budgets), args.quick, args.llm, args.model)
    write_json(args.out, json.loads(json.dumps(result, default=str)))
    report(result, reproduce_command(__file__, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
