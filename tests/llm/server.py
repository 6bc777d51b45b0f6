"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 (stdlib only).

Tests point LiteLLM at it with ``model="openai/<name>"`` and ``api_base="http://127.0.0.1:PORT/v1"``;
it exercises request encoding, response parsing, error mapping, retries and fallbacks for real.

Replies are scripted per served model name (the ``model`` of the request body, i.e. ``<name>``):
``server.script("primary", [reply, reply, ...])`` serves them in order; when a model's script is
empty the ``responder`` callable (request body → reply) answers, else a 500. A responder may
read the headers of the request it answers with ``server.current_headers()``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One HTTP reply: status, JSON body, extra headers, and ``delay`` seconds to wait before
    answering (a slow model)."""

    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def chat(
    content: str | None = None,
    *,
    tool_calls: list[tuple[str, dict[str, Any]]] | None = None,
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    model: str = "scripted",
) -> Reply:
    """A 200 chat completion with ``content`` and/or tool calls ``[(name, arguments), ...]``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}_{int(time.time() * 1e6)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(tool_calls)
        ]
    return Reply(
        body={
            "id": f"chatcmpl-{int(time.time() * 1e6)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )


def error(status: int, message: str = "scripted error", *, retry_after: str | None = None) -> Reply:
    """An OpenAI-style error reply (``retry_after`` sets the Retry-After header)."""
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    return Reply(
        status=status,
        body={"error": {"message": message, "type": "scripted", "code": status}},
        headers=headers,
    )


class ScriptedLLM:
    """The server: ``url`` (the api_base), ``requests`` (bodies received, in order) and
    ``headers`` (their request headers, lower-case names, same order)."""

    def __init__(self) -> None:
        self._scripts: dict[str, deque[Reply]] = defaultdict(deque)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self._lock = threading.Lock()
        self._answering = threading.local()  # the request each handler thread answers
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                with outer._lock:
                    outer.headers.append(headers)
                outer._answering.headers = headers
                reply = outer._next(body)
                if reply.delay:
                    time.sleep(reply.delay)
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                try:
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a timeout under test): nothing to answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # a handler still sleeping for a slow reply must not hold up stop()
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def script(self, model: str, replies: list[Reply]) -> None:
        """Queue ``replies`` for requests naming ``model``."""
        with self._lock:
            self._scripts[model].extend(replies)

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            queue = self._scripts[str(body.get("model"))]
            if queue:
                return queue.popleft()
        if self.responder is not None:
            return self.responder(body)
        return error(500, f"nothing scripted for {body.get('model')}")

    def current_headers(self) -> dict[str, str]:
        """The headers (lower-case names) of the request this thread is answering: for a
        responder, which runs in the request's handler thread."""
        return dict(getattr(self._answering, "headers", {}))

    def models_called(self) -> list[str]:
        """The ``model`` of every request, in order."""
        return [str(b.get("model")) for b in self.requests]

    def start(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
