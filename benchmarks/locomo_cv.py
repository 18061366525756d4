"""LoCoMo levers chosen by leave-one-conversation-out cross-validation.

The project has five LoCoMo conversations: a parameter fitted on them may only fit them.
So each lever (a planner weight, a retrieval option) is measured on its own against the
defaults, and its value is chosen on four conversations and scored on the fifth, in turn;
the cross-validated (CV) figure is the mean over the held-out conversations' questions,
printed beside the in-sample one (the value best on all five, scored on all five). Then
the levers the CV figure supports (held-out recall above the default's) are combined: in
each fold, each at its value chosen on the other four conversations, scored on the
held-out one.

The ingested store is cached under ``--cache`` (one SQLite file per data folder and
embedder; ``--fresh`` rebuilds it), so a run spends its time on ranking: for each question
and retrieval option the planner's inputs are gathered once through ``Memory``'s own
retriever, and every planner variant plans from them (the planner is a pure function).
Each question's evidence recall is the share of its evidence turns in the rendered
context (as ``benchmarks/locomo.py``), at each budget; a lever's value is chosen by its
mean recall over the budgets.

Usage:
    python benchmarks/locomo_cv.py ../shared/data/locomo [--budgets 500 1000 2000]
        [--levers weights.keyword weights.session ...] [--quick] [--fresh]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import locomo_folder, reproduce_command, rich_table, write_json
from locomo import CATEGORIES, Conversation, answerable, ingest_turns, load, recall

RESULTS = Path(__file__).parent / "results"
CACHE = Path("/tmp/tiermem-locomo-cache")

LEVERS: dict[str, list[Any]] = {
    "weights.keyword": [0.3, 0.5, 0.7, 1.0, 1.5, 2.0],
    "weights.session": [0.15, 0.3, 0.45],
    "weights.neighbour": [0.3, 0.5, 0.7],
    "weights.temporal": [0.0, 0.3, 0.6, 1.0],
    "weights.recency": [0.0, 0.05, 0.1],
    "weights.question": [0.0, 0.1, 0.2, 0.3, 0.4],
    "weights.reply": [0.5, 0.7, 0.85, 1.0],
    "weights.when": [0.0, 0.3, 0.5, 0.7, 1.0],
    "weights.speaker": [0.0, 0.1, 0.2, 0.3, 0.5],
    "weights.generic": [0.0, 0.1, 0.2, 0.3],
    "diversity": [0.2, 0.3, 0.4],
    "follow_up": [0, 5, 10],
    "pool": [100, 150, 200],
}
"""Each lever and the values tried (the default among them). ``follow_up`` is the
retriever's: how many of the best first-pass hits lend their names, capitalised spans and
numbers to a second keyword search, and ``pool`` how many candidates each search returns
(``memory.planner.k``); the others are :class:`~tiermem.planner.settings.PlannerConfig`
fields (dotted: nested)."""
RETRIEVAL = {"follow_up", "pool"}

Config = tuple[tuple[str, Any], ...]
"""A variant: the levers set away from their defaults, sorted (() is the default)."""


@dataclass
class Scores:
    """Per variant, per question (in a fixed order): recall and tokens at each budget."""

    budgets: list[int]
    conversation: list[str] = field(default_factory=list)
    category: list[str] = field(default_factory=list)
    recall: dict[Config, list[list[float]]] = field(default_factory=dict)
    tokens: dict[Config, list[list[int]]] = field(default_factory=dict)

    def mean(self, config: Config, rows: list[int], budget: int | None = None) -> float:
        """Mean recall of ``config`` over ``rows`` at ``budget`` (None: over the budgets)."""
        columns = range(len(self.budgets)) if budget is None else [self.budgets.index(budget)]
        table = self.recall[config]
        return statistics.mean(table[r][c] for r in rows for c in columns)


def store_path(cache: Path, files: list[Path], model: str) -> Path:
    """The cached store of these conversations with this embedder."""
    key = hashlib.sha256(
        json.dumps([model, *((f.name, f.stat().st_size) for f in files)]).encode()
    ).hexdigest()[:16]
    return cache / key / "locomo.db"


def open_memory(path: Path, conversations: list[Conversation], model: str, fresh: bool) -> Any:
    """A Memory on the cached store, ingesting the conversations first when it is new."""
    from tiermem import Memory
    from tiermem.embeddings import get_embedder

    done = path.with_suffix(".done")
    if fresh or not done.exists():
        for stale in path.parent.glob(path.name + "*"):
            stale.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        done.unlink(missing_ok=True)
        memory = Memory(str(path), embedder=get_embedder(model))
        start = time.perf_counter()
        for conv in conversations:
            ingest_turns(memory, conv)
        memory.flush()
        print(f"ingested into {path} in {time.perf_counter() - start:.0f} s")
        done.touch()
        return memory
    return Memory(str(path), embedder=get_embedder(model))


def with_levers(settings: Any, config: Config) -> Any:
    """``settings`` (a PlannerConfig) with the planner levers of ``config`` set."""
    for name, value in config:
        if name in RETRIEVAL:
            continue
        *parents, leaf = name.split(".")
        chain = [settings]
        for part in parents:
            chain.append(getattr(chain[-1], part))
        updated = chain[-1].model_copy(update={leaf: value})
        for parent, part in zip(reversed(chain[:-1]), reversed(parents), strict=True):
            updated = parent.model_copy(update={part: updated})
        settings = updated
    return settings


def default_of(memory: Any, lever: str) -> Any:
    """The library's default value of ``lever``."""
    if lever in RETRIEVAL:
        return getattr(memory._retriever, lever)
    value = memory.planner.settings
    for part in lever.split("."):
        value = getattr(value, part)
    return value


