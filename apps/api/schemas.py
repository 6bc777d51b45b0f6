"""Request and response models of the HTTP gateway (they are the OpenAPI schema at ``/docs``)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, model_validator
from pydantic.json_schema import JsonDict

from apps.api.fields import (
    AsOfDate,
    MaxIterations,
    RunDate,
    Schedule,
    Ticker,
    TimeZone,
    WatchlistName,
)
from core.stages import Status
from pipeline.sessions import AnalysisType

#: The statuses of an analysis: one per stage of the stage table, then done/failed.
AnalysisStatus = Status


class AnalyzeOptions(BaseModel):
    """Pipeline options of one request (inherited by follow-ups of the same session)."""

    model_config = ConfigDict(extra="forbid")

    max_iterations: MaxIterations | None = Field(
        default=None,
        description="Most passes of the pipeline (1-10; default FINAGENT_ANALYSIS_MAX_ITERATIONS).",
    )
    cost_basis: float | None = Field(
        default=None,
        gt=0,
        lt=10_000_000,
        description="covered_call: cost basis of 100 shares held, USD/share "
        "(default: the paper portfolio's); the same as plan.cost_basis.",
    )
    plan: dict[str, Any] | None = Field(
        default=None,
        description="Options of the analysis type's plan, validated by the plan (422 naming the key): "
        'e.g. {"account_value": 250000, "delta_max": 0.3} for csp, {"cost_basis": 600, "shares": 700} for '
        'covered_call, {"width": 10} for put_spread (docs/options.md).',
    )


#: "At least one of symbol, query, session_id, and not null": the rule of
#: ``AnalyzeRequest._something_to_analyse`` in the OpenAPI document.
_ONE_OF_THE_SUBJECTS: JsonDict = {
    "anyOf": [
        {"required": [name], "properties": {name: {"type": "string"}}}
        for name in ("symbol", "query", "session_id")
    ]
}


class AnalyzeRequest(BaseModel):
    """``POST /analyze``: a ticker or a free-text query naming one."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"symbol": "AAPL", "as_of": "2012-06-29"},
                {"query": "what about MSFT?", "session_id": "s-1"},
            ],
            **_ONE_OF_THE_SUBJECTS,
        },
    )

    symbol: Ticker | None = Field(default=None)
    query: str | None = Field(
        default=None,
        min_length=1,
        max_length=1000,
        description=(
            "Free text naming one ticker, e.g. 'technical view of $MSFT' (no ; \\ < > | ` { } "
            "or control characters). Which ticker it names depends on the data: 422 when none."
        ),
    )
    as_of: AsOfDate | None = Field(default=None, description="Analysis date (default: latest in the data).")
    analysis_type: AnalysisType | None = Field(
        default=None, description="Analysis type; default from the text, the session, else composite."
    )
    options: AnalyzeOptions | None = None
    session_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="Conversation id: follow-ups inherit type, options and as_of.",
    )

    @model_validator(mode="after")
    def _something_to_analyse(self) -> AnalyzeRequest:
        if not (self.symbol or self.query or self.session_id):
            raise ValueError("give a `symbol` or a `query` (or a `session_id` to repeat the last one)")
        return self


class AnalyzeAccepted(BaseModel):
    """``202`` answer of ``POST /analyze``."""

    analysis_id: str
    status: str
    status_url: str
    symbol: str | None
    as_of: date | None
    analysis_type: AnalysisType | None = None
    session_id: str | None = None
    inherited: list[str] = Field(default_factory=list, description="Fields taken from the session.")
    replayed: bool = Field(default=False, description="True: an earlier request with this Idempotency-Key.")


class AnalysisDetails(BaseModel):
    """The author's raw reading of an analysis before calibration (docs/design.md, "Calibrated
    probability"): what decided nothing, kept for inspection with the measured hit rate of such
    calls beside it."""

    raw_signal: str | None = Field(default=None, description="The author's own signal before calibration.")
    score: float | None = Field(default=None, description="The scorer's raw score in [-1, 1].")
    confidence: float | None = Field(
        default=None,
        description="The author's raw confidence in [0, 1]: a vote share or a judgement, not a probability.",
    )
    key: str | None = Field(default=None, description="The rule set or LLM prompt version that authored it.")
    record: dict[str, Any] | None = Field(
        default=None,
        description=(
            "How often this author's calls on the raw signal's side were right at 20 sessions: {calls, "
            "right, rate, low, high, first, last, interval} (fractions; 95 % interval clustered by date), "
            "from the calibration artifact; null for a HOLD or an author never scored."
        ),
    )


