"""``FINAGENT_LLM_PROFILE=local-cpu``: the preset nests, explicit settings override it and are
checked against it, one request at a time per deployment, no retry of a timed-out request
(LiteLLM against the scripted OpenAI-compatible server over real HTTP)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from pydantic import ValidationError

from agents.llm.config import LLMConfig, Role, llm_config
from agents.llm.runner import run_sync
from agents.llm.session import LLMError, LLMSession
from core.settings import Settings
from tests.llm.server import Reply, ScriptedLLM, chat

MESSAGES = [{"role": "user", "content": "hello"}]


def test_the_profile_sets_nested_limits_and_explicit_settings_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINAGENT_LLM_PROFILE", "local-cpu")
    monkeypatch.setenv("FINAGENT_LLM_MODEL", "openai/local")
    settings = Settings(_env_file=None)
    d, llm = settings.durability, settings.llm
    assert (llm.timeout, llm.num_retries, llm.retry_timeouts) == (180.0, 0, False)
    assert llm.deployment_concurrency == 1
    # hand-checked nesting: 2 x 180 = 360 <= 420 - 30; 420 < 480; 480 + 120 < 900; 480 < 600
    assert (d.task_soft_time_limit, d.task_time_limit, d.visibility_timeout, d.lease_seconds) == (
        420,
        480,
        900,
        600,
    )
    assert settings.llm_stage_time_budget == 390.0 and llm.worst_answer_seconds == 360.0

    monkeypatch.setenv("FINAGENT_LLM_TIMEOUT", "120")  # explicit: wins over the profile
    assert Settings(_env_file=None).llm.timeout == 120.0
    assert Settings(_env_file=None, llm_deployment_concurrency=2).llm.deployment_concurrency == 2


def test_an_explicit_setting_that_breaks_the_nesting_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FINAGENT_LLM_PROFILE", "local-cpu")
    monkeypatch.setenv("FINAGENT_DURABILITY_LEASE_SECONDS", "300")  # below the profile's hard limit 480
    with pytest.raises(ValidationError) as info:
        Settings(_env_file=None)
    text = str(info.value)
    assert "FINAGENT_LLM_PROFILE=local-cpu" in text
    assert (
        "FINAGENT_DURABILITY_TASK_TIME_LIMIT=480 (profile), FINAGENT_DURABILITY_LEASE_SECONDS=300 (explicit)"
        in text
    )

    monkeypatch.delenv("FINAGENT_DURABILITY_LEASE_SECONDS")
    monkeypatch.setenv("FINAGENT_LLM_TIMEOUT", "200")  # 2 x 200 = 400 > 420 - 30
    with pytest.raises(ValidationError, match=r"FINAGENT_LLM_TIMEOUT=200 \(explicit\)"):
        Settings(_env_file=None)


def test_one_request_at_a_time_per_deployment(llm_server: ScriptedLLM) -> None:
    arrivals: list[float] = []

    def slow(body: dict[str, Any]) -> Reply:
        arrivals.append(time.monotonic())
        reply = chat("ok")
        reply.delay = 1.0
        return reply

    llm_server.responder = slow
    config = LLMConfig(
        models={Role.TECHNICAL: "openai/cpu"}, api_base=llm_server.url, deployment_concurrency=1, timeout=10
    )

    async def both() -> None:
        # two sessions (two analyses) asking the same deployment at once
        sessions = [LLMSession(config=config, analysis_id=f"a-{i}", stage="analysis") for i in range(2)]
        await asyncio.gather(
            *(s.complete(agent="technical", role=Role.TECHNICAL, messages=MESSAGES) for s in sessions)
        )

    run_sync(both())
    assert len(arrivals) == 2
    assert arrivals[1] - arrivals[0] >= 0.95  # the second request waited for the first answer


def test_a_timed_out_request_is_not_retried_under_the_profile(llm_server: ScriptedLLM) -> None:
    def too_slow(body: dict[str, Any]) -> Reply:
        reply = chat("late")
        reply.delay = 3.0
        return reply

    llm_server.responder = too_slow
    settings = Settings(
        _env_file=None,
        llm_profile="local-cpu",
        llm_model="openai/slow-cpu",
        llm_api_base=llm_server.url,
        llm_timeout=1,
        llm_num_retries=2,  # explicit retries: still none for a timeout under the profile
    )
    config = llm_config(settings=settings)
    assert config is not None and config.retry_timeouts is False
    session = LLMSession(config=config, analysis_id="a-t", stage="analysis")
    with pytest.raises(LLMError):
        run_sync(session.complete(agent="technical", role=Role.TECHNICAL, messages=MESSAGES))
    assert llm_server.models_called() == ["slow-cpu"]
    assert len(session.rows) == 1 and "Timeout" in session.rows[0]["error"]
