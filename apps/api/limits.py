"""Request body limit for the HTTP gateway: a pure ASGI middleware.

Starlette reads a request body whole, however large, before FastAPI validates it, and nothing
in the stack caps it (Starlette has no body-size setting; uvicorn limits headers, not bodies).
A body over ``FINAGENT_API_MAX_BODY_BYTES`` is refused with 413 before it is read (a declared
``Content-Length``) or as soon as the running count passes the limit (chunked bodies), so a
50 MB request costs neither memory nor a 50 MB error echo. Every valid request of this API is
a few hundred bytes.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimitMiddleware:
    """Answer 413 ``{"detail": ...}`` to an HTTP request whose body is over ``max_bytes``."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point: pass through non-HTTP scopes and bodies within the limit."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send)
            return
        seen = 0
        started = refused = False

        async def counting_receive() -> Message:
            # Over the limit: answer 413 here and tell the app the client left. Raising instead
            # does not work: FastAPI turns any error while reading a body into a 400.
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes and not started:
                    refused = True
                    await self._refuse(send)
                    return {"type": "http.disconnect"}
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if refused:  # the 413 is sent; whatever the app answers to the "disconnect" is dropped
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, counting_receive, tracking_send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps({"detail": f"request body over {self.max_bytes} bytes"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    """The declared ``Content-Length`` of an HTTP scope, or ``None`` (absent or not a number)."""
    value = Headers(scope=scope).get("content-length")
    return int(value) if value is not None and value.isdigit() else None


def short_errors(errors: Any, *, max_input_chars: int = 200) -> list[dict[str, Any]]:
    """Pydantic validation errors for a 422 body, each ``input`` cut to ``max_input_chars``
    characters of its JSON form (the whole input was echoed before: a large body came back
    whole). Keys other than ``input`` are kept as they are."""
    out: list[dict[str, Any]] = []
    for err in errors:
        item = dict(err)
        if "input" in item:
            text = json.dumps(item["input"], default=str)
            if len(text) > max_input_chars:
                item["input"] = text[:max_input_chars] + f"… ({len(text)} characters)"
        out.append(item)
    return out
