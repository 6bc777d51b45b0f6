"""The agentic loop (``run_agentic_loop``) and structured final answers.

Loop semantics (docs/design.md, "Agentic loop"): call the model with the tools; execute every
tool call it asks for and append each result (a tool error goes back as JSON ``{"error": ...}``);
repeat until the model answers without tool calls; after ``max_iterations`` tool rounds ask for
the final answer (with no tools offered, so the loop always ends). The heartbeat runs after every
model call (inside the session) and after every tool call. ``finish_reason`` is never used to
decide anything: mocked and some real providers report ``stop`` with tool calls
(docs/design.md, "Testing rules").

Structured answers: the final text is parsed as a JSON object (JSON mode, or the first fenced
```json block, or the outermost ``{...}``) and validated with the agent's pydantic model. An
invalid answer gets one repair round with the validation error; still invalid →
``StructuredFailure`` (the caller falls back to the deterministic analyst and records it).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from agents.llm.config import Role
from agents.llm.lenient import lenient_data
from agents.llm.session import LLMSession
from core.masking import mask

logger = logging.getLogger("finagent.llm")

ToolExecutor = Callable[[str, dict[str, Any]], dict[str, Any]]

FINAL_ANSWER_PROMPT = (
    "Tool budget reached. Give your final answer now, as the JSON object described in the "
    "instructions, using only the information gathered so far."
)
_FENCE_RE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL | re.IGNORECASE)


@dataclass
class AgenticLoopResult:
    """Outcome of :func:`run_agentic_loop`.

    ``final_response``: the last assistant text; ``tool_calls_made``: tools executed;
    ``llm_calls``: model calls made; ``messages``: the whole conversation (for a repair round);
    ``models``: model of each call (fallbacks show here).
    """

    final_response: str
    tool_calls_made: int
    llm_calls: int
    messages: list[dict[str, Any]]
    models: list[str] = field(default_factory=list)


class StructuredFailure(Exception):
    """The answer stayed invalid after the repair round; ``detail`` is the last validation error."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


async def run_agentic_loop(
    *,
    session: LLMSession,
    agent: str,
    role: Role,
    system_prompt: str,
    user_message: str,
    tools: list[dict[str, Any]],
    executor: ToolExecutor,
    max_iterations: int,
    json_mode: bool = False,
    response_model: type[BaseModel] | None = None,
    grammar: dict[str, Any] | None = None,
) -> AgenticLoopResult:
    """Run the agentic loop (module docstring) and return the final answer text.

    Args:
        session: the stage's LLM session (rows, budget, retries, heartbeat).
        agent / role: row label and model chain.
        tools: OpenAI tool schemas (``Tool.openai_schema()``); empty → one plain call.
        executor: ``(name, arguments) -> JSON-safe dict`` (errors returned as ``{"error": ...}``).
        max_iterations: tool rounds before the final answer is forced.
        json_mode: request a JSON object on calls made without tools.
        response_model: the final answer's model, sent as a JSON schema on calls made without
            tools (``LLMSession.complete``'s ``response_schema``; constrained decoding where the
            server supports it).
        grammar: a JSON schema sent instead of ``response_model``'s own (a bounded form that
            compiles to a small llama.cpp grammar, ``agents.analysts.prompts.grammar_schema``).
    Raises:
        LLMError / BudgetExhaustedError from the session.
    """
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": user_message},
    ]
    tool_calls_made = 0
    rounds = 0
    models: list[str] = []
    while True:
        offer = tools if tools and rounds < max_iterations else None
        if tools and offer is None:
            messages.append({"role": "user", "content": FINAL_ANSWER_PROMPT})
        completion = await session.complete(
            agent=agent,
            role=role,
            messages=messages,
            tools=offer,
            json_mode=json_mode and offer is None,
            response_schema=(grammar or response_model) if json_mode and offer is None else None,
        )
        models.append(completion.model)
        if not completion.tool_calls or offer is None:
            messages.append({"role": "assistant", "content": completion.content})
            return AgenticLoopResult(
                final_response=completion.content,
                tool_calls_made=tool_calls_made,
                llm_calls=len(models),
                messages=messages,
                models=models,
            )
        rounds += 1
        messages.append(
            {
                "role": "assistant",
                "content": completion.content or None,
                "tool_calls": [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in completion.tool_calls
                ],
            }
        )
        for call in completion.tool_calls:
            tool_calls_made += 1
            try:
                arguments = json.loads(call.arguments or "{}")
                if not isinstance(arguments, dict):
                    raise ValueError("arguments must be a JSON object")
                result = executor(call.name, arguments)
            except Exception as exc:  # a tool error goes back to the model as JSON
                result = {"error": f"{type(exc).__name__}: {exc}"}
            # what goes to the model's provider carries no configured secret (an echoed error)
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(mask(result), default=str)}
            )
            if session.heartbeat is not None:
                try:
                    session.heartbeat({"agent": agent, "tool": call.name, "tool_calls": tool_calls_made})
                except Exception:  # progress events are best effort, never fatal
                    logger.warning("heartbeat failed", exc_info=True)


def extract_json(text: str) -> dict[str, Any]:
    """The JSON object in ``text``: the whole text, a fenced ```json block, or the outermost braces.

    Raises:
        ValueError: no JSON object found (the message says why).
    """
    candidates = [text.strip()]
    candidates += [m.group(1) for m in _FENCE_RE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    last_error = "no JSON object in the answer"
    for candidate in candidates:
        if not candidate:
            continue
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError as exc:
            last_error = f"invalid JSON: {exc}"
            continue
        if isinstance(value, dict):
            return value
        last_error = f"expected a JSON object, got {type(value).__name__}"
    raise ValueError(last_error)


def _validate[M: BaseModel](text: str, model: type[M]) -> M:
    try:
        # safe repairs only (agents.llm.lenient: unwrap, drop unknown fields, cut long lists)
        data, notes = lenient_data(extract_json(text), model)
        answer = model.model_validate(data)
    except ValidationError as exc:
        raise ValueError(_validation_summary(exc)) from None
    if notes:
        logger.warning("lenient answer", extra={"payload": {"model": model.__name__, "notes": notes[:10]}})
    return answer


def _validation_summary(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ())) or 'answer'}: {e.get('msg')}" for e in exc.errors()
    )[:1500]


async def structured_answer[M: BaseModel](
    *,
    session: LLMSession,
    agent: str,
    role: Role,
    result: AgenticLoopResult,
    model: type[M],
    grammar: dict[str, Any] | None = None,
) -> M:
    """Validate ``result.final_response`` as ``model``; one repair round when invalid. The
    repair asks with ``grammar`` (a bounded JSON schema of ``model``) when given, else with
    ``model``'s own schema, both as the request's ``response_format`` and in the message.

    Raises:
        StructuredFailure: still invalid after the repair (``detail`` has the error).
        LLMError / BudgetExhaustedError: the repair call itself failed.
    """
    try:
        return _validate(result.final_response, model)
    except ValueError as first:
        error = str(first)
    schema = json.dumps(grammar or model.model_json_schema(), separators=(",", ":"))
    messages = [
        *result.messages,
        {
            "role": "user",
            "content": (
                f"Your answer is invalid: {error}. Reply with only the corrected JSON object "
                f"matching this JSON schema: {schema}"
            ),
        },
    ]
    repaired = await session.complete(
        agent=f"{agent}.repair",
        role=role,
        messages=messages,
        json_mode=True,
        response_schema=grammar or model,
    )
    try:
        return _validate(repaired.content, model)
    except ValueError as second:
        raise StructuredFailure(f"invalid after one repair round: {second} (first: {error})") from None
