"""``LLMSession``: every LLM call of one stage run, with retries, fallbacks, budget and rows.

One logical call (``complete``) tries the role's model chain ``[primary, *fallbacks]``; each
name is one deployment of a LiteLLM ``Router`` with its own ``api_base``/``api_key``
(``agents.llm.config``). Each model is retried ``num_retries`` times on rate limits (429),
server errors (5xx), timeouts and connection errors, with exponential backoff
(``retry_backoff * 2**(n-1)`` s), or after at least the server's ``Retry-After`` (read from
``exc.litellm_response_headers``, where LiteLLM puts the provider's headers; a pause longer than
``MAX_RETRY_AFTER_S`` moves on to the next model instead). Other errors (auth, bad request,
unknown model) move straight to the next model. Every attempt is one ``llm_calls`` row
(``attempt`` counts across models) and one JSON log line with the same fields.

Cooldown: the Router counts each deployment's failures and, past ``allowed_fails`` within
``cooldown_time``, puts it in cooldown (for ``cooldown_time`` s, or the Retry-After of a 429);
LiteLLM's own rule, ``litellm/router_utils/cooldown_handlers.py``. A deployment in cooldown
answers ``RouterRateLimitError`` without a request: the session then skips it (no row, no
retry, no sleep) and goes on to the next model, so a dead primary costs one failed logical call,
not one per call. The Router lives once per process; its cooldowns too, unless
``cooldown_redis_url`` puts them in Redis for every process.

Structured output: a call that wants JSON (``json_mode`` or a ``response_schema``) sends
``response_format`` as a JSON schema when ``response_format`` is ``json_schema`` and a schema is
given (constrained decoding on llama.cpp, vLLM, Ollama and OpenAI), else ``json_object``. A
server that refuses the schema with a 400 is asked again at once with ``json_object`` (that
attempt is a row too) and remembered for the rest of the process.

Why our loop and not the Router's own retries/fallbacks: the Router runs attempts internally and
reports them only through fire-and-forget async callbacks, so neither "one row per attempt,
written in the stage's transaction" nor "stop before the next attempt would exceed the budget"
can be guaranteed there. The LiteLLM ``Router`` still owns the deployments (model, api_base,
key, timeout per model name) and every request goes through ``Router.acompletion``.

Budget (per analysis, all stages and passes): before each attempt the session estimates the
attempt's tokens (prompt characters / 4 + ``max_tokens``) and its USD cost where the price is
known, and raises ``BudgetExhaustedError`` if spent + estimate would exceed the limit.

Cost: ``litellm.completion_cost`` (LiteLLM's local price map); for models it does not know, the
per-token prices from settings; otherwise ``None`` (unknown, stored NULL; never guessed).

Imports: LiteLLM takes seconds to import, so only :func:`_prices` and :func:`_router` import it,
when a call is priced or made; without a configured model (``pipeline.query``, the stages)
this module never loads it.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from agents.llm import cache
from agents.llm.config import PLACEHOLDER_KEY, LLMConfig, Role
from core.masking import mask, mask_text, register_secrets
from db.redact import redact

logger = logging.getLogger("finagent.llm")
LLM_LOGGER = "finagent.llm_calls"

_ID_NAMESPACE = uuid.UUID("0b8f5c3e-2d4a-4c7e-9a61-3f1d2e5b7c90")
#: A server asking for a longer pause than this is treated as unavailable (the task time limit
#: is 120 s, and one analysis makes a handful of calls).
MAX_RETRY_AFTER_S = 30.0
#: Added to a Retry-After pause: the Router cools a 429ed deployment down for exactly that long,
#: and a retry sent on the boundary would find it still cooling down.
RETRY_AFTER_MARGIN_S = 0.05
#: Characters per token for the budget estimate: the usual rule of thumb for English and JSON
#: with GPT-style tokenizers (an estimate only; the rows record the provider's real counts).
CHARS_PER_TOKEN = 4
#: Bounds of the redacted request/response JSON stored in a row (debugging aid, not an archive).
MAX_STORED_CHARS = 4000

_LOG_FIELDS = (
    "timestamp",
    "level",
    "llm_call_id",
    "analysis_id",
    "stage",
    "agent",
    "iteration",
    "celery_task_id",
    "model",
    "provider",
    "status",
    "attempt",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "latency_ms",
    "finish_reason",
    "tool_calls_requested",
    "error",
)


class LLMError(Exception):
    """Every model of the chain failed for one logical call. ``errors`` lists ``model: error``."""

    def __init__(self, message: str, *, errors: list[str]) -> None:
        super().__init__(message)
        self.errors = errors


class BudgetExhaustedError(LLMError):
    """The next attempt would exceed the analysis's token or USD budget; nothing was sent."""


