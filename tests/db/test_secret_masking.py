"""No configured secret reaches a row, whichever repository writes it (``db.engine``'s JSON
serializer and statement hook), on SQLite and PostgreSQL; rows of analyses, attempts, events,
audit and watchlist runs are written through their repositories and every text column of every
table is read back."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from core.settings import get_settings
from db import ledger, ops_repo, repo, trading_repo
from db.engine import json_dumps
from db.models import METADATA
from tests.support.secrets import ECHO, KEY

#: a secret with characters JSON escapes, so its JSON-escaped form must be masked too
ODD = 'p"w\\secret-é-9'


@pytest.fixture
def secrets_configured(clean_settings: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """``FINAGENT_LLM_API_KEY`` = :data:`KEY` and ``FINAGENT_BROKER_ALPACA_SECRET_KEY`` = :data:`ODD`."""
    monkeypatch.setenv("FINAGENT_LLM_API_KEY", KEY)
    monkeypatch.setenv("FINAGENT_BROKER_ALPACA_SECRET_KEY", ODD)
    get_settings.cache_clear()


def _dump(engine: Engine) -> str:
    """Every column of every row of every table, as text (JSON columns as stored)."""
    parts: list[str] = []
    with engine.connect() as conn:
        for table in METADATA.sorted_tables:
            columns = [sa.cast(c, sa.Text) for c in table.columns]
            for row in conn.execute(sa.select(*columns)):
                parts.extend(str(v) for v in row if v is not None)
    return "\n".join(parts)


def _tool_row(tag: str, *, status: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "tool_call_id": f"get_history_{tag}",
        "stage": "research",
        "tool": "get_history",
        "symbol": "AAPL",
        "status": status,
        "attempt": 1,
        "latency_ms": 1.0,
        "timestamp": datetime(2026, 11, 26, tzinfo=UTC),
        "arguments": {"symbol": "AAPL", "note": ECHO},
        "result_summary": f"summary {ECHO}",
    }
    if status == "success":
        row.update(result={"headline": f"quote {KEY} {ODD}", ECHO: [1, 2]}, source_refs=[KEY])
    else:
        row.update(error=f"{ECHO} / {ODD}", error_code="NETWORK_ERROR", retry_hint=f"hint {KEY}")
    return row


def _llm_row(tag: str) -> dict[str, Any]:
    return {
        "id": f"llm_{tag}#1",
        "llm_call_id": f"llm_{tag}",
        "stage": "analysis",
        "agent": "technical",
        "iteration": 0,
        "model": "openai/scripted",
        "status": "error",
        "attempt": 1,
        "latency_ms": 3.0,
        "timestamp": datetime(2026, 11, 26, tzinfo=UTC),
        "error": f"AuthenticationError: {ECHO}",
        "request": {"last_message": {"content": f"tool said {ECHO}"}},
        "response": {"content": KEY},
    }


def test_rows_of_every_kind_hold_no_configured_secret(secrets_configured: None, engine: Engine) -> None:
    # given an analysis whose state, report, errors and attempt rows all quote the secrets
    analysis_id = str(uuid.uuid4())
    state = {"analysis_id": analysis_id, "errors": [{"message": ECHO}], "odd": ODD}
    assert ledger.create(
        engine=engine,
        analysis_id=analysis_id,
        symbol="AAPL",
        as_of=date(2012, 6, 29),
        user_query=f"analyse AAPL {KEY}",
        max_iterations=3,
        state=state,
        lease_seconds=60,
    )
    assert ledger.claim(
        engine=engine, analysis_id=analysis_id, iteration=0, step="research", owner="t1", lease_seconds=60
    ).attempt
    # the checkpoint: one statement on PostgreSQL (JSON row sets), a transaction on SQLite
    end = ledger.StepEnd(
        analysis_id=analysis_id,
        iteration=0,
        step="research",
        owner="t1",
        state={**state, "stage": "research"},
        tool_calls=[_tool_row("aaaa00000001", status="success"), _tool_row("aaaa00000002", status="error")],
        llm_calls=[_llm_row("bbbb00000001")],
    )
    assert ledger.complete(engine=engine, end=end, status="analyzing", lease_seconds=60)
    repo.insert_tool_calls(
        engine=engine,
        rows=[{**_tool_row("cccc00000001", status="error"), "analysis_id": analysis_id, "iteration": 0}],
    )
    repo.insert_llm_calls(engine=engine, rows=[{**_llm_row("dddd00000001"), "analysis_id": analysis_id}])
    assert ledger.end(
        engine=engine,
        analysis_id=analysis_id,
        state={**state, "final": True},
        status="failed",
        iteration=0,
        report=f"# AAPL\n\nThe model failed: {ECHO}\n",
        report_json={"errors": [{"message": ECHO}], "odd": ODD},
        signal=None,
        confidence=None,
        error=f"STAGE_FAILED: {ECHO}",
    )
    trading_repo.insert_event(
        engine=engine,
        event_id=str(uuid.uuid4()),
        analysis_id=analysis_id,
        event_type="alert",
        severity="low",
        data={"text": ECHO},
    )
    ops_repo.insert_audit(
        engine=engine,
        audit_id=str(uuid.uuid4()),
        request_id=f"req-{KEY}",
        tenant="default",
        api_key_id=None,
        key_name=None,
        method="POST",
        what=f"POST /analyze/{KEY}",
        object_id=KEY,
        status_code=422,
    )

    # then no column of any table holds either secret, in any encoding, and the text around
    # them survives
    dumped = _dump(engine)
    for secret in (KEY, ODD, json.dumps(ODD)[1:-1]):
        assert secret not in dumped
    assert "Incorrect API key provided: ***" in dumped
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    assert row["error"] == "STAGE_FAILED: Incorrect API key provided: ***"
    assert row["report_json"] == {"errors": [{"message": "Incorrect API key provided: ***"}], "odd": "***"}
    assert row["state"]["odd"] == "***" and row["user_query"] == "analyse AAPL ***"
    calls = repo.get_tool_calls(engine=engine, analysis_id=analysis_id)
    assert {c["tool_call_id"] for c in calls} == {
        "get_history_aaaa00000001",
        "get_history_aaaa00000002",
        "get_history_cccc00000001",
    }


def test_without_a_configured_secret_rows_are_written_as_given(clean_settings: None, engine: Engine) -> None:
    analysis_id = str(uuid.uuid4())
    state = {"analysis_id": analysis_id, "note": ECHO}
    assert ledger.create(
        engine=engine,
        analysis_id=analysis_id,
        symbol="AAPL",
        as_of=date(2012, 6, 29),
        user_query="q",
        max_iterations=3,
        state=state,
        lease_seconds=60,
    )
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["state"]["note"] == ECHO


def test_json_dumps_masks_strings_not_syntax(secrets_configured: None) -> None:
    text = json_dumps({"v": 12345678, "msg": f"{ECHO} {ODD}", KEY: date(2024, 1, 2)})
    assert json.loads(text) == {
        "v": 12345678,
        "msg": "Incorrect API key provided: *** ***",
        "***": "2024-01-02",
    }
    assert json_dumps({"v": 1.5}) == '{"v":1.5}'  # nothing to mask: byte for byte as before
