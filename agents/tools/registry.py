"""The tool registry and ``run_tool``: validation, ids, retries, logging and recording.

This module imports no tool: each tool module imports it and registers itself with
:func:`register`, and :mod:`agents.tools.catalog` is the one place that imports them all (so
``run_tool`` here knows only the tools imported so far; ``agents.tools.catalog.run_tool``
registers the built-in ones first).

One registry serves the pipeline stages, the CLI (``finagent tool``) and, later, LLM agents
(OpenAI tool schemas are generated from the same pydantic input models).

Retry policy inside a call (docs/design.md, "Tool retries"): only timeouts (``ProviderTimeoutError``) are
retried, after ``tool_backoff_base * 2**(attempt-1)`` seconds (0.5, 1, 2 s by default), at most
``tool_max_retries`` times; every attempt is one ``tool_calls`` row with its number. Everything
else (HTTP 4xx, invalid input, rate limits) returns an error envelope at once; rate limits and
exhausted timeouts are left to the Celery task's backoff (``TRANSIENT_CODES``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from agents.data.market.base import MarketDataProvider, ProviderError, ProviderTimeoutError
from agents.tools.envelope import RETRY_HINTS, ErrorCode, ToolEnvelope, ToolErrorBody
from core.logs import log_tool_call
from core.masking import mask_text
from core.settings import Settings

logger = logging.getLogger("finagent.tools")

_ID_NAMESPACE = uuid.UUID("6f1c1d8e-4f0b-4a53-9d51-6a1f2c7e9b10")


class ToolInputError(Exception):
    """Raised by a tool for input that validates but cannot be served (→ ``INVALID_INPUT``)."""

    def __init__(
        self, message: str, *, code: ErrorCode = ErrorCode.INVALID_INPUT, retry_hint: str | None = None
    ):
        super().__init__(message)
        self.code = code
        self.retry_hint = retry_hint


@dataclass(frozen=True)
class ToolOutput:
    """What a tool function returns: ``data`` (JSON-safe), extra ``source_refs`` it used,
    a one-line ``summary`` for logs, an optional ``symbol`` for the log row and an optional
    ``storage_basis`` (how the stored row may keep ``data`` compactly; readers get ``data``)."""

    data: dict[str, Any]
    summary: str
    source_refs: tuple[str, ...] = ()
    symbol: str | None = None
    #: How ``data`` may be stored compactly, never part of the result (``db.blobs.split``'s
    #: ``basis``: ``{list key: {volatile item key: {"base": [...], "scale": x}}}``, e.g. the
    #: source's adjusted closes and the point-in-time factor of ``get_history``).
    storage_basis: dict[str, Any] | None = None


@dataclass
class ToolContext:
    """Everything a tool call may use, plus the buffer of rows to write.

    Attributes:
        settings: the process settings.
        as_of: point-in-time date; no tool returns data after it.
        provider: the market-data provider.
        analysis_id / symbol / stage / iteration / celery_task_id: log context (None outside
            a run); ``symbol`` labels rows of tools without a symbol argument (calculator).
        id_seed: extra text mixed into deterministic ids (the task's retry count), so a
            Celery retry writes new rows while a redelivered message rewrites the same ids.
        load_result: looks up the ``data`` of an earlier successful tool call by id; each id is
            looked up at most once per context (a successful result never changes).
        load_results: the same for several ids in one round trip (:meth:`prefetch`).
        history_checks: ``{tool_call_id: {symbol, period, interval, digest}}`` of earlier
            ``get_history`` calls, from the state: a tool may rebuild those bars from the
            provider instead of loading the stored result, and uses them only when the digest
            matches (``agents.tools.history.cited_history``).
        memo: per-context scratch space of tools (e.g. the bar frame of a cited history).
        rows: ``tool_calls`` rows recorded so far, flushed by the caller in one batch.
        results: envelopes of this context's calls, by ``tool_call_id``.
        sleep: injectable for tests of the backoff schedule.
        recorded: replay mode (``apps.replay``): returns the stored ``tool_calls`` rows of a
            ``tool_call_id`` (its attempts, in order); :func:`run_tool` then serves the recorded
            envelope instead of running the tool, so no provider is touched.
    """

    settings: Settings
    as_of: date
    provider: MarketDataProvider
    analysis_id: str | None = None
    symbol: str | None = None
    stage: str = "direct"
    iteration: int = 0
    celery_task_id: str | None = None
    id_seed: str = ""
    load_result: Callable[[str], dict[str, Any] | None] | None = None
    load_results: Callable[[list[str]], dict[str, dict[str, Any]]] | None = None
    history_checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    memo: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    results: dict[str, ToolEnvelope] = field(default_factory=dict)
    sleep: Callable[[float], None] = time.sleep
    recorded: Callable[[str], list[dict[str, Any]]] | None = None
    _seq: int = 0
    _loaded: dict[str, dict[str, Any]] = field(default_factory=dict)

    def next_tool_call_id(self, tool: str, arguments: dict[str, Any]) -> str:
        """A ``tool_call_id`` such as ``get_history_1a2b3c4d5e6f``.

        Deterministic inside an analysis (same analysis, iteration, stage, seed, order, tool and
        arguments → same id), so a redelivered task's rows collide and are dropped by
        ``ON CONFLICT DO NOTHING``; random outside an analysis.
        """
        self._seq += 1
        if self.analysis_id is None:
            return f"{tool}_{uuid.uuid4().hex[:12]}"
        canonical = json.dumps(arguments, sort_keys=True, default=str)
        key = (
            f"{self.analysis_id}|{self.iteration}|{self.stage}|{self.id_seed}|{self._seq}|{tool}|{canonical}"
        )
        return f"{tool}_{uuid.uuid5(_ID_NAMESPACE, key).hex[:12]}"

    def prefetch(self, tool_call_ids: list[str]) -> None:
        """Load the results of ``tool_call_ids`` not known yet in one batch (``load_results``),
        so the :meth:`result_data` calls that follow need no round trip each. A no-op without
        ``load_results``; ids without a stored success are simply not cached."""
        missing = [r for r in dict.fromkeys(tool_call_ids) if r not in self.results and r not in self._loaded]
        if missing and self.load_results is not None:
            self._loaded.update(self.load_results(missing))

    def result_data(self, tool_call_id: str) -> dict[str, Any] | None:
        """``data`` of a successful call made in this context or (via ``load_result``) earlier."""
        env = self.results.get(tool_call_id)
        if env is not None:
            return env.data
        loaded = self._loaded.get(tool_call_id)
        if loaded is None and self.load_result is not None:
            loaded = self.load_result(tool_call_id)
            if loaded is not None:
                self._loaded[tool_call_id] = loaded
        return loaded


ToolFunc = Callable[[Any, ToolContext], ToolOutput]


@dataclass(frozen=True)
class Tool:
    """A registered tool: ``name``, ``description`` (for people and LLMs), its pydantic
    ``input_model`` and the function ``(validated_input, ctx) -> ToolOutput``."""

    name: str
    description: str
    input_model: type[BaseModel]
    func: ToolFunc

    def openai_schema(self) -> dict[str, Any]:
        """The OpenAI function-calling schema generated from ``input_model``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_model.model_json_schema(),
            },
        }


