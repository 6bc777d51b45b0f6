"""Checks at the edge of the HTTP gateway: what no field's own rule should have to repeat.

:class:`CheckedRoute` (the route class of every endpoint) refuses, before the parameters are
validated and before the key is checked (as FastAPI refuses a body that is not JSON):

* a NUL character (U+0000) in a path or query parameter (name or value) or in a string of a
  JSON body (key or value): PostgreSQL text cannot hold it (psycopg raises ``DataError``);
* a lone surrogate (U+D800-U+DFFF, sent as a ``\\ud800`` JSON escape): it is no Unicode
  character, cannot be encoded as UTF-8, and so can neither be stored nor echoed in an error;
* a query parameter given more than once (``?symbol=A&symbol=B``): which one counts would be
  an accident of the parser;
* a JSON object with a key twice (``{"symbol": "X", "symbol": "IBM"}``): RFC 8259 §4 leaves
  the meaning to the parser (Python keeps the last), so a filter that reads the first and the
  gateway that reads the last would see different requests;
* ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON: RFC 8259 §6; Python's parser accepts
  them), and a number too large for a double (``1e400`` would become infinity).

Each is a 422 with the gateway's usual body, whose ``errors[].loc`` names the field (``["body",
"options", "max_iterations"]``, ``["query", "symbol"]``, ``["path", "name"]``).

:func:`http_error` answers the routing errors: 405 with an ``Allow`` header listing every
method of the path (RFC 9110 §15.5.6 requires it; Starlette's lists only the methods of the
first route of the path), and ``OPTIONS`` on a known path with 204 and ``Allow`` (RFC 9110
§9.3.7: OPTIONS asks what the resource supports; this answers it rather than refusing it).

:func:`encodable` makes an error body safe to encode (lone surrogates escaped, non-finite
numbers as text): an error about bad input must not fail on the input it repeats.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine, Iterator
from email.message import Message
from typing import Any, Final

from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match

from core.tickers import clip

#: The most input errors one answer lists (a body may hold thousands of bad strings).
MAX_ERRORS: Final = 20
#: How many characters of an offending value an error repeats.
MAX_INPUT_ECHO: Final = 200


class _NonFinite:
    """A JSON number the parser would have made ``NaN`` or infinite; ``text`` as sent."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _Object(dict[str, Any]):
    """A parsed JSON object that had keys more than once (``duplicates``, in order)."""

    duplicates: list[str]


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    duplicates: list[str] = []
    for key, value in pairs:
        if key in out and key not in duplicates:
            duplicates.append(key)
        out[key] = value
    if not duplicates:
        return out
    flagged = _Object(out)
    flagged.duplicates = duplicates
    return flagged


def _number(text: str) -> float | _NonFinite:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text)


def text_problem(text: str) -> tuple[str, str] | None:
    """``(error type, message)`` when ``text`` holds a NUL character or a lone surrogate, else
    ``None``."""
    if "\x00" in text:
        return "string_nul", "the NUL character (U+0000) is not allowed in text"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        return "string_surrogate", f"U+{code:04X} is a lone surrogate, not a character (not valid Unicode)"
    return None


def encodable(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, tuples, strings, numbers) with every string made
    UTF-8-encodable (lone surrogates as ``\\udXXX`` text) and every non-finite float as its
    text (``"inf"``, ``"nan"``), so a JSON error body can always be written."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {encodable(k): encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encodable(v) for v in value]
    return value


def _error(kind: str, loc: tuple[str | int, ...], message: str, value: Any) -> dict[str, Any]:
    shown = clip(value, MAX_INPUT_ECHO) if isinstance(value, str) else value
    return {"type": kind, "loc": tuple(encodable(list(loc))), "msg": message, "input": encodable(shown)}


def parameter_errors(request: Request) -> list[dict[str, Any]]:
    """The errors of the path and query parameters of ``request`` (this module's rules)."""
    errors: list[dict[str, Any]] = []
    for name, value in request.path_params.items():
        problem = text_problem(str(value))
        if problem:
            errors.append(_error(problem[0], ("path", name), problem[1], value))
    counts: dict[str, int] = {}
    for name, value in request.query_params.multi_items():
        counts[name] = counts.get(name, 0) + 1
        for text in (name, value):
            problem = text_problem(text)
            if problem:
                errors.append(_error(problem[0], ("query", name), problem[1], text))
    for name, count in counts.items():
        if count > 1:
            errors.append(
                _error("query_repeated", ("query", name), f"given {count} times; give it once", name)
            )
    return errors[:MAX_ERRORS]


