"""run_tool: ids, per-attempt rows, timeout-only retries with exponential backoff, error codes.

The built-in tools are run through ``agents.tools.catalog.run_tool`` (the registry itself knows
only the tools imported so far).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from agents.data.market.embedded import EmbeddedProvider
from agents.tools import registry
from agents.tools.catalog import get_tool, load_builtin_tools, run_tool
from agents.tools.registry import REGISTRY, ToolContext
from core.settings import Settings
from tests.support.providers import no_data_once, timeout_once


def _ctx(provider, **kw) -> ToolContext:
    sleeps: list[float] = []
    ctx = ToolContext(
        settings=Settings(), as_of=date(2013, 3, 1), provider=provider, sleep=sleeps.append, **kw
    )
    ctx.sleeps = sleeps  # type: ignore[attr-defined]
    return ctx


@pytest.fixture
def fault_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FINAGENT_TEST_FAULT_DIR", str(tmp_path / "faults"))
    return tmp_path / "faults"


def test_timeout_is_retried_with_backoff_and_each_attempt_is_a_row(fault_dir: Path) -> None:
    ctx = _ctx(timeout_once(), analysis_id="a1", stage="research")
    env = run_tool(name="get_history", arguments={"symbol": "AAPL", "period": "1y"}, ctx=ctx)
    assert env.ok
    assert [r["attempt"] for r in ctx.rows] == [1, 2]
    assert [r["status"] for r in ctx.rows] == ["error", "success"]
    assert ctx.rows[0]["error_code"] == "NETWORK_ERROR" and ctx.rows[0]["level"] == "WARNING"
    assert {r["tool_call_id"] for r in ctx.rows} == {env.tool_call_id}
    assert len({r["id"] for r in ctx.rows}) == 2
    assert ctx.sleeps == [0.5]  # 0.5 * 2**0 (docs/design.md, "Tool retries")


def test_timeouts_exhaust_after_max_retries() -> None:
    class AlwaysTimeout(EmbeddedProvider):
        def bars(self, **kw):  # type: ignore[override]
            from agents.data.market.base import ProviderTimeoutError

            raise ProviderTimeoutError("no answer in 10 s")

    ctx = _ctx(AlwaysTimeout())
    env = run_tool(name="get_stock_data", arguments={"symbol": "AAPL"}, ctx=ctx)
    assert env.error is not None and env.error.code.value == "NETWORK_ERROR"
    assert [r["attempt"] for r in ctx.rows] == [1, 2, 3, 4]
    assert ctx.sleeps == [0.5, 1.0, 2.0]


def test_non_timeout_errors_are_not_retried(fault_dir: Path) -> None:
    ctx = _ctx(no_data_once())
    env = run_tool(name="get_stock_data", arguments={"symbol": "AAPL"}, ctx=ctx)
    assert env.error is not None and env.error.code.value == "NO_DATA"
    assert len(ctx.rows) == 1 and ctx.sleeps == []


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"symbol": "NOPE"}, "INVALID_SYMBOL"),
        ({"symbol": "AAPL1"}, "INVALID_INPUT"),
        ({}, "INVALID_INPUT"),
    ],
)
def test_error_codes(arguments: dict, code: str) -> None:
    ctx = _ctx(EmbeddedProvider())
    env = run_tool(name="get_stock_data", arguments=arguments, ctx=ctx)
    assert env.error is not None and env.error.code.value == code
    public = env.to_public()
    assert set(public) == {"tool_call_id", "error", "retry_hint"}


def test_ids_are_deterministic_inside_an_analysis_and_unique_outside() -> None:
    def ids(**kw) -> list[str]:
        ctx = _ctx(EmbeddedProvider(), **kw)
        return [
            run_tool(name="calculator", arguments={"expression": "1+1"}, ctx=ctx).tool_call_id
            for _ in range(2)
        ]

    first = ids(analysis_id="a1", stage="recommendation", iteration=0)
    assert first == ids(analysis_id="a1", stage="recommendation", iteration=0)  # redelivery → same ids
    assert first[0] != first[1]  # two calls in one run differ
    assert first != ids(analysis_id="a1", stage="recommendation", iteration=1)
    assert first != ids(analysis_id="a1", stage="recommendation", iteration=0, id_seed="r1")  # a Celery retry
    assert ids() != ids()
    assert first[0].startswith("calculator_")


def test_openai_schemas_come_from_the_input_models() -> None:
    load_builtin_tools()
    assert {"get_stock_data", "get_history", "calculator", "technical_indicators"} <= set(REGISTRY)
    schema = get_tool("get_history").openai_schema()
    params = schema["function"]["parameters"]
    assert schema["type"] == "function" and params["required"] == ["symbol"]
    assert "10y" in str(params) and "1wk" in str(params)
    with pytest.raises(KeyError, match="unknown tool"):
        get_tool("rm_rf")
    with pytest.raises(KeyError, match="unknown tool"):
        registry.get_tool("rm_rf")


def test_a_bug_in_a_tool_is_internal_error_without_leaking_its_text() -> None:
    from pydantic import BaseModel

    from agents.tools.registry import ToolOutput, register

    class _In(BaseModel):
        x: int

    secret = "https://api.example/?apikey=sk-live-123456"

    @register(name="_test_buggy_tool", description="raises", input_model=_In)
    def _buggy(params: _In, ctx: ToolContext) -> ToolOutput:
        raise RuntimeError(f"boom at {secret}")

    try:
        ctx = ToolContext(settings=Settings(), as_of=date(2013, 3, 1), provider=EmbeddedProvider())
        env = run_tool(name="_test_buggy_tool", arguments={"x": 1}, ctx=ctx)
        assert not env.ok and env.error and env.error.code == "INTERNAL_ERROR"
        assert env.error.message.startswith("RuntimeError: ") and "sk-live" not in env.error.message
        (row,) = ctx.rows
        assert row["status"] == "error" and "sk-live" not in str(row)
        assert len(ctx.rows) == 1  # not retried: only timeouts are
    finally:
        REGISTRY.pop("_test_buggy_tool", None)


def test_public_success_carries_source_refs_inside_data_as_seed_002_and_beside_it() -> None:
    ctx = _ctx(EmbeddedProvider())
    first = run_tool(name="calculator", arguments={"expression": "2*3"}, ctx=ctx)
    public = first.to_public()
    # public shape: data: {..., source_refs: string[]}; the top-level list stays for our citations
    assert public["data"]["source_refs"] == [first.tool_call_id]
    assert public["source_refs"] == [first.tool_call_id]
    assert public["data"]["result"] == 6
    # the envelope's own data (what stages keep and cite) is not changed by the public shape
    assert first.data is not None and "source_refs" not in first.data
