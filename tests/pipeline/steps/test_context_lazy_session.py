"""The step context opens the LLM session (and pays its configuration, router file included,
and its budget read) only when a stage reads ``ctx.llm``; its time budget counts from the
context's opening, and Flower hears that the stage started when the session opens."""

from __future__ import annotations

import time
from datetime import date
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import OperationalError

from agents.llm.config import RouterConfigError
from core.settings import get_settings
from core.state import FinancialAgentState
from db import ledger, repo
from db.engine import get_engine
from db.migrate import upgrade
from pipeline.steps.context import open_context
from pipeline.steps.delivery import Delivery


@pytest.fixture
def analysis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FinancialAgentState:
    url = f"sqlite:///{tmp_path / 'lazy.sqlite3'}"
    upgrade(url=url)
    monkeypatch.setenv("FINAGENT_SERVICE_DATABASE_URL", url)
    monkeypatch.setenv("FINAGENT_LLM_MODEL", "openai/m")
    get_settings.cache_clear()
    ledger.create_and_claim(
        engine=get_engine(url),
        analysis_id="lazy-1",
        symbol="AAPL",
        as_of="2012-06-29",
        user_query="q",
        max_iterations=1,
        state={},
    )
    repo.insert_llm_calls(
        engine=get_engine(url),
        rows=[
            {
                "id": "c1",
                "llm_call_id": "c1",
                "stage": "analysis",
                "agent": "t",
                "iteration": 0,
                "model": "m",
                "status": "success",
                "attempt": 1,
                "latency_ms": 1,
                "analysis_id": "lazy-1",
                "prompt_tokens": 120,
                "completion_tokens": 30,
                "cost_usd": 0.25,
            }
        ],
    )
    return FinancialAgentState(analysis_id="lazy-1", stock_symbol="AAPL", as_of=date(2012, 6, 29))


def test_session_opens_on_first_read_with_the_spend_so_far(analysis: FinancialAgentState) -> None:
    before = time.monotonic()
    beats: list[dict[str, object]] = []
    ctx = open_context(
        state=analysis,
        stage="analysis",
        delivery=Delivery(task_id="t-1"),
        heartbeat=beats.append,
        settings=get_settings(),
    )
    assert ctx.llm_rows == []  # reading the rows does not open the session
    assert ctx.open_llm is not None  # not opened yet: no budget read so far
    assert beats == []  # nor told Flower the stage started
    session = ctx.llm
    assert session is not None and ctx.open_llm is None
    assert ctx.llm is session  # opened once
    assert beats == [{"step": "started"}]
    # the budget starts from the analysis's recorded calls (150 tokens, 0.25 USD)
    assert session.spent_tokens == 150 and session.spent_usd == pytest.approx(0.25)
    # the deadline counts from the context's opening, not from the first read
    budget = get_settings().llm_stage_time_budget
    assert before + budget <= session.deadline <= time.monotonic() + budget


def test_the_budget_is_read_at_the_first_read_of_the_session(analysis: FinancialAgentState) -> None:
    ctx = open_context(
        state=analysis, stage="research", delivery=Delivery(task_id="t-2"), settings=get_settings()
    )
    # after the context is open the llm_calls table goes away: a stage that runs no agent never
    # notices, a stage that opens the session gets the database error (the step's retry)
    url = get_settings().service.effective_database_url
    with get_engine(url).begin() as conn:
        conn.execute(sa.text("ALTER TABLE llm_calls RENAME TO llm_calls_gone"))
    assert ctx.llm_rows == []
    with pytest.raises(OperationalError, match="llm_calls"):
        _ = ctx.llm


def test_the_router_file_is_read_when_the_session_opens(
    analysis: FinancialAgentState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    router = tmp_path / "router.yaml"
    router.write_text("model_list:\n  - model_name: m\n    litellm_params:\n      model: openai/m\n")
    monkeypatch.setenv("FINAGENT_LLM_ROUTER_FILE", str(router))
    get_settings.cache_clear()
    ctx = open_context(
        state=analysis, stage="research", delivery=Delivery(task_id="t-4"), settings=get_settings()
    )
    # the file goes away after the context is open: a stage that asks for no model never reads
    # it, the stage that opens the session does
    router.unlink()
    with pytest.raises(RouterConfigError, match=r"router\.yaml"):
        _ = ctx.llm


def test_no_model_means_no_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINAGENT_SERVICE_DATABASE_URL", f"sqlite:///{tmp_path / 'none.sqlite3'}")
    get_settings.cache_clear()
    state = FinancialAgentState(analysis_id="x", stock_symbol="AAPL", as_of=date(2012, 6, 29))
    beats: list[dict[str, object]] = []
    ctx = open_context(
        state=state,
        stage="analysis",
        delivery=Delivery(task_id="t-3"),
        heartbeat=beats.append,
        settings=get_settings(),
    )
    # the database has no tables: a budget read would raise
    assert ctx.llm is None and ctx.llm_rows == [] and beats == []
