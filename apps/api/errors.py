"""The gateway's exception handlers: every error answers the documented body ``{"detail": "…"}``
(a 422 from a field rule adds ``errors``), with the status and headers below. ``docs/api.md``
documents the contract; :func:`install_error_handlers` registers them on an app.

| exception | answer |
|---|---|
| :class:`apps.api.auth.AuthError` | its status (401 adds ``WWW-Authenticate: APIKey``, 403, 429) |
| ``RequestValidationError`` | 422, ``detail`` joins the fields' messages, ``errors`` lists them |
| Starlette ``HTTPException`` | :func:`apps.api.edge.http_error` (405 + ``Allow``, OPTIONS 204) |
| ``InvalidRequestError``, ``WatchlistError`` | 422; unknown watchlist 404; a tenant cap 409 |
| :class:`ConflictError`, ``DuplicateNameError`` | 409 |
| ``QuotaExceededError`` | 429 + ``Retry-After`` |
| ``SharedStateUnavailableError`` | 503 + ``Retry-After: 5`` (the rate limiter's Redis) |
| ``SchemaMissingError`` | 503 (migrations not applied) |
| ``OSError``, SQLAlchemy ``OperationalError`` | 503 (broker or database unreachable) |
| the task queue's ``publish_errors()`` (kombu's) | 503 (the broker refused or lost a publish) |
| anything else | 500 naming the request id (the log has the traceback) |
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from agents.data.market.shared import SharedStateUnavailableError
from apps import watchlists
from apps.api.auth import AuthError
from apps.api.edge import encodable, http_error
from apps.api.limits import short_errors
from apps.api.quotas import QuotaExceededError
from db import ops_repo
from db.archive import ArchiveUnreadable
from pipeline import service, taskqueue

logger = logging.getLogger("finagent.api")


class ConflictError(Exception):
    """409: the request contradicts stored state (a reused Idempotency-Key, a taken name)."""


def auth_error(_: Request, exc: AuthError) -> JSONResponse:
    """401 (with ``WWW-Authenticate: APIKey``), 403 or 429 of an :class:`AuthError`."""
    headers = {"WWW-Authenticate": "APIKey"} if exc.status_code == 401 else None
    return JSONResponse({"detail": str(exc)}, status_code=exc.status_code, headers=headers)


def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    """422: ``detail`` is ``"<where>: <message>"`` per field joined by ``; ``; ``errors`` the
    fields' errors, shortened (``apps.api.limits.short_errors``) and made encodable."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {err.get('msg')}")
    # encodable: the input may hold what made it invalid (a lone surrogate, an infinity)
    content = {"detail": "; ".join(parts), "errors": jsonable_encoder(short_errors(exc.errors()))}
    return JSONResponse(encodable(content), status_code=422)


def invalid_request(_: Request, exc: Exception) -> JSONResponse:
    """422 for a request the data or the clock refuses; 404 for an unknown watchlist; 409 for
    a tenant cap (it conflicts with what is stored)."""
    if isinstance(exc, watchlists.WatchlistNotFoundError):
        return JSONResponse({"detail": str(exc)}, status_code=404)
    if isinstance(exc, watchlists.WatchlistLimitError):
        return JSONResponse({"detail": str(exc)}, status_code=409)
    return JSONResponse({"detail": str(exc)}, status_code=422)


def conflict(_: Request, exc: Exception) -> JSONResponse:
    """409 with the exception's message."""
    return JSONResponse({"detail": str(exc)}, status_code=409)


def archive_unreadable(_: Request, exc: Exception) -> JSONResponse:
    """503 naming what of the stored data cannot be read (an archived analysis's missing or
    corrupt compression dictionary, ``db.archive.ArchiveUnreadable``): the request is fine, the
    data needs the operator (``finagent archive --verify``)."""
    logger.error("archive unreadable: %s", exc)
    return JSONResponse({"detail": str(exc)}, status_code=503)


def unexpected(request: Request, exc: Exception) -> JSONResponse:
    """500: the documented error shape even for a bug, with the request id that finds it in
    the logs (the traceback is logged, never sent)."""
    request_id = getattr(request.state, "request_id", None) or request.scope.get("state", {}).get(
        "request_id"
    )
    logger.error("unhandled %s in request %s", type(exc).__name__, request_id, exc_info=exc)
    return JSONResponse({"detail": f"internal error (request id {request_id})"}, status_code=500)


def quota_exceeded(_: Request, exc: QuotaExceededError) -> JSONResponse:
    """429 with ``Retry-After`` (whole seconds) of a :class:`QuotaExceededError`."""
    return JSONResponse({"detail": str(exc)}, status_code=429, headers={"Retry-After": str(exc.retry_after)})


def no_shared_state(_: Request, exc: Exception) -> JSONResponse:
    """503 + ``Retry-After: 5``: the rate limiter's Redis did not answer."""
    return JSONResponse(
        {"detail": "the rate limiter's Redis did not answer; retry shortly"},
        status_code=503,
        headers={"Retry-After": "5"},
    )


def schema_missing(_: Request, exc: Exception) -> JSONResponse:
    """503: the database has no (current) schema; the message names the command to run."""
    return JSONResponse({"detail": str(exc)}, status_code=503)


def infrastructure(_: Request, exc: Exception) -> JSONResponse:
    """503: the broker or the database is unreachable (``GET /health`` says which)."""
    logger.warning("infrastructure error: %s: %s", type(exc).__name__, exc)
    return JSONResponse(
        {"detail": f"broker or database unreachable ({type(exc).__name__}); see GET /health"},
        status_code=503,
    )


def install_error_handlers(api: FastAPI) -> None:
    """Register every handler of this module on ``api`` (Starlette picks a handler by the
    exception's class hierarchy, nearest first)."""
    api.exception_handler(AuthError)(auth_error)
    api.exception_handler(RequestValidationError)(validation_error)
    # 405 with every method of the path in Allow; OPTIONS 204 with Allow (apps.api.edge)
    api.add_exception_handler(StarletteHTTPException, http_error)
    api.exception_handler(watchlists.WatchlistError)(invalid_request)
    api.exception_handler(service.InvalidRequestError)(invalid_request)
    api.exception_handler(ops_repo.DuplicateNameError)(conflict)
    api.exception_handler(ConflictError)(conflict)
    api.exception_handler(ArchiveUnreadable)(archive_unreadable)
    api.exception_handler(Exception)(unexpected)
    api.exception_handler(QuotaExceededError)(quota_exceeded)
    api.exception_handler(SharedStateUnavailableError)(no_shared_state)
    api.exception_handler(service.SchemaMissingError)(schema_missing)
    api.exception_handler(sa.exc.OperationalError)(infrastructure)
    api.exception_handler(OSError)(infrastructure)
    # a bulk enqueue's Redis pipeline that failed (out of memory, connection lost mid-batch):
    # the rows were written first, the recovery sweep re-drives what did not arrive
    for error in taskqueue.get().publish_errors():
        api.exception_handler(error)(infrastructure)