class RunBudgetExhaustedError(BudgetExhaustedError):
    """The next attempt would exceed the watchlist run's budget (``RunBudget``); nothing was sent."""


@dataclass(frozen=True)
class RunBudget:
    """The LLM budget of one watchlist run (all its analyses), next to the per-analysis one.

    ``run_id``: the run; ``spent_tokens`` / ``spent_usd``: used by the run's analyses before
    this session (from their ``llm_calls`` rows); ``budget_tokens`` / ``budget_usd``: the limits
    (``None``: no limit of that kind).
    """

    run_id: str
    spent_tokens: int
    spent_usd: float
    budget_tokens: int | None = None
    budget_usd: float | None = None


class TimeBudgetExhaustedError(BudgetExhaustedError):
    """The session's ``deadline`` (the stage's LLM time budget) passed before or during an
    attempt: nothing more is sent in this session."""


#: An attempt is not started with less time than this before the deadline (seconds): a
#: request cut off after a second cannot return a useful answer.
MIN_ATTEMPT_S = 1.0


@dataclass(frozen=True)
class ToolCallRequest:
    """One tool call the model asked for: provider id, tool name, raw JSON arguments text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Completion:
    """The successful attempt of one logical call.

    ``content``: assistant text (may be empty with tool calls); ``tool_calls``: requested calls;
    tokens as reported by the provider (``None`` if not reported); ``cost_usd`` ``None`` if
    unknown; ``model``: the model that answered (a fallback when the primary failed).
    """

    llm_call_id: str
    model: str
    content: str
    tool_calls: list[ToolCallRequest]
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None


Heartbeat = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class _Attempt:
    """What every ``llm_calls`` row of one attempt shares (the arguments of one request).

    ``number``: the row's ``attempt``, counted from 1 across the chain's models; ``started``: a
    ``time.perf_counter()`` reading in seconds taken just before the request (for ``latency_ms``);
    ``messages`` / ``tools``: the OpenAI-format request (``tools`` ``None`` without tools).
    """

    llm_call_id: str
    agent: str
    model: str
    number: int
    started: float
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None


@dataclass
class LLMSession:
    """The LLM calls of one stage run of one analysis.

    Attributes:
        config: resolved configuration. analysis_id / stage / iteration / celery_task_id: row
            context (``analysis_id`` ``None`` for calls outside an analysis, e.g. parse_query
            before the analysis exists). id_seed: mixed into ids like ``ToolContext.id_seed``
            (a Celery retry writes new rows, a redelivery rewrites the same ids).
        spent_tokens / spent_usd: usage of this analysis before this session (from the
            ``llm_calls`` rows), plus every attempt of this session as it happens.
        prior_usage: ``db.repo.llm_usage`` of the analysis when the session started (for totals).
        heartbeat: called after every attempt with ``{agent, model, status, llm_calls}``
            (the stage adapters send it as a Celery ``task-progress`` event).
        rows: ``llm_calls`` rows of this session, flushed by the caller with the stage's rows.
        exhausted: set once a call was refused for the budget; later agents skip their calls.
        sleep: injectable backoff sleep.
        run_budget: the watchlist run's budget when the analysis belongs to a run (else ``None``).
        skipped: ``model: reason`` for deployments skipped without a request (cooldown).
        deadline: ``time.monotonic()`` reading after which no attempt starts (the stage's LLM
            time budget, ``pipeline.steps.context``); each attempt's timeout is
            ``min(config.timeout, deadline - now)``; ``None``: no deadline.
        source: where an answer may come from besides the provider (``agents.llm.cache``): the
            response cache of a stage (``pipeline.steps.context.open_context``), the recorded
            answers of a replay (``pipeline.replay``); ``None``: the provider alone.
    """

    config: LLMConfig
    analysis_id: str | None = None
    stage: str = "direct"
    iteration: int = 0
    celery_task_id: str | None = None
    id_seed: str = ""
    spent_tokens: int = 0
    spent_usd: float = 0.0
    heartbeat: Heartbeat | None = None
    prior_usage: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    exhausted: bool = False
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    run_budget: RunBudget | None = None
    skipped: list[str] = field(default_factory=list)
    deadline: float | None = None
    source: cache.ResponseSource | None = None
    _seq: int = 0

    def time_left(self) -> float | None:
        """Seconds until ``deadline`` (``None`` without one; may be negative)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def _attempt_timeout(self) -> float:
        """``min(config.timeout, time left)``; raises ``TimeBudgetExhaustedError`` (and sets
        ``exhausted``) when less than ``MIN_ATTEMPT_S`` is left."""
        left = self.time_left()
        if left is None:
            return self.config.timeout
        if left < MIN_ATTEMPT_S:
            self.exhausted = True
            raise TimeBudgetExhaustedError(
                f"LLM time budget: {max(left, 0.0):.1f} s left of this stage's budget", errors=[]
            )
        return min(self.config.timeout, left)

    # -- ids ------------------------------------------------------------------------------

    def next_llm_call_id(self, agent: str) -> str:
        """``llm_<12 hex>``: deterministic in an analysis (same analysis, iteration, stage, seed,
        order and agent → same id), random outside one."""
        self._seq += 1
        if self.analysis_id is None:
            return f"llm_{uuid.uuid4().hex[:12]}"
        key = f"{self.analysis_id}|{self.iteration}|{self.stage}|{self.id_seed}|{self._seq}|{agent}"
        return f"llm_{uuid.uuid5(_ID_NAMESPACE, key).hex[:12]}"

    def total_usage(self) -> dict[str, Any]:
        """``prior_usage`` + :meth:`usage`: the analysis's totals so far (same keys)."""
        return combine_usage(self.prior_usage, self.usage())

    # -- budget ---------------------------------------------------------------------------

    def usage(self) -> dict[str, Any]:
        """This session's totals (:func:`usage_of_rows` of its rows)."""
        return usage_of_rows(self.rows)

    def _check_budget(self, *, model: str, prompt_est: int) -> None:
        """Refuse the next attempt on ``model`` if it could exceed the budget.

        Args:
            model: the model of the attempt (its per-token prices, when known, give the USD estimate).
            prompt_est: estimated prompt tokens (:func:`_estimate_prompt_tokens` of the messages).
        Raises:
            BudgetExhaustedError: spent + estimate (``prompt_est`` + ``max_tokens`` tokens, or
                their USD price) > the budget; ``exhausted`` is set.
        """
        estimate = prompt_est + self.config.max_tokens
        if self.spent_tokens + estimate > self.config.budget_tokens:
            self.exhausted = True
            raise BudgetExhaustedError(
                f"token budget: {self.spent_tokens} spent + ~{estimate} for the next call "
                f"> {self.config.budget_tokens}",
                errors=[],
            )
        price = _prices(self.config, model)
        usd = prompt_est * price[0] + self.config.max_tokens * price[1] if price is not None else None
        if usd is not None and self.spent_usd + usd > self.config.budget_usd:
            self.exhausted = True
            raise BudgetExhaustedError(
                f"USD budget: {self.spent_usd:.4f} spent + ~{usd:.4f} for the next call "
                f"> {self.config.budget_usd}",
                errors=[],
            )
        run = self.run_budget
        if run is None:
            return
        mine = self.usage()
        run_tokens = run.spent_tokens + mine["prompt_tokens"] + mine["completion_tokens"]
        if run.budget_tokens is not None and run_tokens + estimate > run.budget_tokens:
            self.exhausted = True
            raise RunBudgetExhaustedError(
                f"watchlist run budget: {run_tokens} tokens spent by the run + ~{estimate} for the "
                f"next call > {run.budget_tokens}",
                errors=[],
            )
        run_usd = run.spent_usd + (mine["cost_usd"] or 0.0)
        if run.budget_usd is not None and usd is not None and run_usd + usd > run.budget_usd:
            self.exhausted = True
            raise RunBudgetExhaustedError(
                f"watchlist run budget: {run_usd:.4f} USD spent by the run + ~{usd:.4f} for the "
                f"next call > {run.budget_usd}",
                errors=[],
            )

    # -- calls ----------------------------------------------------------------------------

    async def complete(
        self,
        *,
        agent: str,
        role: Role,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        json_mode: bool = False,
        response_schema: type[BaseModel] | dict[str, Any] | None = None,
    ) -> Completion:
        """One logical call with retries, cooldowns and fallbacks (module docstring).

        Args:
            agent: name recorded in the rows (``technical``, ``synthesis``, ...).
            role: whose model chain to use.
            messages: OpenAI-format messages. tools: OpenAI tool schemas (``None``: no tools).
            json_mode: ask for a JSON object (``response_format``, see the module docstring).
            response_schema: the answer's pydantic model (or a JSON schema dict): sent as a JSON
                schema ``response_format`` where the configuration and the server allow;
                implies ``json_mode``. Ignored on calls that offer tools.
        Raises:
            BudgetExhaustedError: before an attempt that would exceed the budget
                (``RunBudgetExhaustedError`` for the watchlist run's budget).
            LLMError: every model of the chain failed or was in cooldown.
        """
        import litellm  # ~4 s: only when a model is configured and a call is made

        chain = self.config.chain_for(role)
        if not chain:
            raise LLMError(f"no model configured for role {role.value}", errors=[])
        # a prompt never carries a configured secret to the provider (a tool's echoed error)
        messages = mask(messages)
        router = _router(self.config)
        llm_call_id = self.next_llm_call_id(agent)
        prompt_est = _estimate_prompt_tokens(messages)
        kwargs: dict[str, Any] = {"max_tokens": self.config.max_tokens, "num_retries": 0}
        if tools:
            kwargs["tools"] = tools
        wants_json = (json_mode or response_schema is not None) and not tools
        # the response cache or a replay's recorded answer (agents.llm.cache): no request made.
        # One key for lookup and store: the loop below adds the response_format it negotiates
        # with the server (a schema, or JSON mode after a refusal), which follows from the
        # configuration and the answer's schema, not from the request's content.
        cache_params = dict(kwargs)
        served = await cache.serve(
            self,
            agent=agent,
            llm_call_id=llm_call_id,
            chain=list(chain),
            messages=messages,
            tools=tools,
            params=cache_params,
        )
        if served is not None:
            return served
        attempt = 0
        errors: list[str] = []
        for model in chain:
            retry = 0
            schema_format = _schema_format(self.config, model, response_schema) if wants_json else None
            while True:
                if wants_json and self.config.response_format != "off":
                    kwargs["response_format"] = schema_format or {"type": "json_object"}
                else:
                    kwargs.pop("response_format", None)
                self._check_budget(model=model, prompt_est=prompt_est)
                timeout = self._attempt_timeout()
                call = _Attempt(
                    llm_call_id=llm_call_id,
                    agent=agent,
                    model=model,
                    number=attempt + 1,
                    started=time.perf_counter(),
                    messages=messages,
                    tools=tools,
                )
                try:
                    response = await router.acompletion(
                        model=model, messages=messages, timeout=timeout, **kwargs
                    )
                except Exception as exc:  # LiteLLM maps provider errors to its exception types
                    if _in_cooldown(exc):  # the Router sent nothing: skip this deployment
                        reason = f"{model}: in cooldown after repeated failures, skipped"
                        errors.append(reason)
                        self.skipped.append(reason)
                        logger.info(
                            "llm deployment skipped",
                            extra={"payload": {"event": "deployment in cooldown, skipped", "model": model}},
                        )
                        break
                    attempt += 1
                    message = f"{type(exc).__name__}: {_short(_one_line(str(exc)))}"
                    errors.append(f"{model}: {message}")
                    if schema_format is not None and _is_bad_request(litellm, exc):
                        # the server refused the JSON schema (or the request): ask once more
                        # with plain JSON mode, and never send it a schema again in this process
                        _NO_SCHEMA.add(model)
                        schema_format = None
                        self._record(call, error=message, level="WARNING")
                        continue
                    retryable = _retryable(litellm, exc)
                    wait = self._backoff(retry + 1, exc)
                    last = retry >= self.config.num_retries or not retryable or wait is None
                    self._record(call, error=message, level="ERROR" if last else "WARNING")
                    left = self.time_left()
                    if left is not None and left < MIN_ATTEMPT_S:
                        self.exhausted = True
                        raise TimeBudgetExhaustedError(
                            f"LLM time budget ran out during {agent}'s call ({message[:200]})",
                            errors=errors,
                        ) from None
                    if last or wait is None:
                        break
                    if left is not None and wait > left - MIN_ATTEMPT_S:
                        # the wait (a Retry-After, or the backoff) does not fit the stage's LLM
                        # time budget: the next model in the chain, never a retry sent too early
                        break
                    retry += 1
                    await self.sleep(wait)
                    continue
                attempt += 1
                completion = self._success(litellm, response=response, call=call)
                cache.after_success(
                    self, completion=completion, messages=messages, tools=tools, params=cache_params
                )
                return completion
        raise LLMError(f"{agent}: every model failed ({'; '.join(errors)})"[:2000], errors=errors)

    def _backoff(self, retry: int, exc: Exception) -> float | None:
        """Seconds before retry ``retry`` (1-based) after ``exc``: at least the server's
        Retry-After (a small margin above it, so the Router's cooldown of that length has
        expired), else exponential backoff; ``None`` when the server asks for more than
        ``MAX_RETRY_AFTER_S`` (then the next model is tried instead)."""
        after = retry_after_seconds(exc)
        if after is not None:
            return None if after > MAX_RETRY_AFTER_S else after + RETRY_AFTER_MARGIN_S
        return float(self.config.retry_backoff * 2 ** (retry - 1))

    def _success(self, litellm: Any, *, response: Any, call: _Attempt) -> Completion:
        message = response.choices[0].message
        # a model may repeat a secret it saw (an echoed error in a tool result): its answer is
        # masked before an agent, a row, the cache or the state sees it
        calls = [
            ToolCallRequest(
                id=tc.id, name=tc.function.name, arguments=mask_text(tc.function.arguments or "{}")
            )
            for tc in (message.tool_calls or [])
        ]
        usage = getattr(response, "usage", None)
        prompt = getattr(usage, "prompt_tokens", None)
        completion_tokens = getattr(usage, "completion_tokens", None)
        cost = _cost(
            litellm, self.config, response=response, model=call.model, prompt=prompt, out=completion_tokens
        )
        content = mask_text(message.content or "")
        self._record(
            call,
            prompt_tokens=prompt,
            completion_tokens=completion_tokens,
            cost_usd=cost,
            finish_reason=getattr(response.choices[0], "finish_reason", None),
            tool_calls=calls,
            content=content,
            provider=(getattr(response, "_hidden_params", None) or {}).get("custom_llm_provider"),
        )
        return Completion(
            llm_call_id=call.llm_call_id,
            model=call.model,
            content=content,
            tool_calls=calls,
            prompt_tokens=prompt,
            completion_tokens=completion_tokens,
            cost_usd=cost,
        )

    def _record(
        self,
        call: _Attempt,
        *,
        error: str | None = None,
        level: str = "INFO",
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        cost_usd: float | None = None,
        finish_reason: str | None = None,
        tool_calls: list[ToolCallRequest] | None = None,
        content: str = "",
        provider: str | None = None,
    ) -> None:
        tokens = (prompt_tokens or 0) + (completion_tokens or 0)
        self.spent_tokens += tokens
        self.spent_usd += cost_usd or 0.0
        agent, model, messages = call.agent, call.model, call.messages
        last = messages[-1] if messages else {}
        row = {
            "id": f"{call.llm_call_id}#{call.number}",
            "llm_call_id": call.llm_call_id,
            "analysis_id": self.analysis_id,
            "stage": self.stage,
            "agent": agent,
            "iteration": self.iteration,
            "celery_task_id": self.celery_task_id,
            "timestamp": datetime.now(UTC),
            "level": level,
            "model": model,
            "provider": provider or (model.split("/", 1)[0] if "/" in model else None),
            "status": "error" if error else "success",
            "attempt": call.number,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "cost_usd": cost_usd,
            "latency_ms": round((time.perf_counter() - call.started) * 1000.0, 3),
            "finish_reason": finish_reason,
            "tool_calls_requested": len(tool_calls or []),
            "error": redact(error) if error else None,
            "request": redact(
                {
                    "messages": len(messages),
                    "last_message": {
                        "role": last.get("role"),
                        "content": _short(str(last.get("content") or ""), MAX_STORED_CHARS),
                    },
                    "tools": [t["function"]["name"] for t in call.tools or []],
                }
            ),
            "response": None
            if error
            else redact(
                {
                    "content": _short(content, MAX_STORED_CHARS),
                    "tool_calls": [
                        {"name": c.name, "arguments": _short(c.arguments, 500)} for c in tool_calls or []
                    ],
                }
            ),
        }
        self.rows.append(row)
        payload = {key: row.get(key) for key in _LOG_FIELDS}
        log_level = {"ERROR": logging.ERROR, "WARNING": logging.WARNING}.get(level, logging.INFO)
        logging.getLogger(LLM_LOGGER).log(log_level, "llm_call", extra={"payload": payload})
        if self.heartbeat is not None:
            try:
                self.heartbeat(
                    {"agent": agent, "model": model, "status": row["status"], "llm_calls": len(self.rows)}
                )
            except Exception:  # a lost progress event must never fail the analysis
                logger.warning("heartbeat failed", exc_info=True)


