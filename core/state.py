"""``FinancialAgentState``: the message that travels along the Celery chain
(docs/design.md, "Pipeline state").

It carries ids, small summaries and citations only. Bars, DataFrames and charts never travel
in the message: they live in the database (``tool_calls.result``) and are referenced by
``tool_call_id``.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.parts import AnalysisResult, Recommendation, ResearchBundle
from core.plans import AnalysisType
from core.stages import INTERACTIVE, TERMINAL_STATUSES, Lane, Status, next_stage


class StageError(BaseModel):
    """One error recorded in ``state.errors``.

    ``critical`` errors count towards the ``should_continue`` rule "≥ 2 critical errors → end";
    ``permanent`` errors (invalid ticker, no data at ``as_of``) are never retried.
    """

    model_config = ConfigDict(extra="forbid")

    stage: str
    iteration: int
    code: str
    message: str
    critical: bool = True
    permanent: bool = False
    tool_call_id: str | None = None
    at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    @field_validator("message")
    @classmethod
    def _no_secret(cls, value: str) -> str:
        """The message with the configured secrets masked (``core.masking``): an error
        text often quotes what a provider answered, and a provider may echo the key it got."""
        # lazy: the masker reads the settings (pydantic-settings), which `finagent --help` and
        # the CLI's usage errors never need (apps.cli imports this module for a type)
        from core.masking import mask_text

        return mask_text(value)

    def reason(self) -> str:
        """The error as one line for a report or the ``analyses.error`` column:
        ``"<code>: <message>"``, or just ``message`` when it already starts with the code
        (``"STALLED after 3 recoveries: …"``)."""
        return self.message if self.message.startswith(self.code) else f"{self.code}: {self.message}"


class ToolHistoryEntry(BaseModel):
    """A compact record of one logical tool call (the last attempt), for ``state.tool_history``."""

    model_config = ConfigDict(extra="forbid")

    tool_call_id: str
    tool: str
    stage: str
    iteration: int
    status: Literal["success", "error"]
    attempts: int = 1
    error_code: str | None = None


class StageMark(BaseModel):
    """When one stage of one pass ran in a worker: ``started_at`` just before the stage
    function, ``finished_at`` just after it (before its checkpoint is written), both UTC. What
    the console's stage stepper shows as each stage's elapsed time; the gaps between marks are
    the time the next step waited in its queue."""

    model_config = ConfigDict(extra="forbid")

    stage: str
    iteration: int = Field(ge=0)
    started_at: datetime
    finished_at: datetime


class FinancialAgentState(BaseModel):
    """The pipeline state (docs/design.md, "Pipeline state"): fields, ids, point in time and results.

    Fields:
        analysis_id: UUID string of the analysis; stable across iterations.
        messages: chat-style log ``[{"role": ..., "content": ...}]``.
        stock_symbol: validated, upper-case ticker (docs/design.md, "Tickers").
        user_query: the user's request text.
        iteration / max_iterations: pass counter and cap of ``should_continue``.
        status: see ``Status`` (``core.stages``: one per stage, then done/failed).
        as_of: the analysis date (ISO date); no tool returns data after it.
        stock_data: research summary (:class:`~core.parts.ResearchBundle`): the quote
            and ``history_ref`` (a ``tool_call_id``), plus ``status`` "success" | "failed"
            (``should_continue`` reads it).
        analysis / recommendation: analyst output (indicators, chart levels, LLM analysts,
            grounding: :class:`~core.parts.AnalysisResult`) and the signal
            (:class:`~core.parts.Recommendation`).
        final_report: Markdown report, written when a pass ends the analysis (pipeline.steps.close).
        source_refs: every ``tool_call_id`` the results cite.
        llm_model: a LiteLLM model string chosen for this analysis (``--llm``), used by every
            role in whichever worker runs a stage; ``None`` → the settings' models (or none).
        analysis_type: a name of the plan table (``core.plans``), from the request (``None``:
            not stated, the default type).
        plan_options / plan_result: the request's options for its plan and the plan's answer,
            both JSON of the plan's own models (``pipeline/plans/<package>``); ``None`` when unset.
        lane: ``interactive`` (a person waits: HTTP API, CLI, Python API) or ``batch``
            (backtests, watchlist runs); every step of the analysis, its retries, next passes
            and re-drives go to that class's queues (``core.stages.StageSpec.queue_for``).
        stage_marks: when each completed stage ran (:class:`StageMark`), written by the step
            adapter (``pipeline.steps.run``), never by a stage; timing only, no result reads it.
    """

    model_config = ConfigDict(extra="forbid")

    analysis_id: str
    messages: list[dict[str, Any]] = Field(default_factory=list)
    stock_symbol: str
    user_query: str = ""
    iteration: int = Field(default=0, ge=0)
    max_iterations: int = Field(default=3, ge=1)
    status: Status = Status.RESEARCHING
    errors: list[StageError] = Field(default_factory=list)
    tool_history: list[ToolHistoryEntry] = Field(default_factory=list)
    as_of: date | None = None
    cost_basis: float | None = Field(
        default=None,
        gt=0,
        description="Stored states of older covered calls only: the cost basis they were asked with "
        "(new requests carry it in plan_options)",
    )
    plan_options: dict[str, Any] | None = Field(
        default=None,
        description="The request's options for its plan (the plan's own options model validated them, "
        "e.g. {'cost_basis': 600} for a covered call); None: none given",
    )
    stock_data: ResearchBundle | None = None
    analysis: AnalysisResult | None = None
    recommendation: Recommendation | None = None
    final_report: str | None = None
    plan_result: dict[str, Any] | None = Field(
        default=None,
        description="The plan's answer (JSON of the plan's own result model, e.g. an option plan's record); "
        "None: not run yet, or a plan that answers with the recommendation",
    )
    source_refs: list[str] = Field(default_factory=list)
    llm_model: str | None = Field(
        default=None, max_length=200, description="Per-analysis LiteLLM model (CLI --llm); None: settings"
    )
    query_note: str | None = Field(
        default=None,
        max_length=600,
        description="Why parse_query did not use the model's answer for a free-text request (e.g. "
        "'the model proposed AAPL, which the text does not name'); None: nothing was rejected.",
    )
    analysis_type: AnalysisType | None = Field(
        default=None,
        description="What the user asked for (pipeline.query.parse_query, the API's analysis_type); "
        "None: not stated (composite). Recorded and reported; every analysis runs the full pipeline.",
    )
    data_sources: dict[str, str | None] | None = Field(
        default=None,
        description="The optional sources research read, decided once from the worker's settings "
        "(pipeline.stages.research.data_sources: news provider, social posts, fundamentals; None "
        "where not read); later passes and finagent replay take these, not their own settings.",
    )
    lane: Lane = Field(
        default=INTERACTIVE,
        description="Class of the work: interactive (a person waits) or batch (backtests, watchlist runs); "
        "every stage of the analysis takes this class's queues (core.stages.StageSpec.queue_for).",
    )
    stage_marks: list[StageMark] = Field(
        default_factory=list, description="When each completed stage ran in a worker (UTC), in order."
    )

    def cite(self, *tool_call_ids: str) -> None:
        """Add ``tool_call_ids`` to ``source_refs`` once each, keeping first-seen order."""
        for ref in tool_call_ids:
            if ref not in self.source_refs:
                self.source_refs.append(ref)

    def critical_errors(self) -> list[StageError]:
        """Errors with ``critical=True`` (all iterations)."""
        return [e for e in self.errors if e.critical]

    def iteration_errors(self) -> list[StageError]:
        """Errors recorded in the current iteration."""
        return [e for e in self.errors if e.iteration == self.iteration]

    def advance(self, *, stage: str) -> FinancialAgentState:
        """Move to the status of the stage after ``stage`` (the stage table's order,
        ``core.stages``), unless the stage ended the analysis (``done``/``failed``); after the last
        stage the status stays (the end of the pass decides). Returns the state itself. Raises
        ``KeyError`` for an unknown stage."""
        following = next_stage(stage)
        if following is not None and self.status not in TERMINAL_STATUSES:
            self.status = following.status
        return self

    def to_message(self) -> dict[str, Any]:
        """JSON-safe dict for a Celery message (the JSON serializer only).

        The three parts carry only the keys a stage set (``core.parts.Part``), so the
        message has the shape the stages wrote before the parts were typed. ``lane`` is left
        out when it is the default (interactive) for the same reason: a person's analysis has
        the message and stored state it had before lanes existed (an absent lane loads as
        interactive); batch work carries ``"lane": "batch"``. ``cost_basis``, ``query_note``,
        ``plan_options`` and ``plan_result`` likewise are left out when unset (only a plan request
        with options, a plan with its own answer, or a free-text request whose model ticker was
        rejected, carries them); ``stage_marks`` while empty (a state no worker has run a stage
        of)."""
        data = self.model_dump(mode="json")
        if data.get("lane") == INTERACTIVE:
            del data["lane"]
        if not data.get("stage_marks"):
            data.pop("stage_marks", None)
        for optional in ("cost_basis", "query_note", "data_sources", "plan_options", "plan_result"):
            if data.get(optional) is None:
                data.pop(optional, None)
        return data

    @classmethod
    def as_received(cls, payload: dict[str, Any]) -> FinancialAgentState:
        """The state the next task of a chain receives for the message ``payload``: through a
        JSON round trip as Celery's JSON serializer makes it (the standard library's, as kombu's:
        a NaN stays NaN), then :meth:`from_message`. Raises ``pydantic.ValidationError``."""
        return cls.from_message(json.loads(json.dumps(payload)))

    @classmethod
    def from_message(cls, payload: dict[str, Any]) -> FinancialAgentState:
        """Validate a message at a task boundary (or a stored ``analyses.state``: the parts are
        dicts holding a subset of their declared keys). Raises ``pydantic.ValidationError``."""
        return cls.model_validate(payload)