def _inputs(found: Any) -> Any:
    """The planner's inputs as gathered (``Retriever.gather``'s ``finish``)."""
    return found


def evaluate(
    memory: Any,
    conversations: list[Conversation],
    configs: list[Config],
    budgets: list[int],
    quick: bool,
) -> Scores:
    """Every config's recall and tokens on every question at every budget."""
    scores = Scores(budgets)
    default_settings = memory.planner.settings
    retriever = memory._retriever
    by_retrieval: dict[Config, list[Config]] = {}
    for config in configs:
        key = tuple((n, v) for n, v in config if n in RETRIEVAL)
        by_retrieval.setdefault(key, []).append(config)
        scores.recall[config], scores.tokens[config] = [], []
    defaults = {n: getattr(retriever, n) for n in RETRIEVAL}
    for conv in conversations:
        questions = conv.questions[:20] if quick else conv.questions
        session = f"session_{conv.turns[-1].session}"
        for q, wanted in answerable(conv, questions):
            scores.conversation.append(conv.name)
            scores.category.append(CATEGORIES[q["category"]])
            for retrieval, planned in by_retrieval.items():
                for name, value in {**defaults, **dict(retrieval)}.items():
                    setattr(retriever, name, value)
                found = retriever.gather(q["question"], conv.name, session, _inputs)
                for config in planned:
                    memory.planner.settings = with_levers(default_settings, config)
                    row_recall, row_tokens = [], []
                    for budget in budgets:
                        context = memory.planner.plan(
                            q["question"],
                            max_tokens=budget,
                            recent=found.recent,
                            candidates=found.candidates,
                            summary=found.summary,
                            synopsis=found.synopsis,
                        )
                        row_recall.append(recall(context.text(), wanted))
                        row_tokens.append(context.total_tokens)
                    scores.recall[config].append(row_recall)
                    scores.tokens[config].append(row_tokens)
    memory.planner.settings = default_settings
    for name, value in defaults.items():
        setattr(retriever, name, value)
    return scores


def folds(scores: Scores) -> Iterator[tuple[str, list[int], list[int]]]:
    """(held-out conversation, training rows, held-out rows) for each conversation."""
    for held in dict.fromkeys(scores.conversation):
        train = [i for i, c in enumerate(scores.conversation) if c != held]
        test = [i for i, c in enumerate(scores.conversation) if c == held]
        yield held, train, test