def _estimate_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Estimated prompt tokens of ``messages`` (OpenAI-format dicts) for the budget check: the
    characters of their JSON text / ``CHARS_PER_TOKEN``, rounded down. Raises nothing (values
    JSON cannot encode are written with ``str``)."""
    return len(json.dumps(messages, default=str)) // CHARS_PER_TOKEN


def _short(text: str, limit: int = 300) -> str:
    """``text`` with the configured secrets masked, then cut to ``limit`` characters (masked
    first: a secret cut in two would no longer be recognised)."""
    text = mask_text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _retryable(litellm: Any, exc: Exception) -> bool:
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


def _one_line(text: str) -> str:
    """LiteLLM messages span lines (model group, fallbacks, headers): the first line only."""
    return text.strip().splitlines()[0] if text.strip() else text


def _in_cooldown(exc: Exception) -> bool:
    """True for the Router's "no deployments available" refusal (every deployment of the
    name is cooling down): ``litellm.types.router.RouterRateLimitError``, raised before any
    request is sent."""
    return type(exc).__name__ == "RouterRateLimitError"


def _is_bad_request(litellm: Any, exc: Exception) -> bool:
    kind = getattr(litellm, "BadRequestError", None)
    return (kind is not None and isinstance(exc, kind)) or getattr(exc, "status_code", None) in (400, 422)


#: Deployment names whose server refused a JSON-schema ``response_format`` (per process).
_NO_SCHEMA: set[str] = set()


def _schema_format(
    config: LLMConfig, model: str, schema: type[BaseModel] | dict[str, Any] | None
) -> dict[str, Any] | None:
    """The ``response_format`` asking ``model`` for ``schema`` (OpenAI's ``json_schema`` shape,
    which llama.cpp, vLLM and Ollama's OpenAI endpoints accept), or ``None`` when the setting is
    not ``json_schema``, no schema was given, or the server refused one before."""
    if schema is None or config.response_format != "json_schema" or model in _NO_SCHEMA:
        return None
    if isinstance(schema, dict):
        name, body = str(schema.get("title") or "answer"), schema
    else:
        name, body = schema.__name__, schema.model_json_schema()
    return {"type": "json_schema", "json_schema": {"name": name, "schema": body, "strict": False}}


def usage_of_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals of ``llm_calls`` rows (one per attempt).

    Returns ``{calls, failed_calls, attempts, failed_attempts, prompt_tokens, completion_tokens,
    cost_usd}``: ``calls`` = logical calls answered (a success row), ``failed_calls`` = logical
    calls without one, ``attempts`` = rows, ``failed_attempts`` = error rows; tokens of every row
    the provider reported; ``cost_usd`` the sum of the answered calls' costs, ``None``
    ("unknown", never a guessed 0) when one of them has no price or when attempts failed and
    nothing was answered (a provider may bill a timed-out request; we cannot know).
    """
    ok = [r for r in rows if r["status"] == "success"]
    answered = {r["llm_call_id"] for r in ok}
    all_calls = {r["llm_call_id"] for r in rows}
    costs = [r["cost_usd"] for r in ok]
    unknown = any(c is None for c in costs) or (not ok and len(rows) > 0)
    return {
        "calls": len(answered),
        "failed_calls": len(all_calls - answered),
        "attempts": len(rows),
        "failed_attempts": len(rows) - len(ok),
        "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in rows),
        "completion_tokens": sum(r["completion_tokens"] or 0 for r in rows),
        "cost_usd": None if unknown else round(sum(c or 0.0 for c in costs), 6),
    }


def combine_usage(*parts: dict[str, Any]) -> dict[str, Any]:
    """Sum usage dicts (:func:`usage_of_rows` keys; missing counters count 0); ``cost_usd`` is
    ``None`` when any part's is."""
    keys = ("calls", "failed_calls", "attempts", "failed_attempts", "prompt_tokens", "completion_tokens")
    out: dict[str, Any] = {k: sum(int(p.get(k) or 0) for p in parts) for k in keys}
    costs = [p.get("cost_usd", 0.0) for p in parts]
    out["cost_usd"] = None if any(c is None for c in costs) else round(sum(c or 0.0 for c in costs), 6)
    return out


def _prices(config: LLMConfig, model: str) -> tuple[float, float] | None:
    """(USD per prompt token, per completion token) from LiteLLM's local map, else settings."""
    import litellm  # lazy (see module docstring)

    if _known_model(litellm, model):
        prices = _price_map(litellm)
        info = prices.get(model) or prices[model.split("/", 1)[-1]]
        return float(info["input_cost_per_token"]), float(info.get("output_cost_per_token") or 0.0)
    if config.input_cost_per_token is not None and config.output_cost_per_token is not None:
        return config.input_cost_per_token, config.output_cost_per_token
    return None


_PRICE_MAP: dict[str, Any] | None = None


def _price_map(litellm: Any) -> dict[str, Any]:
    """LiteLLM's local price map as shipped, copied before any Router exists: a Router registers
    its deployments in ``litellm.model_cost`` (with zero prices for unknown models), which would
    turn an unknown price into a wrong 0.0."""
    global _PRICE_MAP
    if _PRICE_MAP is None:
        _PRICE_MAP = dict(getattr(litellm, "model_cost", {}) or {})
    return _PRICE_MAP


def _known_model(litellm: Any, model: str) -> bool:
    """True when LiteLLM's shipped price map has a per-token input price for ``model``."""
    cost_map = _price_map(litellm)
    info = cost_map.get(model) or cost_map.get(model.split("/", 1)[-1]) or {}
    return info.get("input_cost_per_token") is not None


def _cost(
    litellm: Any, config: LLMConfig, *, response: Any, model: str, prompt: int | None, out: int | None
) -> float | None:
    # completion_cost raises for some unknown models and returns 0.0 for others (an unknown
    # "openai/<local>" model): only a model present in the price map gets LiteLLM's figure.
    if _known_model(litellm, model):
        try:
            value = litellm.completion_cost(completion_response=response, model=model)
            if value is not None:
                return round(float(value), 8)
        except Exception:  # unknown model prices raise: record NULL, never crash on pricing
            logger.debug("completion_cost failed for %s", model, exc_info=True)
    if config.input_cost_per_token is None or config.output_cost_per_token is None or prompt is None:
        return None
    return round(prompt * config.input_cost_per_token + (out or 0) * config.output_cost_per_token, 8)


_ROUTERS: dict[tuple[Any, ...], Any] = {}


def _router(config: LLMConfig) -> Any:
    """A LiteLLM ``Router`` with one deployment per name of ``config`` (cached per process, so
    its cooldowns outlive one analysis).

    Each deployment has its own model, ``api_base``, ``api_key`` and timeout
    (``LLMConfig.deployment``). Router-level retries and fallbacks are off (the session's loop
    owns them: one row per attempt, the budget checked before each); its failure counting and
    cooldown (``allowed_fails``, ``cooldown_time``) are on.
    """
    # lazy (see module docstring)
    import litellm
    from litellm import Router

    _price_map(litellm)  # snapshot before the first Router registers its deployments
    litellm.suppress_debug_info = True  # no "Give Feedback" banners on stdout (--json owns it)
    litellm.drop_params = True  # e.g. response_format on a provider without it: dropped, not an error
    deployments = [config.deployment(name) for name in config.all_names()]
    key = (
        tuple((d.name, d.model, d.api_base, d.api_key, d.timeout) for d in deployments),
        config.timeout,
        config.allowed_fails,
        config.cooldown_time,
        config.cooldown_redis_url,
    )
    router = _ROUTERS.get(key)
    if router is None:
        # the keys handed to LiteLLM are masked wherever this process writes text, also when
        # the configuration did not come from the process settings (core.masking)
        keys = [d.api_key for d in deployments if d.api_key and d.api_key != PLACEHOLDER_KEY]
        register_secrets("LLM deployment api_key", keys)
        model_list = []
        for dep in deployments:
            params: dict[str, Any] = {
                "model": dep.model,
                "timeout": dep.timeout or config.timeout,
                "max_retries": 0,
            }
            if dep.api_base:
                params["api_base"] = dep.api_base
            if dep.api_key:
                params["api_key"] = dep.api_key
            model_list.append({"model_name": dep.name, "litellm_params": params})
        extra: dict[str, Any] = {}
        if config.cooldown_redis_url:
            # LiteLLM's DualCache: cooldowns written to Redis too, so every worker process skips
            # a deployment another one saw failing (the failure counts stay per process)
            extra["redis_url"] = config.cooldown_redis_url
        router = Router(
            model_list=model_list,
            num_retries=0,
            allowed_fails=config.allowed_fails,
            cooldown_time=config.cooldown_time,
            disable_cooldowns=config.cooldown_time <= 0,
            **extra,
        )
        _ROUTERS[key] = router
    return router
