"""``finagent replay ID``: re-run a finished analysis from its rows alone and compare reports.

The stages run in this process, in the chain's order, on the analysis's own records: every
tool call is served from its ``tool_calls`` rows (``ToolContext.recorded``: no tool function
runs, and the data provider is one that refuses every call) and every LLM call from its
``llm_calls`` rows (``agents.llm.sources.RecordedResponses``: no model is called). No broker, no
worker, no write: the database is only read.

What makes the re-run identical: the analysis starts from :func:`pipeline.service.initial_state`
of its row, with the optional data sources research chose from the worker's settings
(``FinancialAgentState.data_sources``: a shell with another ``FINAGENT_DATA_NEWS_PROVIDER`` replays
the same calls); tool and LLM call ids are deterministic (analysis, iteration, stage, retry seed
``r<n>``, order, tool and arguments), so the re-run asks for exactly the recorded ids; each stage
receives its input as the chain did, a JSON round trip of the previous state; the end of a pass
is the last stage's own (``pipeline.stages.ending``: ``pipeline.conclude.conclude_pass``, as in
the worker); the report has no wall-clock field
(``pipeline.report.report_json``). A Celery retry of a stage (seed ``r1``, ``r2``, ...) is
replayed like the original: the highest seed whose calls are all recorded is the attempt that
committed.

The comparison is of canonical JSON text (sorted keys, 2-space indent, UTF-8): PostgreSQL's
JSONB keeps no key order, so key order is no part of a report; everything else (values, list
order, strings) must match byte for byte, and the Markdown report too.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, cast

from agents.data.market.base import MarketDataProvider
from agents.llm.config import llm_config
from agents.llm.pricing import usage_of_rows
from agents.llm.session import LLMSession
from agents.llm.sources import NotRecordedLLMError, RecordedResponses
from agents.tools.registry import NotRecordedError
from core.settings import Settings
from core.stages import STAGES, TERMINAL_STATUSES
from core.state import FinancialAgentState
from db import repo
from db.engine import get_engine
from pipeline.conclude import conclude_pass, failed_state
from pipeline.report import final_json
from pipeline.service import initial_state
from pipeline.stages.table import STAGE_FUNCTIONS
from pipeline.steps.backoff import TransientStageError
from pipeline.steps.close import chain_failure
from pipeline.steps.context import PassEnd, StepContext, history_checks

_STAGE_NAMES = frozenset(spec.name for spec in STAGES)


class ReplayError(Exception):
    """The analysis cannot be replayed: unknown, unfinished, or the re-run asked for a record
    that does not exist (the code or the settings now call tools or models differently)."""


class ProviderTouchedError(ReplayError):
    """Something read the data provider during a replay (it must read only the rows)."""


class _NoProvider:
    """The data provider of a replay: refuses every call. ``remote`` is true so the history
    rebuild (``agents.tools.history``) reads the stored result instead of asking for bars."""

    name = "replay"
    remote = True

    def __getattr__(self, attribute: str) -> Any:
        raise ProviderTouchedError(f"replay touched the data provider ({attribute})")


@dataclass
class ReplayResult:
    """The outcome of :func:`replay_analysis`.

    ``original``/``replayed``: canonical report texts (JSON object and Markdown, see the module
    docstring); ``identical``: both pairs equal; ``diff``: unified diff (empty when identical);
    ``sha256``: of the replayed JSON text; ``notes``: LLM calls whose prompt differs from the
    recorded one (the recorded answer was served anyway), stage retries replayed.
    """

    analysis_id: str
    original_json: str
    replayed_json: str
    original_markdown: str
    replayed_markdown: str
    notes: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        """True when the JSON and the Markdown reports are byte-identical."""
        return self.original_json == self.replayed_json and self.original_markdown == self.replayed_markdown

    @property
    def sha256(self) -> str:
        """sha256 (hex) of the replayed canonical JSON text."""
        return hashlib.sha256(self.replayed_json.encode()).hexdigest()

    @property
    def diff(self) -> str:
        """Unified diff, recorded → replayed, of the JSON then the Markdown report."""
        parts: list[str] = []
        for kind, old, new in (
            ("report.json", self.original_json, self.replayed_json),
            ("report.md", self.original_markdown, self.replayed_markdown),
        ):
            parts += difflib.unified_diff(
                old.splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile=f"recorded/{self.analysis_id}/{kind}",
                tofile=f"replayed/{self.analysis_id}/{kind}",
            )
        return "".join(parts)


def canonical_json(report: Any) -> str:
    """``report`` as canonical JSON text: sorted keys, 2-space indent, UTF-8 characters kept,
    one final newline. Raises ``TypeError`` for values JSON cannot encode."""
    return json.dumps(report, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def _usage(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``db.repo.llm_usage`` over in-memory rows, one per row id (the same rules:
    ``agents.llm.pricing.usage_of_rows``)."""
    return usage_of_rows(list({r["id"]: r for r in rows}.values()))


