"""What a stage run needs besides the state: its tool context and its LLM session.

Built from the state and the settings by the stage adapter (``tasks.factory.run_stage``); both
are plain objects, so a stage function can also be run in process (tests, ``bench/``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from agents.data.routing import get_provider
from agents.llm.config import LLMConfig, llm_config
from agents.llm.session import LLMSession, RunBudget
from agents.tools.registry import ToolContext
from core.settings import Settings, get_settings
from core.state import FinancialAgentState
from db import ops_repo, repo
from db.engine import get_engine

logger = logging.getLogger(__name__)


class StageFunction(Protocol):
    """A plain stage function ``(*, state, ctx) -> state`` (``pipeline/stages/*.py``)."""

    def __call__(self, *, state: FinancialAgentState, ctx: ToolContext) -> FinancialAgentState: ...


def history_checks(state: FinancialAgentState) -> dict[str, dict[str, Any]]:
    """``{history_ref: check}`` of the research stage's ``get_history`` call (its
    ``stock_data.history_check``), so later stages rebuild those bars from the provider instead
    of reloading the ~70 KB stored result (``agents.tools.history.cited_history``)."""
    stock = state.stock_data
    if stock is not None and stock.history_ref and stock.history_check is not None:
        return {stock.history_ref: stock.history_check.model_dump()}
    return {}


def make_context(*, state: FinancialAgentState, stage: str, task_id: str | None, retries: int) -> ToolContext:
    """The tool context of one stage run: point in time, provider, log ids, result loader.

    ``retries`` seeds the tool-call ids (``r<retries>``), so a Celery retry's calls get rows of
    their own while a redelivery of the same attempt writes the same ids (idempotent).

    Raises:
        ValueError: ``state.as_of`` is not set (the producer sets it before the chain starts).
    """
    settings = get_settings()
    engine = get_engine(settings.service.effective_database_url)
    if state.as_of is None:
        raise ValueError("state.as_of must be set before the chain starts")
    return ToolContext(
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
) -> LLMSession | None:
    """The stage's LLM session, or ``None`` when no model is configured (the deterministic path:
    litellm is never imported). Budget use so far comes from the analysis's ``llm_calls`` rows;
    ``heartbeat(info)`` is called after every LLM and tool call (the Celery adapter sends it as a
    ``task-progress`` event, which Flower shows).

    The session's ``deadline`` is now + ``settings.llm_stage_time_budget`` (the stage's soft
    time limit minus ``llm_time_reserve``): no LLM attempt outlives it, so a slow model ends in
    the deterministic fallback instead of ``SoftTimeLimitExceeded``."""
    settings = get_settings()
    config = llm_config(settings=settings, override=state.llm_model)
    if config is None:
        return None
    usage = repo.llm_usage(
        engine=get_engine(settings.service.effective_database_url), analysis_id=state.analysis_id
    )
    config = within_tenant_budget(
        config=config, settings=settings, analysis_id=state.analysis_id, spent_usd=usage["cost_usd"] or 0.0
    )
    return LLMSession(
        config=config,
        analysis_id=state.analysis_id,
        stage=stage,
        iteration=state.iteration,
        celery_task_id=task_id,
        id_seed=f"r{retries}",
        spent_tokens=usage["prompt_tokens"] + usage["completion_tokens"],
        spent_usd=usage["cost_usd"] or 0.0,
        prior_usage=usage,
        heartbeat=heartbeat,
        run_budget=run_budget(analysis_id=state.analysis_id, settings=settings),
        deadline=time.monotonic() + settings.llm_stage_time_budget,
    )


def run_budget(*, analysis_id: str, settings: Settings) -> RunBudget | None:
    """The watchlist run's LLM budget for an analysis of that run, with what the run's analyses
    spent so far (their ``llm_calls`` rows); ``None`` when no run budget is set or the analysis
    is not part of a run. Checked at each stage start: analyses running in parallel can pass
    the limit by at most what they spend in the stage they are in."""
    if settings.llm.llm_run_budget_tokens is None and settings.llm.llm_run_budget_usd is None:
        return None
    engine = get_engine(settings.service.effective_database_url)
    found = ops_repo.run_of_analysis(engine=engine, analysis_id=analysis_id)
    if found is None:
        return None
    run_id, ids = found
    usage = repo.llm_usage_of(engine=engine, analysis_ids=ids)
    return RunBudget(
        run_id=run_id,
        spent_tokens=usage["prompt_tokens"] + usage["completion_tokens"],
        spent_usd=usage["cost_usd"] or 0.0,
        budget_tokens=settings.llm.llm_run_budget_tokens,
        budget_usd=settings.llm.llm_run_budget_usd,
    )


def within_tenant_budget(
    *,
    config: LLMConfig,
    settings: Settings,
    analysis_id: str,
    spent_usd: float,
    now: datetime | None = None,
) -> LLMConfig:
    """``config`` with its per-analysis USD budget lowered so that this analysis spends at most
    what its tenant has left of ``tenant_daily_llm_budget_usd`` today (UTC; the sum of the
    tenant's ``llm_calls.cost_usd`` since midnight). ``spent_usd`` is the analysis's own spend so
    far, which the session counts against the budget. Unchanged when no daily cap is set or the
    per-analysis budget is already the tighter one; a spent cap leaves no budget, so the agents
    fall back to the deterministic analysts (``LLM_BUDGET_EXHAUSTED``)."""
    cap = settings.llm.tenant_daily_llm_budget_usd
    if cap is None:
        return config
    engine = get_engine(settings.service.effective_database_url)
    tenant = repo.tenant_of(engine=engine, analysis_id=analysis_id)
    if tenant is None:
        return config
    midnight = (now or datetime.now(UTC)).astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    left_today = max(0.0, cap - repo.tenant_llm_spend(engine=engine, tenant=tenant, since=midnight))
    budget = min(config.budget_usd, spent_usd + left_today)
    if budget < config.budget_usd:
        logger.info(
            "analysis %s: tenant %s has %.4f USD of its daily LLM cap left; budget %.4f USD",
            analysis_id,
            tenant,
            left_today,
            budget,
        )
        return dataclasses.replace(config, budget_usd=budget)
    return config
