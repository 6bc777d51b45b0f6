"""The context of a step: what a stage function gets besides the state.

A :class:`StepContext` is the stage's tool context (``agents.tools.registry.ToolContext``: point
in time, provider, log ids, result loader, the rows buffer) plus its LLM session (``llm``), which
carries the response source (``LLMSession.source``: the response cache when
``FINAGENT_LLM_CACHE=1``) and the budgets (the analysis's, its tenant's daily cap, its watchlist
run's). Built from the state, the settings and the delivery by :func:`open_context`
(``pipeline.steps.run.run_step``); plain objects, so a stage function can also be run in
process (tests, ``bench/``, ``apps.replay``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol

from agents.data.routing import get_provider
from agents.llm.config import LLMConfig, llm_config
from agents.llm.session import LLMSession, RunBudget
from agents.llm.sources import response_cache
from agents.tools.registry import ToolContext
from core.settings import Settings
from core.state import FinancialAgentState
from db import repo
from db.engine import get_engine
from db.repo import LLMSpend
from pipeline.steps.delivery import Delivery

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PassEnd:
    """How the last stage of a pass ended it, left on its context (:attr:`StepContext.pass_end`)
    by the function of the stage table's last row (``pipeline.stages.ending``) for the step's
    write (``pipeline.steps.run``).

    ``ends``: the pass ends the analysis; the stage's state is then finished (done or failed,
    its Markdown report written) and ``report_json`` is its JSON report, ``error`` why a failed
    analysis ended (the verdict's reason; ``None`` when done). ``ends=False``: another pass
    follows (``should_continue`` hands off to it); the state is the state after the stage."""

    ends: bool
    report_json: dict[str, Any] | None = None
    error: str | None = None


@dataclass
class StepContext(ToolContext):
    """A :class:`~agents.tools.registry.ToolContext` (what every tool call of the stage uses)
    plus the stage's LLM session (:attr:`llm`). Stage functions pass it to tools as their
    context and read ``llm`` where an LLM agent may run.

    ``open_llm`` builds the session the first time :attr:`llm` is read (it answers ``None`` on
    the deterministic path, no model being configured): the model configuration (the router
    file) and the budget read behind it (``db.repo.llm_spend``) are paid only by a stage that
    asks for the session, not by every stage of an analysis in LLM mode. ``pass_end``: what the
    last stage of a pass leaves for the step's write besides its rows (:class:`PassEnd`).
    """

    open_llm: Callable[[], LLMSession | None] | None = None
    #: How the stage ended its pass (:class:`PassEnd`): set by the last stage only.
    pass_end: PassEnd | None = None
    _llm: LLMSession | None = field(default=None, init=False, repr=False)

    @property
    def llm(self) -> LLMSession | None:
        """The stage's LLM session, opened on first read (``open_llm``); ``None`` when no model
        is configured. Raises what ``open_llm`` raises (a database outage of the budget read:
        the step's retry)."""
        if self.open_llm is not None:
            opener, self.open_llm = self.open_llm, None
            self._llm = opener()
        return self._llm

    @property
    def llm_rows(self) -> list[dict[str, Any]]:
        """The ``llm_calls`` rows of the session so far (none when it was never opened)."""
        return self._llm.rows if self._llm is not None else []


class StageFunction(Protocol):
    """A plain stage function ``(*, state, ctx) -> state`` (``pipeline/stages/*.py``)."""

    def __call__(self, *, state: FinancialAgentState, ctx: StepContext) -> FinancialAgentState: ...


def history_checks(state: FinancialAgentState) -> dict[str, dict[str, Any]]:
    """``{history_ref: check}`` of the research stage's ``get_history`` call (its
    ``stock_data.history_check``), so later stages rebuild those bars from the provider instead
    of reloading the ~70 KB stored result (``agents.tools.history.cited_history``)."""
    stock = state.stock_data
    if stock is not None and stock.history_ref and stock.history_check is not None:
        return {stock.history_ref: stock.history_check.model_dump()}
    return {}


def open_context(
    *,
    state: FinancialAgentState,
    stage: str,
    delivery: Delivery,
    heartbeat: Callable[[dict[str, Any]], None] | None = None,
    settings: Settings,
) -> StepContext:
    """The context of one stage run: :func:`make_context` with the stage's LLM session
    (:func:`make_llm_session`; ``heartbeat`` as there), opened when the stage first reads
    ``ctx.llm`` (``None`` then when no model is configured), and, on that session, the response
    cache (``agents.llm.sources.response_cache``: ``None`` unless ``FINAGENT_LLM_CACHE=1``). The
    session's time budget counts from here.

    Raises:
        ValueError: ``state.as_of`` is not set (the producer sets it before the chain starts).
    """
    ctx = make_context(
        state=state, stage=stage, task_id=delivery.task_id, retries=delivery.retries, settings=settings
    )
    ctx.open_llm = partial(
        make_llm_session,
        state=state,
        stage=stage,
        task_id=delivery.task_id,
        retries=delivery.retries,
        heartbeat=heartbeat,
        started=time.monotonic(),
        settings=settings,
    )
    return ctx


def make_context(
    *, state: FinancialAgentState, stage: str, task_id: str | None, retries: int, settings: Settings
) -> StepContext:
    """The context of one stage run without an LLM session: point in time, provider, log ids,
    result loader.

    ``retries`` seeds the tool-call ids (``r<retries>``), so a Celery retry's calls get rows of
    their own while a redelivery of the same attempt writes the same ids (idempotent).

    Raises:
        ValueError: ``state.as_of`` is not set (the producer sets it before the chain starts).
    """
    engine = get_engine(settings.service.effective_database_url)
    if state.as_of is None:
        raise ValueError("state.as_of must be set before the chain starts")
    return StepContext(
        settings=settings,
        as_of=state.as_of,
        provider=get_provider(settings=settings),
        analysis_id=state.analysis_id,
        symbol=state.stock_symbol,
        stage=stage,
        iteration=state.iteration,
        celery_task_id=task_id,
        id_seed=f"r{retries}",
        load_result=lambda ref: repo.get_tool_result(engine=engine, tool_call_id=ref),
        load_results=lambda refs: repo.get_tool_results(engine=engine, tool_call_ids=refs),
        history_checks=history_checks(state),
    )


def make_llm_session(
    *,
    state: FinancialAgentState,
    stage: str,
    task_id: str | None,
    retries: int,
    heartbeat: Callable[[dict[str, Any]], None] | None = None,
    started: float | None = None,
    settings: Settings,
) -> LLMSession | None:
    """The stage's LLM session for the model configured (``agents.llm.config.llm_config`` of
    ``settings`` and ``state.llm_model``), with the response cache as its source when
    ``FINAGENT_LLM_CACHE=1``; ``None`` when no model is configured (no budget read). The budgets
    start from one read of the database (``db.repo.llm_spend``): the analysis's ``llm_calls``
    rows, its tenant's spend today when a daily cap is set (:func:`within_tenant_budget`), its
    watchlist run's when a run budget is set (:func:`run_budget`). ``heartbeat(info)`` is called
    with ``{"step": "started"}`` once the session is open (the stage is about to spend seconds
    to minutes on the model), then after every LLM and tool call (the Celery adapter sends it
    as a ``task-progress`` event, which Flower shows).

    The session's ``deadline`` is ``started`` (``time.monotonic()``, default now) +
    ``settings.llm_stage_time_budget`` (the stage's soft time limit minus ``llm.time_reserve``):
    no LLM attempt outlives it, so a slow model ends in the deterministic fallback instead of
    ``SoftTimeLimitExceeded``. Raises ``agents.llm.config.RouterConfigError`` for a malformed
    router file or deployments, and what the database read raises (``OperationalError``)."""
    config = llm_config(settings=settings, override=state.llm_model)
    if config is None:
        return None
    spend = repo.llm_spend(
        engine=get_engine(settings.service.effective_database_url),
        analysis_id=state.analysis_id,
        tenant_since=utc_midnight() if settings.llm.tenant_daily_budget_usd is not None else None,
        with_run=settings.llm.run_budget_tokens is not None or settings.llm.run_budget_usd is not None,
    )
    session = LLMSession.resuming(
        usage=spend.usage,
        config=within_tenant_budget(
            config=config, settings=settings, spend=spend, analysis_id=state.analysis_id
        ),
        analysis_id=state.analysis_id,
        stage=stage,
        iteration=state.iteration,
        celery_task_id=task_id,
        id_seed=f"r{retries}",
        heartbeat=heartbeat,
        run_budget=run_budget(settings=settings, spend=spend),
        deadline=(started if started is not None else time.monotonic()) + settings.llm_stage_time_budget,
        source=response_cache(settings),
    )
    if heartbeat is not None:
        # a stage with a model runs for seconds to minutes: Flower shows it PROGRESS at once,
        # then each heartbeat. A stage that opens no session ends within milliseconds, before
        # Flower could show the event (Celery's own task-started event marks it running); its
        # publish was 4 % of a worker's CPU per analysis.
        heartbeat({"step": "started"})
    return session


def utc_midnight(now: datetime | None = None) -> datetime:
    """The start of ``now``'s day in UTC (default: today's): where a tenant's daily LLM cap
    starts counting."""
    return (now or datetime.now(UTC)).astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def run_budget(*, settings: Settings, spend: LLMSpend) -> RunBudget | None:
    """The watchlist run's LLM budget for an analysis of that run, with what the run's analyses
    spent so far (``spend.run_usage``: their ``llm_calls`` rows); ``None`` when no run budget
    is set or the analysis is not part of a run. Checked at each stage start: analyses running
    in parallel can pass the limit by at most what they spend in the stage they are in."""
    if settings.llm.run_budget_tokens is None and settings.llm.run_budget_usd is None:
        return None
    if spend.run_id is None or spend.run_usage is None:
        return None
    usage = spend.run_usage
    return RunBudget(
        run_id=spend.run_id,
        spent_tokens=usage["prompt_tokens"] + usage["completion_tokens"],
        spent_usd=usage["cost_usd"] or 0.0,
        budget_tokens=settings.llm.run_budget_tokens,
        budget_usd=settings.llm.run_budget_usd,
    )


def within_tenant_budget(
    *, config: LLMConfig, settings: Settings, spend: LLMSpend, analysis_id: str
) -> LLMConfig:
    """``config`` with its per-analysis USD budget lowered so that this analysis spends at most
    what its tenant has left of ``tenant_daily_llm_budget_usd`` today (UTC; ``spend`` read with
    ``tenant_since`` = :func:`utc_midnight`: the sum of the tenant's ``llm_calls.cost_usd``
    since midnight). The analysis's own spend so far (``spend.usage``) counts against the
    budget in the session. Unchanged when no daily cap is set, the tenant is unknown, or the
    per-analysis budget is already the tighter one; a spent cap leaves no budget, so the agents
    fall back to the deterministic analysts (``LLM_BUDGET_EXHAUSTED``)."""
    cap = settings.llm.tenant_daily_budget_usd
    if cap is None or spend.tenant is None:
        return config
    left_today = max(0.0, cap - spend.tenant_spent_usd)
    budget = min(config.budget_usd, (spend.usage["cost_usd"] or 0.0) + left_today)
    if budget < config.budget_usd:
        logger.info(
            "analysis %s: tenant %s has %.4f USD of its daily LLM cap left; budget %.4f USD",
            analysis_id,
            spend.tenant,
            left_today,
            budget,
        )
        return dataclasses.replace(config, budget_usd=budget)
    return config
