"""Turning a batch of messages into fact candidates: offline rules, or one LLM call.

Both extractors see the batch (each message labelled ``m1``, ``m2``...) and the user's
current facts most related to it (``f1``, ``f2``...). The offline extractor
(:class:`OfflineExtractor`) keeps the first-person statements that carry a name, a
number, a date or a preference, deterministically and without a key. The LLM extractor
(:class:`LLMExtractor`) asks for facts and, for each, a decision against the known facts
(add, update, supersede, none) in the same call, as JSON: through a JSON schema when the
provider takes one (OpenAI-compatible servers), in the prompt otherwise; the answer is
parsed tolerantly (code fences, prose around the JSON, a bare list, numeric labels) and
an answer with no usable JSON raises :class:`~tiermem.errors.MalformedAnswerError`.
Its calls go through the model's circuit breaker (:mod:`tiermem.breaker`): while the
model rests, :class:`~tiermem.breaker.CircuitOpenError` is raised at once and the fact
worker waits and retries the batch later.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from tiermem.breaker import guarded
from tiermem.errors import InputError, MalformedAnswerError, ProviderError
from tiermem.planner.temporal import MONTHS
from tiermem.text import folded, sentences, term_set

log = logging.getLogger(__name__)

ACTIONS = ("add", "update", "supersede", "none")
MAX_FACT_CHARS = 500


@dataclass(frozen=True)
class SourceMessage:
    """A message of the batch: its id, label (``m3``), line, speaker and time."""

    message_id: str
    label: str
    line: str
    text: str
    speaker: str
    role: str
    timestamp: datetime


@dataclass(frozen=True)
class KnownFact:
    """A current fact of the user shown to the extractor: its id, label and text."""

    memory_id: str
    label: str
    text: str


@dataclass
class FactCandidate:
    """A fact read from the batch. ``action`` is the extractor's decision against the
    known facts (``None``: decide by rules), ``target`` the known fact's id it concerns,
    ``slot`` what the fact is about (offline: a later value of the same slot supersedes),
    ``claim`` what makes two facts one (default: the text, case and punctuation folded)."""

    text: str
    sources: tuple[str, ...]
    action: str | None = None
    target: str | None = None
    slot: str | None = None
    claim: str | None = None


class Extractor(Protocol):
    """What turns a batch into candidates; ``name`` is recorded on each fact."""

    name: str

    def extract(
        self, messages: list[SourceMessage], known: list[KnownFact]
    ) -> list[FactCandidate]: ...


# -- offline ---------------------------------------------------------------------------

_MONTHS = [m.lower() for m in MONTHS]
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|im|my|me|mine|myself|we|we're|we've|our|ours|us)\b", re.I
)
_PREFERENCE = re.compile(
    r"\b(?:love[sd]?|loving|like[sd]?|prefer(?:s|red)?|favou?rite|enjoy(?:s|ed)?|hate[sd]?"
    r"|passionate|fan of|into|dream|hobby|hobbies)\b",
    re.I,
)
_NUMBER = re.compile(
    r"\b\d+(?:[.,:]\d+)?\b|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven"
    r"|twelve|twenty|thirty|hundred|thousand|dozen|first|second|third)\b",
    re.I,
)
_DATE = re.compile(
    r"\b(?:"
    + "|".join(_MONTHS + _WEEKDAYS)
    + r"|yesterday|today|tomorrow|tonight|weekend|ago|last (?:week|month|year|night)"
    r"|next (?:week|month|year)|(?:19|20)\d\d)\b",
    re.I,
)
_CAPITALIZED = re.compile(r"\b[A-Z][a-zA-Z'-]+")
_NOT_NAMES = {"I", "I'm", "I've", "I'd", "I'll", "Im", "Oh", "Wow", "Hey", "Hi", "Yeah"}
_SLOTS = (
    (re.compile(r"\bI(?:'m| am)?(?: now)? (?:live|living|moved) (?:in|to) (\w+)", re.I), "home"),
    (re.compile(r"\bI(?: now)? work (?:at|for) (\w+)", re.I), "employer"),
    (re.compile(r"\bI(?:'m| am) (\d+) years old\b", re.I), "age"),
    (re.compile(r"\bmy favou?rite (\w+) is\b", re.I), "favourite {}"),
    (re.compile(r"\bmy (\w+)'s name is\b", re.I), "name of {}"),
)
MIN_WORDS = 4
MAX_WORDS = 60


def _signals(sentence: str) -> bool:
    """Whether a sentence carries a name, a number, a date or a preference."""
    if _PREFERENCE.search(sentence) or _NUMBER.search(sentence) or _DATE.search(sentence):
        return True
    words = sentence.split()
    later = " ".join(words[1:])
    lowered = {w.lower() for w in _MONTHS + _WEEKDAYS}
    return any(
        w not in _NOT_NAMES and w.lower() not in lowered for w in _CAPITALIZED.findall(later)
    )


def _slot(sentence: str) -> str | None:
    for pattern, name in _SLOTS:
        match = pattern.search(sentence)
        if match is not None:
            return name.format(match.group(1).lower()) if "{}" in name else name
    return None


def date_label(value: datetime) -> str:
    """``8 May 2023``: the date a fact was said, written into offline facts."""
    return f"{value.day} {value.strftime('%B')} {value.year}"


class OfflineExtractor:
    """Keeps first-person statements with a name, number, date or preference.

    Each kept sentence becomes ``"{speaker} ({date}): {sentence}"`` (the date makes
    "yesterday" answerable later); only the user's own messages are read. Deterministic:
    the same batch gives the same facts.
    """

    name = "offline"

    def extract(self, messages: list[SourceMessage], known: list[KnownFact]) -> list[FactCandidate]:
        out: list[FactCandidate] = []
        for message in messages:
            if message.role != "user":
                continue
            for sentence in sentences(message.text):
                sentence = " ".join(sentence.split())
                words = len(sentence.split())
                if sentence.endswith("?") or not MIN_WORDS <= words <= MAX_WORDS:
                    continue
                if not _FIRST_PERSON.search(sentence) or not _signals(sentence):
                    continue
                slot = _slot(sentence)
                out.append(
                    FactCandidate(
                        f"{message.speaker} ({date_label(message.timestamp)}): {sentence}",
                        (message.message_id,),
                        slot=None if slot is None else f"{message.speaker.lower()}|{slot}",
                        claim=folded(f"{message.speaker}: {sentence}"),
                    )
                )
        return out


# -- LLM ------------------------------------------------------------------------------

SYSTEM = (
    "You keep a record of durable facts about the people in a conversation. "
    "You read new messages, write down the facts they state, and reconcile them with "
    "the facts already known. Answer with JSON only."
)

INSTRUCTIONS = """Write each fact the new messages state as one short sentence that stands \
alone: name the person (never "I" or "he"), and write dates as dates (the message date \
tells what "yesterday" or "last week" means). Keep names, relations, places, jobs, \
events, numbers, dates, plans and preferences; skip greetings, questions and small talk.

