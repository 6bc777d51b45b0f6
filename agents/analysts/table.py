"""The analyst table: every analyst of an analysis, one row each, declared once.

A row names the analyst's inputs (the tools whose outputs it reads), where its view lives in the
state (its view model), what happens when it fails (its fallback), its LLM analyst if it has one
(the ``agents.analysts.llm_agents`` spec of that name, run when a model is configured), the
report section that shows it, its weight in the composite score and its label in the scorecard.

A row with an ``analyze`` function is run from the row alone: the analysis stage calls each of
its input tools with ``{"symbol": <the analysis's symbol>}``, hands their data to ``analyze``
(``{tool: data}``, plain JSON values) and stores the view it returns under
``state.analysis.views[<name>]`` with the calls' ids; the report shows it under the row's
section heading, its lines drawn by ``markdown``, and the JSON report under
``analyst_views.<name>``. Adding such an analyst is its module and its row (docs/architecture.md,
"Add an analyst"). The rows without ``analyze`` are run by their stage's own code (the analysis
stage's runners, research, recommendation), whose analysts must be exactly its stage's rows here:
the analysis stage checks its runners at import, ``tests/pipeline/stages/test_stage_analysts.py``
checks research and recommendation.

The order is the order of the report: the risk analyst comes first because its numbers carry
evidence (its forecasts are backtested, docs/evaluation.md "Risk"); the direction comes after it
in one plain sentence, because no signal here has shown it can predict the direction
(docs/design.md, "Calibrated probability"). Readers: the analysis stage runs its rows in this
order (``pipeline.stages.analysis``), the report orders and heads its analyst sections from it
(``pipeline.report_risk``), the scorecard labels its analyst rows from it (``apps.scorecard``).
Pure data: importing this module imports nothing heavy (an analyst with heavy imports defers them
to its ``analyze``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

Stage = Literal["research", "analysis", "recommendation"]

#: An analyst run from its row: its input tools' data by tool name → its view (JSON), or ``None``
#: for no view.
Analyze = Callable[[Mapping[str, Any]], dict[str, Any] | None]

#: The body of a row-run analyst's report section: its view → Markdown lines.
Render = Callable[[Mapping[str, Any]], list[str]]


@dataclass(frozen=True)
class AnalystRow:
    """One analyst.

    Attributes:
        name: its name (``risk``, ``technical``, ...), also the key of its record in the report.
        stage: the pipeline stage that runs it.
        inputs: the tools whose outputs it reads.
        view: where its view lives in the state (``analysis.risk``, ``stock_data.views.social``).
        fallback: what happens when it fails or lacks data.
        llm: the name of its LLM analyst (``agents.analysts.llm_agents``), or ``None``.
        section: the report heading that shows it.
        weight: its weight in the composite score, in words (a number or the setting that sets it).
        scorecard: its label in the scorecard.
        analyze: the analyst, run from its row by the analysis stage (module docstring);
            ``None``: its stage's own code runs it.
        markdown: the lines of its report section (after the heading ``## <section>``), for a
            row with ``analyze``; ``None``: the view as one ``key: value`` line per key.
    """

    name: str
    stage: Stage
    inputs: tuple[str, ...]
    view: str
    fallback: str
    llm: str | None
    section: str
    weight: str
    scorecard: str
    analyze: Analyze | None = None
    markdown: Render | None = None


#: Every analyst, in report order; the risk analyst is first.
ANALYSTS: Final[tuple[AnalystRow, ...]] = (
    AnalystRow(
        name="risk",
        stage="analysis",
        inputs=("risk_forecast", "risk_levels"),
        view="analysis.risk",
        fallback="no risk section, error recorded (not critical); the direction is still reported",
        llm=None,
        section="Risk",
        weight="0 (takes no view on direction)",
        scorecard="risk forecast (ranges and VaR)",
    ),
    AnalystRow(
        name="technical",
        stage="analysis",
        inputs=("get_history", "technical_indicators", "find_support_resistance", "calculate_fib_levels"),
        view="analysis.technical",
        fallback="no analysis result, error recorded; the pipeline goes on",
        llm="technical",
        section="Indicators",
        weight="1 (the deterministic scorer)",
        scorecard="deterministic scorer",
    ),
    AnalystRow(
        name="fundamental",
        stage="research",
        inputs=("get_fundamentals", "get_earnings_dates"),
        view="stock_data.views.fundamental",
        fallback="non-critical error; no fundamentals section",
        llm="fundamental",
        section="Fundamentals",
        weight="0 (shown, not scored)",
        scorecard="fundamental view (not in the signal)",
    ),
    AnalystRow(
        name="sentiment",
        stage="research",
        inputs=("get_news",),
        view="stock_data.views.sentiment",
        fallback="non-critical error; zero headlines give NEUTRAL with a note",
        llm="sentiment",
        section="News sentiment",
        weight="0 (shown, not scored)",
        scorecard="news sentiment (not in the signal)",
    ),
    AnalystRow(
        name="social",
        stage="research",
        inputs=("get_social_posts",),
        view="stock_data.views.social",
        fallback="non-critical error; no social section",
        llm=None,
        section="Social sentiment",
        weight="FINAGENT_ANALYSIS_SOCIAL_WEIGHT (default 0)",
        scorecard="social sentiment (not in the signal)",
    ),
    AnalystRow(
        name="learned",
        stage="research",
        inputs=("get_history",),
        view="stock_data.views.learned",
        fallback="no learned view; the scorer stands alone",
        llm=None,
        section="Learned analyst",
        weight="FINAGENT_ANALYSIS_LEARNED_WEIGHT (default 0)",
        scorecard="learned model (weight FINAGENT_ANALYSIS_LEARNED_WEIGHT)",
    ),
    AnalystRow(
        name="synthesis",
        stage="recommendation",
        inputs=("technical_indicators", "calculator", "risk_levels"),
        view="recommendation",
        fallback="the deterministic scorer's recommendation",
        llm="synthesis",
        section="Details of the direction call",
        weight="the calibrated p decides the published signal",
        scorecard="llm synthesis",
    ),
)


def analyst(name: str) -> AnalystRow:
    """The row named ``name``. Raises ``KeyError`` for an unknown analyst."""
    for row in ANALYSTS:
        if row.name == name:
            return row
    raise KeyError(f"no analyst {name!r}; the table has {[r.name for r in ANALYSTS]}")


def of_stage(stage: Stage) -> tuple[AnalystRow, ...]:
    """The rows a stage runs, in table order."""
    return tuple(row for row in ANALYSTS if row.stage == stage)


def run_from_row() -> tuple[AnalystRow, ...]:
    """The rows with an ``analyze`` function (run from the row by the analysis stage), in table order."""
    return tuple(row for row in ANALYSTS if row.analyze is not None)


if ANALYSTS[0].name != "risk" or len({r.name for r in ANALYSTS}) != len(ANALYSTS):
    raise RuntimeError("the analyst table leads with the risk analyst and names each analyst once")
if any(row.stage != "analysis" for row in run_from_row()):
    raise RuntimeError("an analyst run from its row (analyze) runs in the analysis stage")

__all__ = ["ANALYSTS", "AnalystRow", "Analyze", "Render", "analyst", "of_stage", "run_from_row"]