REGISTRY: dict[str, Tool] = {}


def register(*, name: str, description: str, input_model: type[BaseModel]) -> Callable[[ToolFunc], ToolFunc]:
    """Decorator registering a tool function under ``name``. Raises ValueError on a duplicate."""

    def wrap(func: ToolFunc) -> ToolFunc:
        if name in REGISTRY:
            raise ValueError(f"tool {name!r} registered twice")
        REGISTRY[name] = Tool(name=name, description=description, input_model=input_model, func=func)
        return func

    return wrap


def get_tool(name: str) -> Tool:
    """The registered tool ``name``. Raises KeyError naming the known tools.

    Only tools whose modules were imported are known: :func:`agents.tools.catalog.get_tool`
    registers the built-in ones first.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown tool {name!r}; known: {', '.join(sorted(REGISTRY))}") from None


def _summary_of_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "input"
        parts.append(f"{loc}: {err.get('msg')}")
    return "; ".join(parts)


@dataclass
class _Call:
    """One logical tool call in progress: what every attempt row of it shares."""

    ctx: ToolContext
    tool: str
    tool_call_id: str
    arguments: dict[str, Any]
    symbol: str | None

    def record(
        self,
        *,
        attempt: int,
        started: float,
        output: ToolOutput | None = None,
        error: ToolErrorBody | None = None,
        retry_hint: str | None = None,
        level: str = "INFO",
    ) -> None:
        """Append the attempt's ``tool_calls`` row to ``ctx.rows`` and log its JSON line. Error
        texts are masked here (``core.masking``): a provider may echo the key it was
        sent."""
        ctx = self.ctx
        if error is not None:
            error = ToolErrorBody(code=error.code, message=mask_text(error.message))
        retry_hint = mask_text(retry_hint) if retry_hint else retry_hint
        row = {
            "id": f"{self.tool_call_id}#{attempt}",
            "tool_call_id": self.tool_call_id,
            "analysis_id": ctx.analysis_id,
            "stage": ctx.stage,
            "iteration": ctx.iteration,
            "celery_task_id": ctx.celery_task_id,
            "timestamp": datetime.now(UTC),
            "level": level,
            "tool": self.tool,
            "symbol": (output.symbol if output else None) or self.symbol or ctx.symbol,
            "status": "success" if error is None else "error",
            "attempt": attempt,
            "latency_ms": round((time.perf_counter() - started) * 1000.0, 3),
            "result_summary": output.summary
            if output
            else (f"{error.code.value}: {error.message}" if error else ""),
            "error": error.message if error else None,
            "error_code": error.code.value if error else None,
            "retry_hint": retry_hint,
            "arguments": self.arguments,
            "result": output.data if output else None,
            "source_refs": list(output.source_refs) if output else None,
        }
        if output is not None and output.storage_basis:
            row["result_basis"] = output.storage_basis  # not a column: db.attempt_rows takes it
        ctx.rows.append(row)
        log_tool_call(row)

    def fail(
        self, *, attempt: int, started: float, code: ErrorCode, message: str, retry_hint: str | None = None
    ) -> ToolEnvelope:
        """Record the final failed attempt and return the error envelope."""
        hint = mask_text(retry_hint) if retry_hint else RETRY_HINTS.get(code)
        # masked at the source: the envelope reaches the state, the report and an LLM prompt
        body = ToolErrorBody(code=code, message=mask_text(message))
        self.record(attempt=attempt, started=started, error=body, retry_hint=hint, level="ERROR")
        envelope = ToolEnvelope(
            tool_call_id=self.tool_call_id, error=body, retry_hint=hint, source_refs=[self.tool_call_id]
        )
        self.ctx.results[self.tool_call_id] = envelope
        return envelope

    def succeed(self, *, attempt: int, started: float, output: ToolOutput) -> ToolEnvelope:
        """Record the successful attempt and return the data envelope. ``data`` is masked where
        it goes (a row: ``db.engine``; a prompt: ``agents.llm.session``; a message:
        ``tasks.app``), not here: a 69 KB ``get_history`` result would be encoded and
        searched once more per call for a secret a provider's data practically never holds."""
        refs = [self.tool_call_id, *(r for r in output.source_refs if r != self.tool_call_id)]
        envelope = ToolEnvelope(tool_call_id=self.tool_call_id, data=output.data, source_refs=refs)
        self.record(attempt=attempt, started=started, output=output)
        self.ctx.results[self.tool_call_id] = envelope
        return envelope