def best(scores: Scores, options: list[Config], rows: list[int]) -> Config:
    """The option with the highest mean recall over ``rows`` (the first on a tie: the
    default is listed first)."""
    return max(options, key=lambda o: (round(scores.mean(o, rows), 6), -options.index(o)))


def lever_options(lever: str, values: list[Any], default: Any) -> list[Config]:
    return [()] + [((lever, v),) for v in values if v != default]


def cross_validate(scores: Scores, options: list[Config]) -> dict[str, Any]:
    """In-sample (chosen on all, scored on all) and CV (chosen on four, scored on the
    fifth) recall at each budget, and the choice of each fold."""
    everything = list(range(len(scores.conversation)))
    chosen_all = best(scores, options, everything)
    held_rows: list[int] = []
    picks: dict[str, Config] = {}
    cv_rows: dict[int, list[float]] = {}
    for held, train, test in folds(scores):
        pick = best(scores, options, train)
        picks[held] = pick
        for r in test:
            held_rows.append(r)
            cv_rows[r] = scores.recall[pick][r]
    return {
        "in_sample_choice": chosen_all,
        "fold_choices": picks,
        "in_sample": summary(scores, {r: scores.recall[chosen_all][r] for r in everything}),
        "cv": summary(scores, cv_rows),
        "default": summary(scores, {r: scores.recall[()][r] for r in everything}),
    }


def summary(scores: Scores, rows: dict[int, list[float]]) -> dict[str, Any]:
    """Mean recall per budget and, at the largest budget, per category."""
    last = len(scores.budgets) - 1
    by_category: dict[str, list[float]] = {}
    for r, values in rows.items():
        by_category.setdefault(scores.category[r], []).append(values[last])
    return {
        "recall": {
            b: statistics.mean(v[i] for v in rows.values()) for i, b in enumerate(scores.budgets)
        },
        "category": {c: statistics.mean(v) for c, v in sorted(by_category.items())},
    }


