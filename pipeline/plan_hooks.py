"""The hooks of the plan packages: the behaviour of each analysis type of the plan table
(``core.plans``), registered by the packages themselves.

Every package under ``pipeline/plans/`` registers the plans it implements with
:func:`register_plan` when it is imported: a :class:`Plan` says what its type adds to the shared
pipeline (its step of the analysis stage, the pydantic model its request options are validated
by, whether review may finish an analysis on its result alone, its report headline and section,
the value of its result in the JSON report, what it draws on ``finagent chart``, and whether a
request without price history is still its to answer). The shared code (the analysis and review
stages, the report, the producer, the chart command) asks :func:`plan_for` and never names a type.

The packages are found by walking ``pipeline/plans`` once (:func:`_load`): the shared code depends
on this module only, the packages depend on the shared code (a plan's step uses
``pipeline.stages.common``, its section ``pipeline.report``'s formatting), so the imports run one
way, and a plan's heavy imports (option tools, vollib) stay inside its hooks. After the walk every
row of the table must have exactly one registered plan and every registered plan a row, else the
first lookup fails naming the difference: a plan cannot be silently missing.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from pydantic import BaseModel, ValidationError

from agents.llm.session import LLMSession
from agents.tools.registry import ToolContext
from core.plans import PLANS as ROWS
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


_REGISTERED: dict[str, Plan] = {}
_LOADED = False
_LOCK = threading.RLock()


def register_plan(plan: Plan) -> Plan:
    """Register ``plan`` under its row's name (a plan package calls it when imported).

    Raises:
        RuntimeError: another plan is registered under that name already.
    """
    with _LOCK:
        name = plan.spec.name
        if name in _REGISTERED and _REGISTERED[name] is not plan:
            raise RuntimeError(f"two plans register the analysis type {name!r}")
        _REGISTERED[name] = plan
    return plan


def _load() -> None:
    """Import every package under ``pipeline/plans`` once (each registers its plans), then check
    that the registered plans are exactly the table's rows.

    Raises:
        RuntimeError: a row without a registered plan, or a plan without a row.
    """
    global _LOADED
    if _LOADED:
        return
    with _LOCK:
        if _LOADED:
            return
        package = importlib.import_module("pipeline.plans")
        for found in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            if found.ispkg:
                importlib.import_module(f"pipeline.plans.{found.name}")
        rows = {spec.name for spec in ROWS}
        missing, extra = rows - set(_REGISTERED), set(_REGISTERED) - rows
        if missing or extra:
            raise RuntimeError(
                f"plan table and plan packages differ: rows without a plan {sorted(missing)}, "
                f"plans without a row {sorted(extra)}"
            )
        _LOADED = True


def plan_for(name: str | None) -> Plan:
    """The behaviour of analysis type ``name`` (``None``: the default type).

    Raises:
        KeyError: ``name`` is no analysis type (``core.plans.PLANS``).
        RuntimeError: the plan packages and the table differ (:func:`_load`).
    """
    spec = plan_spec(name)
    _load()
    return _REGISTERED[spec.name]


def result_plans() -> tuple[Plan, ...]:
    """The plans that store a result, in table order (the JSON report's keys)."""
    return tuple(plan_for(spec.name) for spec in result_specs())


def validate_plan_options(name: str | None, options: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``options`` validated by the plan's own model and dumped as JSON without unset keys
    (``None`` for no options).

    Raises:
        ValueError: the plan takes no options, or the model refuses them (the message names
            each offending key and why, one line).
    """
    if not options:
        return None
    plan = plan_for(name)
    type_name = plan.spec.name
    if plan.options_model is None:
        raise ValueError(f"the {type_name} analysis takes no plan options (got {', '.join(sorted(options))})")
    try:
        model = plan.options_model.model_validate(dict(options))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'options'}: {err['msg']}" for err in exc.errors()
        )
        raise ValueError(f"{type_name} plan options: {problems}") from None
    dumped: dict[str, Any] = model.model_dump(mode="json", exclude_none=True)
    return dumped or None


__all__ = ["Plan", "plan_for", "register_plan", "result_plans", "validate_plan_options"]
