"""LiteLLM analysts: technical, fundamental, sentiment (analysis stage) and synthesis with the
risk assessor's flags (recommendation stage), each answer grounded before it is passed on.

Order and context passing (docs/design.md, "Analyst graph"): technical → fundamental →
sentiment → synthesis; each later agent receives the earlier agents' *checked* results. Agents
are pluggable: an agent is offered every registered tool among ``AgentSpec.tools``; one whose
data tools are all missing (``get_fundamentals``/``get_news`` need a configured source) and whose
context holds no data of its kind is *skipped without an LLM call* and says what it lacks. That
keeps the default configuration at ≤ 5 calls per analysis (docs/benchmarks.md).

Grounding enforced per answer (:mod:`agents.analysts.enforce`): a statement whose numbers match
no cited tool output gets one correction round (the agent's own conversation continued, asking
it to copy or remove them); what is still unverified is dropped and listed. The synthesis's
signal must be supported by its remaining statements (scorer rule votes), else the scorer's
signal stands.

Failures never invent a result: an answer still invalid after the repair round, an LLM error or
an exhausted budget (tokens, USD, or the stage's time budget) → the deterministic analyst's
result, with the failure recorded as a non-critical one-line error (the analysis completes)
saying what was done instead.

The package follows one answer's way, a module each: :mod:`.ask` (the call and its tools),
:mod:`.check` (grounding and reading checks), :mod:`.correct` (one correction round, then the
drop of what is still unverified) and :mod:`.accept` (the checked answer or the deterministic
result, and why); :mod:`.specs` holds the agents and their instructions, :mod:`.context` what
each is shown, :mod:`.records` what a run records; :mod:`.analysts` and :mod:`.synthesis` run
them.

Analysts never see the pipeline state: they take plain values and return an
:class:`~agents.analysts.outcome.AnalystOutcome` (the answer, the tool calls made, the failures);
the stage that runs them applies those records to the state (``pipeline.stages.common``).
"""

from agents.analysts.llm_agents.accept import run_agent
from agents.analysts.llm_agents.analysts import run_analysts
from agents.analysts.llm_agents.ask import (
    MAX_LIST_ITEMS_FOR_LLM,
    available_tools,
    compact_for_llm,
    make_executor,
    out_of_time,
    skip_reason,
    tool_configured,
    unescaped,
)
from agents.analysts.llm_agents.context import synthesis_context
from agents.analysts.llm_agents.correct import correction_request
from agents.analysts.llm_agents.records import Log, failure_of, one_line, record_of
from agents.analysts.llm_agents.specs import (
    ANALYSTS,
    FUNDAMENTAL,
    GROUNDING_RULES,
    SENTIMENT,
    SYNTHESIS_INSTRUCTIONS,
    TECHNICAL,
    AgentSpec,
)
from agents.analysts.llm_agents.synthesis import run_synthesis

__all__ = [
    "ANALYSTS",
    "FUNDAMENTAL",
    "GROUNDING_RULES",
    "MAX_LIST_ITEMS_FOR_LLM",
    "SENTIMENT",
    "SYNTHESIS_INSTRUCTIONS",
    "TECHNICAL",
    "AgentSpec",
    "Log",
    "available_tools",
    "compact_for_llm",
    "correction_request",
    "failure_of",
    "make_executor",
    "one_line",
    "out_of_time",
    "record_of",
    "run_agent",
    "run_analysts",
    "run_synthesis",
    "skip_reason",
    "synthesis_context",
    "tool_configured",
    "unescaped",
]