def _walk(document: Any) -> Iterator[dict[str, Any]]:
    """The errors of a parsed JSON body, depth first (iterative: a deep body cannot exhaust
    the stack; the parser itself refuses what is nested too deep)."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [(("body",), document)]
    while stack:
        loc, value = stack.pop()
        if isinstance(value, str):
            problem = text_problem(value)
            if problem:
                yield _error(problem[0], loc, problem[1], value)
        elif isinstance(value, _NonFinite):
            yield _error(
                "json_number",
                loc,
                f"{clip(value.text, 40)} is not a finite JSON number (NaN and Infinity are not JSON; "
                "a number must fit a double)",
                value.text,
            )
        elif isinstance(value, dict):
            for key in getattr(value, "duplicates", ()):
                yield _error(
                    "json_duplicate_key", (*loc, key), f"key {clip(key, 80)!r} appears more than once", key
                )
            children = list(value.items())
            for key, child in reversed(children):
                problem = text_problem(key)
                if problem:
                    yield _error(problem[0], (*loc, key), f"in a key: {problem[1]}", key)
                    continue
                stack.append(((*loc, key), child))
        elif isinstance(value, list):
            stack.extend(((*loc, i), child) for i, child in reversed(list(enumerate(value))))


def body_errors(body: bytes, content_type: str | None) -> list[dict[str, Any]]:
    """The errors of a JSON request body (this module's rules); ``[]`` for a body that is not
    JSON by its ``Content-Type`` or does not parse at all (FastAPI answers those itself)."""
    if not body or not is_json(content_type):
        return []
    try:
        document = json.loads(body, object_pairs_hook=_object, parse_constant=_NonFinite, parse_float=_number)
    except (ValueError, RecursionError):  # not JSON (or not UTF-8): FastAPI's 422/400
        return []
    errors = []
    for error in _walk(document):
        errors.append(error)
        if len(errors) >= MAX_ERRORS:
            break
    return errors


def is_json(content_type: str | None) -> bool:
    """Whether ``content_type`` is JSON as FastAPI reads a body: ``application/json`` or
    ``application/*+json``."""
    if not content_type:
        return False
    message = Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


class CheckedRoute(APIRoute):
    """An ``APIRoute`` that applies this module's checks before FastAPI reads the request:
    :class:`fastapi.exceptions.RequestValidationError` (the gateway's 422) when one fails."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler of this route, behind the checks."""
        handler = super().get_route_handler()
        reads_body = self.body_field is not None

        async def checked(request: Request) -> Response:
            errors = parameter_errors(request)
            if reads_body and not errors:
                errors = body_errors(await request.body(), request.headers.get("content-type"))
            if errors:
                raise RequestValidationError(errors)
            return await handler(request)

        return checked


def allowed_methods(routes: list[BaseRoute], request: Request) -> list[str]:
    """Every method some route of ``routes`` serves at the path of ``request``, sorted; empty
    when no route has the path. (FastAPI routes serve only their declared methods: a ``GET``
    route answers ``HEAD`` with 405, so ``HEAD`` is listed only where a route declares it.)"""
    methods: set[str] = set()
    for route in routes:
        served = getattr(route, "methods", None)
        if served and route.matches(request.scope)[0] is not Match.NONE:
            methods |= set(served)
    return sorted(methods)


def served_routes(app: Any) -> list[BaseRoute]:
    """The routes ``app`` serves, for :func:`allowed_methods`: ``app.state.served_routes`` when
    the app set it, else ``app.routes``. An app that includes ``APIRouter``s sets it: FastAPI
    lists an included router in ``app.routes`` as one entry (no ``methods``) rather than its
    routes, so ``app.routes`` alone would name no method of them."""
    routes: list[BaseRoute] | None = getattr(app.state, "served_routes", None)
    return routes if routes is not None else list(app.routes)


async def http_error(request: Request, exc: Exception) -> Response:
    """The answer to a routing error (Starlette's ``HTTPException``): a 405 gets ``Allow`` with
    every method of the path, ``OPTIONS`` on a known path 204 with ``Allow``; anything else as
    FastAPI answers it (``{"detail": ...}``)."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 405:
        methods = allowed_methods(served_routes(request.app), request)
        if request.method == "OPTIONS":
            return Response(status_code=204, headers={"Allow": ", ".join(sorted({*methods, "OPTIONS"}))})
        return JSONResponse(
            {"detail": f"method {request.method} is not allowed here; allowed: {', '.join(methods)}"},
            status_code=405,
            headers={"Allow": ", ".join(methods)},
        )
    return await http_exception_handler(request, exc)
