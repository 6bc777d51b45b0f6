"""Review stage (seed 001 step 5): grounding check and the final report."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from agents.llm.session import current_session
from agents.tools.history import history_values
from agents.tools.registry import ToolContext
from pipeline.core.parts import AnalysisResult, Grounding, LLMUsage, Recommendation
from pipeline.core.state import FinancialAgentState, StageError, Status
from pipeline.grounding import (
    PrintedNumber,
    ValueIndex,
    extract_numbers,
    unverified_in_json,
    unverified_numbers,
)
from pipeline.report import report_json, report_markdown
from pipeline.stages.common import apply_outcome, note


def _statements(rec: Recommendation | None) -> list[dict[str, Any]]:
    return [*rec.rationale, *rec.risk_flags] if rec is not None else []


#: Keys of LLM-written JSON that are not factual numbers: judgements and citations.
_NOT_FACTS = frozenset({"confidence", "source_refs", "context_refs", "llm_call_ids"})


def _llm_parts(state: FinancialAgentState) -> dict[str, tuple[Any, list[str]]]:
    """LLM-written parts besides the rationale statements: ``{part: (json, cited refs)}``.

    ``agents.<name>`` for analysts that answered through an LLM (cited refs: their
    ``source_refs`` plus the refs of the context they were given), ``synthesis`` for the
    synthesis's risk notes (cited refs: every tool call of the analysis)."""
    parts: dict[str, tuple[Any, list[str]]] = {}
    for name, record in ((state.analysis.agents if state.analysis else None) or {}).items():
        if record.get("source") == "llm" and record.get("result"):
            refs = [*record["result"].get("source_refs", []), *record.get("context_refs", [])]
            parts[f"agents.{name}"] = (record["result"], refs)
    rec = state.recommendation
    if rec is not None and rec.risk_notes:
        parts["synthesis"] = ({"risks": rec.risk_notes}, list(state.source_refs))
    return parts


class _LazyIndex(ValueIndex):
    """A :class:`ValueIndex` built on its first lookup. Grounding asks a statement's sources in
    order and stops at the first that has the number (``pipeline.grounding``), so an output
    that is never reached is never indexed: the 500-bar history cited beside the indicator
    values (which already hold the close, the SMAs and the 52-week range) is then neither
    rebuilt from the bars nor rounded value by value (per analysis, most of review's CPU)."""

    def __init__(self, build: Callable[[], ValueIndex]) -> None:  # no values until needed
        self._build: Callable[[], ValueIndex] | None = build
        self._built: ValueIndex | None = None

    def has(self, printed: PrintedNumber) -> bool:
        """``ValueIndex.has`` of the index, built now if this is the first lookup."""
        if self._built is None:
            assert self._build is not None
            self._built, self._build = self._build(), None
        return self._built.has(printed)


def _index_of_output(ctx: ToolContext, ref: str) -> ValueIndex:
    """The values of the cited output ``ref``. The research stage's history comes from bars
    rebuilt and digest-checked against the stored result (``agents.tools.history.history_values``:
    the same numbers, without reloading ~70 KB); any other output, or a history whose rebuild
    does not match, is loaded from its ``tool_calls`` row."""
    if ref in ctx.history_checks:
        values = history_values(ctx, ref)
        if values is not None:
            return ValueIndex.of_values(values)
    return ValueIndex(ctx.result_data(ref))


def _check(*, state: FinancialAgentState, ctx: ToolContext) -> tuple[Grounding, dict[str, list[str]]]:
    """Grounding result plus the unverified numbers per part (``scorer``, ``synthesis``,
    ``agents.<name>``)."""
    rec = state.recommendation
    llm_author = rec is not None and rec.author is not None and rec.author.kind == "llm"
    statement_part = "synthesis" if llm_author else "scorer"
    checked = 0
    unverified: list[str] = []
    by_part: dict[str, list[str]] = {}
    unknown: list[str] = []
    cache: dict[str, ValueIndex] = {}  # one index per cited output, shared by all statements

    def sources_of(refs: list[str], *, report_unknown: bool) -> list[Any]:
        out = []
        for ref in dict.fromkeys(r for r in refs if r):
            if ref not in state.source_refs:
                if report_unknown:
                    unknown.append(ref)
                continue
            if ref not in cache:
                cache[ref] = _LazyIndex(functools.partial(_index_of_output, ctx, ref))
            out.append(cache[ref])
        return out

    # every cited output except a rebuilt history, loaded in one query instead of one each
    cited = [r for item in _statements(rec) for r in item.get("source_refs", [])]
    cited += [r for _, refs in _llm_parts(state).values() for r in refs]
    ctx.prefetch([r for r in cited if r in state.source_refs and r not in ctx.history_checks])
    for item in _statements(rec):
        sources = sources_of(list(item.get("source_refs", [])), report_unknown=True)
        text = item.get("text", "")
        checked += len(extract_numbers(text))
        missing = unverified_numbers(text, sources)
        unverified += [f"{n} ({text[:60]})" for n in missing]
        if missing:
            by_part.setdefault(statement_part, []).extend(missing)
    for part, (obj, refs) in _llm_parts(state).items():
        count, missing = unverified_in_json(obj, sources_of(refs, report_unknown=False), skip_keys=_NOT_FACTS)
        checked += count
        unverified += [f"{n} ({part})" for n in missing]
        if missing:
            by_part.setdefault(part, []).extend(missing)
    grounding = Grounding(numbers_checked=checked, unverified=unverified, unknown_refs=sorted(set(unknown)))
    return grounding, by_part


