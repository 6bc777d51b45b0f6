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

Structured output, negotiated per deployment: a call that wants JSON (``json_mode`` or a
``response_schema``) asks with the most constrained form of ``agents.llm.forms.RESPONSE_FORMS`` the
configuration allows (``FINAGENT_LLM_RESPONSE_FORMAT``) and the deployment's server has not
refused in this process: ``json_schema`` (OpenAI's shape), ``json_object_schema`` (llama.cpp's
``{"type": "json_object", "schema": ...}``), ``json_object``, ``prompt`` (no
``response_format``). A 4xx/5xx whose body names the response format (llama-cpp-python answers
``json_schema`` with HTTP 500 "only 'text' or 'json_object' allowed") is a refusal of that form,
not a transient failure: the same deployment is asked again at once with the next form (that
attempt is a row too), with no retry, no backoff and no cooldown (the Router does not count it,
``agents.llm.router``), and the refusal is remembered for the deployment for the rest of the process.
Each row's ``request`` and log line name the form used (``response_format``), and so does the
:class:`Completion`.

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

The response forms live in :mod:`agents.llm.forms`, the prices and usage totals in
:mod:`agents.llm.pricing`, the Router in :mod:`agents.llm.router`, the retry rules in
:mod:`agents.llm.retry`.

Imports: LiteLLM takes seconds to import, so only ``agents.llm.pricing.prices``,
``agents.llm.router.router_for`` and :meth:`LLMSession.complete` import it, when a call is
priced or made; without a configured model (``pipeline.query``, the stages) this module never
loads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agents.llm import cache
from agents.llm.config import LLMConfig, Role
from agents.llm.forms import (
    ACCEPTED,
    deployment_key,
    form_for,
    refuses_response_format,
    response_format_param,
    step_down,
)
from agents.llm.pricing import combine_usage, cost_of, prices, usage_of_rows
from agents.llm.retry import first_line, in_cooldown, is_retryable, retry_after_seconds
from agents.llm.router import router_for
from core.masking import mask, mask_text
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
    unknown; ``model``: the model that answered (a fallback when the primary failed);
    ``response_format``: the structured-output form it answered under
    (``agents.llm.forms.RESPONSE_FORMS``; ``None``: no JSON was asked for).
    """

    llm_call_id: str
    model: str
    content: str
    tool_calls: list[ToolCallRequest]
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    response_format: str | None = None


Heartbeat = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class _Attempt:
    """What every ``llm_calls`` row of one attempt shares (the arguments of one request).

    ``number``: the row's ``attempt``, counted from 1 across the chain's models; ``started``: a
    ``time.perf_counter()`` reading in seconds taken just before the request (for ``latency_ms``);
    ``messages`` / ``tools``: the OpenAI-format request (``tools`` ``None`` without tools);
    ``form``: the structured-output form asked for (``agents.llm.forms.RESPONSE_FORMS``; ``None``: no JSON
    asked for).
    """

    llm_call_id: str
    agent: str
    model: str
    number: int
    started: float
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    form: str | None = None


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
            answers of a replay (``apps.replay``); ``None``: the provider alone.
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

    @classmethod
    def resuming(cls, *, usage: dict[str, Any], **fields: Any) -> LLMSession:
        """A session of an analysis that already spent ``usage`` (``db.repo.llm_usage``'s
        shape: ``prompt_tokens``, ``completion_tokens``, ``cost_usd`` in USD or ``None``): its
        budgets start from it (``spent_tokens``, ``spent_usd``) and its totals include it
        (``prior_usage``). ``fields``: the other attributes. Raises ``KeyError`` for a usage
        without the token counts."""
        return cls(
            spent_tokens=usage["prompt_tokens"] + usage["completion_tokens"],
            spent_usd=usage["cost_usd"] or 0.0,
            prior_usage=usage,
            **fields,
        )

    def time_left(self) -> float | None:
        """Seconds until ``deadline`` (``None`` without one; may be negative)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def _attempt_timeout(self, model: str | None = None) -> float:
        """``min(timeout of model, time left)`` (the deployment's own ``timeout`` from the
        router file or ``FINAGENT_LLM_DEPLOYMENTS``, else ``config.timeout``); raises
        ``TimeBudgetExhaustedError`` (and sets ``exhausted``) when less than ``MIN_ATTEMPT_S``
        is left."""
        own = self.config.deployment(model).timeout if model is not None else None
        limit = own or self.config.timeout
        left = self.time_left()
        if left is None:
            return limit
        if left < MIN_ATTEMPT_S:
            self.exhausted = True
            raise TimeBudgetExhaustedError(
                f"LLM time budget: {max(left, 0.0):.1f} s left of this stage's budget", errors=[]
            )
        return min(limit, left)

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
        price = prices(self.config, model)
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
        router = router_for(self.config)
        llm_call_id = self.next_llm_call_id(agent)
        prompt_est = _estimate_prompt_tokens(messages)
        kwargs = self._params(tools)
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
            # the structured-output form this deployment is asked with (negotiated once per
            # process and deployment, module docstring): None when no JSON is wanted
            form = (
                form_for(self.config, model, has_schema=response_schema is not None) if wants_json else None
            )
            while True:
                _ask_with(kwargs, response_format_param(form, response_schema))
                self._check_budget(model=model, prompt_est=prompt_est)
                call = _Attempt(
                    llm_call_id=llm_call_id,
                    agent=agent,
                    model=model,
                    number=attempt + 1,
                    started=time.perf_counter(),
                    messages=messages,
                    tools=tools,
                    form=form,
                )
                try:
                    response = await self._send(router, call, kwargs)
                except TimeBudgetExhaustedError:
                    raise
                except Exception as exc:  # LiteLLM maps provider errors to its exception types
                    step, form = await self._after_failure(
                        litellm, exc, call=call, errors=errors, retry=retry
                    )
                    if step != "skipped":
                        attempt += 1
                    if step == "retry":
                        retry += 1
                    if step in ("retry", "next form"):
                        continue
                    break
                attempt += 1
                if form is not None:
                    ACCEPTED[deployment_key(self.config, model)] = form
                completion = self._success(litellm, response=response, call=call)
                cache.after_success(
                    self, completion=completion, messages=messages, tools=tools, params=cache_params
                )
                return completion
        raise LLMError(f"{agent}: every model failed ({'; '.join(errors)})"[:2000], errors=errors)

    def _params(self, tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        """The request parameters every attempt of a call shares: ``max_tokens``,
        ``temperature``, no Router retries, and ``tools`` when offered."""
        kwargs: dict[str, Any] = {
            "max_tokens": self.config.max_tokens,
            "num_retries": 0,
            "temperature": self.config.temperature,
        }
        if tools:
            kwargs["tools"] = tools
        return kwargs

    async def _send(self, router: Any, call: _Attempt, kwargs: dict[str, Any]) -> Any:
        """The request of attempt ``call`` through ``router`` (``Router.acompletion`` with
        ``kwargs``), holding a request slot of its deployment; its timeout is the time left
        (:meth:`_attempt_timeout`) once the slot is held. Raises what the request raises, and
        ``TimeBudgetExhaustedError`` when no attempt fits the time left."""
        model = call.model
        timeout = self._attempt_timeout(model)
        async with _deployment_slot(self, model):
            # the wait for a slot counts against the time left
            timeout = min(timeout, self._attempt_timeout(model))
            return await router.acompletion(model=model, messages=call.messages, timeout=timeout, **kwargs)

    async def _after_failure(
        self, litellm: Any, exc: Exception, *, call: _Attempt, errors: list[str], retry: int
    ) -> tuple[str, str | None]:
        """What follows the failed attempt ``call`` (``exc``; ``retry``: the retries of this
        model so far), with ``errors`` extended and the attempt's row recorded: ``("skipped",
        form)`` (the deployment is in cooldown: nothing was sent, no row; the next model),
        ``("next form", form)`` (the server refused the structured-output form: the same model
        at once with the next form), ``("retry", form)`` (after the backoff, already slept) or
        ``("next model", form)``; ``form`` is the form to ask with next.

        Raises:
            TimeBudgetExhaustedError: less than one attempt's minimum is left (``exhausted`` set).
        """
        model, form, agent = call.model, call.form, call.agent
        if in_cooldown(exc):  # the Router sent nothing: skip this deployment
            reason = f"{model}: in cooldown after repeated failures, skipped"
            errors.append(reason)
            self.skipped.append(reason)
            logger.info(
                "llm deployment skipped",
                extra={"payload": {"event": "deployment in cooldown, skipped", "model": model}},
            )
            return "skipped", form
        message = f"{type(exc).__name__}: {_short(first_line(str(exc)))}"
        errors.append(f"{model}: {message}")
        if form is not None and form != "prompt" and refuses_response_format(exc):
            # the server refused this structured-output form (not a transient
            # failure: no retry, no backoff, no cooldown): the next form at once,
            # remembered for this deployment for the rest of the process
            refused, form = form, step_down(self.config, model, form)
            self._record(call, error=message, level="WARNING")
            logger.info(
                "llm response format refused",
                extra={
                    "payload": {
                        "event": "response format refused, stepping down",
                        "model": model,
                        "refused": refused,
                        "next": form,
                    }
                },
            )
            return "next form", form
        retryable = is_retryable(litellm, exc)
        if not self.config.retry_timeouts and isinstance(exc, litellm.Timeout):
            # a CPU-bound server that timed out is still busy with the request: a
            # retry would queue behind it; the next model instead
            retryable = False
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
            return "next model", form
        if left is not None and wait > left - MIN_ATTEMPT_S:
            # the wait (a Retry-After, or the backoff) does not fit the stage's LLM
            # time budget: the next model in the chain, never a retry sent too early
            return "next model", form
        await self.sleep(wait)
        return "retry", form

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
        cost = cost_of(
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
            response_format=call.form,
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
                    "response_format": call.form,
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
        payload["response_format"] = call.form
        log_level = {"ERROR": logging.ERROR, "WARNING": logging.WARNING}.get(level, logging.INFO)
        logging.getLogger(LLM_LOGGER).log(log_level, "llm_call", extra={"payload": payload})
        if self.heartbeat is not None:
            try:
                self.heartbeat(
                    {"agent": agent, "model": model, "status": row["status"], "llm_calls": len(self.rows)}
                )
            except Exception:  # a lost progress event must never fail the analysis
                logger.warning("heartbeat failed", exc_info=True)


def _ask_with(kwargs: dict[str, Any], response_format: dict[str, Any] | None) -> None:
    """Set ``kwargs["response_format"]`` to ``response_format``, or remove it (``None``)."""
    if response_format is not None:
        kwargs["response_format"] = response_format
    else:
        kwargs.pop("response_format", None)


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


#: Directory of the per-deployment slot lock files (one host: every finagent process on it).
SLOT_DIR = Path(tempfile.gettempdir()) / "finagent-llm-slots"
#: Seconds between two tries of a busy slot.
SLOT_POLL_S = 0.05


@contextlib.asynccontextmanager
async def _deployment_slot(session: LLMSession, model: str) -> AsyncIterator[None]:
    """Hold one of ``config.deployment_concurrency`` request slots of deployment ``model`` for
    the duration of a request (no limit: nothing held). A slot is an exclusive ``flock`` on a
    file named by the deployment and its server, so every finagent process of this host
    shares it (a CPU-bound local server answers one request at a time; two at once would make
    both time out). Waits while every slot is taken, at most until the session's deadline.

    Raises:
        TimeBudgetExhaustedError: the deadline passed while waiting (``exhausted`` is set).
    """
    limit = session.config.deployment_concurrency
    if limit is None:
        yield
        return
    SLOT_DIR.mkdir(parents=True, exist_ok=True)
    base = hashlib.sha256(repr(deployment_key(session.config, model)).encode()).hexdigest()[:16]
    while True:
        for slot in range(limit):
            handle = open(SLOT_DIR / f"{base}.{slot}.lock", "a+")  # noqa: SIM115  # held across the yield
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()
            return
        left = session.time_left()
        if left is not None and left < MIN_ATTEMPT_S:
            session.exhausted = True
            raise TimeBudgetExhaustedError(
                f"LLM time budget: every request slot of {model} stayed busy", errors=[]
            )
        await asyncio.sleep(SLOT_POLL_S)
