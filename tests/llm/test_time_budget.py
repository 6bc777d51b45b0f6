"""Bounded LLM time: the settings refuse a configuration whose worst LLM answer cannot fit a
stage's soft time limit, a session never starts or runs an attempt past its deadline, and the
analysts skip the LLM once the time is spent. Timings are never asserted: the server's delay is
far longer than every budget here, so only the outcome tells whether the deadline held."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pytest
from pydantic import ValidationError

from agents.analysts.llm_agents import run_analysts
from agents.data.market.embedded import EmbeddedProvider
from agents.llm.config import LLMConfig, Role
from agents.llm.runner import run_sync
from agents.llm.session import LLMSession, TimeBudgetExhaustedError
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.conftest import REPO_ROOT
from tests.llm.server import ScriptedLLM, chat

FINAGENT = str(Path(sys.executable).with_name("finagent"))
MESSAGES = [{"role": "user", "content": "hello"}]


def _settings(**kw: object) -> Settings:
    """Settings with a model configured (the arithmetic is checked only then)."""
    kw.setdefault("llm_model", "openai/scripted")
    return Settings(_env_file=None, **kw)  # type: ignore[call-arg]


def test_the_defaults_fit_and_a_slow_configuration_is_refused_with_the_knobs_named() -> None:
    settings = _settings()
    # 2 calls x 1 model x (3 attempts x 15 s + backoff 1 s + 2 s) = 96 s <= 120 - 20 = 100 s
    assert (settings.llm.worst_answer_seconds, settings.llm_stage_time_budget) == (96.0, 100.0)
    with pytest.raises(ValidationError) as info:
        _settings(llm_timeout=60)  # 3 attempts x 60 s cannot fit
    message = str(info.value)
    assert "366 s" in message and "100 s" in message  # 2 x (3 x 60 + 3)
    for knob in (
        "FINAGENT_LLM_TIMEOUT",
        "FINAGENT_LLM_NUM_RETRIES",
        "FINAGENT_DURABILITY_TASK_SOFT_TIME_LIMIT",
    ):
        assert knob in message
    with pytest.raises(ValidationError, match="2 model"):  # a fallback doubles the worst case
        _settings(llm_fallbacks="openai/backup")
    assert _settings(llm_fallbacks="openai/backup", llm_timeout=7).llm.worst_answer_seconds == 96.0


def test_without_a_model_a_short_soft_limit_is_accepted() -> None:
    # the deterministic analysts need no LLM time; a --llm analysis is bounded by its deadline
    settings = _settings(llm_model=None, durability_task_soft_time_limit=8, durability_task_time_limit=20)
    assert settings.llm_stage_time_budget < 0
    with pytest.raises(ValidationError, match="LLM time arithmetic"):
        _settings(durability_task_soft_time_limit=8, durability_task_time_limit=20)


def test_the_worker_refuses_to_start_with_a_clear_message(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        FINAGENT_SERVICE_STATE_DIR=str(tmp_path),
        FINAGENT_SERVICE_BROKER_URL="redis://127.0.0.1:6379/15",  # never reached: refused before
        FINAGENT_LLM_TIMEOUT="60",
        FINAGENT_LLM_MODEL="openai/slow",
    )
    proc = subprocess.run(
        [FINAGENT, "worker"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: refusing to start, invalid settings: LLM time arithmetic")
    assert "Traceback" not in proc.stderr


def _session(server: ScriptedLLM, *, deadline_in: float, **kw: object) -> LLMSession:
    config = LLMConfig(
        models={Role.TECHNICAL: "openai/slow"},
        api_base=server.url,
        api_key="k",
        retry_backoff=0.01,
        **kw,  # type: ignore[arg-type]
    )
    return LLMSession(
        config=config, analysis_id="a-1", stage="analysis", deadline=time.monotonic() + deadline_in
    )


def test_an_attempt_is_cut_at_the_deadline_and_nothing_is_retried_after_it(llm_server: ScriptedLLM) -> None:
    import litellm  # noqa: F401  # its first import (~4 s) would eat much of the budget below

    reply = chat("too late")
    reply.delay = 60.0  # far beyond the budget and the per-request timeout below
    llm_server.script("slow", [reply, chat("a retry would get this")])
    # 10 s: the attempt must start (it needs MIN_ATTEMPT_S left) however slow a loaded machine
    # is to get there; the reply takes 60 s, so the deadline is what ends it
    session = _session(llm_server, deadline_in=10.0, timeout=30.0, num_retries=2)

    with pytest.raises(TimeBudgetExhaustedError, match="time budget ran out"):
        run_sync(session.complete(agent="technical", role=Role.TECHNICAL, messages=MESSAGES))

    assert llm_server.models_called() == ["slow"]  # the retry was not sent
    assert [r["status"] for r in session.rows] == ["error"] and session.exhausted


def test_no_attempt_starts_without_time_left(llm_server: ScriptedLLM) -> None:
    session = _session(llm_server, deadline_in=0.5)

    with pytest.raises(TimeBudgetExhaustedError):
        run_sync(session.complete(agent="technical", role=Role.TECHNICAL, messages=MESSAGES))

    assert llm_server.requests == [] and session.rows == []


def test_analysts_run_deterministically_once_the_time_is_spent(llm_server: ScriptedLLM) -> None:
    session = _session(llm_server, deadline_in=-1.0)
    ctx = ToolContext(settings=_settings(), as_of=date(2012, 6, 29), provider=EmbeddedProvider())

    outcome = run_analysts(
        ctx=ctx,
        session=session,
        symbol="AAPL",
        as_of=date(2012, 6, 29),
        user_query="AAPL",
        stock_data={"quote": {"current_price": 584.0}, "quote_ref": "q1", "history_ref": "h1"},
        analysis={"technical": {"close": 584.0, "indicators": {"rsi_14": 55.0}}, "technical_ref": "t1"},
    )

    technical = outcome.value["technical"]
    assert (
        technical["source"] == "skipped" and technical["error"] == "the LLM time budget of this stage ran out"
    )
    assert technical["result"]["trend_direction"] == "sideways"  # the deterministic view
    assert [e.code for e in outcome.errors] == ["LLM_TIME_BUDGET_EXHAUSTED"]
    assert "the deterministic result was used" in outcome.errors[0].message
    assert llm_server.requests == []
