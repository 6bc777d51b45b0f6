"""The three result parts of ``FinancialAgentState``: what each stage stores, declared once.

* :class:`ResearchBundle` (``state.stock_data``): written by the research stage.
* :class:`AnalysisResult` (``state.analysis``): written by the analysis stage; review adds the
  LLM usage and the grounding result.
* :class:`Recommendation` (``state.recommendation``): written by the recommendation stage;
  review may rewrite the LLM-written texts (the grounding correction).

Units, unless a field says otherwise: prices in USD, fractions as floats (0.05 = 5 %), dates
as ISO ``YYYY-MM-DD`` strings, ``*_ref`` fields a ``tool_call_id`` (the ``tool_calls`` row whose
``result`` holds the cited output). Fields typed ``dict[str, Any]`` hold a tool's ``data``
payload (or an analyst's record) exactly as that tool returned it: its shape is the tool's own
envelope data (documented with the tool in ``agents/tools``), not repeated here.

Every part is serialized with only the fields that were set (:class:`Part`), so a message or a
stored ``analyses.state`` row carries the keys the stages wrote and no column of ``null``s, and
a round trip through JSON gives back the same part. Unknown keys are rejected
(``extra="forbid"``): every key any stage has ever written is declared here (checked against
the project's history), so older stored rows load and a typo fails at once.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

Signal = Literal["BUY", "HOLD", "SELL"]


class Part(BaseModel):
    """Base of the state parts: unknown keys rejected, assignments validated; dumped with the
    fields that were set only.

    "Set" is pydantic's ``model_fields_set``: given to the constructor, present in a validated
    message, or assigned. An explicitly set ``None`` is kept (the stages write some on purpose,
    e.g. ``stop_loss`` without an ATR), an untouched default is left out, so the dump of a part
    is the dict the stages used to build by hand, key for key.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @model_serializer(mode="wrap")
    def _only_set_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {key: value for key, value in data.items() if key in self.model_fields_set}


class HistoryCheck(Part):
    """What a later stage needs to rebuild the bars of the research stage's ``get_history`` call
    from the provider and prove they are the same (``agents.tools.history.history_check``)."""

    symbol: str | None = Field(default=None, description="Ticker of the history")
    period: str | None = Field(default=None, description="get_history period, e.g. '2y'")
    interval: str = Field(default="1d", description="Bar interval, e.g. '1d'")
    digest: str = Field(description="Digest of every bar's date and six values as stored")


class Views(Part):
    """Deterministic views of the research context (``agents.analysts.views``); each is that module's
    summary dict (``fundamental_summary`` / ``sentiment_summary``), citing its tool call."""

    fundamental: dict[str, Any] | None = Field(
        default=None, description="fundamental_summary of the get_fundamentals entry (outlook, observations)"
    )
    sentiment: dict[str, Any] | None = Field(
        default=None, description="sentiment_summary of the get_news result (label, count, top headlines)"
    )
    social: dict[str, Any] | None = Field(
        default=None, description="social_summary of the get_social_posts result (label, score, top posts)"
    )
    learned: dict[str, Any] | None = Field(
        default=None,
        description="learned_summary of the learned analyst (agents.analysts.learned: label, p_up, score, "
        "version, features), present when social posts exist for the window",
    )