@dataclass
class _Records:
    """The analysis's rows, indexed for the replay."""

    tools: dict[str, list[dict[str, Any]]]
    results: dict[str, dict[str, Any]]
    llm: RecordedResponses
    llm_written: list[dict[str, Any]]  # rows "in the database" so far (budget and usage)
    llm_model: str | None

    @classmethod
    def load(cls, *, engine: Any, analysis_id: str) -> _Records:
        tools: dict[str, list[dict[str, Any]]] = {}
        results: dict[str, dict[str, Any]] = {}
        for row in sorted(
            repo.get_tool_calls(engine=engine, analysis_id=analysis_id), key=lambda r: r["attempt"]
        ):
            if row["stage"] not in _STAGE_NAMES:
                continue  # charts and direct tool use are not part of the analysis
            tools.setdefault(row["tool_call_id"], []).append(row)
            if row["status"] == "success" and row.get("result") is not None:
                results[row["tool_call_id"]] = row["result"]
        llm_rows = repo.get_llm_calls(engine=engine, analysis_id=analysis_id)
        in_stages = [r for r in llm_rows if r["stage"] in _STAGE_NAMES]
        return cls(
            tools=tools,
            results=results,
            llm=RecordedResponses(in_stages),
            llm_written=[r for r in llm_rows if r["stage"] not in _STAGE_NAMES],  # the query's
            llm_model=in_stages[0]["model"] if in_stages else None,
        )


def _context(
    *, state: FinancialAgentState, stage: str, seed: int, settings: Settings, records: _Records
) -> StepContext:
    """The context of a replayed stage run: as ``pipeline.steps.context.open_context``, but
    results, loads, calls and LLM answers come from the records (:func:`_session`) and the
    provider refuses everything."""
    assert state.as_of is not None  # initial_state sets it
    session = _session(state=state, stage=stage, seed=seed, settings=settings, records=records)
    return StepContext(
        settings=settings,
        as_of=state.as_of,
        provider=cast(MarketDataProvider, _NoProvider()),
        analysis_id=state.analysis_id,
        symbol=state.stock_symbol,
        stage=stage,
        iteration=state.iteration,
        celery_task_id=None,
        id_seed=f"r{seed}",
        load_result=records.results.get,
        load_results=lambda refs: {r: records.results[r] for r in refs if r in records.results},
        history_checks=history_checks(state),
        recorded=lambda tool_call_id: records.tools.get(tool_call_id, []),
        open_llm=lambda: session,
    )


def _session(
    *, state: FinancialAgentState, stage: str, seed: int, settings: Settings, records: _Records
) -> LLMSession | None:
    """The LLM session of a replayed stage run (``make_llm_session`` on in-memory usage, its
    answers served by the recorded ``llm_calls`` rows), or ``None`` when the original made no
    LLM call in any stage and no model is configured."""
    config = llm_config(settings=settings, override=state.llm_model)
    if config is None and records.llm_model is not None:
        config = llm_config(settings=settings, override=records.llm_model)  # recorded, not configured here
    if config is None:
        return None
    return LLMSession.resuming(
        usage=_usage(records.llm_written),
        config=config,
        analysis_id=state.analysis_id,
        stage=stage,
        iteration=state.iteration,
        celery_task_id=None,
        id_seed=f"r{seed}",
        source=records.llm,
    )


def _as_message(state: FinancialAgentState) -> FinancialAgentState:
    """``state`` as the next task receives it: through Celery's JSON serializer."""
    return FinancialAgentState.as_received(state.to_message())


@dataclass
class _Attempt:
    """One replayed run of a stage with one retry seed."""

    seed: int
    state: FinancialAgentState | None = None
    error: BaseException | None = None
    llm_rows: list[dict[str, Any]] = field(default_factory=list)
    consumed: int = 0  # recorded rows it was served (tool and LLM)
    pass_end: PassEnd | None = None  # how the last stage ended its pass (ctx.pass_end)


