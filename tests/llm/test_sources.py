"""The answer sources of the session hook (``agents.llm.sources``), without a server: a replay
re-raises a recorded failure and refuses an unrecorded call; an unreachable cache asks the
provider instead of failing the call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agents.llm.config import LLMConfig, Role
from agents.llm.session import BudgetExhaustedError, LLMError, LLMSession
from agents.llm.sources import DatabaseCache, NotRecordedLLMError, RecordedResponses

CONFIG = LLMConfig(models={Role.TECHNICAL: "openai/scripted"}, api_base="http://127.0.0.1:1/v1")
MESSAGES = [{"role": "user", "content": "RSI?"}]


def _session(**extra: Any) -> LLMSession:
    return LLMSession(config=CONFIG, analysis_id="a-1", stage="analysis", id_seed="r0", **extra)


def _row(call_id: str, attempt: int, status: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"{call_id}#{attempt}",
        "llm_call_id": call_id,
        "attempt": attempt,
        "status": status,
        "model": "openai/scripted",
        "prompt_tokens": None,
        "completion_tokens": None,
        "cost_usd": None,
        **extra,
    }


def _complete(session: LLMSession) -> Any:
    return asyncio.run(session.complete(agent="technical", role=Role.TECHNICAL, messages=MESSAGES))


def test_a_recorded_failure_is_raised_again_with_its_rows() -> None:
    call_id = _session().next_llm_call_id("technical")  # the id the replayed session will use
    rows = [
        _row(call_id, 1, "error", error="RateLimitError: 429"),
        _row(call_id, 2, "error", error="InternalServerError: 500"),
    ]
    session = _session(source=RecordedResponses(rows))
    with pytest.raises(LLMError) as raised:
        _complete(session)
    assert raised.value.errors == [
        "openai/scripted: RateLimitError: 429",
        "openai/scripted: InternalServerError: 500",
    ]
    assert [r["id"] for r in session.rows] == [f"{call_id}#1", f"{call_id}#2"]


def test_a_recorded_answer_is_served_with_its_tokens() -> None:
    call_id = _session().next_llm_call_id("technical")
    answer = {
        "content": "RSI is 55.6",
        "tool_calls": [{"id": "call_7", "name": "get_history", "arguments": "{}"}],
    }
    rows = [_row(call_id, 1, "success", prompt_tokens=40, completion_tokens=9, completion=answer)]
    session = _session(spent_tokens=100, source=RecordedResponses(rows))
    completion = _complete(session)
    assert (completion.content, completion.prompt_tokens, completion.completion_tokens) == (
        "RSI is 55.6",
        40,
        9,
    )
    assert [(c.id, c.name) for c in completion.tool_calls] == [("call_7", "get_history")]
    assert session.spent_tokens == 100 + 40 + 9


def test_an_unrecorded_call_is_refused_unless_the_budget_refused_it_first() -> None:
    with pytest.raises(NotRecordedLLMError):
        _complete(_session(source=RecordedResponses([])))
    with pytest.raises(BudgetExhaustedError):
        _complete(_session(spent_tokens=CONFIG.budget_tokens, source=RecordedResponses([])))


def test_an_unreachable_cache_returns_nothing_so_the_provider_is_asked() -> None:
    cache = DatabaseCache(database_url="postgresql+psycopg://postgres@127.0.0.1:1/none")
    served = asyncio.run(
        cache.serve(
            _session(),
            agent="technical",
            llm_call_id="llm_x",
            chain=["openai/scripted"],
            messages=MESSAGES,
            tools=None,
            params={"max_tokens": 16},
        )
    )
    assert served is None