class ResearchBundle(Part):
    """``state.stock_data``: the research stage's summary of the symbol at ``as_of``.

    ``status`` "success" carries the quote and the history citation (and, when configured, the
    earnings, fundamentals and news context); "failed" carries ``error_codes``. ``should_continue``
    reads ``status`` (docs/design.md, "should_continue").
    """

    status: Literal["success", "failed"] = Field(description="Research outcome")
    quote: dict[str, Any] | None = Field(
        default=None, description="get_stock_data data: date, current_price (USD), 52w range, null_reasons"
    )
    quote_ref: str | None = Field(default=None, description="tool_call_id of get_stock_data")
    history_ref: str | None = Field(default=None, description="tool_call_id of get_history (the cited bars)")
    history_check: HistoryCheck | None = Field(
        default=None, description="How to rebuild and verify the cited bars without reloading them"
    )
    bars: int | None = Field(default=None, description="Number of daily bars in the history")
    first_date: str | None = Field(default=None, description="ISO date of the first bar")
    last_date: str | None = Field(default=None, description="ISO date of the last bar (≤ as_of)")
    earnings: dict[str, Any] | None = Field(
        default=None, description="This symbol's get_earnings_dates entry (next, recent, checked_through)"
    )
    earnings_ref: str | None = Field(default=None, description="tool_call_id of get_earnings_dates")
    fundamentals: dict[str, Any] | None = Field(
        default=None, description="This symbol's get_fundamentals entry (ratios, timestamp, earnings_date)"
    )
    fundamentals_ref: str | None = Field(default=None, description="tool_call_id of get_fundamentals")
    news_ref: str | None = Field(default=None, description="tool_call_id of get_news")
    views: Views | None = Field(default=None, description="Fundamental and sentiment views, when configured")
    error_codes: list[str] | None = Field(
        default=None, description="Tool error codes of a failed research (e.g. NO_DATA), in call order"
    )


class ChartLevels(Part):
    """Support/resistance zones and the Fibonacci retracement of the cited bars
    (docs/design.md, "Chart tools"), each with the ``tool_call_id`` that computed it."""

    support_resistance: dict[str, Any] | None = Field(
        default=None, description="find_support_resistance data: support/resistance zones (price USD)"
    )
    support_resistance_ref: str | None = Field(
        default=None, description="tool_call_id of find_support_resistance"
    )
    fib: dict[str, Any] | None = Field(
        default=None, description="calculate_fib_levels data: swing low/high (USD, ISO dates), levels"
    )
    fib_ref: str | None = Field(default=None, description="tool_call_id of calculate_fib_levels")