For each fact give:
- "sources": the ids of the messages it comes from (e.g. ["m2"]),
- "action": "add" if it is new; "update" if it states a known fact more fully or \
correctly; "supersede" if a known fact is no longer true because of it (someone moved, \
changed jobs, changed their mind); "none" if a known fact already says it,
- "target": the id of that known fact (e.g. "f3"), or null for "add".

Answer exactly in this form, with no other text:
{"facts": [{"text": "Ana moved to Porto in May 2023.", "sources": ["m1"], \
"action": "supersede", "target": "f2"}]}
If the messages state no fact, answer {"facts": []}."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "sources": {"type": "array", "items": {"type": "string"}},
                    "action": {"type": "string", "enum": list(ACTIONS)},
                    "target": {"type": ["string", "null"]},
                },
                "required": ["text", "sources", "action", "target"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}


def build_prompt(messages: list[SourceMessage], known: list[KnownFact]) -> list[dict[str, str]]:
    """The chat messages of one extraction call."""
    facts = "\n".join(f"{k.label}: {k.text}" for k in known) or "(none yet)"
    lines = "\n".join(
        f"{m.label} [{date_label(m.timestamp)}] {m.line}".replace("\n", " ") for m in messages
    )
    user = f"Known facts:\n{facts}\n\nNew messages:\n{lines}\n\n{INSTRUCTIONS}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def _json_value(text: str) -> Any:
    """The first JSON object or array in ``text`` (fences and prose around it ignored)."""
    stripped = re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip(), flags=re.I)
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", stripped):
        try:
            return decoder.raw_decode(stripped, match.start())[0]
        except ValueError:
            continue
    raise MalformedAnswerError(f"the fact extraction answer holds no JSON: {text[:200]!r}")


