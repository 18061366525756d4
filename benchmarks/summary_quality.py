"""How many facts survive summarization: extractive summarizer vs lead-k vs random sentences.

For every session of every LoCoMo conversation in DATA_DIR, each method writes a
summary of at most RATIO (default 15 %) of the session's tokens. For the session's
questions of categories 1, 2 and 4 whose evidence turns all lie in that session,
it reports:

* answer in summary: the normalized answer text is a substring of the summary;
* answer-word recall: share of the answer's content words found in the summary;
* evidence kept: a sentence of an evidence turn is in the summary.

``full session`` is the ceiling (the whole transcript, no length bound).

Run: python benchmarks/summary_quality.py /work/shared/data/locomo [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from _common import locomo_folder, reproduce_command, rich_table, write_json
from tiermem.summaries.summarize import ExtractiveSummarizer
from tiermem.text import sentences
from tiermem.tokens import TokenCounter, get_token_counter

CATEGORIES = (1, 2, 4)
RANDOM_SEEDS = 5
RESULTS = Path(__file__).parent / "results" / "summary_quality.json"
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "at",
        "and",
        "or",
        "for",
        "with",
        "is",
        "was",
        "her",
        "his",
        "their",
        "my",
    ]
)


@dataclass
class Session:
    name: str
    messages: list[dict[str, str]]
    turn_sentences: dict[str, list[str]]  # dia_id -> its sentences
    questions: list[dict[str, Any]]


@dataclass
class Score:
    answered: int = 0
    recall: float = 0.0
    evidence: int = 0
    tokens: int = 0
    sessions: int = 0
    questions: int = 0
    per_session: list[float] = field(default_factory=list)

    def add(self, summary: str, session: Session, counter: TokenCounter) -> None:
        self.sessions += 1
        self.tokens += counter.count(summary)
        norm = _normalize(summary)
        hits = 0
        for qa in session.questions:
            answer = _normalize(str(qa["answer"]))
            found = bool(answer) and answer in norm
            hits += found
            words = [w for w in answer.split() if w not in _STOP] or answer.split()
            self.recall += sum(w in norm.split() for w in words) / max(len(words), 1)
            self.evidence += any(
                s in summary for ev in qa["evidence"] for s in session.turn_sentences.get(ev, [])
            )
        self.answered += hits
        self.questions += len(session.questions)
        self.per_session.append(hits / len(session.questions) if session.questions else 0.0)

    def row(self) -> dict[str, float]:
        q = max(self.questions, 1)
        return {
            "answer_in_summary": self.answered / q,
            "answer_word_recall": self.recall / q,
            "evidence_kept": self.evidence / q,
            "mean_summary_tokens": self.tokens / max(self.sessions, 1),
        }


def _normalize(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def load_sessions(data_dir: Path, quick: bool) -> list[Session]:
    """Sessions with the questions whose evidence lies entirely inside them."""
    files = sorted(data_dir.glob("*.json"))
    if not files:
        sys.exit(f"no LoCoMo *.json files in {data_dir}")
    sessions: list[Session] = []
    for path in files[:1] if quick else files:
        conversation = json.loads(path.read_text())
        speaker_a = conversation.get("speaker_a")
        names = sorted(
            (k for k in conversation if re.fullmatch(r"session_\d+", k)),
            key=lambda k: int(k.split("_")[1]),
        )
        for key in names[:3] if quick else names:
            turns = conversation[key]
            if not turns:
                continue
            ids = {t["dia_id"] for t in turns}
            questions = [
                qa
                for qa in conversation.get("qa", [])
                if qa.get("category") in CATEGORIES
                and "answer" in qa
                and qa.get("evidence")
                and all(ev in ids for ev in qa["evidence"])
            ]
            messages = [
                {
                    "role": "user" if t["speaker"] == speaker_a else "assistant",
                    "name": t["speaker"],
                    "content": t["text"],
                }
                for t in turns
            ]
            by_turn = {t["dia_id"]: sentences(t["text"]) for t in turns}
            sessions.append(Session(f"{path.stem}/{key}", messages, by_turn, questions))
    return sessions


def transcript(session: Session) -> str:
    return "\n".join(f"{m['name']}: {m['content']}" for m in session.messages)


def labelled_sentences(session: Session) -> list[str]:
    return [f"{m['name']}: {s}" for m in session.messages for s in sentences(m["content"])]


def fill(candidates: list[int], lines: list[str], budget: int, counter: TokenCounter) -> str:
    """Take sentence indices in ``candidates`` order while they fit; print in original order."""
    chosen: list[int] = []
    used = 0
    for i in candidates:
        cost = counter.count(lines[i]) + 1
        if used + cost <= budget:
            chosen.append(i)
            used += cost
    return "\n".join(lines[i] for i in sorted(chosen))


def lead_k(session: Session, budget: int, counter: TokenCounter) -> str:
    """The first sentences of the session, as many as fit."""
    lines = labelled_sentences(session)
    chosen: list[str] = []
    used = 0
    for line in lines:
        used += counter.count(line) + 1
        if used > budget:
            break
        chosen.append(line)
    return "\n".join(chosen)


def run(data_dir: Path, ratio: float, quick: bool, seed: int) -> dict[str, Any]:
    counter = get_token_counter()
    sessions = load_sessions(data_dir, quick)
    methods: dict[str, Callable[[Session, int], str]] = {
        "extractive (tiermem)": lambda s, b: ExtractiveSummarizer(
            max_tokens=b, token_counter=counter
        ).summarize(s.messages),
        "lead-k": lambda s, b: lead_k(s, b, counter),
    }
    scores = {name: Score() for name in [*methods, "random sentences", "full session"]}
    seconds = 0.0
    for session in sessions:
        budget = max(int(counter.count(transcript(session)) * ratio), 1)
        for name, method in methods.items():
            start = time.perf_counter()
            summary = method(session, budget)
            if name.startswith("extractive"):
                seconds += time.perf_counter() - start
            assert counter.count(summary) <= budget, (name, session.name)
            scores[name].add(summary, session, counter)
        lines = labelled_sentences(session)
        for k in range(RANDOM_SEEDS):
            order = list(range(len(lines)))
            random.Random(seed * 1000 + k).shuffle(order)
            scores["random sentences"].add(fill(order, lines, budget, counter), session, counter)
        scores["full session"].add(transcript(session), session, counter)
    rows = {name: score.row() for name, score in scores.items()}
    return {
        "data_dir": str(data_dir),
        "ratio": ratio,
        "sessions": len(sessions),
        "questions": scores["lead-k"].questions,
        "random_seeds": RANDOM_SEEDS,
        "extractive_ms_per_session": 1000 * seconds / max(len(sessions), 1),
        "methods": rows,
    }


def report(result: dict[str, Any], command: str) -> None:
    console = Console(width=max(Console().width, 110))
    table = rich_table(
        f"Summary quality on LoCoMo: {result['sessions']} sessions, "
        f"{result['questions']} questions (categories 1, 2, 4), "
        f"summary <= {result['ratio']:.0%} of session tokens",
        (
            "method",
            "answer in summary",
            "vs lead-k",
            "answer-word recall",
            "evidence kept",
            "mean tokens",
        ),
    )
    lead = result["methods"]["lead-k"]["answer_in_summary"]
    for name, row in result["methods"].items():
        table.add_row(
            name,
            f"{row['answer_in_summary']:.1%}",
            f"{row['answer_in_summary'] / lead:.2f}x" if lead else "-",
            f"{row['answer_word_recall']:.1%}",
            f"{row['evidence_kept']:.1%}",
            f"{row['mean_summary_tokens']:.0f}",
        )
    console.print(table)
    console.print(
        f"extractive summarizer: {result['extractive_ms_per_session']:.1f} ms per session; "
        f"random = mean of {result['random_seeds']} seeds; "
        "'full session' is the ceiling (no length bound)."
    )
    print(f"reproduce: {command}")  # one line, never wrapped


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "data_dir", type=locomo_folder, help="folder of LoCoMo conversation *.json files"
    )
    parser.add_argument("--ratio", type=float, default=0.15, help="summary budget / session")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random baseline")
    parser.add_argument("--quick", action="store_true", help="one conversation, three sessions")
    parser.add_argument("--out", type=Path, default=RESULTS, help="JSON results file")
    args = parser.parse_args(argv)
    if not 0 < args.ratio <= 1:
        parser.error("--ratio must be in (0, 1]")
    result = run(args.data_dir, args.ratio, args.quick, args.seed)
    command = reproduce_command(__file__, argv)
    result["command"] = command
    write_json(args.out, result)
    report(result, command)


if __name__ == "__main__":
    main()
