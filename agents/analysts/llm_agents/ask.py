"""Ask: one agent's call to the model (its tool rounds and its structured answer), the tools it
is offered, and whether a session may still ask at all (time and token/USD budgets)."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.analysts.models import _Result
from agents.analysts.outcome import ToolCallRecord
from agents.analysts.prompts import grammar_schema
from agents.data.routing import news_configured
from agents.llm.config import Role
from agents.llm.loop import run_agentic_loop, structured_answer
from agents.llm.session import MIN_ATTEMPT_S, LLMSession
from agents.tools.catalog import load_builtin_tools, run_tool
from agents.tools.fundamentals import fundamentals_configured
from agents.tools.registry import REGISTRY, ToolContext
from core.settings import Settings

#: Lists longer than this are cut to their last items before a tool output goes to a model
#: (500 bars of history are ~15k tokens; the full output stays in the tool_calls row).
MAX_LIST_ITEMS_FOR_LLM = 10


def compact_for_llm(obj: Any, *, ref: str = "") -> Any:
    """``obj`` with long lists cut to their last ``MAX_LIST_ITEMS_FOR_LLM`` items (with a note)."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            if isinstance(value, list) and len(value) > MAX_LIST_ITEMS_FOR_LLM:
                out[key] = [compact_for_llm(v) for v in value[-MAX_LIST_ITEMS_FOR_LLM:]]
                out[f"{key}_note"] = (
                    f"last {MAX_LIST_ITEMS_FOR_LLM} of {len(value)} items; all are in tool output {ref}"
                )
            else:
                out[key] = compact_for_llm(value, ref=ref)
        return out
    if isinstance(obj, list):
        return [compact_for_llm(v, ref=ref) for v in obj]
    return obj


def tool_configured(name: str, settings: Settings) -> bool:
    """Whether tool ``name`` has a data source in ``settings``: ``get_news`` and
    ``get_fundamentals`` need their folders/providers configured; others always do.
    An analyst whose data tools are all unconfigured makes no LLM call."""
    if name == "get_news":
        return news_configured(settings)
    if name == "get_fundamentals":
        return fundamentals_configured(settings)
    return True


def available_tools(names: tuple[str, ...]) -> list[str]:
    """The registered tools among ``names`` (in order)."""
    load_builtin_tools()
    return [n for n in names if n in REGISTRY]


def make_executor(
    *, ctx: ToolContext, allowed: list[str], calls: list[ToolCallRecord]
) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """The loop's tool executor: ``run_tool`` (same registry, same ``tool_calls`` rows in
    ``ctx.rows``), each finished call appended to ``calls`` (the stage records it in the tool
    history and cites it on success); the envelope goes back to the model compacted.

    A failed tool call is returned to the model, not made an error of the analysis: the model
    chose the arguments, and the row records it. A tool outside ``allowed`` is refused with an
    ``INVALID_INPUT`` error without running anything (and without a record)."""

    def execute(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if name not in allowed:
            return {
                "error": {"code": "INVALID_INPUT", "message": f"unknown tool {name!r}; use one of {allowed}"}
            }
        envelope = run_tool(name=name, arguments=arguments, ctx=ctx)
        calls.append(ToolCallRecord(name=name, envelope=envelope))
        result: dict[str, Any] = compact_for_llm(envelope.to_public(), ref=envelope.tool_call_id)
        return result

    return execute


@dataclass
class Answer:
    """A validated answer and the conversation that produced it (for the correction round)."""

    value: _Result
    model: str
    messages: list[dict[str, Any]]


async def agent_call(
    *,
    session: LLMSession,
    agent: str,
    role: Role,
    system: str,
    user: str,
    tools: list[dict[str, Any]],
    executor: Callable[[str, dict[str, Any]], dict[str, Any]],
    model: type[_Result],
) -> Answer:
    """Ask ``agent`` once: the agentic loop (``system`` and ``user`` messages, ``tools`` run by
    ``executor``, at most ``session.config.max_iterations`` tool rounds), then its answer
    validated as ``model`` (one repair round, ``agents.llm.loop.structured_answer``) with HTML
    character references decoded (:func:`unescaped`). Returns the :class:`Answer` with the
    answering model and the conversation before the answer. Raises ``LLMError`` and
    ``StructuredFailure`` (an answer still invalid after the repair)."""
    result = await run_agentic_loop(
        session=session,
        agent=agent,
        role=role,
        system_prompt=system,
        user_message=user,
        tools=tools,
        executor=executor,
        max_iterations=session.config.max_iterations,
        json_mode=True,
        response_model=model,
        grammar=grammar_schema(model),
    )
    answer = await structured_answer(
        session=session, agent=agent, role=role, result=result, model=model, grammar=grammar_schema(model)
    )
    return Answer(value=unescaped(answer), model=result.models[-1], messages=result.messages[:-1])


def _unescape(value: Any) -> Any:
    if isinstance(value, str):
        return html.unescape(value)
    if isinstance(value, list):
        return [_unescape(v) for v in value]
    if isinstance(value, dict):
        return {k: _unescape(v) for k, v in value.items()}
    return value


def unescaped[R: _Result](answer: R) -> R:
    """``answer`` with HTML character references in its texts decoded (``html.unescape``):
    the real 0.5B model wrote "the analyst&#39;s" and "(&#34;golden-cross&#34;)" for an
    apostrophe and a quote in four statements of two runs (docs/benchmarks.md), whose "39" and
    "34" the grounding check then read as invented numbers. A text without a reference is
    unchanged. Raises ValueError (pydantic) only if a decoded text breaks the model's bounds."""
    dumped = answer.model_dump(mode="json")
    decoded = _unescape(dumped)
    return answer if decoded == dumped else type(answer).model_validate(decoded)


def out_of_time(session: LLMSession) -> bool:
    """True when the session's LLM time budget has run out (less than one attempt's minimum
    left, ``agents.llm.session.MIN_ATTEMPT_S``): the remaining agents run deterministically."""
    left = session.time_left()
    return left is not None and left < MIN_ATTEMPT_S


def skip_reason(session: LLMSession) -> str | None:
    """Why no more LLM call is made in this session (time budget, token/USD budget), or ``None``."""
    if out_of_time(session):
        return "the LLM time budget of this stage ran out"
    if session.exhausted:
        return "the LLM token/USD budget is spent"
    return None
