"""Review stage (the last of a pass): the grounding check of everything the pass wrote."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from agents.analysts.enforce import output_index
from agents.analysts.grounding import (
    PrintedNumber,
    ValueIndex,
    extract_numbers,
    unverified_in_json,
    unverified_numbers,
)
from agents.tools.registry import ToolContext
from core.parts import AnalysisResult, Grounding, LLMUsage, Recommendation
from core.state import FinancialAgentState, StageError, Status
from pipeline.plan_hooks import plan_for
from pipeline.stages.common import note
from pipeline.steps.context import StepContext


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
    order and stops at the first that has the number (``agents.analysts.grounding``), so an output
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
                cache[ref] = _LazyIndex(functools.partial(output_index, ctx, ref))
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
    (``agents.analysts.grounding``; LLM JSON via ``unverified_in_json``, judgements such as
    ``confidence`` excluded). Returns ``{numbers_checked, unverified: [...], unknown_refs: [...]}``
    (a :class:`~core.parts.Grounding`).
    """
    return _check(state=state, ctx=ctx)[0]


def _enforced(state: FinancialAgentState) -> dict[str, Any]:
    """What the per-analyst grounding (``agents.analysts.enforce``, run before each answer was
    passed on) did: ``{corrections: {agent: accepted|failed|skipped}, dropped: [...],
    signal_check}`` read from the analysts' and the synthesis's records."""
    records = dict((state.analysis.agents if state.analysis else None) or {})
    rec = state.recommendation
    if rec is not None and rec.synthesis:
        records["synthesis"] = rec.synthesis
    corrections: dict[str, str] = {}
    dropped: list[dict[str, Any]] = []
    for name, record in records.items():
        checked = record.get("grounding") or {}
        if checked.get("corrected"):
            corrections[name] = checked["corrected"]
        dropped += checked.get("dropped") or []
    out: dict[str, Any] = {"corrections": corrections or None, "dropped": dropped or None}
    out["signal_check"] = rec.synthesis.get("signal_check") if rec is not None and rec.synthesis else None
    return out


def review(*, state: FinancialAgentState, ctx: StepContext) -> FinancialAgentState:
    """Check the pass's grounding and mark the run ``done`` when a recommendation exists;
    otherwise keep ``reviewing`` so ``should_continue`` can re-run or end it. The Markdown report
    (``state.final_report``) is written once, when the pass ends the analysis
    (``pipeline.conclude.conclude_pass``, run after this stage by ``pipeline.stages.ending``:
    it also prints the verdict that ended it).

    LLM answers were grounded before they were passed on (``agents.analysts.enforce``: one
    correction round, then unverified statements dropped); review checks everything again as
    the last gate and adds what the analysts dropped and corrected and the synthesis's signal
    check to the grounding result. Anything still ungrounded (a deterministic statement citing
    an unknown ref, say) is recorded as a non-critical error and listed in the report as
    unverified (never presented as a fact). The LLM usage totals go to ``state.analysis.llm``
    for the report, the grounding result to ``state.analysis.grounding``.
    """
    grounding, _ = _check(state=state, ctx=ctx)
    for key, value in _enforced(state).items():
        if value is not None:  # a part dumps only the fields set (core.parts)
            setattr(grounding, key, value)
    session = ctx.llm
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
    if state.recommendation is not None or plan_for(state.analysis_type).answered(state):
        state.status = Status.DONE
    state.analysis = state.analysis or AnalysisResult()
    state.analysis.grounding = grounding
    note(state, stage="review", content=f"Report written; {grounding.numbers_checked} numbers checked.")
    return state
