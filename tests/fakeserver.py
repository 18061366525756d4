"""A scriptable HTTP server speaking the OpenAI and Anthropic protocols, for provider tests.

It runs in a thread on 127.0.0.1 (ephemeral port) and answers

* ``POST /v1/chat/completions`` (OpenAI chat completions),
* ``POST /v1/embeddings`` (OpenAI embeddings; vectors from a callable the test gives),
* ``POST /v1/messages`` (Anthropic messages; checks ``x-api-key`` and ``anthropic-version``).

Tests script it per request: a queue of :class:`Reply` (status, raw body, headers,
delay) is consumed first, then the defaults apply (``delay``, ``api_key``, the
``chat_reply`` / ``embed`` callables). Every request is recorded in ``requests``.

Tests check order and overlap, never durations: ``answered`` counts the replies written so
far (a client that gave up before it is 0), ``max_in_flight`` is the most requests held
at the same time, ``hold_until(n)`` holds every request until ``n`` are in flight
together (calls that do not overlap never get there: they are let go after ``timeout``),
and ``pause(after)`` holds every request after the first ``after`` until ``resume()``.

Outages: ``stop()`` then ``start()`` again serves on the same port (connection refused in
between); ``outage_status = 503`` answers every request with that status until set back
to None. An ``embed`` callable that raises :class:`Refusal` answers with its status, as an
API refuses one input (400).

Usage::

    with FakeServer() as server:
        server.enqueue(Reply(status=429, headers={"Retry-After": "0"}))
        llm = OpenAIModel("gpt-4o-mini", base_url=server.openai_url, api_key="k")
        llm.complete([{"role": "user", "content": "hi"}])
        assert len(server.requests) == 2
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ChatReply = Callable[[dict[str, Any]], str]
EmbedFn = Callable[[list[str]], list[list[float]]]


class Refusal(Exception):
    """Raised by an ``embed`` or ``chat_reply`` callable: answer ``status`` (e.g. 400)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Reply:
    """One scripted answer. ``body`` (bytes) replaces the protocol body when given."""

    status: int = 200
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float | None = None


@dataclass
class Recorded:
    """A request as the server saw it (``json`` is None when the body was not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any


def default_chat_reply(body: dict[str, Any]) -> str:
    """Deterministic reply: ``"reply: "`` + the last message's text (first 200 chars)."""
    messages = body.get("messages") or []
    return "reply: " + _text(messages[-1].get("content") if messages else "")[:200]


def _text(content: Any) -> str:
    """Text of a message content: a string, or the text of its parts / blocks."""
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def default_embed(texts: list[str]) -> list[list[float]]:
    """Deterministic 8-dimensional vectors from the characters of each text."""
    out = []
    for text in texts:
        vec = [0.0] * 8
        for i, ch in enumerate(text):
            vec[i % 8] += ord(ch) % 31
        norm = sum(v * v for v in vec) ** 0.5 or 1.0
        out.append([v / norm for v in vec])
    return out


def _words(text: str) -> int:
    return len(text.split())


