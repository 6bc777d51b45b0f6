"""What an analysis type adds to the shared pipeline: the :class:`Plan` record a plan package
fills (every hook defaults to "nothing").

Each package under ``pipeline/plans/`` exports its plans as ``PLANS`` (a tuple of :class:`Plan`,
one per row of ``core.plans`` it implements); :mod:`pipeline.plans.table` imports each package
by name in code, and ``pipeline.plan_hooks`` looks the plans up. This module imports nothing of
the pipeline, so a plan package depends on it and not on the lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

from pydantic import BaseModel

from agents.llm.session import LLMSession
from agents.tools.registry import ToolContext
from core.plans import PlanSpec
from core.settings import Settings
from core.state import FinancialAgentState


def _nothing_to_run(state: FinancialAgentState, ctx: ToolContext, llm: LLMSession | None) -> None:
    """The composite views add no step of their own."""


def _not_answered(state: FinancialAgentState) -> bool:
    """Only a recommendation answers an analysis of this type."""
    return False


def _no_headline(state: FinancialAgentState) -> str | None:
    """No headline of its own: the report's generic one stands."""
    return None


def _no_result(state: FinancialAgentState) -> Any:
    """No result part: ``null`` in the JSON report."""
    return None


def _no_section(state: FinancialAgentState) -> list[str]:
    """No report section."""
    return []


def _no_marks(state: dict[str, Any]) -> dict[str, float]:
    """No prices to mark on the chart."""
    return {}


def _no_overlay(state: dict[str, Any]) -> dict[str, Any]:
    """Nothing but the marks on the chart."""
    return {}


def _needs_history(*, settings: Settings, symbol: str, as_of: date) -> bool:
    """A request without price history is refused (unknown symbol or date)."""
    return False


@dataclass(frozen=True)
class Plan:
    """The behaviour of one analysis type (every hook has a do-nothing default).

    Attributes:
        spec: the plan's row (``core.plans``).
        options_model: the pydantic model of the plan's request options (``plan_options`` in
            the state, ``--plan-option KEY=VALUE`` on the CLI, ``options.plan`` over HTTP);
            ``None``: the plan takes none (:func:`validate_plan_options`).
        run: the plan's step of the analysis stage ``(state, ctx, llm)``, run after the shared
            indicators, chart levels and analysts (also when research failed); ``llm`` is the
            stage's LLM session (``None``: no model configured). It writes ``state.plan_result``.
        answered: review's rule: ``True`` when the result answers the analysis without a
            recommendation (the status becomes ``done``).
        headline: the report's first line when there is no signal (``None``: the generic one).
        result_json: the JSON report's value under the row's ``result_field`` (JSON-safe).
        report_markdown: the plan's Markdown section (lines), after the indicators.
        chart_marks: ``{label: price}`` to draw on ``finagent chart``, USD in the bars' units,
            read from a stored state (JSON, as in ``analyses.state``).
        chart_overlay: further ``render_chart`` arguments read from a stored state (an
            option's expiry, its ±1σ cone, event days, a payoff at expiry); ``{}``: none.
        answers_without_history: whether a request whose symbol has no price history on
            ``as_of`` is still answered by the plan (it then rejects with a cited reason).
    """

    spec: PlanSpec
    options_model: type[BaseModel] | None = None
    run: Callable[[FinancialAgentState, ToolContext, LLMSession | None], None] = _nothing_to_run
    answered: Callable[[FinancialAgentState], bool] = _not_answered
    headline: Callable[[FinancialAgentState], str | None] = _no_headline
    result_json: Callable[[FinancialAgentState], Any] = _no_result
    report_markdown: Callable[[FinancialAgentState], list[str]] = _no_section
    chart_marks: Callable[[dict[str, Any]], dict[str, float]] = _no_marks
    chart_overlay: Callable[[dict[str, Any]], dict[str, Any]] = _no_overlay
    answers_without_history: Callable[..., bool] = _needs_history


__all__ = ["Plan"]