class AnalysisOut(BaseModel):
    """``GET /analyses/{id}``: status, current stage and, when done, the report."""

    analysis_id: str
    symbol: str
    as_of: date
    status: AnalysisStatus
    analysis_type: AnalysisType = Field(
        default="composite",
        description="The plan the analysis runs (composite, csp, covered_call, ...).",
    )
    current_stage: str | None = Field(description="research | analysis | recommendation | review | null")
    step: str | None = Field(
        default=None,
        description="Step the analysis is in or waits for (a stage or should_continue); null when finished.",
    )
    attempt: int = Field(
        default=0, description="Claims of the current step by a worker (retries, redeliveries)."
    )
    recoveries: int = Field(default=0, description="Re-drives by the recovery sweep so far.")
    lease_expires_at: datetime | None = Field(
        default=None,
        description="When the analysis counts as stalled without progress (UTC); null when finished.",
    )
    stale: bool = Field(
        default=False, description="No progress for longer than the lease: the recovery sweep will act on it."
    )
    progress: str | None = Field(
        default=None,
        description="One line: what is happening, and for a stale analysis what the sweep will do.",
    )
    iteration: int
    max_iterations: int
    user_query: str
    signal: str | None
    p_outperform: float | None = Field(
        default=None,
        description=(
            "Calibrated p(outperform the benchmark) at the signal horizon (20 sessions), from the report; "
            "0.5 when the calibration abstains; null in list pages and in reports written before calibration."
        ),
    )
    probability_text: str | None = Field(
        default=None,
        description=(
            "The report's sentence naming the probability and its calibration model; null in list pages."
        ),
    )
    headline: str | None = Field(
        default=None,
        description=(
            "The report's one-line answer: the option plan's verdict for a csp or covered call, else the "
            "risk forecast's 80 % range at 20 sessions and the signal with 'no evidence' or its calibrated "
            "p (e.g. '80 % range in 20 sessions 499.37–629.87 (close 560.99); HOLD: no evidence'); null "
            "while running and in reports written before it. Never a raw confidence."
        ),
    )
    direction: str | None = Field(
        default=None,
        description=(
            "The direction in plain words: when the calibration abstains, 'No evidence that any signal here "
            "predicts SYMBOL against SPY; our directional calls were right 49 % [43, 55] of the time at 20 "
            "sessions (...)', the measured hit rate from the calibration artifact (outcomes up to "
            "2015-12-31); null in list pages."
        ),
    )
    details: AnalysisDetails | None = Field(
        default=None,
        description=(
            "The author's raw reading before calibration (signal, score, confidence) with the measured hit "
            "rate of such calls: not evidence, so not at the top level (it was `confidence` there before). "
            "Null while running; in list pages only its confidence."
        ),
    )
    error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    report_markdown: str | None = None
    report_json: dict[str, Any] | None = None
    chart_url: str | None = Field(
        default=None,
        description=(
            "Gateway-relative URL of the chart PNG (GET /analyses/{id}/chart.png, same API key) when "
            "one can be drawn: the analysis is finished and has price history. Null in list pages."
        ),
        examples=["/analyses/3f0c…/chart.png"],
    )


class AnalysisPage(BaseModel):
    """``GET /analyses``: a page of summaries (no reports), newest first."""

    items: list[AnalysisOut]
    limit: int
    offset: int
    next_offset: int | None = Field(description="Offset of the next page, null on the last page.")


class WatchlistOptions(BaseModel):
    """Options of a watchlist's analyses."""

    model_config = ConfigDict(extra="forbid")

    max_iterations: MaxIterations | None = Field(default=None, description="Most passes (1-10).")
    as_of: Literal["run_date", "latest"] | None = Field(
        default=None, description="Analyse as of the run's date (default) or the data's last date."
    )


class WatchlistIn(BaseModel):
    """``POST /watchlists``."""

    model_config = ConfigDict(extra="forbid")

    name: WatchlistName
    tickers: list[Ticker] = Field(
        min_length=1, max_length=200, description="Tickers (repeats are dropped, the order kept)."
    )
    schedule: Schedule | None = Field(default=None, description="Cron schedule; default '30 21 * * 1-5'.")
    timezone: TimeZone | None = Field(default=None, description="IANA zone; default America/New_York.")
    options: WatchlistOptions | None = None