def _run_stage(
    *, state: FinancialAgentState, stage: str, settings: Settings, records: _Records, notes: list[str]
) -> tuple[FinancialAgentState, PassEnd | None]:
    """Replay one stage: run it with seeds ``r0, r1, ...`` (at most ``1 + task_max_retries``)
    and keep the highest seed whose calls were all recorded (the attempt that committed; lower
    seeds are the attempts Celery retried). Returns the state after the stage (``advance``d)
    and, for the last stage of a pass, how it ended the pass (``ctx.pass_end``; else ``None``).

    Raises ``TransientStageError`` when the committed attempt raised it (retries exhausted),
    any other exception of the stage function as it raised it, and :class:`ReplayError` when
    even seed ``r0`` asked for a record that does not exist.
    """
    fn = STAGE_FUNCTIONS[stage]
    attempts: list[_Attempt] = []
    for seed in range(settings.durability.task_max_retries + 1):
        attempt = _Attempt(seed=seed)
        ctx = _context(state=state, stage=stage, seed=seed, settings=settings, records=records)
        try:
            attempt.state = fn(state=_as_message(state), ctx=ctx).advance(stage=stage)
        except (NotRecordedError, NotRecordedLLMError) as exc:
            if seed == 0:
                raise ReplayError(f"stage {stage} of pass {state.iteration}: {exc}") from exc
            break
        except Exception as exc:  # the stage's own failure: replayed as the chain saw it
            attempt.error = exc
        attempt.llm_rows = list(ctx.llm_rows)
        attempt.pass_end = ctx.pass_end
        attempt.consumed = len(ctx.rows) + len(attempt.llm_rows)
        if seed > 0 and attempt.consumed == 0:
            break  # nothing recorded under this seed: the original never ran it
        attempts.append(attempt)
        records.llm_written += attempt.llm_rows  # written by the retry path or the checkpoint
        if attempt.error is not None and not isinstance(attempt.error, TransientStageError):
            break  # a permanent failure is not retried
    committed = attempts[-1]
    if committed.seed > 0:
        notes.append(f"stage {stage} of pass {state.iteration}: replayed as retry r{committed.seed}")
    if committed.error is not None:
        raise committed.error
    assert committed.state is not None
    return committed.state, committed.pass_end


def _replay_states(
    *, start: FinancialAgentState, settings: Settings, records: _Records, notes: list[str]
) -> FinancialAgentState:
    """Run every pass from ``start`` until the analysis ends; returns the final state (its
    ``final_report`` written). A stage that fails for good fails the analysis as
    ``pipeline.steps.close.fail_chain`` does."""
    state = start
    for _ in range(start.max_iterations + 1):  # every pass ends or advances the iteration
        ended: PassEnd | None = None
        for spec in STAGES:
            try:
                state, ended = _run_stage(
                    state=state, stage=spec.name, settings=settings, records=records, notes=notes
                )
            except ReplayError:
                raise
            except Exception as exc:
                stage, code, message = chain_failure(task_name=spec.task_name, exc=exc)
                return failed_state(state=_as_message(state), stage=stage, code=code, message=message)
        if ended is not None and ended.ends:
            return state  # the last stage ended the analysis: finished, its report written
        # another pass follows: the should_continue task's hand-off (the same decision again)
        _, state = conclude_pass(_as_message(state))
    raise ReplayError(f"the replay did not end within {start.max_iterations + 1} passes")


def replay_analysis(*, analysis_id: str, settings: Settings) -> ReplayResult:
    """Re-run the finished analysis ``analysis_id`` from its recorded tool outputs and LLM
    answers and compare its report with the stored one (module docstring).

    Raises:
        KeyError: no such analysis.
        ReplayError: it is not finished, it has no stored report, or the re-run asked for a
            tool or LLM call that was never recorded.
        sqlalchemy.exc.OperationalError: the database is unreachable.
    """
    engine = get_engine(settings.service.effective_database_url)
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    if row is None:
        raise KeyError(f"no analysis {analysis_id}")
    if row["status"] not in TERMINAL_STATUSES or row.get("report_json") is None:
        raise ReplayError(
            f"analysis {analysis_id} is {row['status']} without a final report: nothing to replay"
        )
    stored = FinancialAgentState.from_message(row["state"])
    records = _Records.load(engine=engine, analysis_id=analysis_id)
    start = initial_state(
        analysis_id=analysis_id,
        symbol=row["symbol"],
        user_query=row["user_query"],
        as_of=row["as_of"],
        max_iterations=row["max_iterations"],
        llm_model=stored.llm_model,
        analysis_type=stored.analysis_type,
        lane=stored.lane,  # a backtest's analysis replays as batch work, as it ran
        # a plan's request options live in the stored state (an older covered call: its cost basis)
        plan_options=stored.plan_options
        or ({"cost_basis": stored.cost_basis} if stored.cost_basis is not None else None),
        query_note=stored.query_note,
    )
    notes: list[str] = []
    if stored.data_sources is not None:
        # the sources the worker's settings chose (news provider, social posts, fundamentals),
        # not this shell's: a replay asks for exactly the recorded calls
        start.data_sources = dict(stored.data_sources)
    else:
        notes.append(
            "the analysis predates recorded data sources: research decided its optional sources "
            "(news, social posts, fundamentals) from this shell's settings"
        )
    final = _replay_states(start=start, settings=settings, records=records, notes=notes)
    notes += [f"LLM call {i}: the prompt differs from the recorded one" for i in records.llm.changed_requests]
    replayed = json.loads(json.dumps(final_json(final)))
    return ReplayResult(
        analysis_id=analysis_id,
        original_json=canonical_json(row["report_json"]),
        replayed_json=canonical_json(replayed),
        original_markdown=(row.get("report") or "").rstrip("\n") + "\n",
        replayed_markdown=(final.final_report or "").rstrip("\n") + "\n",
        notes=notes,
    )


__all__ = ["ProviderTouchedError", "ReplayError", "ReplayResult", "canonical_json", "replay_analysis"]
