"""What an LLM analyst run hands back besides its answer: the tool calls it made and the failures
to record. Analysts never see the pipeline state; the stage that ran them applies these records
to it (``pipeline.stages.common.apply_outcome``), in the order they are listed here.

A small module of plain frozen dataclasses so ``pipeline.stages.common`` can import it at module
top without pulling in the LLM machinery (``agents.analysts.llm_agents`` is imported lazily by
the stages).
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.tools.envelope import ToolEnvelope


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call an analyst's model asked for, run through ``agents.tools.registry.run_tool``.

    ``name`` is the tool's registered name; ``envelope`` its final result (the ``tool_calls``
    rows, one per attempt, are already in the ``ToolContext``). A successful call is a citable
    source; a failed one was returned to the model and is not an error of the analysis.
    """

    name: str
    envelope: ToolEnvelope


@dataclass(frozen=True)
class AnalystError:
    """A failure of an LLM analyst (invalid answer, LLM error, spent budget) to record in the
    analysis' errors. ``code`` is ``LLM_INVALID_OUTPUT``, ``LLM_ERROR``, ``LLM_BUDGET_EXHAUSTED``,
    ``LLM_TIME_BUDGET_EXHAUSTED``, ``LLM_UNGROUNDED`` (nothing verifiable left of an answer) or
    ``LLM_SIGNAL_UNSUPPORTED`` (a synthesis signal its statements do not support) or
    ``LLM_COPIED_EXAMPLE`` (the answer repeats the prompt's example answer) or
    ``LLM_NO_READING`` (its prose is empty, a few words, or a key's description written back);
    ``message`` is
    one line naming the agent and saying what was done instead. ``critical`` is False because
    of that fallback: the analysis completes (the failure policy in
    ``agents.analysts.llm_agents``' module docstring)."""

    code: str
    message: str
    critical: bool = False


@dataclass(frozen=True)
class AnalystOutcome[T]:
    """An analyst run's result ``value`` plus its ``tool_calls`` and ``errors``, each in the
    order they happened (the pipeline state keeps that order in ``tool_history``,
    ``source_refs`` and ``errors``, and the report shows it)."""

    value: T
    tool_calls: tuple[ToolCallRecord, ...] = ()
    errors: tuple[AnalystError, ...] = ()