class LLMUsage(BaseModel):
    """The analysis's LLM totals so far (``agents.llm.session.LLMSession.total_usage``).

    Not a :class:`Part`: every key is always written, and ``cost_usd`` ``None`` means "a price
    is unknown", which must survive a round trip.
    """

    model_config = ConfigDict(extra="forbid")

    calls: int = Field(description="Logical LLM calls answered (after retries and fallbacks)")
    prompt_tokens: int = Field(description="Prompt tokens of every attempt, as the providers reported")
    completion_tokens: int = Field(description="Completion tokens of every attempt")
    cost_usd: float | None = Field(
        description="Cost in USD; None when a price is unknown or attempts failed with nothing answered"
    )
    failed_calls: int = Field(default=0, description="Logical LLM calls never answered")
    attempts: int = Field(default=0, description="HTTP attempts (llm_calls rows), answered or not")
    failed_attempts: int = Field(default=0, description="Attempts that failed")

    @model_serializer(mode="wrap")
    def _omit_zero_counters(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The counters added later (``failed_calls``, ``attempts``, ``failed_attempts``) are
        written only when non-zero, so a stored state without them round-trips unchanged."""
        data: dict[str, Any] = handler(self)
        for key in ("failed_calls", "attempts", "failed_attempts"):
            if not data.get(key):
                data.pop(key, None)
        return data


class Grounding(Part):
    """The review stage's grounding check (``pipeline.stages.review.check_grounding``)."""

    numbers_checked: int = Field(description="Numbers read in the checked texts and LLM JSON")
    unverified: list[str] = Field(description="Numbers matching no cited output, each with where it was")
    unknown_refs: list[str] = Field(
        default_factory=list, description="Cited tool_call_ids that are not successful calls of this analysis"
    )
    correction: dict[str, Any] | None = Field(
        default=None,
        description="Rows written before per-analyst grounding: the review's correction round "
        "{parts, numbers_before, corrected_parts, numbers_after}",
    )
    corrections: dict[str, str] | None = Field(
        default=None,
        description=(
            "Per LLM answer that needed one: its correction round (fixed, unfixed, refused, failed, skipped)"
        ),
    )
    dropped: list[dict[str, Any]] | None = Field(
        default=None,
        description="LLM statements dropped because numbers in them match no cited output: "
        "{part, text, numbers}",
    )
    signal_check: dict[str, Any] | None = Field(
        default=None,
        description="The check of the LLM synthesis's signal against its statements: "
        "{signal, accepted, support, restated, reason}",
    )


class Record(Part):
    """Base of an analyst's record (a plan's result part): a :class:`Part` whose dump keeps
    the keys in the order they were given.

    The record is built as a plain dict by its analysts (in the agents layer) and validated
    here once; its key order varies with the path the plan took (a rejection stops early), and
    the JSON report shows the record as written, so the dump restores the given order instead of
    the declaration order. ``extra="allow"`` on the subclasses that hold a tool's rows: a
    tool's own keys are the tool's shape (``agents/tools``), not repeated here.
    """

    _key_order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _remember_key_order(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        model = handler(data)
        if isinstance(data, dict) and isinstance(model, Record):
            model._key_order = tuple(data)
        return model

    @model_serializer(mode="wrap")
    def _set_fields_in_given_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        extra = self.__pydantic_extra__ or {}
        kept = {key: value for key, value in data.items() if key in self.model_fields_set or key in extra}
        ordered = {key: kept[key] for key in self._key_order if key in kept}
        ordered.update((key, value) for key, value in kept.items() if key not in ordered)
        return ordered


Number = int | float


class CspReason(Record):
    """One reason of a csp analyst: the statement and the ``tool_call_id``s it rests on."""

    text: str = Field(description="The statement (numbers as the cited tool output gives them)")
    source_refs: list[str] = Field(default_factory=list, description="tool_call_ids it cites")


class CspContract(Record):
    """One put of the csp plan (``agents.quant.options.screen.measure_put``), plus, for the
    suggestion, the at-the-money IV/HV ratio and the HV. Prices USD per share, ``premium`` and
    ``collateral`` USD per contract (100 shares), IV/POP/ROC/spread fractions. Numbers keep the
    type the tool gave (an ``int`` strike stays an ``int``: the report prints it as given)."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    contract: str = Field(description="OCC contract symbol")
    expiry: str = Field(description="Expiry date, ISO")
    dte: int = Field(description="Calendar days from as_of to expiry")
    strike: Number = Field(description="Strike, USD per share (the chain's units)")
    bid: Number | None = None
    ask: Number | None = None
    mid: Number | None = None
    spread_pct: Number | None = Field(default=None, description="(ask - bid) / mid")
    volume: Number | None = None
    open_interest: Number | None = None
    delta: Number | None = Field(default=None, description="BSM delta at the IV from the mid")
    iv: Number | None = Field(default=None, description="Implied volatility from the mid")
    pop: Number | None = Field(default=None, description="Probability of profit at expiry")
    breakeven: Number | None = Field(default=None, description="strike - premium per share")
    premium: Number | None = Field(default=None, description="USD per contract")
    collateral: Number | None = Field(default=None, description="USD per contract")
    weekly_roc: Number | None = None
    annualized_roc: Number | None = None
    source_iv: Number | None = Field(default=None, description="The chain's own IV")
    source_delta: Number | None = Field(default=None, description="The chain's own delta")
    iv_diff: Number | None = None
    delta_diff: Number | None = None
    iv_hv_ratio: Number | None = Field(default=None, description="At-the-money IV / HV (suggestion)")
    hv: Number | None = Field(default=None, description="Historical volatility (suggestion)")


class CspResult(Record):
    """``state.analysis.csp``: the record of the cash-secured put plan as analyses stored it before
    the plans answered in ``state.plan_result`` (kept so those stored states load and report; new
    analyses write the option plan's own result model, ``pipeline/plans/option/models.py``).

    ``status`` ``suggested`` with ``suggestion`` and up to three ``alternatives``, or
    ``rejected`` by the analyst ``rejected_by``; ``reasons`` cite their tool calls. ``chart``,
    ``options`` and ``research`` are the analysts' views as they wrote them (``options`` holds
    ``source_refs``, ``price_scale`` and ``nearest_misses``); ``decided_by`` says which author
    (``llm``/``deterministic``) decided each step of an LLM-session run. Every field is
    optional: a record keeps the keys its path wrote (a chart rejection has no ``options``).
    """

    strategy: str | None = Field(default=None, description='"cash-secured put"')
    symbol: str | None = None
    as_of: str | None = Field(default=None, description="ISO date")
    chart: dict[str, Any] | None = Field(default=None, description="The chart analyst's view")
    options: dict[str, Any] | None = Field(default=None, description="The options analyst's view")
    research: dict[str, Any] | None = Field(default=None, description="The research analyst's view")
    status: Literal["suggested", "rejected"] | None = None
    rejected_by: str | None = Field(default=None, description="chart | options | research")
    reasons: list[CspReason] = Field(default_factory=list)
    suggestion: CspContract | None = None
    alternatives: list[CspContract] = Field(default_factory=list)
    decided_by: dict[str, str] | None = Field(default=None, description="step → llm | deterministic")
    sizing: dict[str, Any] | None = Field(
        default=None, description="Contracts that fit the paper account and the assignment plan (csp)"
    )
    events: dict[str, Any] | None = Field(
        default=None, description="Ex-dividend dates and splits before the expiry (csp, with dividend data)"
    )

    def price_factor(self) -> float:
        """The chain-to-bars price factor of the options view (a chain quoted before a split
        has strikes ``factor`` times the bars' prices); 1.0 when the view has none."""
        scale = (self.options or {}).get("price_scale") or {}
        return float(scale.get("factor") or 1.0)


class CoveredCallResult(CspResult):
    """``state.analysis.covered_call``: the record of the covered-call plan (docs/options.md,
    "Covered calls", as stored before the plans answered in ``state.plan_result``): the csp
    record's shape with ``strategy`` "covered call", the calls in ``suggestion`` /
    ``alternatives`` and ``position`` (shares, cost basis and where they come from)."""

    position: dict[str, Any] | None = Field(
        default=None, description="{shares, cost_basis (USD/share), source}: the shares the calls cover"
    )


class AnalysisResult(Part):
    """``state.analysis``: the analysis stage's indicators, chart levels and LLM analysts, plus
    review's LLM usage and grounding result (review adds those even when analysis found
    nothing, so every field is optional)."""

    technical: dict[str, Any] | None = Field(
        default=None,
        description="technical_indicators data: indicators (RSI, MACD, SMA ...), close (USD), 52w range",
    )
    technical_ref: str | None = Field(default=None, description="tool_call_id of technical_indicators")
    risk: dict[str, Any] | None = Field(
        default=None,
        description=(
            "The risk analyst's view of the risk_forecast output (agents.analysts.risk.risk_view): "
            "sigma, VaR, ES and price ranges per horizon, reports in each window, the backtest lines"
        ),
    )
    risk_ref: str | None = Field(default=None, description="tool_call_id of risk_forecast")
    chart: ChartLevels | None = Field(default=None, description="Chart levels, when a chart tool succeeded")
    views: dict[str, dict[str, Any]] | None = Field(
        default=None,
        description="Views of the analysts run from their row of the analyst table, by name "
        "({view, source_refs}; agents.analysts.table, pipeline.stages.analysis.row_analyst)",
    )
    agents: dict[str, dict[str, Any]] | None = Field(
        default=None,
        description="LLM analysts' records by name ({source, model, result, context_refs, llm_call_ids, "
        "error}; agents.analysts.llm_agents.run_analysts)",
    )
    csp: CspResult | None = Field(
        default=None, description="A csp record of a state stored before state.plan_result (read only)"
    )
    covered_call: CoveredCallResult | None = Field(
        default=None, description="A covered_call record stored before state.plan_result (read only)"
    )
    llm: LLMUsage | None = Field(default=None, description="LLM usage totals (review, with a model)")
    grounding: Grounding | None = Field(default=None, description="Grounding result (review)")


class StopLoss(Part):
    """The ATR stop level, computed by the ``calculator`` tool."""

    value: int | float = Field(description="Stop price in USD")
    expression: str = Field(description="The calculator expression evaluated")
    rule: str = Field(description="The rule, e.g. 'close - 2 x ATR(14)'")
    source_refs: list[str] = Field(description="tool_call_ids of the calculator and the indicators")


class RiskPerShare(Part):
    """Risk per share at the stop, as a fraction of the close, computed by ``calculator``."""

    fraction: int | float = Field(description="Stop distance / close (0.05 = 5 %)")
    expression: str = Field(description="The calculator expression evaluated")
    source_refs: list[str] = Field(description="tool_call_ids of the calculator and the indicators")


class Author(Part):
    """Who decided the signal: ``{"kind": "llm", "model": ...}`` for the LLM synthesis."""

    kind: Literal["llm", "deterministic"] = Field(description="llm: the synthesis; deterministic: the scorer")
    model: str | None = Field(default=None, description="LiteLLM model string of the synthesis")


class Recommendation(Part):
    """``state.recommendation``: the signal with its reasons, risk flags and stop.

    The first six fields are the deterministic scorer's output (``agents.quant.scorer.TechnicalScore``,
    statements as its ``Statement``/``RiskFlag``/``Component`` dumps); with an LLM synthesis the
    signal, confidence and rationale are the model's, ``author`` says so and ``deterministic``
    keeps the scorer's reading. ``signal`` is then decided by the calibrated probability
    (``probability``, docs/design.md "Calibrated probability"); the author's own signal stays in
    ``raw_signal`` and the raw confidence/score in their fields.
    """

    signal: Signal = Field(description="BUY, HOLD or SELL")
    confidence: float = Field(description="Confidence in [0, 1]")
    score: float = Field(description="Scorer's score in [-1, 1]")
    components: list[dict[str, Any]] = Field(
        default_factory=list, description="Scorer components {name, values, vote, weight, text, source_refs}"
    )
    rationale: list[dict[str, Any]] = Field(
        default_factory=list, description="Cited statements {text, source_refs}"
    )
    risk_flags: list[dict[str, Any]] = Field(
        default_factory=list, description="Raised flags {flag, text, source_refs}"
    )
    stop_loss: StopLoss | None = Field(default=None, description="ATR stop; None without ATR or close")
    risk_per_share: RiskPerShare | None = Field(
        default=None, description="Risk per share; None without a stop"
    )
    synthesis: dict[str, Any] | None = Field(
        default=None, description="The synthesis agent's record without its result {source, model, error}"
    )
    deterministic: dict[str, Any] | None = Field(
        default=None, description="The scorer's {signal, confidence, score, rationale} under an LLM synthesis"
    )
    risk_notes: list[str] | None = Field(default=None, description="The LLM synthesis's risk notes")
    stop_odds: dict[str, Any] | None = Field(
        default=None,
        description=(
            "P(close below) and P(touch) of the stop per horizon: the risk_levels output "
            "{level, horizons: [{horizon, p_below, p_touch}], source_refs}"
        ),
    )
    author: Author | None = Field(default=None, description="Set when the LLM synthesis decided the signal")
    raw_signal: Signal | None = Field(
        default=None,
        description=(
            "The author's own signal (scorer or LLM) before calibration; None in states written before it"
        ),
    )
    probability: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Calibrated p(outperform the benchmark) (agents.quant.calibration): {version, benchmark, key, "
            "signal_horizon, abstained, reason, "
            "horizons: {h: {p, abstained, rows, bin_rows, first, last, reason}}, record, side_record} "
            "(record: the author's measured hit rate of directional calls, CalibrationModel.call_record)"
        ),
    )


__all__ = [
    "AnalysisResult",
    "Author",
    "ChartLevels",
    "Grounding",
    "HistoryCheck",
    "LLMUsage",
    "Part",
    "Recommendation",
    "ResearchBundle",
    "RiskPerShare",
    "Signal",
    "StopLoss",
    "Views",
]