def mean_tokens(scores: Scores, config: Config) -> dict[int, float]:
    table = scores.tokens[config]
    return {b: statistics.mean(row[i] for row in table) for i, b in enumerate(scores.budgets)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    files = sorted(args.data_dir.glob("*.json"))
    conversations = [load(f) for f in files]
    memory = open_memory(
        store_path(args.cache, files, args.model), conversations, args.model, args.fresh
    )
    try:
        grids = {lever: LEVERS[lever] for lever in args.levers}
        defaults = {lever: default_of(memory, lever) for lever in grids}
        options = {lever: lever_options(lever, v, defaults[lever]) for lever, v in grids.items()}
        configs = list(dict.fromkeys(o for opts in options.values() for o in opts))
        start = time.perf_counter()
        scores = evaluate(memory, conversations, configs, args.budgets, args.quick)
        levers = {lever: cross_validate(scores, opts) for lever, opts in options.items()}
        # the combination: in each fold (and on all), every lever the CV figure supports
        # (its held-out mean over the budgets above the default's) at its choice
        kept = {
            lever: result
            for lever, result in levers.items()
            if statistics.mean(result["cv"]["recall"].values())
            > statistics.mean(result["default"]["recall"].values())
        }
        combos: dict[str, Config] = {}
        for held in [*dict.fromkeys(scores.conversation), "all"]:
            key = "in_sample_choice" if held == "all" else "fold_choices"
            combo = []
            for result in kept.values():
                pick = result[key] if held == "all" else result[key][held]
                combo += list(pick)
            combos[held] = tuple(sorted(combo))
        extra = [c for c in dict.fromkeys(combos.values()) if c not in scores.recall]
        if extra:
            more = evaluate(memory, conversations, extra, args.budgets, args.quick)
            scores.recall |= more.recall
            scores.tokens |= more.tokens
        rows = range(len(scores.conversation))
        cv_rows = {r: scores.recall[combos[scores.conversation[r]]][r] for r in rows}
        combined = {
            "choices": combos,
            "kept": list(kept),
            "in_sample": summary(scores, {r: scores.recall[combos["all"]][r] for r in rows}),
            "cv": summary(scores, cv_rows),
            "default": summary(scores, {r: scores.recall[()][r] for r in rows}),
            "tokens": {
                "default": mean_tokens(scores, ()),
                "combined": mean_tokens(scores, combos["all"]),
            },
        }
        return {
            "conversations": [c.name for c in conversations],
            "questions": len(scores.conversation),
            "budgets": args.budgets,
            "defaults": defaults,
            "levers": levers,
            "combined": combined,
            "values": {
                "|".join(f"{n}={v}" for n, v in c) or "default": {
                    "recall": summary(scores, {r: scores.recall[c][r] for r in rows})["recall"],
                    "tokens": mean_tokens(scores, c),
                }
                for c in scores.recall
            },
            "seconds": time.perf_counter() - start,
        }
    finally:
        memory.close()


def label(config: Config) -> str:
    return (
        ", ".join(f"{n} {v:g}" if isinstance(v, float) else f"{n} {v}" for n, v in config)
        or "default"
    )


def report(result: dict[str, Any], command: str) -> None:
    from rich.console import Console

    console = Console()
    budgets = result["budgets"]
    table = rich_table(
        f"LoCoMo levers, leave-one-conversation-out ({result['questions']} questions, "
        f"{len(result['conversations'])} conversations): mean recall, default -> in-sample / CV",
        ["lever (default)", "in-sample choice", "fold choices", *(f"{b} tokens" for b in budgets)],
    )
    for lever, res in result["levers"].items():
        choices = ", ".join(
            f"{v[0][1]:g}" if v and isinstance(v[0][1], float) else (str(v[0][1]) if v else "d")
            for v in res["fold_choices"].values()
        )
        table.add_row(
            f"{lever} ({result['defaults'][lever]})",
            label(res["in_sample_choice"]),
            choices,
            *(
                f"{res['default']['recall'][b]:.3f} -> {res['in_sample']['recall'][b]:.3f} / "
                f"{res['cv']['recall'][b]:.3f}"
                for b in budgets
            ),
        )
    console.print(table)
    combined = result["combined"]
    cats = list(combined["default"]["category"])
    both = rich_table(
        f"All levers at their chosen values (in-sample: {label(combined['choices']['all'])})",
        ["", *(f"{b} tokens" for b in budgets), *(f"{c} @{budgets[-1]}" for c in cats)],
    )
    for name in ("default", "in_sample", "cv"):
        part = combined[name]
        both.add_row(
            name,
            *(f"{part['recall'][b]:.3f}" for b in budgets),
            *(f"{part['category'][c]:.3f}" for c in cats),
        )
    console.print(both)
    tokens = combined["tokens"]
    print(
        "mean tokens, default: "
        + ", ".join(f"{b}: {tokens['default'][b]:.0f}" for b in budgets)
        + "; in-sample combination: "
        + ", ".join(f"{b}: {tokens['combined'][b]:.0f}" for b in budgets)
    )
    print(f"ranking time {result['seconds']:.0f} s")
    print(f"reproduce: {command}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=locomo_folder)
    parser.add_argument("--budgets", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--levers", nargs="+", default=list(LEVERS), choices=list(LEVERS))
    parser.add_argument("--quick", action="store_true", help="20 questions per conversation")
    parser.add_argument("--model", default="local/all-MiniLM-L6-v2")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where ingested stores are kept")
    parser.add_argument("--fresh", action="store_true", help="ingest again, ignoring the cache")
    parser.add_argument("--out", type=Path, default=RESULTS / "locomo_cv.json")
    args = parser.parse_args(argv)
    if len(list(args.data_dir.glob("*.json"))) < 2:
        parser.error("cross-validation needs at least two conversations")
    args.budgets = sorted(args.budgets)
    result = run(args)
    write_json(args.out, json.loads(json.dumps(result, default=str)))
    report(result, reproduce_command(__file__, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
