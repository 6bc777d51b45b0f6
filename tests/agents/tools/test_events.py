"""log_event: rows in ``events``, redaction, deterministic ids inside an analysis."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from db.engine import get_engine
from db.trading_repo import get_event


def test_log_event_writes_a_redacted_row(make_ctx: Callable[..., ToolContext]) -> None:
    ctx = make_ctx(date(2013, 3, 1))
    env = run_tool(
        name="log_event",
        arguments={
            "event_type": "alert",
            "data": {"symbol": "AAPL", "api_key": "sk-123"},
            "severity": "high",
        },
        ctx=ctx,
    )
    assert env.ok and env.data and env.data["logged"] is True
    row = get_event(
        engine=get_engine(ctx.settings.service.effective_database_url), event_id=env.data["event_id"]
    )
    assert row is not None
    assert (row["event_type"], row["severity"], row["analysis_id"]) == ("alert", "high", None)
    assert row["data"] == {"symbol": "AAPL", "api_key": "***"}


def test_log_event_is_idempotent_inside_an_analysis(make_ctx: Callable[..., ToolContext]) -> None:
    args = {"event_type": "signal", "data": {"signal": "BUY"}}
    first = make_ctx(date(2013, 3, 1))
    first.analysis_id, first.stage = "a-1", "recommending"
    redelivered = make_ctx(date(2013, 3, 1))
    redelivered.analysis_id, redelivered.stage = "a-1", "recommending"
    one = run_tool(name="log_event", arguments=args, ctx=first)
    two = run_tool(name="log_event", arguments=args, ctx=redelivered)
    assert one.data and two.data
    assert one.data["event_id"] == two.data["event_id"]
    assert (one.data["duplicate"], two.data["duplicate"]) == (False, True)
    assert one.data["logged"] and two.data["logged"]


def test_log_event_defaults_and_validation(make_ctx: Callable[..., ToolContext]) -> None:
    ctx = make_ctx(date(2013, 3, 1))
    env = run_tool(name="log_event", arguments={"event_type": "trade", "data": {}}, ctx=ctx)
    assert env.ok and env.data
    row = get_event(
        engine=get_engine(ctx.settings.service.effective_database_url), event_id=env.data["event_id"]
    )
    assert row is not None and row["severity"] == "low"
    bad = run_tool(name="log_event", arguments={"event_type": "gossip", "data": {}}, ctx=ctx)
    assert bad.error is not None and bad.error.code.value == "INVALID_INPUT"
