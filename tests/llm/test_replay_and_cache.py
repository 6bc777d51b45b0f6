"""LLM mode (embedded, the scripted OpenAI-compatible server): ``finagent replay`` serves the
recorded answers with the server stopped, and the opt-in response cache answers a repeated
analysis without a single request. The server counts every request it receives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from db import repo
from db.engine import get_engine
from tests.conftest import REPO_ROOT
from tests.llm.responders import AgentPlayer
from tests.llm.server import ScriptedLLM

FINAGENT = str(Path(sys.executable).with_name("finagent"))


def _env(tmp: Path, server_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        FINAGENT_SERVICE_STATE_DIR=str(tmp / "state"),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        FINAGENT_LLM_MODEL="openai/scripted",
        FINAGENT_LLM_API_BASE=server_url,
        FINAGENT_LLM_API_KEY="sk-x1",
        FINAGENT_LLM_RETRY_BACKOFF="0",
    )
    env.update(extra)
    return env


def _finagent(tmp: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FINAGENT, *args], env=env, cwd=tmp, capture_output=True, text=True, timeout=240, check=False
    )


def _analyze(tmp: Path, env: dict[str, str]) -> dict[str, Any]:
    proc = _finagent(tmp, env, "analyze", "AAPL", "--as-of", "2012-06-29", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def _llm_rows(tmp: Path, analysis_id: str) -> list[dict[str, Any]]:
    engine = get_engine(f"sqlite:///{tmp / 'state' / 'finagent.sqlite3'}")
    return repo.get_llm_calls(engine=engine, analysis_id=analysis_id)


def test_an_llm_analysis_replays_byte_identical_with_the_server_stopped(tmp_path: Path) -> None:
    # given an LLM analysis whose synthesis invented a number and was corrected (4 calls)
    server = ScriptedLLM().start()
    server.responder = AgentPlayer(invent_number=True)
    env = _env(tmp_path, server.url)
    out = _analyze(tmp_path, env)
    assert out["author"]["kind"] == "llm" and out["grounding"]["corrections"] == {"synthesis": "fixed"}
    requests = len(server.requests)
    assert requests == len(_llm_rows(tmp_path, out["analysis_id"])) == 5
    server.stop()

    # when it is replayed with the model server gone and no data provider
    proc = _finagent(
        tmp_path,
        {**env, "FINAGENT_DATA_PROVIDER": "tests.support.no_such_module:x"},
        "replay",
        out["analysis_id"],
    )

    # then the report is byte-identical and no request was made
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.startswith("identical sha256=")
    assert len(server.requests) == requests


def test_a_changed_recorded_answer_makes_the_replay_differ(tmp_path: Path) -> None:
    server = ScriptedLLM().start()
    server.responder = AgentPlayer()
    env = _env(tmp_path, server.url)
    out = _analyze(tmp_path, env)
    server.stop()
    synthesis = next(r for r in _llm_rows(tmp_path, out["analysis_id"]) if r["agent"] == "synthesis")
    content = synthesis["completion"]["content"]
    assert '"confidence": 0.4' in content  # AgentPlayer's synthesis answer (a fenced JSON object)
    completion = {
        **synthesis["completion"],
        "content": content.replace('"confidence": 0.4', '"confidence": 0.123'),
    }
    engine = get_engine(f"sqlite:///{tmp_path / 'state' / 'finagent.sqlite3'}")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE llm_calls SET completion = ? WHERE id = ?", (json.dumps(completion), synthesis["id"])
        )

    proc = _finagent(tmp_path, env, "replay", out["analysis_id"])

    assert proc.returncode == 1
    # the raw confidence sits under the report's "details" (not the top level), so only its
    # line's content is fixed, not its indentation
    changed = [
        line for line in proc.stdout.splitlines() if line.startswith("+") and not line.startswith("+++")
    ]
    assert any('"confidence": 0.123' in line for line in changed), proc.stdout


def test_the_response_cache_answers_a_repeated_analysis_without_a_request(tmp_path: Path) -> None:
    # given the cache on and one LLM analysis made through the server
    server = ScriptedLLM().start()
    server.responder = AgentPlayer()
    env = _env(tmp_path, server.url, FINAGENT_LLM_CACHE="1")
    first = _analyze(tmp_path, env)
    live = len(server.requests)
    assert live == 4  # technical (tool call + answer), fundamental, synthesis

    # when the same analysis runs again (a new analysis id, so new tool_call_ids in the prompts)
    second = _analyze(tmp_path, env)
    server.stop()

    # then the server saw no new request; every call is a cache hit costing nothing
    assert len(server.requests) == live
    rows = _llm_rows(tmp_path, second["analysis_id"])
    assert len(rows) == live
    assert all(
        r["cached"] and r["cost_usd"] == 0 and r["prompt_tokens"] == r["completion_tokens"] == 0 for r in rows
    )
    assert not any(r["cached"] for r in _llm_rows(tmp_path, first["analysis_id"]))
    assert second["tokens"]["total"] == 0
    # the answers were translated to the second analysis's own citations, so it is as grounded
    assert second["signal"] == first["signal"] and second["grounding"]["unverified"] == []
    assert set(second["source_refs"]).isdisjoint(first["source_refs"])
    # and the cached analysis replays like any other
    proc = _finagent(tmp_path, env, "replay", second["analysis_id"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_without_the_setting_every_run_asks_the_model(tmp_path: Path) -> None:
    server = ScriptedLLM().start()
    server.responder = AgentPlayer()
    env = _env(tmp_path, server.url)
    _analyze(tmp_path, env)
    _analyze(tmp_path, env)
    server.stop()
    assert len(server.requests) == 8  # two analyses of four calls each