def check_grounding(*, state: FinancialAgentState, ctx: ToolContext) -> Grounding:
    """Check every rationale and risk-flag statement against the tool outputs it cites, and the
    LLM-written analyst results and risk notes against the outputs they cite.

    A statement is grounded when each ``source_ref`` is a successful tool call of this analysis
    (in ``state.source_refs``) and every number it prints matches a value of those outputs
    (``pipeline.grounding``; LLM JSON via ``unverified_in_json``, judgements such as
    ``confidence`` excluded). Returns ``{numbers_checked, unverified: [...], unknown_refs: [...]}``
    (a :class:`~pipeline.core.parts.Grounding`).
    """
    return _check(state=state, ctx=ctx)[0]


def _correct(
    *, state: FinancialAgentState, ctx: ToolContext, by_part: dict[str, list[str]]
) -> dict[str, Any] | None:
    """The grounding correction round (guide LLM.md), inside review: ONE LLM call rewrites the
    LLM-written parts holding unverified numbers (``agents.analysts.llm_agents.correct_numbers``); valid
    rewrites replace them. Deterministic parts (``scorer``) are grounded by construction and
    never sent. Returns ``{parts, numbers_before, corrected_parts}`` or ``None`` without a session
    or without LLM-written unverified numbers.

    Why inside review rather than a should_continue re-enqueue: a new pass re-runs research
    and every analyst (new tool calls, new texts with new numbers) to fix a few sentences;
    ``pipeline.rules`` re-enqueues only for missing data, and the iteration cap stays the seed's.
    """
    session = current_session()
    llm_parts = {p: nums for p, nums in by_part.items() if p != "scorer"}
    if session is None or not llm_parts:
        return None
    # lazy: the LLM analysts load only with a model configured (agents.analysts.outcome docstring)
    from agents.analysts.llm_agents import correct_numbers

    rec = state.recommendation
    agents = (state.analysis.agents if state.analysis else None) or {}
    parts: dict[str, dict[str, Any]] = {}
    refs: list[str] = []
    for part, numbers in llm_parts.items():
        if part == "synthesis":
            assert rec is not None  # the synthesis part is the recommendation's risk notes
            current = {
                "signal": rec.signal,
                "confidence": rec.confidence,
                "rationale": rec.rationale,
                "risks": rec.risk_notes or [],
            }
            history_ref = state.stock_data.history_ref if state.stock_data else None
            refs += [r for item in rec.rationale for r in item.get("source_refs", [])]
            refs += [r for r in state.source_refs if r != history_ref]
            parts["synthesis"] = {"result": current, "unverified": numbers}
        else:
            name = part.removeprefix("agents.")
            record = agents[name]
            refs += [*record["result"].get("source_refs", []), *record.get("context_refs", [])]
            parts[name] = {"result": record["result"], "unverified": numbers}
    sources = {ref: ctx.result_data(ref) for ref in dict.fromkeys(refs) if ref in state.source_refs}
    outcome = correct_numbers(session=session, parts=parts, sources=sources)
    corrected = apply_outcome(state, ctx=ctx, outcome=outcome)
    for name, result in corrected.items():
        if name == "synthesis":  # only the texts: a correction never changes the signal
            assert rec is not None
            rec.rationale, rec.risk_notes = result["rationale"], result["risks"]
        else:
            agents[name]["result"] = result
    return {
        "parts": sorted(parts),
        "numbers_before": sum(len(v) for v in llm_parts.values()),
        "corrected_parts": sorted(corrected),
    }


def review(*, state: FinancialAgentState, ctx: ToolContext) -> FinancialAgentState:
    """Write ``state.final_report`` (Markdown) and mark the run ``done`` when a recommendation
    exists; otherwise keep ``reviewing`` so ``should_continue`` can re-run or end it.

    Ungrounded numbers or citations are recorded as a non-critical error and listed in the report
    as unverified (never presented as facts). With an LLM session, LLM-written parts holding
    unverified numbers first get one correction round (:func:`_correct`); the LLM usage totals
    go to ``state.analysis.llm`` for the report, the grounding result to
    ``state.analysis.grounding``.
    """
    grounding, by_part = _check(state=state, ctx=ctx)
    correction = _correct(state=state, ctx=ctx, by_part=by_part)
    if correction is not None:
        grounding, _ = _check(state=state, ctx=ctx)
        grounding.correction = {**correction, "numbers_after": len(grounding.unverified)}
    session = current_session()
    if session is not None:
        state.analysis = state.analysis or AnalysisResult()
        state.analysis.llm = LLMUsage.model_validate(session.total_usage())
    if grounding.unverified or grounding.unknown_refs:
        state.errors.append(
            StageError(
                stage="review",
                iteration=state.iteration,
                code="UNGROUNDED",
                message=(
                    f"{len(grounding.unverified)} unverified numbers, unknown refs {grounding.unknown_refs}"
                ),
                critical=False,
            )
        )
    if state.recommendation is not None:
        state.status = Status.DONE
    state.final_report = report_markdown(state, grounding=grounding)
    state.analysis = state.analysis or AnalysisResult()
    state.analysis.grounding = grounding
    note(state, stage="review", content=f"Report written; {grounding.numbers_checked} numbers checked.")
    return state


def final_json(state: FinancialAgentState) -> dict[str, Any]:
    """The ``--json`` object of a reviewed state (grounding taken from ``state.analysis``)."""
    return report_json(state, grounding=state.analysis.grounding if state.analysis else None)