def run_tool(*, name: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolEnvelope:
    """Run tool ``name`` with raw ``arguments`` and return its envelope. Never raises for tool
    failures: they become error envelopes (docs/design.md, "Error codes") with a retry hint.

    Each attempt appends one row to ``ctx.rows`` and logs one JSON line. Timeouts are retried
    inside the call with exponential backoff (module docstring).

    Raises:
        KeyError: ``name`` is not a registered tool (a programming error, not a tool failure;
            :func:`agents.tools.catalog.run_tool` registers the built-in tools first).
    """
    tool = get_tool(name)
    raw_symbol = arguments.get("symbol")
    call = _Call(
        ctx=ctx,
        tool=name,
        tool_call_id=ctx.next_tool_call_id(name, arguments),
        arguments=arguments,
        symbol=raw_symbol if isinstance(raw_symbol, str) else None,
    )
    if ctx.recorded is not None:
        return _replayed(call, ctx.recorded(call.tool_call_id))
    started = time.perf_counter()
    try:
        params = tool.input_model.model_validate(arguments)
    except ValidationError as exc:
        return call.fail(
            attempt=1, started=started, code=ErrorCode.INVALID_INPUT, message=_summary_of_validation(exc)
        )
    call.arguments = params.model_dump(mode="json")
    call.symbol = getattr(params, "symbol", call.symbol)
    attempt = 1
    while True:
        started = time.perf_counter()
        try:
            output = tool.func(params, ctx)
        except ProviderTimeoutError as exc:
            if attempt > ctx.settings.data.tool_max_retries:
                return call.fail(
                    attempt=attempt,
                    started=started,
                    code=ErrorCode.NETWORK_ERROR,
                    message=f"timed out after {attempt} attempts: {exc}",
                )
            delay = ctx.settings.data.tool_backoff_base * 2 ** (attempt - 1)
            call.record(
                attempt=attempt,
                started=started,
                error=ToolErrorBody(code=ErrorCode.NETWORK_ERROR, message=f"timeout: {exc}"),
                retry_hint=f"retrying in {delay:g}s",
                level="WARNING",
            )
            ctx.sleep(delay)
            attempt += 1
            continue
        except ProviderError as exc:
            return call.fail(attempt=attempt, started=started, code=ErrorCode(exc.code), message=str(exc))
        except ToolInputError as exc:
            return call.fail(
                attempt=attempt, started=started, code=exc.code, message=str(exc), retry_hint=exc.retry_hint
            )
        except Exception as exc:  # a bug in a tool must not kill the stage: report it, logged with trace
            logger.exception("tool %s failed", name)
            return call.fail(
                attempt=attempt,
                started=started,
                code=ErrorCode.INTERNAL_ERROR,
                message=f"{type(exc).__name__}: {_fingerprint(exc)}",
            )
        return call.succeed(attempt=attempt, started=started, output=output)


class NotRecordedError(LookupError):
    """Replay asked for a tool call the analysis never made (or whose rows are gone): the code
    or the settings now call tools differently from the recorded run."""


def _replayed(call: _Call, rows: list[dict[str, Any]]) -> ToolEnvelope:
    """The envelope of a recorded logical call (replay mode, ``ToolContext.recorded``): its
    attempt rows are appended to ``ctx.rows`` as stored and the last attempt's outcome is
    returned as the original call returned it (``data`` and the tool's extra ``source_refs``,
    or the error with its code and retry hint). Raises :class:`NotRecordedError` when no row
    exists for the call's id."""
    if not rows:
        arguments = json.dumps(call.arguments, sort_keys=True, default=str)
        raise NotRecordedError(
            f"tool call {call.tool_call_id} ({call.tool} {arguments}) is not recorded for this analysis"
        )
    ctx = call.ctx
    ctx.rows.extend(dict(row) for row in rows)
    last = rows[-1]
    if last["status"] == "success":
        extra = [r for r in (last.get("source_refs") or []) if r != call.tool_call_id]
        envelope = ToolEnvelope(
            tool_call_id=call.tool_call_id,
            data=last.get("result") or {},
            source_refs=[call.tool_call_id, *extra],
        )
    else:
        body = ToolErrorBody(code=ErrorCode(last["error_code"]), message=last.get("error") or "")
        envelope = ToolEnvelope(
            tool_call_id=call.tool_call_id,
            error=body,
            retry_hint=last.get("retry_hint"),
            source_refs=[call.tool_call_id],
        )
    ctx.results[call.tool_call_id] = envelope
    return envelope


def _fingerprint(exc: Exception) -> str:
    # Internal error text can carry URLs with keys; log the detail, return only a short digest.
    return hashlib.sha256(str(exc).encode()).hexdigest()[:12] + " (see logs)"
