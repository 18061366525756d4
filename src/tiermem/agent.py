"""Agent: a chat loop that reads its prompt from memory and writes each exchange back.

Seed 000's ``Agent(name, model, system_message, buffer_memory=...)`` and seed 004's
``Agent(memory_retention=...)`` / ``await agent.run(prompt)``. On every turn the agent

1. builds the prompt: its system message, then what its memory gives (a
   :class:`~tiermem.BufferMemory`'s formatted messages, a :class:`~tiermem.Memory`'s
   token-budgeted :meth:`~tiermem.Memory.get_context`, or a
   :class:`~tiermem.patterns.ConversationMemory`), then the new user message;
2. calls the LLM (any provider of :mod:`tiermem.llm`); when the model calls tools, runs
   them and calls it again with the results, up to ``max_tool_rounds`` times;
3. records the whole exchange (user message, tool calls with their results, reply) in
   the memory in one step, only once the model has answered.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tiermem.aio.twins import Call, Calls, Steps, stepped, stepped_twin
from tiermem.buffer.memory import BufferMemory
from tiermem.errors import ConfigError, InputError, InvalidSizeError, InvalidTypeError
from tiermem.llm.base import LLM, Completion
from tiermem.messages import Message
from tiermem.patterns.conversation import ConversationMemory, MemoryManager
from tiermem.patterns.token_limits import manage_token_limit, summarize_memory

Tool = Callable[..., Any]
_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}
_JSON_TYPES_ANY: dict[Any, str] = {list: "array", dict: "object", **_JSON_TYPES}
NO_MODEL_HINT = (
    "pass model=OpenAIModel('gpt-4o-mini') / get_llm('anthropic/claude-3-5-haiku-latest'), "
    "or configure a chat model (llm.models: [{chat: openai/gpt-4o-mini}])"
)


class Agent(Calls):
    """An LLM agent with memory (seeds 000 and 004).

    Args:
        name: the agent's name (its conversation's key in a :class:`MemoryManager`).
        model: an :class:`~tiermem.llm.LLM` or a model string for
            :func:`~tiermem.llm.get_llm`; may be given later, before the first call.
        system_message: sent first on every call.
        buffer_memory: a :class:`~tiermem.BufferMemory` holding the conversation.
        memory: a :class:`~tiermem.Memory` (then ``user_id`` is required) or a
            :class:`~tiermem.patterns.ConversationMemory`.
        user_id, session_id: whose conversation, with a ``Memory``.
        memory_retention: without ``buffer_memory`` / ``memory``, the retention policy of
            the agent's own :class:`MemoryManager` (``single_run`` forgets after each run,
            ``session`` keeps, ``persistent`` saves after each run).
        memory_manager: share a manager between agents instead.
        tools: functions the model may call (a list, or a dict name -> function); their
            JSON schema is read from the signature and the docstring's first line.
        max_context_tokens: token budget of the history (``Memory.get_context``'s
            ``max_tokens``; trims a buffer or conversation with the same counter).
        max_tool_rounds: tool-call rounds per turn before the model must answer.
        **options: default request options (``temperature``, ``max_tokens``...).
    """

    def __init__(
        self,
        name: str = "assistant",
        model: LLM | str | None = None,
        system_message: str | None = None,
        *,
        buffer_memory: BufferMemory | None = None,
        memory: Any = None,
        user_id: str | None = None,
        session_id: str | None = None,
        memory_retention: str = "session",
        memory_manager: MemoryManager | None = None,
        tools: Sequence[Tool] | Mapping[str, Tool] | None = None,
        max_context_tokens: int | None = None,
        max_tool_rounds: int = 5,
        **options: Any,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise InvalidTypeError("name", f"expected a non-empty str, got {name!r}")
        if system_message is not None and not isinstance(system_message, str):
            raise InvalidTypeError("system_message", "expected a str or None")
        if buffer_memory is not None and memory is not None:
            raise InputError("memory", "both buffer_memory and memory were given", "pass one")
        if buffer_memory is not None and not isinstance(buffer_memory, BufferMemory):
            raise InvalidTypeError(
                "buffer_memory", f"expected a BufferMemory, got {buffer_memory!r}"
            )
        _check_memory(memory, user_id)
        for field, value, low in (
            ("max_context_tokens", max_context_tokens, 1),
            ("max_tool_rounds", max_tool_rounds, 0),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < low
            ):
                raise InvalidSizeError(field, f"must be an int >= {low}, got {value!r}")
        self.name = name
        self.system_message = system_message
        self.buffer_memory = buffer_memory
        self.user_id = user_id
        self.session_id = session_id
        self.memory_manager = memory_manager or (
            MemoryManager(memory_retention) if buffer_memory is None and memory is None else None
        )
        self._memory = buffer_memory if buffer_memory is not None else memory
        self.tools = _tool_table(tools)
        self.max_context_tokens = max_context_tokens
        self.max_tool_rounds = max_tool_rounds
        self.options = options
        self.model: LLM | None = None
        self.set_model(model)
        self.last_completion: Completion | None = None

    # -- configuration -----------------------------------------------------------------

    def set_model(self, model: LLM | str | None) -> None:
        """Use ``model`` (an LLM or a ``provider/model`` string) from now on."""
        if isinstance(model, str):
            from tiermem.llm import get_llm

            model = get_llm(model)
        if model is not None and not isinstance(model, LLM):
            raise InvalidTypeError(
                "model", f"{type(model).__name__} has no complete()/acomplete()", NO_MODEL_HINT
            )
        self.model = model

    @property
    def memory(self) -> Any:
        """The memory the agent reads and writes (a conversation of its manager by default)."""
        if self._memory is None:
            assert self.memory_manager is not None
            self._memory = self.memory_manager.get_memory(self.name)
        return self._memory

    def _llm(self) -> LLM:
        if self.model is None:
            raise ConfigError("model", f"agent {self.name!r} has no chat model", NO_MODEL_HINT)
        return self.model

    # -- one turn ----------------------------------------------------------------------

    def chat(self, message: str, **options: Any) -> str:
        """Send ``message``, run any tools the model calls, record the exchange, return
        the reply text."""
        return self._turn(message, None, **options).text

    async def achat(self, message: str, **options: Any) -> str:
        """Async twin of :meth:`chat` (runs through :meth:`run`, so subclasses that
        override :meth:`_run` apply)."""
        return (await self.run(message, **options)).text

    async def run(self, prompt: str, context: str | None = None, **options: Any) -> Message:
        """Seed 004's entry point: one turn, returning the reply as a :class:`Message`
        (``.content`` is its text). ``context`` is extra system text for this turn only."""
        return await self._run(prompt, context, **options)

    @stepped
    def _turn(self, /, prompt: str, context: str | None, **options: Any) -> Steps[Message]:
        """One turn, written once (a stepped method): its waits are the history, each
        model call, each tool call and the recording of the exchange."""
        if context is not None and not isinstance(context, str):
            raise InvalidTypeError(
                "context", f"expected a str or None, got {type(context).__name__}"
            )
        user = self._user_message(prompt)
        history = yield from self._history(user.text)
        if context:
            history.append({"role": "system", "content": context})
        base = self._base(history, user)
        turn: list[Message] = []
        llm = self._llm()
        for final in self._rounds():
            request = self._request(base, turn)
            completion = yield Call(
                llm.complete, llm.acomplete, request, **self._options(final, options)
            )
            reply = self._reply(completion)
            turn.append(reply)
            if not reply.tool_calls:
                break
            for call in reply.tool_calls:
                turn.append((yield Call(self._run_tool, self._arun_tool, call)))
        yield Call(self._record, None, user, turn)
        return turn[-1]

    _run = stepped_twin(_turn)

    def _rounds(self) -> list[bool]:
        """One flag per allowed model call: True on the last, which offers no tools."""
        return [False] * self.max_tool_rounds + [True] if self.tools else [True]

    def _user_message(self, text: Any) -> Message:
        if not isinstance(text, str):
            raise InvalidTypeError("message", f"expected str, got {type(text).__name__}")
        if not text.strip():
            raise InputError("message", "is empty", "send some text")
        return Message("user", text)

    def _base(self, history: list[dict[str, Any]], user: Message) -> list[dict[str, Any]]:
        system = [{"role": "system", "content": self.system_message}] if self.system_message else []
        return [*system, *history, user.to_openai()]

    @staticmethod
    def _request(base: list[dict[str, Any]], turn: list[Message]) -> list[dict[str, Any]]:
        return base + [m.to_openai() for m in turn]

    def _options(self, final: bool, options: Mapping[str, Any]) -> dict[str, Any]:
        merged = {**self.options, **options}
        if self.tools and not final:
            merged["tools"] = _tool_specs(self.tools, _provider(self._llm()))
        return merged

    # -- memory ------------------------------------------------------------------------

    def _history(self, query: str) -> Steps[list[dict[str, Any]]]:
        """The conversation so far, in OpenAI format, from whichever memory the agent has
        (a ``Memory``'s context is a wait)."""
        memory = self.memory
        if _is_facade(memory):
            context = yield Call(
                memory.get_context,
                memory.aget_context,
                query,
                self.user_id,
                self.session_id,
                self.max_context_tokens,
            )
            return list(context.messages)
        return self._local_history(memory)

    def _local_history(self, memory: BufferMemory | ConversationMemory) -> list[dict[str, Any]]:
        if self.max_context_tokens is not None:
            return [m.to_openai() for m in manage_token_limit(memory, self.max_context_tokens)]
        if isinstance(memory, BufferMemory):
            return memory.get_formatted_messages()
        return memory.to_llm_format()

    def _record(self, user: Message, turn: list[Message]) -> None:
        """Write the exchange to the memory, then apply the manager's retention policy."""
        exchange = [user, *turn]
        memory = self.memory
        if _is_facade(memory):
            memory.add_messages(exchange, self.user_id, self.session_id)
        elif isinstance(memory, BufferMemory):
            memory.extend(exchange)
        else:
            for message in exchange:
                memory.add_message(message)
        if self.memory_manager is not None:
            self.memory_manager.apply_retention_policy()

    async def _compress_memory(self, chunk_size: int | None = None) -> str:
        """Summarize all but the newest ``chunk_size`` messages (default: half) of a
        :class:`ConversationMemory`, with the agent's model or the offline summarizer.
        Buffers and ``Memory`` summarize on their own: nothing to do (returns ``""``)."""
        memory = self.memory
        if not isinstance(memory, ConversationMemory):
            return ""
        from tiermem.summaries.summarize import ExtractiveSummarizer, MemorySummarizer

        summarizer = (
            MemorySummarizer(self.model) if self.model is not None else ExtractiveSummarizer()
        )
        keep = len(memory) // 2 if chunk_size is None else chunk_size
        return await summarize_memory(memory, summarizer, keep)

    # -- model replies and tools -------------------------------------------------------

    def _reply(self, completion: Completion) -> Message:
        self.last_completion = completion
        calls = _tool_calls(completion.raw)
        return Message(
            "assistant",
            completion.text,
            tool_calls=calls or None,
            metadata={"agent": self.name, "model": completion.model},
        )

    def _prepare(self, call: dict[str, Any]) -> tuple[Tool | None, dict[str, Any] | str]:
        """The tool a call names and its arguments (or an error text for the model)."""
        function = call["function"]
        tool = self.tools.get(function["name"])
        if tool is None:
            return None, f"error: no tool named {function['name']!r}"
        raw = function.get("arguments") or "{}"
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else dict(raw)
        except (ValueError, TypeError) as exc:
            return None, f"error: arguments are not a JSON object ({exc})"
        if not isinstance(arguments, dict):
            return None, "error: arguments are not a JSON object"
        return tool, arguments

    def _run_tool(self, call: dict[str, Any]) -> Message:
        tool, arguments = self._prepare(call)
        if tool is None:
            return _tool_message(call, arguments)
        try:
            result = tool(**arguments)  # type: ignore[arg-type]
            if inspect.isawaitable(result):
                raise InvalidTypeError("tools", "async tools need achat() or run()")
        except Exception as exc:  # the model sees the failure next to its call
            result = f"error: {type(exc).__name__}: {exc}"
        return _tool_message(call, result)

    async def _arun_tool(self, call: dict[str, Any]) -> Message:
        tool, arguments = self._prepare(call)
        if tool is None:
            return _tool_message(call, arguments)
        try:
            if inspect.iscoroutinefunction(tool):
                result = await tool(**arguments)  # type: ignore[arg-type]
            else:
                result = await asyncio.to_thread(tool, **arguments)  # type: ignore[arg-type]
        except Exception as exc:
            result = f"error: {type(exc).__name__}: {exc}"
        return _tool_message(call, result)

    def __repr__(self) -> str:
        model = getattr(self.model, "model_id", None)
        return f"Agent({self.name!r}, model={model!r}, memory={type(self._memory).__name__})"


# -- helpers ---------------------------------------------------------------------------


def _is_facade(memory: Any) -> bool:
    from tiermem.memory import Memory

    return isinstance(memory, Memory)


def _check_memory(memory: Any, user_id: str | None) -> None:
    if memory is None or isinstance(memory, ConversationMemory):
        return
    if not _is_facade(memory):
        raise InvalidTypeError(
            "memory",
            f"expected a tiermem Memory or ConversationMemory, got {type(memory).__name__}",
            "pass a BufferMemory as buffer_memory=",
        )
    if not isinstance(user_id, str) or not user_id.strip():
        from tiermem.errors import MissingUserError

        raise MissingUserError("user_id", "is required with memory=Memory(...)", "pass user_id=")


def _provider(llm: LLM) -> str:
    return str(getattr(llm, "provider", "openai"))


def _tool_table(tools: Sequence[Tool] | Mapping[str, Tool] | None) -> dict[str, Tool]:
    if tools is None:
        return {}
    items = (
        tools.items()
        if isinstance(tools, Mapping)
        else [(getattr(t, "__name__", ""), t) for t in tools]
    )
    table: dict[str, Tool] = {}
    for name, tool in items:
        if not callable(tool) or not isinstance(name, str) or not name:
            raise InvalidTypeError("tools", f"{tool!r} is not a named callable")
        table[name] = tool
    return table


def tool_schema(name: str, tool: Tool) -> dict[str, Any]:
    """The JSON schema of a tool's parameters, from its signature and type hints."""
    try:
        hints = typing.get_type_hints(tool)
    except Exception:  # unresolvable annotations: fall back to untyped
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(tool).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        hint = hints.get(param.name)
        json_type = _JSON_TYPES_ANY.get(typing.get_origin(hint) or hint)
        properties[param.name] = {"type": json_type} if json_type else {}
        if param.default is param.empty:
            required.append(param.name)
    doc = inspect.getdoc(tool) or ""
    return {
        "name": name,
        "description": doc.splitlines()[0] if doc else name,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }


def _tool_specs(tools: Mapping[str, Tool], provider: str) -> list[dict[str, Any]]:
    specs = [tool_schema(name, tool) for name, tool in tools.items()]
    if provider == "anthropic":
        return [
            {"name": s["name"], "description": s["description"], "input_schema": s["parameters"]}
            for s in specs
        ]
    return [{"type": "function", "function": s} for s in specs]


def _tool_calls(raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Tool calls of a raw OpenAI or Anthropic response, in OpenAI shape."""
    choices = raw.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        calls = (choices[0].get("message") or {}).get("tool_calls") or []
        return [c for c in calls if isinstance(c, dict) and c.get("id") and c.get("function")]
    blocks = raw.get("content")
    if not isinstance(blocks, list):
        return []
    return [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": json.dumps(b.get("input") or {})},
        }
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]


def _tool_message(call: dict[str, Any], result: Any) -> Message:
    text = result if isinstance(result, str) else json.dumps(result, default=str)
    return Message("tool", text, tool_call_id=call["id"], name=call["function"]["name"])


__all__ = ["Agent", "tool_schema"]
