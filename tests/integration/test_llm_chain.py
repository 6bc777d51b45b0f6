"""The LLM agents through a real worker process (prefork) on Redis + Postgres, with the scripted
OpenAI-compatible server as the model: llm_calls rows, grounding and the correction round."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from db import repo
from db.engine import get_engine
from tests.integration.conftest import Service
from tests.llm.responders import INVENTED, AgentPlayer
from tests.llm.server import ScriptedLLM


@pytest.fixture
def llm_server() -> Iterator[ScriptedLLM]:
    """The scripted model server (the worker subprocess reaches it over 127.0.0.1)."""
    server = ScriptedLLM().start()
    yield server
    server.stop()


def test_llm_chain_on_a_real_worker_writes_llm_calls_and_corrects_grounding(
    service: Service, start_worker, llm_server: ScriptedLLM
) -> None:
    llm_server.responder = AgentPlayer(invent_number=True)
    start_worker(
        FINAGENT_LLM_MODEL="openai/scripted",
        FINAGENT_LLM_API_BASE=llm_server.url,
        FINAGENT_LLM_API_KEY="sk-integration-secret",
    )

    out = service.analyze_json("AAPL", "--as-of", "2012-06-29")

    assert out["status"] == "done" and out["author"]["kind"] == "llm"
    assert out["grounding"]["unverified"] == []
    assert out["grounding"]["correction"]["numbers_before"] == 1
    assert out["grounding"]["correction"]["numbers_after"] == 0
    engine = get_engine(service.env["FINAGENT_DATABASE_URL"])
    rows = repo.get_llm_calls(engine=engine, analysis_id=out["analysis_id"])
    # the fundamental analyst has a source with no configuration (the earnings calendar); the
    # scripted model does not play it, so its two calls end in the deterministic view
    agents = [r["agent"] for r in rows]
    assert sorted(agents[:4]) == ["fundamental", "fundamental.repair", "technical", "technical"]
    assert agents[4:] == ["synthesis", "grounding_correction"]
    assert [r["stage"] for r in rows] == ["analysis"] * 4 + ["recommendation", "review"]
    assert all(r["celery_task_id"] and r["status"] == "success" and r["cost_usd"] is None for r in rows)
    assert out["llm_calls"] == 6 and out["tokens"]["total"] == sum(
        r["prompt_tokens"] + r["completion_tokens"] for r in rows
    )
    assert INVENTED not in str(out["rationale"])
    assert "sk-integration-secret" not in str(rows)
    tools = {c["tool"] for c in repo.get_tool_calls(engine=engine, analysis_id=out["analysis_id"])}
    assert "calculator" in tools  # the technical agent's tool call went through the registry
