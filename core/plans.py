"""The plan table: the one place that names the analysis types (what a request may ask for) and
what each one is made of, like the stage table in ``core.stages``.

Every layer reads the names from here: the state's ``analysis_type`` (:data:`AnalysisType`), the
CLI's ``--type`` choices, the API's enum, the query parser's keywords and its LLM prompt, the
conversation sessions and the backtests. The behaviour of a plan (its step of the analysis stage,
its options and result models, its report section, its review rule, its chart) lives in a package
under ``pipeline/plans/`` that registers it by name (``pipeline.plan_hooks.register_plan``); the
plan's result travels in the state as ``plan_result`` (JSON of the plan's own result model) and
its request options as ``plan_options``.

Adding an analysis type is a row here (and its name in :data:`AnalysisType`) and its package under
``pipeline/plans/`` (docs/architecture.md, "Add an analysis type").

Pure data: imports nothing of the project.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, get_args

#: What a request asks for (the query parser, ``--type``, the API's ``analysis_type``). A
#: ``Literal`` so mypy and the API schema know the values; it must list exactly the names of
#: :data:`PLANS`, in the table's order (checked at import below).
AnalysisType = Literal[
    "technical", "fundamental", "sentiment", "composite", "csp", "covered_call", "put_spread"
]


@dataclass(frozen=True)
class PlanSpec:
    """One analysis type.

    Attributes:
        name: the value of ``analysis_type`` (``--type``, the API, the state, the report).
        help: one line for the CLI's ``--type`` help and the docs.
        steps: the plan's own steps in the analysis stage, in order, after the shared ones
            (indicators, chart levels, the LLM analysts); empty for the composite views.
        result_field: the key of the plan's result (``state.plan_result``) in the JSON report
            (``None``: the plan stores no result of its own; its result is the shared
            recommendation).
        report_section: the Markdown heading of the plan's report section (``None``: none).
        settings_group: the settings area holding the plan's thresholds (``None``: none).
        keywords: words of a free-text request that name this type (``pipeline.query``);
            lower case, matched as substrings.
        keyword_rank: plans with a lower rank are matched first (a specific strategy such as
            "sell a put ... near support" beats the generic "technical" words).
        backtest: whether ``finagent backtest --type`` accepts it (a backtest scores signals;
            a plan whose answer is not a signal is not backtested).
        level_method: how the analysis stage reads support and resistance
            (``find_support_resistance``'s ``method``): ``levels`` (one price each, on the cited
            history) or ``zones`` (price bands on the ``level_window``).
        level_window: the one window (a ``period`` such as ``"6mo"``) the zones, and the
            plan's chart, are computed on; ``None`` with ``levels``.
        null_in_json: whether the JSON report of an analysis of another type carries the
            result key as ``null`` (the older rows do; a newer row leaves it out, so the
            reports of the other types stay byte for byte what they were).
    """

    name: str
    help: str
    steps: tuple[str, ...] = ()
    result_field: str | None = None
    report_section: str | None = None
    settings_group: str | None = None
    keywords: tuple[str, ...] = ()
    keyword_rank: int = 1
    backtest: bool = True
    level_method: Literal["levels", "zones"] = "levels"
    level_window: str | None = None
    null_in_json: bool = True


#: The analysis types, in the order the API's enum, the query prompt and error messages list
#: them. The four composite views share one package: every one runs the full pipeline and the
#: type is recorded and reported (docs/design.md, "Query parsing"); the csp plan is
#: docs/design.md, "Option plans".
PLANS: Final[tuple[PlanSpec, ...]] = (
    PlanSpec(
        name="technical",
        help="the full analysis, asked for its chart view",
        keywords=("chart", "technical", "rsi", "macd", "trend", "moving average", "support", "resistance"),
    ),
    PlanSpec(
        name="fundamental",
        help="the full analysis, asked for its fundamentals view",
        keywords=("earnings", "valuation", "fundamental", "p/e", "revenue", "balance sheet", "dividend"),
    ),
    PlanSpec(
        name="sentiment",
        help="the full analysis, asked for its news view",
        keywords=("news", "sentiment", "headline", "rumor", "rumour"),
    ),
    PlanSpec(
        name="composite",
        help="the full analysis: indicators, views and a BUY/HOLD/SELL signal (the default)",
    ),
    PlanSpec(
        name="csp",
        help="cash-secured put (chart → options → research)",
        steps=("chart", "options", "research"),
        result_field="csp",
        report_section="Cash-secured put",
        settings_group="options",
        keywords=("cash-secured put", "cash secured put", "csp", "sell a put", "sell puts"),
        keyword_rank=0,
        backtest=False,
        level_method="zones",
        level_window="6mo",
    ),
    PlanSpec(
        name="covered_call",
        help="covered call on shares held (paper portfolio or --cost-basis): chart → options → research",
        steps=("chart", "options", "research"),
        result_field="covered_call",
        report_section="Covered call",
        settings_group="options",
        keywords=("covered call", "covered-call", "sell a call", "sell calls", "write a call"),
        keyword_rank=0,
        backtest=False,
        level_method="zones",
        level_window="6mo",
        null_in_json=False,
    ),
    PlanSpec(
        name="put_spread",
        help="put credit spread, a defined loss (chart → options → research; --plan-option width= or "
        "long_delta=)",
        steps=("chart", "options", "research"),
        result_field="put_spread",
        report_section="Put credit spread",
        settings_group="options",
        keywords=("put spread", "credit spread", "bull put", "put credit"),
        keyword_rank=0,
        backtest=False,
        level_method="zones",
        level_window="6mo",
        null_in_json=False,
    ),
)

#: The type of a request that states none.
DEFAULT_ANALYSIS_TYPE: Final[AnalysisType] = "composite"

#: Every analysis type, in table order.
ANALYSIS_TYPES: Final[tuple[AnalysisType, ...]] = get_args(AnalysisType)

_BY_NAME: Final[dict[str, PlanSpec]] = {spec.name: spec for spec in PLANS}

if tuple(_BY_NAME) != ANALYSIS_TYPES or len(_BY_NAME) != len(PLANS):  # pragma: no cover - a table typo
    raise RuntimeError(f"AnalysisType {ANALYSIS_TYPES} must name the rows of PLANS {tuple(_BY_NAME)}")


def plan_spec(name: str | None) -> PlanSpec:
    """The row of ``name`` (``None``: the default type).

    Raises:
        KeyError: ``name`` is no analysis type.
    """
    return _BY_NAME[name or DEFAULT_ANALYSIS_TYPE]


def cli_choices() -> tuple[AnalysisType, ...]:
    """The ``--type`` choices: the default first, then the others in table order."""
    return (DEFAULT_ANALYSIS_TYPE, *(name for name in ANALYSIS_TYPES if name != DEFAULT_ANALYSIS_TYPE))


def result_specs() -> tuple[PlanSpec, ...]:
    """The rows whose plan stores a typed result part (their ``result_field`` is set), in table
    order: the JSON report carries one key per row, ``null`` for an analysis of another type."""
    return tuple(spec for spec in PLANS if spec.result_field is not None)


def keyword_specs() -> tuple[PlanSpec, ...]:
    """The rows with keywords, in matching order (``keyword_rank``, then table order)."""
    return tuple(sorted((spec for spec in PLANS if spec.keywords), key=lambda spec: spec.keyword_rank))


def backtest_types() -> tuple[AnalysisType, ...]:
    """The types ``finagent backtest --type`` accepts, in table order."""
    return tuple(name for name in ANALYSIS_TYPES if _BY_NAME[name].backtest)
