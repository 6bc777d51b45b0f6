"""The tenant's daily LLM cap lowers an analysis's USD budget (``within_tenant_budget`` over
``db.repo.llm_spend``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agents.llm.config import LLMConfig, llm_config
from core.settings import Settings
from db import ledger, repo
from db.engine import get_engine
from db.migrate import upgrade
from pipeline.steps.context import utc_midnight, within_tenant_budget

NOW = datetime(2026, 3, 2, 15, tzinfo=UTC)


@pytest.fixture
def engine_settings(tmp_path: Path) -> tuple[Settings, str]:
    url = f"sqlite:///{tmp_path / 'b.sqlite3'}"
    upgrade(url=url)
    settings = Settings(
        service_database_url=url, service_state_dir=tmp_path, llm_model="openai/m", llm_budget_usd=1.0
    )
    engine = get_engine(url)
    for aid, tenant in (("mine", "acme"), ("sibling", "acme"), ("elsewhere", "globex")):
        ledger.create_and_claim(
            engine=engine,
            analysis_id=aid,
            symbol="AAPL",
            as_of="2012-06-29",
            user_query="q",
            max_iterations=1,
            state={},
            tenant=tenant,
        )

    def call(cid: str, aid: str, usd: float, at: datetime) -> dict:
        return {
            "id": cid,
            "llm_call_id": cid,
            "stage": "analysis",
            "agent": "t",
            "iteration": 0,
            "model": "m",
            "status": "success",
            "attempt": 1,
            "latency_ms": 1,
            "analysis_id": aid,
            "cost_usd": usd,
            "timestamp": at,
        }

    repo.insert_llm_calls(
        engine=engine,
        rows=[
            call("c1", "mine", 0.10, NOW - timedelta(hours=1)),
            call("c2", "sibling", 9.60, NOW - timedelta(hours=2)),  # acme today: 9.70 of 10
            call("c3", "sibling", 50.0, NOW - timedelta(days=1)),  # yesterday: not counted
            call("c4", "elsewhere", 50.0, NOW),  # another tenant
        ],
    )
    return settings, "mine"


def test_budget_is_what_the_tenant_has_left_today(engine_settings: tuple[Settings, str]) -> None:
    settings, analysis_id = engine_settings
    config = llm_config(settings=settings)
    assert config is not None and config.budget_usd == 1.0
    spend = repo.llm_spend(
        engine=get_engine(settings.service.effective_database_url),
        analysis_id=analysis_id,
        tenant_since=utc_midnight(NOW),
    )
    assert spend.tenant == "acme" and spend.usage["cost_usd"] == pytest.approx(0.10)

    def budget(cap: float | None) -> LLMConfig:
        capped = settings.model_copy(update={"llm_tenant_daily_budget_usd": cap})
        return within_tenant_budget(config=config, settings=capped, spend=spend, analysis_id=analysis_id)

    # 10 - 9.70 = 0.30 left today, on top of the 0.10 this analysis already spent
    assert budget(10.0).budget_usd == pytest.approx(0.40)
    assert budget(5.0).budget_usd == pytest.approx(0.10)  # no further call fits
    assert budget(100.0) is config
    assert budget(None) is config
