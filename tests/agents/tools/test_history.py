"""Cited histories rebuilt from the provider instead of reloaded (docs/benchmarks.md rec. 2).

The rebuilt bars must be exactly the bars of the stored ``get_history`` result: the same frame
as ``history_frame(data)``, the same grounding values as ``numeric_values(data)``, and any
mismatch (a wrong digest) falls back to the stored result.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import pandas as pd
import pytest

from agents.analysts.grounding import ValueIndex, extract_numbers, numeric_values
from agents.data.routing import get_provider
from agents.tools.catalog import run_tool
from agents.tools.history import cited_history, history_check, history_frame, history_values
from agents.tools.registry import ToolContext
from core.settings import Settings

CASES = [
    ("AAPL", date(2012, 6, 29)),
    ("MSFT", date(2010, 6, 30)),
    ("GOOG", date(2006, 3, 1)),
    ("IBM", date(2013, 2, 28)),
]


@pytest.fixture
def settings(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Embedded settings (bundled data, no services)."""
    for name in ("FINAGENT_SERVICE_BROKER_URL", "FINAGENT_SERVICE_DATABASE_URL", "FINAGENT_DATA_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    return Settings(service_state_dir=tmp_path)


def _history(settings: Settings, symbol: str, as_of: date, period: str = "2y") -> tuple[str, dict[str, Any]]:
    ctx = ToolContext(settings=settings, as_of=as_of, provider=get_provider(settings=settings))
    env = run_tool(name="get_history", arguments={"symbol": symbol, "period": period}, ctx=ctx)
    assert env.ok and env.data
    return env.tool_call_id, env.data


def _later_ctx(
    settings: Settings, as_of: date, stored: dict[str, dict[str, Any]], checks: dict[str, Any]
) -> tuple[ToolContext, list[str]]:
    """A later stage's context: results only via ``load_result`` (counted)."""
    loads: list[str] = []

    def load(ref: str) -> dict[str, Any] | None:
        loads.append(ref)
        return stored.get(ref)

    ctx = ToolContext(
        settings=settings,
        as_of=as_of,
        provider=get_provider(settings=settings),
        load_result=load,
        history_checks=checks,
    )
    return ctx, loads


@pytest.mark.parametrize(("symbol", "as_of"), CASES)
def test_rebuilt_bars_equal_the_stored_result_and_nothing_is_loaded(
    settings: Settings, symbol: str, as_of: date
) -> None:
    ref, data = _history(settings, symbol, as_of)
    ctx, loads = _later_ctx(settings, as_of, {ref: data}, {ref: history_check(data)})
    cited = cited_history(ctx, ref)
    assert cited is not None and cited.rebuilt and cited.symbol == symbol
    assert cited.bars is not None
    pd.testing.assert_frame_equal(cited.bars, history_frame(data), check_exact=True)
    values = history_values(ctx, ref)
    assert values is not None
    assert sorted(abs(v) for v in values) == sorted(abs(v) for v in numeric_values(data))
    assert loads == []


def test_technical_and_chart_tools_give_the_same_outputs_rebuilt_or_loaded(settings: Settings) -> None:
    symbol, as_of = CASES[0]
    ref, data = _history(settings, symbol, as_of)
    outputs = []
    for checks in ({ref: history_check(data)}, {}):
        ctx, loads = _later_ctx(settings, as_of, {ref: data}, checks)
        envs = [
            run_tool(name=name, arguments={"symbol": symbol, "history_ref": ref, **extra}, ctx=ctx)
            for name, extra in (
                ("technical_indicators", {}),
                ("find_support_resistance", {"num_levels": 3}),
                ("calculate_fib_levels", {}),
            )
        ]
        assert all(env.ok for env in envs)
        outputs.append([env.data for env in envs])
        # rebuilt: no load at all; without a check: one load for the three tools (memo)
        assert loads == ([] if checks else [ref])
    assert outputs[0] == outputs[1]


def test_a_wrong_digest_falls_back_to_the_stored_result(settings: Settings) -> None:
    symbol, as_of = CASES[1]
    ref, data = _history(settings, symbol, as_of)
    check = {**history_check(data), "digest": "0" * 32}
    ctx, loads = _later_ctx(settings, as_of, {ref: data}, {ref: check})
    cited = cited_history(ctx, ref)
    assert cited is not None and not cited.rebuilt
    assert history_values(ctx, ref) is None
    assert loads == [ref]


def test_a_check_for_other_bars_is_not_used(settings: Settings) -> None:
    """A check naming another period (say a tampered or stale message) cannot match."""
    symbol, as_of = CASES[0]
    ref, data = _history(settings, symbol, as_of)
    check = {**history_check(data), "period": "1y"}
    ctx, loads = _later_ctx(settings, as_of, {ref: data}, {ref: check})
    cited = cited_history(ctx, ref)
    assert cited is not None and not cited.rebuilt
    assert loads == [ref]


def test_value_index_of_values_matches_the_object_index(settings: Settings) -> None:
    symbol, as_of = CASES[0]
    ref, data = _history(settings, symbol, as_of)
    ctx, _ = _later_ctx(settings, as_of, {ref: data}, {ref: history_check(data)})
    values = history_values(ctx, ref)
    assert values is not None
    rebuilt, stored = ValueIndex.of_values(values), ValueIndex(data)
    bar = data["history"][-7]
    texts = [f"{bar['close']:.2f}", f"{bar['high']:.1f}", str(bar["volume"]), "504", "1.2345", "12.5%"]
    for printed in (p for t in texts for p in extract_numbers(t)):
        assert rebuilt.has(printed) == stored.has(printed), printed
