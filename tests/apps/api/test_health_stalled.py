"""``GET /health``'s ``stalled`` check (``apps.api.app.check_health``), embedded mode on a
SQLite file: an analysis past its lease by more than two sweep intervals fails the check."""

from __future__ import annotations

import uuid
from datetime import date

import pytest

from apps.api.app import check_health
from core.settings import get_settings
from db import ledger
from db.engine import get_engine
from db.migrate import ensure_schema

pytestmark = pytest.mark.usefixtures("clean_settings")


def _analysis(*, lease_seconds: int) -> str:
    settings = get_settings()
    ensure_schema(url=settings.service.effective_database_url)
    analysis_id = str(uuid.uuid4())
    ledger.create(
        engine=get_engine(settings.service.effective_database_url),
        analysis_id=analysis_id,
        symbol="AAPL",
        as_of=date(2012, 6, 29),
        user_query="Analyze AAPL",
        max_iterations=3,
        state={"analysis_id": analysis_id, "stock_symbol": "AAPL", "as_of": "2012-06-29"},
        lease_seconds=lease_seconds,
    )
    return analysis_id


def test_health_fails_while_an_analysis_is_past_its_lease_and_not_recovered() -> None:
    settings = get_settings()
    _analysis(lease_seconds=300)  # alive
    healthy = check_health(settings=settings)
    assert healthy.checks["stalled"] == "ok (none past its lease)"
    assert "stalled" not in healthy.failing

    _analysis(lease_seconds=-(2 * settings.durability.sweep_seconds + 5))  # the sweep should have taken it
    sick = check_health(settings=settings)
    assert "stalled" in sick.failing and sick.status == "unavailable"
    assert sick.checks["stalled"].startswith("1 analyses past their lease and not recovered")
    assert "finagent recover" in sick.checks["stalled"]


def test_a_lease_that_just_ran_out_is_within_the_sweep_s_grace() -> None:
    _analysis(lease_seconds=-1)  # stale, but the next sweep (every sweep_seconds) takes it
    assert "stalled" not in check_health(settings=get_settings()).failing