def _label(value: Any, prefix: str, by_label: dict[str, str]) -> str | None:
    """The id a label names: ``"m3"``, ``"3"`` or ``3`` (None if it names nothing)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value).strip().lower()
    if not text.startswith(prefix):
        text = prefix + text
    return by_label.get(text)


def _closest(text: str, messages: list[SourceMessage]) -> tuple[str, ...]:
    """The message sharing the most words with a fact (when the model gave no source)."""
    words = term_set(text)
    best = max(messages, key=lambda m: len(words & term_set(m.text)))
    return (best.message_id,)


def parse_facts(
    text: str, messages: list[SourceMessage], known: list[KnownFact]
) -> list[FactCandidate]:
    """Read the model's answer tolerantly; raise MalformedAnswerError if nothing is usable.

    Accepted: ``{"facts": [...]}``, a bare list, one fact object; facts as objects
    (``text``, or ``fact`` / ``content``) or plain strings; labels as ``"m2"``, ``"2"``
    or ``2``. An unknown action is "add"; an action whose target is not a known fact is
    "add" too. Facts without text are skipped; if every fact is unusable, the answer is
    malformed.
    """
    data = _json_value(text)
    items = data.get("facts", data if "text" in data else None) if isinstance(data, dict) else data
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        raise MalformedAnswerError(f"no list of facts in the answer: {text[:200]!r}")
    sources = {m.label: m.message_id for m in messages}
    targets = {k.label: k.memory_id for k in known}
    out: list[FactCandidate] = []
    for item in items:
        entry = {"text": item} if isinstance(item, str) else item
        if not isinstance(entry, dict):
            continue
        fact = next(
            (entry[k] for k in ("text", "fact", "content") if isinstance(entry.get(k), str)), ""
        )
        fact = " ".join(fact.split())[:MAX_FACT_CHARS]
        if not fact:
            continue
        raw = entry.get("sources", entry.get("source", []))
        found = [_label(s, "m", sources) for s in (raw if isinstance(raw, list) else [raw])]
        ids = tuple(dict.fromkeys(i for i in found if i is not None)) or _closest(fact, messages)
        action = str(entry.get("action") or "add").strip().lower()
        target = _label(entry.get("target"), "f", targets)
        if action not in ACTIONS or (action != "add" and target is None):
            action, target = "add", None
        out.append(FactCandidate(fact, ids, action, target if action != "add" else None))
    if items and not out:
        raise MalformedAnswerError(f"no usable fact in the answer: {text[:200]!r}")
    return out


class LLMExtractor:
    """One chat call per batch: facts and their decisions against the known facts.

    Args:
        llm: a chat model (:mod:`tiermem.llm`).
        structured: ``"auto"`` (a JSON schema for OpenAI-compatible providers, the prompt
            alone for others), ``"json_schema"`` or ``"prompt"``. A server that rejects
            the schema (HTTP 400) is asked again without it, and not given one again.
        max_tokens: the most tokens the answer may take.
    """

    def __init__(self, llm: Any, *, structured: str = "auto", max_tokens: int = 2000) -> None:
        if structured not in ("auto", "json_schema", "prompt"):
            raise InputError(
                "structured",
                f"{structured!r} is not a way to ask",
                "use auto, json_schema or prompt",
            )
        self.llm = llm
        self.name = str(getattr(llm, "model_id", type(llm).__name__))
        if structured == "auto":
            structured = "json_schema" if getattr(llm, "provider", "") == "openai" else "prompt"
        self.structured = structured
        self.max_tokens = max_tokens
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def extract(self, messages: list[SourceMessage], known: list[KnownFact]) -> list[FactCandidate]:
        if not messages:
            return []
        answer = self._complete(build_prompt(messages, known))
        return parse_facts(answer, messages, known)

    def _complete(self, prompt: list[dict[str, str]]) -> str:
        options: dict[str, Any] = {"temperature": 0, "max_tokens": self.max_tokens}
        if self.structured == "json_schema":
            options["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "facts", "strict": True, "schema": SCHEMA},
            }
        llm = self.llm
        try:
            completion = guarded(llm, lambda: llm.complete(prompt, **options))
        except ProviderError as exc:
            if "response_format" not in options or "HTTP 400" not in str(exc):
                raise
            log.warning("the model rejected a JSON schema (%s); asking in the prompt", exc)
            self.structured = "prompt"
            self.calls += 1
            options.pop("response_format")
            completion = guarded(llm, lambda: llm.complete(prompt, **options))
        self.calls += 1
        usage = getattr(completion, "usage", None)
        self.prompt_tokens += int(getattr(usage, "prompt_tokens", 0))
        self.completion_tokens += int(getattr(usage, "completion_tokens", 0))
        return str(getattr(completion, "text", completion))
