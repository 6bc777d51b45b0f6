"""The hooks of the plan packages: the behaviour of each analysis type of the plan table
(``core.plans``), looked up by name.

A row names its package; ``pipeline.plans.<package>`` defines ``PLANS``, name → :class:`Plan`, saying
what the type adds to the shared pipeline: its step of the analysis stage, whether review may
finish an analysis on its result alone, its report headline and section, the value of its
result in the JSON report, the prices it marks on ``finagent chart``, and whether a request
without price history is still its to answer. The shared code (the analysis and review stages,
the report, the producer, the chart command) asks :func:`plan_for` and never names a type.

Packages are imported by name on first use (:func:`plan_for`, like the stage table's functions
are looked up by name): the shared code depends on this module only, the packages depend on
the shared code (a plan's step uses ``pipeline.stages.common``, its section
``pipeline.report``'s formatting), so the imports run one way, and a plan's heavy imports
(option tools, vollib) stay out of the processes that never run it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

from agents.llm.session import LLMSession
from agents.tools.registry import ToolContext
from core.plans import PlanSpec, plan_spec, result_specs
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


def _needs_history(*, settings: Settings, symbol: str, as_of: date) -> bool:
    """A request without price history is refused (unknown symbol or date)."""
    return False


@dataclass(frozen=True)
class Plan:
    """The behaviour of one analysis type (every hook has a do-nothing default).

    Attributes:
        spec: the plan's row (``core.plans``).
        run: the plan's step of the analysis stage ``(state, ctx, llm)``, run after the shared
            indicators, chart levels and analysts (also when research failed); ``llm`` is the
            stage's LLM session (``None``: no model configured). It writes the plan's result
            part.
        answered: review's rule: ``True`` when the result part answers the analysis without a
            recommendation (the status becomes ``done``).
        headline: the report's first line when there is no signal (``None``: the generic one).
        result_json: the JSON report's value under the row's ``result_field`` (JSON-safe).
        report_markdown: the plan's Markdown section (lines), after the indicators.
        chart_marks: ``{label: price}`` to draw on ``finagent chart``, USD in the bars' units,
            read from a stored state (JSON, as in ``analyses.state``).
        answers_without_history: whether a request whose symbol has no price history on
            ``as_of`` is still answered by the plan (it then rejects with a cited reason).
    """

    spec: PlanSpec
    run: Callable[[FinancialAgentState, ToolContext, LLMSession | None], None] = _nothing_to_run
    answered: Callable[[FinancialAgentState], bool] = _not_answered
    headline: Callable[[FinancialAgentState], str | None] = _no_headline
    result_json: Callable[[FinancialAgentState], Any] = _no_result
    report_markdown: Callable[[FinancialAgentState], list[str]] = _no_section
    chart_marks: Callable[[dict[str, Any]], dict[str, float]] = _no_marks
    answers_without_history: Callable[..., bool] = _needs_history


def plan_for(name: str | None) -> Plan:
    """The behaviour of analysis type ``name`` (``None``: the default type).

    Raises:
        KeyError: ``name`` is no analysis type (``core.plans.PLANS``).
        RuntimeError: the row's package has no ``PLANS`` entry for the row (a table typo).
    """
    spec = plan_spec(name)
    module = importlib.import_module(f"pipeline.plans.{spec.package}")
    plans: dict[str, Plan] = getattr(module, "PLANS", {})
    plan = plans.get(spec.name)
    if plan is None:
        raise RuntimeError(f"pipeline.plans.{spec.package} defines no plan {spec.name!r}")
    return plan


def result_plans() -> tuple[Plan, ...]:
    """The plans that store a typed result part, in table order (the JSON report's keys)."""
    return tuple(plan_for(spec.name) for spec in result_specs())


__all__ = ["Plan", "plan_for", "result_plans"]
