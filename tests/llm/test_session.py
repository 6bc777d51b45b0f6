"""LLMSession against the scripted OpenAI-compatible server: retries, fallbacks, budget, rows."""

from __future__ import annotations

import json
import logging

import pytest
from pydantic import BaseModel

from agents.llm.config import LLMConfig, Role, llm_config
from agents.llm.runner import run_sync
from agents.llm.session import BudgetExhaustedError, LLMError, LLMSession
from core.settings import Settings
from tests.llm.responders import KeyEcho
from tests.llm.server import ScriptedLLM, chat, error

SECRET = "sk-test-secret-value-123"
MESSAGES = [{"role": "user", "content": "hello"}]


def _session(server: ScriptedLLM, **overrides: object) -> LLMSession:
    fields: dict[str, object] = {
        "models": {Role.TECHNICAL: "openai/primary"},
        "fallbacks": ("openai/backup",),
        "api_base": server.url,
        "api_key": SECRET,
        "num_retries": 1,
        "retry_backoff": 0.01,
        **overrides,
    }
    return LLMSession(config=LLMConfig(**fields), analysis_id="a-1", stage="analysis")  # type: ignore[arg-type]


def _complete(session: LLMSession, **kw: object):  # type: ignore[no-untyped-def]
    return run_sync(session.complete(agent="technical", role=Role.TECHNICAL, messages=MESSAGES, **kw))  # type: ignore[arg-type]


def test_a_429_is_retried_and_each_attempt_is_one_row(llm_server: ScriptedLLM) -> None:
    llm_server.script("primary", [error(429, "slow down", retry_after="0"), chat("fine", prompt_tokens=7)])
    session = _session(llm_server)

    completion = _complete(session)

    assert completion.content == "fine" and completion.model == "openai/primary"
    assert llm_server.models_called() == ["primary", "primary"]
    assert [(r["attempt"], r["status"], r["level"]) for r in session.rows] == [
        (1, "error", "WARNING"),
        (2, "success", "INFO"),
    ]
    assert "RateLimitError" in session.rows[0]["error"]
    assert {r["llm_call_id"] for r in session.rows} == {completion.llm_call_id}
    assert session.rows[1]["prompt_tokens"] == 7 and session.rows[1]["provider"] == "openai"


def test_a_failing_primary_falls_back_to_the_next_model(llm_server: ScriptedLLM) -> None:
    llm_server.script("primary", [error(500), error(503)])
    llm_server.script("backup", [chat("from backup")])
    session = _session(llm_server)

    completion = _complete(session)

    assert completion.model == "openai/backup" and completion.content == "from backup"
    assert llm_server.models_called() == ["primary", "primary", "backup"]
    assert [r["model"] for r in session.rows] == ["openai/primary", "openai/primary", "openai/backup"]
    assert [r["attempt"] for r in session.rows] == [1, 2, 3]


def test_an_auth_error_is_not_retried_and_all_models_failing_raises(llm_server: ScriptedLLM) -> None:
    llm_server.script("primary", [error(401, "bad key")])
    llm_server.script("backup", [error(401, "bad key")])
    session = _session(llm_server)

    with pytest.raises(LLMError) as info:
        _complete(session)

    assert llm_server.models_called() == ["primary", "backup"]
    assert len(info.value.errors) == 2 and all(r["status"] == "error" for r in session.rows)