class WatchlistPatch(BaseModel):
    """``PATCH /watchlists/{name}``: the fields to change (``options`` replaces them all)."""

    model_config = ConfigDict(extra="forbid")

    tickers: list[Ticker] | None = Field(default=None, min_length=1, max_length=200)
    schedule: Schedule | None = None
    timezone: TimeZone | None = None
    options: WatchlistOptions | None = None
    enabled: Annotated[bool, Strict()] | None = None


class WatchlistOut(BaseModel):
    """A watchlist."""

    name: str
    tickers: list[str]
    schedule: str
    timezone: str
    options: dict[str, Any]
    enabled: bool
    created_at: datetime
    updated_at: datetime


class RunRequest(BaseModel):
    """``POST /watchlists/{name}/runs``: start (or find) the run of a date."""

    model_config = ConfigDict(extra="forbid")

    run_date: RunDate | None = Field(
        default=None,
        description=(
            "Not after today in the watchlist's time zone. Default: the market clock's day "
            "(offline data: its last trading day; online: the last completed XNYS session)."
        ),
    )


class RunOut(BaseModel):
    """A watchlist run; ``digest`` (JSON) and ``digest_markdown`` once it is done."""

    run_id: str
    run_date: date
    status: Literal["running", "done"]
    trigger: str
    created_at: datetime
    finished_at: datetime | None
    created: bool | None = Field(default=None, description="POST only: whether this request created it.")
    enqueued: list[str] | None = Field(
        default=None, description="POST only: the tickers this request started, in the watchlist's order."
    )
    refused: dict[str, str] | None = Field(
        default=None,
        description="POST only: the tickers this request refused, each with why (a quota: 'quota: …', "
        "or validation); the digest lists them as failures.",
    )
    digest: dict[str, Any] | None = None
    digest_markdown: str | None = None
    digest_url: str


class HealthOut(BaseModel):
    """``GET /health``: each check is ``ok`` or the reason it failed."""

    status: Literal["ok", "unavailable"]
    mode: Literal["embedded", "service"]
    checks: dict[str, str]
    failing: list[str]


class ErrorOut(BaseModel):
    """Every error answer of the gateway: ``detail`` says what went wrong; a 422 adds ``errors``
    (pydantic's list, each input cut to 200 characters); a 409 of the chart adds ``status``."""

    model_config = ConfigDict(extra="allow")

    detail: str = Field(description="What went wrong, in one sentence; never echoes a key.")
    errors: list[dict[str, Any]] | None = Field(default=None, description="422 only: each invalid field.")


#: The error answers every endpoint may give, for the OpenAPI document (``FastAPI(responses=)``).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "The body is not parseable JSON."},
    401: {
        "model": ErrorOut,
        "description": "No API key (X-API-Key), or a signed link where signing is off.",
    },
    403: {
        "model": ErrorOut,
        "description": "Unknown or revoked key, or a key lacking the scope named.",
    },
    404: {"model": ErrorOut, "description": "No such object in the key's tenant."},
    409: {
        "model": ErrorOut,
        "description": "Conflicts with stored state (a reused Idempotency-Key, a taken name).",
    },
    413: {"model": ErrorOut, "description": "Request body over FINAGENT_API_MAX_BODY_BYTES."},
    422: {"model": ErrorOut, "description": "Invalid input; nothing was stored or enqueued."},
    429: {"model": ErrorOut, "description": "A quota of the key or its tenant is spent; see Retry-After."},
    500: {"model": ErrorOut, "description": "A bug: detail names the request id to find in the logs."},
    503: {"model": ErrorOut, "description": "Database, broker or rate limiter unreachable; retry."},
}


class AuditOut(BaseModel):
    """One audit row: a mutating request, who made it (never the key itself) and its outcome."""

    id: str
    at: datetime
    request_id: str
    tenant: str | None
    api_key_id: str | None = Field(description="The key's public id (fa_<id>_…), null without a valid key.")
    key_name: str | None
    method: str
    what: str = Field(description="Method and route template, e.g. 'DELETE /watchlists/{name}'.")
    object_id: str | None
    status_code: int
    outcome: Literal["ok", "refused", "error"]
    client_address: str | None = Field(default=None, description="The client's address (IPv6: its /64).")
    requests: int = Field(default=1, description="Requests this row stands for (1 for a request with a key).")


class AuditPage(BaseModel):
    """``GET /audit``: a page of the tenant's audit rows, newest first."""

    items: list[AuditOut]
    limit: int
    offset: int
    next_offset: int | None
