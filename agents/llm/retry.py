"""Which failures of an LLM request are retried, and after how long the server asked to wait
(``agents.llm.session``'s module docstring)."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime
from typing import Any


def is_retryable(litellm: Any, exc: Exception) -> bool:
    """Whether a request that failed with ``exc`` is retried on the same model: LiteLLM's rate
    limit, timeout, connection and server errors, or any HTTP 429 or 5xx. Raises nothing."""
    kinds = tuple(
        getattr(litellm, name)
        for name in (
            "RateLimitError",
            "Timeout",
            "APIConnectionError",
            "InternalServerError",
            "ServiceUnavailableError",
            "BadGatewayError",
        )
        if hasattr(litellm, name)
    )
    if isinstance(exc, kinds):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status == 429 or status >= 500)


def _header(headers: Any, name: str) -> str | None:
    """Case-insensitive header lookup in an ``httpx.Headers`` or a plain mapping."""
    if not headers:
        return None
    try:
        value = headers.get(name)
        if value is None and isinstance(headers, dict):
            value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    except AttributeError:
        return None
    return None if value is None else str(value)


def retry_after_seconds(exc: Exception) -> float | None:
    """The pause (s, ≥ 0) a failed request's server asked for, or ``None``.

    LiteLLM copies the provider's response headers to ``exc.litellm_response_headers`` (its
    ``exc.response`` is a synthetic object whose headers are empty); ``retry-after-ms`` (OpenAI)
    wins over ``retry-after``, which is seconds or an HTTP date (RFC 9110 §10.2.3).
    """
    for headers in (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    ):
        millis = _header(headers, "retry-after-ms")
        if millis is not None:
            try:
                return max(0.0, float(millis) / 1000.0)
            except ValueError:
                pass
        value = _header(headers, "retry-after")
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            continue
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    return None


def first_line(text: str) -> str:
    """LiteLLM messages span lines (model group, fallbacks, headers): the first line only."""
    return text.strip().splitlines()[0] if text.strip() else text


def in_cooldown(exc: Exception) -> bool:
    """True for the Router's "no deployments available" refusal (every deployment of the
    name is cooling down): ``litellm.types.router.RouterRateLimitError``, raised before any
    request is sent."""
    return type(exc).__name__ == "RouterRateLimitError"