def test_cost_is_null_for_an_unknown_model_and_uses_settings_prices(llm_server: ScriptedLLM) -> None:
    llm_server.script("primary", [chat("a", prompt_tokens=1000, completion_tokens=100)] * 2)

    unknown = _session(llm_server)
    assert _complete(unknown).cost_usd is None and unknown.rows[0]["cost_usd"] is None

    priced = _session(llm_server, input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    assert _complete(priced).cost_usd == pytest.approx(1000 * 1e-6 + 100 * 2e-6)


def test_the_budget_stops_before_the_call_that_would_exceed_it(llm_server: ScriptedLLM) -> None:
    session = _session(llm_server, budget_tokens=500, max_tokens=400)
    session.spent_tokens = 200

    with pytest.raises(BudgetExhaustedError):
        _complete(session)

    assert llm_server.requests == [] and session.rows == [] and session.exhausted


def test_the_api_key_never_reaches_rows_or_log_lines(
    llm_server: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.script("primary", [error(400, f"invalid api_key={SECRET}"), chat("ok")])
    llm_server.script("backup", [chat("ok")])
    session = _session(llm_server)
    with caplog.at_level(logging.INFO, logger="finagent.llm_calls"):
        _complete(session)
    assert SECRET not in json.dumps(session.rows, default=str)
    assert SECRET not in json.dumps([getattr(r, "payload", None) for r in caplog.records], default=str)
    assert len([r for r in caplog.records if r.name == "finagent.llm_calls"]) == len(session.rows)


def test_a_key_echoed_in_the_providers_own_words_is_masked_everywhere(
    llm_server: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    # given a provider quoting the key it was sent ("Incorrect API key provided: <key>"): no
    # "api_key=" or "Bearer" around it for the pattern redaction to find; the primary answers
    # 500 (retried until num_retries is spent), the fallback 401
    echo = KeyEcho(llm_server, status_by_model={"primary": 500, "backup": 401})
    llm_server.responder = echo
    session = _session(llm_server)

    with caplog.at_level(logging.INFO), pytest.raises(LLMError) as info:
        _complete(session)

    assert echo.keys == [SECRET] * 3  # the key went out and came back three times
    assert SECRET not in str(info.value) and SECRET not in " ".join(info.value.errors)
    assert "Incorrect API key provided: ***" in str(info.value)
    assert [r["status"] for r in session.rows] == ["error"] * 3
    assert SECRET not in json.dumps(session.rows, default=str)
    logged = [(r.getMessage(), getattr(r, "payload", None), r.exc_text) for r in caplog.records]
    assert SECRET not in json.dumps(logged, default=str)


def test_a_model_repeating_the_key_in_its_answer_is_masked(llm_server: ScriptedLLM) -> None:
    llm_server.script(
        "primary", [chat(f"The key in the tool output was {SECRET}.", tool_calls=[("calc", {"x": SECRET})])]
    )
    session = _session(llm_server)
    completion = _complete(session)
    assert completion.content == "The key in the tool output was ***."
    assert json.loads(completion.tool_calls[0].arguments) == {"x": "***"}
    assert SECRET not in json.dumps(session.rows, default=str)


def test_config_from_settings_roles_overrides_and_no_model() -> None:
    assert llm_config(settings=Settings(_env_file=None)) is None  # type: ignore[call-arg]
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        llm_model="openai/a",
        llm_model_synthesis="openai/b",
        llm_fallbacks="openai/c, openai/a",
        llm_timeout=4,  # three models must fit a stage's LLM time budget (settings validator)
        llm_api_key=SECRET,
    )
    config = llm_config(settings=settings)
    assert config is not None
    assert config.model_for(Role.TECHNICAL) == "openai/a" and config.model_for(Role.SYNTHESIS) == "openai/b"
    assert config.chain_for(Role.SYNTHESIS) == ["openai/b", "openai/c", "openai/a"]
    assert SECRET not in repr(settings) and SECRET not in json.dumps(config.public())
    assert llm_config(settings=settings, override="openai/z").chain_for(Role.SYNTHESIS)[0] == "openai/z"  # type: ignore[union-attr]


class _Answer(BaseModel):
    ticker: str
    score: int


def test_a_json_schema_is_sent_and_a_server_refusing_it_gets_json_mode(llm_server: ScriptedLLM) -> None:
    llm_server.script("primary", [chat('{"ticker": "A", "score": 1}')])
    session = _session(llm_server, models={Role.TECHNICAL: "openai/primary"}, fallbacks=())
    run_sync(
        session.complete(agent="technical", role=Role.TECHNICAL, messages=MESSAGES, response_schema=_Answer)
    )
    sent = llm_server.requests[0]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["schema"]["required"] == ["ticker", "score"]

    other = _session(llm_server, models={Role.TECHNICAL: "openai/strict-less"}, fallbacks=())
    llm_server.script(
        "strict-less",
        [error(400, "response_format json_schema is not supported"), chat("{}"), chat("{}")],
    )
    for _ in range(2):
        run_sync(
            other.complete(agent="technical", role=Role.TECHNICAL, messages=MESSAGES, response_schema=_Answer)
        )
    formats = [r.get("response_format", {}).get("type") for r in llm_server.requests[1:]]
    assert formats == ["json_schema", "json_object", "json_object"]  # refused once, then remembered
    assert [r["status"] for r in other.rows] == ["error", "success", "success"]


def test_usage_counts_failed_attempts_and_calls_and_leaves_cost_unknown(llm_server: ScriptedLLM) -> None:
    llm_server.script("primary", [error(500)] * 2)
    llm_server.script("backup", [error(500)] * 2)
    session = _session(llm_server)
    with pytest.raises(LLMError):
        _complete(session)
    usage = session.usage()
    assert usage == {
        "calls": 0,
        "failed_calls": 1,
        "attempts": 4,
        "failed_attempts": 4,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cost_usd": None,  # four failed attempts: not "$0"
    }