class FakeServer:
    """The server; use as a context manager or call :meth:`start` / :meth:`stop`."""

    def __init__(
        self,
        api_key: str | None = None,
        delay: float = 0.0,
        chat_reply: ChatReply = default_chat_reply,
        embed: EmbedFn = default_embed,
    ) -> None:
        self.api_key = api_key
        self.delay = delay
        self.chat_reply = chat_reply
        self.embed = embed
        self.requests: list[Recorded] = []
        self.answered = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.outage_status: int | None = None
        self._port = 0  # the first start picks one; a restart keeps it
        self._connections: set[socket.socket] = set()
        self._hold = 0
        self._hold_timeout = 0.0
        self._paused = False
        self._pause_after = 0
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> FakeServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._stopping.clear()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), handler)
        self._port = self._httpd.server_address[1]
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # cut short any scripted delay, hold or pause
        with self._changed:
            self._changed.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        with self._lock:  # kept-alive connections go down with the server
            for connection in self._connections:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses -----------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (the Anthropic base URL)."""
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_url(self) -> str:
        """The OpenAI-style base URL, ending in ``/v1``."""
        return self.url + "/v1"

    # -- scripting -----------------------------------------------------------------

    def enqueue(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order."""
        with self._lock:
            self._replies.extend(replies)

    def fail_next(self, *statuses: int, retry_after: str | None = None) -> None:
        """Shorthand: answer the next requests with these error statuses."""
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        self.enqueue(*(Reply(status=s, headers=dict(headers)) for s in statuses))

    def hold_until(self, n: int, timeout: float = 30.0) -> None:
        """Hold each request until ``n`` are in flight together (or ``timeout`` passes)."""
        with self._lock:
            self._hold, self._hold_timeout = n, timeout

    def pause(self, after: int = 0) -> None:
        """Hold every request after the first ``after`` (received and recorded, not
        answered) until :meth:`resume`."""
        with self._lock:
            self._paused, self._pause_after = True, after

    def resume(self) -> None:
        with self._changed:
            self._paused = False
            self._changed.notify_all()

    def paths(self) -> list[str]:
        with self._lock:
            return [r.path for r in self.requests]

    def _next_reply(self) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
            return Reply() if self.outage_status is None else Reply(self.outage_status)

    def _record(self, request: Recorded) -> int:
        """Record ``request``; its position among all requests."""
        with self._lock:
            self.requests.append(request)
            return len(self.requests) - 1

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def _enter(self, index: int) -> None:
        with self._changed:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._changed.notify_all()
            if self._hold:
                self._changed.wait_for(
                    lambda: self.max_in_flight >= self._hold or self._stopping.is_set(),
                    self._hold_timeout,
                )
            self._changed.wait_for(
                lambda: not self._paused or index < self._pause_after or self._stopping.is_set(),
                60.0,
            )

    def _leave(self, answered: bool) -> None:
        with self._changed:
            self.in_flight -= 1
            self.answered += answered
            self._changed.notify_all()

    def settle(self, timeout: float = 10.0) -> None:
        """Wait until no request is in flight: a client can read a reply before the
        server's thread has counted it in ``answered``."""
        with self._changed:
            self._changed.wait_for(lambda: self.in_flight == 0, timeout)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeServer
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: the headers and the body go out as separate small writes, which
    # otherwise wait for the client's delayed ACK (~40 ms per keep-alive request).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        pass

    def handle(self) -> None:
        with self.fake._lock:
            self.fake._connections.add(self.connection)
        try:
            super().handle()
        except OSError:
            pass  # stop() cut the connection
        finally:
            with self.fake._lock:
                self.fake._connections.discard(self.connection)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        index = self.fake._record(Recorded("POST", self.path, headers, body))
        reply = self.fake._next_reply()
        self.fake._enter(index)
        answered = False
        try:
            self.fake._sleep(self.fake.delay if reply.delay is None else reply.delay)
            answered = self._answer(reply, headers, body)
        finally:
            self.fake._leave(answered)

    def _answer(self, reply: Reply, headers: dict[str, str], body: Any) -> bool:
        """Write the reply; False if the client had already gone."""
        route = _ROUTES.get(self.path)
        if route is None:
            return self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
        protocol, build = route
        status, payload = self._check(protocol, headers, body)
        if status == 200 and reply.status == 200 and reply.body is None:
            try:
                payload = build(self.fake, body)
            except Refusal as refusal:
                status, payload = (
                    refusal.status,
                    _error_body(protocol, refusal.status, str(refusal)),
                )
        elif status == 200:
            status = reply.status
            payload = _error_body(protocol, status, f"scripted status {status}")
        if reply.body is not None:
            return self._send_raw(status, reply.body, reply.headers)
        return self._send(status, payload, reply.headers)

    def _check(
        self, protocol: str, headers: dict[str, str], body: Any
    ) -> tuple[int, dict[str, Any]]:
        """Validate auth, version header and body shape as the real APIs do."""
        key = self.fake.api_key
        if protocol == "anthropic":
            if key is not None and headers.get("x-api-key") != key:
                return 401, _error_body(protocol, 401, "invalid x-api-key")
            if not headers.get("anthropic-version"):
                return 400, _error_body(protocol, 400, "anthropic-version header is required")
        elif key is not None and headers.get("authorization") != f"Bearer {key}":
            return 401, _error_body(protocol, 401, "Incorrect API key provided")
        if not isinstance(body, dict):
            return 400, _error_body(protocol, 400, "body must be a JSON object")
        missing = [f for f in _REQUIRED[self.path] if f not in body]
        if missing:
            return 400, _error_body(protocol, 400, f"missing required field(s) {missing}")
        return 200, {}

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> bool:
        return self._send_raw(status, json.dumps(payload).encode(), headers)

    def _send_raw(self, status: int, data: bytes, headers: dict[str, str]) -> bool:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return False  # the client gave up (timeout); nothing to answer
        return True


def _error_body(protocol: str, status: int, message: str) -> dict[str, Any]:
    if protocol == "anthropic":
        return {"type": "error", "error": {"type": f"http_{status}", "message": message}}
    return {"error": {"message": message, "type": f"http_{status}", "code": status}}


def _chat(fake: FakeServer, body: dict[str, Any]) -> dict[str, Any]:
    text = fake.chat_reply(body)
    prompt = sum(_words(_text(m.get("content"))) for m in body["messages"])
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": _words(text),
            "total_tokens": prompt + _words(text),
        },
    }


def _messages(fake: FakeServer, body: dict[str, Any]) -> dict[str, Any]:
    text = fake.chat_reply(body)
    prompt = _words(str(body.get("system", ""))) + sum(
        _words(_text(m.get("content"))) for m in body["messages"]
    )
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": prompt, "output_tokens": _words(text)},
    }


def _embeddings(fake: FakeServer, body: dict[str, Any]) -> dict[str, Any]:
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    vectors = fake.embed([str(t) for t in texts])
    as_b64 = body.get("encoding_format") == "base64"
    data = []
    for i, vec in enumerate(vectors):
        values: Any = list(vec)
        if as_b64:
            values = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
        data.append({"object": "embedding", "index": i, "embedding": values})
    tokens = sum(_words(str(t)) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


_ROUTES: dict[str, tuple[str, Callable[[FakeServer, Any], dict[str, Any]]]] = {
    "/v1/chat/completions": ("openai", _chat),
    "/v1/embeddings": ("openai", _embeddings),
    "/v1/messages": ("anthropic", _messages),
}
_REQUIRED = {
    "/v1/chat/completions": ("model", "messages"),
    "/v1/embeddings": ("model", "input"),
    "/v1/messages": ("model", "messages", "max_tokens"),
}
