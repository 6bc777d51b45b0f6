"""The audit log of the HTTP gateway: one ``audit_log`` row per mutating request with a key.

A pure ASGI middleware (outermost, so it also sees a 413 of the body limit and a 401 of the
key check) answers every request with an ``X-Request-ID`` (the client's, when it sends a
sensible one, else a fresh UUID) and, for ``POST``/``PUT``/``PATCH``/``DELETE``, writes one
row: who (the key's public id and name, from ``scope["state"]["principal"]`` set by the key
check; never the key), what (method and route template), the object (the handler's
``scope["state"]["audit_object"]``, else the route's path parameters), the status code, the
request id and the client address (``apps.api.abuse.client_address``). The row is written
when the answer starts, before the client receives it (an exception that escapes the app is
written as 500). A failed audit write is logged and does not change the answer.

A mutating request without a valid key (401, 403 for a bad key, 429 of the failed-auth limit,
413 or 404 before any key check) is counted instead: one row per client address, status code
and window of ``audit_anonymous_window_seconds`` (``ops_repo.count_audit``), holding the
window's first request (its route, object and request id), ``requests`` (how many) and
``last_at``. So anonymous traffic, however much, adds at most one row per address, status and
window; nobody can grow the table without a key.
"""

from __future__ import annotations

import logging
import re
import uuid
from datetime import UTC, datetime
from typing import Any, Final

import anyio
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apps.api.abuse import client_address
from db import ops_repo
from db.engine import get_engine

logger = logging.getLogger("finagent.api.audit")

MUTATING: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_REQUEST_ID_RE: Final = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def request_id_of(scope: Scope) -> str:
    """The request id of ``scope``: its ``X-Request-ID`` header if it is 1-128 of
    ``[A-Za-z0-9._:-]`` (a client's id is echoed, never trusted as anything else), else a new UUID."""
    given = Headers(scope=scope).get("x-request-id")
    return given if given and _REQUEST_ID_RE.fullmatch(given) else str(uuid.uuid4())


def _object_of(scope: Scope) -> str | None:
    state = scope.get("state") or {}
    if state.get("audit_object"):
        return str(state["audit_object"])
    params = scope.get("path_params") or {}
    return "/".join(str(v) for v in params.values()) or None


def _what(scope: Scope) -> str:
    # the route template when routing happened; else (a 413 before routing, an unknown path)
    # the raw path, cut by ops_repo.insert_audit
    template = getattr(scope.get("route"), "path", None) or scope.get("path", "")
    return f"{scope['method']} {template}"


class AuditMiddleware:
    """Echo ``X-Request-ID``; audit mutating requests into ``audit_log`` of ``database_url``."""

    def __init__(self, app: ASGIApp, *, database_url: str, anonymous_window_seconds: int = 60) -> None:
        self.app = app
        self.database_url = database_url
        self.anonymous_window_seconds = anonymous_window_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        scope.setdefault("state", {})["request_id"] = request_id
        audited = scope["method"] not in MUTATING

        async def send_with_id(message: Message) -> None:
            nonlocal audited
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["X-Request-ID"] = request_id
                if not audited:  # written before the client sees the answer
                    audited = True
                    await anyio.to_thread.run_sync(self._write, scope, request_id, message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if not audited:  # an exception escaped before any answer: Starlette answers 500
                await anyio.to_thread.run_sync(self._write, scope, request_id, 500)

    def _write(self, scope: Scope, request_id: str, status_code: int) -> None:
        principal: Any = (scope.get("state") or {}).get("principal")
        address = client_address(scope)
        try:
            if principal is None:
                now = datetime.now(UTC)
                window = int(now.timestamp()) // self.anonymous_window_seconds * self.anonymous_window_seconds
                ops_repo.count_audit(
                    engine=get_engine(self.database_url),
                    aggregate_key=f"anonymous|{address}|{status_code}|{window}",
                    audit_id=str(uuid.uuid4()),
                    request_id=request_id,
                    method=scope["method"],
                    what=_what(scope),
                    status_code=status_code,
                    client_address=address,
                    object_id=_object_of(scope),
                    at=now,
                )
                return
            ops_repo.insert_audit(
                engine=get_engine(self.database_url),
                audit_id=str(uuid.uuid4()),
                request_id=request_id,
                method=scope["method"],
                what=_what(scope),
                status_code=status_code,
                tenant=getattr(principal, "tenant", None),
                api_key_id=getattr(principal, "key_id", None),
                key_name=getattr(principal, "name", None),
                object_id=_object_of(scope),
                client_address=address,
            )
        except Exception as exc:  # the answer is sent; an audit outage must not turn it into a 500
            logger.error("audit row of request %s not written: %s", request_id, type(exc).__name__)
