"""How a console form shows a refused request: the messages and the HTTP status the JSON API
gives for the same exception (422 invalid, 403 scope, 404 not found, 409 conflict or cap, 429
quota, 503 rate limiter unreachable), so the form never answers with a 500 for bad input.
Reference: ``docs/console.md``."""

from __future__ import annotations

from typing import Final

from pydantic import ValidationError

from agents.data.market.shared import SharedStateUnavailableError
from apps import watchlists
from apps.api.auth import AuthError
from apps.api.errors import ConflictError
from apps.api.quotas import QuotaExceededError
from db import ops_repo
from pipeline import service

#: Exceptions a console form turns into messages on the form (see :func:`refusal`).
REFUSED: Final = (
    ValidationError,
    AuthError,
    service.InvalidRequestError,
    ConflictError,
    watchlists.WatchlistError,
    ops_repo.DuplicateNameError,
    QuotaExceededError,
    SharedStateUnavailableError,
)


def validation_messages(exc: ValidationError) -> list[str]:
    """One ``field: reason`` line per error of a pydantic ``ValidationError`` (the API's 422
    ``detail`` entries, ``loc`` joined with dots)."""
    return [f"{'.'.join(str(p) for p in e['loc']) or 'form'}: {e['msg']}" for e in exc.errors()]


def refusal(exc: Exception) -> tuple[list[str], int]:
    """``(messages, status)`` of a refused form for ``exc`` (one of :data:`REFUSED`; anything
    else: its text with 422)."""
    if isinstance(exc, ValidationError):
        return validation_messages(exc), 422
    if isinstance(exc, AuthError):
        return [str(exc)], exc.status_code
    if isinstance(exc, watchlists.WatchlistNotFoundError):
        return [str(exc)], 404
    if isinstance(exc, (ConflictError, watchlists.WatchlistLimitError, ops_repo.DuplicateNameError)):
        return [str(exc)], 409
    if isinstance(exc, QuotaExceededError):
        return [f"{exc} (retry in {exc.retry_after} s)"], 429
    if isinstance(exc, SharedStateUnavailableError):
        return ["the rate limiter's Redis did not answer; retry shortly"], 503
    return [str(exc)], 422
