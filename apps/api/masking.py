"""No configured secret in an HTTP answer: a pure ASGI middleware over every response.

Rows are masked when written (``db.engine``), but an answer is also built from rows written
before that, from exception texts and from request echoes (a 422 quotes the input). The
middleware, outermost, masks the configured secret values (``core.masking``) in every
textual body (JSON, Markdown, HTML, plain text; a PNG passes untouched) and in the header
values, and corrects ``Content-Length``. A JSON body is masked in its strings (parsed, masked,
encoded as FastAPI encodes it), so it stays valid JSON whatever the secret looks like. Without a
configured secret the answer passes through unbuffered.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.masking import SecretMasker, current_masker

#: Media types whose bodies are text: JSON, ``text/*`` (Markdown, HTML, plain), problem+json.
_TEXT_TYPES = ("application/json", "text/", "application/problem+json", "application/xml")


def _is_text(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the ``content-type`` among raw ASGI ``headers`` is textual (absent: not)."""
    for name, value in headers:
        if name.lower() == b"content-type":
            media = value.decode("latin-1").lower()
            return any(media.startswith(t) for t in _TEXT_TYPES)
    return False


def mask_body(masker: SecretMasker, body: bytes, *, is_json: bool) -> bytes:
    """``body`` (UTF-8) with the secrets masked; a JSON body in its strings (re-encoded compactly
    with ``ensure_ascii=False``, as ``fastapi.responses.JSONResponse`` renders). The same bytes
    when nothing is found or the body is not UTF-8."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return body
    if not masker.found_in(text):
        return body
    if is_json:
        try:
            data = json.loads(text)
        except ValueError:
            pass
        else:
            masked = json.dumps(masker.mask_tree(data), ensure_ascii=False, separators=(",", ":"))
            return masked.encode("utf-8")
    return masker.mask_text(text).encode("utf-8")


class SecretMaskingMiddleware:
    """Mask the configured secrets in every HTTP answer's textual body and headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point: buffer a textual answer, mask it, send it with its new length."""
        masker = current_masker()
        if scope["type"] != "http" or not masker:
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def masking_send(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = [(k, _masked_header(masker, v)) for k, v in message.get("headers", [])]
                message = {**message, "headers": headers}
                if not _is_text(headers):
                    await send(message)  # binary (a chart PNG): streamed as is
                    return
                start = message
                return
            if message["type"] != "http.response.body" or start is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            await _send_masked(send, start, b"".join(chunks), masker)

        await self.app(scope, receive, masking_send)


def _masked_header(masker: SecretMasker, value: bytes) -> bytes:
    """A raw header value with the secrets masked (latin-1, as ASGI headers are)."""
    text = value.decode("latin-1")
    return masker.mask_text(text).encode("latin-1") if masker.found_in(text) else value


async def _send_masked(send: Send, start: Message, body: bytes, masker: SecretMasker) -> None:
    """Send the held ``start`` message, then ``body`` masked; ``Content-Length`` is fitted only
    when masking changed the body (a ``HEAD`` answer's empty body keeps its declared length)."""
    headers: list[tuple[bytes, bytes]] = start["headers"]
    is_json = any(k.lower() == b"content-type" and b"json" in v.lower() for k, v in headers)
    masked = mask_body(masker, body, is_json=is_json)
    if masked is not body:
        fitted: list[Any] = [
            (k, str(len(masked)).encode() if k.lower() == b"content-length" else v) for k, v in headers
        ]
        start = {**start, "headers": fitted}
    await send(start)
    await send({"type": "http.response.body", "body": masked, "more_body": False})
