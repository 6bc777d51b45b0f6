"""The per-night (watchlist run) LLM budget: a run that spends it goes on deterministically and
its digest says so. Embedded mode (in-process worker, SQLite), the CLI as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agents.llm.config import LLMConfig, Role
from agents.llm.runner import run_sync
from agents.llm.session import LLMSession, RunBudget, RunBudgetExhaustedError
from tests.conftest import REPO_ROOT
from tests.llm.responders import AgentPlayer
from tests.llm.server import Reply, ScriptedLLM, chat

FINAGENT = str(Path(sys.executable).with_name("finagent"))
#: Usage each scripted reply reports: two calls pass a 30,000-token run budget, the third not.
TOKENS_PER_CALL = 20_000


def test_the_session_refuses_a_call_past_the_run_budget(llm_server: ScriptedLLM) -> None:
    llm_server.script("m", [chat("ok", prompt_tokens=900, completion_tokens=100)])
    config = LLMConfig(models={Role.TECHNICAL: "openai/m"}, api_base=llm_server.url, max_tokens=100)
    run = RunBudget(run_id="w:2012-06-29", spent_tokens=0, spent_usd=0.0, budget_tokens=1050)
    session = LLMSession(config=config, analysis_id="a", run_budget=run)
    messages = [{"role": "user", "content": "hi"}]

    run_sync(session.complete(agent="technical", role=Role.TECHNICAL, messages=messages))
    with pytest.raises(RunBudgetExhaustedError, match="watchlist run budget: 1000 tokens spent by the run"):
        run_sync(session.complete(agent="technical", role=Role.TECHNICAL, messages=messages))

    assert len(llm_server.requests) == 1 and session.exhausted


def _inflated(player: AgentPlayer) -> Any:
    def respond(body: dict[str, Any]) -> Reply:
        reply = player(body)
        reply.body["usage"] = {
            "prompt_tokens": TOKENS_PER_CALL - 100,
            "completion_tokens": 100,
            "total_tokens": TOKENS_PER_CALL,
        }
        return reply

    return respond


def test_a_run_that_spends_its_budget_continues_deterministically(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    llm_server.responder = _inflated(AgentPlayer())
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        FINAGENT_SERVICE_STATE_DIR=str(tmp_path / "state"),
        FINAGENT_LLM_MODEL="openai/scripted",
        FINAGENT_LLM_API_BASE=llm_server.url,
        FINAGENT_LLM_RUN_BUDGET_TOKENS="30000",
    )

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [FINAGENT, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
        )

    assert cli("watchlist", "add", "nightly", "AAPL", "MSFT").returncode == 0
    proc = cli("watchlist", "run", "nightly", "--date", "2012-06-29", "--format", "json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    digest = json.loads(proc.stdout)

    assert digest["counts"] == {  # both done, none refused
        "tickers": 2,
        "ok": 2,
        "failed": 0,
        "changed": 0,
        "refused": 0,
        "refused_by_quota": 0,
    }
    llm = digest["llm"]
    assert llm["budget_tokens"] == 30000 and llm["budget_hit"] is True
    # the first analysis made two calls (2 x 20,000 tokens) before the budget stopped its third;
    # every later call of the run was refused before it was sent
    assert llm["calls"] == 2 and llm["prompt_tokens"] + llm["completion_tokens"] == 2 * TOKENS_PER_CALL
    assert len(llm_server.requests) == 2
    assert sorted(llm["deterministic_after_budget"]) == ["AAPL", "MSFT"]

    markdown = cli("watchlist", "run", "nightly", "--date", "2012-06-29").stdout
    assert "The run's LLM budget was spent: the analysts of" in markdown
    assert "ran deterministically from then on" in markdown
