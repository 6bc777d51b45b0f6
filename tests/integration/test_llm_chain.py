"""The LLM agents through a real worker process (prefork) on Redis + Postgres, with the scripted
OpenAI-compatible server as the model: llm_calls rows, grounding and the correction round."""

from __future__ import annotations

from agents.analysts.versions import prompt_version
from db import repo
from db.engine import get_engine
from tests.integration.conftest import Service
from tests.llm.responders import INVENTED, AgentPlayer
from tests.llm.server import ScriptedLLM


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
    assert out["prompt_version"] == prompt_version()  # the LLM synthesis decided: the prompts' version
    assert out["grounding"]["unverified"] == [] and "dropped" not in out["grounding"]
    assert out["grounding"]["corrections"] == {"synthesis": "fixed"}  # before it was passed on
    engine = get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    rows = repo.get_llm_calls(engine=engine, analysis_id=out["analysis_id"])
    # the analysts (technical: tool call + answer; fundamental: the earnings calendar is its
    # source) run concurrently, then the synthesis and its one correction round
    agents = [r["agent"] for r in rows]
    assert sorted(agents[:3]) == ["fundamental", "technical", "technical"]
    assert agents[3:] == ["synthesis", "synthesis.correction"]
    assert [r["stage"] for r in rows] == ["analysis"] * 3 + ["recommendation"] * 2
    assert all(r["celery_task_id"] and r["status"] == "success" and r["cost_usd"] is None for r in rows)
    assert out["llm_calls"] == len(rows) == 5 and out["tokens"]["total"] == sum(
        r["prompt_tokens"] + r["completion_tokens"] for r in rows
    )
    assert INVENTED not in str(out["rationale"])
    assert "sk-integration-secret" not in str(rows)
    tools = {c["tool"] for c in repo.get_tool_calls(engine=engine, analysis_id=out["analysis_id"])}
    assert "calculator" in tools  # the technical agent's tool call went through the registry


def test_a_slow_model_ends_in_the_deterministic_fallback_not_a_failed_stage(
    service: Service, start_worker, llm_server: ScriptedLLM
) -> None:
    # soft limit 30 s - reserve 10 s = 20 s of LLM time per stage; one answer's worst case is
    # 2 calls x 1 attempt x 9 s = 18 s, so the worker accepts these settings. The technical
    # analyst's model takes 7 s per reply (within the 9 s timeout) and keeps asking for tools:
    # after at most two rounds less than 7 s is left, so a call is cut at the deadline, long
    # before the soft limit.
    llm_server.responder = AgentPlayer(technical_delay=7.0, tool_rounds=99)
    start_worker(
        FINAGENT_LLM_MODEL="openai/scripted",
        FINAGENT_LLM_API_BASE=llm_server.url,
        FINAGENT_DURABILITY_TASK_SOFT_TIME_LIMIT="30",
        FINAGENT_DURABILITY_TASK_TIME_LIMIT="45",
        FINAGENT_LLM_TIME_RESERVE="10",
        FINAGENT_LLM_TIMEOUT="9",
        FINAGENT_LLM_NUM_RETRIES="0",
    )

    out = service.analyze_json("AAPL", "--as-of", "2012-06-29")

    assert out["status"] == "done" and out["author"] == {"kind": "deterministic"}
    assert out["analysts"]["technical"]["source"] == "deterministic"
    assert out["analysts"]["synthesis"]["source"] == "skipped"
    assert "time budget ran out in the analysis stage" in out["analysts"]["synthesis"]["error"]
    codes = [(e["stage"], e["code"]) for e in out["errors"]]
    # one line per analyst the budget cut or skipped (technical, and the fundamental analyst
    # when it had not answered yet), all in the analysis stage
    assert codes and set(codes) == {("analysis", "LLM_TIME_BUDGET_EXHAUSTED")}
    engine = get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    rows = repo.get_llm_calls(engine=engine, analysis_id=out["analysis_id"])
    # The machine's speed decides how many 7 s replies fit in the budget (litellm's first import
    # is inside it) and whether a call was under way when it ran out: then that attempt is cut
    # and is the last row, an error; when the budget ran out between calls, no attempt started
    # and no error row exists. Either way: every reply that came back is a success row, an
    # error can only be the cut last attempt, and the synthesis never called its model.
    statuses = [r["status"] for r in rows]
    assert set(statuses[:-1]) <= {"success"} and set(statuses[-1:]) <= {"success", "error"}, statuses
    assert "synthesis" not in {r["agent"] for r in rows}
    report = service.cli("show", out["analysis_id"]).stdout
    # "LLM time budget ran out during technical's call" when a call was cut, "LLM time budget:
    # 0.1 s left of this stage's budget" when the next call could not start: speed decides
    assert "LLM_TIME_BUDGET_EXHAUSTED: technical: LLM time budget" in report, report
    assert "the deterministic result was used" in report and "SoftTimeLimitExceeded" not in report
